//! An in-process transport: a [`Client`](super::Client) calling a [`Server`] directly, through
//! the same encode, dispatch and decode steps as a network transport (for tests, and for a
//! program that calls its own services).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::buffer::{BufferSource, HeapBuffers};
use super::client::{BoxFuture, Call, CallTransport, Reply};
use super::error::{Error, TransportError};
use super::header::encode_reply_header;
use super::observe::{CallStatus, ServerCall};
use super::server::{encode_reply, run_handler, Dispatch, Incoming, Server, TransportKind};
use crate::xdr::Encoder;
use tracing::Instrument;

/// Calls a [`Server`] in the same process.
#[derive(Debug, Clone)]
pub struct LocalTransport {
    server: Server,
    next_xid: Arc<AtomicU32>,
}

impl LocalTransport {
    /// A transport whose calls go to `server`.
    pub fn new(server: Server) -> LocalTransport {
        LocalTransport {
            server,
            next_xid: Arc::new(AtomicU32::new(1)),
        }
    }
}

impl CallTransport for LocalTransport {
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Reply, Error>> {
        Box::pin(async move {
            let xid = self.next_xid.fetch_add(1, Ordering::Relaxed);
            // In one process the caller's deadline can reach the handler; on the wire there
            // is no field for it.
            let deadline = call.options.timeout.map(|t| Instant::now() + t);
            let mut enc = Encoder::new();
            call.encode(xid, &mut enc).map_err(Error::Encode)?;
            let incoming = Incoming {
                message: enc.finish().into_bytes(),
                chunks: None,
                transport: TransportKind::Other,
                peer: None,
                buffers: Arc::new(HeapBuffers),
                backchannel: None,
                caller: None,
                deadline,
            };
            let mut enc = Encoder::new();
            let observed = ServerCall::start(TransportKind::Other, None, &incoming.message);
            let (encoded, status) = match self.server.dispatch(incoming) {
                Dispatch::Run { xid, future } => {
                    let result = match &observed {
                        Some(o) => run_handler(future).instrument(o.span().clone()).await,
                        None => run_handler(future).await,
                    };
                    (
                        encode_reply(&mut enc, xid, &result),
                        CallStatus::of_reply(&result),
                    )
                }
                Dispatch::Reply { xid, error } => (
                    encode_reply_header(&mut enc, xid, Err(error)),
                    CallStatus::of_reply_error(&error),
                ),
                other => {
                    self.server.served(observed, CallStatus::Dropped);
                    return Err(TransportError::Protocol(format!(
                        "the server did not answer: {other:?}"
                    ))
                    .into());
                }
            };
            self.server.served(observed, status);
            encoded.map_err(Error::Encode)?;
            Ok(Reply {
                message: enc.finish().into_bytes(),
                chunks: None,
            })
        })
    }

    fn buffers(&self) -> Arc<dyn BufferSource> {
        Arc::new(HeapBuffers)
    }

    fn kind(&self) -> TransportKind {
        TransportKind::Other
    }
}

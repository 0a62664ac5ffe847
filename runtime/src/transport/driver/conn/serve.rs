//! The responder's side of a connection: an incoming call routed through the server, its
//! handler polled once where the call arrived, and the reply encoded and sent.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use super::encoders::EncoderUse;
use super::undelivered::CallKey;
use super::Conn;
use crate::rdma::Connection;
use crate::rpc::{
    encode_reply, encode_reply_header, CatchPanic, Dispatch, HandlerResult, Incoming, TransportKind,
};
use crate::transport::core::{CallId, IncomingCall};
use crate::xdr::{Encoder, ThresholdPolicy};

/// Wakes nothing: a handler polled by the hook that waits is polled again in a task.
pub(super) struct NoWake;

impl std::task::Wake for NoWake {
    fn wake(self: Arc<Self>) {}
}

/// Routes one incoming call through the server. A handler is polled once right here, with
/// `cx`, in the completion task or the hook: one that is done at once (NULL, a lookup in
/// memory) is answered without a task switch; one that waits goes on in a task of its own.
pub(super) fn serve_call<C: Connection>(
    conn: &Arc<Conn<C>>,
    call: IncomingCall,
    cx: &mut std::task::Context<'_>,
) {
    // A configuration call goes to the connection's own answer (2004 mode); its program
    // number is the call's fourth word (RFC 5531: xid, msg_type, rpcvers, prog).
    let program = crate::transport::header::word(&call.message, 3);
    let server = match conn.configuration.get() {
        Some((number, answer)) if program == Some(*number) => Some(answer.clone()),
        _ => conn.server.clone(),
    };
    let Some(server) = server else {
        let mut st = conn.state.lock();
        st.core.discard_call(call.id);
        return conn.flush(&mut st);
    };
    let (id, write_chunks) = (call.id, call.write_chunks);
    // A call sent again because its reply did not fit is answered with the result kept for
    // it, without running its procedure again.
    let kept = {
        let mut undelivered = conn.undelivered.lock();
        (!undelivered.is_empty())
            .then(|| undelivered.take(CallKey::of(call.xid, &call.message), Instant::now()))
            .flatten()
    };
    if let (Some(result), Some(xid)) = (kept, crate::transport::header::word(&call.message, 0)) {
        tracing::debug!(xid, "a call sent again with more room: its kept result");
        let key = || CallKey::of(call.xid, &call.message);
        return conn.reply_keeping(id, &write_chunks, xid, result, key);
    }
    let message = call.message.clone();
    let transport_xid = call.xid;
    let backchannel = conn.backchannel.get().cloned();
    let dispatch = server.dispatch(Incoming {
        message: call.message,
        chunks: call.chunks,
        transport: TransportKind::Rdma,
        peer: Some(conn.peer),
        buffers: conn.buffers.clone(),
        backchannel,
    });
    match dispatch {
        Dispatch::Run { xid, future } => {
            let mut future = CatchPanic::new(future);
            match Pin::new(&mut future).poll(cx) {
                Poll::Ready(result) => {
                    let key = || CallKey::of(transport_xid, &message);
                    conn.reply_keeping(id, &write_chunks, xid, result, key)
                }
                Poll::Pending => {
                    let conn = conn.clone();
                    conn.runtime.clone().spawn(async move {
                        let result = future.await;
                        let key = || CallKey::of(transport_xid, &message);
                        conn.reply_keeping(id, &write_chunks, xid, result, key);
                    });
                }
            }
        }
        Dispatch::Reply { xid, error } => {
            conn.reply(id, &write_chunks, |enc| {
                encode_reply_header(enc, xid, Err(error))
            });
        }
        Dispatch::ChunkError { error, .. } => {
            tracing::debug!(%error, "the arguments' chunks disagree with the call: ERR_CHUNK");
            let mut st = conn.state.lock();
            st.core.reject_chunks(id);
            conn.flush(&mut st);
        }
        Dispatch::NotACall { .. } | Dispatch::Drop(_) => {
            let mut st = conn.state.lock();
            st.core.discard_call(id);
            // A connection shutting down may have been waiting for this call alone.
            conn.flush(&mut st);
        }
    }
}

impl<C: Connection> Conn<C> {
    /// Sends the reply carrying `result` to call `id` (RPC XID `xid`); a result that fits
    /// neither inline nor the call's chunks is kept for the call sent again with more room
    /// ([`Undelivered`](super::undelivered::Undelivered)), under the key `key` gives.
    fn reply_keeping(
        self: &Arc<Self>,
        id: CallId,
        write_chunks: &[u64],
        xid: u32,
        result: HandlerResult,
        key: impl FnOnce() -> CallKey,
    ) {
        let delivered = self.reply(id, write_chunks, |enc| encode_reply(enc, xid, &result));
        if !delivered && result.is_ok() {
            self.undelivered.lock().keep(key(), result, Instant::now());
        }
    }

    /// Encodes a reply with `encode` for call `id` and sends it: DDP-eligible results go to
    /// the call's Write chunks (seed 004 section 4.4.5 and seed 002 section 3.7: a result with
    /// a Write chunk provided for it moves there, whatever its size). False when it fit
    /// neither inline nor the chunks, and RDMA_ERROR went instead.
    fn reply(
        self: &Arc<Self>,
        id: CallId,
        write_chunks: &[u64],
        encode: impl FnOnce(&mut Encoder) -> crate::xdr::Result<()>,
    ) -> bool {
        let (read_read, pad_threshold) = if self.mode_2004 {
            let st = self.state.lock();
            (
                st.core.read_read_policy(id, write_chunks),
                st.core.pad_threshold(),
            )
        } else {
            (None, None)
        };
        // Without Write chunks (most replies) the connection's encoder serves.
        let kept = (write_chunks.is_empty() && !self.mode_2004).then_some(EncoderUse::Reply);
        // Read-Read (2004 mode): DDP-eligible results stay here, exposed in Read chunks.
        let mut enc = match (read_read, kept) {
            (Some(policy), _) => Box::new(Encoder::for_call(policy)),
            (None, Some(usage)) => self.encoder(usage),
            (None, None) => Box::new(Encoder::for_reply(
                ThresholdPolicy::default(),
                write_chunks.to_vec(),
            )),
        };
        if let Some(thresh) = pad_threshold {
            enc.record_pad_points(thresh);
        }
        let encoded = encode(&mut enc);
        let (message, moved) = self.finish_encoder(enc, kept);
        let mut st = self.state.lock();
        let delivered = match encoded {
            Ok(()) => st
                .core
                .send_reply(id, message, moved, Instant::now(), &mut self.pool()),
            Err(error) => {
                tracing::debug!(%error, "the reply does not fit the call's chunks");
                st.core.reject_reply(id, &error);
                false
            }
        };
        self.flush(&mut st);
        delivered
    }
}

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
use crate::rpc::observe::{CallStatus, Moved, ServerCall};
use crate::rpc::{
    encode_reply, encode_reply_header, BoxFuture, CallerConnection, CatchPanic, Dispatch,
    HandlerResult, Incoming, Server, TransportKind,
};
use crate::transport::core::{CallId, IncomingCall, Stats};
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
    let mut observed = ServerCall::start(TransportKind::Rdma, Some(conn.peer), &call.message);
    if let Some(o) = &mut observed {
        arrived(conn, o, &call);
    }
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
        let answer = Answer {
            server: &server,
            observed,
        };
        return conn.reply_keeping(id, &write_chunks, xid, result, key, answer);
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
        caller: Some(conn.clone()),
        deadline: None,
    });
    match dispatch {
        Dispatch::Run { xid, future } => {
            let mut future = CatchPanic::new(future);
            let polled = match &observed {
                Some(o) => o.span().in_scope(|| Pin::new(&mut future).poll(cx)),
                None => Pin::new(&mut future).poll(cx),
            };
            match polled {
                Poll::Ready(result) => {
                    let key = || CallKey::of(transport_xid, &message);
                    let answer = Answer {
                        server: &server,
                        observed,
                    };
                    conn.reply_keeping(id, &write_chunks, xid, result, key, answer)
                }
                Poll::Pending => {
                    let conn = conn.clone();
                    let runtime = conn.runtime.clone();
                    let span = observed.as_ref().map(|o| o.span().clone());
                    let answer = async move {
                        // A caller whose connection closed waits for nothing: its handler is
                        // dropped (a graceful shutdown closes only once handlers answered).
                        let result = tokio::select! {
                            result = future => result,
                            () = conn.closed() => {
                                tracing::debug!(xid, "the caller's connection closed: its handler is dropped");
                                return;
                            }
                        };
                        let key = || CallKey::of(transport_xid, &message);
                        let answer = Answer {
                            server: &server,
                            observed,
                        };
                        conn.reply_keeping(id, &write_chunks, xid, result, key, answer);
                    };
                    match span {
                        Some(span) => runtime.spawn(tracing::Instrument::instrument(answer, span)),
                        None => runtime.spawn(answer),
                    };
                }
            }
        }
        Dispatch::Reply { xid, error } => {
            let answer = Answer {
                server: &server,
                observed,
            };
            let status = CallStatus::of_reply_error(&error);
            conn.reply(id, &write_chunks, status, answer, |enc| {
                encode_reply_header(enc, xid, Err(error))
            });
        }
        Dispatch::ChunkError { error, .. } => {
            tracing::debug!(%error, "the arguments' chunks disagree with the call: ERR_CHUNK");
            let mut st = conn.state.lock();
            st.core.reject_chunks(id);
            conn.flush(&mut st);
            drop(st);
            server.served(observed, CallStatus::ChunkError);
        }
        Dispatch::NotACall { .. } | Dispatch::Drop(_) => {
            let mut st = conn.state.lock();
            st.core.discard_call(id);
            // A connection shutting down may have been waiting for this call alone.
            conn.flush(&mut st);
            drop(st);
            server.served(observed, CallStatus::Dropped);
        }
    }
}

/// Records how `call` arrived in its span: DDP-eligible arguments in Read chunks, or the whole
/// call in a Position-Zero Read chunk (it came as RDMA_NOMSG, noted when it was received).
#[cold]
fn arrived<C: Connection>(conn: &Conn<C>, observed: &mut ServerCall, call: &IncomingCall) {
    let long = Conn::<C>::took_nomsg(&mut conn.state.lock(), call.xid);
    let read = call.chunks.as_ref().map_or(0, |c| c.read_len()) as u64;
    let message = call.message.len() as u64;
    match (long, read > 0) {
        (true, _) => observed.arrived(Moved::LongCall, message + read, 0),
        (false, true) => observed.arrived(Moved::ReadChunks, read, message),
        (false, false) => observed.arrived(Moved::Inline, 0, message),
    }
}

/// Who hears how a call ended: the server that counts it, and its span.
struct Answer<'a> {
    server: &'a Server,
    observed: Option<ServerCall>,
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
        answer: Answer<'_>,
    ) {
        let status = CallStatus::of_reply(&result);
        let delivered = self.reply(id, write_chunks, status, answer, |enc| {
            encode_reply(enc, xid, &result)
        });
        if !delivered && result.is_ok() {
            self.undelivered.lock().keep(key(), result, Instant::now());
        }
    }

    /// Encodes a reply with `encode` for call `id` and sends it: DDP-eligible results go to
    /// the call's Write chunks (seed 004 section 4.4.5 and seed 002 section 3.7: a result with
    /// a Write chunk provided for it moves there, whatever its size). False when it fit
    /// neither inline nor the chunks, and RDMA_ERROR went instead. The call is then counted
    /// with `status` (or ERR_CHUNK's), and its span ended.
    fn reply(
        self: &Arc<Self>,
        id: CallId,
        write_chunks: &[u64],
        status: CallStatus,
        mut answer: Answer<'_>,
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
        // For the span: the sizes, and the core's counters around the reply, which say how it
        // went out.
        let sizes = answer.observed.is_some().then(|| {
            let moved: usize = moved.iter().map(|m| m.data.len()).sum();
            (message.len() as u64, moved as u64)
        });
        let mut st = self.state.lock();
        let before = sizes.map(|_| st.core.stats());
        let delivered = match encoded {
            Ok(()) => st
                .core
                .send_reply(id, message, moved, Instant::now, &mut self.pool()),
            Err(error) => {
                tracing::debug!(%error, "the reply does not fit the call's chunks");
                st.core.reject_reply(id, &error);
                false
            }
        };
        if delivered {
            st.counts.replies += 1;
        }
        if let (Some(o), Some(before), Some((inline, moved))) =
            (answer.observed.as_mut(), before, sizes)
        {
            replied(o, &before, &st.core.stats(), inline, moved);
        }
        self.flush(&mut st);
        drop(st);
        let status = if delivered {
            status
        } else {
            CallStatus::ChunkError
        };
        answer.server.served(answer.observed, status);
        delivered
    }
}

/// Records how a reply went out, read from the core's counters `before` and `after` it was
/// sent: `inline` is the message's length, `moved` its DDP-eligible items' (in Write chunks).
#[cold]
fn replied(observed: &mut ServerCall, before: &Stats, after: &Stats, inline: u64, moved: u64) {
    let write = after.replies_write_chunks > before.replies_write_chunks;
    let long = after.replies_long > before.replies_long;
    match (write, long) {
        (false, false) => observed.replied(Moved::Inline, 0, inline),
        (true, false) => observed.replied(Moved::WriteChunks, moved, inline),
        (false, true) => observed.replied(Moved::ReplyChunk, inline, 0),
        (true, true) => observed.replied(Moved::WriteAndReplyChunks, moved + inline, 0),
    }
}

impl<C: Connection> CallerConnection for Conn<C> {
    fn is_closed(&self) -> bool {
        Conn::is_closed(self)
    }

    fn closed(&self) -> BoxFuture<'static, ()> {
        let mut signal = self.closed_signal.subscribe();
        Box::pin(async move {
            // The sender lives as long as the connection: this ends when the flag is raised,
            // or the connection is gone.
            let _ = signal.wait_for(|closed| *closed).await;
        })
    }
}

//! What a handler may know of its caller beyond the call: whether the connection the call
//! came on is still open, and the time by which the server wants the answer.
//!
//! The exception: a call the server's reply cache covers runs on to the end after its caller
//! went away, so that the retransmission on the client's next connection gets its reply
//! rather than running a half-done change again
//! ([`ReplyCacheConfig::max_orphans`](super::ReplyCacheConfig::max_orphans)).
//!
//! A transport hands the server the connection as a [`CallerConnection`]
//! ([`Incoming::caller`](super::Incoming::caller)); a handler sees it through
//! [`CallContext::caller_gone`](super::CallContext::caller_gone) and
//! [`CallContext::caller_closed`](super::CallContext::caller_closed). Both transports also
//! drop a running handler whose connection closed (its future is not polled again): a handler
//! holding state across awaits releases it through `Drop`. A server's call time limit
//! ([`ServerBuilder::call_timeout`](super::ServerBuilder::call_timeout)) is the handler's
//! [`CallContext::deadline`](super::CallContext::deadline): past it the handler is dropped
//! and the call answered SYSTEM_ERR.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use super::client::{BoxFuture, Client};
use super::error::ReplyError;
use super::server::{HandlerFuture, HandlerResult};

/// The connection a call came on, as a transport shows it to the call's handler.
pub trait CallerConnection: Send + Sync + 'static {
    /// True once the connection has closed: no reply can reach the caller any more.
    fn is_closed(&self) -> bool;

    /// Completes when the connection has closed.
    fn closed(&self) -> BoxFuture<'static, ()>;

    /// A client for calls in the backward direction on this connection, if the transport
    /// offers one (ONC RPC over TCP: RFC 5661 section 2.10.3.1); what
    /// [`CallContext::backchannel`](super::CallContext::backchannel) returns when the
    /// transport gave none in [`Incoming::backchannel`](super::Incoming::backchannel). Kept
    /// here, in the one `Arc` every call's context holds already, a transport offers it
    /// without another reference count per call. The default: none.
    fn backchannel(&self) -> Option<&Client> {
        None
    }
}

/// Runs `future` until `deadline`: past it the handler is dropped and the call answered
/// SYSTEM_ERR (RFC 5531 section 9: "system error", the server could not complete the call).
pub(super) fn with_deadline(future: HandlerFuture, deadline: Instant) -> HandlerFuture {
    Box::pin(Deadline {
        future,
        timer: Box::pin(tokio::time::sleep_until(deadline.into())),
    })
}

struct Deadline {
    future: HandlerFuture,
    timer: Pin<Box<tokio::time::Sleep>>,
}

impl Future for Deadline {
    type Output = HandlerResult;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<HandlerResult> {
        if let Poll::Ready(result) = self.future.as_mut().poll(cx) {
            return Poll::Ready(result);
        }
        match self.timer.as_mut().poll(cx) {
            Poll::Ready(()) => {
                tracing::debug!("a handler past the server's call time limit: SYSTEM_ERR");
                Poll::Ready(Err(ReplyError::SystemErr))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

//! Middleware for the server's handlers (feature `tower`): the step of a [`Server`] that runs
//! a call's handler is a `tower::Service<Request>` ([`Handlers`]), and
//! [`ServerBuilder::layer`] wraps it in any `tower::Layer` (timeout, concurrency limit, load
//! shedding, rate limit, tracing, your own) for every program and version the server hosts,
//! on every transport that serves it.
//!
//! # Where the layers sit
//!
//! A call reaches them decoded: the server has read its header, checked its credentials,
//! routed it to a program version and procedure, and decoded its arguments (calls it answers
//! itself, PROG_UNAVAIL to GARBAGE_ARGS, never reach the layers). A [`Request`] carries the
//! call's [`CallContext`] (XID, program, version, procedure, credentials, transport, peer)
//! and the handler, not yet run; the innermost service, [`Handlers`], runs it. The
//! arguments stay decoding-side because they borrow the message and, over RPC-over-RDMA, the
//! chunk data the transport pulled, which a layer could otherwise hold past the call.
//!
//! The duplicate request cache ([`ServerBuilder::reply_cache`]) sits outside the layers: a
//! retransmission it answers from a kept reply, or that waits for the first execution,
//! reaches no layer (it runs nothing), and the reply it keeps is the one the layers let
//! out, a timeout's SYSTEM_ERR included, so at-most-once holds under them.
//!
//! # What the caller gets
//!
//! A layer's error becomes the reply: a [`ReplyError`] (a layer may return one, boxed) is
//! sent as it is; anything else (tower's `Elapsed` from a timeout, `Overloaded` from load
//! shedding) is answered SYSTEM_ERR, with a `DEBUG` event on target
//! [`CALLS`] naming it. ONC RPC has no "busy" reply; SYSTEM_ERR is
//! what RFC 5531 section 9 offers for a call the server could not complete.
//!
//! # Readiness and the transports' fast path
//!
//! Transports poll a call's handler once where the call arrived and move it to a task only
//! when it waits. With layers, that first poll drives a clone of the layered service through
//! `poll_ready` and `call` (`tower::ServiceExt::oneshot`): a layer that is ready (a free place
//! under a concurrency limit) costs no task, and one that is not makes the call wait in its
//! task, as a handler that waits does. Load shedding answers at once. Without layers none of
//! this runs.
//!
//! ```
//! use std::time::Duration;
//! use rpcrdma::rpc::Server;
//! use tower::ServiceBuilder;
//!
//! let mut builder = Server::builder();
//! // builder.add(...) the services, then:
//! builder.layer(
//!     ServiceBuilder::new()
//!         .concurrency_limit(64)
//!         .timeout(Duration::from_secs(30)),
//! );
//! let server = builder.build();
//! # let _ = server;
//! ```
//!
//! [`Server`]: crate::rpc::Server
//! [`ServerBuilder::layer`]: crate::rpc::ServerBuilder::layer
//! [`ServerBuilder::reply_cache`]: crate::rpc::ServerBuilder::reply_cache

use std::task::{Context, Poll};

use tower::{BoxError, Service, ServiceExt};

use super::error::ReplyError;
use super::observe::CALLS;
use super::server::{CallContext, HandlerFuture};
use crate::xdr::Encode;

/// A call on its way to its handler: what the server decoded, and the handler.
pub struct Request {
    context: CallContext,
    handler: HandlerFuture,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

impl Request {
    pub(crate) fn new(context: CallContext, handler: HandlerFuture) -> Request {
        Request { context, handler }
    }

    /// The call: XID, program, version, procedure, credentials, transport, peer.
    pub fn context(&self) -> &CallContext {
        &self.context
    }

    /// The handler, arguments decoded, not yet polled: what [`Handlers`] runs. A layer that
    /// takes it out answers the call itself with what the future returns.
    pub fn into_handler(self) -> HandlerFuture {
        self.handler
    }
}

/// The innermost service: runs a [`Request`]'s handler. Always ready.
#[derive(Debug, Clone, Copy, Default)]
pub struct Handlers;

impl Service<Request> for Handlers {
    type Response = Box<dyn Encode + Send>;
    type Error = ReplyError;
    type Future = HandlerFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ReplyError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> HandlerFuture {
        request.handler
    }
}

/// A layered stack, type-erased, as the server keeps it.
pub(crate) trait Layered: Send + Sync + 'static {
    /// The handler to run instead of `request`'s: the stack's answer to it.
    fn call(&self, request: Request) -> HandlerFuture;
}

/// The service a layer made around [`Handlers`].
pub(crate) struct Stack<S>(pub(crate) S);

impl<S> Layered for Stack<S>
where
    S: Service<Request, Response = Box<dyn Encode + Send>> + Clone + Send + Sync + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    fn call(&self, request: Request) -> HandlerFuture {
        // A clone per call, as a tower server does per connection: its own readiness (a
        // concurrency limit's permit belongs to the clone that acquired it).
        let service = self.0.clone();
        let xid = request.context.xid();
        Box::pin(async move {
            service
                .oneshot(request)
                .await
                .map_err(|error| answer(xid, error.into()))
        })
    }
}

/// The reply to a call whose layered service failed with `error`.
fn answer(xid: u32, error: BoxError) -> ReplyError {
    match error.downcast::<ReplyError>() {
        Ok(reply) => *reply,
        Err(other) => {
            tracing::debug!(target: CALLS, xid, error = %other, "a layer failed the call: SYSTEM_ERR");
            ReplyError::SystemErr
        }
    }
}

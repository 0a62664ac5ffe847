//! The server side: [`TcpServer`] accepts connections and serves a [`Server`]'s programs on
//! each, calls running concurrently and answered as they complete.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{ready, Poll};

use bytes::Bytes;
use tokio::net::{TcpListener, TcpStream, ToSocketAddrs};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use super::backward::{self, BackwardCalls, TcpCaller};
use super::config::TcpConfig;
use super::encoding::{with_message, KeptEncoder};
use super::signal::Signal;
use super::sink::{Record, RecordSink, SinkClosed};
use super::slots::{Slot, Slots};
use super::stream::{poll_record, ReadError, Records};
use crate::admission::{is_about_one_connection, Refusals, ACCEPT_BACKOFF};
use crate::rpc::observe::metrics::{self, Side};
use crate::rpc::observe::{self, CallStatus, CloseReason, Moved, ServerCall, TcpCounters};
use crate::rpc::{
    encode_reply, encode_reply_header, BufferSource, CallerConnection, CatchPanic, Client,
    Dispatch, HandlerResult, HeapBuffers, Incoming, ReplyError, Server, TransportKind,
    TransportStats,
};
use crate::xdr::Encoder;

/// The log line of a connection refused at the limit.
static AT_LIMIT: Refusals = Refusals::new(
    "refusing a connection: the server is at its connection limit",
    "TcpConfig::max_connections",
);

/// A [`Server`] served over TCP with record marking (RFC 5531 section 11), in the
/// background.
///
/// Every connection is served on its own: its calls run concurrently (up to
/// [`TcpConfig::max_in_flight`] at once) and their replies go out as they complete, in any
/// order. A connection that breaks the record marking (a record over
/// [`TcpConfig::max_record`]) is closed, and only it. Every connection has a task of its own
/// from the moment it is accepted, so a peer that never sends (or sends a byte at a time)
/// delays nobody else; it is closed when it has not delivered a whole record within
/// [`TcpConfig::first_record_timeout`]. At most [`TcpConfig::max_connections`] are served at
/// once: one more is closed as soon as it is accepted.
///
/// Every connection offers its calls' handlers a backchannel
/// ([`CallContext::backchannel`](crate::rpc::CallContext::backchannel)): a `Client` whose
/// calls go to the client on that connection (RFC 5661 section 2.10.3.1), at most
/// [`TcpConfig::max_backward_in_flight`] at once (0 offers none). ONC RPC over TCP has no
/// negotiation of the backward direction: a peer that serves no calls simply never gets one
/// unless its program asks (NFSv4.1: CREATE_SESSION with CONN_BACK_CHAN), and an unused
/// backchannel costs a small allocation per connection. Its calls fail with
/// [`TransportError::Closed`](crate::rpc::TransportError::Closed) when the connection ends,
/// and as soon as the server stops reading it (a shutdown), since their replies could no
/// longer be read.
///
/// [`shutdown`](Self::shutdown) stops accepting and lets every connection answer the calls
/// already running before it closes; dropping the `TcpServer` stops everything at once.
///
/// ```no_run
/// # async fn example(server: rpcrdma::rpc::Server) -> std::io::Result<()> {
/// use rpcrdma::rpc::tcp::{TcpConfig, TcpServer};
///
/// let tcp = TcpServer::bind("127.0.0.1:0", server, TcpConfig::new()).await?;
/// println!("listening on {}", tcp.local_addr());
/// // ... later:
/// tcp.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct TcpServer {
    local_addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
    context: Arc<Context>,
}

impl TcpServer {
    /// Listens on `addr` and serves `server` there.
    pub async fn bind(
        addr: impl ToSocketAddrs,
        server: Server,
        config: TcpConfig,
    ) -> io::Result<TcpServer> {
        TcpServer::spawn(TcpListener::bind(addr).await?, server, config)
    }

    /// Serves `server` on the connections `listener` accepts.
    pub fn spawn(
        listener: TcpListener,
        server: Server,
        config: TcpConfig,
    ) -> io::Result<TcpServer> {
        let local_addr = listener.local_addr()?;
        let (shutdown, stop) = watch::channel(false);
        let context = Arc::new(Context::new(server, config));
        let task = tokio::spawn(accept(listener, context.clone(), stop));
        Ok(TcpServer {
            local_addr,
            shutdown,
            task: Some(task),
            context,
        })
    }

    /// What the server's connections did since it started, closed ones included:
    /// connections accepted and closed, calls received, replies sent, bytes (see
    /// [`observe`](crate::rpc::observe)).
    pub fn stats(&self) -> TransportStats {
        self.context.counters.snapshot()
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting connections and reading calls at once; the returned future completes
    /// when every connection has answered the calls it was running and closed. A client that
    /// does not read its replies holds this up: bound the wait with a timeout if that matters
    /// (dropping the future leaves the connections to finish in the background).
    pub fn shutdown(mut self) -> impl std::future::Future<Output = ()> + Send + 'static {
        self.shutdown.send_replace(true);
        let task = self.task.take();
        async move {
            if let Some(task) = task {
                let _ = task.await;
            }
        }
    }
}

impl Drop for TcpServer {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            // The connections' tasks go with the accepting task's JoinSet.
            task.abort();
        }
    }
}

/// Serves `server` on the connections `listener` accepts until the returned future is
/// dropped (which closes every connection at once). [`TcpServer`] does the same in the
/// background, with a graceful shutdown.
pub async fn serve(listener: TcpListener, server: Server, config: TcpConfig) {
    let (_never, stop) = watch::channel(false);
    accept(listener, Arc::new(Context::new(server, config)), stop).await;
}

/// What every connection of a listener shares.
struct Context {
    server: Server,
    config: TcpConfig,
    counters: Arc<TcpCounters>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("server", &self.server)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Context {
    fn new(server: Server, config: TcpConfig) -> Context {
        Context {
            server,
            config,
            counters: Arc::new(TcpCounters::default()),
        }
    }
}

async fn accept(listener: TcpListener, context: Arc<Context>, mut stop: watch::Receiver<bool>) {
    let mut connections = JoinSet::new();
    // Each live connection's stop signal, raised at shutdown (a flag each rather than a
    // `watch` subscription: the connections look at it on every wake-up).
    let mut stops: Vec<Weak<Signal>> = Vec::new();
    let max_connections = context.config.max_connections.max(1);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.wait_for(|s| *s) => break,
        };
        // Connections that ended since the last one was accepted give their places back.
        while connections.try_join_next().is_some() {}
        match accepted {
            Ok((stream, peer)) if connections.len() >= max_connections => {
                // Closed unread: the peer sees its connection end at once.
                AT_LIMIT.refused(peer, max_connections);
                drop(stream);
            }
            Ok((stream, peer)) => {
                stops.retain(|s| s.strong_count() > 0);
                let connection_stop = Arc::new(Signal::default());
                stops.push(Arc::downgrade(&connection_stop));
                connections.spawn(serve_connection(
                    stream,
                    peer,
                    context.clone(),
                    connection_stop,
                ));
            }
            Err(error) if is_about_one_connection(&error) => {
                tracing::debug!(%error, "accepting a connection failed");
            }
            Err(error) => {
                tracing::warn!(%error, "accepting connections failed: pausing");
                tokio::select! {
                    () = tokio::time::sleep(ACCEPT_BACKOFF) => {}
                    _ = stop.wait_for(|s| *s) => break,
                }
            }
        }
    }
    drop(listener);
    for connection_stop in stops.iter().filter_map(Weak::upgrade) {
        connection_stop.raise();
    }
    while connections.join_next().await.is_some() {}
}

/// Closes the sink however the connection's task ends (aborted included), so the socket
/// closes, and fails the backward calls still waiting.
struct CloseOnDrop(RecordSink, Option<Arc<BackwardCalls>>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
        if let Some(backward) = &self.1 {
            backward.close();
        }
    }
}

/// Why a connection's task stops reading calls.
enum End {
    /// The server is shutting down.
    Stop,
    /// The connection's sending side closed (writing failed).
    Closed,
    /// The client closed the connection (its sending side, at least), between records.
    Finished,
    /// No complete record arrived within [`TcpConfig::first_record_timeout`].
    Silent,
    /// The stream cannot be read any further.
    Broken(ReadError),
}

/// Serves one connection: reads calls, starts them, and (through [`Replier`]) writes their
/// replies as they complete.
async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    context: Arc<Context>,
    stop: Arc<Signal>,
) {
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%peer, %error, "TCP_NODELAY refused");
    }
    let (mut stream, write) = stream.into_split();
    let sink = RecordSink::new(write, context.config.max_fragment);
    let backward = (context.config.max_backward_in_flight > 0).then(|| {
        Arc::new(BackwardCalls::new(
            peer,
            sink.clone(),
            &context.config,
            context.counters.clone(),
        ))
    });
    let _close = CloseOnDrop(sink.clone(), backward.clone());
    let slots = Slots::new(context.config.slots() as usize);
    let connection = ConnectionContext {
        peer,
        replier: Replier {
            peer,
            sink: sink.clone(),
            context: context.clone(),
        },
        buffers: Arc::new(HeapBuffers),
        // The backchannel goes to handlers in the caller's `Arc` (no reference count more
        // per call).
        caller: Arc::new(TcpCaller {
            sink: sink.clone(),
            backchannel: backward.clone().map(|b| Client::from_arc(b)),
        }),
        backward,
        context: context.clone(),
    };
    context.counters.opened();
    observe::opened(Side::Server, "tcp", peer);
    let mut reader = Records::new(context.config.max_record);
    // The replies the task writes itself (the others, from tasks of their own, the thread's).
    let mut encoder = KeptEncoder::default();
    // Taken before reading, kept while no record is complete.
    let mut slot: Option<Slot> = None;
    // Calls read while every slot was taken (reading went on for the replies of backward
    // calls, see below), started in order as slots come back; at most `max_stashed`, then
    // reading stops until a slot comes back.
    let mut stashed: VecDeque<Bytes> = VecDeque::new();
    let max_stashed = context.config.max_backward_in_flight;
    // The wakers last registered with the stop and closed signals.
    let (mut stop_waker, mut closed_waker) = (None, None);
    // Until the first record is complete: one deadline for all of it, however its bytes come.
    let mut first_record = context
        .config
        .first_record_timeout
        .map(|timeout| Box::pin(tokio::time::sleep(timeout)));
    // Each call is read and started within the poll that finds it, and the next one looked
    // for at once: no `await` between calls (one per call, and a future's state changing
    // around it, cost 110 instructions per NULL call). Everything the task waits for is
    // looked at with atomics (with `select!` over a `watch` and a `Semaphore`, the looking
    // cost ~1500 instructions per NULL call).
    let end = std::future::poll_fn(|cx| {
        // The signals wake `cx`'s task when raised: registered once per poll (the waker is the
        // same for every call the poll reads), then looked at before each call.
        if stop.poll_raised_with(cx, &mut stop_waker).is_ready() {
            return Poll::Ready(End::Stop);
        }
        if sink.poll_closed_with(cx, &mut closed_waker).is_ready() {
            return Poll::Ready(End::Closed);
        }
        if let Some(deadline) = &mut first_record {
            if deadline.as_mut().poll(cx).is_ready() {
                return Poll::Ready(End::Silent);
            }
        }
        loop {
            // A unit of the task's budget per call: a client pipelining calls faster than
            // they are answered would otherwise keep the runtime's thread until its socket
            // ran dry (reads of buffered records ask tokio nothing).
            let budget = ready!(tokio::task::coop::poll_proceed(cx));
            if stop.is_raised() {
                return Poll::Ready(End::Stop);
            }
            if sink.is_closed() {
                return Poll::Ready(End::Closed);
            }
            while !stashed.is_empty() {
                let Poll::Ready(held) = slots.poll_take(cx) else {
                    break;
                };
                budget.made_progress();
                if let Some(message) = stashed.pop_front() {
                    connection.handle(message, held, &mut encoder, cx);
                }
            }
            // Wait for a slot before reading: a client at the limit is not read from. Unless
            // backward calls wait for their replies: their handlers may hold every slot, and
            // only a reply read lets them finish. Calls read meanwhile wait in `stashed`.
            // (`slot` is `None` while calls are stashed: they are read without one.)
            let held = match slot.take() {
                Some(held) => Some(held),
                None if !stashed.is_empty() => None,
                None => match slots.poll_take(cx) {
                    Poll::Ready(held) => Some(held),
                    Poll::Pending => None,
                },
            };
            if held.is_none() && !(connection.backward_waiting() && stashed.len() < max_stashed) {
                // `slots` wakes the task when one comes back.
                return Poll::Pending;
            }
            match poll_record(cx, &mut stream, &mut reader) {
                Poll::Ready(Ok(Some(message))) => {
                    budget.made_progress();
                    first_record = None;
                    // RFC 5531 section 9: a REPLY answers one of this end's backward calls.
                    if let backward::Kind::Reply(xid) = backward::kind(&message) {
                        connection.backward_reply(xid, message);
                        slot = held;
                        continue;
                    }
                    match held {
                        Some(held) => connection.handle(message, held, &mut encoder, cx),
                        None => stashed.push_back(message),
                    }
                }
                Poll::Ready(Ok(None)) => return Poll::Ready(End::Finished),
                Poll::Ready(Err(error)) => return Poll::Ready(End::Broken(error)),
                Poll::Pending => {
                    slot = held;
                    return Poll::Pending;
                }
            }
        }
    })
    .await;
    // Nothing more is read: backward calls can get no reply.
    if let Some(backward) = &connection.backward {
        backward.close();
    }
    let (answer_running, reason) = match end {
        End::Stop => (true, CloseReason::Shutdown),
        End::Closed => (false, CloseReason::Error),
        // The caller ended the conversation (ONC RPC clients do not close one direction and
        // wait on the other; RFC 5531 section 11's records have no such notion): the calls
        // still running have no one to answer, and their handlers are dropped.
        End::Finished => (false, CloseReason::PeerClosed),
        End::Silent => {
            tracing::warn!(
                %peer,
                timeout = ?context.config.first_record_timeout,
                "no complete record within the first-record timeout: closing the connection"
            );
            (false, CloseReason::Timeout)
        }
        End::Broken(ReadError::Record(error)) => {
            observe::protocol_error("tcp", peer, "record_marking", &error, true);
            (false, CloseReason::ProtocolViolation)
        }
        End::Broken(ReadError::Io(error)) => {
            tracing::debug!(%peer, %error, "connection lost");
            (false, CloseReason::Error)
        }
    };
    drop((stream, slot, stashed));
    if answer_running {
        // Every slot back means every running call has been answered (or its reply dropped
        // because writing failed).
        std::future::poll_fn(|cx| match sink.poll_closed(cx) {
            Poll::Ready(()) => Poll::Ready(()),
            Poll::Pending => slots.poll_all_back(cx),
        })
        .await;
    }
    context.counters.closed();
    observe::closed(Side::Server, "tcp", peer, reason);
}

/// One connection's view of the server.
struct ConnectionContext {
    peer: SocketAddr,
    replier: Replier,
    buffers: Arc<dyn BufferSource>,
    /// The connection as its calls' handlers see it.
    caller: Arc<dyn CallerConnection>,
    /// The calls to the client on this connection ([`TcpConfig::max_backward_in_flight`] 0:
    /// none); handlers make them with the `Client` of `caller`.
    backward: Option<Arc<BackwardCalls>>,
    context: Arc<Context>,
}

impl ConnectionContext {
    /// Whether backward calls wait for their replies.
    fn backward_waiting(&self) -> bool {
        self.backward.as_ref().is_some_and(|b| b.is_waiting())
    }

    /// Hands a REPLY from the client to the backward call `xid`; dropped and counted when
    /// none waits (or the server offers no backchannel).
    fn backward_reply(&self, xid: u32, message: Bytes) {
        match &self.backward {
            Some(backward) => backward.reply(xid, message),
            None => {
                self.context.counters.dropped(message.len());
                tracing::debug!(peer = %self.peer, xid, "a REPLY from the client, and no backchannel (TcpConfig::max_backward_in_flight 0): dropped");
            }
        }
    }

    /// Routes one call, and polls its handler once from the connection's task (`cx`), whose
    /// `encoder` encodes the replies it writes; `slot` is held until its reply has been
    /// written.
    fn handle(
        &self,
        message: Bytes,
        slot: Slot,
        encoder: &mut KeptEncoder,
        cx: &mut std::task::Context<'_>,
    ) {
        self.context.counters.call(message.len(), false);
        metrics::bytes(Side::Server, "tcp", false, message.len() as u64 + 4);
        let mut observed = ServerCall::start(TransportKind::Tcp, Some(self.peer), &message);
        if let Some(o) = &mut observed {
            o.arrived(Moved::Record, 0, message.len() as u64 + 4);
        }
        let incoming = Incoming {
            message,
            chunks: None,
            transport: TransportKind::Tcp,
            peer: Some(self.peer),
            buffers: self.buffers.clone(),
            backchannel: None,
            caller: Some(self.caller.clone()),
            deadline: None,
        };
        let peer = self.peer;
        let server = &self.context.server;
        match server.dispatch(incoming) {
            Dispatch::Run { xid, future } => {
                // A handler that is done at once (NULL, a lookup in memory) is answered
                // without a task switch, as libtirpc's single-threaded dispatch does; one
                // that waits goes on in a task of its own, and the connection reads on.
                let mut future = CatchPanic::new(future);
                let polled = match &observed {
                    Some(o) => o.span().in_scope(|| Pin::new(&mut future).poll(cx)),
                    None => Pin::new(&mut future).poll(cx),
                };
                match polled {
                    Poll::Ready(result) => {
                        self.replier
                            .send(xid, &result, slot, Some(encoder), observed)
                    }
                    Poll::Pending => {
                        let replier = self.replier.clone();
                        let span = observed.as_ref().map(|o| o.span().clone());
                        let answer = async move {
                            // A caller whose connection closed waits for nothing: its
                            // handler is dropped (a graceful shutdown keeps the connection
                            // open until the handlers answered).
                            let closed = replier.sink.closing();
                            let result = tokio::select! {
                                result = future => result,
                                () = closed => {
                                    tracing::debug!(xid, "the caller's connection closed: its handler is dropped");
                                    return;
                                }
                            };
                            replier.send(xid, &result, slot, None, observed);
                        };
                        match span {
                            Some(span) => {
                                tokio::spawn(tracing::Instrument::instrument(answer, span))
                            }
                            None => tokio::spawn(answer),
                        };
                    }
                }
            }
            Dispatch::Reply { xid, error } => {
                self.replier
                    .send(xid, &Err(error), slot, Some(encoder), observed)
            }
            Dispatch::ChunkError { xid, error } => {
                // Calls over TCP carry no chunks, so this cannot happen; answer as for any
                // arguments that do not decode.
                tracing::warn!(%peer, xid, %error, "a chunk error on TCP: GARBAGE_ARGS");
                let error = Err(ReplyError::GarbageArgs);
                self.replier
                    .send(xid, &error, slot, Some(encoder), observed);
            }
            Dispatch::NotACall { xid } => {
                // Not reached: the reader hands REPLYs to the backward calls.
                tracing::debug!(%peer, xid, "a REPLY from the client: dropped");
                server.served(observed, CallStatus::Dropped);
            }
            Dispatch::Drop(error) => {
                // RFC 5531 section 9 has no reply for a message without a readable call
                // header.
                tracing::debug!(%peer, %error, "an unreadable message: dropped");
                server.served(observed, CallStatus::Dropped);
            }
        }
    }
}

/// Encodes and sends replies on one connection.
#[derive(Clone)]
struct Replier {
    peer: SocketAddr,
    sink: RecordSink,
    context: Arc<Context>,
}

impl Replier {
    /// Encodes the reply to `xid` (in `encoder`, else the thread's) and sends it; `slot` is
    /// given back once it has been written. The call is then counted, and its span
    /// (`observed`) ended.
    fn send(
        &self,
        xid: u32,
        result: &HandlerResult,
        slot: Slot,
        encoder: Option<&mut KeptEncoder>,
        mut observed: Option<ServerCall>,
    ) {
        let max_record = self.context.config.max_record;
        let mut status = CallStatus::of_reply(result);
        let mut len = 0;
        let encode = |enc: &mut Encoder| -> crate::xdr::Result<()> {
            encode_reply(enc, xid, result)?;
            if enc.len() > max_record {
                tracing::warn!(
                    peer = %self.peer,
                    xid,
                    len = enc.len(),
                    max = max_record,
                    "the reply exceeds the record bound: SYSTEM_ERR"
                );
                enc.clear();
                encode_reply_header(enc, xid, Err(ReplyError::SystemErr))?;
                status = CallStatus::SystemErr;
            }
            len = enc.len();
            Ok(())
        };
        let send = |reply: Record<'_>| self.sink.send(reply, Some(slot));
        let sent = match encoder {
            Some(encoder) => encoder.message(encode, send),
            None => with_message(encode, send),
        };
        match sent {
            Ok(Ok(())) => {
                self.context.counters.reply(len, true);
                metrics::bytes(Side::Server, "tcp", true, len as u64 + 4);
                if let Some(o) = &mut observed {
                    o.replied(Moved::Record, 0, len as u64 + 4);
                }
            }
            Err(error) => {
                tracing::error!(peer = %self.peer, xid, %error, "the reply header does not encode");
                status = CallStatus::Dropped;
            }
            Ok(Err(SinkClosed)) => {
                tracing::debug!(peer = %self.peer, xid, "the connection closed before the reply");
                status = CallStatus::Dropped;
            }
        }
        self.context.server.served(observed, status);
    }
}

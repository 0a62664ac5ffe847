//! The transport-agnostic server: a [`Server`] hosts [`Service`]s (one per program version)
//! and turns each incoming call into a handler to run or an immediate answer.
//!
//! Transports feed it whole call messages ([`Incoming`]) and get back a [`Dispatch`]: run the
//! handler future and send its reply, send an error reply at once, answer ERR_CHUNK
//! (RPC-over-RDMA), or drop the message. Handlers run concurrently, as many as the transport
//! allows (the credits it grants, over RPC-over-RDMA).

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::auth::Auth;
use super::buffer::{BufferSource, RegisteredBuffer};
use super::caller::{with_deadline, CallerConnection};
use super::client::{BoxFuture, Client};
use super::drc::{CallInfo, Procedures, ReplyCache, ReplyCacheConfig, ReplyCacheStats};
use super::error::ReplyError;
use super::header::{decode_call_header, encode_reply_header, HeaderError};
use super::msg::AuthFlavor;
use super::observe::{CallCounters, CallStats, CallStatus, ServerCall};
use crate::xdr::{self, Decode, Decoder, Encode, Encoder, Limits, Procedure, ReceivedChunks};

/// Which kind of transport a call came over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransportKind {
    /// ONC RPC over TCP with record marking.
    Tcp,
    /// RPC-over-RDMA.
    Rdma,
    /// Anything else (tests, in-process transports).
    Other,
}

/// What a handler returns: the results (encoded by the transport, DDP-eligible items moved
/// to chunks where it can), or the error to reply with.
pub type HandlerResult = Result<Box<dyn Encode + Send>, ReplyError>;

/// A running handler.
pub type HandlerFuture = BoxFuture<'static, HandlerResult>;

/// Why a service could not start a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DispatchError {
    /// No such procedure in this version (PROC_UNAVAIL).
    ProcUnavail,
    /// The arguments did not decode (GARBAGE_ARGS, or ERR_CHUNK over RPC-over-RDMA when the
    /// chunks disagree with the message).
    Args(xdr::Error),
}

/// One version of one program, as the server routes calls to it.
///
/// `xdrgen` generates an implementation for every `version` of a `.x` file: a server trait
/// with one async method per procedure, and a `register` function that wraps an
/// implementation of that trait into a `Service` and adds it to a [`ServerBuilder`].
pub trait Service: Send + Sync + 'static {
    /// The program number.
    fn program(&self) -> u32;

    /// The version number.
    fn version(&self) -> u32;

    /// Decodes the arguments of `procedure` from `args` and returns the future that runs it.
    /// The server checks afterwards that the arguments used the whole message and every Read
    /// chunk.
    fn call(
        &self,
        ctx: CallContext,
        procedure: u32,
        args: &mut Decoder<'_>,
    ) -> Result<HandlerFuture, DispatchError>;
}

/// Decodes a procedure's arguments for a [`Service`] (generated code calls this).
pub fn decode_args<T: Decode>(args: &mut Decoder<'_>) -> Result<T, DispatchError> {
    T::decode(args).map_err(DispatchError::Args)
}

/// Boxes a handler's future for a [`Service`] (generated code calls this).
pub fn handler<F, T>(future: F) -> HandlerFuture
where
    F: Future<Output = Result<T, ReplyError>> + Send + 'static,
    T: Encode + Send + 'static,
{
    // A struct rather than an `async` block around `future`: the block was one more copy of
    // the whole handler state per call (callgrind: ~1/3 of the server's memcpy on NULL).
    Box::pin(BoxResults { future })
}

pin_project_lite::pin_project! {
    /// A handler's future whose results come out boxed as `dyn Encode` (see [`handler`]).
    struct BoxResults<F> {
        #[pin]
        future: F,
    }
}

impl<F, T> Future for BoxResults<F>
where
    F: Future<Output = Result<T, ReplyError>>,
    T: Encode + Send + 'static,
{
    type Output = HandlerResult;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<HandlerResult> {
        self.project()
            .future
            .poll(cx)
            .map(|result| result.map(|v| Box::new(v) as Box<dyn Encode + Send>))
    }
}

/// Everything a handler may want to know about its call, and the connection's resources.
#[derive(Clone)]
pub struct CallContext {
    xid: u32,
    program: u32,
    version: u32,
    procedure: u32,
    auth: Auth,
    transport: TransportKind,
    peer: Option<SocketAddr>,
    buffers: Arc<dyn BufferSource>,
    backchannel: Option<Arc<Client>>,
    caller: Option<Arc<dyn CallerConnection>>,
    deadline: Option<Instant>,
}

impl std::fmt::Debug for CallContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallContext")
            .field("xid", &self.xid)
            .field("program", &self.program)
            .field("version", &self.version)
            .field("procedure", &self.procedure)
            .field("auth", &self.auth)
            .field("transport", &self.transport)
            .field("peer", &self.peer)
            .finish()
    }
}

impl CallContext {
    /// The call's transaction id.
    pub fn xid(&self) -> u32 {
        self.xid
    }

    /// The program number, as the call carried it.
    pub fn program(&self) -> u32 {
        self.program
    }

    /// The program version.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The procedure number.
    pub fn procedure(&self) -> u32 {
        self.procedure
    }

    /// The caller's checked credentials.
    pub fn auth(&self) -> &Auth {
        &self.auth
    }

    /// The transport the call came over.
    pub fn transport(&self) -> TransportKind {
        self.transport
    }

    /// The caller's address, when the transport has one.
    pub fn peer(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// A buffer for DDP-eligible result data: from the connection's registered pool over
    /// RPC-over-RDMA, so that a result frozen from it moves to the wire without a copy.
    pub fn buffer(&self, len: usize) -> RegisteredBuffer {
        self.buffers.buffer(len)
    }

    /// A client for calls in the backward direction on the caller's connection, when the
    /// transport and the peer support them: over RPC-over-RDMA with backward credits (seed
    /// 004 section 8), over TCP on every connection of a server offering it
    /// ([`TcpConfig::max_backward_in_flight`](super::tcp::TcpConfig::max_backward_in_flight);
    /// RFC 5661 section 2.10.3.1). Its calls fail with
    /// [`TransportError::Closed`](super::TransportError::Closed) once the connection is gone.
    pub fn backchannel(&self) -> Option<&Client> {
        match &self.backchannel {
            Some(client) => Some(client),
            None => self.caller.as_ref().and_then(|c| c.backchannel()),
        }
    }

    /// When the answer is wanted by: the server's [`ServerBuilder::call_timeout`], or the
    /// caller's own deadline where the transport carries it ([`Incoming::deadline`]: in one
    /// process), whichever comes first. Past it the handler is dropped and the call answered
    /// SYSTEM_ERR. `None` when neither sets one.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// True once the connection the call came on has closed: no reply can reach the caller,
    /// and the transport drops the handler at its next wait (unless the reply cache covers
    /// the call: that runs on for the retransmission). A handler doing a long piece of work
    /// without waiting can look here and stop.
    pub fn caller_gone(&self) -> bool {
        self.caller.as_ref().is_some_and(|c| c.is_closed())
    }

    /// Completes when the connection the call came on has closed (never, for a transport
    /// without connections).
    pub fn caller_closed(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let closed = self.caller.as_ref().map(|c| c.closed());
        async move {
            match closed {
                Some(closed) => closed.await,
                None => std::future::pending().await,
            }
        }
    }
}

/// The earlier of two optional instants.
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// An incoming message as a transport hands it to the server.
pub struct Incoming {
    /// The whole RPC message, from its XID on (a Position-Zero Read chunk's contents over
    /// RPC-over-RDMA).
    pub message: Bytes,
    /// Read chunk data for DDP-eligible arguments (RPC-over-RDMA).
    pub chunks: Option<ReceivedChunks>,
    /// The transport.
    pub transport: TransportKind,
    /// The caller's address.
    pub peer: Option<SocketAddr>,
    /// The connection's buffers for DDP-eligible results.
    pub buffers: Arc<dyn BufferSource>,
    /// A client for backward-direction calls on this connection, if any (shared: every
    /// call's context holds it, and a `Client` inline would double the context's size).
    pub backchannel: Option<Arc<Client>>,
    /// The connection the call came on, for a handler to see whether its caller is still
    /// there ([`CallContext::caller_gone`]); `None` for a transport without connections.
    pub caller: Option<Arc<dyn CallerConnection>>,
    /// When the caller wants the answer by, if the transport knows it: the in-process
    /// transport passes the client's [`CallOptions`](super::CallOptions) timeout on. ONC RPC
    /// has no field for it on the wire (RFC 5531 section 9's call body carries none), so the
    /// network transports leave it `None` and a handler's deadline there is the server's own
    /// [`ServerBuilder::call_timeout`].
    pub deadline: Option<Instant>,
}

/// What to do with an incoming message.
#[must_use]
pub enum Dispatch {
    /// Run the handler; send its reply.
    Run {
        /// The call's transaction id.
        xid: u32,
        /// The handler.
        future: HandlerFuture,
    },
    /// Send this error reply at once.
    Reply {
        /// The call's transaction id.
        xid: u32,
        /// The reply.
        error: ReplyError,
    },
    /// The arguments' chunks disagree with the message (RPC-over-RDMA answers RDMA_ERROR /
    /// ERR_CHUNK, seed 004 section 5.5; other transports never see this).
    ChunkError {
        /// The call's transaction id.
        xid: u32,
        /// What disagreed.
        error: xdr::Error,
    },
    /// A REPLY: for the requester side of the connection (backward direction), not a call.
    NotACall {
        /// The reply's transaction id.
        xid: u32,
    },
    /// Not a message anything can be answered to: drop it.
    Drop(xdr::Error),
}

impl std::fmt::Debug for Dispatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dispatch::Run { xid, .. } => write!(f, "Run {{ xid: {xid} }}"),
            Dispatch::Reply { xid, error } => write!(f, "Reply {{ xid: {xid}, error: {error} }}"),
            Dispatch::ChunkError { xid, error } => {
                write!(f, "ChunkError {{ xid: {xid}, error: {error} }}")
            }
            Dispatch::NotACall { xid } => write!(f, "NotACall {{ xid: {xid} }}"),
            Dispatch::Drop(e) => write!(f, "Drop({e})"),
        }
    }
}

/// Builds a [`Server`]: the services it hosts, the flavors it accepts, and its duplicate
/// request cache.
pub struct ServerBuilder {
    programs: BTreeMap<u32, BTreeMap<u32, Arc<dyn Service>>>,
    flavors: Vec<AuthFlavor>,
    limits: Limits,
    reply_cache: Option<ReplyCacheConfig>,
    non_idempotent: Procedures,
    call_timeout: Option<Duration>,
    #[cfg(feature = "tower")]
    layered: Option<Arc<dyn super::layer::Layered>>,
}

impl Default for ServerBuilder {
    fn default() -> Self {
        ServerBuilder::new()
    }
}

impl ServerBuilder {
    /// No services; AUTH_NONE and AUTH_SYS accepted; default decoding [`Limits`]; no
    /// duplicate request cache.
    pub fn new() -> ServerBuilder {
        ServerBuilder {
            programs: BTreeMap::new(),
            flavors: vec![AuthFlavor::AuthNone, AuthFlavor::AuthSys],
            limits: Limits::DEFAULT,
            reply_cache: None,
            non_idempotent: Procedures::default(),
            call_timeout: None,
            #[cfg(feature = "tower")]
            layered: None,
        }
    }

    /// Hosts `service` (replacing any service of the same program and version).
    pub fn add(&mut self, service: impl Service) -> &mut ServerBuilder {
        self.add_arc(Arc::new(service))
    }

    /// Hosts a shared `service`.
    pub fn add_arc(&mut self, service: Arc<dyn Service>) -> &mut ServerBuilder {
        self.programs
            .entry(service.program())
            .or_default()
            .insert(service.version(), service);
        self
    }

    /// Hosts program `program` (as its services name it) as `number` instead: for a program
    /// whose number is assigned locally, such as the 2004 protocol's `CONFIG_RDMA_PROG`.
    pub fn renumber(&mut self, program: u32, number: u32) -> &mut ServerBuilder {
        if let Some(versions) = self.programs.remove(&program) {
            self.programs.insert(number, versions);
        }
        self.non_idempotent.renumber(program, number);
        self
    }

    /// Accepts only calls with these credential flavors (others get AUTH_ERROR /
    /// AUTH_TOOWEAK). Flavors other than AUTH_NONE and AUTH_SYS are never accepted.
    pub fn accept_flavors(&mut self, flavors: &[AuthFlavor]) -> &mut ServerBuilder {
        self.flavors = flavors.to_vec();
        self
    }

    /// Gives each call's handler `timeout`: its [`CallContext::deadline`] is that long after
    /// the call is dispatched, and a handler still running then is dropped and the call
    /// answered SYSTEM_ERR. None by default (a handler may take as long as it needs; a
    /// connection that closes drops its handlers anyway).
    pub fn call_timeout(&mut self, timeout: Duration) -> &mut ServerBuilder {
        self.call_timeout = Some(timeout);
        self
    }

    /// Bounds on decoding arguments (message size, element counts, nesting).
    pub fn limits(&mut self, limits: Limits) -> &mut ServerBuilder {
        self.limits = limits;
        self
    }

    /// Keeps the replies of non-idempotent procedures in a duplicate request cache bounded
    /// by `config`, so that a call retransmitted after a reconnect gets its first reply and
    /// does not run twice (see [`drc`](crate::rpc::drc)). Which procedures: those listed with
    /// [`non_idempotent`](Self::non_idempotent); for a program version without a list, every
    /// procedure but NULL.
    pub fn reply_cache(&mut self, config: ReplyCacheConfig) -> &mut ServerBuilder {
        self.reply_cache = Some(config);
        self
    }

    /// Lists `procedures` of `program` version `version` as not idempotent: with a
    /// [`reply_cache`](Self::reply_cache), their replies are kept and the version's other
    /// procedures are not. Lists add up; the program number is the one calls carry (a
    /// [`renumber`](Self::renumber) moves the lists with the program).
    pub fn non_idempotent(
        &mut self,
        program: u32,
        version: u32,
        procedures: &[u32],
    ) -> &mut ServerBuilder {
        self.non_idempotent.add(program, version, procedures);
        self
    }

    /// Lists one procedure that `xdrgen` generated as not idempotent (see
    /// [`non_idempotent`](Self::non_idempotent)), by its type:
    /// `builder.non_idempotent_procedure::<files_v1::FilesRemove>()`.
    pub fn non_idempotent_procedure<P: Procedure>(&mut self) -> &mut ServerBuilder {
        self.non_idempotent(P::PROGRAM, P::VERSION, &[P::PROCEDURE])
    }

    /// Wraps the handlers of every hosted program in `layer` (feature `tower`): a
    /// `tower::Layer` around [`Handlers`](super::layer::Handlers), such as a
    /// `tower::ServiceBuilder` of several. Calls the server answers itself never reach it,
    /// and the duplicate request cache sits outside it (see [`layer`](super::layer)). A
    /// second call replaces the first's layer.
    #[cfg(feature = "tower")]
    pub fn layer<L>(&mut self, layer: L) -> &mut ServerBuilder
    where
        L: tower::Layer<super::layer::Handlers>,
        L::Service: tower::Service<super::layer::Request, Response = Box<dyn Encode + Send>>
            + Clone
            + Send
            + Sync
            + 'static,
        <L::Service as tower::Service<super::layer::Request>>::Error: Into<tower::BoxError>,
        <L::Service as tower::Service<super::layer::Request>>::Future: Send + 'static,
    {
        let stack = super::layer::Stack(layer.layer(super::layer::Handlers));
        self.layered = Some(Arc::new(stack));
        self
    }

    /// The server.
    pub fn build(&self) -> Server {
        let cache = self
            .reply_cache
            .map(|config| Arc::new(ReplyCache::new(config, self.non_idempotent.clone())));
        Server {
            inner: Arc::new(Inner {
                programs: self.programs.clone(),
                flavors: self.flavors.clone(),
                limits: self.limits,
                cache,
                counters: CallCounters::default(),
                call_timeout: self.call_timeout,
                #[cfg(feature = "tower")]
                layered: self.layered.clone(),
            }),
        }
    }
}

struct Inner {
    programs: BTreeMap<u32, BTreeMap<u32, Arc<dyn Service>>>,
    flavors: Vec<AuthFlavor>,
    limits: Limits,
    cache: Option<Arc<ReplyCache>>,
    /// The calls answered (or dropped), by status, over every transport.
    counters: CallCounters,
    /// The time each call's handler has ([`ServerBuilder::call_timeout`]).
    call_timeout: Option<Duration>,
    /// The middleware around the handlers ([`ServerBuilder::layer`]).
    #[cfg(feature = "tower")]
    layered: Option<Arc<dyn super::layer::Layered>>,
}

/// An ONC RPC server: the programs and versions it hosts. Cheap to clone; serve it on any
/// number of transports and connections at once.
#[derive(Clone)]
pub struct Server {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("programs", &self.programs().collect::<Vec<_>>())
            .finish()
    }
}

impl Server {
    /// A builder.
    pub fn builder() -> ServerBuilder {
        ServerBuilder::new()
    }

    /// Every hosted (program, version).
    pub fn programs(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.inner
            .programs
            .iter()
            .flat_map(|(p, vs)| vs.keys().map(move |v| (*p, *v)))
    }

    /// What the duplicate request cache did and holds, when it is on
    /// ([`ServerBuilder::reply_cache`]).
    pub fn reply_cache_stats(&self) -> Option<ReplyCacheStats> {
        self.inner.cache.as_ref().map(|cache| cache.stats())
    }

    /// The calls this server answered since it was built, over every transport and
    /// connection serving it, by how they ended ([`CallStatus`]): the reply's status, or
    /// ERR_CHUNK (RPC-over-RDMA) or dropped unanswered. A call is counted when its reply was
    /// handed to its connection.
    pub fn stats(&self) -> CallStats {
        self.inner.counters.snapshot()
    }

    /// Counts a call that ended with `status`, and ends its span (`observed`), if it has one:
    /// what every transport does once it has answered (or dropped) a call.
    #[inline]
    pub(crate) fn served(&self, observed: Option<ServerCall>, status: CallStatus) {
        self.inner.counters.count(status);
        if let Some(observed) = observed {
            observed.finish(status);
        }
    }

    /// Routes one incoming message (see [`Dispatch`]). A call the duplicate request cache
    /// covers is looked up once its arguments have decoded: the handler to run is then its
    /// first execution, its kept reply, or a wait for the execution running.
    pub fn dispatch(&self, incoming: Incoming) -> Dispatch {
        let message = incoming.message;
        let mut dec = match Decoder::with_limits(&message, self.inner.limits) {
            Ok(dec) => dec,
            Err(e) => return too_large(&message, e),
        };
        // Before the header: an RDMA_MSGP message's padding applies to every counted opaque
        // item of the message, the credential's included (seed 000 section 3.5).
        if let Some(chunks) = incoming.chunks {
            dec.set_chunks(chunks);
        }
        let header = match decode_call_header(&mut dec, &self.inner.flavors) {
            Ok(h) => h,
            Err(HeaderError::Unreadable(e)) => return Dispatch::Drop(e),
            Err(HeaderError::Reply { xid }) => return Dispatch::NotACall { xid },
            Err(HeaderError::Refuse { xid, error }) => return Dispatch::Reply { xid, error },
        };
        let xid = header.xid;
        let Some(versions) = self.inner.programs.get(&header.prog) else {
            return Dispatch::Reply {
                xid,
                error: ReplyError::ProgUnavail,
            };
        };
        let Some(service) = versions.get(&header.vers) else {
            // RFC 5531 section 9: PROG_MISMATCH carries the lowest and highest version.
            let low = versions.keys().next().copied().unwrap_or(0);
            let high = versions.keys().next_back().copied().unwrap_or(0);
            return Dispatch::Reply {
                xid,
                error: ReplyError::ProgMismatch { low, high },
            };
        };
        let cache = self
            .inner
            .cache
            .as_ref()
            .filter(|cache| cache.covers(header.prog, header.vers, header.proc));
        let key = cache.map(|cache| {
            cache.key(CallInfo {
                peer: incoming.peer,
                auth: &header.auth,
                xid,
                program: header.prog,
                version: header.vers,
                procedure: header.proc,
                args: &message[message.len() - dec.remaining()..],
            })
        });
        let ctx = CallContext {
            xid,
            program: header.prog,
            version: header.vers,
            procedure: header.proc,
            auth: header.auth,
            transport: incoming.transport,
            peer: incoming.peer,
            buffers: incoming.buffers,
            backchannel: incoming.backchannel,
            caller: incoming.caller,
            deadline: earliest(
                incoming.deadline,
                self.inner.call_timeout.map(|t| Instant::now() + t),
            ),
        };
        let deadline = ctx.deadline;
        // The layers' view of the call: its context, kept only when there are layers.
        #[cfg(feature = "tower")]
        let layered = self.inner.layered.as_ref().map(|l| (l, ctx.clone()));
        let future = match service.call(ctx, header.proc, &mut dec) {
            Ok(f) => f,
            Err(DispatchError::ProcUnavail) => {
                return Dispatch::Reply {
                    xid,
                    error: ReplyError::ProcUnavail,
                }
            }
            Err(DispatchError::Args(error)) => return args_failed(xid, error),
        };
        if let Some(chunks) = dec.take_chunks() {
            if let Err(error) = chunks.finish() {
                return args_failed(xid, error);
            }
        }
        if let Err(error) = dec.finish() {
            return args_failed(xid, error);
        }
        #[cfg(feature = "tower")]
        let future = match layered {
            Some((layers, ctx)) => layers.call(super::layer::Request::new(ctx, future)),
            None => future,
        };
        let future = match deadline {
            Some(deadline) => with_deadline(future, deadline),
            None => future,
        };
        let future = match cache.zip(key) {
            Some((cache, key)) => cache.handle(key, future),
            None => future,
        };
        Dispatch::Run { xid, future }
    }
}

/// A message over the decoding limits: a call (its first two words say so) is answered
/// GARBAGE_ARGS, so its caller learns at once rather than at its timeout; anything else is
/// dropped.
fn too_large(message: &Bytes, error: xdr::Error) -> Dispatch {
    let word = |i: usize| {
        message
            .get(i * 4..i * 4 + 4)
            .map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
    };
    match (word(0), word(1)) {
        // RFC 5531 section 9: msg_type CALL is 0.
        (Some(xid), Some(0)) => {
            tracing::debug!(xid, %error, "a call over the decoding limits: GARBAGE_ARGS");
            Dispatch::Reply {
                xid,
                error: ReplyError::GarbageArgs,
            }
        }
        _ => Dispatch::Drop(error),
    }
}

fn args_failed(xid: u32, error: xdr::Error) -> Dispatch {
    if error.kind().is_chunk_error() {
        Dispatch::ChunkError { xid, error }
    } else {
        tracing::debug!(xid, %error, "GARBAGE_ARGS");
        Dispatch::Reply {
            xid,
            error: ReplyError::GarbageArgs,
        }
    }
}

/// Encodes the reply to call `xid` into `enc`: the header, then the results. Results that
/// cannot be encoded (a value over a declared maximum) become a SYSTEM_ERR reply. Results
/// that do not fit the requester's chunks (RPC-over-RDMA) are an error: the transport answers
/// ERR_CHUNK (seed 004 section 5.5).
pub fn encode_reply(enc: &mut Encoder, xid: u32, result: &HandlerResult) -> xdr::Result<()> {
    match result {
        Ok(value) => {
            encode_reply_header(enc, xid, Ok(()))?;
            if let Err(error) = value.encode(enc) {
                if error.kind().is_chunk_error() {
                    return Err(error);
                }
                tracing::warn!(xid, %error, "the handler's results do not encode: SYSTEM_ERR");
                enc.clear();
                encode_reply_header(enc, xid, Err(ReplyError::SystemErr))?;
            }
            Ok(())
        }
        Err(e) => encode_reply_header(enc, xid, Err(*e)),
    }
}

/// Runs a handler so that a panic in it becomes a SYSTEM_ERR reply instead of taking the
/// connection down.
pub async fn run_handler(future: HandlerFuture) -> HandlerResult {
    CatchPanic::new(future).await
}

/// A handler whose panic becomes a SYSTEM_ERR reply, without a task of its own: a transport
/// polls it once where the call arrived, answers at once when it is done (NULL, a lookup in
/// memory, as libtirpc's single-threaded dispatch does), and only moves one that waits to a
/// task.
pub struct CatchPanic(HandlerFuture);

impl CatchPanic {
    /// Wraps a handler.
    pub fn new(future: HandlerFuture) -> CatchPanic {
        CatchPanic(future)
    }
}

impl Future for CatchPanic {
    type Output = HandlerResult;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<HandlerResult> {
        // After a panic the future is never polled again: it is dropped with this one.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.0.as_mut().poll(cx))) {
            Ok(poll) => poll,
            Err(_) => {
                tracing::error!("a handler panicked: SYSTEM_ERR");
                std::task::Poll::Ready(Err(ReplyError::SystemErr))
            }
        }
    }
}

//! One RPC-over-RDMA connection: the core under a lock, the task that feeds it completions,
//! and the posting of what it emits.
//!
//! Whoever gives the core an input (a caller starting a call, a handler replying, the
//! completion task) drains its operations and posts them while holding the lock, so work
//! requests reach the provider in the order the core emitted them, with no task hop between a
//! call and its Send. The completion task polls the provider, feeds the core, and delivers
//! the core's events: replies to waiting callers, calls to handler tasks.
//!
//! A provider that can call a hook where it learns of completions (the software provider's
//! receive task, [`Connection::set_completion_hook`]) has the completion task's work done
//! there ([`Conn::on_completions`]): a reply reaches its caller, and a call its handler, one
//! task switch sooner. The completion task then only runs the core's timers, the close, and
//! the rounds the hook could not take because someone held the lock.

use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};

use bytes::Bytes;
use tokio::sync::Notify;

use super::config::{PeerVersions, RdmaConfig};
use crate::id_map::IdMap;
use crate::rdma::{
    Access, Completion, Connection, MemoryRegion, RecvWr, RemoteAddr, SendWr, Sge, WcOpcode,
    WcStatus,
};
use crate::rpc::deadlines::{self, CoarseInstant, Expire};
use crate::rpc::{
    self, encode_reply, encode_reply_header, BufferSource, CatchPanic, Client, Dispatch, Incoming,
    Reply, Server, TransportError, TransportKind,
};
use crate::transport::core::{
    CallId, Core, CoreConfig, Event, IncomingCall, Op, OpId, OutgoingCall, Role, Slice, Stats,
    WriteTarget,
};
use crate::transport::mode2004::BASIC_INLINE;
use crate::transport::pool::{Pool, PoolBuf, PoolStats};
use crate::transport::private_data::PrivateData;
use crate::xdr::{Encoder, ThresholdPolicy};

/// Receive completions carry this bit in their work request id, with the slot below it.
const RECV: u64 = 1 << 62;

/// What a posted operation holds until its completion.
enum Posted {
    /// A send buffer to return to the free list.
    Send(MemoryRegion),
    /// A buffer whose handle is being invalidated.
    Invalidate(PoolBuf),
}

/// A call waiting for its reply: the reply lands here, under the connection's lock, and the
/// caller takes it from here ([`Conn::poll_reply`]). (A oneshot channel per call cost an
/// allocation and its own synchronisation on top of the lock every call takes anyway.)
struct Waiter {
    /// The reply or the failure, once the call is over.
    outcome: Option<Result<Reply, TransportError>>,
    /// The caller's waker, once it waited.
    waker: Option<Waker>,
    /// When the connection's sweeper fails the call, and the limit to report (the default
    /// timeout, see [`deadlines`]); `None` when the call has a timer of its own, or none.
    deadline: Option<(CoarseInstant, Duration)>,
}

impl Waiter {
    fn new(waker: Option<Waker>, deadline: Option<(CoarseInstant, Duration)>) -> Waiter {
        Waiter {
            outcome: None,
            waker,
            deadline,
        }
    }

    /// Ends the call with `outcome` and wakes its caller (a second outcome is ignored).
    fn finish(&mut self, outcome: Result<Reply, TransportError>) {
        if self.outcome.is_none() {
            self.outcome = Some(outcome);
            if let Some(waker) = self.waker.take() {
                waker.wake();
            }
        }
    }
}

struct State {
    core: Core<PoolBuf>,
    waiters: IdMap<CallId, Waiter>,
    /// What posted operations hold, in posting order, which is the order a send queue
    /// completes in: a completion is almost always the first one's ([`State::take_posted`]).
    posted: VecDeque<(OpId, Posted)>,
    /// Registered send buffers not in use.
    send_buffers: Vec<MemoryRegion>,
    /// Calls the core handed over, for the completion task to dispatch.
    calls: Vec<IncomingCall>,
    /// The core deadline the completion task sleeps until; the hook wakes the task when the
    /// core's changes.
    task_deadline: Option<Instant>,
}

impl State {
    /// What operation `id` held, if anything. The core numbers operations in the order it
    /// emits them and they are posted in that order, so `posted` is sorted.
    fn take_posted(&mut self, id: OpId) -> Option<Posted> {
        let at = match self.posted.front() {
            Some((first, _)) if *first == id => 0,
            _ => self.posted.binary_search_by_key(&id, |(op, _)| *op).ok()?,
        };
        self.posted.remove(at).map(|(_, held)| held)
    }
}

/// One connection's shared state.
pub(crate) struct Conn<C: Connection> {
    conn: Arc<C>,
    pool: Pool<C>,
    state: Mutex<State>,
    recv: MemoryRegion,
    recv_size: usize,
    server: Option<Server>,
    /// Where a client remembers the version its server settled on.
    versions: Option<PeerVersions>,
    peer: SocketAddr,
    closed: AtomicBool,
    close_notify: Notify,
    /// The provider calls [`Conn::on_completions`] where it learns of completions.
    hooked: AtomicBool,
    /// Wakes the completion task of a hooked connection: the hook left it a round.
    task_kick: Notify,
    /// The calls the hook took from the core, being dispatched; locked only by the hook (a
    /// hook that finds it locked is running inside another's dispatch, or beside it, and
    /// leaves the round to the completion task).
    hook_calls: Mutex<Vec<IncomingCall>>,
    /// Where handlers that wait go on in tasks of their own (the hook may run outside the
    /// runtime: in a `post_send` from any thread).
    runtime: tokio::runtime::Handle,
    /// The waker the hook polls handlers with (`Waker::noop` needs Rust 1.85).
    no_waker: std::task::Waker,
    /// Encoders kept for the next call and reply ([`Conn::encoder`]).
    encoders: Mutex<Encoders>,
    buffers: Arc<dyn BufferSource>,
    /// A client for backward-direction calls, on a server whose config allows them.
    backchannel: std::sync::OnceLock<Arc<Client>>,
    /// A server in the 2004 mode: its program number and the server that answers the
    /// configuration calls (seed 000 section 6).
    configuration: std::sync::OnceLock<(u32, Server)>,
    /// Configured for the 2004 mode: only then do calls and replies ask the core about
    /// padding and the Read-Read model (no second lock per message otherwise).
    mode_2004: bool,
    timeout: Option<Duration>,
    /// The task that fails calls past the default timeout ([`deadlines`]), started by the
    /// first call that needs it; `None` inside if it could not start (calls then keep a timer
    /// of their own).
    sweeper: std::sync::OnceLock<Option<tokio::task::JoinHandle<()>>>,
}

/// Registers `count` receive buffers of `size` bytes in one region and posts them: run in
/// `accept_with` / `connect_with`, before the peer can send.
pub(crate) fn post_receives<C: Connection>(
    conn: &C,
    count: usize,
    size: usize,
) -> crate::rdma::Result<MemoryRegion> {
    let region = conn.register(vec![0; count * size], Access::LOCAL_WRITE)?;
    for slot in 0..count {
        conn.post_recv(RecvWr::new(
            RECV | slot as u64,
            Sge::new(&region, slot * size..(slot + 1) * size)?,
        ))?;
    }
    Ok(region)
}

/// The core's settings from the endpoint's and the peer's.
pub(crate) fn core_config(role: Role, config: &RdmaConfig, peer: &PrivateData) -> CoreConfig {
    CoreConfig {
        role,
        credits: config.credits.max(1),
        backward_credits: config.backward_credits,
        recv_size: config.inline_size,
        // Seed 000 section 6.1: until the configuration call is answered, "the client must
        // not assume" more than 1 KB.
        peer_recv_size: match &config.mode_2004 {
            Some(m) if m.config_program.is_some() => peer.receive_size.min(BASIC_INLINE),
            _ => peer.receive_size,
        },
        peer_remote_invalidate: peer.remote_invalidate,
        max_reads: config.max_reads.max(1) as usize,
        limits: config.limits,
        min_ddp_size: config.min_ddp_size,
        default_write_chunk: config.default_write_chunk,
        default_reply_chunk: config.default_reply_chunk,
        version_2: config.version_2,
        remembered_version: None,
        negotiation_timeout: config.negotiation_timeout,
        remote_invalidate: config.remote_invalidate,
        extensions: config.extensions.clone(),
        mode_2004: config.mode_2004.clone(),
    }
}

impl<C: Connection> Conn<C> {
    /// Starts serving a new connection: `recv` holds the receives posted at setup.
    pub(crate) fn start(
        conn: C,
        recv: MemoryRegion,
        core: CoreConfig,
        config: &RdmaConfig,
        server: Option<Server>,
    ) -> Arc<Conn<C>> {
        let conn = Arc::new(conn);
        let pool = Pool::new(conn.clone(), config.pool);
        let first_xid = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| {
                d.subsec_nanos() ^ (d.as_secs() as u32).rotate_left(16)
            });
        let recv_size = core.recv_size;
        let role = core.role;
        let backward = core.backward_credits > 0;
        let shared = Arc::new(Conn {
            peer: conn.peer_addr(),
            buffers: pool.buffer_source(),
            conn,
            pool,
            state: Mutex::new(State {
                core: Core::new(core, first_xid),
                waiters: IdMap::default(),
                posted: VecDeque::new(),
                send_buffers: Vec::new(),
                calls: Vec::new(),
                task_deadline: None,
            }),
            recv,
            recv_size,
            server,
            versions: (role == Role::Client).then(|| config.versions.clone()),
            closed: AtomicBool::new(false),
            close_notify: Notify::new(),
            hooked: AtomicBool::new(false),
            task_kick: Notify::new(),
            hook_calls: Mutex::new(Vec::new()),
            runtime: tokio::runtime::Handle::current(),
            no_waker: std::task::Waker::from(Arc::new(NoWake)),
            encoders: Mutex::new(Encoders::default()),
            backchannel: std::sync::OnceLock::new(),
            configuration: std::sync::OnceLock::new(),
            mode_2004: config.mode_2004.is_some(),
            timeout: config.timeout,
            sweeper: std::sync::OnceLock::new(),
        });
        if let (Role::Server, Some(program)) = (
            role,
            config.mode_2004.as_ref().and_then(|m| m.config_program),
        ) {
            let answer = super::ccp::server(Arc::downgrade(&shared), config, program);
            let _ = shared.configuration.set((program, answer));
        }
        if role == Role::Server && backward {
            let client = Client::new(super::client::Backchannel {
                conn: Arc::downgrade(&shared),
            });
            let _ = shared.backchannel.set(Arc::new(client));
        }
        {
            // A version 2 client's offer goes before anything else (seed 003 section 7).
            let mut st = shared.lock();
            st.core.open(Instant::now());
            shared.flush(&mut st);
        }
        let weak = Arc::downgrade(&shared);
        let hooked = shared.conn.set_completion_hook(Box::new(move || {
            if let Some(conn) = weak.upgrade() {
                conn.on_completions();
            }
        }));
        shared.hooked.store(hooked, Ordering::Release);
        tokio::spawn(completions(shared.clone()));
        shared
    }

    /// The provider's completion hook: takes the completions, feeds the core, and dispatches
    /// the calls it hands over, right here, as a round of the completion task would. Never
    /// blocks: when the state is locked (a caller or handler posting, or a hook already running
    /// here or elsewhere), the completion task takes the round.
    fn on_completions(self: &Arc<Self>) {
        if self.is_closed() {
            return;
        }
        let Some(mut calls) = self.hook_calls.try_lock() else {
            return self.task_kick.notify_one();
        };
        {
            let Some(mut st) = self.state.try_lock() else {
                return self.task_kick.notify_one();
            };
            if !self.drain(&mut st, &mut calls) {
                self.task_kick.notify_one();
            }
        }
        if calls.is_empty() {
            return;
        }
        // Handlers are polled once here, without a waker of their own: one that waits is
        // polled again in its task. In the runtime's context, as in the completion task: the
        // hook may run on the provider's flusher thread.
        let _runtime = self.runtime.enter();
        let mut cx = std::task::Context::from_waker(&self.no_waker);
        for call in calls.drain(..) {
            serve_call(self, call, &mut cx);
        }
    }

    /// A round of completions: feeds the core what the provider has, posts what it emits,
    /// delivers its events and takes the calls it handed over. False when the completion task
    /// must look again (the core's deadline moved, or the connection closed).
    fn drain(self: &Arc<Self>, st: &mut State, calls: &mut Vec<IncomingCall>) -> bool {
        while let Some(c) = self.conn.try_completion() {
            self.complete(st, c);
        }
        self.flush(st);
        std::mem::swap(calls, &mut st.calls);
        core_deadline(st) == st.task_deadline && !self.is_closed()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock()
    }

    /// The core's counters.
    pub(crate) fn stats(&self) -> Stats {
        self.lock().core.stats()
    }

    /// The version this side's calls go in.
    pub(crate) fn version(&self) -> u32 {
        self.lock().core.version()
    }

    /// The transport properties the peer advertised (version 2).
    pub(crate) fn peer_properties(&self) -> Vec<crate::transport::header::Property> {
        self.lock().core.peer_properties().to_vec()
    }

    /// Sends a message of an extension's header type and waits for its answer's body.
    pub(crate) async fn extension_call(
        self: &Arc<Self>,
        htype: u32,
        flags: u32,
        body: Bytes,
    ) -> Result<Bytes, TransportError> {
        let id = {
            let mut st = self.lock();
            let id = st
                .core
                .start_extension(htype, flags, body, Instant::now())?;
            st.waiters.insert(id, Waiter::new(None, None));
            self.flush(&mut st);
            id
        };
        let mut guard = Cancel {
            conn: self,
            id,
            armed: true,
        };
        let reply = AwaitReply::new(self, id, false);
        let outcome = match self.timeout {
            Some(t) => match tokio::time::timeout(t, reply).await {
                Ok(r) => r,
                Err(_) => return Err(TransportError::TimedOut(t)),
            },
            None => reply.await,
        };
        guard.armed = false;
        outcome.map(|reply| reply.message)
    }

    /// The pool's counters.
    pub(crate) fn pool_stats(&self) -> PoolStats {
        self.pool.stats()
    }

    pub(crate) fn pool(&self) -> &Pool<C> {
        &self.pool
    }

    pub(crate) fn buffers(&self) -> Arc<dyn BufferSource> {
        self.buffers.clone()
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    pub(crate) fn connection(&self) -> &Arc<C> {
        &self.conn
    }

    /// Closes the connection: every waiting call fails with `Closed`.
    pub(crate) fn close(self: &Arc<Self>) {
        let mut st = self.lock();
        self.close_locked(&mut st);
    }

    fn close_locked(self: &Arc<Self>, st: &mut State) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(Some(sweeper)) = self.sweeper.get() {
            sweeper.abort();
        }
        st.core.close();
        self.deliver(st);
        self.close_notify.notify_one();
        // Closed outside a runtime (a client dropped after its runtime's `block_on`), the
        // provider connection only closes when its last handle goes.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let conn = self.conn.clone();
            runtime.spawn(async move {
                let _ = conn.disconnect().await;
            });
        }
    }

    /// Posts everything the core has emitted, takes the completions that came while posting,
    /// and delivers the core's events.
    fn flush(self: &Arc<Self>, st: &mut State) {
        loop {
            let mut posted = false;
            while let Some(op) = st.core.poll_op() {
                posted = true;
                if let Err(e) = self.post(st, op) {
                    tracing::warn!(error = %e, peer = %self.peer, "posting failed: closing");
                    return self.close_locked(st);
                }
            }
            // A Send that completed as it was written is the poster's to take: a provider's
            // hook is not called from inside `post_send` (`Connection::set_completion_hook`).
            // Without a hook the completion task takes every completion (and, taking them
            // before it locks the state, would see them out of order if this did too).
            let mut took = false;
            if posted && self.hooked.load(Ordering::Acquire) {
                while let Some(c) = self.conn.try_completion() {
                    took = true;
                    self.complete(st, c);
                }
            }
            if !took {
                break;
            }
        }
        self.deliver(st);
    }

    fn deliver(self: &Arc<Self>, st: &mut State) {
        while let Some(event) = st.core.poll_event() {
            match event {
                Event::Reply { call, result } => {
                    if let Some(waiter) = st.waiters.get_mut(&call) {
                        waiter.finish(result);
                    }
                }
                Event::Call(call) => st.calls.push(call),
                Event::Fatal(why) => {
                    tracing::warn!(peer = %self.peer, %why, "protocol violation: closing");
                    self.close_locked(st);
                }
                Event::Negotiated { version } => {
                    tracing::debug!(peer = %self.peer, version, "RPC-over-RDMA version settled");
                    if let Some(versions) = &self.versions {
                        versions.remember(self.peer, version);
                    }
                }
            }
        }
    }

    /// A registered buffer for a Send of `len` bytes: one of the free ones, or a new one as
    /// large as the peer receives (which version 2's RBSIZ may have raised since).
    fn send_buffer(&self, st: &mut State, len: usize) -> crate::rdma::Result<MemoryRegion> {
        match st.send_buffers.pop() {
            Some(mr) if mr.len() >= len => Ok(mr),
            _ => {
                let size = st.core.config().peer_recv_size.max(len);
                self.conn.register(vec![0; size], Access::NONE)
            }
        }
    }

    fn post(&self, st: &mut State, op: Op<PoolBuf>) -> crate::rdma::Result<()> {
        let sge = |s: &Slice<PoolBuf>| Sge {
            mr: s.buf.region().clone(),
            offset: s.offset,
            len: s.len,
        };
        let wr = match op {
            Op::Send {
                id,
                message,
                invalidate,
            } => {
                let mr = self.send_buffer(st, message.len())?;
                let len = mr.with_mut_slice(|dst| {
                    let mut at = 0;
                    for part in message.pieces() {
                        dst[at..at + part.len()].copy_from_slice(part);
                        at += part.len();
                    }
                    at
                });
                // The buffer is all this side needs back: a requester learns from the reply
                // that its call arrived, and a responder needs no word of its reply's arrival.
                let mut wr = SendWr::send(id, Sge::new(&mr, 0..len)?).complete_locally();
                if let Some(handle) = invalidate {
                    wr = wr.with_invalidate(handle);
                }
                st.posted.push_back((id, Posted::Send(mr)));
                wr
            }
            Op::Read { id, sink, remote } => SendWr::read(
                id,
                sge(&sink),
                RemoteAddr::new(remote.rdma_handle, remote.rdma_offset),
            ),
            Op::Write { id, source, remote } => SendWr::write(
                id,
                sge(&source),
                RemoteAddr::new(remote.rdma_handle, remote.rdma_offset),
            ),
            Op::Invalidate { id, buf } => {
                let wr = SendWr::local_invalidate(id, crate::transport::core::Buf::handle(&buf));
                st.posted.push_back((id, Posted::Invalidate(buf)));
                wr
            }
            Op::Revoke { buf } => {
                return self.pool.revoke(&buf).map_err(|e| {
                    crate::rdma::Error::InvalidWorkRequest(format!("revoking a handle: {e}"))
                });
            }
        };
        self.conn.post_send(wr)
    }

    /// Takes one completion.
    fn complete(self: &Arc<Self>, st: &mut State, c: Completion) {
        if c.opcode == WcOpcode::Recv || c.wr_id & RECV != 0 {
            if c.status != WcStatus::Success {
                if c.status != WcStatus::Flushed {
                    tracing::warn!(status = %c.status, peer = %self.peer, "a receive failed");
                }
                return self.close_locked(st);
            }
            let slot = (c.wr_id & !RECV) as usize;
            let start = slot * self.recv_size;
            let len = (c.byte_len as usize).min(self.recv_size);
            let pool = &self.pool;
            self.recv.with_slice(|all| {
                st.core
                    .handle_recv(&all[start..start + len], c.invalidated_rkey, &mut &*pool)
            });
            let repost = Sge::new(&self.recv, start..start + self.recv_size)
                .and_then(|sge| self.conn.post_recv(RecvWr::new(c.wr_id, sge)));
            if repost.is_err() {
                return self.close_locked(st);
            }
            return;
        }
        match st.take_posted(c.wr_id) {
            Some(Posted::Send(mr)) => st.send_buffers.push(mr),
            Some(Posted::Invalidate(buf)) if c.status == WcStatus::Success => {
                crate::transport::core::Buf::mark_invalidated(&buf);
            }
            _ => {}
        }
        st.core.handle_completion(c.wr_id, c.status);
        if c.status != WcStatus::Success {
            if c.status != WcStatus::Flushed {
                tracing::warn!(status = %c.status, opcode = ?c.opcode, peer = %self.peer,
                    "an operation failed: closing");
            }
            self.close_locked(st);
        }
    }

    /// Applies what the configuration call settled ([`Core::configure`]).
    pub(crate) fn configure(&self, peer_recv_size: usize, max_reads: usize, align: Option<u32>) {
        self.lock().core.configure(peer_recv_size, max_reads, align);
    }

    /// The peer speaks the default protocol ([`Core::leave_mode_2004`]).
    pub(crate) fn leave_mode_2004(&self, peer_recv_size: usize) {
        self.lock().core.leave_mode_2004(peer_recv_size);
    }

    /// Sends a call on this connection and waits for its reply: with the XID in `xid`, or a
    /// fresh one, left there for a retransmission to reuse.
    pub(crate) async fn call(
        self: &Arc<Self>,
        call: &rpc::Call<'_>,
        xid: &mut Option<u32>,
        targets: (Vec<WriteTarget<PoolBuf>>, Option<usize>),
        timeout: Option<Duration>,
        backward: bool,
    ) -> Result<Reply, rpc::Error> {
        // The waiter holds this task's waker from the start: the first wait for the reply
        // need not lock the state to hand it over ([`AwaitReply`]).
        let waker = std::future::poll_fn(|cx| Poll::Ready(cx.waker().clone())).await;
        // The call starts in a plain function: what it needs on the way is not kept in this
        // future, which is copied whole into the caller's box.
        let (id, timer) = self.start_call(call, xid, targets, timeout, backward, waker)?;
        // Dropping this future cancels the call: its handles are invalidated at once.
        let mut guard = Cancel {
            conn: self,
            id,
            armed: true,
        };
        let reply = AwaitReply::new(self, id, true);
        let outcome = match timer {
            // Boxed: a timer of the call's own is rare, and inline its future (a tokio
            // `Sleep`) would make every call's future larger.
            Some(t) => match Box::pin(tokio::time::timeout(t, reply)).await {
                Ok(r) => r,
                Err(_) => return Err(TransportError::TimedOut(t).into()),
            },
            None => reply.await,
        };
        guard.armed = false;
        outcome.map_err(rpc::Error::from)
    }

    /// Encodes and starts a call (see [`Conn::call`]) whose waiter wakes `waker`; its id, and
    /// the timer it needs of its own, if any.
    fn start_call(
        self: &Arc<Self>,
        call: &rpc::Call<'_>,
        xid: &mut Option<u32>,
        (write_chunks, reply_inline): (Vec<WriteTarget<PoolBuf>>, Option<usize>),
        timeout: Option<Duration>,
        backward: bool,
        waker: Waker,
    ) -> Result<(CallId, Option<Duration>), rpc::Error> {
        if self.is_closed() {
            return Err(TransportError::Closed.into());
        }
        let (xid, policy, reply_chunk, pad_threshold) = {
            let mut st = self.lock();
            // A first attempt takes a fresh XID; a retransmission keeps it.
            let xid = *xid.get_or_insert_with(|| st.core.next_xid());
            // Read-Read (2004 mode): a long reply comes as a Read chunk instead.
            let reply_chunk = (!backward
                && !st.core.read_read_requester()
                && st.core.needs_reply_chunk(reply_inline, write_chunks.len()))
            .then(|| {
                call.options
                    .max_reply
                    .or(call.reply.max_len)
                    .unwrap_or(st.core.config().default_reply_chunk)
            });
            (
                xid,
                st.core.call_policy(),
                reply_chunk,
                st.core.pad_threshold(),
            )
        };
        let kept = (!backward && pad_threshold.is_none()).then_some(EncoderUse::Call(policy));
        let mut enc = match kept {
            Some(usage) => self.encoder(usage),
            None if backward => Box::new(Encoder::new()),
            None => Box::new(Encoder::for_call(policy)),
        };
        if let Some(thresh) = pad_threshold {
            enc.record_pad_points(thresh);
        }
        let encoded = call.encode(xid, &mut enc);
        let (message, moved) = self.finish_encoder(enc, kept);
        encoded.map_err(rpc::Error::Encode)?;
        // A timeout of the call's own gets an exact timer; the default one only a deadline
        // the connection's sweeper enforces: a tokio timer per call costs every call (see
        // `deadlines`).
        let (timer, deadline) = match (timeout, self.timeout) {
            (Some(own), _) => (Some(own), None),
            (None, Some(limit)) if self.sweeping(limit) => {
                (None, Some((CoarseInstant::after(limit), limit)))
            }
            (None, limit) => (limit, None),
        };
        let mut st = self.lock();
        let id = st.core.start_call(
            OutgoingCall {
                xid,
                message,
                moved,
                write_chunks,
                reply_chunk,
                timeout: None,
                backward,
            },
            Instant::now(),
            &mut &self.pool,
        )?;
        st.waiters.insert(id, Waiter::new(Some(waker), deadline));
        self.flush(&mut st);
        Ok((id, timer))
    }

    /// The outcome of call `id` once it has one (its waiter is then gone), else `cx` is woken
    /// when it has; with `wake` false, nobody is (the caller reads the input itself, see
    /// [`AwaitReply`], and the hook it runs must not wake it). A call without a waiter was
    /// failed by the connection's end.
    fn poll_reply(
        &self,
        id: CallId,
        cx: &mut Context<'_>,
        wake: bool,
    ) -> Poll<Result<Reply, TransportError>> {
        let mut st = self.lock();
        let Some(waiter) = st.waiters.get_mut(&id) else {
            return Poll::Ready(Err(TransportError::Closed));
        };
        if waiter.outcome.is_none() {
            if !wake {
                waiter.waker = None;
            } else if !waiter
                .waker
                .as_ref()
                .is_some_and(|w| w.will_wake(cx.waker()))
            {
                waiter.waker = Some(cx.waker().clone());
            }
            return Poll::Pending;
        }
        let outcome = st.waiters.remove(&id).and_then(|w| w.outcome);
        Poll::Ready(outcome.unwrap_or(Err(TransportError::Closed)))
    }

    /// Starts the sweeper for calls under the default timeout `limit` unless it runs; false if
    /// it cannot run here (outside a runtime, or no timer could be made).
    fn sweeping(self: &Arc<Self>, limit: Duration) -> bool {
        self.sweeper
            .get_or_init(|| {
                tokio::runtime::Handle::try_current().ok()?;
                let expire: Arc<dyn Expire> = self.clone();
                deadlines::watch(Arc::downgrade(&expire), deadlines::period(limit))
                    .inspect_err(|e| {
                        tracing::warn!(error = %e, "no deadline sweeper: each call keeps a timer")
                    })
                    .ok()
            })
            .is_some()
    }

    /// The Write chunks to provide for a call, and the largest reply that can then come
    /// inline: the caller's buffers (from this connection's pool) and sizes, the default size
    /// otherwise.
    ///
    /// As Linux's xprtrdma does, no Write chunk is provided when the caller gave the size of
    /// every DDP-eligible result and the whole reply then fits the receive buffer: the results
    /// come inline, which costs no registration and no RDMA Write.
    pub(crate) fn write_targets(
        &self,
        call: &mut rpc::Call<'_>,
        backward: bool,
    ) -> (Vec<WriteTarget<PoolBuf>>, Option<usize>) {
        let inline = call.reply.max_inline_len;
        if backward {
            return (Vec::new(), call.reply.max_len);
        }
        if self.mode_2004 && self.lock().core.read_read_requester() {
            // Read-Read (seed 000 section 3.8): the responder exposes the results instead.
            return (Vec::new(), call.reply.max_len);
        }
        let options = &mut call.options;
        let n = call
            .reply
            .ddp_items
            .max(options.reply_buffers.len())
            .max(options.reply_sizes.len());
        if n == 0 {
            // No DDP-eligible result (a NULL call, most calls): no Write chunk to provide.
            return (Vec::new(), inline);
        }
        let (default, fits) = {
            let st = self.lock();
            let all_sizes =
                options.reply_buffers.is_empty() && n > 0 && options.reply_sizes.len() >= n;
            let with_results = inline.map(|i| {
                i + options
                    .reply_sizes
                    .iter()
                    .map(|&len| 4 + len + crate::xdr::padding(len))
                    .sum::<usize>()
            });
            let fits = all_sizes && !st.core.needs_reply_chunk(with_results, 0);
            (
                st.core.config().default_write_chunk,
                fits.then_some(with_results),
            )
        };
        if let Some(with_results) = fits {
            return (Vec::new(), with_results);
        }
        let mut buffers = std::mem::take(&mut options.reply_buffers).into_iter();
        let targets = (0..n)
            .map(|i| {
                let size = options.reply_sizes.get(i).copied();
                match buffers.next().and_then(|b| self.pool.take_lease(b)) {
                    Some(lease) => {
                        let (buf, len) = lease.into_parts();
                        WriteTarget::Buffer(vec![Slice {
                            buf,
                            offset: 0,
                            len,
                        }])
                    }
                    None => WriteTarget::Size(size.unwrap_or(default)),
                }
            })
            .collect();
        (targets, inline)
    }
}

impl<C: Connection> Expire for Conn<C> {
    /// Fails the calls past their default timeout as a dropped call is cancelled (see
    /// [`Cancel`]): the core invalidates their handles at once.
    fn expire(self: Arc<Self>, now: CoarseInstant) {
        let mut st = self.lock();
        let expired: Vec<CallId> = st
            .waiters
            .iter()
            .filter(|(_, w)| w.deadline.is_some_and(|(at, _)| at <= now))
            .map(|(&id, _)| id)
            .collect();
        if expired.is_empty() {
            return;
        }
        for id in expired {
            if let Some(waiter) = st.waiters.get_mut(&id) {
                let limit = waiter.deadline.map_or(Duration::ZERO, |(_, limit)| limit);
                // Swept once: the caller takes the outcome and removes the waiter.
                waiter.deadline = None;
                waiter.finish(Err(TransportError::TimedOut(limit)));
                st.core.cancel(id);
            }
        }
        self.flush(&mut st);
    }
}

/// Waits for the reply of call `id`. On a hooked connection the caller reads the input itself
/// ([`Connection::poll_input`]): the provider wakes its task when bytes arrive, and the hook,
/// run in this task, puts the reply in its waiter, instead of the hook in the provider's
/// receive task putting it there and waking this task (one task switch per call fewer).
struct AwaitReply<'a, C: Connection> {
    conn: &'a Arc<Conn<C>>,
    id: CallId,
    /// The call's waiter holds the waker of the task that polls this first (taken in the same
    /// poll, before the call started): that poll has nothing to look at, since an outcome that
    /// came meanwhile woke the task, which then polls again. Not on a hooked connection, whose
    /// first poll reads the input.
    registered: bool,
    /// The waker this task reads the input with, until [`Connection::end_input`].
    reading: Option<Waker>,
}

impl<'a, C: Connection> AwaitReply<'a, C> {
    fn new(conn: &'a Arc<Conn<C>>, id: CallId, registered: bool) -> AwaitReply<'a, C> {
        AwaitReply {
            conn,
            id,
            registered: registered && !conn.hooked.load(Ordering::Acquire),
            reading: None,
        }
    }

    /// The outcome, once there, with the input left to the provider again.
    fn done(
        &mut self,
        outcome: Result<Reply, TransportError>,
    ) -> Poll<Result<Reply, TransportError>> {
        if let Some(waker) = self.reading.take() {
            self.conn.conn.end_input(&waker);
        }
        Poll::Ready(outcome)
    }
}

impl<C: Connection> Future for AwaitReply<'_, C> {
    type Output = Result<Reply, TransportError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if std::mem::take(&mut this.registered) {
            return Poll::Pending;
        }
        // A handler the hook polls (with a waker that wakes nobody, see `Conn::no_waker`) waits
        // as any task would until it goes on in a task of its own.
        if !this.conn.hooked.load(Ordering::Acquire) || cx.waker().will_wake(&this.conn.no_waker) {
            return this.conn.poll_reply(this.id, cx, true);
        }
        loop {
            if let Poll::Ready(outcome) = this.conn.poll_reply(this.id, cx, false) {
                return this.done(outcome);
            }
            if !this
                .reading
                .as_ref()
                .is_some_and(|w| w.will_wake(cx.waker()))
            {
                this.reading = Some(cx.waker().clone());
            }
            if this.conn.conn.poll_input(cx).is_pending() {
                // Nothing to read now (or another task reads): the provider or the hook
                // wakes this task.
                return match this.conn.poll_reply(this.id, cx, true) {
                    Poll::Ready(outcome) => this.done(outcome),
                    Poll::Pending => Poll::Pending,
                };
            }
        }
    }
}

impl<C: Connection> Drop for AwaitReply<'_, C> {
    /// A caller that stops waiting (a timeout, a cancelled call) leaves the input to the
    /// provider.
    fn drop(&mut self) {
        if let Some(waker) = self.reading.take() {
            self.conn.conn.end_input(&waker);
        }
    }
}

/// Cancels a call whose future is dropped before its reply arrives.
struct Cancel<'a, C: Connection> {
    conn: &'a Arc<Conn<C>>,
    id: CallId,
    armed: bool,
}

impl<C: Connection> Drop for Cancel<'_, C> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut st = self.conn.lock();
        st.waiters.remove(&self.id);
        st.core.cancel(self.id);
        self.conn.flush(&mut st);
    }
}

/// The largest buffer a kept encoder may hold ([`Conn::finish_encoder`]).
const KEPT_ENCODER_MAX: usize = 64 * 1024;

/// What a kept encoder was made for.
#[derive(Clone, Copy, PartialEq)]
enum EncoderUse {
    /// Forward calls under this policy.
    Call(ThresholdPolicy),
    /// Replies without Write chunks.
    Reply,
}

/// The encoders a connection keeps between messages: each message is split off the encoder's
/// buffer ([`Encoder::take_with_chunks`]) and the rest of the buffer, or all of it once the
/// messages taken from it are gone, serves the next one. Two allocations fewer per message
/// than a new encoder (its buffer, and the shared header `finish` gives the buffer).
///
/// Boxed: an encoder is a few hundred bytes, moved out of here and back per message.
#[derive(Default)]
struct Encoders {
    call: Option<(ThresholdPolicy, Box<Encoder>)>,
    reply: Option<Box<Encoder>>,
}

impl<C: Connection> Conn<C> {
    /// An encoder for `usage`: the one kept, if it is free and made for the same use, else a
    /// new one.
    fn encoder(&self, usage: EncoderUse) -> Box<Encoder> {
        let kept = self.encoders.try_lock().and_then(|mut kept| match usage {
            EncoderUse::Call(policy) => kept
                .call
                .take()
                .filter(|(p, _)| *p == policy)
                .map(|(_, enc)| enc),
            EncoderUse::Reply => kept.reply.take(),
        });
        kept.unwrap_or_else(|| {
            Box::new(match usage {
                EncoderUse::Call(policy) => Encoder::for_call(policy),
                EncoderUse::Reply => Encoder::for_reply(ThresholdPolicy::default(), Vec::new()),
            })
        })
    }

    /// Ends the message in `enc`. An encoder from [`Conn::encoder`] (`kept` names its use)
    /// gives the message off its buffer and is kept for the next one of its use, unless its
    /// buffer grew for a large message, which the connection would otherwise hold on to; any
    /// other hands its buffer over whole.
    fn finish_encoder(
        &self,
        mut enc: Box<Encoder>,
        kept: Option<EncoderUse>,
    ) -> (crate::xdr::Encoded, Vec<crate::xdr::MovedItem>) {
        let Some(usage) = kept else {
            return enc.finish_with_chunks();
        };
        // Also what a failed encode left: nothing stays behind in the encoder.
        let (message, moved) = enc.take_with_chunks();
        if message.len() + enc.capacity() <= KEPT_ENCODER_MAX {
            self.keep_encoder(usage, enc);
        }
        (message, moved)
    }

    /// Keeps `enc`, empty, for the next message of its use.
    fn keep_encoder(&self, usage: EncoderUse, enc: Box<Encoder>) {
        if let Some(mut kept) = self.encoders.try_lock() {
            match usage {
                EncoderUse::Call(policy) => kept.call = Some((policy, enc)),
                EncoderUse::Reply => kept.reply = Some(enc),
            }
        }
    }
}

/// Wakes nothing: a handler polled by the hook that waits is polled again in a task.
struct NoWake;

impl std::task::Wake for NoWake {
    fn wake(self: Arc<Self>) {}
}

/// The core's deadlines the completion task keeps: a version 2 offer's, and a Read-Read
/// reply's RDMA_DONE (calls time out in their callers).
fn core_deadline(st: &State) -> Option<Instant> {
    (st.core.negotiating() || st.core.exposed_replies() > 0)
        .then(|| st.core.poll_timeout())
        .flatten()
}

/// What wakes the completion task: a completion to take, or (`hooked`, see
/// [`Conn::on_completions`]) a round the hook left to it.
async fn woken<C: Connection>(conn: &Conn<C>, hooked: bool) -> Option<Completion> {
    if hooked {
        conn.task_kick.notified().await;
        None
    } else {
        Some(conn.conn.poll_completion().await)
    }
}

/// The completion task: feeds the core until the connection closes. With a hooked provider
/// ([`Conn::hooked`]) it only takes the rounds the hook leaves it, and the timers.
async fn completions<C: Connection>(conn: Arc<Conn<C>>) {
    let hooked = conn.hooked.load(Ordering::Acquire);
    // Swapped with the state's list each round, so neither allocates once grown.
    let mut calls = Vec::new();
    // One future for the whole loop (a new one per round cost ~180 instructions per call).
    let mut closing = std::pin::pin!(conn.close_notify.notified());
    let mut deadline = core_deadline(&conn.lock());
    if hooked {
        // Completions that came before the hook was set found no one to call.
        conn.task_kick.notify_one();
    }
    loop {
        let timer = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        let mut timed_out = false;
        let first = tokio::select! {
            // In this order, without drawing a random one to start with each round: completions
            // first, and a close still ends the loop within a round.
            biased;
            c = woken(&conn, hooked) => c,
            _ = timer => {
                timed_out = true;
                None
            }
            _ = closing.as_mut() => break,
        };
        {
            let mut st = conn.lock();
            if let Some(first) = first {
                conn.complete(&mut st, first);
            }
            if timed_out {
                st.core.handle_timeout(Instant::now());
            }
            conn.drain(&mut st, &mut calls);
            deadline = core_deadline(&st);
            st.task_deadline = deadline;
        }
        // Handlers run without the lock: they may call back through the backchannel.
        if !calls.is_empty() {
            std::future::poll_fn(|cx| {
                for call in calls.drain(..) {
                    serve_call(&conn, call, cx);
                }
                Poll::Ready(())
            })
            .await;
        }
        if conn.is_closed() {
            break;
        }
    }
    let mut st = conn.lock();
    conn.close_locked(&mut st);
    // Every caller still waiting learns that the connection is gone.
    for (_, mut waiter) in st.waiters.drain() {
        waiter.finish(Err(TransportError::Closed));
    }
}

/// Routes one incoming call through the server. A handler is polled once right here, with
/// `cx`, in the completion task or the hook: one that is done at once (NULL, a lookup in
/// memory) is answered without a task switch; one that waits goes on in a task of its own.
fn serve_call<C: Connection>(
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
        let mut st = conn.lock();
        return st.core.discard_call(call.id);
    };
    let backchannel = conn.backchannel.get().cloned();
    let dispatch = server.dispatch(Incoming {
        message: call.message,
        chunks: call.chunks,
        transport: TransportKind::Rdma,
        peer: Some(conn.peer),
        buffers: conn.buffers.clone(),
        backchannel,
    });
    let (id, write_chunks) = (call.id, call.write_chunks);
    match dispatch {
        Dispatch::Run { xid, future } => {
            let mut future = CatchPanic::new(future);
            match Pin::new(&mut future).poll(cx) {
                Poll::Ready(result) => {
                    conn.reply(id, &write_chunks, |enc| encode_reply(enc, xid, &result))
                }
                Poll::Pending => {
                    let conn = conn.clone();
                    conn.runtime.clone().spawn(async move {
                        let result = future.await;
                        conn.reply(id, &write_chunks, |enc| encode_reply(enc, xid, &result));
                    });
                }
            }
        }
        Dispatch::Reply { xid, error } => conn.reply(id, &write_chunks, |enc| {
            encode_reply_header(enc, xid, Err(error))
        }),
        Dispatch::ChunkError { error, .. } => {
            tracing::debug!(%error, "the arguments' chunks disagree with the call: ERR_CHUNK");
            let mut st = conn.lock();
            st.core.reject_chunks(id);
            conn.flush(&mut st);
        }
        Dispatch::NotACall { .. } | Dispatch::Drop(_) => {
            let mut st = conn.lock();
            st.core.discard_call(id);
        }
    }
}

impl<C: Connection> Conn<C> {
    /// Encodes a reply with `encode` for call `id` and sends it: DDP-eligible results go to
    /// the call's Write chunks (seed 004 section 4.4.5 and seed 002 section 3.7: a result with
    /// a Write chunk provided for it moves there, whatever its size).
    fn reply(
        self: &Arc<Self>,
        id: CallId,
        write_chunks: &[u64],
        encode: impl FnOnce(&mut Encoder) -> crate::xdr::Result<()>,
    ) {
        let (read_read, pad_threshold) = if self.mode_2004 {
            let st = self.lock();
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
        let mut st = self.lock();
        match encoded {
            Ok(()) => {
                st.core
                    .send_reply(id, message, moved, Instant::now(), &mut self.pool());
            }
            Err(error) => {
                tracing::debug!(%error, "the reply does not fit the call's chunks");
                st.core.reject_reply(id, &error);
            }
        }
        self.flush(&mut st);
    }
}

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
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::Notify;

use super::config::{PeerVersions, RdmaConfig};
use super::shared_credits::SharedGrant;
use super::totals::{ConnCounts, ConnSnapshot, Totals};
use crate::id_map::IdMap;
use crate::rdma::{Access, Completion, Connection, MemoryRegion, RecvWr, Sge, WcOpcode, WcStatus};
use crate::rpc::observe::metrics::{self, Side};
use crate::rpc::observe::{self, CloseReason};
use crate::rpc::{BufferSource, Client, Server, TransportError};
use crate::transport::budget::MemoryBudget;
use crate::transport::core::{
    CallId, Core, CoreConfig, Event, IncomingCall, Op, OpId, Role, Stats,
};
use crate::transport::mode2004::BASIC_INLINE;
use crate::transport::pool::{HintsLater, Pool, PoolBuf, PoolStats};
use crate::transport::private_data::PrivateData;

mod call;
mod completion_task;
mod encoders;
mod post;
mod reply_sizes;
mod serve;
mod undelivered;

use call::Waiter;
use completion_task::{completions, core_deadline, memory_unwatched};
use encoders::Encoders;
use reply_sizes::ReplySizes;
use serve::{serve_call, NoWake};
use undelivered::Undelivered;

/// Receive completions carry this bit in their work request id, with the slot below it.
const RECV: u64 = 1 << 62;

/// What a posted operation holds until its completion.
enum Posted {
    /// A send buffer to return to the free list.
    Send(MemoryRegion),
    /// A buffer whose handle is being invalidated.
    Invalidate(PoolBuf),
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
    /// The completion task watches the memory budget for calls waiting for memory; the hook
    /// wakes the task when calls wait and it does not.
    memory_watched: bool,
    /// Messages and bytes, for the transport's totals.
    counts: ConnCounts,
    /// The XIDs of RDMA_NOMSG messages received while a subscriber wanted call spans (long
    /// calls on a server, long replies on a client), for their spans; the latest few only.
    nomsg: VecDeque<u32>,
    /// A call waits for a credit: the `credits_exhausted` event was told for this episode.
    credit_wait: bool,
    /// RDMA_ERRORs sent, as the last `protocol_error` events told them.
    errors_told: u64,
    /// On a shared receive queue: the credits granted and the buffers they reserve.
    grant: Option<SharedGrant>,
    /// Send-queue work requests posted and not completed yet.
    sq_used: usize,
    /// Operations the core emitted that wait, in order, for room in the send queue; those it
    /// emitted after them stay in the core until these are posted.
    backlog: VecDeque<Op<PoolBuf>>,
    /// The bytes sent and received when [`Conn::release_if_idle`] last looked.
    idle_mark: u64,
}

/// How many XIDs of RDMA_NOMSG messages [`State::nomsg`] keeps: more than the calls a
/// connection has in flight at once by default (its credits), so a span looks its own up
/// before it is pushed out.
const NOMSG_KEPT: usize = 64;

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
    /// The receives posted at setup, in one region; `None` on a shared receive queue.
    recv: Option<MemoryRegion>,
    recv_size: usize,
    /// [`RdmaConfig::send_queue_depth`].
    sq_depth: usize,
    server: Option<Server>,
    /// Where a client remembers the version its server settled on.
    versions: Option<PeerVersions>,
    peer: SocketAddr,
    closed: AtomicBool,
    close_notify: Notify,
    /// Raised once the connection has closed, for those who wait for it ([`Conn::closed`]).
    closed_signal: tokio::sync::watch::Sender<bool>,
    /// Shutting down ([`Conn::shut_down`]): calls handed over from now on are dropped
    /// unanswered, and the connection closes once it has finished the ones it had.
    draining: AtomicBool,
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
    /// How large each procedure's DDP-eligible results were lately ([`Conn::reply_plan`]).
    reply_sizes: Mutex<ReplySizes>,
    /// Results whose reply did not fit the call's chunks, for the call sent again.
    undelivered: Mutex<Undelivered>,
    buffers: Arc<dyn BufferSource>,
    /// A client for backward-direction calls, on a server whose config allows them.
    backchannel: std::sync::OnceLock<Arc<Client>>,
    /// A server in the 2004 mode: its program number and the server that answers the
    /// configuration calls (seed 000 section 6).
    configuration: std::sync::OnceLock<(u32, Server)>,
    /// Configured for the 2004 mode: only then do calls and replies ask the core about
    /// padding and the Read-Read model (no second lock per message otherwise).
    mode_2004: bool,
    /// [`RdmaConfig::reply_chunk_with_write_chunks`].
    reply_chunk_with_write_chunks: bool,
    timeout: Option<Duration>,
    /// The task that fails calls past the default timeout ([`deadlines`](crate::rpc::deadlines)), started by the
    /// first call that needs it; `None` inside if it could not start (calls then keep a timer
    /// of their own).
    sweeper: std::sync::OnceLock<Option<tokio::task::JoinHandle<()>>>,
    /// Which end this is, for events and metrics.
    side: Side,
    /// Where the connection's counters go when it closes (its transport's or listener's).
    totals: Option<Arc<Totals>>,
    /// The counters went to `totals` (under its lock).
    retired: AtomicBool,
}

/// Why a connection closes when a work request ends with `status`: a flush is the queue pair
/// leaving the connected state, which (this side not having closed first) the peer's close
/// causes; anything else is a failure.
fn failed(status: WcStatus) -> CloseReason {
    if status == WcStatus::Flushed {
        CloseReason::PeerClosed
    } else {
        CloseReason::Error
    }
}

/// Why a connection closes on the core's [`Event::Fatal`]: the core's deadlines (the peer's
/// first message, RDMA Reads' progress) are timeouts, everything else a violation.
fn fatal_reason(why: &str) -> CloseReason {
    if why.starts_with("no message from the peer") || why.contains("unanswered for") {
        CloseReason::Timeout
    } else {
        CloseReason::ProtocolViolation
    }
}

/// Notes the XID of a received RDMA_NOMSG (message type 1 in both versions: seed 004 section
/// 5.2, seed 003's RDMA2_NOMSG) when a subscriber wants call spans, for [`Conn::took_nomsg`].
#[inline]
fn note_nomsg(st: &mut State, message: &[u8]) {
    let word = |i: usize| crate::transport::header::word(message, i);
    if word(3) == Some(1) && observe::calls_enabled() {
        if let Some(xid) = word(0) {
            if st.nomsg.len() == NOMSG_KEPT {
                st.nomsg.pop_front();
            }
            st.nomsg.push_back(xid);
        }
    }
}

/// Registers `count` receive buffers of `size` bytes in one region and posts them: run in
/// `accept_with` / `connect_with`, before the peer can send.
pub(crate) fn post_receives<C: Connection>(
    conn: &C,
    count: usize,
    size: usize,
) -> crate::rdma::Result<MemoryRegion> {
    let region = conn.register_zeroed(count * size, Access::LOCAL_WRITE)?;
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
        first_message_timeout: config.first_message_timeout,
        read_timeout: config.read_timeout,
        max_reply_size: config.max_reply_size,
    }
}

impl<C: Connection> Conn<C> {
    /// A new connection, not yet started (see [`Conn::start`]): `recv` holds the receives
    /// posted at setup, or is `None` with the `grant` of a connection on a shared receive
    /// queue. Nothing reads its completions until it starts, so whoever keeps track of it can
    /// list it first and see every call it serves.
    /// What the connection's pool lends is charged to `budget`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        conn: C,
        recv: Option<MemoryRegion>,
        grant: Option<SharedGrant>,
        core: CoreConfig,
        config: &RdmaConfig,
        server: Option<Server>,
        budget: MemoryBudget,
        totals: Option<Arc<Totals>>,
    ) -> Arc<Conn<C>> {
        let conn = Arc::new(conn);
        let pool = Pool::new(conn.clone(), config.pool, budget);
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
                memory_watched: false,
                counts: ConnCounts::default(),
                nomsg: VecDeque::new(),
                credit_wait: false,
                errors_told: 0,
                grant,
                sq_used: 0,
                backlog: VecDeque::new(),
                idle_mark: 0,
            }),
            recv,
            recv_size,
            sq_depth: config.send_queue_depth.max(1) as usize,
            reply_chunk_with_write_chunks: config.reply_chunk_with_write_chunks,
            server,
            versions: (role == Role::Client).then(|| config.versions.clone()),
            closed: AtomicBool::new(false),
            close_notify: Notify::new(),
            closed_signal: tokio::sync::watch::Sender::new(false),
            draining: AtomicBool::new(false),
            hooked: AtomicBool::new(false),
            task_kick: Notify::new(),
            hook_calls: Mutex::new(Vec::new()),
            runtime: tokio::runtime::Handle::current(),
            no_waker: std::task::Waker::from(Arc::new(NoWake)),
            encoders: Mutex::new(Encoders::default()),
            reply_sizes: Mutex::new(ReplySizes::default()),
            undelivered: Mutex::new(Undelivered::default()),
            backchannel: std::sync::OnceLock::new(),
            configuration: std::sync::OnceLock::new(),
            mode_2004: config.mode_2004.is_some(),
            timeout: config.timeout,
            sweeper: std::sync::OnceLock::new(),
            side: match role {
                Role::Client => Side::Client,
                Role::Server => Side::Server,
            },
            totals,
            retired: AtomicBool::new(false),
        });
        if let Some(totals) = &shared.totals {
            totals.opened();
        }
        observe::opened(shared.side, "rdma", shared.peer);
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
        shared
    }

    /// Starts the connection: sends what the core opens with, hooks the provider's
    /// completions and spawns the completion task. From here on it serves and calls.
    pub(crate) fn start(self: &Arc<Self>) {
        {
            // A version 2 client's offer goes before anything else (seed 003 section 7).
            let mut st = self.state.lock();
            st.core.open(Instant::now());
            self.flush(&mut st);
        }
        let weak = Arc::downgrade(self);
        let hooked = self.conn.set_completion_hook(Box::new(move || {
            if let Some(conn) = weak.upgrade() {
                conn.on_completions();
            }
        }));
        self.hooked.store(hooked, Ordering::Release);
        tokio::spawn(completions(self.clone()));
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
        core_deadline(st) == st.task_deadline && !memory_unwatched(st) && !self.is_closed()
    }

    /// The core's counters.
    pub(crate) fn stats(&self) -> Stats {
        self.state.lock().core.stats()
    }

    /// Every counter of the connection now, and a way to ask, under the totals' lock, whether
    /// it has retired since (see [`Totals::snapshot`]).
    pub(crate) fn snapshot(&self) -> (ConnSnapshot, Box<dyn Fn() -> bool + '_>) {
        let (core, counts) = {
            let st = self.state.lock();
            (st.core.stats(), st.counts)
        };
        let snapshot = ConnSnapshot {
            core,
            pool: self.pool.stats(),
            counts,
        };
        (snapshot, Box::new(|| self.retired.load(Ordering::Acquire)))
    }

    /// The version this side's calls go in.
    pub(crate) fn version(&self) -> u32 {
        self.state.lock().core.version()
    }

    /// The transport properties the peer advertised (version 2).
    pub(crate) fn peer_properties(&self) -> Vec<crate::transport::header::Property> {
        self.state.lock().core.peer_properties().to_vec()
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

    /// Gives back what the connection keeps registered for reuse (its free send buffers and
    /// pool buffers) if nothing was sent or received since the last look and no call is in
    /// progress: an idle connection then holds no registered memory beyond its receives.
    /// Returns the bytes released.
    pub(crate) fn release_if_idle(&self) -> usize {
        let mut st = self.state.lock();
        let activity = st.counts.bytes_sent + st.counts.bytes_received;
        if activity != st.idle_mark {
            st.idle_mark = activity;
            return 0;
        }
        if st.core.calls_in_progress() > 0 || !st.posted.is_empty() {
            return 0;
        }
        let send = std::mem::take(&mut st.send_buffers);
        drop(st);
        let released: usize = send.iter().map(MemoryRegion::len).sum();
        drop(send);
        released + self.pool.release_free()
    }

    /// Stops taking calls and closes once every call already handed to the server has been
    /// answered and its reply sent. Calls the core hands over from now on are dropped
    /// unanswered: their callers see the connection close, as when a server goes away, and
    /// may retransmit elsewhere.
    pub(crate) fn shut_down(self: &Arc<Self>) {
        self.draining.store(true, Ordering::Release);
        let mut st = self.state.lock();
        self.flush(&mut st);
    }

    /// Completes when the connection has closed.
    pub(crate) async fn closed(&self) {
        let mut signal = self.closed_signal.subscribe();
        // The sender lives as long as `self`: this only ends when the flag is raised.
        let _ = signal.wait_for(|closed| *closed).await;
    }

    /// Closes the connection (this side's doing, `reason`): every waiting call fails with
    /// `Closed`.
    pub(crate) fn close(self: &Arc<Self>, reason: CloseReason) {
        let mut st = self.state.lock();
        self.close_locked(&mut st, reason);
    }

    fn close_locked(self: &Arc<Self>, st: &mut State, reason: CloseReason) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(Some(sweeper)) = self.sweeper.get() {
            sweeper.abort();
        }
        st.core.close();
        self.deliver(st);
        let reason = if self.conn.device_removed() {
            CloseReason::DeviceRemoved
        } else {
            reason
        };
        observe::closed(self.side, "rdma", self.peer, reason);
        if let Some(totals) = &self.totals {
            let last = ConnSnapshot {
                core: st.core.stats(),
                pool: self.pool.stats(),
                counts: st.counts,
            };
            totals.retire(&last, || self.retired.store(true, Ordering::Release));
        }
        self.close_notify.notify_one();
        self.closed_signal.send_replace(true);
        // On the connection's own runtime: this may run on a provider's thread (a completion
        // hook). Once that runtime is gone (a client dropped after its runtime's `block_on`),
        // the task is dropped unrun and the provider connection closes with its last handle.
        let conn = self.conn.clone();
        self.runtime.spawn(async move {
            let _ = conn.disconnect().await;
        });
    }

    /// The `protocol_error` event for RDMA_ERRORs the core sent since the last one told.
    #[cold]
    fn tell_errors_sent(&self, st: &mut State) {
        let sent = st.core.stats().errors_sent;
        if sent > st.errors_told {
            let detail = format!("{} RDMA_ERROR message(s)", sent - st.errors_told);
            st.errors_told = sent;
            observe::protocol_error("rdma", self.peer, "rdma_error_sent", &detail, false);
        }
    }

    fn deliver(self: &Arc<Self>, st: &mut State) {
        while let Some(event) = st.core.poll_event() {
            match event {
                Event::Reply { call, result } => {
                    match &result {
                        Ok(_) => st.counts.replies += 1,
                        Err(
                            e @ (TransportError::RdmaChunk
                            | TransportError::RdmaVersion { .. }
                            | TransportError::RdmaRefused(_)),
                        ) => observe::protocol_error(
                            "rdma",
                            self.peer,
                            "rdma_error_received",
                            e,
                            false,
                        ),
                        Err(_) => {}
                    }
                    if let Some(waiter) = st.waiters.get_mut(&call) {
                        waiter.finish(result);
                    }
                }
                Event::Call(call) if self.draining.load(Ordering::Acquire) => {
                    st.core.discard_call(call.id);
                }
                Event::Call(call) => {
                    st.counts.calls += 1;
                    st.calls.push(call);
                    if st.grant.is_some() {
                        self.grow_grant(st);
                    }
                }
                Event::Fatal(why) => {
                    observe::protocol_error("rdma", self.peer, "fatal", &why, true);
                    self.close_locked(st, fatal_reason(&why));
                }
                Event::Negotiated { version } => {
                    tracing::debug!(
                        target: observe::CONNECTIONS,
                        event = "version_settled",
                        peer = %self.peer,
                        version,
                        "RPC-over-RDMA version settled"
                    );
                    if let Some(versions) = &self.versions {
                        versions.remember(self.peer, version);
                    }
                }
            }
        }
    }

    /// Takes one completion.
    fn complete(self: &Arc<Self>, st: &mut State, c: Completion) {
        if c.opcode == WcOpcode::Recv || c.wr_id & RECV != 0 {
            if c.status != WcStatus::Success {
                if c.status != WcStatus::Flushed {
                    tracing::warn!(status = %c.status, peer = %self.peer, "a receive failed");
                }
                return self.close_locked(st, failed(c.status));
            }
            let Some(recv) = &self.recv else {
                return self.complete_shared(st, c);
            };
            let slot = (c.wr_id & !RECV) as usize;
            let start = slot * self.recv_size;
            let len = (c.byte_len as usize).min(self.recv_size);
            st.counts.bytes_received += len as u64;
            metrics::bytes(self.side, "rdma", false, len as u64);
            // The receive buffer is read in place, under its lock, which the provider takes
            // too to place data: hints to the provider wait until it is released.
            let mut mem = HintsLater::new(&self.pool);
            recv.with_slice(|all| {
                let message = &all[start..start + len];
                note_nomsg(st, message);
                st.core.handle_recv(message, c.invalidated_rkey, &mut mem)
            });
            mem.finish();
            let repost = Sge::new(recv, start..start + self.recv_size)
                .and_then(|sge| self.conn.post_recv(RecvWr::new(c.wr_id, sge)));
            if repost.is_err() {
                return self.close_locked(st, CloseReason::Error);
            }
            return;
        }
        st.sq_used = st.sq_used.saturating_sub(1);
        match st.take_posted(c.wr_id) {
            Some(Posted::Send(mr)) => st.send_buffers.push(mr),
            Some(Posted::Invalidate(buf)) if c.status == WcStatus::Success => {
                crate::transport::core::Buf::mark_invalidated(&buf);
            }
            _ => {}
        }
        st.core
            .handle_completion(c.wr_id, c.status, &mut &self.pool);
        if c.status != WcStatus::Success {
            if c.status != WcStatus::Flushed {
                tracing::warn!(status = %c.status, opcode = ?c.opcode, peer = %self.peer,
                    "an operation failed: closing");
            }
            self.close_locked(st, failed(c.status));
        }
    }

    /// A message received into a buffer of the shared receive queue: read in place, and the
    /// buffer given back to the queue.
    fn complete_shared(self: &Arc<Self>, st: &mut State, c: Completion) {
        let len = (c.byte_len as usize).min(self.recv_size);
        st.counts.bytes_received += len as u64;
        metrics::bytes(self.side, "rdma", false, len as u64);
        let mut mem = HintsLater::new(&self.pool);
        let took = self.conn.take_shared(&c, |message| {
            let message = &message[..len.min(message.len())];
            note_nomsg(st, message);
            st.core.handle_recv(message, c.invalidated_rkey, &mut mem)
        });
        mem.finish();
        if let Err(e) = took {
            tracing::warn!(error = %e, peer = %self.peer, "taking a shared receive failed");
            self.close_locked(st, CloseReason::Error);
        }
    }

    /// A call came: when the peer uses every credit granted from the shared receive queue,
    /// the grant grows if the queue has room ([`SharedGrant::grow`]), from the next reply on.
    fn grow_grant(&self, st: &mut State) {
        let in_use = st.core.calls_in_progress();
        let Some(grant) = st.grant.as_mut() else {
            return;
        };
        if let Some(credits) = grant.grow(in_use) {
            let receives = grant.receives();
            st.core.set_credits(credits);
            self.conn.limit_shared_receives(receives);
        }
    }

    /// Whether the RDMA_NOMSG message `xid` came while a subscriber wanted call spans (and
    /// forgets it): the call was long (a server), or the reply came in the Reply chunk (a
    /// client).
    fn took_nomsg(st: &mut State, xid: u32) -> bool {
        match st.nomsg.iter().position(|&x| x == xid) {
            Some(at) => st.nomsg.remove(at).is_some(),
            None => false,
        }
    }

    /// Applies what the configuration call settled ([`Core::configure`]).
    pub(crate) fn configure(&self, peer_recv_size: usize, max_reads: usize, align: Option<u32>) {
        self.state
            .lock()
            .core
            .configure(peer_recv_size, max_reads, align);
    }

    /// The peer speaks the default protocol ([`Core::leave_mode_2004`]).
    pub(crate) fn leave_mode_2004(&self, peer_recv_size: usize) {
        self.state.lock().core.leave_mode_2004(peer_recv_size);
    }
}

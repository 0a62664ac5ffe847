//! The thin tokio driver: moves bytes between a TCP stream and a [`Core`], and wakes
//! completion pollers. Two tasks per connection: receive (socket -> core, with direct
//! placement of tagged payloads and large Sends into registered memory) and transmit (core ->
//! socket, with vectored writes straight from registered memory).
//!
//! Whoever gives the core something to send (a `post_send` caller, the receive task after an
//! RDMA Read Request) writes it to the socket itself when no one else is writing and the
//! socket has room ([`Shared::transmit_now`], non-blocking, one batch), as Linux siw does:
//! handing every message to the transmit task would cost a task wake-up (often a cross-thread
//! one) per message. The transmit task takes over what does not fit, waits for room, and
//! shuts the stream down.
//!
//! When input both completes work and asks for a reply (a Send arriving with a confirmation
//! probe, whose Read Response is due) and a task is waiting for completions, the receive task
//! leaves the reply to whoever posts next on the connection ([`Shared::after_input`]): the woken
//! poller, or a task it wakes in turn (an RPC caller), usually posts its own message right
//! away, and both go out in one write, so the peer is woken once per message instead of twice.
//! The reply waits at most until the next post, the receive task's next input (a reply still
//! unsent then goes out at once: nobody posted for a whole message), or, when the connection
//! goes quiet, until the process's flusher thread comes round ([`REPLY_LIMIT`], see
//! [`flusher`]), whichever comes first.
//!
//! Nothing here wakes a second task on the way: a task whose poll wakes two others makes
//! tokio's multi-thread scheduler move the first out of the waking worker's LIFO slot and
//! unpark another worker to steal it, and on a VM such a cross-vCPU wake-up costs more than
//! the whole round trip. A task waiting for completions reads the stream itself (see
//! [`Receiver`]): per message the chain is socket -> completion poller, one wake-up, as for a
//! plain TCP reader. Without a waiting poller the receive task reads, and wakes the poller that
//! comes later or the task the consumer's hook hands the completion to. A consumer that set a
//! completion hook (the RPC-over-RDMA transport does) takes the completions in the receive task
//! itself; a reply is then left to the next poster as it is for a waiting poller, since the hook
//! usually posts or wakes the task that will.
//!
//! Measured with `benches/rdma_soft.rs` (64-byte ping-pong, confirmed completions, 2-vCPU
//! VM, raw TCP 4.1 us): waking the transmit task when the poller resumed (the earlier design)
//! cost 6.3 us in a task on two workers and 6.1 us on a current-thread runtime; RPC-over-RDMA
//! NULL calls, where the poller is not the task that posts next, paid a third write and a
//! cross-worker wake-up per call (28-30 us instead of 9 on two workers).
//!
//! The poller reading the stream, with the fast paths of the core, took the provider's time
//! above raw TCP per round trip from 1.72-1.84 us to 0.84-0.95 us in a task on two workers and
//! from 1.88-2.01 us to 1.37-1.45 us on a current-thread runtime (`-- latency`, two
//! alternating runs of each build, 2-vCPU VM); instructions per round trip, both ends, 12,973
//! -> 10,989 and 11,908 -> 9,821 (`scripts/soft-profile --round-trip`). An earlier try of the
//! same idea measured no faster: it handed the socket's readiness back and forth through
//! tokio, two registrations per message; here the stream always holds one waker of the
//! connection's own ([`ReadWake`]), which forwards each wake-up, and a poller whose waker is
//! registered and not yet woken does not read at all.
//!
//! Tried and left out: reading directly placed payloads one segment at a time (see
//! `read_direct`).

use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
// std's locks, not parking_lot's as in the transports: with parking_lot's here a 64 B round
// trip cost 444 instructions fewer (9,580 -> 9,136, callgrind), but 1 MiB RDMA Reads in one
// process ran 3,590-3,895 MB/s against 3,968-4,234 (`rdma_soft -- throughput`, four alternating
// runs): these locks are contended while bulk data moves (presumably parking_lot's waiters,
// which yield the CPU several times before they sleep, cost more there; not measured apart).
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, TryLockError};
use std::task::{Context, Poll, Waker};

use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::core::{Core, ReadHint, State, Transmit};
use super::tap::ConnTap;
use crate::rdma::{Completion, CompletionHook, MemoryRegion, SendOp, SendWr};

mod flusher;
mod poller;
mod read_wake;
mod receive;
mod transmit;

#[cfg(test)]
mod tests;

pub(crate) use poller::NextCompletion;
pub(crate) use read_wake::{FlushEntry, ReadWake};
use receive::rx_loop;
pub(crate) use receive::Receiver;
use transmit::{tx_loop, write_some};

/// About the longest a reply left to the next poster waits (see the module documentation)
/// when nobody posts and no input arrives: the flusher's period. Only confirmations wait (never
/// data), so this only delays the peer's completions on a connection that went quiet.
const REPLY_LIMIT: std::time::Duration = std::time::Duration::from_millis(10);

/// A Send or RDMA Write gathering more than this makes the outbound traffic bulk (see
/// [`Shared::outbound_bulk`]): more than the core's batch without CRC, one FPDU.
const OUTBOUND_BULK: u64 = 64 * 1024;

/// State shared by a connection handle and its driver tasks.
pub(crate) struct Shared {
    core: Mutex<Core>,
    /// The bytes on their way to the socket; whoever holds the lock is the one writer (lock
    /// order: this, then `core`).
    tx: Mutex<Transmit>,
    /// The socket's write half, once the driver has started.
    wr: OnceLock<OwnedWriteHalf>,
    /// The socket's read half and what was read from it, once the driver has started; whoever
    /// holds the lock reads (see [`Receiver`]).
    rx: Mutex<Option<Receiver>>,
    /// Where the stream's wake-ups go ([`Shared::read_waker`] wakes it).
    read_wake: Arc<ReadWake>,
    /// The waker the stream is given, made of [`Shared::read_wake`].
    read_waker: Waker,
    tx_notify: Notify,
    /// The transmit task found [`Shared::tx`] held and waits to be told when it is released
    /// ([`TxLock`]), rather than sleep its worker on the lock; a releaser outside the runtime's
    /// tasks takes its step instead ([`Shared::step_for_transmit_task`]).
    tx_waiting: AtomicBool,
    /// The wakers of the pollers waiting in [`Shared::next_completion`], all woken when
    /// completions come ([`Shared::wake_pollers`]). A plain list: tokio's `Notify` cost about
    /// 1000 instructions per round trip here (callgrind), this one lock and a wake-up.
    cq_waiters: Mutex<Vec<Waker>>,
    /// How many wakers [`Shared::cq_waiters`] holds (read without its lock).
    pollers: AtomicUsize,
    /// The consumer's hook, called with the pollers ([`Connection::set_completion_hook`]).
    ///
    /// [`Connection::set_completion_hook`]: crate::rdma::Connection::set_completion_hook
    pub(crate) hook: OnceLock<CompletionHook>,
    /// The receive task left what the core has to send to whoever posts next.
    deferred: AtomicBool,
    /// What the core expects to come in, as of the last post or input (a Read Request just
    /// sent sets it before its response comes): [`Shared::bulk`],
    /// [`Shared::scatter_expected`] and [`Shared::read_hint`], in one word so that noting them
    /// is one load.
    inbound: AtomicUsize,
    /// The last Send or RDMA Write posted gathered more than [`OUTBOUND_BULK`] bytes: a bulk
    /// transfer is going out, and what comes in meanwhile is mostly the peer's confirmations
    /// ([`Shared::outbound_bulk`]).
    outbound_bulk: AtomicBool,
    /// The connection's place on the flusher's list.
    flush: Arc<FlushEntry>,
    tap: Option<ConnTap>,
}

/// What the receive task found after feeding the core.
struct Input {
    transmit: bool,
    /// All there is to send is confirmations ([`Core::owes_only_confirmations`]).
    confirmations: bool,
    completions: bool,
    established: bool,
    /// A tagged segment's payload is to be read straight into its registration next
    /// ([`Core::direct_placement`]); only input sets one up, so the receive task need not lock
    /// the core again to learn it (one lock fewer per input).
    direct: bool,
    /// The completion a reading poller took under the same lock ([`Shared::receive_step`]).
    taken: Option<Completion>,
}

impl Input {
    /// Reads the core's state, first taking a completion if `take`, and unlocks it.
    fn of(mut core: MutexGuard<'_, Core>, take: bool) -> Input {
        let taken = if take { core.poll_completion() } else { None };
        let completions = core.has_completions();
        // Only looked at when some completion came, taken here or left for a poller (see
        // `Shared::after_input`).
        let confirmations = (completions || taken.is_some()) && core.owes_only_confirmations();
        Input {
            transmit: confirmations || core.wants_transmit(),
            confirmations,
            completions,
            established: core.state() == State::Established,
            direct: core.direct_placement().is_some_and(|d| d.remaining > 0),
            taken,
        }
    }
}

/// What one transmit step left behind.
struct TxStep {
    /// Bytes still queued (the socket is full).
    pending: bool,
    /// The core wants the stream shut down once everything is written.
    shutdown: bool,
    /// The core has more to send than fitted in the batch.
    more: bool,
    /// Completions are waiting for a poller.
    completions: bool,
}

impl Shared {
    pub(crate) fn new(core: Core, tap: Option<ConnTap>) -> Arc<Shared> {
        Arc::new_cyclic(|me| {
            let flush = Arc::new(FlushEntry {
                listed: AtomicBool::new(false),
                conn: me.clone(),
            });
            let read_wake = Arc::new(ReadWake::new(flush.clone()));
            Shared {
                core: Mutex::new(core),
                tx: Mutex::new(Transmit::new()),
                wr: OnceLock::new(),
                rx: Mutex::new(None),
                read_wake: read_wake.clone(),
                read_waker: Waker::from(read_wake),
                tx_notify: Notify::new(),
                tx_waiting: AtomicBool::new(false),
                cq_waiters: Mutex::new(Vec::new()),
                pollers: AtomicUsize::new(0),
                hook: OnceLock::new(),
                deferred: AtomicBool::new(false),
                inbound: AtomicUsize::new(0),
                outbound_bulk: AtomicBool::new(false),
                flush,
                tap,
            }
        })
    }

    /// Locks the core (a poisoned lock is still usable: the core never panics mid-update by
    /// design, and a panic elsewhere must not wedge the connection).
    pub(crate) fn core(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes whoever may have work after a core update.
    pub(crate) fn kick(&self) {
        self.tx_notify.notify_one();
        self.completions_ready();
    }

    /// Sends what the core has to send from the calling thread: one batch, without blocking,
    /// if no one else is writing. Whatever is left (the socket is full, more than a batch, a
    /// write error, the shutdown) goes to the transmit task.
    pub(crate) fn transmit_now(&self) {
        self.transmit_from(true);
    }

    fn transmit_from(&self, hook: bool) {
        // Nothing to post: nothing to refuse.
        let _ = self.transmit_with(hook, None);
    }

    /// Posts `wr` and sends it, with what else the core has to send, from the calling thread
    /// ([`Shared::transmit_now`]), under one lock of the core. Completions this makes ready (a
    /// request that completes as it is written) wake pollers but do not call the consumer's
    /// hook; they are the poster's to take ([`Connection::set_completion_hook`]).
    ///
    /// [`Connection::set_completion_hook`]: crate::rdma::Connection::set_completion_hook
    pub(crate) fn post_send(&self, wr: SendWr) -> crate::rdma::Result<()> {
        self.note_outbound(&wr);
        self.transmit_with(false, Some(wr))
    }

    /// [`Shared::post_send`] for a list: every request is posted under one lock of the core
    /// before anything is written, so that their FPDUs leave in as few socket writes as a
    /// batch holds ([`Connection::post_sends`]). On a refusal, those before it are posted (and
    /// sent) and those from it on are not.
    ///
    /// [`Connection::post_sends`]: crate::rdma::Connection::post_sends
    pub(crate) fn post_sends(&self, wrs: Vec<SendWr>) -> crate::rdma::Result<()> {
        if let Some(last) = wrs
            .iter()
            .rfind(|wr| matches!(wr.op, SendOp::Send { .. } | SendOp::RdmaWrite { .. }))
        {
            self.note_outbound(last);
        }
        self.transmit_with(false, wrs)
    }

    /// Notes whether `wr`, a Send or RDMA Write about to be posted, makes the outbound traffic
    /// bulk ([`Shared::outbound_bulk`]); other requests leave it as it is.
    fn note_outbound(&self, wr: &SendWr) {
        if !matches!(wr.op, SendOp::Send { .. } | SendOp::RdmaWrite { .. }) {
            return;
        }
        let bulk = wr.byte_len() > OUTBOUND_BULK;
        if self.outbound_bulk.load(Ordering::Relaxed) != bulk {
            self.outbound_bulk.store(bulk, Ordering::Relaxed);
        }
    }

    /// The last Send or RDMA Write posted was larger than [`OUTBOUND_BULK`].
    pub(super) fn outbound_bulk(&self) -> bool {
        self.outbound_bulk.load(Ordering::Relaxed)
    }

    /// [`Shared::transmit_from`], posting `posts` first, in order (the first refusal is
    /// returned; those before it stay posted and are sent).
    fn transmit_with(
        &self,
        hook: bool,
        posts: impl IntoIterator<Item = SendWr>,
    ) -> crate::rdma::Result<()> {
        let post_only = |posts| {
            let posted = post_all(&mut self.core(), posts);
            self.tx_notify.notify_one();
            posted
        };
        let Some(wr) = self.wr.get() else {
            return post_only(posts);
        };
        // Another writer holding the lock: the transmit task is told to go round once more.
        let Some(mut out) = self.try_tx() else {
            return post_only(posts);
        };
        let (posted, step) = self.post_and_transmit(wr, &mut out, posts);
        drop(out);
        match step {
            Ok(step) => {
                match (step.completions, hook) {
                    (true, true) => self.completions_ready(),
                    (true, false) => self.wake_pollers(),
                    (false, _) => {}
                }
                if step.pending || step.shutdown || step.more {
                    self.tx_notify.notify_one();
                }
            }
            // The transmit task meets the error again and closes the connection.
            Err(_) => self.tx_notify.notify_one(),
        }
        posted
    }

    /// The transmit lock, unless another writer holds it (a poisoned lock is still usable, as
    /// for the core).
    pub(super) fn try_tx(&self) -> Option<TxLock<'_>> {
        Some(TxLock {
            shared: self,
            out: Some(self.try_tx_guard()?),
        })
    }

    /// [`Shared::try_tx`]'s lock alone: its release tells nobody.
    fn try_tx_guard(&self) -> Option<MutexGuard<'_, Transmit>> {
        match self.tx.try_lock() {
            Ok(out) => Some(out),
            Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// The transmit task's [`Shared::try_tx`]: when the lock is held, asks its holder to tell
    /// the transmit task when it lets go ([`TxLock`]), and tries once more (the holder may
    /// have let go before it saw the request). `None`: the transmit task waits to be told.
    /// Only the transmit task asks, and only it withdraws the request, once it has the lock, or
    /// whoever takes its step for it ([`Shared::step_for_transmit_task`]): another writer that
    /// takes the lock meanwhile may not send (its post refused), so its release tells the task
    /// all the same.
    pub(super) fn try_tx_or_wait(&self) -> Option<TxLock<'_>> {
        let out = self.try_tx().or_else(|| {
            self.tx_waiting.store(true, Ordering::SeqCst);
            self.try_tx()
        })?;
        if self.tx_waiting.load(Ordering::Relaxed) {
            self.tx_waiting.store(false, Ordering::SeqCst);
        }
        Some(out)
    }

    /// The transmit task waits for the transmit lock ([`Shared::try_tx_or_wait`]), which a
    /// thread outside the runtime's tasks has just released: takes the step the task would take
    /// on waking, once. True when nothing is left for the task (or another writer has the lock
    /// now, and its release looks at the request); false: the task is to be told.
    ///
    /// Telling it from there costs more than the step: tokio schedules the task through its
    /// shared queue and unparks an idle worker, which, finding work, unparks the other one. On
    /// a 2-vCPU VM those wake-ups moved a client in `block_on` and the worker answering it onto
    /// different vCPUs, where every message then wakes a halted vCPU: taking the step here, the
    /// 64-byte confirmed round trip (`rdma_soft -- latency/block_on`) kept both on one vCPU for
    /// 68 % of its round trips instead of 52 % (means of 8 alternating runs each; raw TCP 98 %).
    fn step_for_transmit_task(&self) -> bool {
        let Some(wr) = self.wr.get() else {
            return false;
        };
        // Its release tells nobody: whether the task is to be told is decided below.
        let Some(mut out) = self.try_tx_guard() else {
            return true;
        };
        // What the task asked for is done here; asked again meanwhile, it is told (below).
        self.tx_waiting.store(false, Ordering::SeqCst);
        let step = self.transmit_step(wr, &mut out);
        drop(out);
        // An error: the task meets it again and closes the connection.
        let Ok(step) = step else {
            return false;
        };
        if step.completions {
            self.completions_ready();
        }
        !(step.pending || step.shutdown || step.more || self.tx_waiting.load(Ordering::SeqCst))
    }

    /// Wakes whoever has work after the receive task or a reading poller (`poller`, whose
    /// waker is not woken: it is running) fed the core (`input`, see [`Input::of`]); true when
    /// a due reply was left to whoever posts next.
    fn after_input(&self, input: Input, poller: Option<&Waker>) -> bool {
        let Input {
            transmit,
            confirmations,
            completions,
            established,
            direct: _,
            taken: _,
        } = input;
        if !established {
            self.transmit_now();
            self.kick();
            return false;
        }
        // See the module documentation: the reply is left to whoever posts next when a
        // completion came, for a poller (even the reading one, which took it and returns it
        // now) or a hook. A reply left last time and still unsent goes out now, with this one.
        let left = confirmations
            && !self.deferred.load(Ordering::SeqCst)
            && (poller.is_some()
                || self.pollers.load(Ordering::SeqCst) > 0
                || self.hook.get().is_some());
        if left {
            self.deferred.store(true, Ordering::SeqCst);
        }
        if completions {
            self.completions_ready_except(poller);
        }
        if left {
            return true;
        }
        if transmit {
            self.transmit_now();
        }
        false
    }

    /// The flusher's check of a reading poller (see [`ReadWake`]): one woken for data a whole
    /// round ago ([`REPLY_LIMIT`]) that has not read since (a future kept but no longer polled,
    /// a task the runtime does not get to) no longer holds the stream: the receive task reads
    /// it. A wake-up newer than the last round's gets another round.
    fn rescue_reader(&self) {
        let rw = &self.read_wake;
        if !(rw.poller_reads.load(Ordering::SeqCst) && rw.woken.load(Ordering::SeqCst)) {
            return;
        }
        let wakes = rw.wakes.load(Ordering::SeqCst);
        if rw.stale_at.swap(wakes, Ordering::SeqCst) != wakes {
            return flusher::watch(&self.flush);
        }
        tracing::debug!("a poller woken a flusher round ago has not read: the receive task reads");
        rw.take_from_poller();
    }

    /// Sends a reply left to the next poster if it is still waiting.
    fn send_left_reply(&self) {
        if self.deferred.load(Ordering::SeqCst) {
            self.transmit_now();
        }
    }

    /// Completes what was written, queues one batch from the core, writes as much as the
    /// socket takes.
    fn transmit_step(&self, wr: &OwnedWriteHalf, out: &mut Transmit) -> io::Result<TxStep> {
        self.transmit_locked(wr, out, self.core())
    }

    /// [`Shared::transmit_step`] after posting `posts` ([`post_all`]), under the same lock of
    /// the core; the first result is the posts'.
    fn post_and_transmit(
        &self,
        wr: &OwnedWriteHalf,
        out: &mut Transmit,
        posts: impl IntoIterator<Item = SendWr>,
    ) -> (crate::rdma::Result<()>, io::Result<TxStep>) {
        let mut core = self.core();
        let posted = post_all(&mut core, posts);
        (posted, self.transmit_locked(wr, out, core))
    }

    /// [`Shared::transmit_step`] with the core locked (`core`, released before the write).
    fn transmit_locked(
        &self,
        wr: &OwnedWriteHalf,
        out: &mut Transmit,
        mut core: MutexGuard<'_, Core>,
    ) -> io::Result<TxStep> {
        // Whatever was deferred is polled now.
        self.deferred.store(false, Ordering::SeqCst);
        core.transmitted(out);
        let shutdown = core.poll_transmit(out);
        // More than a batch, or a Read the ORD holds back (which only input releases).
        let more = core.wants_transmit();
        let mut completions = core.has_completions();
        self.note_inbound(&core);
        drop(core);
        let res = write_some(self, wr, out);
        // Requests that complete as they are written (without confirmation) do so now.
        if out.completes_when_written() {
            let mut core = self.core();
            core.transmitted(out);
            completions = core.has_completions();
        }
        res.map(|()| TxStep {
            pending: !out.is_empty(),
            shutdown,
            more,
            completions,
        })
    }

    /// [`Connection::poll_input`]: the calling task reads the stream, as a poller does in
    /// [`Shared::next_completion`], with the consumer's hook called here for what it finds;
    /// `Ready` once input made completions ready (or ended the connection).
    ///
    /// [`Connection::poll_input`]: crate::rdma::Connection::poll_input
    pub(crate) fn poll_input(&self, cx: &mut Context<'_>) -> Poll<()> {
        // Bulk data coming in: the receive task reads it (see `NextCompletion::read`).
        if self.bulk() {
            self.read_wake.clear_reader(cx.waker());
            return Poll::Pending;
        }
        let Some(ticket) = self.read_wake.try_set_reader(cx.waker()) else {
            return Poll::Pending;
        };
        if self.read_wake.armed() {
            return Poll::Pending;
        }
        let step = {
            // The receive task reading: it calls the hook with what it finds.
            let Ok(mut guard) = self.rx.try_lock() else {
                return Poll::Pending;
            };
            let Some(rx) = guard.as_mut() else {
                return Poll::Pending;
            };
            self.receive_step(rx, false, true)
        };
        match step {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                self.kick();
                Poll::Ready(())
            }
            Poll::Ready(Some(input)) => {
                let completions = input.completions;
                if self.after_input(input, Some(cx.waker())) {
                    flusher::watch(&self.flush);
                }
                if completions {
                    return Poll::Ready(());
                }
                // Not a whole message yet, or work for the peer only (an RDMA Read to
                // answer): the receive task reads on (see `NextCompletion::read`).
                self.read_wake.hand_to_task(ticket);
                Poll::Pending
            }
        }
    }

    /// [`Connection::end_input`].
    ///
    /// [`Connection::end_input`]: crate::rdma::Connection::end_input
    pub(crate) fn end_input(&self, waker: &Waker) {
        self.read_wake.clear_reader(waker);
    }

    /// The peer is about to write into `mr` ([`Core::expect_write`]): the next read takes only
    /// the header when the buffer is empty.
    pub(crate) fn expect_write(&self, mr: &MemoryRegion) {
        let core = self.core();
        core.expect_write(mr);
        self.note_inbound(&core);
    }

    /// Records whether bulk data is on its way in and how the next read should take it (see
    /// [`Shared::inbound`]).
    fn note_inbound(&self, core: &Core) {
        let hint = core.read_hint();
        let inbound = hint.hold << 4
            | usize::from(core.scatter_expected()) << 3
            | usize::from(hint.at_fpdu) << 2
            | usize::from(hint.expect_more) << 1
            | usize::from(core.awaits_data());
        if self.inbound.load(Ordering::Relaxed) != inbound {
            self.inbound.store(inbound, Ordering::Relaxed);
        }
    }

    /// Bulk data is on its way in ([`Core::awaits_data`]): pollers leave the stream to the
    /// receive task (see [`Receiver`]).
    fn bulk(&self) -> bool {
        self.inbound.load(Ordering::Relaxed) & 1 != 0
    }

    /// The next read may put a Send's payload straight into its receive
    /// ([`Core::scatter_target`]).
    fn scatter_expected(&self) -> bool {
        self.inbound.load(Ordering::Relaxed) & 8 != 0
    }

    /// How the next read into the receive buffer should take what comes
    /// ([`Core::read_hint`]).
    fn read_hint(&self) -> ReadHint {
        let inbound = self.inbound.load(Ordering::Relaxed);
        ReadHint {
            hold: inbound >> 4,
            at_fpdu: inbound & 4 != 0,
            expect_more: inbound & 2 != 0,
        }
    }

    /// The oldest completion, if any. Finding none, the caller is about to wait: a
    /// confirmation probe held back while completions were left to take is sent now
    /// ([`Core::probe_held_back`]).
    #[inline]
    pub(crate) fn take_completion(&self) -> Option<Completion> {
        let mut core = self.core();
        if let Some(c) = core.poll_completion() {
            return Some(c);
        }
        if core.probe_held_back() {
            drop(core);
            self.transmit_now();
        }
        None
    }

    /// The next completion. Without a completion hook, a poller that finds none reads the
    /// stream itself when nobody else is reading (see [`Receiver`]).
    pub(crate) fn next_completion(&self) -> NextCompletion<'_> {
        NextCompletion::new(self)
    }

    /// Wakes every poller waiting for completions (the core has some, or changed state).
    /// Always under the list's lock, after the core was updated: a poller registers under that
    /// lock before it looks at the core once more, so either it is on the list or it sees the
    /// update.
    fn wake_pollers(&self) {
        self.wake_pollers_except(None);
    }

    /// [`Shared::wake_pollers`], but `running` (a poller that is running: it looks at the core
    /// before it waits again) only leaves the list.
    fn wake_pollers_except(&self, running: Option<&Waker>) {
        self.read_wake.wake_poller_except(running);
        if self.pollers.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut list = self.cq_waiters.lock().unwrap_or_else(|e| e.into_inner());
        let wake = |w: Waker| {
            if !running.is_some_and(|r| r.will_wake(&w)) {
                w.wake();
            }
        };
        match list.len() {
            0 => drop(list),
            // The list keeps its allocation.
            1 => {
                let waker = list.pop();
                self.pollers.store(0, Ordering::SeqCst);
                drop(list);
                waker.into_iter().for_each(wake);
            }
            _ => {
                let all = std::mem::take(&mut *list);
                self.pollers.store(0, Ordering::SeqCst);
                drop(list);
                all.into_iter().for_each(wake);
            }
        }
    }

    /// Completions are ready, or the core changed state: wakes the pollers, then calls the
    /// consumer's hook, if one is set, with no lock held.
    fn completions_ready(&self) {
        self.completions_ready_except(None);
    }

    /// [`Shared::completions_ready`] with [`Shared::wake_pollers_except`].
    fn completions_ready_except(&self, running: Option<&Waker>) {
        self.wake_pollers_except(running);
        if let Some(hook) = self.hook.get() {
            hook();
        }
    }
}

/// The transmit lock, held ([`Shared::try_tx`]). Released, it tells the transmit task if that
/// waits for it ([`Shared::try_tx_or_wait`]), or, outside the runtime's tasks, takes the task's
/// step itself ([`Shared::step_for_transmit_task`]); the request is looked at only after the
/// lock is released, and the task asks before its second try, so either that try finds the
/// lock free or the holder sees the request, on every way out, an error's included.
pub(super) struct TxLock<'a> {
    shared: &'a Shared,
    out: Option<MutexGuard<'a, Transmit>>,
}

/// Posts `posts` to `core` in order, stopping at the first refusal.
fn post_all(core: &mut Core, posts: impl IntoIterator<Item = SendWr>) -> crate::rdma::Result<()> {
    posts.into_iter().try_for_each(|wr| core.post_send(wr))
}

impl std::ops::Deref for TxLock<'_> {
    type Target = Transmit;

    fn deref(&self) -> &Transmit {
        self.out.as_deref().expect("held until dropped")
    }
}

impl std::ops::DerefMut for TxLock<'_> {
    fn deref_mut(&mut self) -> &mut Transmit {
        self.out.as_deref_mut().expect("held until dropped")
    }
}

impl Drop for TxLock<'_> {
    fn drop(&mut self) {
        drop(self.out.take());
        let shared = self.shared;
        if !shared.tx_waiting.load(Ordering::SeqCst) {
            return;
        }
        // Outside the runtime's tasks (a caller in `block_on`, the flusher), telling the task is
        // a wake-up from outside: see `Shared::step_for_transmit_task`.
        if tokio::task::try_id().is_none() && shared.step_for_transmit_task() {
            return;
        }
        shared.tx_notify.notify_one();
    }
}

/// Starts the driver tasks; returns (receive task, transmit task).
pub(crate) fn spawn(shared: Arc<Shared>, stream: TcpStream) -> (JoinHandle<()>, JoinHandle<()>) {
    let (rd, wr) = stream.into_split();
    if shared.wr.set(wr).is_err() {
        unreachable!("a connection's driver starts once");
    }
    *shared.rx.lock().unwrap_or_else(|e| e.into_inner()) = Some(Receiver::new(rd));
    let rx = tokio::spawn(rx_loop(shared.clone()));
    let tx = tokio::spawn(tx_loop(shared));
    (rx, tx)
}

//! The thin tokio driver: moves bytes between a TCP stream and a [`Core`], and wakes
//! completion pollers. Two tasks per connection: receive (socket -> core, with direct
//! placement of tagged payloads into registered memory) and transmit (core -> socket, with
//! vectored writes straight from registered memory).
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

use std::io::{self, IoSlice, IoSliceMut};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::{Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::core::{Core, DirectPlacement, State, Transmit};
use super::tap::{ConnTap, Direction};
use super::wire::{ddp, mpa};
use crate::rdma::{Completion, CompletionHook, SendWr};

/// About the longest a reply left to the next poster waits (see the module documentation)
/// when nobody posts and no input arrives: the flusher's period. Only confirmations wait (never
/// data), so this only delays the peer's completions on a connection that went quiet.
const REPLY_LIMIT: std::time::Duration = std::time::Duration::from_millis(10);

/// Receive buffer size; larger than any FPDU (MULPDU <= 65535 plus markers). Only the pages
/// reads reach are touched (a connection of small messages uses the first few).
///
/// FPDUs that are not placed directly (small ones, and all of them under markers, whose checks
/// come before placement) are read into it: when CRC too meant no direct placement, 1 MiB reads
/// moved 1 MiB RDMA Reads with CRC 1.4x as fast as 256 KiB ones, Writes 1.03-1.17x (fewer
/// reads and wake-ups per byte; alternating rounds, `benches/rdma_soft.rs`, 2-vCPU VM).
const RX_BUF: usize = 1024 * 1024;

/// Most bytes one read takes into the receive buffer: about one FPDU. A large tagged segment
/// whose header comes in such a read has the rest of its payload read straight into its
/// registration (see [`read_direct`]); a read of everything the socket holds would bring in
/// the payloads of the segments behind it too, which the core then copies.
const READ_MAX: usize = 64 * 1024;

/// Most bytes a direct read takes after the placed payload (see [`read_direct`]): the core
/// copies those, so a larger share costs a copy; 256 KiB measured as fast as the whole buffer
/// for what it saves in reads, 1 MiB 8-14 % slower.
const DIRECT_AFTER: usize = 256 * 1024;

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
    /// Bulk data is on its way in ([`Core::awaits_data`], as of the last post or input):
    /// pollers leave the stream to the receive task (see [`Receiver`]).
    bulk: AtomicBool,
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
        // Only looked at with completions (see `Shared::after_input`).
        let confirmations = completions && core.owes_only_confirmations();
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
                cq_waiters: Mutex::new(Vec::new()),
                pollers: AtomicUsize::new(0),
                hook: OnceLock::new(),
                deferred: AtomicBool::new(false),
                bulk: AtomicBool::new(false),
                flush,
                tap,
            }
        })
    }

    /// Locks the core (a lock that is never poisoned: the core never panics mid-update by
    /// design, and a panic elsewhere must not wedge the connection).
    pub(crate) fn core(&self) -> MutexGuard<'_, Core> {
        self.core.lock()
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
        self.transmit_with(false, Some(wr))
    }

    /// [`Shared::transmit_from`], posting `post` first if given (its refusal is returned).
    fn transmit_with(&self, hook: bool, post: Option<SendWr>) -> crate::rdma::Result<()> {
        let post_only = |post: Option<SendWr>| {
            if let Some(wr) = post {
                self.core().post_send(wr)?;
            }
            self.tx_notify.notify_one();
            Ok(())
        };
        let Some(wr) = self.wr.get() else {
            return post_only(post);
        };
        // The writer holding the lock is told to go round once more.
        let Some(mut out) = self.tx.try_lock() else {
            return post_only(post);
        };
        let step = match post {
            Some(post) => self.post_and_transmit(wr, &mut out, post)?,
            None => self.transmit_step(wr, &mut out),
        };
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
        Ok(())
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
        if completions {
            // See the module documentation. A reply left last time and still unsent goes out
            // now, with this one.
            if confirmations
                && !self.deferred.load(Ordering::SeqCst)
                && (poller.is_some()
                    || self.pollers.load(Ordering::SeqCst) > 0
                    || self.hook.get().is_some())
            {
                self.deferred.store(true, Ordering::SeqCst);
                self.completions_ready_except(poller);
                return true;
            }
            self.completions_ready_except(poller);
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
        let to = rw.targets();
        rw.poller_reads.store(false, Ordering::SeqCst);
        if let Some(task) = &to.task {
            task.wake_by_ref();
        }
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

    /// [`Shared::transmit_step`] after posting `post`, under the same lock of the core; the
    /// outer error is the post's refusal.
    fn post_and_transmit(
        &self,
        wr: &OwnedWriteHalf,
        out: &mut Transmit,
        post: SendWr,
    ) -> crate::rdma::Result<io::Result<TxStep>> {
        let mut core = self.core();
        core.post_send(post)?;
        Ok(self.transmit_locked(wr, out, core))
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
        self.note_bulk(&core);
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
        if self.bulk.load(Ordering::Relaxed) {
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
            let Some(mut guard) = self.rx.try_lock() else {
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

    /// Records whether bulk data is on its way in (see [`Shared::bulk`]).
    fn note_bulk(&self, core: &Core) {
        let bulk = core.awaits_data();
        if self.bulk.load(Ordering::Relaxed) != bulk {
            self.bulk.store(bulk, Ordering::Relaxed);
        }
    }

    /// The next completion. Without a completion hook, a poller that finds none reads the
    /// stream itself when nobody else is reading (see [`Receiver`]).
    pub(crate) fn next_completion(&self) -> NextCompletion<'_> {
        NextCompletion {
            shared: self,
            waker: None,
            reader: None,
        }
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
        let mut list = self.cq_waiters.lock();
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

/// A poller waiting in [`Shared::next_completion`]: its waker is on the list while it waits,
/// or it is the stream's reader (see [`Receiver`]). A future written out rather than an
/// `async fn`: a poll is then one call, not three.
pub(crate) struct NextCompletion<'a> {
    shared: &'a Shared,
    /// The waker last put on the list.
    waker: Option<Waker>,
    /// This poller's ticket as the stream's reader, once it has been it.
    reader: Option<u64>,
}

/// What a poller's read of the stream came to.
enum Reading {
    /// A completion.
    Done(Completion),
    /// Nothing more to read: the poller is the reader, woken when there is.
    Waiting,
    /// Someone else is reading.
    Busy,
}

impl Shared {
    /// Puts `waker` on the completion list (a reading poller that another displaced).
    fn push_waiter(&self, waker: Waker) {
        let mut list = self.cq_waiters.lock();
        if !list.iter().any(|w| w.will_wake(&waker)) {
            list.push(waker);
            self.pollers.store(list.len(), Ordering::SeqCst);
        }
    }
}

impl std::future::Future for NextCompletion<'_> {
    type Output = Completion;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Completion> {
        let this = &mut *self;
        let shared = this.shared;
        // A poller that has been the reader reads first: what it reads comes after any
        // completion already there, and it takes the oldest.
        if this.reader.is_none() || shared.hook.get().is_some() {
            if let Some(c) = shared.core().poll_completion() {
                return Poll::Ready(c);
            }
        }
        let reading = shared.hook.get().is_none()
            && match this.read(cx) {
                Reading::Done(c) => return Poll::Ready(c),
                // The reader is woken by the stream and by [`Shared::wake_pollers`].
                Reading::Waiting => true,
                Reading::Busy => false,
            };
        if !reading {
            this.register(cx.waker());
        }
        // A completion that came before the registration found no waker to wake.
        match shared.core().poll_completion() {
            Some(c) => Poll::Ready(c),
            None => Poll::Pending,
        }
    }
}

impl NextCompletion<'_> {
    fn register(&mut self, waker: &Waker) {
        let mut list = self.shared.cq_waiters.lock();
        if !list.iter().any(|w| w.will_wake(waker)) {
            list.push(waker.clone());
            self.shared.pollers.store(list.len(), Ordering::SeqCst);
        }
        if !self.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
            self.waker = Some(waker.clone());
        }
    }

    /// Reads the stream as the receive task would, when nobody else is reading, until a
    /// completion comes (returned) or nothing is left to read; then this poller is the one the
    /// stream's wake-ups go to (see [`Receiver`]).
    fn read(&mut self, cx: &mut Context<'_>) -> Reading {
        let shared = self.shared;
        // A bulk transfer coming in is read by the receive task, beside this poller's task: a
        // poller reading it took it in turns with the receive task, a hand-over per read (1 MiB
        // RDMA Reads 80-83 % of TCP's throughput instead of 84-90 %, `rdma_soft -- throughput`).
        if shared.bulk.load(Ordering::Relaxed) {
            if let Some(ticket) = self.reader {
                shared.read_wake.hand_to_task(ticket);
            }
            return Reading::Busy;
        }
        let (ticket, displaced) = shared.read_wake.set_poller(cx.waker());
        self.reader = Some(ticket);
        if let Some(other) = displaced {
            shared.push_waiter(other);
        }
        // The stream will wake this poller (just made the target) when bytes come: no read
        // can find any before.
        if shared.read_wake.armed() {
            return Reading::Waiting;
        }
        let step = {
            // Someone else reading (the receive task, another poller) wakes the pollers with
            // what it finds.
            let Some(mut guard) = shared.rx.try_lock() else {
                return Reading::Busy;
            };
            let Some(rx) = guard.as_mut() else {
                return Reading::Busy;
            };
            shared.receive_step(rx, true, true)
        };
        match step {
            Poll::Pending => Reading::Waiting,
            Poll::Ready(None) => {
                shared.kick();
                Reading::Busy
            }
            Poll::Ready(Some(mut input)) => {
                let taken = input.taken.take();
                if shared.after_input(input, Some(cx.waker())) {
                    flusher::watch(&shared.flush);
                }
                if let Some(c) = taken {
                    return Reading::Done(c);
                }
                // A message longer than one read, or a bulk transfer under way: the receive
                // task reads the rest, while this poller's task goes on with its own work on
                // another worker, as it did before pollers read (1 MiB RDMA Reads were slower
                // with the poller reading them).
                shared.read_wake.hand_to_task(ticket);
                Reading::Busy
            }
        }
    }
}

impl Drop for NextCompletion<'_> {
    /// Leaves the list, if still on it, and stops being the stream's reader.
    fn drop(&mut self) {
        if let Some(ticket) = self.reader {
            self.shared.read_wake.clear_poller(ticket);
        }
        let Some(mine) = &self.waker else { return };
        // Usually a wake-up took the whole list (see `Shared::wake_pollers`). `pollers` is the
        // list's length, stored under its lock after every change; this thread's own push
        // stored at least 1, so 0 means a later change emptied the list, waker and all.
        if self.shared.pollers.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut list = self.shared.cq_waiters.lock();
        if let Some(i) = list.iter().position(|w| w.will_wake(mine)) {
            list.swap_remove(i);
            self.shared.pollers.store(list.len(), Ordering::SeqCst);
        }
    }
}

/// The stream's read half and the bytes read from it that the core has not consumed.
///
/// # Who reads
///
/// The receive task reads whatever arrives, unless a poller waits for completions: then the
/// poller reads the stream itself, in its own task, and the stream's wake-ups go to it rather
/// than to the receive task. A message then costs one task wake-up (socket -> poller), as a
/// plain TCP reader pays, instead of two (socket -> receive task -> poller). Whoever holds the
/// lock of [`Shared::rx`] reads, without blocking; a poller that finds it taken waits on the
/// completion list for what the holder finds. The stream (tokio keeps one waker per direction
/// of a socket) always holds the connection's own waker, [`ReadWake`], which passes each
/// wake-up on to the poller that reads, or else to the receive task. With a completion hook
/// (which runs in the receive task, see [`Connection::set_completion_hook`]) pollers do not
/// read.
///
/// [`Connection::set_completion_hook`]: crate::rdma::Connection::set_completion_hook
pub(crate) struct Receiver {
    rd: OwnedReadHalf,
    buf: Vec<u8>,
    /// `buf[start..end]`: read and not yet consumed by the core.
    start: usize,
    end: usize,
    /// What the last input left: a direct placement to read into.
    direct_next: bool,
    /// The stream ended or failed, or the core left Full Operation: nothing more is read.
    done: bool,
}

/// The waker the stream holds: passes its wake-ups on to the reader of the moment (see
/// [`Receiver`]).
pub(crate) struct ReadWake {
    to: Mutex<ReadWakeTargets>,
    /// A poller is the reader ([`ReadWakeTargets::poller`]); read without the lock.
    poller_reads: AtomicBool,
    /// A wake-up came and nobody has read since (see [`ReadWake::clear_poller`]).
    woken: AtomicBool,
    /// The stream holds this waker for its next wake-up: the last read found nothing more
    /// (tokio registers a waker only then).
    registered: AtomicBool,
    /// Wake-ups passed on to a reading poller, counted.
    wakes: AtomicU64,
    /// The count at which the flusher last found a poller's wake-up unread ([`Shared::rescue_reader`]).
    stale_at: AtomicU64,
    /// The connection's place on the flusher's list: a poller woken is watched.
    flush: Arc<FlushEntry>,
}

/// A connection's place on the flusher's list (see [`flusher`]).
pub(crate) struct FlushEntry {
    /// The connection is on the list.
    listed: AtomicBool,
    conn: Weak<Shared>,
}

#[derive(Default)]
struct ReadWakeTargets {
    /// The receive task's waker.
    task: Option<Waker>,
    /// The waker of the last poller that read, kept when it stops (the next is often the same
    /// task: no clone then).
    poller: Option<Waker>,
    /// Changes with [`ReadWakeTargets::poller`]: who the reading poller is.
    ticket: u64,
}

impl ReadWake {
    fn new(flush: Arc<FlushEntry>) -> ReadWake {
        ReadWake {
            to: Mutex::new(ReadWakeTargets::default()),
            poller_reads: AtomicBool::new(false),
            woken: AtomicBool::new(false),
            registered: AtomicBool::new(false),
            wakes: AtomicU64::new(0),
            stale_at: AtomicU64::new(u64::MAX),
            flush,
        }
    }

    fn targets(&self) -> MutexGuard<'_, ReadWakeTargets> {
        self.to.lock()
    }

    /// The receive task's waker, when it changed.
    fn set_task(&self, waker: &Waker) {
        let mut to = self.targets();
        if !to.task.as_ref().is_some_and(|w| w.will_wake(waker)) {
            to.task = Some(waker.clone());
        }
    }

    /// The poller of `waker` reads from now on; returns its ticket, and the waker of the
    /// reading poller it displaced, if any (which must then wait on the completion list).
    fn set_poller(&self, waker: &Waker) -> (u64, Option<Waker>) {
        let mut to = self.targets();
        let mut displaced = None;
        if !to.poller.as_ref().is_some_and(|w| w.will_wake(waker)) {
            let old = to.poller.replace(waker.clone());
            if self.poller_reads.load(Ordering::SeqCst) {
                displaced = old;
            }
            to.ticket += 1;
        }
        self.poller_reads.store(true, Ordering::SeqCst);
        (to.ticket, displaced)
    }

    /// The task of `waker` reads from now on, unless another poller is the reader (then
    /// `None`); its ticket. Unlike [`ReadWake::set_poller`] it never displaces a reader: the
    /// consumers of [`Shared::poll_input`] are many callers of one connection, and each would
    /// otherwise take the stream from the last.
    fn try_set_reader(&self, waker: &Waker) -> Option<u64> {
        let mut to = self.targets();
        if !to.poller.as_ref().is_some_and(|w| w.will_wake(waker)) {
            if self.poller_reads.load(Ordering::SeqCst) {
                return None;
            }
            to.poller = Some(waker.clone());
            to.ticket += 1;
        }
        self.poller_reads.store(true, Ordering::SeqCst);
        Some(to.ticket)
    }

    /// The task of `waker` stops reading, if it is the reader (see [`ReadWake::clear_poller`]).
    fn clear_reader(&self, waker: &Waker) {
        if !self.poller_reads.load(Ordering::SeqCst) {
            return;
        }
        let ticket = {
            let to = self.targets();
            match &to.poller {
                Some(w) if w.will_wake(waker) => to.ticket,
                _ => return,
            }
        };
        self.clear_poller(ticket);
    }

    /// The poller of `ticket` stops reading, if it still is the reader: the receive task reads
    /// again, and is woken if a wake-up came that nobody has read yet.
    fn clear_poller(&self, ticket: u64) {
        if !self.poller_reads.load(Ordering::SeqCst) {
            return;
        }
        let to = self.targets();
        if to.ticket == ticket {
            self.poller_reads.store(false, Ordering::SeqCst);
            if self.woken.load(Ordering::SeqCst) {
                if let Some(task) = &to.task {
                    task.wake_by_ref();
                }
            }
        }
    }

    /// The poller of `ticket`, if it still is the reader, hands reading to the receive task,
    /// which it wakes.
    fn hand_to_task(&self, ticket: u64) {
        let to = self.targets();
        if to.ticket == ticket && self.poller_reads.load(Ordering::SeqCst) {
            self.poller_reads.store(false, Ordering::SeqCst);
            if let Some(task) = &to.task {
                task.wake_by_ref();
            }
        }
    }

    /// Wakes the reading poller, if there is one and it is not `running`.
    fn wake_poller_except(&self, running: Option<&Waker>) {
        if !self.poller_reads.load(Ordering::SeqCst) {
            return;
        }
        let to = self.targets();
        if let Some(w) = &to.poller {
            if self.poller_reads.load(Ordering::SeqCst) && !running.is_some_and(|r| r.will_wake(w))
            {
                w.wake_by_ref();
            }
        }
    }

    /// A reader is about to read: the wake-ups so far are taken care of.
    fn reading(&self) {
        if self.woken.load(Ordering::Relaxed) {
            self.woken.store(false, Ordering::SeqCst);
        }
        if self.registered.load(Ordering::Relaxed) {
            self.registered.store(false, Ordering::SeqCst);
        }
    }

    /// The stream holds this waker and has not woken it since: nothing has arrived to read.
    fn armed(&self) -> bool {
        self.registered.load(Ordering::SeqCst) && !self.woken.load(Ordering::SeqCst)
    }
}

impl std::task::Wake for ReadWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        let to = self.targets();
        if !self.poller_reads.load(Ordering::SeqCst) {
            if let Some(task) = &to.task {
                task.wake_by_ref();
            }
            return;
        }
        self.wakes.fetch_add(1, Ordering::SeqCst);
        if let Some(poller) = &to.poller {
            poller.wake_by_ref();
        }
        drop(to);
        // A poller woken here is expected to read soon; one whose future is kept but no longer
        // polled would hold the stream forever: the flusher checks (`Shared::rescue_reader`).
        flusher::watch(&self.flush);
    }
}

/// Starts the driver tasks; returns (receive task, transmit task).
pub(crate) fn spawn(shared: Arc<Shared>, stream: TcpStream) -> (JoinHandle<()>, JoinHandle<()>) {
    let (rd, wr) = stream.into_split();
    if shared.wr.set(wr).is_err() {
        unreachable!("a connection's driver starts once");
    }
    *shared.rx.lock() = Some(Receiver {
        rd,
        buf: vec![0u8; RX_BUF],
        start: 0,
        end: 0,
        direct_next: false,
        done: false,
    });
    let rx = tokio::spawn(rx_loop(shared.clone()));
    let tx = tokio::spawn(tx_loop(shared));
    (rx, tx)
}

/// The receive task: reads the stream into the core while no poller does (see [`Receiver`]).
async fn rx_loop(shared: Arc<Shared>) {
    std::future::poll_fn(|cx| {
        shared.read_wake.set_task(cx.waker());
        loop {
            let step = {
                let mut guard = shared.rx.lock();
                let Some(rx) = guard.as_mut() else {
                    return Poll::Ready(());
                };
                shared.receive_step(rx, false, false)
            };
            match step {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    shared.kick();
                    return Poll::Ready(());
                }
                Poll::Ready(Some(input)) => {
                    let established = input.established;
                    if shared.after_input(input, None) {
                        flusher::watch(&shared.flush);
                    }
                    if !established {
                        return Poll::Ready(());
                    }
                }
            }
        }
    })
    .await
}

impl Shared {
    /// One read from the stream, without blocking, fed to the core: what the core then holds
    /// (the caller acts on it with [`Shared::after_input`] once the receiver's lock is
    /// released). `Pending`: nothing to read; the stream wakes [`ReadWake`] when there is.
    /// `Ready(None)`: the stream ended or failed (the core is closed; [`Shared::kick`] is the
    /// caller's), or the core had already left Full Operation.
    ///
    /// With `take` (a reading poller), the oldest completion is taken under the same lock of
    /// the core ([`Input::taken`]). With `register` (a reader that may stop after this read:
    /// a poller, or a task in [`Shared::poll_input`]), [`ReadWake`] is registered for the
    /// stream's next wake-up after a read ([`Shared::wait_for_more`]).
    fn receive_step(&self, rx: &mut Receiver, take: bool, register: bool) -> Poll<Option<Input>> {
        let cx = &mut Context::from_waker(&self.read_waker);
        self.read_wake.reading();
        loop {
            if rx.done {
                return Poll::Ready(None);
            }
            // Direct placement: the payload of a tagged segment goes from the socket straight
            // into the registered memory, under the region's lock, without a bounce buffer.
            if rx.start == rx.end {
                rx.start = 0;
                rx.end = 0;
                let direct = if rx.direct_next {
                    self.core()
                        .direct_placement()
                        .filter(|d| d.remaining > 0)
                        .cloned()
                } else {
                    None
                };
                if let Some(d) = direct {
                    let stream: &TcpStream = rx.rd.as_ref();
                    match stream.poll_read_ready(cx) {
                        Poll::Pending => {
                            self.read_wake.registered.store(true, Ordering::SeqCst);
                            return Poll::Pending;
                        }
                        Poll::Ready(Err(e)) => {
                            tracing::debug!(error = %e, "receive failed");
                            return self.stream_ended(rx);
                        }
                        Poll::Ready(Ok(())) => {}
                    }
                    match read_direct(self, &rx.rd, &d, &mut rx.buf) {
                        Ok(Some(n)) => {
                            rx.end = n;
                            if register {
                                self.wait_for_more(rx, cx);
                            }
                            let mut core = self.core();
                            if n > 0 {
                                rx.start = core.handle_input(&rx.buf[..n]);
                            }
                            self.note_bulk(&core);
                            return Poll::Ready(Some(rx.took(Input::of(core, take))));
                        }
                        // Would block: tokio cleared the readiness; wait for more.
                        Ok(None) => continue,
                        Err(e) => {
                            if e.kind() != io::ErrorKind::UnexpectedEof {
                                tracing::debug!(error = %e, "receive failed");
                            }
                            return self.stream_ended(rx);
                        }
                    }
                }
            } else if rx.end == rx.buf.len() {
                rx.buf.copy_within(rx.start..rx.end, 0);
                rx.end -= rx.start;
                rx.start = 0;
            }
            let upto = rx.buf.len().min(rx.end + READ_MAX);
            let mut free = ReadBuf::new(&mut rx.buf[rx.end..upto]);
            // `poll_read`, not `try_read`: after a read shorter than the buffer tokio clears
            // the readiness itself, so the next wait needs no read that would block.
            match Pin::new(&mut rx.rd).poll_read(cx, &mut free) {
                Poll::Pending => {
                    self.read_wake.registered.store(true, Ordering::SeqCst);
                    return Poll::Pending;
                }
                Poll::Ready(Err(e)) => {
                    tracing::debug!(error = %e, "receive failed");
                    return self.stream_ended(rx);
                }
                Poll::Ready(Ok(())) => {}
            }
            let n = free.filled().len();
            if n == 0 {
                return self.stream_ended(rx);
            }
            if let Some(tap) = &self.tap {
                tap.record(Direction::Received, &rx.buf[rx.end..rx.end + n]);
            }
            rx.end += n;
            if register {
                self.wait_for_more(rx, cx);
            }
            let mut core = self.core();
            rx.start += core.handle_input(&rx.buf[rx.start..rx.end]);
            self.note_bulk(&core);
            return Poll::Ready(Some(rx.took(Input::of(core, take))));
        }
    }

    /// After a poller's read: registers [`ReadWake`] for the stream's next wake-up, which tokio
    /// only does when a wait finds nothing to read (a poller that stops at a completion would
    /// otherwise leave nobody to wake; the receive task reads on until that wait). If more is
    /// there already, the poller's [`NextCompletion`] hands it to the receive task when done.
    fn wait_for_more(&self, rx: &Receiver, cx: &mut Context<'_>) {
        let stream: &TcpStream = rx.rd.as_ref();
        if stream.poll_read_ready(cx).is_ready() {
            self.read_wake.woken.store(true, Ordering::SeqCst);
        } else {
            self.read_wake.registered.store(true, Ordering::SeqCst);
        }
    }

    /// The stream ended or failed: the core is closed, and nothing more is read.
    fn stream_ended(&self, rx: &mut Receiver) -> Poll<Option<Input>> {
        rx.done = true;
        self.core().peer_closed();
        Poll::Ready(None)
    }
}

impl Receiver {
    /// Records what input left for the next read.
    fn took(&mut self, input: Input) -> Input {
        self.direct_next = input.direct;
        if !input.established {
            self.done = true;
        }
        input
    }
}

/// One non-blocking read for the direct placement `d`: the rest of its payload into the
/// registration and whatever follows it, up to [`DIRECT_AFTER`] bytes, into `buf` (the core
/// copies the payloads of the segments found there). Reading only up to the next header, to place
/// every large segment directly, cost one read per segment: 2.3-2.7 GB/s instead of 5.2-5.4
/// for 1 MiB RPC-over-RDMA WRITEs (Read chunks, 16 KiB segments, CRC off, current-thread
/// runtime), with no gain on `benches/rdma_soft.rs`.
/// Returns how many bytes went into `buf` (`None`: nothing to read yet).
fn read_direct(
    shared: &Shared,
    rd: &OwnedReadHalf,
    d: &DirectPlacement,
    buf: &mut [u8],
) -> io::Result<Option<usize>> {
    let place = d.offset..d.offset + d.remaining;
    let res: io::Result<usize> = d.region.with_mut_slice(|s| {
        // In the middle of a message, only as far as the next segment's header: its payload,
        // most likely as large, is then read straight into place too instead of being copied
        // out of `buf`.
        let after = if d.more {
            d.trailer + mpa::ULPDU_LEN_LEN + ddp::TAGGED_LEN
        } else {
            DIRECT_AFTER
        };
        let after = buf.len().min(after);
        let mut io = [
            IoSliceMut::new(&mut s[place.clone()]),
            IoSliceMut::new(&mut buf[..after]),
        ];
        let n = rd.try_read_vectored(&mut io)?;
        if let Some(tap) = &shared.tap {
            let placed = n.min(d.remaining);
            tap.record(Direction::Received, &s[place.start..place.start + placed]);
            tap.record(Direction::Received, &buf[..n - placed]);
        }
        Ok(n)
    });
    match res {
        Ok(0) => Err(io::ErrorKind::UnexpectedEof.into()),
        Ok(n) => {
            let placed = n.min(d.remaining);
            shared.core().placed_direct(placed);
            Ok(Some(n - placed))
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e),
    }
}

async fn tx_loop(shared: Arc<Shared>) {
    let Some(wr) = shared.wr.get() else {
        return;
    };
    loop {
        let mut notified = pin!(shared.tx_notify.notified());
        notified.as_mut().enable();
        let step = {
            let mut out = shared.tx.lock();
            shared.transmit_step(wr, &mut out)
        };
        let mut step = step.inspect(|step| {
            if step.completions {
                shared.completions_ready();
            }
        });
        if let Ok(TxStep { pending: true, .. }) = step {
            // The socket is full; wait for room, then go round (more may be queued).
            if let Err(e) = wr.writable().await {
                step = Err(e);
            }
        }
        match step {
            Err(e) => {
                tracing::debug!(error = %e, "send failed");
                shared.core().peer_closed();
                shared.kick();
                let _ = shutdown_write(wr);
                break;
            }
            Ok(TxStep { pending: true, .. }) => {}
            Ok(TxStep { shutdown: true, .. }) => {
                let _ = shutdown_write(wr);
                break;
            }
            Ok(TxStep { more, .. }) => {
                if !more {
                    notified.await;
                }
            }
        }
    }
}

/// Shuts down the sending direction of the stream (TCP FIN) through the shared write half
/// (`AsyncWrite::poll_shutdown` needs it exclusively): on a duplicate of the socket, which names
/// the same connection; dropping the duplicate only closes the duplicate.
fn shutdown_write(wr: &OwnedWriteHalf) -> io::Result<()> {
    let stream: &TcpStream = wr.as_ref();
    #[cfg(not(windows))]
    let dup = std::os::fd::AsFd::as_fd(stream).try_clone_to_owned()?;
    #[cfg(windows)]
    let dup = std::os::windows::io::AsSocket::as_socket(stream).try_clone_to_owned()?;
    std::net::TcpStream::from(dup).shutdown(std::net::Shutdown::Write)
}

/// Writes from `out` until it is empty or the socket is full, straight from registered memory.
fn write_some(shared: &Shared, wr: &OwnedWriteHalf, out: &mut Transmit) -> io::Result<()> {
    while !out.is_empty() {
        let res = out.write_with(|slices| match &shared.tap {
            Some(tap) => {
                // The peer's answer cannot be recorded before what it answers.
                let _order = tap.order();
                let n = try_write(wr, slices)?;
                record_prefix(tap, slices, n);
                Ok(n)
            }
            None => try_write(wr, slices),
        });
        match res {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One non-blocking write of `slices`. A single slice (every small message: the transmit queue
/// stages them in one buffer) goes out with `send`, which skips `writev`'s iovec import and
/// VFS layer.
fn try_write(wr: &OwnedWriteHalf, slices: &[IoSlice<'_>]) -> io::Result<usize> {
    match slices {
        [one] => wr.try_write(one),
        _ => wr.try_write_vectored(slices),
    }
}

/// Shows the first `n` bytes of `slices` to the tap (whose order the caller holds).
fn record_prefix(tap: &ConnTap, slices: &[IoSlice<'_>], mut n: usize) {
    for s in slices {
        if n == 0 {
            break;
        }
        let k = n.min(s.len());
        tap.record_held(Direction::Sent, &s[..k]);
        n -= k;
    }
}

/// The bound on confirmations left for a next post that never comes (see the module
/// documentation): one thread for the process, which every [`REPLY_LIMIT`] sends what the
/// connections on its list still hold back, from whatever thread, as any poster would
/// ([`Shared::transmit_now`]: non-blocking, the rest to the transmit task).
///
/// A tokio timer per connection did this before, kept armed across waits; but a pending timer
/// makes every park of the runtime compute its next expiration and read the clock (6.8% of
/// the instructions of a confirmed 64-byte ping-pong, callgrind), and with a 1 ms period the
/// timer was the machine's next timer event at nearly every park, which cost 1.1-1.4 us per
/// round trip on a 2-vCPU VM. A connection goes on the list when its receive task leaves a
/// reply and it is not listed; each round takes the whole list, so in steady traffic a
/// connection is listed (and the thread woken) about once per period.
mod flusher {
    use std::sync::atomic::Ordering;
    use std::sync::{Condvar, Mutex, Once, Weak};

    use super::{FlushEntry, Shared, REPLY_LIMIT};

    static LISTED: Mutex<Vec<Weak<Shared>>> = Mutex::new(Vec::new());
    static WAKE: Condvar = Condvar::new();
    static START: Once = Once::new();

    /// Puts the connection of `entry` on the list, unless it is on it.
    pub(super) fn watch(entry: &FlushEntry) {
        if entry.listed.swap(true, Ordering::SeqCst) {
            return;
        }
        START.call_once(|| {
            let spawned = std::thread::Builder::new()
                .name("soft-rdma-flusher".into())
                .spawn(run);
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "no flusher thread: confirmations wait for the next message");
            }
        });
        let mut listed = LISTED.lock().unwrap_or_else(|e| e.into_inner());
        listed.push(entry.conn.clone());
        if listed.len() == 1 {
            WAKE.notify_one();
        }
    }

    fn run() {
        loop {
            {
                let mut listed = LISTED.lock().unwrap_or_else(|e| e.into_inner());
                while listed.is_empty() {
                    listed = WAKE.wait(listed).unwrap_or_else(|e| e.into_inner());
                }
            }
            std::thread::sleep(REPLY_LIMIT);
            let round = std::mem::take(&mut *LISTED.lock().unwrap_or_else(|e| e.into_inner()));
            for shared in round.iter().filter_map(Weak::upgrade) {
                shared.flush.listed.store(false, Ordering::SeqCst);
                shared.send_left_reply();
                shared.rescue_reader();
            }
        }
    }
}

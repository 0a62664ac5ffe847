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
//! the whole round trip. Per message the chain is one wake-up per hop: socket -> receive task
//! -> completion poller (-> the task it hands the completion to). A consumer that set a
//! completion hook (the RPC-over-RDMA transport does) takes the completions in the receive task
//! itself, one hop fewer; a reply is then left to the next poster as it is for a waiting
//! poller, since the hook usually posts or wakes the task that will.
//!
//! Measured with `benches/rdma_soft.rs` (64-byte ping-pong, confirmed completions, 2-vCPU
//! VM, raw TCP 4.1 us): waking the transmit task when the poller resumed (the earlier design)
//! cost 6.3 us in a task on two workers and 6.1 us on a current-thread runtime; RPC-over-RDMA
//! NULL calls, where the poller is not the task that posts next, paid a third write and a
//! cross-worker wake-up per call (28-30 us instead of 9 on two workers).
//!
//! Tried and left out: a completion poller reading the socket itself while it waits (the
//! socket's readiness handed to it instead of the receive task, saving a task wake-up per
//! message) measured no faster (5.25-5.6 us against 5.2-5.25 on the ping-pong) for the
//! bookkeeping it needs; reading directly placed payloads one segment at a time (see
//! `read_direct`).

use std::io::{self, IoSlice, IoSliceMut};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, TryLockError};
use std::task::{Poll, Waker};

use tokio::io::AsyncReadExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::core::{Core, DirectPlacement, State, Transmit};
use super::tap::{ConnTap, Direction};
use crate::rdma::{Completion, CompletionHook};

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
    /// The connection is on the flusher's list.
    flush_listed: AtomicBool,
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
}

impl Input {
    /// Reads the core's state and unlocks it.
    fn of(core: MutexGuard<'_, Core>) -> Input {
        Input {
            transmit: core.wants_transmit(),
            confirmations: core.owes_only_confirmations(),
            completions: core.has_completions(),
            established: core.state() == State::Established,
            direct: core.direct_placement().is_some_and(|d| d.remaining > 0),
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
        Arc::new(Shared {
            core: Mutex::new(core),
            tx: Mutex::new(Transmit::new()),
            wr: OnceLock::new(),
            tx_notify: Notify::new(),
            cq_waiters: Mutex::new(Vec::new()),
            pollers: AtomicUsize::new(0),
            hook: OnceLock::new(),
            deferred: AtomicBool::new(false),
            flush_listed: AtomicBool::new(false),
            tap,
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

    /// [`Shared::transmit_now`] for `post_send`: completions it makes ready (a request that
    /// completes as it is written) wake pollers but do not call the consumer's hook; they are
    /// the poster's to take ([`Connection::set_completion_hook`]).
    ///
    /// [`Connection::set_completion_hook`]: crate::rdma::Connection::set_completion_hook
    pub(crate) fn transmit_posted(&self) {
        self.transmit_from(false);
    }

    fn transmit_from(&self, hook: bool) {
        let Some(wr) = self.wr.get() else {
            return self.tx_notify.notify_one();
        };
        let mut out = match self.tx.try_lock() {
            Ok(out) => out,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            // The writer holding the lock is told to go round once more.
            Err(TryLockError::WouldBlock) => return self.tx_notify.notify_one(),
        };
        let step = self.transmit_step(wr, &mut out);
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
    }

    /// Wakes whoever has work after the receive task fed the core (`input`, see
    /// [`Input::of`]); true when a due reply was left to whoever posts next.
    fn after_input(&self, input: Input) -> bool {
        let Input {
            transmit,
            confirmations,
            completions,
            established,
            direct: _,
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
                && (self.pollers.load(Ordering::SeqCst) > 0 || self.hook.get().is_some())
            {
                self.deferred.store(true, Ordering::SeqCst);
                self.completions_ready();
                return true;
            }
            self.completions_ready();
        }
        if transmit {
            self.transmit_now();
        }
        false
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
        // Whatever was deferred is polled now.
        self.deferred.store(false, Ordering::SeqCst);
        let shutdown = {
            let mut core = self.core();
            core.transmitted(out);
            core.poll_transmit(out)
        };
        let res = write_some(self, wr, out);
        let mut core = self.core();
        core.transmitted(out);
        let step = TxStep {
            pending: !out.is_empty(),
            shutdown,
            more: core.wants_transmit(),
            completions: core.has_completions(),
        };
        res.map(|()| step)
    }

    /// The next completion.
    pub(crate) async fn next_completion(&self) -> Completion {
        let mut waiting = Waiting {
            shared: self,
            waker: None,
        };
        std::future::poll_fn(|cx| {
            if let Some(c) = self.core().poll_completion() {
                return Poll::Ready(c);
            }
            waiting.register(cx.waker());
            // A completion that came before the registration found no waker to wake.
            match self.core().poll_completion() {
                Some(c) => Poll::Ready(c),
                None => Poll::Pending,
            }
        })
        .await
    }

    /// Wakes every poller waiting for completions (the core has some, or changed state).
    /// Always under the list's lock, after the core was updated: a poller registers under that
    /// lock before it looks at the core once more, so either it is on the list or it sees the
    /// update.
    fn wake_pollers(&self) {
        let mut list = self.cq_waiters.lock().unwrap_or_else(|e| e.into_inner());
        match list.len() {
            0 => drop(list),
            1 => {
                let waker = list.pop();
                self.pollers.store(0, Ordering::SeqCst);
                drop(list);
                waker.into_iter().for_each(Waker::wake);
            }
            _ => {
                let all = std::mem::take(&mut *list);
                self.pollers.store(0, Ordering::SeqCst);
                drop(list);
                all.into_iter().for_each(Waker::wake);
            }
        }
    }

    /// Completions are ready, or the core changed state: wakes the pollers, then calls the
    /// consumer's hook, if one is set, with no lock held.
    fn completions_ready(&self) {
        self.wake_pollers();
        if let Some(hook) = self.hook.get() {
            hook();
        }
    }
}

/// A poller waiting in [`Shared::next_completion`]: its waker is on the list while it waits.
struct Waiting<'a> {
    shared: &'a Shared,
    /// The waker last put on the list.
    waker: Option<Waker>,
}

impl Waiting<'_> {
    fn register(&mut self, waker: &Waker) {
        let mut list = self
            .shared
            .cq_waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if !list.iter().any(|w| w.will_wake(waker)) {
            list.push(waker.clone());
            self.shared.pollers.store(list.len(), Ordering::SeqCst);
        }
        self.waker = Some(waker.clone());
    }
}

impl Drop for Waiting<'_> {
    /// Leaves the list, if still on it.
    fn drop(&mut self) {
        let Some(mine) = &self.waker else { return };
        // Usually a wake-up took the whole list (see `Shared::wake_pollers`). `pollers` is the
        // list's length, stored under its lock after every change; this thread's own push
        // stored at least 1, so 0 means a later change emptied the list, waker and all.
        if self.shared.pollers.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut list = self
            .shared
            .cq_waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(i) = list.iter().position(|w| w.will_wake(mine)) {
            list.swap_remove(i);
            self.shared.pollers.store(list.len(), Ordering::SeqCst);
        }
    }
}

/// Starts the driver tasks; returns (receive task, transmit task).
pub(crate) fn spawn(shared: Arc<Shared>, stream: TcpStream) -> (JoinHandle<()>, JoinHandle<()>) {
    let (rd, wr) = stream.into_split();
    if shared.wr.set(wr).is_err() {
        unreachable!("a connection's driver starts once");
    }
    let rx = tokio::spawn(rx_loop(shared.clone(), rd));
    let tx = tokio::spawn(tx_loop(shared));
    (rx, tx)
}

async fn rx_loop(shared: Arc<Shared>, mut rd: OwnedReadHalf) {
    let mut buf = vec![0u8; RX_BUF];
    let (mut start, mut end) = (0usize, 0usize);
    // What the last input left: a direct placement to read into.
    let mut direct_next = false;
    loop {
        // Direct placement: the payload of a tagged segment goes from the socket straight
        // into the registered memory, under the region's lock, without a bounce buffer.
        if start == end {
            start = 0;
            end = 0;
            let direct = if direct_next {
                shared
                    .core()
                    .direct_placement()
                    .filter(|d| d.remaining > 0)
                    .cloned()
            } else {
                None
            };
            if let Some(d) = direct {
                if let Err(e) = rd.readable().await {
                    tracing::debug!(error = %e, "receive failed");
                    closed(&shared);
                    break;
                }
                match read_direct(&shared, &rd, &d, &mut buf) {
                    Ok(Some(n)) => {
                        end = n;
                        let input = {
                            let mut core = shared.core();
                            if end > 0 {
                                start = core.handle_input(&buf[..end]);
                            }
                            Input::of(core)
                        };
                        let established = input.established;
                        direct_next = input.direct;
                        if shared.after_input(input) {
                            flusher::watch(&shared);
                        }
                        if !established {
                            break;
                        }
                    }
                    Ok(None) => {}
                    Err(e) => {
                        if e.kind() != io::ErrorKind::UnexpectedEof {
                            tracing::debug!(error = %e, "receive failed");
                        }
                        closed(&shared);
                        break;
                    }
                }
                continue;
            }
        } else if end == buf.len() {
            buf.copy_within(start..end, 0);
            end -= start;
            start = 0;
        }
        let n = match rd.read(&mut buf[end..]).await {
            Ok(n) => n,
            Err(e) => {
                tracing::debug!(error = %e, "receive failed");
                0
            }
        };
        if n == 0 {
            closed(&shared);
            break;
        }
        if let Some(tap) = &shared.tap {
            tap.record(Direction::Received, &buf[end..end + n]);
        }
        end += n;
        let input = {
            let mut core = shared.core();
            start += core.handle_input(&buf[start..end]);
            Input::of(core)
        };
        let established = input.established;
        direct_next = input.direct;
        if shared.after_input(input) {
            flusher::watch(&shared);
        }
        if !established {
            break;
        }
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
        let after = buf.len().min(DIRECT_AFTER);
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

/// The peer closed the stream or it failed.
fn closed(shared: &Shared) {
    shared.core().peer_closed();
    shared.kick();
}

async fn tx_loop(shared: Arc<Shared>) {
    let Some(wr) = shared.wr.get() else {
        return;
    };
    loop {
        let mut notified = pin!(shared.tx_notify.notified());
        notified.as_mut().enable();
        let step = {
            let mut out = shared.tx.lock().unwrap_or_else(|e| e.into_inner());
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
                closed(&shared);
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
    use std::sync::{Arc, Condvar, Mutex, Once, Weak};

    use super::{Shared, REPLY_LIMIT};

    static LISTED: Mutex<Vec<Weak<Shared>>> = Mutex::new(Vec::new());
    static WAKE: Condvar = Condvar::new();
    static START: Once = Once::new();

    /// Puts `shared` on the list, unless it is on it.
    pub(super) fn watch(shared: &Arc<Shared>) {
        if shared.flush_listed.swap(true, Ordering::SeqCst) {
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
        listed.push(Arc::downgrade(shared));
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
                shared.flush_listed.store(false, Ordering::SeqCst);
                shared.send_left_reply();
            }
        }
    }
}

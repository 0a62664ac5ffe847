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
//! leaves the reply to that task ([`Shared::after_input`]): it usually posts its own message
//! right away, and both go out in one write, so the peer is woken once per message instead of
//! twice. How long the reply may wait depends on where the woken poller runs:
//!
//! * A *nearby* poller runs next on the receive task's thread: any poller on a current-thread
//!   runtime, a spawned task on the multi-thread runtime (tokio puts it in the waking worker's
//!   LIFO slot). The reply waits at most until that poller yields: the transmit task, woken
//!   when the poller resumes ([`Waiting`]), runs after it on that thread.
//! * A *far* poller is woken on another thread: `block_on`'s future, which is not a task. Waking
//!   the transmit task from there would cost a second cross-thread wake-up (measured: 53-63 us
//!   per 64-byte ping-pong instead of 20-24), so the reply goes out with the poller's next post,
//!   when it next finds no completion, or when the receive task's deadline
//!   ([`FAR_REPLY_LIMIT`]) passes, whichever comes first.
//!
//! Measured with `benches/rdma_soft.rs` (64-byte ping-pong, confirmed completions, 2-vCPU
//! VM): about 27 us before deferring and 15 us after on a current-thread runtime; 27-33 us
//! and 15 us with both ends in tasks on the two-worker runtime (raw TCP: 12-13 us). With the
//! client in `block_on`, the receive task used to write the Read Response on its own whenever
//! the woken thread did not preempt it (traced in a slow run: 1052 of 2000 messages); left to
//! the far poller, every Read Response shares the client's next write.

use std::io::{self, IoSlice, IoSliceMut};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, TryLockError};

use tokio::io::AsyncReadExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::core::{Core, DirectPlacement, State, Transmit};
use super::tap::{ConnTap, Direction};
use super::wire::{ddp, mpa};
use crate::rdma::Completion;

/// Longest a reply left to a far poller waits (see the module documentation) when that poller
/// neither posts nor polls again; tokio's timers round it up to their 1 ms resolution.
const FAR_REPLY_LIMIT: std::time::Duration = std::time::Duration::from_millis(1);

/// Receive buffer size; larger than any FPDU (MULPDU <= 65535 plus markers).
const RX_BUF: usize = 256 * 1024;

/// State shared by a connection handle and its driver tasks.
pub(crate) struct Shared {
    core: Mutex<Core>,
    /// The bytes on their way to the socket; whoever holds the lock is the one writer (lock
    /// order: this, then `core`).
    tx: Mutex<Transmit>,
    /// The socket's write half, once the driver has started.
    wr: OnceLock<OwnedWriteHalf>,
    tx_notify: Notify,
    cq_notify: Notify,
    /// Pollers waiting in [`Shared::next_completion`] that a wake-up from the receive task
    /// runs next on its thread (see the module documentation).
    nearby_pollers: AtomicUsize,
    /// The other pollers waiting in [`Shared::next_completion`].
    far_pollers: AtomicUsize,
    /// The driver runs on a current-thread runtime.
    current_thread: AtomicBool,
    /// The receive task left what the core has to send to a woken completion poller.
    deferred: AtomicBool,
    tap: Option<ConnTap>,
}

/// What the receive task found after feeding the core.
struct Input {
    transmit: bool,
    completions: bool,
    established: bool,
}

impl Input {
    /// Reads the core's state and unlocks it.
    fn of(core: MutexGuard<'_, Core>) -> Input {
        Input {
            transmit: core.wants_transmit(),
            completions: core.has_completions(),
            established: core.state() == State::Established,
        }
    }
}

/// To whom the receive task left the reply its input asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LeftTo {
    /// No one: it was sent, or nothing was due.
    NoOne,
    /// A nearby poller.
    Nearby,
    /// A far poller; the receive task bounds the wait ([`FAR_REPLY_LIMIT`]).
    Far,
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
            cq_notify: Notify::new(),
            nearby_pollers: AtomicUsize::new(0),
            far_pollers: AtomicUsize::new(0),
            current_thread: AtomicBool::new(false),
            deferred: AtomicBool::new(false),
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
        self.cq_notify.notify_waiters();
    }

    /// Sends what the core has to send from the calling thread: one batch, without blocking,
    /// if no one else is writing. Whatever is left (the socket is full, more than a batch, a
    /// write error, the shutdown) goes to the transmit task.
    pub(crate) fn transmit_now(&self) {
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
                if step.completions {
                    self.cq_notify.notify_waiters();
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
    /// [`Input::of`]); says to whom a due reply was left.
    fn after_input(&self, input: Input) -> LeftTo {
        let Input {
            transmit,
            completions,
            established,
        } = input;
        if !established {
            self.transmit_now();
            self.kick();
            return LeftTo::NoOne;
        }
        if completions {
            if transmit {
                // See the module documentation. The flag goes up before the pollers are
                // counted, and a poller looks at it after it stops waiting ([`Waiting`]), so
                // either this task sees no poller and sends, or a poller sees the flag.
                self.deferred.store(true, Ordering::SeqCst);
                let left_to = if self.nearby_pollers.load(Ordering::SeqCst) > 0 {
                    LeftTo::Nearby
                } else if self.far_pollers.load(Ordering::SeqCst) > 0 {
                    LeftTo::Far
                } else {
                    LeftTo::NoOne
                };
                if left_to != LeftTo::NoOne {
                    self.cq_notify.notify_waiters();
                    return left_to;
                }
            }
            self.cq_notify.notify_waiters();
        }
        if transmit {
            self.transmit_now();
        }
        LeftTo::NoOne
    }

    /// Sends a reply left to a poller if it is still waiting.
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

    /// True when the calling poller, once woken by the receive task, runs next on that
    /// task's thread: any poller on a current-thread runtime, a spawned task on the
    /// multi-thread runtime (not `block_on`'s future, which has no task id).
    fn is_nearby_poller(&self) -> bool {
        self.current_thread.load(Ordering::Relaxed) || tokio::task::try_id().is_some()
    }

    pub(crate) async fn next_completion(&self) -> Completion {
        loop {
            let mut notified = pin!(self.cq_notify.notified());
            notified.as_mut().enable();
            if let Some(c) = self.core().poll_completion() {
                return c;
            }
            self.send_left_reply();
            let _waiting = Waiting::new(self, self.is_nearby_poller());
            notified.await;
        }
    }
}

/// Counts a poller waiting for completions, nearby or far (see the module documentation),
/// while it lives.
struct Waiting<'a> {
    shared: &'a Shared,
    nearby: bool,
}

impl Waiting<'_> {
    fn new(shared: &Shared, nearby: bool) -> Waiting<'_> {
        let count = if nearby {
            &shared.nearby_pollers
        } else {
            &shared.far_pollers
        };
        count.fetch_add(1, Ordering::SeqCst);
        Waiting { shared, nearby }
    }
}

impl Drop for Waiting<'_> {
    /// Woken, or dropped while waiting: a reply left to a nearby poller goes out with what
    /// this task posts next, or at the latest when it yields (the transmit task, woken here,
    /// runs after it on the same thread). A far poller leaves the bound to the receive task.
    fn drop(&mut self) {
        if !self.nearby {
            self.shared.far_pollers.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        self.shared.nearby_pollers.fetch_sub(1, Ordering::SeqCst);
        if self.shared.deferred.load(Ordering::SeqCst) {
            self.shared.tx_notify.notify_one();
        }
    }
}

/// Starts the driver tasks; returns (receive task, transmit task).
pub(crate) fn spawn(shared: Arc<Shared>, stream: TcpStream) -> (JoinHandle<()>, JoinHandle<()>) {
    let (rd, wr) = stream.into_split();
    if shared.wr.set(wr).is_err() {
        unreachable!("a connection's driver starts once");
    }
    let flavor = tokio::runtime::Handle::current().runtime_flavor();
    let current_thread = flavor == tokio::runtime::RuntimeFlavor::CurrentThread;
    shared
        .current_thread
        .store(current_thread, Ordering::Relaxed);
    let rx = tokio::spawn(rx_loop(shared.clone(), rd));
    let tx = tokio::spawn(tx_loop(shared));
    (rx, tx)
}

/// Stream bytes read after a directly placed payload and its trailer (pad, CRC field): the
/// ULPDU length and DDP header of a tagged segment, so that a run of large tagged segments stays
/// on the direct path.
const NEXT_HEADER: usize = mpa::ULPDU_LEN_LEN + ddp::TAGGED_LEN;

/// The receive task's bound on a reply left to a far poller (see the module documentation).
///
/// A deadline is set when a reply is left and none is set. It is dropped when the receive task,
/// about to wait, finds the reply sent, or when it passes (sending what still waits); in a
/// ping-pong it usually serves many messages. Every reply left while it is set goes out by
/// then; one left after it passed goes out at the next wait, at once. Measured on the bench's
/// `block_on` ping-pong (30 rounds, confirmed completions, 2 vCPUs): this way 7-8 rounds of 30
/// were slow, as many as with local completions; a new deadline per message gave medians of
/// 41-47 us instead of 23-27; a new deadline whenever one passed with no reply waiting made
/// 13-16 rounds slow.
#[derive(Default)]
struct FarReply {
    deadline: Option<tokio::time::Instant>,
}

impl FarReply {
    /// Notes to whom [`Shared::after_input`] left a reply.
    fn left(&mut self, left_to: LeftTo) {
        if left_to == LeftTo::Far && self.deadline.is_none() {
            self.deadline = Some(tokio::time::Instant::now() + FAR_REPLY_LIMIT);
        }
    }

    /// Waits for `io` (a cancel-safe socket wait); if a reply left to a far poller is unsent
    /// when the deadline passes (or has passed), sends it first.
    async fn wait<F: std::future::Future>(&mut self, shared: &Shared, io: F) -> F::Output {
        let mut io = pin!(io);
        if let Some(at) = self.deadline {
            if !shared.deferred.load(Ordering::SeqCst) {
                // The poller (or anyone writing) sent it.
                self.deadline = None;
            } else {
                match tokio::time::timeout_at(at, io.as_mut()).await {
                    Ok(out) => return out,
                    Err(_elapsed) => {
                        self.deadline = None;
                        shared.send_left_reply();
                    }
                }
            }
        }
        io.await
    }
}

async fn rx_loop(shared: Arc<Shared>, mut rd: OwnedReadHalf) {
    let mut buf = vec![0u8; RX_BUF];
    let (mut start, mut end) = (0usize, 0usize);
    let mut far_reply = FarReply::default();
    loop {
        // Direct placement: the payload of a tagged segment goes from the socket straight
        // into the registered memory, under the region's lock, without a bounce buffer.
        if start == end {
            start = 0;
            end = 0;
            let direct = shared
                .core()
                .direct_placement()
                .filter(|d| d.remaining > 0)
                .cloned();
            if let Some(d) = direct {
                if let Err(e) = far_reply.wait(&shared, rd.readable()).await {
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
                        far_reply.left(shared.after_input(input));
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
        let n = match far_reply.wait(&shared, rd.read(&mut buf[end..])).await {
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
        far_reply.left(shared.after_input(input));
        if !established {
            break;
        }
    }
}

/// One non-blocking read for the direct placement `d`: the rest of its payload into the
/// registration and the bytes after it (up to the next header, see [`NEXT_HEADER`]) into the
/// start of `buf`. Returns how many bytes went into `buf` (`None`: nothing to read yet).
fn read_direct(
    shared: &Shared,
    rd: &OwnedReadHalf,
    d: &DirectPlacement,
    buf: &mut [u8],
) -> io::Result<Option<usize>> {
    let place = d.offset..d.offset + d.remaining;
    let tail = d.trailer + NEXT_HEADER;
    let res: io::Result<usize> = d.region.with_mut_slice(|s| {
        let mut io = [
            IoSliceMut::new(&mut s[place.clone()]),
            IoSliceMut::new(&mut buf[..tail]),
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
                shared.cq_notify.notify_waiters();
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
        let res = out.write_with(|slices| {
            let n = wr.try_write_vectored(slices)?;
            if let Some(tap) = &shared.tap {
                record_prefix(tap, slices, n);
            }
            Ok(n)
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

/// Shows the first `n` bytes of `slices` to the tap.
fn record_prefix(tap: &ConnTap, slices: &[IoSlice<'_>], mut n: usize) {
    for s in slices {
        if n == 0 {
            break;
        }
        let k = n.min(s.len());
        tap.record(Direction::Sent, &s[..k]);
        n -= k;
    }
}

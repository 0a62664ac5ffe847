//! Writing records to one TCP connection from many tasks.
//!
//! A sender that finds the connection idle writes its record at once, from its own task, with
//! a non-blocking vectored write: a lone caller pays no task switch. Records sent while
//! someone is writing queue up and go out together in the next vectored write. When the
//! socket is full, the rest is handed to the connection's writer task, which waits for the
//! socket; so a sender never waits for the peer, and a caller that is cancelled never leaves a
//! record half-written.
//!
//! Who writes is one flag, `busy`, taken with a compare-and-swap: a lone sender takes the
//! socket, writes and gives it back without a lock (two lock round trips and a reference
//! count per record before; the queue's lock is only for records that have to wait). The one
//! rule that makes giving it back without the lock safe: a sender that queues a record
//! publishes the queue's length, then tries to take the flag; the writer that gives the flag
//! back then looks at that length, and takes the flag again if a record came meanwhile. One
//! of the two sees the other (both in sequentially consistent order), so no record is left
//! in the queue with nobody to write it.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
#[cfg(unix)]
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use parking_lot::Mutex;

use bytes::{Buf, Bytes};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::{watch, Notify};

use super::signal::Signal;
use super::slots::Slot;
use crate::rpc::record::{RecordWriter, FRAGMENT_HEADER_LEN, LAST_FRAGMENT};
use crate::socket_send::try_send_vectored;

/// The most buffers given to one vectored write (Linux's IOV_MAX is 1024; a record is a
/// header and a few parts).
const MAX_IOV: usize = 64;
/// The most records taken out of the queue at once.
const MAX_BATCH: usize = 64;
/// Records up to this long are copied into one buffer for the write (on the stack).
const SMALL_RECORD: usize = 256;
/// The most bytes given to one write. A 1 MiB record written in one `writev` (the socket
/// takes it all) moved at 0.79x (READ) and 0.89x (WRITE) of libtirpc's speed, whose records
/// go out in fragments of about 64 KiB, one `write` each; written 64 KiB at a time, at
/// 0.95-1.01x (the transports bench, two processes across CPUs, two runs). A sender holding
/// the socket for one long copy leaves the peer's acknowledgements queued behind it until
/// the end. (The soft provider measured the same: its `GATHER_WINDOW`.)
const MAX_WRITE: usize = 64 << 10;

/// The connection is closed: nothing more is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SinkClosed;

/// What [`RecordSink::send`] sends as one record.
#[derive(Debug, Clone, Copy)]
pub(super) enum Record<'a> {
    /// Bytes lent for the call: written from where they are when the socket takes them at
    /// once, copied when they have to wait.
    Slice(&'a [u8]),
    /// Shared buffers, in order: queued without a copy when they have to wait.
    Parts(&'a [Bytes]),
}

/// A piece of a record: lent bytes or a shared buffer.
trait Part: AsRef<[u8]> + Sized {
    /// Runs `f` on `parts` as shared buffers (copied when lent).
    fn shared<R>(parts: &[Self], f: impl FnOnce(&[Bytes]) -> R) -> R;
}

impl Part for Bytes {
    fn shared<R>(parts: &[Bytes], f: impl FnOnce(&[Bytes]) -> R) -> R {
        f(parts)
    }
}

impl Part for &[u8] {
    fn shared<R>(parts: &[&[u8]], f: impl FnOnce(&[Bytes]) -> R) -> R {
        let copies: Vec<Bytes> = parts.iter().map(|p| Bytes::copy_from_slice(p)).collect();
        f(&copies)
    }
}

/// The writing side of a connection; clones share it. The owner of the connection calls
/// [`close`](Self::close) when it ends (the writer task runs until then).
#[derive(Clone)]
pub(super) struct RecordSink {
    shared: Arc<Shared>,
}

struct Shared {
    /// The sending side; shut down (not dropped) when the sink closes, so that the peer sees
    /// the end at once.
    stream: OwnedWriteHalf,
    /// A writer (a sender, or the writer task) owns the socket's sending side.
    busy: AtomicBool,
    /// `state.queue`'s length, set with the queue (see the module's doc).
    queued: AtomicUsize,
    /// The framer's largest fragment: a record up to this long is written as one.
    max_fragment: usize,
    /// Not poisoned by a panic (parking_lot): none could leave it inconsistent, each update
    /// is one assignment or one queue operation.
    state: Mutex<State>,
    /// Raised when the sink closes: read without the lock by a writer between writes, and
    /// waited for by the connection's owner (the one task in [`RecordSink::closed`]).
    closed: Signal,
    /// Wakes the writer task when a sender hands it a blocked batch.
    handover: Notify,
    /// Tells the writer task, and handlers waiting for their caller ([`RecordSink::closing`]),
    /// that the sink closed (waiters `closed` cannot have).
    writer_closed: watch::Sender<bool>,
}

struct State {
    framer: RecordWriter,
    /// Framed records not yet taken by a writer, in order.
    queue: VecDeque<Queued>,
}

/// One framed record, partly written when `next > 0` or its `parts[next]` was advanced.
struct Queued {
    parts: Vec<Bytes>,
    next: usize,
    /// Released once the record has been written (or dropped with the connection).
    _slot: Option<Slot>,
}

/// Records taken out of the queue by the writer of the moment.
#[derive(Default)]
struct Batch {
    records: VecDeque<Queued>,
}

enum Drain {
    /// Everything was written; the socket is free (`busy` cleared).
    Idle,
    /// The socket is full: wait until it is writable, then drain again.
    Blocked,
    /// Writing failed.
    Failed(io::Error),
    /// The connection was closed meanwhile.
    Closed,
}

impl RecordSink {
    /// Starts the writing side `stream`, writing fragments of at most `max_fragment` bytes.
    pub(super) fn new(stream: OwnedWriteHalf, max_fragment: usize) -> RecordSink {
        let framer = RecordWriter::new(max_fragment);
        let shared = Arc::new(Shared {
            stream,
            busy: AtomicBool::new(false),
            queued: AtomicUsize::new(0),
            max_fragment: framer.max_fragment(),
            state: Mutex::new(State {
                framer,
                queue: VecDeque::new(),
            }),
            closed: Signal::default(),
            handover: Notify::new(),
            writer_closed: watch::Sender::new(false),
        });
        tokio::spawn(writer_task(shared.clone()));
        RecordSink { shared }
    }

    /// Sends `record` (at once when the connection is idle); `slot` is given back when it has
    /// been written. Never waits.
    pub(super) fn send(&self, record: Record<'_>, slot: Option<Slot>) -> Result<(), SinkClosed> {
        match record {
            Record::Slice(slice) => self.send_parts(&[slice], slot),
            Record::Parts(parts) => self.send_parts(parts, slot),
        }
    }

    /// Frames `parts` as one record and sends it.
    fn send_parts<P: Part>(&self, parts: &[P], slot: Option<Slot>) -> Result<(), SinkClosed> {
        let shared = &*self.shared;
        if shared.closed.is_raised() {
            return Err(SinkClosed);
        }
        let total: usize = parts.iter().map(|p| p.as_ref().len()).sum();
        // Not past records still queued (a sender's records go out in the order it sent
        // them).
        if total <= shared.max_fragment
            && parts.len() < MAX_IOV
            && shared.queued.load(SeqCst) == 0
            && shared
                .busy
                .compare_exchange(false, true, SeqCst, SeqCst)
                .is_ok()
        {
            self.send_now(parts, total, slot);
            return Ok(());
        }
        let mut state = shared.state.lock();
        // Checked again under the lock: `close` empties the queue under it.
        if shared.closed.is_raised() {
            return Err(SinkClosed);
        }
        let mut framed = Vec::with_capacity(parts.len() + 1);
        P::shared(parts, |parts| state.framer.frame(parts, &mut framed));
        state.queue.push_back(Queued {
            parts: framed,
            next: 0,
            _slot: slot,
        });
        shared.queued.store(state.queue.len(), SeqCst);
        drop(state);
        // Whoever owns the socket gives it back only after looking at `queued`.
        if !shared.busy.swap(true, SeqCst) {
            shared.write_queued(Batch::default());
        }
        Ok(())
    }

    /// The idle connection's fast path (the caller set `busy`): the record, one fragment, is
    /// written at once (from the caller's buffers, or for a small record from one copy of
    /// it); only what the socket does not take is queued (framed as usual). Framing and
    /// queueing every record cost three allocations and four lock round trips per message.
    fn send_now<P: Part>(&self, parts: &[P], total: usize, slot: Option<Slot>) {
        let stream = &self.shared.stream;
        let header = (total as u32 | LAST_FRAGMENT).to_be_bytes();
        let written = if total <= SMALL_RECORD {
            // One buffer, copied here: a gather list of the header and the message cost the
            // kernel 0.15-0.25 us more per NULL call on loopback.
            let mut record = [0u8; FRAGMENT_HEADER_LEN + SMALL_RECORD];
            record[..FRAGMENT_HEADER_LEN].copy_from_slice(&header);
            let mut at = FRAGMENT_HEADER_LEN;
            for part in parts {
                let part = part.as_ref();
                record[at..at + part.len()].copy_from_slice(part);
                at += part.len();
            }
            stream.try_write(&record[..at])
        } else {
            let mut iov = [IoSlice::new(&[]); MAX_IOV];
            let pieces = std::iter::once(&header[..]).chain(parts.iter().map(|p| p.as_ref()));
            let count = io_slices(pieces, &mut iov);
            try_send_vectored(stream.as_ref(), &iov[..count])
        };
        let written = match written {
            Ok(n) => n,
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock
                    || e.kind() == io::ErrorKind::Interrupted =>
            {
                0
            }
            Err(e) => return self.shared.fail(&e),
        };
        if written == header.len() + total {
            // All out: give the socket back, unless others queued records meanwhile.
            self.shared.busy.store(false, SeqCst);
            if self.shared.queued.load(SeqCst) == 0 || self.shared.busy.swap(true, SeqCst) {
                return;
            }
        }
        let mut batch = Batch::default();
        if written < header.len() + total {
            let mut framed = Vec::with_capacity(parts.len() + 1);
            framed.push(Bytes::copy_from_slice(&header));
            P::shared(parts, |parts| {
                framed.extend(parts.iter().filter(|p| !p.is_empty()).cloned())
            });
            batch.records.push_back(Queued {
                parts: framed,
                next: 0,
                _slot: slot,
            });
            batch.advance(written);
        }
        // Whatever is left of the record, then whatever others queued meanwhile.
        self.shared.write_queued(batch);
    }

    /// Closes the connection's sending side: queued records are dropped, later sends fail,
    /// and the writer task ends (so the socket closes once its readers let go of it).
    pub(super) fn close(&self) {
        self.shared.close();
    }

    /// Waits until the sink is closed (by its owner, or because writing failed). For the
    /// connection's owner: one task at a time waits.
    pub(super) async fn closed(&self) {
        self.shared.closed.raised().await
    }

    /// [`closed`](Self::closed) as a poll, cheap enough to look at on every wake-up.
    pub(super) fn poll_closed(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        self.shared.closed.poll_raised(cx)
    }

    /// [`poll_closed`](Self::poll_closed) remembering the waker registered last (see
    /// [`Signal::poll_raised_with`]).
    pub(super) fn poll_closed_with(
        &self,
        cx: &mut std::task::Context<'_>,
        registered: &mut Option<std::task::Waker>,
    ) -> std::task::Poll<()> {
        self.shared.closed.poll_raised_with(cx, registered)
    }

    /// Completes when the sink closes; unlike [`closed`](Self::closed), any number of tasks
    /// may wait (a running handler for its caller).
    pub(super) fn closing(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut closed = self.shared.writer_closed.subscribe();
        async move {
            let _ = closed.wait_for(|closed| *closed).await;
        }
    }

    /// Whether the sink is closed (a look, with no waker registered).
    pub(super) fn is_closed(&self) -> bool {
        self.shared.closed.is_raised()
    }

    /// How many records wait in the queue for the socket (not counting a batch being
    /// written): more than a few when the peer does not read.
    pub(super) fn queued(&self) -> usize {
        self.shared.queued.load(SeqCst)
    }
}

impl Shared {
    /// Writes `batch`, then the queue, as the socket's owner; hands what the socket does not
    /// take to the writer task.
    fn write_queued(&self, mut batch: Batch) {
        match self.drain(&mut batch) {
            Drain::Idle | Drain::Closed => {}
            Drain::Blocked => self.hand_over(batch),
            Drain::Failed(e) => self.fail(&e),
        }
    }

    /// Writes queued records until the queue is empty, the socket is full, or writing fails.
    /// The caller owns the sending side (`busy`).
    fn drain(&self, batch: &mut Batch) -> Drain {
        loop {
            if self.closed.is_raised() {
                return Drain::Closed;
            }
            if batch.records.is_empty() {
                let mut state = self.state.lock();
                if state.queue.is_empty() {
                    // Under the lock: a sender queueing next finds the flag down and writes.
                    self.busy.store(false, SeqCst);
                    return Drain::Idle;
                }
                let n = state.queue.len().min(MAX_BATCH);
                batch.records.extend(state.queue.drain(..n));
                self.queued.store(state.queue.len(), SeqCst);
            }
            let mut iov = [IoSlice::new(&[]); MAX_IOV];
            let count = batch.io_slices(&mut iov);
            match try_send_vectored(self.stream.as_ref(), &iov[..count]) {
                Ok(0) => return Drain::Failed(io::ErrorKind::WriteZero.into()),
                Ok(n) => batch.advance(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return Drain::Blocked;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Drain::Failed(e),
            }
        }
    }

    /// Gives a blocked batch to the writer task: back at the head of the queue, still `busy`.
    fn hand_over(&self, batch: Batch) {
        let mut state = self.state.lock();
        if self.closed.is_raised() {
            return;
        }
        for record in batch.records.into_iter().rev() {
            state.queue.push_front(record);
        }
        self.queued.store(state.queue.len(), SeqCst);
        drop(state);
        self.handover.notify_one();
    }

    fn fail(&self, error: &io::Error) {
        tracing::debug!(%error, "writing to the connection failed: closing it");
        self.close();
    }

    fn close(&self) {
        let mut state = self.state.lock();
        let queue = std::mem::take(&mut state.queue);
        self.queued.store(0, SeqCst);
        let first = !self.closed.is_raised();
        self.closed.raise();
        drop(state);
        drop(queue);
        if first {
            // The peer sees the end now, whoever still holds the sink (elsewhere than Unix,
            // when the last holder drops it). A write racing with this fails, and closes
            // again.
            #[cfg(unix)]
            // SAFETY: the descriptor is the stream's own, open while `self.stream` lives.
            unsafe {
                libc::shutdown(self.stream.as_ref().as_raw_fd(), libc::SHUT_WR)
            };
        }
        self.writer_closed.send_replace(true);
    }
}

impl Batch {
    /// Fills `out` with the batch's next buffers; returns how many.
    fn io_slices<'a>(&'a self, out: &mut [IoSlice<'a>]) -> usize {
        let parts = self.records.iter().flat_map(|r| &r.parts[r.next..]);
        io_slices(parts.map(|p| &p[..]), out)
    }

    /// Forgets the first `n` bytes, which were written.
    fn advance(&mut self, mut n: usize) {
        while let Some(record) = self.records.front_mut() {
            while record.next < record.parts.len() {
                let part = &mut record.parts[record.next];
                if part.len() > n {
                    part.advance(n);
                    return;
                }
                n -= part.len();
                // Release the part's memory now rather than with the whole batch.
                *part = Bytes::new();
                record.next += 1;
            }
            self.records.pop_front();
        }
    }
}

/// Writes what senders hand over when the socket was full, until the sink closes.
async fn writer_task(shared: Arc<Shared>) {
    let mut closed = shared.writer_closed.subscribe();
    loop {
        tokio::select! {
            _ = shared.handover.notified() => {}
            _ = closed.wait_for(|c| *c) => return,
        }
        // A sender handed over the sending side (`busy`) with the queue's head.
        let mut batch = Batch::default();
        loop {
            match shared.drain(&mut batch) {
                Drain::Idle | Drain::Closed => break,
                Drain::Failed(e) => {
                    shared.fail(&e);
                    return;
                }
                Drain::Blocked => {
                    tokio::select! {
                        writable = shared.stream.writable() => {
                            if let Err(e) = writable {
                                shared.fail(&e);
                                return;
                            }
                        }
                        _ = closed.wait_for(|c| *c) => return,
                    }
                }
            }
        }
    }
}

/// Fills `out` with the non-empty `pieces`, at most [`MAX_WRITE`] bytes in all (the last one
/// cut short if need be); returns how many.
fn io_slices<'a>(pieces: impl Iterator<Item = &'a [u8]>, out: &mut [IoSlice<'a>]) -> usize {
    let mut count = 0;
    let mut budget = MAX_WRITE;
    for piece in pieces.filter(|p| !p.is_empty()) {
        if budget == 0 || count == out.len() {
            break;
        }
        let n = piece.len().min(budget);
        out[count] = IoSlice::new(&piece[..n]);
        budget -= n;
        count += 1;
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lengths(iov: &[IoSlice<'_>]) -> Vec<usize> {
        iov.iter().map(|s| s.len()).collect()
    }

    #[test]
    fn one_write_takes_at_most_max_write_bytes_cutting_the_last_piece() {
        let big = vec![1u8; MAX_WRITE];
        let pieces = [&[0u8; 4][..], &[][..], &big[..], &big[..]];
        let mut iov = [IoSlice::new(&[]); MAX_IOV];
        let count = io_slices(pieces.into_iter(), &mut iov);
        assert_eq!(lengths(&iov[..count]), [4, MAX_WRITE - 4]);
    }

    #[test]
    fn small_pieces_all_go_up_to_the_gather_lists_length() {
        let piece = [7u8; 10];
        let pieces = std::iter::repeat_n(&piece[..], MAX_IOV + 5);
        let mut iov = [IoSlice::new(&[]); MAX_IOV];
        let count = io_slices(pieces, &mut iov);
        assert_eq!(count, MAX_IOV);
        assert!(lengths(&iov).iter().all(|&n| n == 10));
    }

    /// Many senders on several threads, small records (the lock-free path) mixed with large
    /// ones (queued, handed to the writer task when the socket fills), in rounds of two
    /// records per sender: every record of a round arrives whole before the next round
    /// starts (so a record left in the queue with nobody to write it hangs the test), and
    /// each sender's two arrive in the order it sent them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_senders_lose_and_mix_no_record() {
        use super::super::stream::{poll_record, Records};

        const SENDERS: u32 = 8;
        const ROUNDS: u32 = 400;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, accepted) = tokio::join!(tokio::net::TcpStream::connect(addr), async {
            listener.accept().await.unwrap().0
        });
        let (_keep, write) = client.unwrap().into_split();
        let sink = RecordSink::new(write, 1 << 20);
        // Sender `s`'s record `k`: both numbers, then filler up to a size that cycles from a
        // few bytes to 200 KiB (past what loopback's socket takes at once).
        let record = |s: u32, k: u32| {
            let len = [8usize, 40, 100, 8, 3000, 200_000][((s + k) % 6) as usize];
            let mut r = vec![(s as u8) ^ (k as u8); len];
            r[..4].copy_from_slice(&s.to_be_bytes());
            r[4..8].copy_from_slice(&k.to_be_bytes());
            r
        };
        let (mut read, _) = accepted.into_split();
        let mut records = Records::new(1 << 20);
        for i in 0..ROUNDS {
            let senders: Vec<_> = (0..SENDERS)
                .map(|s| {
                    let sink = sink.clone();
                    tokio::spawn(async move {
                        for k in [2 * i, 2 * i + 1] {
                            let r = record(s, k);
                            sink.send(Record::Slice(&r), None).unwrap();
                        }
                    })
                })
                .collect();
            let mut next = [2 * i; SENDERS as usize];
            let reading = async {
                for _ in 0..2 * SENDERS {
                    let got = std::future::poll_fn(|cx| poll_record(cx, &mut read, &mut records))
                        .await
                        .unwrap()
                        .expect("a record, not the end");
                    let s = u32::from_be_bytes(got[..4].try_into().unwrap());
                    let k = u32::from_be_bytes(got[4..8].try_into().unwrap());
                    assert_eq!(k, next[s as usize], "sender {s}'s records in order");
                    assert_eq!(&got[..], &record(s, k)[..], "sender {s}'s record whole");
                    next[s as usize] += 1;
                }
            };
            tokio::time::timeout(std::time::Duration::from_secs(20), reading)
                .await
                .unwrap_or_else(|_| panic!("round {i}: a record was left unwritten"));
            for sender in senders {
                sender.await.unwrap();
            }
        }
    }
}

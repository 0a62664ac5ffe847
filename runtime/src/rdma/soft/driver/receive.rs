//! The receive side: the stream's read half and its buffer ([`Receiver`]), the receive task,
//! one read fed to the core ([`Shared::receive_step`]), and direct placement from the socket
//! into registered memory: tagged payloads ([`read_direct`]) and large Sends, whose payload a
//! scatter read puts into their receive with their header ([`read_scatter`]).

use std::io::{self, IoSliceMut};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, Interest, ReadBuf};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpStream;

use super::{flusher, Input, Shared};
use crate::rdma::soft::core::{DirectPlacement, ScatterTarget};
use crate::rdma::soft::tap::Direction;
use crate::rdma::RegionMemory;

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
/// the payloads of the segments behind it too, which the core then copies. When the core
/// expects such a header next ([`Core::next_read_hint`]: the next segment of a message being
/// placed, the response to a large RDMA Read, or an RDMA Write the consumer announced), the
/// read takes only that header, or an FPDU that comes first and the header after it
/// ([`ReadHint::read_size`]).
///
/// [`Core::next_read_hint`]: crate::rdma::soft::core::Core::next_read_hint
/// [`ReadHint::read_size`]: crate::rdma::soft::core::ReadHint::read_size
const READ_MAX: usize = 64 * 1024;

/// Most bytes a direct read takes after the placed payload (see [`read_direct`]): the core
/// copies those, so a larger share costs a copy; 256 KiB measured as fast as the whole buffer
/// for what it saves in reads, 1 MiB 8-14 % slower.
const DIRECT_AFTER: usize = 256 * 1024;

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
/// of a socket) always holds the connection's own waker, [`ReadWake`](super::ReadWake), which passes each
/// wake-up on to the poller that reads, or else to the receive task. With a completion hook
/// (which runs in the receive task, see [`Connection::set_completion_hook`]) pollers do not
/// read.
///
/// [`Connection::set_completion_hook`]: crate::rdma::Connection::set_completion_hook
pub(crate) struct Receiver {
    rd: OwnedReadHalf,
    /// Mapped on its own, so that it leaves resident memory when the connection closes.
    buf: RegionMemory,
    /// `buf[start..end]`: read and not yet consumed by the core.
    start: usize,
    end: usize,
    /// What the last input left: a direct placement to read into.
    direct_next: bool,
    /// The stream ended or failed, or the core left Full Operation: nothing more is read.
    done: bool,
}

/// The receive task: reads the stream into the core while no poller does (see [`Receiver`]).
pub(super) async fn rx_loop(shared: Arc<Shared>) {
    std::future::poll_fn(|cx| {
        shared.read_wake.set_task(cx.waker());
        loop {
            let step = {
                let mut guard = shared.rx.lock().unwrap_or_else(|e| e.into_inner());
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
    /// released). `Pending`: nothing to read; the stream wakes [`ReadWake`](super::ReadWake) when there is.
    /// `Ready(None)`: the stream ended or failed (the core is closed; [`Shared::kick`] is the
    /// caller's), or the core had already left Full Operation.
    ///
    /// With `take` (a reading poller), the oldest completion is taken under the same lock of
    /// the core ([`Input::taken`]). With `register` (a reader that may stop after this read:
    /// a poller, or a task in [`Shared::poll_input`]), [`ReadWake`](super::ReadWake) is registered for the
    /// stream's next wake-up after a read ([`Shared::wait_for_more`]).
    pub(super) fn receive_step(
        &self,
        rx: &mut Receiver,
        take: bool,
        register: bool,
    ) -> Poll<Option<Input>> {
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
                let scatter = if direct.is_none() && self.scatter_expected() {
                    self.core().scatter_target()
                } else {
                    None
                };
                if let Some(t) = scatter {
                    if let Some(wait) = self.wait_readable(rx, cx) {
                        return wait;
                    }
                    match read_scatter(self, &rx.rd, &t, &mut rx.buf) {
                        Ok(Some(n)) => {
                            if register {
                                self.wait_for_more(rx, cx);
                            }
                            let mut core = self.core();
                            let read = core.take_scatter(&mut rx.buf, &t, n);
                            (rx.start, rx.end) = (read.start, read.end);
                            self.note_inbound(&core);
                            return Poll::Ready(Some(rx.took(Input::of(core, take))));
                        }
                        Ok(None) => continue,
                        Err(e) => {
                            if e.kind() != io::ErrorKind::UnexpectedEof {
                                tracing::debug!(error = %e, "receive failed");
                            }
                            return self.stream_ended(rx);
                        }
                    }
                }
                if let Some(d) = direct {
                    if let Some(wait) = self.wait_readable(rx, cx) {
                        return wait;
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
                            self.note_inbound(&core);
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
            let most = self
                .read_hint()
                .read_size(&rx.buf[rx.start..rx.end])
                .unwrap_or(READ_MAX);
            let upto = rx.buf.len().min(rx.end + most);
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
            self.note_inbound(&core);
            return Poll::Ready(Some(rx.took(Input::of(core, take))));
        }
    }

    /// Waits until the stream is readable, for a read that goes past the receive buffer
    /// (`None`: it is); what `receive_step` returns meanwhile.
    fn wait_readable(
        &self,
        rx: &mut Receiver,
        cx: &mut Context<'_>,
    ) -> Option<Poll<Option<Input>>> {
        let stream: &TcpStream = rx.rd.as_ref();
        match stream.poll_read_ready(cx) {
            Poll::Pending => {
                self.read_wake.registered.store(true, Ordering::SeqCst);
                Some(Poll::Pending)
            }
            Poll::Ready(Err(e)) => {
                tracing::debug!(error = %e, "receive failed");
                Some(self.stream_ended(rx))
            }
            Poll::Ready(Ok(())) => None,
        }
    }

    /// After a poller's read: registers [`ReadWake`](super::ReadWake) for the stream's next wake-up, which tokio
    /// only does when a wait finds nothing to read (a poller that stops at a completion would
    /// otherwise leave nobody to wake; the receive task reads on until that wait). If more is
    /// there already, the poller's [`NextCompletion`](super::NextCompletion) hands it to the receive task when done.
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
    pub(super) fn new(rd: OwnedReadHalf) -> Receiver {
        Receiver {
            rd,
            buf: RegionMemory::zeroed(RX_BUF),
            start: 0,
            end: 0,
            direct_next: false,
            done: false,
        }
    }

    /// Records what input left for the next read.
    fn took(&mut self, input: Input) -> Input {
        self.direct_next = input.direct;
        if !input.established {
            self.done = true;
        }
        input
    }
}

/// One non-blocking vectored read into `io`, which holds `want` bytes. A read shorter than
/// asked for emptied the socket: reported to tokio as "would block" (the bytes kept), which
/// then clears the readiness as its own `poll_read` does, so the next wait needs no read that
/// finds nothing.
fn read_vectored_once(
    rd: &OwnedReadHalf,
    io: &mut [IoSliceMut<'_>],
    want: usize,
) -> io::Result<usize> {
    let mut got = 0;
    let stream: &TcpStream = rd.as_ref();
    match stream.try_io(Interest::READABLE, || {
        got = rd.try_read_vectored(io)?;
        if got > 0 && got < want {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(got)
    }) {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock && got > 0 => Ok(got),
        res => res,
    }
}

/// One non-blocking read for the scatter target `t` ([`Core::scatter_target`]): `t.head` bytes
/// into `buf`, up to `t.len` into the receive's registration, and up to [`READ_MAX`] after them
/// into `buf` behind a gap of `t.len` bytes (where [`Core::take_scatter`] puts back what the
/// region got that is not payload). Returns how many bytes were read in all (`None`: nothing
/// to read yet).
///
/// [`Core::scatter_target`]: crate::rdma::soft::core::Core::scatter_target
/// [`Core::take_scatter`]: crate::rdma::soft::core::Core::take_scatter
fn read_scatter(
    shared: &Shared,
    rd: &OwnedReadHalf,
    t: &ScatterTarget,
    buf: &mut [u8],
) -> io::Result<Option<usize>> {
    let place = t.offset..t.offset + t.len;
    let res: io::Result<usize> = t.region.with_mut_slice(|s| {
        let (front, back) = buf.split_at_mut(t.head + t.len);
        let after = back.len().min(READ_MAX);
        let want = t.head + t.len + after;
        let mut io = [
            IoSliceMut::new(&mut front[..t.head]),
            IoSliceMut::new(&mut s[place.clone()]),
            IoSliceMut::new(&mut back[..after]),
        ];
        let n = read_vectored_once(rd, &mut io, want)?;
        if let Some(tap) = &shared.tap {
            let first = n.min(t.head);
            let second = (n - first).min(t.len);
            tap.record(Direction::Received, &front[..first]);
            tap.record(Direction::Received, &s[place.start..place.start + second]);
            tap.record(Direction::Received, &back[..n - first - second]);
        }
        Ok(n)
    });
    match res {
        Ok(0) => Err(io::ErrorKind::UnexpectedEof.into()),
        Ok(n) => Ok(Some(n)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e),
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
        // out of `buf`. So at the end of one when more is expected (calls in flight): the
        // next FPDU, most likely the reply's Send, is then read to its end
        // ([`ReadHint::read_size`]).
        let after = if d.more || d.expect_more {
            d.trailer + d.read_after
        } else {
            DIRECT_AFTER
        };
        let after = buf.len().min(after);
        let want = place.len() + after;
        let mut io = [
            IoSliceMut::new(&mut s[place.clone()]),
            IoSliceMut::new(&mut buf[..after]),
        ];
        let n = read_vectored_once(rd, &mut io, want)?;
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

//! The thin tokio driver: moves bytes between a TCP stream and a [`Core`], and wakes
//! completion pollers. Two tasks per connection: receive (socket -> core, with direct
//! placement of tagged payloads into registered memory) and transmit (core -> socket, with
//! vectored writes straight from registered memory).

use std::io::{self, IoSlice, IoSliceMut};
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::core::{Core, DirectPlacement, State, Transmit};
use super::tap::{ConnTap, Direction};
use super::wire::{ddp, mpa};
use crate::rdma::Completion;

/// Receive buffer size; larger than any FPDU (MULPDU <= 65535 plus markers).
const RX_BUF: usize = 256 * 1024;

/// State shared by a connection handle and its driver tasks.
pub(crate) struct Shared {
    core: Mutex<Core>,
    tx_notify: Notify,
    cq_notify: Notify,
    tap: Option<ConnTap>,
}

impl Shared {
    pub(crate) fn new(core: Core, tap: Option<ConnTap>) -> Arc<Shared> {
        Arc::new(Shared {
            core: Mutex::new(core),
            tx_notify: Notify::new(),
            cq_notify: Notify::new(),
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

    pub(crate) async fn next_completion(&self) -> Completion {
        loop {
            let mut notified = pin!(self.cq_notify.notified());
            notified.as_mut().enable();
            if let Some(c) = self.core().poll_completion() {
                return c;
            }
            notified.await;
        }
    }
}

/// Starts the driver tasks; returns (receive task, transmit task).
pub(crate) fn spawn(shared: Arc<Shared>, stream: TcpStream) -> (JoinHandle<()>, JoinHandle<()>) {
    let (rd, wr) = stream.into_split();
    let rx = tokio::spawn(rx_loop(shared.clone(), rd));
    let tx = tokio::spawn(tx_loop(shared, wr));
    (rx, tx)
}

/// Stream bytes read after a directly placed payload: its pad and the ULPDU length and DDP
/// header of a tagged segment, so that a run of large tagged segments stays on the direct path.
const NEXT_HEADER: usize = mpa::ULPDU_LEN_LEN + ddp::TAGGED_LEN;

async fn rx_loop(shared: Arc<Shared>, mut rd: OwnedReadHalf) {
    let mut buf = vec![0u8; RX_BUF];
    let (mut start, mut end) = (0usize, 0usize);
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
                if let Err(e) = rd.readable().await {
                    tracing::debug!(error = %e, "receive failed");
                    closed(&shared);
                    break;
                }
                match read_direct(&shared, &rd, &d, &mut buf) {
                    Ok(Some(n)) => {
                        end = n;
                        let mut core = shared.core();
                        if end > 0 {
                            start = core.handle_input(&buf[..end]);
                        }
                        let established = core.state() == State::Established;
                        let kick = end > 0 || core.has_completions() || core.wants_transmit();
                        drop(core);
                        if kick || !established {
                            shared.kick();
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
        let mut core = shared.core();
        start += core.handle_input(&buf[start..end]);
        let established = core.state() == State::Established;
        drop(core);
        shared.kick();
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
    let tail = d.pad + NEXT_HEADER;
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

async fn tx_loop(shared: Arc<Shared>, mut wr: OwnedWriteHalf) {
    let mut out = Transmit::new();
    loop {
        let mut notified = pin!(shared.tx_notify.notified());
        notified.as_mut().enable();
        let (shutdown, more) = {
            let mut core = shared.core();
            core.transmitted(&mut out);
            let shutdown = core.poll_transmit(&mut out);
            (shutdown, core.wants_transmit())
        };
        shared.cq_notify.notify_waiters();
        if !out.is_empty() {
            let mut res = write_some(&shared, &wr, &mut out);
            if res.is_ok() && !out.is_empty() {
                // The socket is full; wait for room, then go round (more may be queued).
                res = wr.writable().await;
            }
            if let Err(e) = res {
                tracing::debug!(error = %e, "send failed");
                closed(&shared);
                break;
            }
            continue;
        }
        if shutdown {
            let _ = wr.shutdown().await;
            break;
        }
        if !more {
            notified.await;
        }
    }
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

//! The transmit side: the transmit task, which takes over what a poster could not write at
//! once and shuts the stream down, and the vectored, non-blocking writes every writer uses.

use std::io::{self, IoSlice};
use std::pin::pin;
use std::sync::Arc;

use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;

use super::{Shared, TxStep};
use crate::rdma::soft::core::Transmit;
use crate::rdma::soft::tap::{ConnTap, Direction};
use crate::socket_send::try_send_vectored;

pub(super) async fn tx_loop(shared: Arc<Shared>) {
    let Some(wr) = shared.wr.get() else {
        return;
    };
    loop {
        let mut notified = pin!(shared.tx_notify.notified());
        notified.as_mut().enable();
        // A writer holding the lock tells this task when it lets go: a task does not sleep on
        // a lock and hold up its worker (a poster holds it for a whole batch's write).
        let step = shared
            .try_tx_or_wait()
            .map(|mut out| shared.transmit_step(wr, &mut out));
        let Some(step) = step else {
            notified.await;
            continue;
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
pub(super) fn write_some(
    shared: &Shared,
    wr: &OwnedWriteHalf,
    out: &mut Transmit,
) -> io::Result<()> {
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

/// One non-blocking write of `slices`, never raising SIGPIPE (see [`crate::socket_send`]). A
/// single slice (every small message: the transmit queue stages them in one buffer) goes out
/// with `send`, which skips the iovec import.
fn try_write(wr: &OwnedWriteHalf, slices: &[IoSlice<'_>]) -> io::Result<usize> {
    match slices {
        [one] => wr.try_write(one),
        _ => try_send_vectored(wr.as_ref(), slices),
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

//! Gathered writes to a TCP socket that never raise SIGPIPE.
//!
//! tokio's `try_write_vectored` ends in `writev(2)`, which raises SIGPIPE when the connection
//! can no longer send (the peer reset it and the reader has already taken the error). Rust
//! programs ignore SIGPIPE from the start, but a program that restores its default action (as
//! command-line tools do to stop quietly on a closed pipe), or a C program that embeds the
//! library, would be killed by a peer that resets a connection mid-transfer. `send` already
//! passes `MSG_NOSIGNAL` (std does, for `try_write`); this does the same for gather lists with
//! `sendmsg(2)`, so a dead connection is an `EPIPE` error on that connection only.

use std::io::{self, IoSlice};
use std::os::fd::AsRawFd;

use tokio::io::Interest;
use tokio::net::TcpStream;

/// Writes as much of `bufs` as the socket takes now, like [`TcpStream::try_write_vectored`]
/// (`WouldBlock` when it takes nothing), with `MSG_NOSIGNAL`.
pub(crate) fn try_send_vectored(stream: &TcpStream, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    stream.try_io(Interest::WRITABLE, || {
        // SAFETY: `IoSlice` is ABI-compatible with `iovec` on Unix (its documented
        // guarantee), the slices outlive the call, and `sendmsg` only reads them; the
        // remaining fields of the header stay zero (no address, no control data).
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
        // Callers pass at most a few dozen slices, far under IOV_MAX.
        msg.msg_iovlen = bufs.len() as _;
        // SAFETY: the descriptor is the stream's own, open for as long as `stream` is borrowed.
        let sent = unsafe { libc::sendmsg(stream.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if sent < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(sent as usize)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The signal set holding SIGPIPE alone.
    fn sigpipe_only() -> libc::sigset_t {
        // SAFETY: plain signal-set calls on a local set.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGPIPE);
            set
        }
    }

    /// Whether SIGPIPE is pending for this thread; takes it if so.
    fn take_pending_sigpipe() -> bool {
        // SAFETY: plain signal-set calls on local sets; `sigtimedwait` with a zero timeout
        // only takes a signal that is already pending and blocked in this thread.
        unsafe {
            let mut pending: libc::sigset_t = std::mem::zeroed();
            libc::sigpending(&mut pending);
            if libc::sigismember(&pending, libc::SIGPIPE) != 1 {
                return false;
            }
            let zero = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            libc::sigtimedwait(&sigpipe_only(), std::ptr::null_mut(), &zero);
            true
        }
    }

    #[test]
    fn a_gathered_write_to_a_connection_that_cannot_send_is_epipe_without_sigpipe() {
        // SIGPIPE blocked in this thread stays pending when raised (a blocked signal is not
        // discarded even where its action is to ignore it), so the test sees whether the write
        // raised it without changing what the rest of the test process does with it.
        // SAFETY: changes this thread's signal mask only.
        let old = unsafe {
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, &sigpipe_only(), &mut old);
            old
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (result, raised) = rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let ours = TcpStream::connect(listener.local_addr().unwrap())
                .await
                .unwrap();
            let _theirs = listener.accept().await.unwrap();
            // The sending side shut: every send fails with EPIPE, the case that raises SIGPIPE.
            // SAFETY: the stream's own descriptor.
            assert_eq!(
                unsafe { libc::shutdown(ours.as_raw_fd(), libc::SHUT_WR) },
                0
            );
            ours.writable().await.unwrap();
            let bufs = [IoSlice::new(b"record mark"), IoSlice::new(b"payload")];
            let result = try_send_vectored(&ours, &bufs);
            (result, take_pending_sigpipe())
        });
        // SAFETY: restores this thread's signal mask.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
        assert_eq!(result.map_err(|e| e.kind()), Err(io::ErrorKind::BrokenPipe));
        assert!(!raised, "the write raised SIGPIPE");
    }
}

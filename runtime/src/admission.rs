//! Admission of new connections, shared by every accept loop of the crate (the soft
//! provider's listener, the RPC-over-RDMA server, ONC RPC over TCP): which accept errors are
//! about one connection, how long to pause after the others, and the rate-limited log line a
//! refused connection leaves.

use std::io;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long to wait before accepting again after an error that is not about one connection
/// (out of file descriptors, memory): accepting again at once would spin on the same error.
pub(crate) const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// True when a failed `accept` concerns only the connection it was taking (the peer reset or
/// aborted it first, a signal interrupted the call), so the loop goes on at once.
pub(crate) fn is_about_one_connection(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}

/// At most one line per this interval for each kind of refusal: a flood of connections over
/// a limit must not turn into a flood of log lines (the kernel rate-limits its own "possible
/// SYN flooding" and socket-limit messages the same way, `net_ratelimit`).
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(1);

/// The log of connections refused because a limit was reached: a `warn` line naming the
/// peer and the limit for the first refusal, then at most one per second, each saying how
/// many refusals went unlogged since the previous line.
#[derive(Debug)]
pub(crate) struct Refusals {
    /// What was refused and why, the line's message.
    what: &'static str,
    /// The limit's name in the configuration, for the reader who wants to raise it.
    setting: &'static str,
    /// When the last line was written, and the refusals since.
    state: Mutex<(Option<Instant>, u64)>,
}

impl Refusals {
    /// A log for refusals described by `what`, under the limit `setting`.
    pub(crate) const fn new(what: &'static str, setting: &'static str) -> Refusals {
        Refusals {
            what,
            setting,
            state: Mutex::new((None, 0)),
        }
    }

    /// Notes that `peer` was refused because `limit` connections were already there.
    pub(crate) fn refused(&self, peer: SocketAddr, limit: usize) {
        let now = Instant::now();
        let unlogged = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let (last, unlogged) = &mut *state;
            if last.is_some_and(|t| now.duration_since(t) < REFUSAL_LOG_INTERVAL) {
                *unlogged += 1;
                return;
            }
            *last = Some(now);
            std::mem::take(unlogged)
        };
        tracing::warn!(
            %peer,
            limit,
            setting = self.setting,
            unlogged_refusals = unlogged,
            "{}",
            self.what
        );
    }

    /// Refusals not logged yet (for tests).
    #[cfg(test)]
    fn unlogged(&self) -> u64 {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_refusals_logs_once_and_counts_the_rest() {
        let log = Refusals::new("refused", "limit");
        let peer: SocketAddr = "192.0.2.1:1".parse().unwrap();
        log.refused(peer, 4);
        assert_eq!(log.unlogged(), 0, "the first refusal is logged");
        for _ in 0..9 {
            log.refused(peer, 4);
        }
        // Nine more within the interval: counted for the next line, not logged one by one.
        assert_eq!(log.unlogged(), 9);
    }

    #[test]
    fn only_connection_level_accept_errors_are_about_one_connection() {
        for kind in [
            io::ErrorKind::ConnectionAborted,
            io::ErrorKind::ConnectionReset,
            io::ErrorKind::Interrupted,
        ] {
            assert!(is_about_one_connection(&io::Error::from(kind)), "{kind:?}");
        }
        // EMFILE and ENOMEM are about the process: the loop pauses.
        for errno in [libc::EMFILE, libc::ENFILE, libc::ENOMEM] {
            let error = io::Error::from_raw_os_error(errno);
            assert!(!is_about_one_connection(&error), "{error}");
        }
    }
}

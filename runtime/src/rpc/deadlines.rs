//! The default call timeout without a timer per call, for the TCP client and the
//! RPC-over-RDMA connections; the same kernel timer (`Ticker`) paces the RDMA listener's
//! idle sweep.
//!
//! A tokio timer per call (registered when the call waits, cancelled when its reply comes)
//! cost 0.3-0.5 us of a 15 us NULL call on loopback. So a call under the configured default
//! timeout only notes its deadline, and a task of its connection looks at the waiting calls
//! once per period and fails those past their deadline. A call therefore fails at most one
//! period late (an eighth of the timeout, between 10 ms and a second), and a tick of the
//! coarse clock below. A call with a timeout of its own keeps a timer of its own: it may be
//! short and must be exact.
//!
//! The task's period comes from a kernel timer read like a socket (`timerfd`), not from the
//! runtime's timers, and not from a thread; both of those cost every call, measured with one
//! NULL call at a time on loopback:
//! * any tokio timer makes the runtime wait for I/O with a timeout, for which the kernel arms
//!   a timer each time the thread sleeps: a periodic tokio timer per connection cost 2.7 %;
//! * a second thread (one sweeper thread per process did this before) makes the process's
//!   threads share their descriptor table, and Linux then takes and drops a reference on the
//!   file in every system call on a descriptor: an idle thread cost a single-threaded client
//!   0.8 % (three such calls per call), which libtirpc's client, single-threaded, does not
//!   pay. (The thread cannot leave the table: it wakes tasks, which writes to their
//!   runtime's eventfd.)
//!
//! Deadlines are kept on the coarse monotonic clock ([`CoarseInstant`]): read once per call,
//! the precise clock cost 21.6 ns here (a virtual machine's clock source); the coarse one
//! costs 3.9 ns, and its resolution (a kernel tick, 4 ms) is well within the sweeper's
//! period.

use std::io;
use std::ops::Add;
#[cfg(target_os = "linux")]
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

#[cfg(target_os = "linux")]
use tokio::io::unix::AsyncFd;
#[cfg(target_os = "linux")]
use tokio::io::Interest;
use tokio::task::JoinHandle;

/// Something with calls that may pass their deadline: a connection.
pub(crate) trait Expire: Send + Sync {
    /// Fails the calls whose deadline is at or before `now`.
    fn expire(self: Arc<Self>, now: CoarseInstant);
}

/// A time on the coarse monotonic clock (`CLOCK_MONOTONIC_COARSE` on Linux; elsewhere the
/// standard clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct CoarseInstant(Duration);

impl CoarseInstant {
    /// Now, to within the clock's resolution (behind, never ahead).
    pub(crate) fn now() -> CoarseInstant {
        CoarseInstant(coarse_clock())
    }

    /// A deadline `limit` from now that is never early: the reading may lag by up to a
    /// resolution, which is added.
    pub(crate) fn after(limit: Duration) -> CoarseInstant {
        CoarseInstant::now() + limit + resolution()
    }

    /// How long after `earlier` this is (zero if it is not after).
    pub(crate) fn saturating_duration_since(self, earlier: CoarseInstant) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    /// The same time on the standard clock (for a tokio timer).
    pub(crate) fn to_instant(self) -> Instant {
        Instant::now() + self.0.saturating_sub(coarse_clock())
    }
}

impl Add<Duration> for CoarseInstant {
    type Output = CoarseInstant;

    fn add(self, d: Duration) -> CoarseInstant {
        CoarseInstant(self.0.saturating_add(d))
    }
}

#[cfg(target_os = "linux")]
fn read_clock(
    clock: libc::clockid_t,
    read: unsafe extern "C" fn(libc::clockid_t, *mut libc::timespec) -> libc::c_int,
) -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write; the clock exists on every Linux since 2.6.32.
    let ok = unsafe { read(clock, &mut t) } == 0;
    match ok {
        true => Duration::new(t.tv_sec as u64, t.tv_nsec as u32),
        false => Duration::ZERO,
    }
}

#[cfg(target_os = "linux")]
fn coarse_clock() -> Duration {
    read_clock(libc::CLOCK_MONOTONIC_COARSE, libc::clock_gettime)
}

/// How far the coarse clock may lag (at least a millisecond; 10 ms if unknown).
#[cfg(target_os = "linux")]
fn resolution() -> Duration {
    static RESOLUTION: OnceLock<Duration> = OnceLock::new();
    *RESOLUTION.get_or_init(
        || match read_clock(libc::CLOCK_MONOTONIC_COARSE, libc::clock_getres) {
            Duration::ZERO => Duration::from_millis(10),
            r => r.max(Duration::from_millis(1)),
        },
    )
}

#[cfg(not(target_os = "linux"))]
fn coarse_clock() -> Duration {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed()
}

#[cfg(not(target_os = "linux"))]
fn resolution() -> Duration {
    Duration::ZERO
}

/// How often a connection whose calls time out after `timeout` is looked at.
pub(crate) fn period(timeout: Duration) -> Duration {
    (timeout / 8).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

/// Has `connection` looked at every `period` while it lives, by a task of the current
/// runtime; the task ends once the connection is dropped (abort it to end it sooner).
pub(crate) fn watch(connection: Weak<dyn Expire>, period: Duration) -> io::Result<JoinHandle<()>> {
    let mut ticker = Ticker::new(period)?;
    Ok(tokio::spawn(async move {
        loop {
            if let Err(error) = ticker.tick().await {
                tracing::error!(%error, "the deadline timer failed: calls no longer time out");
                return;
            }
            let Some(connection) = connection.upgrade() else {
                return;
            };
            connection.expire(CoarseInstant::now());
        }
    }))
}

/// A periodic timer the runtime reads like a socket: a kernel timer (`timerfd`) that rearms
/// itself, so that the runtime keeps waiting without a timeout (see the module's doc).
#[cfg(target_os = "linux")]
pub(crate) struct Ticker(AsyncFd<OwnedFd>);

#[cfg(target_os = "linux")]
impl Ticker {
    /// A timer whose first period ends `period` from now; needs a runtime with I/O.
    pub(crate) fn new(period: Duration) -> io::Result<Ticker> {
        // SAFETY: plain flags; the result is checked.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and belongs to nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let every = libc::timespec {
            tv_sec: period.as_secs().try_into().unwrap_or(libc::time_t::MAX),
            tv_nsec: period.subsec_nanos().into(),
        };
        let spec = libc::itimerspec {
            it_interval: every,
            it_value: every,
        };
        // SAFETY: a valid descriptor and setting; the previous setting is not asked for.
        if unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: an `OwnedFd` is an open descriptor that stays the same, referring to the
        // same timer, until it is dropped (with the `AsyncFd`).
        let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) };
        Ok(Ticker(fd.map_err(|e| e.into_parts().1)?))
    }

    /// Waits for the next period to end (or for several, if the task was late).
    pub(crate) async fn tick(&mut self) -> io::Result<()> {
        loop {
            let mut ready = self.0.readable().await?;
            let read = ready.try_io(|fd| {
                let mut expirations = [0u8; 8];
                // SAFETY: reads at most 8 bytes into `expirations`.
                let n = unsafe { libc::read(fd.as_raw_fd(), expirations.as_mut_ptr().cast(), 8) };
                match n {
                    8 => Ok(()),
                    n if n < 0 => Err(io::Error::last_os_error()),
                    _ => Err(io::ErrorKind::UnexpectedEof.into()),
                }
            });
            if let Ok(result) = read {
                return result;
            }
        }
    }
}

/// Elsewhere, a tokio interval (which does make each wait of the runtime take a timeout).
#[cfg(not(target_os = "linux"))]
pub(crate) struct Ticker(tokio::time::Interval);

#[cfg(not(target_os = "linux"))]
impl Ticker {
    pub(crate) fn new(period: Duration) -> io::Result<Ticker> {
        let start = tokio::time::Instant::now() + period;
        let mut interval = tokio::time::interval_at(start, period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Ok(Ticker(interval))
    }

    pub(crate) async fn tick(&mut self) -> io::Result<()> {
        self.0.tick().await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counting(AtomicUsize);

    impl Expire for Counting {
        fn expire(self: Arc<Self>, _now: CoarseInstant) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[tokio::test]
    async fn a_watched_connection_is_swept_every_period_until_dropped() {
        let connection = Arc::new(Counting(AtomicUsize::new(0)));
        let weak: Weak<Counting> = Arc::downgrade(&connection);
        let task = watch(weak, period(Duration::from_millis(1))).unwrap();
        let start = Instant::now();
        while connection.0.load(Ordering::Relaxed) < 3 {
            assert!(start.elapsed() < Duration::from_secs(10), "never swept");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(connection);
        let start = Instant::now();
        while !task.is_finished() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "swept after its end"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[test]
    fn the_period_is_an_eighth_of_the_timeout_within_bounds() {
        assert_eq!(period(Duration::from_secs(25)), Duration::from_secs(1));
        assert_eq!(period(Duration::from_secs(4)), Duration::from_millis(500));
        assert_eq!(period(Duration::from_millis(20)), Duration::from_millis(10));
    }

    #[test]
    fn a_coarse_deadline_is_never_before_the_precise_one() {
        let limit = Duration::from_millis(30);
        let precise = Instant::now() + limit;
        let coarse = CoarseInstant::after(limit);
        assert!(coarse.to_instant() >= precise);
        assert!(coarse.to_instant() <= precise + resolution() * 2 + Duration::from_millis(50));
    }
}

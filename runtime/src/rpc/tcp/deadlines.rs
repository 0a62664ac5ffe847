//! The default call timeout without a timer per call.
//!
//! A tokio timer per call (registered when the call waits, cancelled when its reply comes)
//! cost 0.3-0.5 us of a 15 us NULL call on loopback, and any timer registered with the
//! runtime makes each of its parks dearer. So a call under the configured default timeout
//! only notes its deadline; one thread of the process looks at every connection's waiting
//! calls once per period and fails those past their deadline. A call therefore fails at most
//! one period late (an eighth of the timeout, between 10 ms and a second). A call with a
//! timeout of its own keeps a timer of its own: it may be short and must be exact.

use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

/// Something with calls that may pass their deadline: a connection.
pub(super) trait Expire: Send + Sync {
    /// Fails the calls whose deadline is at or before `now`.
    fn expire(&self, now: Instant);
}

/// How often a connection whose calls time out after `timeout` is looked at.
pub(super) fn period(timeout: Duration) -> Duration {
    (timeout / 8).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

/// Has `connection` looked at every `period` while it lives (it is forgotten once dropped).
pub(super) fn watch(connection: Weak<dyn Expire>, period: Duration) {
    let sweeper = sweeper();
    let mut watched = sweeper.lock();
    watched.push(Watched { connection, period });
    drop(watched);
    sweeper.wake.notify_one();
}

struct Watched {
    connection: Weak<dyn Expire>,
    period: Duration,
}

struct Sweeper {
    watched: Mutex<Vec<Watched>>,
    /// Wakes the thread when it sleeps with nothing to watch.
    wake: Condvar,
}

impl Sweeper {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Watched>> {
        self.watched.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The thread: forgets dropped connections, sleeps the shortest period, sweeps.
    fn run(&self) {
        loop {
            let (live, period) = {
                let mut watched = self.lock();
                watched.retain(|w| w.connection.strong_count() > 0);
                while watched.is_empty() {
                    watched = self.wake.wait(watched).unwrap_or_else(|e| e.into_inner());
                    watched.retain(|w| w.connection.strong_count() > 0);
                }
                let period = watched.iter().map(|w| w.period).min();
                let live: Vec<Arc<dyn Expire>> = watched
                    .iter()
                    .filter_map(|w| w.connection.upgrade())
                    .collect();
                (live, period.unwrap_or(Duration::from_secs(1)))
            };
            let now = Instant::now();
            for connection in &live {
                connection.expire(now);
            }
            // Not holding a connection while asleep: a dropped one goes at once.
            drop(live);
            // A connection watched meanwhile (perhaps with a shorter period) cuts this short.
            let watched = self.lock();
            drop(self.wake.wait_timeout(watched, period));
        }
    }
}

/// The process's sweeper, its thread started on first use.
fn sweeper() -> &'static Sweeper {
    static SWEEPER: OnceLock<&'static Sweeper> = OnceLock::new();
    SWEEPER.get_or_init(|| {
        let sweeper: &'static Sweeper = Box::leak(Box::new(Sweeper {
            watched: Mutex::new(Vec::new()),
            wake: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("rpc-tcp-deadlines".into())
            .spawn(move || sweeper.run())
            .expect("start the thread that times out TCP calls");
        sweeper
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counting(AtomicUsize);

    impl Expire for Counting {
        fn expire(&self, _now: Instant) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_watched_connection_is_swept_every_period_until_dropped() {
        let connection = Arc::new(Counting(AtomicUsize::new(0)));
        let weak: Weak<Counting> = Arc::downgrade(&connection);
        watch(weak, period(Duration::from_millis(1)));
        let start = Instant::now();
        while connection.0.load(Ordering::Relaxed) < 3 {
            assert!(start.elapsed() < Duration::from_secs(10), "never swept");
            std::thread::sleep(Duration::from_millis(5));
        }
        let weak = Arc::downgrade(&connection);
        drop(connection);
        // The sweeper holds it only while sweeping.
        let start = Instant::now();
        while weak.strong_count() > 0 {
            assert!(start.elapsed() < Duration::from_secs(10), "kept alive");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn the_period_is_an_eighth_of_the_timeout_within_bounds() {
        assert_eq!(period(Duration::from_secs(25)), Duration::from_secs(1));
        assert_eq!(period(Duration::from_secs(4)), Duration::from_millis(500));
        assert_eq!(period(Duration::from_millis(20)), Duration::from_millis(10));
    }
}

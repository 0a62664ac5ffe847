//! CPU time of the whole process, for CPU-per-byte figures: both ends of a loopback transfer
//! run in the bench's process, so its user + system time covers the sender, the receiver and
//! the kernel's TCP work done on their behalf.

use std::time::Duration;

/// User + system CPU time this process has used so far (`getrusage(RUSAGE_SELF)`).
pub fn process_cpu_time() -> Duration {
    // SAFETY: `getrusage` writes a `rusage` into the zeroed value we own; RUSAGE_SELF is valid.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
            return Duration::ZERO;
        }
        usage
    };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Wall-clock and process CPU time since it was started (usable across `.await`s).
#[derive(Debug, Clone, Copy)]
pub struct Stopwatch {
    wall: std::time::Instant,
    cpu: Duration,
}

impl Stopwatch {
    /// Starts both clocks.
    pub fn start() -> Stopwatch {
        Stopwatch {
            cpu: process_cpu_time(),
            wall: std::time::Instant::now(),
        }
    }

    /// Wall-clock time and process CPU time since [`start`](Self::start).
    pub fn elapsed(&self) -> (Duration, Duration) {
        (
            self.wall.elapsed(),
            process_cpu_time().saturating_sub(self.cpu),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_loop_uses_cpu() {
        let watch = Stopwatch::start();
        let mut x = 0u64;
        while watch.elapsed().0 < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let (wall, cpu) = watch.elapsed();
        assert!(wall >= Duration::from_millis(30));
        assert!(cpu > Duration::ZERO, "{cpu:?}");
    }
}

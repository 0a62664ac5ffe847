//! A global allocator that aborts when one allocation exceeds a bound set around each run.
//!
//! A peer that sends a few bytes must not make us allocate megabytes (the bound a count or a
//! length read from the input has to respect before anything is reserved). Each target
//! installs [`BoundedAlloc`] as its global allocator and wraps its body in [`with_bound`]
//! with a bound of the form `factor x input length + constant`; outside the body (libFuzzer's
//! own bookkeeping, which goes through `malloc` anyway) nothing is checked.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;
use std::sync::Once;

thread_local! {
    /// The largest single allocation this thread may make right now (`usize::MAX`: not
    /// armed). Per thread: only the thread running the target's body is checked.
    static LIMIT: Cell<usize> = const { Cell::new(usize::MAX) };
    /// The largest single allocation this thread made since its last [`with_bound`] began.
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

/// Sets this thread's limit (`usize::MAX` disarms it).
fn set_limit(limit: usize) {
    LIMIT.with(|l| l.set(limit));
}

/// The system allocator, checking every request against the armed bound.
pub struct BoundedAlloc;

impl BoundedAlloc {
    fn check(size: usize) {
        PEAK.with(|p| p.set(p.get().max(size)));
        let limit = LIMIT.with(Cell::get);
        if size > limit {
            // Disarm first: writing the message may allocate.
            set_limit(usize::MAX);
            let _ = writeln!(
                std::io::stderr(),
                "alloc_bound: one allocation of {size} bytes exceeds this input's bound of \
                 {limit} bytes"
            );
            std::process::abort();
        }
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the check
// only reads and writes const-initialised thread-locals without destructors (no allocation),
// and, before aborting, stderr with the bound disarmed.
unsafe impl GlobalAlloc for BoundedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::check(layout.size());
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::check(layout.size());
        System.alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Self::check(new_size);
        System.realloc(ptr, layout, new_size)
    }
}

/// The bound for an input of `input_len` bytes: `factor * input_len + constant`.
pub const fn bound(input_len: usize, factor: usize, constant: usize) -> usize {
    input_len.saturating_mul(factor).saturating_add(constant)
}

/// Installs, once, a panic hook that disarms the bound before the previous hook (libFuzzer's,
/// which prints and aborts) runs: a panic's report and backtrace are not the input's fault.
fn disarm_on_panic() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            set_limit(usize::MAX);
            previous(info)
        }));
    });
}

/// Runs `body` with single allocations limited to `limit` bytes; returns its result and the
/// largest single allocation it made.
pub fn with_bound<R>(limit: usize, body: impl FnOnce() -> R) -> (R, usize) {
    disarm_on_panic();
    PEAK.with(|p| p.set(0));
    set_limit(limit);
    let result = body();
    set_limit(usize::MAX);
    (result, PEAK.with(Cell::get))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[global_allocator]
    static ALLOC: BoundedAlloc = BoundedAlloc;

    /// Set in the child process of `an_allocation_over_the_bound_aborts`.
    const CHILD: &str = "ALLOC_BOUND_TEST_CHILD";

    #[test]
    fn the_bound_grows_with_the_input() {
        assert_eq!(bound(100, 64, 1000), 7400);
        assert_eq!(bound(usize::MAX, 64, 1), usize::MAX);
    }

    #[test]
    fn allocations_within_the_bound_run_and_are_measured() {
        let (len, peak) = with_bound(10_000, || vec![7u8; 5000].len());
        assert_eq!(len, 5000);
        assert!(peak >= 5000, "peak {peak}");
    }

    #[test]
    fn an_allocation_over_the_bound_aborts() {
        if std::env::var_os(CHILD).is_some() {
            // In the child: this must not return.
            with_bound(1000, || std::hint::black_box(vec![0u8; 4096]).len());
            std::process::exit(0);
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "alloc_bound::tests::an_allocation_over_the_bound_aborts",
            ])
            .args(["--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "the child went on: {stderr}");
        assert!(
            stderr.contains("one allocation of 4096 bytes exceeds this input's bound of 1000"),
            "{stderr}"
        );
    }
}

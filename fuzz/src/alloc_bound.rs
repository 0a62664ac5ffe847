//! A global allocator that aborts when one allocation exceeds a bound set around each run.
//!
//! A peer that sends a few bytes must not make us allocate megabytes (the bound a count or a
//! length read from the input has to respect before anything is reserved). Each target
//! installs [`BoundedAlloc`] as its global allocator and wraps its body in [`with_bound`]
//! with a bound of the form `factor x input length + constant`; outside the body (libFuzzer's
//! own bookkeeping, which goes through `malloc` anyway) nothing is checked.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;

/// The largest single allocation allowed right now (`usize::MAX`: not armed).
static LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);

/// The largest single allocation seen since the last [`with_bound`] began.
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, checking every request against the armed bound.
pub struct BoundedAlloc;

impl BoundedAlloc {
    fn check(size: usize) {
        PEAK.fetch_max(size, Ordering::Relaxed);
        let limit = LIMIT.load(Ordering::Relaxed);
        if size > limit {
            // Disarm first: writing the message may allocate.
            LIMIT.store(usize::MAX, Ordering::Relaxed);
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
// only reads and writes atomics (and, before aborting, stderr with the bound disarmed).
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
            LIMIT.store(usize::MAX, Ordering::Relaxed);
            previous(info)
        }));
    });
}

/// Runs `body` with single allocations limited to `limit` bytes; returns its result and the
/// largest single allocation it made.
pub fn with_bound<R>(limit: usize, body: impl FnOnce() -> R) -> (R, usize) {
    disarm_on_panic();
    PEAK.store(0, Ordering::Relaxed);
    LIMIT.store(limit, Ordering::Relaxed);
    let result = body();
    LIMIT.store(usize::MAX, Ordering::Relaxed);
    (result, PEAK.load(Ordering::Relaxed))
}

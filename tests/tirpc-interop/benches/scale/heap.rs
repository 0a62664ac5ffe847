//! The heap the process holds, counted by its global allocator (the server role reports it;
//! the other roles count too, at the cost of one relaxed atomic add per allocation).
//!
//! Only what goes through the allocator: registered memory of 64 KiB or more is mapped on its
//! own (`rpcrdma::rdma::RegionMemory`), so it shows in the process's `VmData`, not here.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};

/// The system allocator, counting the bytes it holds for the program.
pub struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

/// Bytes allocated and not yet freed.
pub fn live() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

// SAFETY: forwards every call to the system allocator and only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }

    // Forwarded rather than left to the default (alloc, then writing zeros): `calloc` leaves
    // a fresh mapping's pages untouched, so resident memory stays what the program touched.
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

//! Decoding random bytes never allocates more than a small multiple of the input.
//!
//! A counting global allocator measures the peak bytes allocated while decoding hostile input
//! whose counts and lengths claim far more than the input holds.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use proptest::prelude::*;
use rpcrdma::xdr::{self, XdrString};

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

type Target = (Vec<Vec<u64>>, Vec<XdrString>, Option<Vec<u32>>);

/// Peak extra allocation while decoding `input`.
fn peak_while_decoding(input: Bytes) -> usize {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let r = xdr::from_bytes::<Target>(input);
    let peak = PEAK.load(Ordering::Relaxed) - before;
    drop(r);
    peak
}

proptest! {
    // One thread: the allocator counters are global.
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
    #[test]
    fn random_input_allocates_a_small_multiple_of_its_size(words in prop::collection::vec(prop_oneof![any::<u32>(), 0u32..8, Just(u32::MAX), Just(0x4000_0000)], 0..64)) {
        let raw: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
        let len = raw.len();
        let input = Bytes::from(raw);
        let peak = peak_while_decoding(input);
        // In-memory elements are at most 6x their wire size here (Vec<u64> header 24 bytes per
        // 4-byte count, XdrString 32 bytes per 4-byte length) plus small fixed costs.
        prop_assert!(peak <= 8 * len + 512, "peak {} for {} input bytes", peak, len);
    }
}

//! libFuzzer entry of [`rpcrdma_fuzz::targets::mpa_setup`]: what it runs, its input layout and
//! its allocation bound are documented there.
#![no_main]

use rpcrdma_fuzz::alloc_bound::{with_bound, BoundedAlloc};
use rpcrdma_fuzz::targets::mpa_setup;

#[global_allocator]
static ALLOC: BoundedAlloc = BoundedAlloc;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    with_bound(mpa_setup::limit(data.len()), || mpa_setup::run(data));
});

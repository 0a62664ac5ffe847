//! libFuzzer entry of [`rpcrdma_fuzz::targets::v2_header`]: what it runs, its input layout and
//! its allocation bound are documented there.
#![no_main]

use rpcrdma_fuzz::alloc_bound::{with_bound, BoundedAlloc};
use rpcrdma_fuzz::targets::v2_header;

#[global_allocator]
static ALLOC: BoundedAlloc = BoundedAlloc;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    with_bound(v2_header::limit(data.len()), || v2_header::run(data));
});

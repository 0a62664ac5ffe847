//! libFuzzer entry of [`rpcrdma_fuzz::targets::nfs3_chunks`]: what it runs, its input layout and
//! its allocation bound are documented there.
#![no_main]

use rpcrdma_fuzz::alloc_bound::{with_bound, BoundedAlloc};
use rpcrdma_fuzz::targets::nfs3_chunks;

#[global_allocator]
static ALLOC: BoundedAlloc = BoundedAlloc;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    with_bound(nfs3_chunks::limit(data.len()), || nfs3_chunks::run(data));
});

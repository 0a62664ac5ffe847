//! libFuzzer entry of [`rpcrdma_fuzz::targets::rpc_record`]: what it runs, its input layout and
//! its allocation bound are documented there.
#![no_main]

use rpcrdma_fuzz::alloc_bound::{with_bound, BoundedAlloc};
use rpcrdma_fuzz::targets::rpc_record;

#[global_allocator]
static ALLOC: BoundedAlloc = BoundedAlloc;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    with_bound(rpc_record::limit(data.len()), || rpc_record::run(data));
});

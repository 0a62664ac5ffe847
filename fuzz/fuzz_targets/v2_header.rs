//! The RPC-over-RDMA version 2 headers (`specs/common.x` + `specs/baseops.x`, generated into
//! `rpcrdma_specs::v2`): each header type's decoder on a peer's bytes. A value that decodes
//! must encode and decode back to itself.
//!
//! Input: one selector byte (modulo 5: prefix, RDMA2_MSG, RDMA2_NOMSG, RDMA2_ERROR,
//! RDMA2_CONNPROP), then the bytes.
//!
//! Allocation bound: 64 x input + 64 KiB, as for version 1: counts (chunk lists, property
//! sets) are checked against the bytes left before anything is reserved.
#![no_main]

use std::fmt::Debug;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use rpcrdma::xdr::{from_bytes, to_bytes, Decode, Encode};
use rpcrdma_fuzz::alloc_bound::{bound, with_bound, BoundedAlloc};
use rpcrdma_fuzz::cases::Flagged;
use rpcrdma_specs::v2::{
    Rpcrdma2Connprop, Rpcrdma2Error, Rpcrdma2HdrPrefix, Rpcrdma2Msg, Rpcrdma2Nomsg,
};

#[global_allocator]
static ALLOC: BoundedAlloc = BoundedAlloc;

/// Decodes `bytes` as a `T`; a success must survive a round trip.
fn check<T: Decode + Encode + PartialEq + Debug>(bytes: &[u8]) {
    if let Ok(value) = from_bytes::<T>(Bytes::copy_from_slice(bytes)) {
        let again = to_bytes(&value).expect("a decoded value encodes");
        let back: T = from_bytes(again).expect("our encoding decodes");
        assert_eq!(back, value);
    }
}

fuzz_target!(|data: &[u8]| {
    with_bound(bound(data.len(), 64, 64 << 10), || {
        let case = Flagged::split(data);
        match case.flags % 5 {
            0 => check::<Rpcrdma2HdrPrefix>(case.rest),
            1 => check::<Rpcrdma2Msg>(case.rest),
            2 => check::<Rpcrdma2Nomsg>(case.rest),
            3 => check::<Rpcrdma2Error>(case.rest),
            _ => check::<Rpcrdma2Connprop>(case.rest),
        }
    });
});

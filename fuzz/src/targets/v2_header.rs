//! The RPC-over-RDMA version 2 headers (`specs/common.x` + `specs/baseops.x`, generated into
//! `rpcrdma_specs::v2`): each header type's decoder on a peer's bytes. A value that decodes
//! must encode and decode back to itself.
//!
//! Input: one selector byte (modulo 5: prefix, RDMA2_MSG, RDMA2_NOMSG, RDMA2_ERROR,
//! RDMA2_CONNPROP), then the bytes.
//!
//! Allocation bound: 64 x input + 64 KiB, as for version 1: counts (chunk lists, property
//! sets) are checked against the bytes left before anything is reserved.

use std::fmt::Debug;

use crate::alloc_bound::bound;
use crate::cases::Flagged;
use bytes::Bytes;
use rpcrdma::xdr::{from_bytes, to_bytes, Decode, Encode};
use rpcrdma_specs::v2::{
    Rpcrdma2Connprop, Rpcrdma2Error, Rpcrdma2HdrPrefix, Rpcrdma2Msg, Rpcrdma2Nomsg,
};

/// Decodes `bytes` as a `T`; a success must survive a round trip.
fn check<T: Decode + Encode + PartialEq + Debug>(bytes: &[u8]) {
    if let Ok(value) = from_bytes::<T>(Bytes::copy_from_slice(bytes)) {
        let again = to_bytes(&value).expect("a decoded value encodes");
        let back: T = from_bytes(again).expect("our encoding decodes");
        assert_eq!(back, value);
    }
}

/// The largest single allocation allowed for an input of `len` bytes (see above).
pub fn limit(len: usize) -> usize {
    bound(len, 64, 64 << 10)
}

/// One run on a raw input: returns normally, or panics on a finding.
pub fn run(data: &[u8]) {
    let case = Flagged::split(data);
    match case.flags % 5 {
        0 => check::<Rpcrdma2HdrPrefix>(case.rest),
        1 => check::<Rpcrdma2Msg>(case.rest),
        2 => check::<Rpcrdma2Nomsg>(case.rest),
        3 => check::<Rpcrdma2Error>(case.rest),
        _ => check::<Rpcrdma2Connprop>(case.rest),
    }
}

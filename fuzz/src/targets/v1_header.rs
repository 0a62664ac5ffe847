//! The RPC-over-RDMA version 1 header as a peer sends it: `transport::header::parse_with` (every
//! check a responder or requester makes, in the default and in the 2004 mode) and the generated `rpcrdma1_msg` decoder on the same
//! bytes. A header that parses must encode and parse back to itself; a message the generated
//! decoder accepts must encode and decode back to itself.
//!
//! Input: the received message, as is (dictionary: `dict/rpcrdma.dict`).
//!
//! Allocation bound: 64 x input + 64 KiB. Counts are checked against the bytes left before
//! anything is reserved; a decoded element is at most a few times its smallest encoding (a
//! 4-byte list entry becomes a 24-byte `Vec`), so 64 leaves room for `Vec` doubling.

use crate::alloc_bound::bound;
use bytes::Bytes;
use rpcrdma::transport::header::{self, v1::Rpcrdma1Msg, HeaderLimits};
use rpcrdma::xdr::{from_bytes, to_bytes, Encoder};

/// The largest single allocation allowed for an input of `len` bytes (see above).
pub fn limit(len: usize) -> usize {
    bound(len, 64, 64 << 10)
}

/// One run on a raw input: returns normally, or panics on a finding.
pub fn run(data: &[u8]) {
    let limits = HeaderLimits::default();
    // As a receiver in the default mode (RDMA_MSGP taken as RDMA_MSG) and in the 2004 mode
    // (RDMA_MSGP kept with its padding).
    for keep_padding in [false, true] {
        let Ok((parsed, len)) = header::parse_with(data, &limits, keep_padding) else {
            continue;
        };
        assert!(len <= data.len(), "the header lies within the message");
        let mut enc = Encoder::new();
        header::encode(&parsed, &mut enc).expect("a parsed header encodes");
        let again = enc.finish().to_bytes();
        assert_eq!(again.len(), header::encoded_len(&parsed));
        let (back, back_len) =
            header::parse_with(&again, &limits, keep_padding).expect("our encoding parses");
        assert_eq!(back, parsed);
        assert_eq!(back_len, again.len());
    }
    if let Ok(msg) = from_bytes::<Rpcrdma1Msg>(Bytes::copy_from_slice(data)) {
        let again = to_bytes(&msg).expect("a decoded message encodes");
        let back: Rpcrdma1Msg = from_bytes(again).expect("our encoding decodes");
        assert_eq!(back, msg);
    }
}

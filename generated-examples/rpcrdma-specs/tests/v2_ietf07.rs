//! The codecs of the working group's revision -07 of the version 2 draft (`specs/ietf-07/`),
//! byte for byte against the draft's section 8 XDR.

use rpcrdma::xdr::{from_bytes, to_bytes, Decode, Encode};
use rpcrdma_specs::v2_ietf07 as v2;
use std::fmt::Debug;

/// Big-endian XDR words.
fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_be_bytes()).collect()
}

/// `value` encodes to exactly `wire` and decodes back equal.
fn exact<T: Encode + Decode + PartialEq + Debug>(value: &T, wire: &[u32]) {
    let bytes = to_bytes(value).unwrap();
    assert_eq!(&bytes[..], &words(wire)[..], "{value:?}");
    let back: T = from_bytes(bytes).unwrap();
    assert_eq!(&back, value);
}

/// The prefix is `rpcrdma_common` alone: four words, 16 octets. Section 7 of the draft still
/// says 20 octets, the size of seed 003's prefix with its flags word (ERRATA I7-7).
#[test]
fn accepts_the_header_prefix_as_four_words() {
    let prefix = v2::Rpcrdma2HdrPrefix {
        rdma_start: v2::RpcrdmaCommon {
            rdma_xid: 0x1234,
            rdma_vers: 2,
            rdma_credit: 32,
            rdma_htype: v2::RDMA2_CALL_INLINE,
        },
    };
    exact(&prefix, &[0x1234, 2, 32, 10]);
}

/// `rdma_max_chunks` is one arm with two case labels (ERRATA I7-4): each label keeps its own
/// discriminant on the wire, and a code without an arm (`RDMA2_ERR_SYSTEM`) is `void`.
#[test]
fn accepts_each_error_code_with_its_own_discriminant() {
    exact(&v2::Rpcrdma2HdrError::Rdma2ErrReadChunks(2), &[6, 2]);
    exact(&v2::Rpcrdma2HdrError::Rdma2ErrWriteChunks(3), &[7, 3]);
    exact(
        &v2::Rpcrdma2HdrError::Rdma2ErrWriteResource(v2::Rpcrdma2ErrWrite {
            rdma_chunk_index: 1,
            rdma_length_needed: 8192,
        }),
        &[9, 1, 8192],
    );
    exact(
        &v2::Rpcrdma2HdrError::Default {
            discriminant: v2::RDMA2_ERR_SYSTEM,
        },
        &[100],
    );
}

/// An inline call with no chunks: the invalidation handle, three empty lists, then the
/// first word of the RPC message.
#[test]
fn accepts_an_inline_call_header_without_chunks() {
    let call = v2::Rpcrdma2HdrCallInline {
        rdma_inv_handle: 0,
        rdma_reads: Vec::new(),
        rdma_provisional_writes: Vec::new(),
        rdma_provisional_reply: None,
        rdma_rpc_first_word: 0xabcd,
    };
    exact(&call, &[0, 0, 0, 0, 0xabcd]);
}

/// A truncated error header is rejected, never read past its end.
#[test]
fn rejects_every_prefix_of_an_error_header() {
    let wire = to_bytes(&v2::Rpcrdma2HdrError::Rdma2ErrVers(v2::Rpcrdma2ErrVers {
        rdma_vers_low: 1,
        rdma_vers_high: 2,
    }))
    .unwrap();
    assert_eq!(&wire[..], &words(&[1, 1, 2])[..]);
    for cut in 0..wire.len() {
        assert!(
            from_bytes::<v2::Rpcrdma2HdrError>(wire.slice(..cut)).is_err(),
            "{cut}"
        );
    }
}

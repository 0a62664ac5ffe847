//! RPC-over-RDMA version 2 (`specs/common.x` + `specs/baseops.x`): the generated Rust and
//! rpcgen + libtirpc agree byte for byte on every header type, both directions:
//! Rust-drawn values are decoded and re-encoded identically by rpcgen, and C-drawn values
//! (every `rpcrdma2_error` arm, its `default: void` arm included) are decoded and
//! re-encoded identically by the generated code.

use proptest::collection::vec;
use proptest::prelude::*;
use rpcgen_oracle::{require, v2_random, v2_reencode, V2Kind};
use rpcrdma::xdr::{from_bytes, to_bytes, Bytes, Decode, Encode};
use rpcrdma_specs::v2;

fn skip() -> bool {
    !require()
}

fn segment() -> impl Strategy<Value = v2::Rpcrdma2Segment> {
    (any::<u32>(), any::<u32>(), any::<u64>()).prop_map(|(h, l, o)| v2::Rpcrdma2Segment {
        rdma_handle: h,
        rdma_length: l,
        rdma_offset: o,
    })
}

fn write_chunk() -> impl Strategy<Value = v2::Rpcrdma2WriteChunk> {
    vec(segment(), 0..4).prop_map(|rdma_target| v2::Rpcrdma2WriteChunk { rdma_target })
}

fn chunk_lists() -> impl Strategy<Value = v2::Rpcrdma2ChunkLists> {
    (
        any::<u32>(),
        vec((any::<u32>(), segment()), 0..5),
        vec(write_chunk(), 0..4),
        proptest::option::of(write_chunk()),
    )
        .prop_map(|(inv, reads, writes, reply)| v2::Rpcrdma2ChunkLists {
            rdma_inv_handle: inv,
            rdma_reads: reads
                .into_iter()
                .map(|(p, t)| v2::Rpcrdma2ReadList {
                    rdma_entry: v2::Rpcrdma2ReadSegment {
                        rdma_position: p,
                        rdma_target: t,
                    },
                })
                .collect(),
            rdma_writes: writes
                .into_iter()
                .map(|rdma_entry| v2::Rpcrdma2WriteList { rdma_entry })
                .collect(),
            rdma_reply: reply,
        })
}

fn error() -> impl Strategy<Value = v2::Rpcrdma2Error> {
    prop_oneof![
        (any::<u32>(), any::<u32>()).prop_map(|(l, h)| {
            v2::Rpcrdma2Error::Rdma2ErrVers(v2::Rpcrdma2ErrVers {
                rdma_vers_low: l,
                rdma_vers_high: h,
            })
        }),
        any::<u32>().prop_map(v2::Rpcrdma2Error::Rdma2ErrReadChunks),
        any::<u32>().prop_map(v2::Rpcrdma2Error::Rdma2ErrWriteChunks),
        any::<u32>().prop_map(v2::Rpcrdma2Error::Rdma2ErrSegments),
        (any::<u32>(), any::<u32>()).prop_map(|(i, n)| {
            v2::Rpcrdma2Error::Rdma2ErrWriteResource(v2::Rpcrdma2ErrWrite {
                rdma_chunk_index: i,
                rdma_length_needed: n,
            })
        }),
        any::<u32>().prop_map(v2::Rpcrdma2Error::Rdma2ErrReplyResource),
        prop::sample::select(vec![2u32, 3, 9, 10, 0xffff_ffff])
            .prop_map(|discriminant| v2::Rpcrdma2Error::Default { discriminant }),
    ]
}

fn connprop() -> impl Strategy<Value = v2::Rpcrdma2Connprop> {
    vec((any::<u32>(), vec(any::<u8>(), 0..65)), 0..4).prop_map(|props| v2::Rpcrdma2Connprop {
        rdma_props: props
            .into_iter()
            .map(|(rdma_which, data)| v2::Rpcrdma2Propval {
                rdma_which,
                rdma_data: Bytes::from(data),
            })
            .collect(),
    })
}

/// Our bytes for `value`; rpcgen decodes them and re-encodes the same bytes.
fn agrees<T: Encode>(kind: V2Kind, value: &T) -> Result<(), TestCaseError> {
    let ours = to_bytes(value).unwrap();
    prop_assert_eq!(
        &v2_reencode(kind, &ours).unwrap()[..],
        &ours[..],
        "{:?}",
        kind
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn rust_values_agree_with_rpcgen(
        words in any::<[u32; 5]>(),
        chunks in chunk_lists(),
        err in error(),
        props in connprop(),
    ) {
        if !skip() {
            agrees(V2Kind::Prefix, &v2::Rpcrdma2HdrPrefix {
                rdma_start: v2::RpcrdmaCommon {
                    rdma_xid: words[0],
                    rdma_vers: words[1],
                    rdma_credit: words[2],
                    rdma_htype: words[3],
                },
                rdma_flags: words[4],
            })?;
            agrees(V2Kind::Msg, &v2::Rpcrdma2Msg {
                rdma_chunks: chunks.clone(),
                rdma_rpc_first_word: words[0],
            })?;
            agrees(V2Kind::Nomsg, &v2::Rpcrdma2Nomsg { rdma_chunks: chunks })?;
            agrees(V2Kind::Error, &err)?;
            agrees(V2Kind::Connprop, &props)?;
        }
    }
}

fn c_values_round_trip<T: Decode + Encode>(kind: V2Kind) {
    for seed in 0..1500 {
        let theirs = v2_random(kind, seed).unwrap();
        let decoded: T = from_bytes(Bytes::from(theirs.clone()))
            .unwrap_or_else(|e| panic!("{kind:?} seed {seed}: {e}"));
        assert_eq!(
            &to_bytes(&decoded).unwrap()[..],
            &theirs[..],
            "{kind:?} seed {seed}"
        );
    }
}

#[test]
fn c_drawn_values_decode_and_reencode_identically() {
    if skip() {
        return;
    }
    c_values_round_trip::<v2::Rpcrdma2HdrPrefix>(V2Kind::Prefix);
    c_values_round_trip::<v2::Rpcrdma2Msg>(V2Kind::Msg);
    c_values_round_trip::<v2::Rpcrdma2Nomsg>(V2Kind::Nomsg);
    c_values_round_trip::<v2::Rpcrdma2Error>(V2Kind::Error);
    c_values_round_trip::<v2::Rpcrdma2Connprop>(V2Kind::Connprop);
}

/// The `default: void` arm: codes the union does not list decode to `Default` on both sides.
#[test]
fn unlisted_error_codes_take_the_default_arm() {
    if skip() {
        return;
    }
    for code in [2u32, 3, 9, 10, 0xffff_ffff] {
        let wire = code.to_be_bytes().to_vec();
        assert_eq!(v2_reencode(V2Kind::Error, &wire).unwrap(), wire);
        let ours: v2::Rpcrdma2Error = from_bytes(Bytes::from(wire)).unwrap();
        assert_eq!(ours, v2::Rpcrdma2Error::Default { discriminant: code });
    }
    for kind in V2Kind::ALL {
        assert!(v2_random(kind, 1).is_ok(), "{kind:?}");
    }
}

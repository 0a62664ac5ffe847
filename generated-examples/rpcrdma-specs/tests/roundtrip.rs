//! Every message type of every spec round-trips through the generated codecs, every union
//! arm included; every truncation is rejected.

use proptest::collection::vec;
use proptest::prelude::*;
use rpcrdma::xdr::{from_bytes, to_bytes, Bytes, Decode, Encode, XdrString};
use rpcrdma_specs::{rpc_msg as rm, v1, v2, v2004};
use std::fmt::Debug;

/// `value` encodes, decodes back equal, and no proper prefix of its bytes decodes.
fn round_trip<T: Encode + Decode + PartialEq + Debug>(value: &T) -> Result<(), TestCaseError> {
    let wire = to_bytes(value).map_err(|e| TestCaseError::fail(format!("encode: {e}")))?;
    let back: T =
        from_bytes(wire.clone()).map_err(|e| TestCaseError::fail(format!("decode: {e}")))?;
    prop_assert_eq!(&back, value);
    for cut in [0, wire.len() / 2, wire.len().saturating_sub(1)] {
        if cut < wire.len() {
            prop_assert!(
                from_bytes::<T>(wire.slice(..cut)).is_err(),
                "prefix {cut} decoded"
            );
        }
    }
    Ok(())
}

fn bytes(max: usize) -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..=max).prop_map(Bytes::from)
}

// ----- version 1 ------------------------------------------------------------------------

fn v1_segment() -> impl Strategy<Value = v1::Rpcrdma1Segment> {
    (any::<u32>(), any::<u32>(), any::<u64>()).prop_map(|(h, l, o)| v1::Rpcrdma1Segment {
        rdma_handle: h,
        rdma_length: l,
        rdma_offset: o,
    })
}

fn v1_write_chunk() -> impl Strategy<Value = v1::Rpcrdma1WriteChunk> {
    vec(v1_segment(), 0..4).prop_map(|rdma_target| v1::Rpcrdma1WriteChunk { rdma_target })
}

fn v1_chunks() -> impl Strategy<Value = v1::Rpcrdma1Chunks> {
    (
        vec((any::<u32>(), v1_segment()), 0..4),
        vec(v1_write_chunk(), 0..3),
        proptest::option::of(v1_write_chunk()),
    )
        .prop_map(|(reads, writes, reply)| v1::Rpcrdma1Chunks {
            rdma_reads: reads
                .into_iter()
                .map(|(p, t)| v1::Rpcrdma1ReadList {
                    rdma_entry: v1::Rpcrdma1ReadSegment {
                        rdma_position: p,
                        rdma_target: t,
                    },
                })
                .collect(),
            rdma_writes: writes
                .into_iter()
                .map(|rdma_entry| v1::Rpcrdma1WriteList { rdma_entry })
                .collect(),
            rdma_reply: reply,
        })
}

fn v1_body() -> impl Strategy<Value = v1::Rpcrdma1Body> {
    prop_oneof![
        v1_chunks().prop_map(v1::Rpcrdma1Body::RdmaMsg),
        v1_chunks().prop_map(v1::Rpcrdma1Body::RdmaNomsg),
        (any::<u32>(), any::<u32>(), v1_chunks()).prop_map(|(a, t, c)| {
            v1::Rpcrdma1Body::RdmaMsgp(v1::Rpcrdma1Padded {
                rdma_align: a,
                rdma_thresh: t,
                rdma_achunks: c,
            })
        }),
        Just(v1::Rpcrdma1Body::RdmaDone),
        (any::<u32>(), any::<u32>()).prop_map(|(l, h)| {
            v1::Rpcrdma1Body::RdmaError(v1::Rpcrdma1Error::RdmaErrVers(v1::Rpcrdma1ErrVers {
                rdma_vers_low: l,
                rdma_vers_high: h,
            }))
        }),
        Just(v1::Rpcrdma1Body::RdmaError(v1::Rpcrdma1Error::RdmaErrChunk)),
    ]
}

fn v1_msg() -> impl Strategy<Value = v1::Rpcrdma1Msg> {
    (any::<u32>(), any::<u32>(), any::<u32>(), v1_body()).prop_map(|(x, v, c, b)| v1::Rpcrdma1Msg {
        rdma_xid: x,
        rdma_vers: v,
        rdma_credit: c,
        rdma_body: b,
    })
}

// ----- 2004 draft -----------------------------------------------------------------------

fn v2004_segment() -> impl Strategy<Value = v2004::XdrRdmaSegment> {
    (any::<u32>(), any::<u32>(), any::<u64>()).prop_map(|(handle, length, offset)| {
        v2004::XdrRdmaSegment {
            handle,
            length,
            offset,
        }
    })
}

fn v2004_write_chunk() -> impl Strategy<Value = v2004::XdrWriteChunk> {
    vec(v2004_segment(), 0..4).prop_map(|target| v2004::XdrWriteChunk { target })
}

type Lists2004 = (
    Vec<v2004::XdrReadList>,
    Vec<v2004::XdrWriteList>,
    Option<v2004::XdrWriteChunk>,
);

fn v2004_lists() -> impl Strategy<Value = Lists2004> {
    (
        vec((any::<u32>(), v2004_segment()), 0..4),
        vec(v2004_write_chunk(), 0..3),
        proptest::option::of(v2004_write_chunk()),
    )
        .prop_map(|(reads, writes, reply)| {
            (
                reads
                    .into_iter()
                    .map(|(position, target)| v2004::XdrReadList {
                        entry: v2004::XdrReadChunk { position, target },
                    })
                    .collect(),
                writes
                    .into_iter()
                    .map(|entry| v2004::XdrWriteList { entry })
                    .collect(),
                reply,
            )
        })
}

fn v2004_body() -> impl Strategy<Value = v2004::RdmaBody> {
    prop_oneof![
        v2004_lists().prop_map(|(r, w, p)| v2004::RdmaBody::RdmaMsg(v2004::RpcRdmaHeader {
            rdma_reads: r,
            rdma_writes: w,
            rdma_reply: p,
        })),
        v2004_lists().prop_map(|(r, w, p)| {
            v2004::RdmaBody::RdmaNomsg(v2004::RpcRdmaHeaderNomsg {
                rdma_reads: r,
                rdma_writes: w,
                rdma_reply: p,
            })
        }),
        (any::<u32>(), any::<u32>(), v2004_lists()).prop_map(|(a, t, (r, w, p))| {
            v2004::RdmaBody::RdmaMsgp(v2004::RpcRdmaHeaderPadded {
                rdma_align: a,
                rdma_thresh: t,
                rdma_reads: r,
                rdma_writes: w,
                rdma_reply: p,
            })
        }),
        Just(v2004::RdmaBody::RdmaDone),
        (any::<u32>(), any::<u32>()).prop_map(|(l, h)| {
            v2004::RdmaBody::RdmaError(v2004::RpcRdmaError::ErrVers(v2004::RpcRdmaErrVers {
                rdma_vers_low: l,
                rdma_vers_high: h,
            }))
        }),
        // The `default: uint32 rdma_extra[8]` arm of rpc_rdma_error is unreachable: its
        // discriminant is an enum whose every member has its own case.
        Just(v2004::RdmaBody::RdmaError(v2004::RpcRdmaError::ErrChunk)),
    ]
}

fn v2004_msg() -> impl Strategy<Value = v2004::RdmaMsg> {
    (any::<u32>(), any::<u32>(), any::<u32>(), v2004_body()).prop_map(|(x, v, c, b)| {
        v2004::RdmaMsg {
            rdma_xid: x,
            rdma_vers: v,
            rdma_credit: c,
            rdma_body: b,
        }
    })
}

// ----- version 2 ------------------------------------------------------------------------

fn v2_segment() -> impl Strategy<Value = v2::Rpcrdma2Segment> {
    (any::<u32>(), any::<u32>(), any::<u64>()).prop_map(|(h, l, o)| v2::Rpcrdma2Segment {
        rdma_handle: h,
        rdma_length: l,
        rdma_offset: o,
    })
}

fn v2_write_chunk() -> impl Strategy<Value = v2::Rpcrdma2WriteChunk> {
    vec(v2_segment(), 0..4).prop_map(|rdma_target| v2::Rpcrdma2WriteChunk { rdma_target })
}

fn v2_chunk_lists() -> impl Strategy<Value = v2::Rpcrdma2ChunkLists> {
    (
        any::<u32>(),
        vec((any::<u32>(), v2_segment()), 0..4),
        vec(v2_write_chunk(), 0..3),
        proptest::option::of(v2_write_chunk()),
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

fn v2_prefix() -> impl Strategy<Value = v2::Rpcrdma2HdrPrefix> {
    (any::<[u32; 4]>(), any::<u32>()).prop_map(|([x, v, c, t], f)| v2::Rpcrdma2HdrPrefix {
        rdma_start: v2::RpcrdmaCommon {
            rdma_xid: x,
            rdma_vers: v,
            rdma_credit: c,
            rdma_htype: t,
        },
        rdma_flags: f,
    })
}

fn v2_error() -> impl Strategy<Value = v2::Rpcrdma2Error> {
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
        // `default: void`: BAD_XDR, INVAL_HTYPE, SYSTEM and codes defined by extensions.
        prop::sample::select(vec![2u32, 3, 9, 10, 0xffff_ffff])
            .prop_map(|discriminant| v2::Rpcrdma2Error::Default { discriminant }),
    ]
}

fn v2_connprop() -> impl Strategy<Value = v2::Rpcrdma2Connprop> {
    vec((any::<u32>(), bytes(64)), 0..4).prop_map(|props| v2::Rpcrdma2Connprop {
        rdma_props: props
            .into_iter()
            .map(|(rdma_which, rdma_data)| v2::Rpcrdma2Propval {
                rdma_which,
                rdma_data,
            })
            .collect(),
    })
}

// ----- rpc_msg --------------------------------------------------------------------------

fn auth() -> impl Strategy<Value = rm::OpaqueAuth> {
    (
        prop::sample::select(vec![
            rm::AuthFlavor::AuthNone,
            rm::AuthFlavor::AuthSys,
            rm::AuthFlavor::AuthShort,
            rm::AuthFlavor::AuthDh,
            rm::AuthFlavor::RpcsecGss,
        ]),
        bytes(400),
    )
        .prop_map(|(flavor, body)| rm::OpaqueAuth { flavor, body })
}

fn rpc_msg() -> impl Strategy<Value = rm::RpcMsg> {
    let call = (any::<[u32; 4]>(), auth(), auth()).prop_map(
        |([rpcvers, prog, vers, proc], cred, verf)| {
            rm::RpcMsgBody::Call(rm::CallBody {
                rpcvers,
                prog,
                vers,
                proc,
                cred,
                verf,
            })
        },
    );
    let reply_data = prop_oneof![
        Just(rm::AcceptedReplyData::Success),
        (any::<u32>(), any::<u32>()).prop_map(|(low, high)| rm::AcceptedReplyData::ProgMismatch(
            rm::MismatchInfo { low, high }
        )),
        prop::sample::select(vec![
            rm::AcceptStat::ProgUnavail,
            rm::AcceptStat::ProcUnavail,
            rm::AcceptStat::GarbageArgs,
            rm::AcceptStat::SystemErr,
        ])
        .prop_map(|discriminant| rm::AcceptedReplyData::Default { discriminant }),
    ];
    let accepted = (auth(), reply_data).prop_map(|(verf, reply_data)| {
        rm::RpcMsgBody::Reply(rm::ReplyBody::MsgAccepted(rm::AcceptedReply {
            verf,
            reply_data,
        }))
    });
    let denied = prop_oneof![
        (any::<u32>(), any::<u32>())
            .prop_map(|(low, high)| rm::RejectedReply::RpcMismatch(rm::MismatchInfo { low, high })),
        (0i32..15).prop_map(|s| rm::RejectedReply::AuthError(rm::AuthStat::from_value(s).unwrap())),
    ]
    .prop_map(|r| rm::RpcMsgBody::Reply(rm::ReplyBody::MsgDenied(r)));
    (any::<u32>(), prop_oneof![call, accepted, denied])
        .prop_map(|(xid, body)| rm::RpcMsg { xid, body })
}

fn authsys() -> impl Strategy<Value = rm::AuthsysParms> {
    (
        any::<u32>(),
        bytes(255),
        any::<u32>(),
        any::<u32>(),
        vec(any::<u32>(), 0..=16),
    )
        .prop_map(|(stamp, name, uid, gid, gids)| rm::AuthsysParms {
            stamp,
            machinename: XdrString::from_bytes(name),
            uid,
            gid,
            gids,
        })
}

proptest! {
    #[test]
    fn v1_messages_round_trip(m in v1_msg()) {
        round_trip(&m)?;
    }

    #[test]
    fn v2004_messages_round_trip(m in v2004_msg()) {
        round_trip(&m)?;
    }

    #[test]
    fn v2004_config_protocol_round_trips(a in any::<[u32; 3]>(), b in any::<[u32; 3]>()) {
        round_trip(&v2004::ConfigRdmaReq { maxcallsize: a[0], maxreplysize: a[1], maxrdmaread: a[2] })?;
        round_trip(&v2004::ConfigRdmaReply { maxcallsize: b[0], align: b[1], maxrdmaread: b[2] })?;
    }

    #[test]
    fn v2_headers_round_trip(
        prefix in v2_prefix(),
        chunks in v2_chunk_lists(),
        first_word in any::<u32>(),
        error in v2_error(),
        connprop in v2_connprop(),
    ) {
        round_trip(&prefix)?;
        round_trip(&v2::Rpcrdma2Msg { rdma_chunks: chunks.clone(), rdma_rpc_first_word: first_word })?;
        round_trip(&v2::Rpcrdma2Nomsg { rdma_chunks: chunks })?;
        round_trip(&error)?;
        round_trip(&connprop)?;
    }

    #[test]
    fn rpc_messages_round_trip(m in rpc_msg(), sys in authsys()) {
        round_trip(&m)?;
        round_trip(&sys)?;
    }
}

/// Wire facts from the drafts, checked on the generated code.
#[test]
fn v1_rdma_msg_without_chunks_is_seven_words() {
    let m = v1::Rpcrdma1Msg {
        rdma_xid: 1,
        rdma_vers: 1,
        rdma_credit: 32,
        rdma_body: v1::Rpcrdma1Body::RdmaMsg(v1::Rpcrdma1Chunks {
            rdma_reads: vec![],
            rdma_writes: vec![],
            rdma_reply: None,
        }),
    };
    let wire = to_bytes(&m).unwrap();
    let words: Vec<u8> = [1u32, 1, 32, 0, 0, 0, 0]
        .iter()
        .flat_map(|w| w.to_be_bytes())
        .collect();
    assert_eq!(&wire[..], &words[..]);
}

#[test]
fn rejects_unknown_v1_procedure_and_error_code() {
    // rdma_proc 5 is not a member of rpcrdma1_proc.
    let bad_proc: Vec<u8> = [1u32, 1, 1, 5]
        .iter()
        .flat_map(|w| w.to_be_bytes())
        .collect();
    assert!(from_bytes::<v1::Rpcrdma1Msg>(Bytes::from(bad_proc)).is_err());
    let bad_err: Vec<u8> = [1u32, 1, 1, 4, 3]
        .iter()
        .flat_map(|w| w.to_be_bytes())
        .collect();
    assert!(from_bytes::<v1::Rpcrdma1Msg>(Bytes::from(bad_err)).is_err());
}

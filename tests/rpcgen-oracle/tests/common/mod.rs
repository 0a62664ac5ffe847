//! proptest strategies for the flat descriptions of `rpcgen_oracle`, covering every arm.
#![allow(dead_code)]

pub mod adapt;

use proptest::collection::vec;
use proptest::prelude::*;
use rpcgen_oracle::{Auth, AuthSys, ReadSegment, RpcMsg, Segment, V1Body, V1Chunks, V1Msg};

pub fn segment() -> impl Strategy<Value = Segment> {
    (any::<u32>(), any::<u32>(), any::<u64>()).prop_map(|(handle, length, offset)| Segment {
        handle,
        length,
        offset,
    })
}

pub fn read_segment() -> impl Strategy<Value = ReadSegment> {
    (any::<u32>(), segment()).prop_map(|(position, target)| ReadSegment { position, target })
}

pub fn v1_chunks() -> impl Strategy<Value = V1Chunks> {
    (
        vec(read_segment(), 0..5),
        vec(vec(segment(), 0..5), 0..4),
        proptest::option::of(vec(segment(), 0..5)),
    )
        .prop_map(|(reads, writes, reply)| V1Chunks {
            reads,
            writes,
            reply,
        })
}

/// Every arm of `rpcrdma1_body` (RDMA_MSG, RDMA_NOMSG, RDMA_MSGP, RDMA_DONE, both errors).
pub fn v1_body() -> impl Strategy<Value = V1Body> {
    prop_oneof![
        (0u32..2, v1_chunks()).prop_map(|(proc_, chunks)| V1Body::Chunks { proc_, chunks }),
        (any::<u32>(), any::<u32>(), v1_chunks()).prop_map(|(align, thresh, chunks)| {
            V1Body::Padded {
                align,
                thresh,
                chunks,
            }
        }),
        Just(V1Body::Done),
        (any::<u32>(), any::<u32>()).prop_map(|(low, high)| V1Body::ErrVers { low, high }),
        Just(V1Body::ErrChunk),
    ]
}

pub fn v1_msg() -> impl Strategy<Value = V1Msg> {
    (any::<u32>(), any::<u32>(), any::<u32>(), v1_body()).prop_map(|(xid, vers, credit, body)| {
        V1Msg {
            xid,
            vers,
            credit,
            body,
        }
    })
}

/// `auth_flavor` values of RFC 5531 section 8.2.
pub const FLAVORS: [u32; 5] = [0, 1, 2, 3, 6];

pub fn auth() -> impl Strategy<Value = Auth> {
    (
        prop::sample::select(&FLAVORS[..]),
        vec(any::<u8>(), 0..=400),
    )
        .prop_map(|(flavor, body)| Auth { flavor, body })
}

/// Every arm of `rpc_msg`: calls, accepted replies with each `accept_stat`, both rejections.
pub fn rpc_msg() -> impl Strategy<Value = RpcMsg> {
    prop_oneof![
        (
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
            auth(),
            auth()
        )
            .prop_map(
                |(xid, rpcvers, prog, vers, proc_, cred, verf)| RpcMsg::Call {
                    xid,
                    rpcvers,
                    prog,
                    vers,
                    proc_,
                    cred,
                    verf,
                }
            ),
        (any::<u32>(), auth(), 0u32..6, any::<u32>(), any::<u32>()).prop_map(
            |(xid, verf, stat, low, high)| {
                // low/high travel only with PROG_MISMATCH; elsewhere they are not part of the
                // value, so keep them zero to compare decoded values directly.
                let (low, high) = if stat == 2 { (low, high) } else { (0, 0) };
                RpcMsg::Accepted {
                    xid,
                    verf,
                    stat,
                    low,
                    high,
                }
            }
        ),
        (any::<u32>(), any::<u32>(), any::<u32>())
            .prop_map(|(xid, low, high)| RpcMsg::RpcMismatch { xid, low, high }),
        (any::<u32>(), 0u32..15).prop_map(|(xid, stat)| RpcMsg::AuthError { xid, stat }),
    ]
}

pub fn authsys() -> impl Strategy<Value = AuthSys> {
    (
        any::<u32>(),
        // rpcgen maps `string` to a C string, which ends at the first NUL: a NUL inside
        // machinename cannot round-trip through it (found by this test), so draw 1..=255.
        vec(1u8..=255, 0..=255),
        any::<u32>(),
        any::<u32>(),
        vec(any::<u32>(), 0..=16),
    )
        .prop_map(|(stamp, machinename, uid, gid, gids)| AuthSys {
            stamp,
            machinename,
            uid,
            gid,
            gids,
        })
}

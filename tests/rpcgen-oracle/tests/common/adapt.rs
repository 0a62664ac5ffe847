//! Conversions between the oracle's flat descriptions and the xdrgen-generated types: the
//! only code here that depends on the generated names.
#![allow(dead_code)]

use rpcgen_oracle as o;
use rpcrdma::xdr::{Bytes, XdrString};
use rpcrdma_specs::rpc_msg as rm;
use rpcrdma_specs::v1;

/// The generated `rpcrdma1_msg`.
pub type V1Gen = v1::Rpcrdma1Msg;
/// The generated `rpc_msg`.
pub type RpcGen = rm::RpcMsg;
/// The generated `authsys_parms`.
pub type AuthSysGen = rm::AuthsysParms;

fn seg_to(s: &o::Segment) -> v1::Rpcrdma1Segment {
    v1::Rpcrdma1Segment {
        rdma_handle: s.handle,
        rdma_length: s.length,
        rdma_offset: s.offset,
    }
}

fn seg_from(s: &v1::Rpcrdma1Segment) -> o::Segment {
    o::Segment {
        handle: s.rdma_handle,
        length: s.rdma_length,
        offset: s.rdma_offset,
    }
}

fn write_chunk_to(segments: &[o::Segment]) -> v1::Rpcrdma1WriteChunk {
    v1::Rpcrdma1WriteChunk {
        rdma_target: segments.iter().map(seg_to).collect(),
    }
}

fn chunks_to(c: &o::V1Chunks) -> v1::Rpcrdma1Chunks {
    v1::Rpcrdma1Chunks {
        rdma_reads: c
            .reads
            .iter()
            .map(|r| v1::Rpcrdma1ReadList {
                rdma_entry: v1::Rpcrdma1ReadSegment {
                    rdma_position: r.position,
                    rdma_target: seg_to(&r.target),
                },
            })
            .collect(),
        rdma_writes: c
            .writes
            .iter()
            .map(|w| v1::Rpcrdma1WriteList {
                rdma_entry: write_chunk_to(w),
            })
            .collect(),
        rdma_reply: c.reply.as_deref().map(write_chunk_to),
    }
}

fn chunks_from(c: &v1::Rpcrdma1Chunks) -> o::V1Chunks {
    o::V1Chunks {
        reads: c
            .rdma_reads
            .iter()
            .map(|r| o::ReadSegment {
                position: r.rdma_entry.rdma_position,
                target: seg_from(&r.rdma_entry.rdma_target),
            })
            .collect(),
        writes: c
            .rdma_writes
            .iter()
            .map(|w| w.rdma_entry.rdma_target.iter().map(seg_from).collect())
            .collect(),
        reply: c
            .rdma_reply
            .as_ref()
            .map(|r| r.rdma_target.iter().map(seg_from).collect()),
    }
}

/// Flat -> generated `rpcrdma1_msg`.
pub fn v1_to_gen(m: &o::V1Msg) -> V1Gen {
    let rdma_body = match &m.body {
        o::V1Body::Chunks { proc_: 0, chunks } => v1::Rpcrdma1Body::RdmaMsg(chunks_to(chunks)),
        o::V1Body::Chunks { chunks, .. } => v1::Rpcrdma1Body::RdmaNomsg(chunks_to(chunks)),
        o::V1Body::Padded {
            align,
            thresh,
            chunks,
        } => v1::Rpcrdma1Body::RdmaMsgp(v1::Rpcrdma1Padded {
            rdma_align: *align,
            rdma_thresh: *thresh,
            rdma_achunks: chunks_to(chunks),
        }),
        o::V1Body::Done => v1::Rpcrdma1Body::RdmaDone,
        o::V1Body::ErrVers { low, high } => {
            v1::Rpcrdma1Body::RdmaError(v1::Rpcrdma1Error::RdmaErrVers(v1::Rpcrdma1ErrVers {
                rdma_vers_low: *low,
                rdma_vers_high: *high,
            }))
        }
        o::V1Body::ErrChunk => v1::Rpcrdma1Body::RdmaError(v1::Rpcrdma1Error::RdmaErrChunk),
    };
    v1::Rpcrdma1Msg {
        rdma_xid: m.xid,
        rdma_vers: m.vers,
        rdma_credit: m.credit,
        rdma_body,
    }
}

/// Generated -> flat `rpcrdma1_msg`.
pub fn v1_from_gen(m: &V1Gen) -> o::V1Msg {
    let body = match &m.rdma_body {
        v1::Rpcrdma1Body::RdmaMsg(c) => o::V1Body::Chunks {
            proc_: 0,
            chunks: chunks_from(c),
        },
        v1::Rpcrdma1Body::RdmaNomsg(c) => o::V1Body::Chunks {
            proc_: 1,
            chunks: chunks_from(c),
        },
        v1::Rpcrdma1Body::RdmaMsgp(p) => o::V1Body::Padded {
            align: p.rdma_align,
            thresh: p.rdma_thresh,
            chunks: chunks_from(&p.rdma_achunks),
        },
        v1::Rpcrdma1Body::RdmaDone => o::V1Body::Done,
        v1::Rpcrdma1Body::RdmaError(v1::Rpcrdma1Error::RdmaErrVers(v)) => o::V1Body::ErrVers {
            low: v.rdma_vers_low,
            high: v.rdma_vers_high,
        },
        v1::Rpcrdma1Body::RdmaError(v1::Rpcrdma1Error::RdmaErrChunk) => o::V1Body::ErrChunk,
    };
    o::V1Msg {
        xid: m.rdma_xid,
        vers: m.rdma_vers,
        credit: m.rdma_credit,
        body,
    }
}

fn auth_to(a: &o::Auth) -> rm::OpaqueAuth {
    rm::OpaqueAuth {
        flavor: rm::AuthFlavor::from_value(a.flavor as i32).expect("a listed auth_flavor"),
        body: Bytes::from(a.body.clone()),
    }
}

fn auth_from(a: &rm::OpaqueAuth) -> o::Auth {
    o::Auth {
        flavor: a.flavor.value() as u32,
        body: a.body.to_vec(),
    }
}

/// Flat -> generated `rpc_msg`.
pub fn rpc_to_gen(m: &o::RpcMsg) -> RpcGen {
    let (xid, body) = match m {
        o::RpcMsg::Call {
            xid,
            rpcvers,
            prog,
            vers,
            proc_,
            cred,
            verf,
        } => (
            *xid,
            rm::RpcMsgBody::Call(rm::CallBody {
                rpcvers: *rpcvers,
                prog: *prog,
                vers: *vers,
                proc: *proc_,
                cred: auth_to(cred),
                verf: auth_to(verf),
            }),
        ),
        o::RpcMsg::Accepted {
            xid,
            verf,
            stat,
            low,
            high,
        } => {
            let reply_data = match *stat {
                0 => rm::AcceptedReplyData::Success,
                2 => rm::AcceptedReplyData::ProgMismatch(rm::MismatchInfo {
                    low: *low,
                    high: *high,
                }),
                other => rm::AcceptedReplyData::Default {
                    discriminant: rm::AcceptStat::from_value(other as i32)
                        .expect("a listed accept_stat"),
                },
            };
            (
                *xid,
                rm::RpcMsgBody::Reply(rm::ReplyBody::MsgAccepted(rm::AcceptedReply {
                    verf: auth_to(verf),
                    reply_data,
                })),
            )
        }
        o::RpcMsg::RpcMismatch { xid, low, high } => (
            *xid,
            rm::RpcMsgBody::Reply(rm::ReplyBody::MsgDenied(rm::RejectedReply::RpcMismatch(
                rm::MismatchInfo {
                    low: *low,
                    high: *high,
                },
            ))),
        ),
        o::RpcMsg::AuthError { xid, stat } => (
            *xid,
            rm::RpcMsgBody::Reply(rm::ReplyBody::MsgDenied(rm::RejectedReply::AuthError(
                rm::AuthStat::from_value(*stat as i32).expect("a listed auth_stat"),
            ))),
        ),
    };
    rm::RpcMsg { xid, body }
}

/// Generated -> flat `rpc_msg`.
pub fn rpc_from_gen(m: &RpcGen) -> o::RpcMsg {
    let xid = m.xid;
    match &m.body {
        rm::RpcMsgBody::Call(c) => o::RpcMsg::Call {
            xid,
            rpcvers: c.rpcvers,
            prog: c.prog,
            vers: c.vers,
            proc_: c.proc,
            cred: auth_from(&c.cred),
            verf: auth_from(&c.verf),
        },
        rm::RpcMsgBody::Reply(rm::ReplyBody::MsgAccepted(a)) => {
            let (stat, low, high) = match &a.reply_data {
                rm::AcceptedReplyData::Success => (0, 0, 0),
                rm::AcceptedReplyData::ProgMismatch(m) => (2, m.low, m.high),
                rm::AcceptedReplyData::Default { discriminant } => {
                    (discriminant.value() as u32, 0, 0)
                }
            };
            o::RpcMsg::Accepted {
                xid,
                verf: auth_from(&a.verf),
                stat,
                low,
                high,
            }
        }
        rm::RpcMsgBody::Reply(rm::ReplyBody::MsgDenied(rm::RejectedReply::RpcMismatch(m))) => {
            o::RpcMsg::RpcMismatch {
                xid,
                low: m.low,
                high: m.high,
            }
        }
        rm::RpcMsgBody::Reply(rm::ReplyBody::MsgDenied(rm::RejectedReply::AuthError(s))) => {
            o::RpcMsg::AuthError {
                xid,
                stat: s.value() as u32,
            }
        }
    }
}

/// Flat -> generated `authsys_parms`.
pub fn authsys_to_gen(p: &o::AuthSys) -> AuthSysGen {
    rm::AuthsysParms {
        stamp: p.stamp,
        machinename: XdrString::from_bytes(Bytes::from(p.machinename.clone())),
        uid: p.uid,
        gid: p.gid,
        gids: p.gids.clone(),
    }
}

/// Generated -> flat `authsys_parms`.
pub fn authsys_from_gen(p: &AuthSysGen) -> o::AuthSys {
    o::AuthSys {
        stamp: p.stamp,
        machinename: p.machinename.as_bytes().to_vec(),
        uid: p.uid,
        gid: p.gid,
        gids: p.gids.clone(),
    }
}

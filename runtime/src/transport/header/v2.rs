//! Version 2 (seed 003 sections 3, 5 and 6): the types xdrgen generates from `specs/common.x`
//! with `specs/baseops.x`, and their mapping to and from [`Header`].
//!
//! A version 2 header is the `rpcrdma2_hdr_prefix` (the four fixed words and `rdma_flags`)
//! followed by the body its `rdma_htype` names (seed 003 section 5.1); the RPC message of an
//! RDMA2_MSG follows the chunk lists.

#![allow(missing_docs, clippy::all)]

include!(concat!(env!("OUT_DIR"), "/rpcrdma_v2.rs"));

use bytes::Bytes;

use super::props::Property;
use super::{checked, Body, Chunks, Header, HeaderError, HeaderLimits, RawChunks, RdmaError};
use crate::xdr::{self, padding, Decode, Decoder, Encode, Encoder};

/// Parses a version 2 header (its version word already read as 2, at least the prefix long).
pub(super) fn parse(message: &[u8], limits: &HeaderLimits) -> Result<(Header, usize), HeaderError> {
    let mut dec = Decoder::from_slice(message);
    let malformed = |xid: u32, reason: String| HeaderError::Malformed {
        xid,
        version: super::VERSION_2,
        reason,
    };
    let prefix = Rpcrdma2HdrPrefix::decode(&mut dec).map_err(|e| malformed(0, e.to_string()))?;
    let RpcrdmaCommon {
        rdma_xid: xid,
        rdma_credit: credit,
        rdma_htype: htype,
        ..
    } = prefix.rdma_start;
    let flags = prefix.rdma_flags;
    let bad = |e: xdr::Error| malformed(xid, e.to_string());
    let body = match htype {
        RDMA2_MSG => Body::Msg(chunks(&mut dec, limits, xid)?),
        RDMA2_NOMSG => Body::NoMsg(chunks(&mut dec, limits, xid)?),
        RDMA2_ERROR => Body::Error(match Rpcrdma2Error::decode(&mut dec).map_err(bad)? {
            Rpcrdma2Error::Rdma2ErrVers(v) => RdmaError::Vers {
                low: v.rdma_vers_low,
                high: v.rdma_vers_high,
            },
            Rpcrdma2Error::Rdma2ErrReadChunks(max) => RdmaError::ReadChunks { max },
            Rpcrdma2Error::Rdma2ErrWriteChunks(max) => RdmaError::WriteChunks { max },
            Rpcrdma2Error::Rdma2ErrSegments(max) => RdmaError::Segments { max },
            Rpcrdma2Error::Rdma2ErrWriteResource(w) => RdmaError::WriteResource {
                chunk_index: w.rdma_chunk_index,
                length_needed: w.rdma_length_needed,
            },
            Rpcrdma2Error::Rdma2ErrReplyResource(length_needed) => {
                RdmaError::ReplyResource { length_needed }
            }
            Rpcrdma2Error::Default { discriminant } => match discriminant {
                RDMA2_ERR_BAD_XDR => RdmaError::BadXdr,
                RDMA2_ERR_INVAL_HTYPE => RdmaError::InvalHtype,
                RDMA2_ERR_SYSTEM => RdmaError::System,
                other => RdmaError::Other(other),
            },
        }),
        RDMA2_CONNPROP => {
            let props = Rpcrdma2Connprop::decode(&mut dec).map_err(bad)?.rdma_props;
            if props.len() > limits.max_properties {
                return Err(malformed(
                    xid,
                    format!(
                        "{} transport properties (at most {})",
                        props.len(),
                        limits.max_properties
                    ),
                ));
            }
            Body::ConnProp(
                props
                    .into_iter()
                    .map(|p| Property {
                        id: p.rdma_which,
                        data: p.rdma_data,
                    })
                    .collect(),
            )
        }
        // Seed 003 section 5.2: support for other types is OPTIONAL; the core answers those it
        // does not support with RDMA2_ERR_INVAL_HTYPE.
        htype => Body::Other {
            htype,
            body: Bytes::copy_from_slice(&message[super::V2_PREFIX_LEN..]),
        },
    };
    // An extension's body is all that follows the prefix.
    let used = match body {
        Body::Other { .. } => message.len(),
        _ => message.len() - dec.remaining(),
    };
    Ok((Header::v2(xid, credit, flags, body), used))
}

fn chunks(dec: &mut Decoder<'_>, limits: &HeaderLimits, xid: u32) -> Result<Chunks, HeaderError> {
    let lists = Rpcrdma2ChunkLists::decode(dec).map_err(|e| HeaderError::Malformed {
        xid,
        version: super::VERSION_2,
        reason: e.to_string(),
    })?;
    let segment = |s: Rpcrdma2Segment| super::Segment {
        rdma_handle: s.rdma_handle,
        rdma_length: s.rdma_length,
        rdma_offset: s.rdma_offset,
    };
    let chunk = |w: Rpcrdma2WriteChunk| w.rdma_target.into_iter().map(segment).collect();
    let raw = RawChunks {
        inv_handle: lists.rdma_inv_handle,
        reads: lists
            .rdma_reads
            .into_iter()
            .map(|r| {
                (
                    r.rdma_entry.rdma_position,
                    segment(r.rdma_entry.rdma_target),
                )
            })
            .collect(),
        writes: lists
            .rdma_writes
            .into_iter()
            .map(|w| chunk(w.rdma_entry))
            .collect(),
        reply: lists.rdma_reply.map(chunk),
    };
    checked(raw, limits, xid, super::VERSION_2)
}

fn lists(c: &Chunks) -> Rpcrdma2ChunkLists {
    let segment = |s: &super::Segment| Rpcrdma2Segment {
        rdma_handle: s.rdma_handle,
        rdma_length: s.rdma_length,
        rdma_offset: s.rdma_offset,
    };
    let chunk = |w: &Vec<super::Segment>| Rpcrdma2WriteChunk {
        rdma_target: w.iter().map(segment).collect(),
    };
    Rpcrdma2ChunkLists {
        rdma_inv_handle: c.inv_handle,
        rdma_reads: c
            .reads
            .iter()
            .flat_map(|r| {
                r.segments.iter().map(move |s| Rpcrdma2ReadList {
                    rdma_entry: Rpcrdma2ReadSegment {
                        rdma_position: r.position,
                        rdma_target: segment(s),
                    },
                })
            })
            .collect(),
        rdma_writes: c
            .writes
            .iter()
            .map(|w| Rpcrdma2WriteList {
                rdma_entry: chunk(w),
            })
            .collect(),
        rdma_reply: c.reply.as_ref().map(chunk),
    }
}

/// The header type of a body.
fn htype(body: &Body) -> Option<u32> {
    Some(match body {
        Body::Msg(_) => RDMA2_MSG,
        Body::NoMsg(_) => RDMA2_NOMSG,
        Body::Error(_) => RDMA2_ERROR,
        Body::ConnProp(_) => RDMA2_CONNPROP,
        Body::Other { htype, .. } => *htype,
        Body::Done | Body::MsgP(..) => return None,
    })
}

/// Encodes `header` as version 2. RDMA_DONE has no version 2 form and refuses to encode.
pub(super) fn encode(header: &Header, enc: &mut Encoder) -> xdr::Result<()> {
    let Some(htype) = htype(&header.body) else {
        return Err(xdr::Error::new(
            xdr::ErrorKind::UnknownDiscriminant {
                type_name: "rpcrdma2 header type (RDMA_DONE is version 1 only)",
                value: 3,
            },
            enc.len(),
        ));
    };
    Rpcrdma2HdrPrefix {
        rdma_start: RpcrdmaCommon {
            rdma_xid: header.xid,
            rdma_vers: super::VERSION_2,
            rdma_credit: header.credit,
            rdma_htype: htype,
        },
        rdma_flags: header.flags,
    }
    .encode(enc)?;
    match &header.body {
        Body::Msg(c) | Body::NoMsg(c) => lists(c).encode(enc),
        Body::Error(e) => error_union(e).encode(enc),
        Body::ConnProp(props) => Rpcrdma2Connprop {
            rdma_props: props
                .iter()
                .map(|p| Rpcrdma2Propval {
                    rdma_which: p.id,
                    rdma_data: p.data.clone(),
                })
                .collect(),
        }
        .encode(enc),
        // An extension's body, as it came: its own XDR (a whole number of words when the peer
        // follows it), never padded here, so that what parses encodes to the same bytes.
        Body::Other { body, .. } => {
            enc.put_gathered(body.clone());
            Ok(())
        }
        Body::Done | Body::MsgP(..) => unreachable!("refused above"),
    }
}

fn error_union(e: &RdmaError) -> Rpcrdma2Error {
    match *e {
        RdmaError::Vers { low, high } => Rpcrdma2Error::Rdma2ErrVers(Rpcrdma2ErrVers {
            rdma_vers_low: low,
            rdma_vers_high: high,
        }),
        RdmaError::ReadChunks { max } => Rpcrdma2Error::Rdma2ErrReadChunks(max),
        RdmaError::WriteChunks { max } => Rpcrdma2Error::Rdma2ErrWriteChunks(max),
        RdmaError::Segments { max } => Rpcrdma2Error::Rdma2ErrSegments(max),
        RdmaError::WriteResource {
            chunk_index,
            length_needed,
        } => Rpcrdma2Error::Rdma2ErrWriteResource(Rpcrdma2ErrWrite {
            rdma_chunk_index: chunk_index,
            rdma_length_needed: length_needed,
        }),
        RdmaError::ReplyResource { length_needed } => {
            Rpcrdma2Error::Rdma2ErrReplyResource(length_needed)
        }
        RdmaError::BadXdr | RdmaError::InvalHtype | RdmaError::System | RdmaError::Other(_) => {
            Rpcrdma2Error::Default {
                discriminant: e.code(),
            }
        }
    }
}

/// The encoded length of `header` as version 2.
pub(super) fn encoded_len(header: &Header) -> usize {
    super::V2_PREFIX_LEN
        + match &header.body {
            Body::Msg(c) | Body::NoMsg(c) => 4 + super::chunks_len(c),
            Body::Error(e) => {
                4 + match e {
                    RdmaError::Vers { .. } | RdmaError::WriteResource { .. } => 8,
                    RdmaError::ReadChunks { .. }
                    | RdmaError::WriteChunks { .. }
                    | RdmaError::Segments { .. }
                    | RdmaError::ReplyResource { .. } => 4,
                    _ => 0,
                }
            }
            Body::ConnProp(props) => {
                4 + props
                    .iter()
                    .map(|p| 8 + p.data.len() + padding(p.data.len()))
                    .sum::<usize>()
            }
            Body::Other { body, .. } => body.len(),
            Body::Done | Body::MsgP(..) => 0,
        }
}

//! Version 1 (seed 004 section 5.6): the types xdrgen generates from `specs/rpcrdma-v1.x`, and
//! their mapping to and from [`Header`].

#![allow(missing_docs, clippy::all)]

include!(concat!(env!("OUT_DIR"), "/rpcrdma_v1.rs"));

use super::{
    checked, AlignPadding, Body, Chunks, Header, HeaderError, HeaderLimits, RawChunks, RdmaError,
};
use crate::xdr::{self, Decode, Decoder, Encode, Encoder};

/// Parses a version 1 header (its version word already read as 1).
pub(super) fn parse(
    message: &[u8],
    limits: &HeaderLimits,
    keep_padding: bool,
) -> Result<(Header, usize), HeaderError> {
    let (Some(xid), Some(credit)) = (super::word(message, 0), super::word(message, 2)) else {
        return Err(HeaderError::Short);
    };
    let version = super::VERSION;
    // Nothing a header decodes can allocate more than its own length allows: lists take bytes
    // of the input per element, and counted arrays are checked against what remains. The
    // limits on chunk and segment counts are checked after decoding.
    let mut dec = Decoder::from_slice(&message[12..]);
    dec.set_base_offset(12);
    let body = Rpcrdma1Body::decode(&mut dec).map_err(|e| HeaderError::Malformed {
        xid,
        version,
        reason: e.to_string(),
    })?;
    let used = message.len() - 12 - dec.remaining();
    let chunks = |c| checked(raw(c), limits, xid, version);
    let body = match body {
        Rpcrdma1Body::RdmaMsg(c) => Body::Msg(chunks(c)?),
        Rpcrdma1Body::RdmaMsgp(p) if keep_padding => {
            let pad = AlignPadding::new(p.rdma_align, p.rdma_thresh);
            if !pad.is_valid() {
                return Err(HeaderError::Malformed {
                    xid,
                    version,
                    reason: format!("RDMA_MSGP alignment {} cannot be honoured", p.rdma_align),
                });
            }
            Body::MsgP(chunks(p.rdma_achunks)?, pad)
        }
        Rpcrdma1Body::RdmaMsgp(p) => Body::Msg(chunks(p.rdma_achunks)?),
        Rpcrdma1Body::RdmaNomsg(c) => Body::NoMsg(chunks(c)?),
        Rpcrdma1Body::RdmaDone => Body::Done,
        Rpcrdma1Body::RdmaError(Rpcrdma1Error::RdmaErrVers(v)) => Body::Error(RdmaError::Vers {
            low: v.rdma_vers_low,
            high: v.rdma_vers_high,
        }),
        Rpcrdma1Body::RdmaError(Rpcrdma1Error::RdmaErrChunk) => Body::Error(RdmaError::BadXdr),
    };
    Ok((Header::v1(xid, credit, body), 12 + used))
}

fn raw(c: Rpcrdma1Chunks) -> RawChunks {
    RawChunks {
        inv_handle: 0,
        reads: c
            .rdma_reads
            .into_iter()
            .map(|r| (r.rdma_entry.rdma_position, r.rdma_entry.rdma_target))
            .collect(),
        writes: c
            .rdma_writes
            .into_iter()
            .map(|w| w.rdma_entry.rdma_target)
            .collect(),
        reply: c.rdma_reply.map(|r| r.rdma_target),
    }
}

fn lists(c: &Chunks) -> Rpcrdma1Chunks {
    Rpcrdma1Chunks {
        rdma_reads: c
            .reads
            .iter()
            .flat_map(|r| {
                r.segments.iter().map(move |s| Rpcrdma1ReadList {
                    rdma_entry: Rpcrdma1ReadSegment {
                        rdma_position: r.position,
                        rdma_target: *s,
                    },
                })
            })
            .collect(),
        rdma_writes: c
            .writes
            .iter()
            .map(|w| Rpcrdma1WriteList {
                rdma_entry: Rpcrdma1WriteChunk {
                    rdma_target: w.clone(),
                },
            })
            .collect(),
        rdma_reply: c.reply.as_ref().map(|r| Rpcrdma1WriteChunk {
            rdma_target: r.clone(),
        }),
    }
}

/// Encodes `header` as version 1. Version 2's bodies have no version 1 form: an error other
/// than ERR_VERS goes as ERR_CHUNK; RDMA2_CONNPROP and extension types refuse to encode.
pub(super) fn encode(header: &Header, enc: &mut Encoder) -> xdr::Result<()> {
    let body = match &header.body {
        Body::Msg(c) => Rpcrdma1Body::RdmaMsg(lists(c)),
        Body::MsgP(c, pad) => Rpcrdma1Body::RdmaMsgp(Rpcrdma1Padded {
            rdma_align: pad.align,
            rdma_thresh: pad.thresh,
            rdma_achunks: lists(c),
        }),
        Body::NoMsg(c) => Rpcrdma1Body::RdmaNomsg(lists(c)),
        Body::Done => Rpcrdma1Body::RdmaDone,
        Body::Error(RdmaError::Vers { low, high }) => {
            Rpcrdma1Body::RdmaError(Rpcrdma1Error::RdmaErrVers(Rpcrdma1ErrVers {
                rdma_vers_low: *low,
                rdma_vers_high: *high,
            }))
        }
        Body::Error(_) => Rpcrdma1Body::RdmaError(Rpcrdma1Error::RdmaErrChunk),
        Body::ConnProp(_) | Body::Other { .. } => {
            return Err(xdr::Error::new(
                xdr::ErrorKind::UnknownDiscriminant {
                    type_name: "rpcrdma1_body (a version 2 header type)",
                    value: 0,
                },
                enc.len(),
            ))
        }
    };
    Rpcrdma1Msg {
        rdma_xid: header.xid,
        rdma_vers: super::VERSION,
        rdma_credit: header.credit,
        rdma_body: body,
    }
    .encode(enc)
}

/// The encoded length of `header` as version 1.
pub(super) fn encoded_len(header: &Header) -> usize {
    super::FIXED_LEN
        + match &header.body {
            Body::Msg(chunks) | Body::NoMsg(chunks) => super::chunks_len(chunks),
            Body::MsgP(chunks, _) => 8 + super::chunks_len(chunks),
            Body::Done => 0,
            Body::Error(RdmaError::Vers { .. }) => 12,
            Body::Error(_) => 4,
            Body::ConnProp(_) | Body::Other { .. } => 0,
        }
}

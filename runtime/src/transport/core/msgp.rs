//! RDMA_MSGP on the sending side (seed 000 sections 3.5 and 4.1): an inline message padded
//! so that large opaque data lands aligned in the receiver's buffer.

use crate::transport::header::{self, AlignPadding, Body, Header, VERSION};
use crate::xdr::Encoded;

/// `header` (a version 1 RDMA_MSG) as RDMA_MSGP with `pad`, and `message` padded for it,
/// and the padding bytes put in, when the padded Send still fits `room` bytes; `None` otherwise (the caller sends the
/// RDMA_MSG as it was). The padding counts from the Send's first byte, so it depends on the
/// header's length; Read chunk Positions after a padded item move along with it (a Position
/// counts in the XDR stream the receiver decodes, padding included).
pub(super) fn padded(
    header: &Header,
    message: &Encoded,
    pad: AlignPadding,
    room: usize,
) -> Option<(Header, Encoded, usize)> {
    let Body::Msg(chunks) = &header.body else {
        return None;
    };
    if header.version != VERSION || !pad.is_valid() {
        return None;
    }
    let mut padded_header = Header {
        body: Body::MsgP(chunks.clone(), pad),
        ..header.clone()
    };
    let origin = header::encoded_len(&padded_header);
    let (padded, inserted) = message.aligned(&pad, origin);
    if origin + padded.len() > room {
        return None;
    }
    if let Body::MsgP(chunks, _) = &mut padded_header.body {
        for read in &mut chunks.reads {
            let before: usize = inserted
                .iter()
                .filter(|(at, _)| *at < read.position as usize)
                .map(|(_, n)| n)
                .sum();
            read.position += before as u32;
        }
    }
    let added = inserted.iter().map(|(_, n)| n).sum();
    Some((padded_header, padded, added))
}

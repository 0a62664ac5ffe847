//! The MPA startup exchange (RFC 5044 section 7, RFC 6581, the RNIC interop draft) on a
//! peer's frame: as responder, the peer's Request is parsed and answered; as initiator, the
//! peer's Reply is parsed and completes our Request. Our own Reply must parse back to itself.
//!
//! Input: one options byte (bits 0-1 our RNIC kind, bit 2 markers, bit 3 CRC, bit 4 revision
//! 2 instead of 1, bit 5 the initiator role), then the peer's frame with its private data.
//!
//! Allocation bound: 64 x input + 64 KiB. Private data is at most 512 bytes (RFC 5044
//! section 7.1) and is copied a few times at most.

use crate::alloc_bound::bound;
use crate::cases::Flagged;
use rpcrdma::rdma::soft::negotiate::ReadDepths;
use rpcrdma::rdma::soft::wire::mpa::{FrameKind, StartupFrame};
use rpcrdma::rdma::soft::{MpaConfig, RnicKind};

/// Our private data: an RPC-over-RDMA connection's (version, credits, sizes).
const ULP: &[u8] = &[0xf6, 0xf6, 0x01, 0x00, 0x00, 0x20, 0x00, 0x10];

/// The largest single allocation allowed for an input of `len` bytes (see above).
pub fn limit(len: usize) -> usize {
    bound(len, 64, 64 << 10)
}

/// One run on a raw input: returns normally, or panics on a finding.
pub fn run(data: &[u8]) {
    let case = Flagged::split(data);
    let config = MpaConfig {
        kind: match case.flags & 3 {
            0 => RnicKind::Rdmac,
            1 => RnicKind::Ietf,
            _ => RnicKind::IetfPermissive,
        },
        markers: case.flags & 4 != 0,
        crc: case.flags & 8 != 0,
        revision: if case.flags & 16 != 0 { 2 } else { 1 },
    };
    let depths = ReadDepths { ird: 16, ord: 16 };
    if case.flags & 32 != 0 {
        let request = config.request(ULP, depths);
        if let Ok((reply, used)) = StartupFrame::parse(FrameKind::Reply, case.rest) {
            assert!(used <= case.rest.len());
            let _ = config.complete(&request, &reply);
        }
    } else if let Ok((request, used)) = StartupFrame::parse(FrameKind::Request, case.rest) {
        assert!(used <= case.rest.len());
        let (reply, _outcome) = config.respond(&request, ULP, depths);
        let mut out = Vec::new();
        reply.emit(&mut out);
        let (back, back_used) =
            StartupFrame::parse(FrameKind::Reply, &out).expect("our Reply parses");
        assert_eq!(back, reply);
        assert_eq!(back_used, out.len());
        let _ = config.reject(&request, ULP);
    }
}

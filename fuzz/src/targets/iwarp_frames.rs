//! The software iWARP provider's receive path on a peer's byte stream in Full Operation: MPA
//! FPDUs (markers and CRC as negotiated), then each ULPDU's DDP header and, by RDMAP opcode,
//! the RDMA Read Request or Terminate header. Every error maps onto a Terminate code. Parsed
//! headers must emit and parse back to themselves.
//!
//! Input: one options byte (bit 0 markers, bit 1 CRC; with CRC on, a frame must carry the
//! right CRC32c, which the seeds do and mutations mostly break, so most runs take CRC off),
//! then the stream.
//!
//! Allocation bound: 64 x input + 64 KiB. ULPDUs are borrowed from the input (copied, without
//! markers, into one scratch buffer no longer than the stream); a Terminate keeps copies of at
//! most 46 header bytes.

use crate::alloc_bound::bound;
use crate::cases::Flagged;
use rpcrdma::rdma::soft::wire::ddp::{Buffer, DdpHeader};
use rpcrdma::rdma::soft::wire::mpa::{FpduReader, Framing};
use rpcrdma::rdma::soft::wire::rdmap::{Opcode, ReadRequest, Terminate};
use rpcrdma::rdma::soft::wire::WireError;

/// Parses one ULPDU the way the receive path does, checking each header's round trip.
fn segment(ulpdu: &[u8]) -> Result<(), WireError> {
    let ddp = DdpHeader::parse(ulpdu)?;
    let emitted = ddp.to_bytes();
    let back = DdpHeader::parse(&emitted[..ddp.len()]).expect("an emitted DDP header parses");
    assert_eq!(
        back,
        DdpHeader { reserved: 0, ..ddp },
        "DDP header round trip"
    );
    let payload = &ulpdu[ddp.len()..];
    match (Opcode::from(ddp.opcode), ddp.buffer) {
        (Opcode::ReadRequest, Buffer::Untagged { .. }) => {
            let rr = ReadRequest::parse(payload)?;
            assert_eq!(&rr.to_bytes()[..], payload, "Read Request round trip");
        }
        (Opcode::Terminate, Buffer::Untagged { .. }) => {
            let term = Terminate::parse(payload)?;
            let mut out = Vec::new();
            term.emit(&mut out);
            assert_eq!(
                Terminate::parse(&out).expect("an emitted Terminate parses"),
                term
            );
        }
        _ => {}
    }
    Ok(())
}

/// The largest single allocation allowed for an input of `len` bytes (see above).
pub fn limit(len: usize) -> usize {
    bound(len, 64, 64 << 10)
}

/// One run on a raw input: returns normally, or panics on a finding.
pub fn run(data: &[u8]) {
    let case = Flagged::split(data);
    let framing = Framing {
        markers: case.flags & 1 != 0,
        crc: case.flags & 2 != 0,
    };
    let mut reader = FpduReader::new(framing, 65535);
    let mut scratch = Vec::new();
    let mut at = 0;
    while at < case.rest.len() {
        let outcome = match reader.next_in(&case.rest[at..], &mut scratch) {
            Ok(Some(fpdu)) => {
                assert!(fpdu.consumed > 0 && fpdu.consumed <= case.rest.len() - at);
                at += fpdu.consumed;
                segment(fpdu.ulpdu)
            }
            Ok(None) => break,
            Err(e) => Err(e),
        };
        if let Err(e) = outcome {
            // What the peer is told before the connection closes.
            let _ = e.terminate();
            break;
        }
    }
}

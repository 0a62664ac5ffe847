//! ONC RPC record marking (RFC 5531 section 11) on a peer's TCP byte stream: the
//! `RecordReader` assembling records from bytes arriving in pieces, with the TCP transport's
//! default bound. Every record it hands out must be within the bound, and framing the records
//! again with `RecordWriter` (small fragments) and reading them back must give the same
//! records and a clean end.
//!
//! Input: one options byte (bits 0-5: the size of the pieces the stream arrives in, 1 to 64
//! bytes; bits 6-7: the re-framing fragment size, 4, 64, 512 or 4096 bytes), then the stream.
//!
//! Allocation bound: 64 x input + 64 KiB. A fragment header may announce up to the bound of
//! 4 MiB + 64 KiB; nothing may be reserved for it before its bytes arrive (the reader checks
//! the header, then buffers only what came).

use crate::alloc_bound::bound;
use crate::cases::Flagged;
use bytes::Bytes;
use rpcrdma::rpc::record::{RecordReader, RecordWriter};
use rpcrdma::rpc::tcp::DEFAULT_MAX_RECORD;

/// Reads every record of `stream` arriving `piece` bytes at a time; returns them and whether
/// the stream ended cleanly between records.
fn read_all(stream: &[u8], piece: usize) -> (Vec<Bytes>, bool) {
    let mut reader = RecordReader::new(DEFAULT_MAX_RECORD);
    let mut records = Vec::new();
    for bytes in stream.chunks(piece) {
        reader.push(bytes);
        loop {
            match reader.next_record() {
                Ok(Some(record)) => {
                    assert!(
                        record.len() <= DEFAULT_MAX_RECORD,
                        "a record within the bound"
                    );
                    records.push(record);
                }
                Ok(None) => break,
                Err(_) => {
                    assert!(reader.finish().is_err(), "an error sticks");
                    return (records, false);
                }
            }
        }
    }
    let clean = reader.finish().is_ok();
    (records, clean)
}

/// The largest single allocation allowed for an input of `len` bytes (see above).
pub fn limit(len: usize) -> usize {
    bound(len, 64, 64 << 10)
}

/// One run on a raw input: returns normally, or panics on a finding.
pub fn run(data: &[u8]) {
    let case = Flagged::split(data);
    let piece = usize::from(case.flags & 63) + 1;
    let fragment = [4, 64, 512, 4096][usize::from(case.flags >> 6)];
    let (records, _clean) = read_all(case.rest, piece);
    let mut writer = RecordWriter::new(fragment);
    let mut parts = Vec::new();
    for r in &records {
        writer.frame(std::slice::from_ref(r), &mut parts);
    }
    let stream: Vec<u8> = parts.iter().flat_map(|p| p.iter().copied()).collect();
    let (again, clean) = read_all(&stream, piece);
    assert!(clean, "our own framing ends between records");
    assert_eq!(again, records, "re-framed records read back the same");
}

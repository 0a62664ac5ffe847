//! MPA (RFC 5044): the Request/Reply startup frames, the RFC 6581 enhanced private data, and
//! FPDU framing with optional markers and CRC32c.

use bytes::BufMut;

use super::{be16, crc, WireError};

/// Key of the MPA Request frame (RFC 5044 section 7.1).
pub const REQ_KEY: &[u8; 16] = b"MPA ID Req Frame";
/// Key of the MPA Reply frame (RFC 5044 section 7.1).
pub const REP_KEY: &[u8; 16] = b"MPA ID Rep Frame";
/// Fixed part of a Request/Reply frame: key, flags, revision, private data length.
pub const STARTUP_HEADER_LEN: usize = 20;
/// Largest private data in a Request/Reply frame (RFC 5044 section 7.1).
pub const MAX_PRIVATE_DATA: usize = 512;
/// Marker interval in octets (RFC 5044 section 5).
pub const MARKER_INTERVAL: u64 = 512;
/// Size of a marker.
pub const MARKER_LEN: usize = 4;
/// Size of the CRC trailer.
pub const CRC_LEN: usize = 4;
/// Size of the ULPDU length field.
pub const ULPDU_LEN_LEN: usize = 2;

const FLAG_M: u8 = 0x80;
const FLAG_C: u8 = 0x40;
const FLAG_R: u8 = 0x20;
/// S: enhanced connection establishment, IRD/ORD words lead the private data (RFC 6581
/// section 9; Linux siw calls it `MPA_RR_FLAG_ENHANCED`).
const FLAG_S: u8 = 0x10;
const FLAG_RES: u8 = 0x0f;

/// Which startup frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// "MPA ID Req Frame", sent by the initiator.
    Request,
    /// "MPA ID Rep Frame", sent by the responder.
    Reply,
}

/// A parsed MPA Request or Reply frame (RFC 5044 section 7.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartupFrame {
    /// Request or Reply.
    pub kind: FrameKind,
    /// M: the sender wants markers in the data it receives.
    pub markers: bool,
    /// C: the sender wants CRCs.
    pub crc: bool,
    /// R: the responder rejects the connection (Reply only).
    pub reject: bool,
    /// S: the private data starts with the RFC 6581 IRD/ORD words (revision 2).
    pub enhanced: bool,
    /// The reserved flag bits as received (zero when sent by us).
    pub reserved: u8,
    /// Rev: the MPA revision (0 RDMAC, 1 RFC 5044, 2 RFC 6581).
    pub revision: u8,
    /// The private data (for revision 2, starting with the IRD/ORD words).
    pub private_data: Vec<u8>,
}

impl StartupFrame {
    /// Parses the 20-byte fixed part and returns the private data length that follows.
    pub fn parse_header(kind: FrameKind, b: &[u8]) -> Result<(StartupFrame, usize), WireError> {
        if b.len() < STARTUP_HEADER_LEN {
            return Err(WireError::Truncated {
                what: "MPA Request/Reply frame",
                got: b.len(),
                need: STARTUP_HEADER_LEN,
            });
        }
        let key = match kind {
            FrameKind::Request => REQ_KEY,
            FrameKind::Reply => REP_KEY,
        };
        if &b[..16] != key {
            return Err(WireError::BadKey {
                expected: match kind {
                    FrameKind::Request => "MPA ID Req Frame",
                    FrameKind::Reply => "MPA ID Rep Frame",
                },
            });
        }
        let flags = b[16];
        let pd_len = be16(b, 18);
        // RFC 5044 section 7.1: PD_Length MUST NOT exceed 512.
        if pd_len as usize > MAX_PRIVATE_DATA {
            return Err(WireError::PrivateDataTooLong(pd_len));
        }
        Ok((
            StartupFrame {
                kind,
                markers: flags & FLAG_M != 0,
                crc: flags & FLAG_C != 0,
                reject: flags & FLAG_R != 0,
                enhanced: flags & FLAG_S != 0,
                reserved: flags & FLAG_RES,
                revision: b[17],
                private_data: Vec::new(),
            },
            pd_len as usize,
        ))
    }

    /// Parses a whole frame (fixed part and private data); returns it and the bytes used.
    pub fn parse(kind: FrameKind, b: &[u8]) -> Result<(StartupFrame, usize), WireError> {
        let (mut frame, pd_len) = StartupFrame::parse_header(kind, b)?;
        let total = STARTUP_HEADER_LEN + pd_len;
        if b.len() < total {
            return Err(WireError::Truncated {
                what: "MPA private data",
                got: b.len(),
                need: total,
            });
        }
        frame.private_data = b[STARTUP_HEADER_LEN..total].to_vec();
        Ok((frame, total))
    }

    /// The encoded length.
    pub fn len(&self) -> usize {
        STARTUP_HEADER_LEN + self.private_data.len()
    }

    /// Never empty (the fixed part is always there).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Appends the encoding to `out`. The private data must be at most 512 bytes.
    pub fn emit(&self, out: &mut Vec<u8>) {
        debug_assert!(self.private_data.len() <= MAX_PRIVATE_DATA);
        out.extend_from_slice(match self.kind {
            FrameKind::Request => REQ_KEY,
            FrameKind::Reply => REP_KEY,
        });
        let mut flags = self.reserved & FLAG_RES;
        if self.markers {
            flags |= FLAG_M;
        }
        if self.crc {
            flags |= FLAG_C;
        }
        if self.reject {
            flags |= FLAG_R;
        }
        if self.enhanced {
            flags |= FLAG_S;
        }
        out.push(flags);
        out.push(self.revision);
        out.extend_from_slice(&(self.private_data.len() as u16).to_be_bytes());
        out.extend_from_slice(&self.private_data);
    }
}

/// The RFC 6581 section 9 words at the start of revision 2 private data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct EnhancedParams {
    /// Inbound RDMA Read queue depth (14 bits).
    pub ird: u16,
    /// Outbound RDMA Read queue depth (14 bits).
    pub ord: u16,
    /// Peer-to-peer mode: the initiator sends a ready-to-receive message first.
    pub peer_to_peer: bool,
    /// RTR may be a zero-length Send.
    pub rtr_send: bool,
    /// RTR may be a zero-length RDMA Write.
    pub rtr_write: bool,
    /// RTR may be a zero-length RDMA Read.
    pub rtr_read: bool,
}

/// Size of the RFC 6581 IRD/ORD words.
pub const ENHANCED_LEN: usize = 4;
const IRD_ORD_MASK: u16 = 0x3fff;

impl EnhancedParams {
    /// Parses the IRD/ORD words at the start of `pd`; returns them and the ULP private data.
    pub fn parse(pd: &[u8]) -> Result<(EnhancedParams, &[u8]), WireError> {
        if pd.len() < ENHANCED_LEN {
            return Err(WireError::Truncated {
                what: "MPA revision 2 IRD/ORD",
                got: pd.len(),
                need: ENHANCED_LEN,
            });
        }
        let ird = be16(pd, 0);
        let ord = be16(pd, 2);
        Ok((
            EnhancedParams {
                ird: ird & IRD_ORD_MASK,
                ord: ord & IRD_ORD_MASK,
                peer_to_peer: ird & 0x8000 != 0,
                rtr_send: ird & 0x4000 != 0,
                rtr_write: ord & 0x8000 != 0,
                rtr_read: ord & 0x4000 != 0,
            },
            &pd[ENHANCED_LEN..],
        ))
    }

    /// Appends the words to `out`.
    pub fn emit(&self, out: &mut Vec<u8>) {
        let mut ird = self.ird.min(IRD_ORD_MASK);
        let mut ord = self.ord.min(IRD_ORD_MASK);
        if self.peer_to_peer {
            ird |= 0x8000;
        }
        if self.rtr_send {
            ird |= 0x4000;
        }
        if self.rtr_write {
            ord |= 0x8000;
        }
        if self.rtr_read {
            ord |= 0x4000;
        }
        out.extend_from_slice(&ird.to_be_bytes());
        out.extend_from_slice(&ord.to_be_bytes());
    }
}

/// Pad length after a ULPDU of `ulpdu_len` bytes: the length field plus ULPDU plus pad is a
/// multiple of four (RFC 5044 section 4.1).
pub fn pad_len(ulpdu_len: usize) -> usize {
    (4 - (ULPDU_LEN_LEN + ulpdu_len) % 4) % 4
}

/// Bytes of the FPDU (without markers) whose ULPDU_LENGTH field begins `b`: the field, the
/// ULPDU, its pad and the CRC field (RFC 5044 section 4.1). `None` when `b` is shorter than
/// the field.
pub fn fpdu_len_at(b: &[u8]) -> Option<usize> {
    let &[l0, l1, ..] = b else {
        return None;
    };
    let ulpdu_len = usize::from(u16::from_be_bytes([l0, l1]));
    Some(ULPDU_LEN_LEN + ulpdu_len + pad_len(ulpdu_len) + CRC_LEN)
}

/// The CRC32c of an FPDU in the byte order it goes on the wire (RFC 5044 section 4.1 and the
/// iSCSI convention RFC 3385: least significant byte first, as Wireshark checks it).
pub fn crc_bytes(crc: u32) -> [u8; 4] {
    crc.to_le_bytes()
}

/// The CRC value of trailer bytes as received.
pub fn crc_from_bytes(b: [u8; 4]) -> u32 {
    u32::from_le_bytes(b)
}

/// Framing parameters of one direction of a connection in Full Operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Framing {
    /// Markers are present in this direction.
    pub markers: bool,
    /// CRCs are in use: computed and checked. The CRC field is in every FPDU either way
    /// (RFC 5044 section 4.1: without CRCs it is still present, may hold any value and is not
    /// checked; Linux siw sends zeros there and Wireshark's dissector expects it).
    pub crc: bool,
}

impl Framing {
    /// Bytes of an FPDU with a ULPDU of `ulpdu_len` bytes, without markers.
    pub fn fpdu_len(&self, ulpdu_len: usize) -> usize {
        ULPDU_LEN_LEN + ulpdu_len + pad_len(ulpdu_len) + CRC_LEN
    }
}

/// FPDUs up to this long are framed in one reserved run (see [`FpduWriter::write_message`]).
const SMALL_FPDU: usize = 256;

/// The sending side of MPA framing: turns ULPDUs into FPDUs, inserting markers at every
/// 512th octet of the stream (counted from the first FPDU, RFC 5044 section 5) and the CRC.
#[derive(Clone, Debug)]
pub struct FpduWriter {
    framing: Framing,
    /// Stream offset (from the start of Full Operation) of the next byte written.
    pos: u64,
}

impl FpduWriter {
    /// A writer at the start of Full Operation.
    pub fn new(framing: Framing) -> FpduWriter {
        FpduWriter { framing, pos: 0 }
    }

    /// The framing in use.
    pub fn framing(&self) -> Framing {
        self.framing
    }

    /// Accounts for an FPDU of `len` stream bytes framed and written by the caller (a gathered
    /// FPDU, see `core::Transmit`). Only without markers: their positions depend on every byte.
    pub fn skip(&mut self, len: usize) {
        debug_assert!(!self.framing.markers);
        self.pos += len as u64;
    }

    /// [`FpduWriter::write`] of a ULPDU made of a header, `head[..head_len]`, and a payload:
    /// the shape of every message the core sends. The header comes in a fixed-size buffer so
    /// that it is copied without a call.
    pub fn write_message<const N: usize>(
        &mut self,
        head: &[u8; N],
        head_len: usize,
        payload: &[u8],
        out: &mut Vec<u8>,
    ) {
        let ulpdu_len = head_len + payload.len();
        let len = self.framing.fpdu_len(ulpdu_len);
        if self.framing.markers || len > SMALL_FPDU {
            return self.write(&[&head[..head_len], payload], out);
        }
        // Grown once, then the pieces in order, the fixed-size ones (header, pad and CRC field)
        // copied whole and cut back: per FPDU ~50 instructions less than zeroing the frame and
        // copying the pieces into it, and ~25 less again than copying the pieces at their
        // lengths (callgrind, `scripts/soft-profile --round-trip`).
        let start = out.len();
        out.reserve(len + N + 3);
        out.extend_from_slice(&(ulpdu_len as u16).to_be_bytes());
        out.extend_from_slice(head);
        out.truncate(start + ULPDU_LEN_LEN + head_len);
        out.extend_from_slice(payload);
        // Pad and the CRC field (zero without CRCs, see [`Framing::crc`]).
        out.extend_from_slice(&[0; 3 + CRC_LEN]);
        out.truncate(start + len);
        if self.framing.crc {
            let at = out.len() - CRC_LEN;
            let crc = crc_bytes(crc::of(&out[start..at]));
            out[at..].copy_from_slice(&crc);
        }
        self.pos += len as u64;
    }

    /// Appends one FPDU carrying the ULPDU `parts` (concatenated) to `out`.
    pub fn write<B: BufMut + AsRef<[u8]>>(&mut self, parts: &[&[u8]], out: &mut B) {
        let ulpdu_len: usize = parts.iter().map(|p| p.len()).sum();
        debug_assert!(ulpdu_len <= u16::MAX as usize);
        let fpdu_start = self.pos;
        let len_field = (ulpdu_len as u16).to_be_bytes();
        let pad = [0u8; 3];
        let pad = &pad[..pad_len(ulpdu_len)];
        let mut crc = 0u32;
        let framing = self.framing;
        if !framing.markers {
            // The pieces one after the other, the CRC over them in one go.
            let start = out.as_ref().len();
            out.put_slice(&len_field);
            for part in parts {
                out.put_slice(part);
            }
            out.put_slice(pad);
            // The CRC field is there without CRCs too, zero (see [`Framing::crc`]).
            let trailer = if framing.crc {
                crc_bytes(crc::of(&out.as_ref()[start..]))
            } else {
                [0; CRC_LEN]
            };
            out.put_slice(&trailer);
            self.pos += (out.as_ref().len() - start) as u64;
            return;
        }
        let put = |this: &mut FpduWriter, out: &mut B, mut data: &[u8], crc: &mut u32| {
            while !data.is_empty() {
                if framing.markers && this.pos % MARKER_INTERVAL == 0 {
                    // RFC 5044 section 5: FPDUPTR counts back from the marker to the FPDU's
                    // ULPDU length field.
                    let ptr = (this.pos - fpdu_start) as u16;
                    let marker = [0, 0, (ptr >> 8) as u8, ptr as u8];
                    if framing.crc {
                        *crc = crc::append(*crc, &marker);
                    }
                    out.put_slice(&marker);
                    this.pos += MARKER_LEN as u64;
                }
                let room = if framing.markers {
                    (MARKER_INTERVAL - this.pos % MARKER_INTERVAL) as usize
                } else {
                    data.len()
                };
                let n = room.min(data.len());
                if framing.crc {
                    *crc = crc::append(*crc, &data[..n]);
                }
                out.put_slice(&data[..n]);
                this.pos += n as u64;
                data = &data[n..];
            }
        };
        put(self, out, &len_field, &mut crc);
        for part in parts {
            put(self, out, part, &mut crc);
        }
        put(self, out, pad, &mut crc);
        // The CRC field is there without CRCs too, zero (see [`Framing::crc`]).
        let trailer = if framing.crc {
            crc_bytes(crc)
        } else {
            [0; CRC_LEN]
        };
        put(self, out, &trailer, &mut 0);
    }
}

/// The receiving side of MPA framing: finds FPDUs in the byte stream, removes markers, and
/// checks them and the CRC before anything of the FPDU is used.
#[derive(Clone, Debug)]
pub struct FpduReader {
    framing: Framing,
    /// Stream offset of the next byte to consume.
    pos: u64,
    /// Largest ULPDU accepted.
    max_ulpdu: usize,
}

/// A complete FPDU found by [`FpduReader::next`].
#[derive(Debug)]
pub struct Fpdu {
    /// The ULPDU (DDP segment) without markers, pad and CRC.
    pub ulpdu: Vec<u8>,
    /// Stream bytes consumed (including markers).
    pub consumed: usize,
}

/// A complete FPDU found by [`FpduReader::next_in`], borrowing its ULPDU.
#[derive(Debug)]
pub struct FpduRef<'a> {
    /// The ULPDU (DDP segment) without markers, pad and CRC.
    pub ulpdu: &'a [u8],
    /// Stream bytes consumed (including markers).
    pub consumed: usize,
}

impl FpduReader {
    /// A reader at the start of Full Operation accepting ULPDUs up to `max_ulpdu` bytes.
    pub fn new(framing: Framing, max_ulpdu: usize) -> FpduReader {
        FpduReader {
            framing,
            pos: 0,
            max_ulpdu,
        }
    }

    /// The framing in use.
    pub fn framing(&self) -> Framing {
        self.framing
    }

    /// Stream offset of the next byte.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Skips `n` bytes that were consumed outside the reader (direct placement; only valid
    /// without markers).
    pub fn advance(&mut self, n: usize) {
        self.pos += n as u64;
    }

    /// Copies `want` stream bytes (skipping and checking markers) from `b[*at..]` into `dst`.
    /// Returns `Ok(false)` when `b` ends first.
    fn take(
        &self,
        b: &[u8],
        at: &mut usize,
        fpdu_start: u64,
        want: usize,
        dst: &mut Vec<u8>,
        crc: &mut u32,
    ) -> Result<bool, WireError> {
        let mut left = want;
        while left > 0 {
            let pos = self.pos + *at as u64;
            if self.framing.markers && pos % MARKER_INTERVAL == 0 {
                if b.len() < *at + MARKER_LEN {
                    return Ok(false);
                }
                let m = &b[*at..*at + MARKER_LEN];
                // RFC 5044 section 5: reserved zero, FPDUPTR back to this FPDU's start.
                let ptr = be16(m, 2) as u64;
                if m[0] != 0 || m[1] != 0 || ptr != pos - fpdu_start {
                    return Err(WireError::BadMarker { at: pos });
                }
                if self.framing.crc {
                    *crc = crc::append(*crc, m);
                }
                *at += MARKER_LEN;
                continue;
            }
            let room = if self.framing.markers {
                (MARKER_INTERVAL - pos % MARKER_INTERVAL) as usize
            } else {
                left
            };
            let n = room.min(left).min(b.len() - *at);
            if n == 0 {
                return Ok(false);
            }
            let chunk = &b[*at..*at + n];
            if self.framing.crc {
                *crc = crc::append(*crc, chunk);
            }
            dst.extend_from_slice(chunk);
            *at += n;
            left -= n;
        }
        Ok(true)
    }

    /// The next complete FPDU at the start of `b`, or `Ok(None)` when more bytes are needed.
    /// On success the caller drops `consumed` bytes from the front of its buffer.
    pub fn next(&mut self, b: &[u8]) -> Result<Option<Fpdu>, WireError> {
        let mut scratch = Vec::new();
        Ok(self.next_in(b, &mut scratch)?.map(|f| Fpdu {
            ulpdu: f.ulpdu.to_vec(),
            consumed: f.consumed,
        }))
    }

    /// [`FpduReader::next`] without copying: the ULPDU is a slice of `b` when there are no
    /// markers, else of `scratch` (cleared first), where the markers are taken out.
    #[inline]
    pub fn next_in<'a>(
        &mut self,
        b: &'a [u8],
        scratch: &'a mut Vec<u8>,
    ) -> Result<Option<FpduRef<'a>>, WireError> {
        if self.framing.markers {
            return self.next_with_markers(b, scratch);
        }
        let Some(&[l0, l1]) = b.first_chunk::<ULPDU_LEN_LEN>() else {
            return Ok(None);
        };
        let ulpdu_len = u16::from_be_bytes([l0, l1]) as usize;
        if ulpdu_len > self.max_ulpdu {
            return Err(WireError::BadUlpduLength(ulpdu_len as u16));
        }
        let covered = ULPDU_LEN_LEN + ulpdu_len + pad_len(ulpdu_len);
        let Some(fpdu) = b.get(..covered + CRC_LEN) else {
            return Ok(None);
        };
        if self.framing.crc {
            let computed = crc::of(&fpdu[..covered]);
            let mut trailer = [0u8; CRC_LEN];
            trailer.copy_from_slice(&fpdu[covered..]);
            let received = crc_from_bytes(trailer);
            // RFC 5044 section 8: a CRC mismatch is a fatal error.
            if received != computed {
                return Err(WireError::BadCrc { received, computed });
            }
        }
        self.pos += fpdu.len() as u64;
        Ok(Some(FpduRef {
            ulpdu: &fpdu[ULPDU_LEN_LEN..ULPDU_LEN_LEN + ulpdu_len],
            consumed: fpdu.len(),
        }))
    }

    /// [`FpduReader::next_in`] with markers: the ULPDU is copied into `scratch` without them.
    fn next_with_markers<'a>(
        &mut self,
        b: &[u8],
        scratch: &'a mut Vec<u8>,
    ) -> Result<Option<FpduRef<'a>>, WireError> {
        let mut at = 0;
        let mut crc = 0u32;
        let fpdu_start = self.pos;
        let mut head = Vec::with_capacity(2);
        if !self.take(b, &mut at, fpdu_start, ULPDU_LEN_LEN, &mut head, &mut crc)? {
            return Ok(None);
        }
        let ulpdu_len = be16(&head, 0) as usize;
        if ulpdu_len > self.max_ulpdu {
            return Err(WireError::BadUlpduLength(ulpdu_len as u16));
        }
        let ulpdu = scratch;
        ulpdu.clear();
        if !self.take(b, &mut at, fpdu_start, ulpdu_len, ulpdu, &mut crc)? {
            return Ok(None);
        }
        let mut pad = Vec::new();
        if !self.take(
            b,
            &mut at,
            fpdu_start,
            pad_len(ulpdu_len),
            &mut pad,
            &mut crc,
        )? {
            return Ok(None);
        }
        // The CRC field is there without CRCs too, and then not checked (see [`Framing::crc`]).
        let mut trailer = Vec::with_capacity(CRC_LEN);
        let mut ignore = 0;
        if !self.take(b, &mut at, fpdu_start, CRC_LEN, &mut trailer, &mut ignore)? {
            return Ok(None);
        }
        if self.framing.crc {
            let received = crc_from_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
            // RFC 5044 section 8: a CRC mismatch is a fatal error.
            if received != crc {
                return Err(WireError::BadCrc {
                    received,
                    computed: crc,
                });
            }
        }
        self.pos += at as u64;
        Ok(Some(FpduRef {
            ulpdu,
            consumed: at,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn startup_frame_round_trips_and_rejects_truncation() {
        let f = StartupFrame {
            kind: FrameKind::Request,
            markers: true,
            crc: false,
            reject: false,
            enhanced: false,
            reserved: 0,
            revision: 1,
            private_data: b"hello".to_vec(),
        };
        let mut out = vec![];
        f.emit(&mut out);
        assert_eq!(&out[..16], REQ_KEY);
        assert_eq!(out[16], 0x80);
        let (back, used) = StartupFrame::parse(FrameKind::Request, &out).unwrap();
        assert_eq!((back, used), (f, out.len()));
        for cut in 0..out.len() {
            assert!(StartupFrame::parse(FrameKind::Request, &out[..cut]).is_err());
        }
        assert!(StartupFrame::parse(FrameKind::Reply, &out).is_err());
    }

    #[test]
    fn rejects_private_data_longer_than_512() {
        let mut out = REQ_KEY.to_vec();
        out.extend_from_slice(&[0, 1, 0x02, 0x01]);
        assert_eq!(
            StartupFrame::parse_header(FrameKind::Request, &out),
            Err(WireError::PrivateDataTooLong(513))
        );
    }

    #[test]
    fn fpdus_round_trip_with_every_framing() {
        for markers in [false, true] {
            for crc in [false, true] {
                let framing = Framing { markers, crc };
                let mut w = FpduWriter::new(framing);
                let mut r = FpduReader::new(framing, 65535);
                let mut wire = vec![];
                let msgs: Vec<Vec<u8>> = (0..40usize)
                    .map(|i| (0..(i * 97 % 1500 + 1)).map(|b| (b + i) as u8).collect())
                    .collect();
                for m in &msgs {
                    w.write(&[&m[..3.min(m.len())], &m[3.min(m.len())..]], &mut wire);
                }
                let mut at = 0;
                for m in &msgs {
                    let f = r.next(&wire[at..]).unwrap().unwrap();
                    assert_eq!(&f.ulpdu, m);
                    at += f.consumed;
                }
                assert_eq!(at, wire.len());
            }
        }
    }

    /// `write_message` frames exactly what `write` does, on both sides of the small-FPDU
    /// bound and with every framing (markers and the stream position included).
    #[test]
    fn write_message_matches_write() {
        for markers in [false, true] {
            for crc in [false, true] {
                let framing = Framing { markers, crc };
                let (mut a, mut b) = (FpduWriter::new(framing), FpduWriter::new(framing));
                let (mut by_parts, mut by_message) = (Vec::new(), Vec::new());
                for i in 0..60usize {
                    let head = [0x41; 18];
                    let head_len = [14, 18, 0, 3][i % 4];
                    let payload: Vec<u8> = (0..i * 37 % 400).map(|b| b as u8).collect();
                    a.write(&[&head[..head_len], &payload], &mut by_parts);
                    b.write_message(&head, head_len, &payload, &mut by_message);
                    assert_eq!(by_message[..], by_parts[..], "message {i}");
                    assert_eq!(a.pos, b.pos);
                }
            }
        }
    }

    /// The borrowing reader finds the same FPDUs as the copying one, a slice of the input
    /// without markers, and needs the whole FPDU (CRC field included) before it returns one.
    #[test]
    fn next_in_agrees_with_next_and_waits_for_whole_fpdus() {
        for markers in [false, true] {
            for crc in [false, true] {
                let framing = Framing { markers, crc };
                let mut wire = vec![];
                let mut w = FpduWriter::new(framing);
                for i in 0..20usize {
                    w.write(&[&vec![i as u8; i * 131 % 700]], &mut wire);
                }
                let (mut a, mut b) = (
                    FpduReader::new(framing, 65535),
                    FpduReader::new(framing, 65535),
                );
                let mut scratch = vec![0xa5; 3];
                let mut at = 0;
                while at < wire.len() {
                    let want = a.next(&wire[at..]).unwrap().unwrap();
                    let mut probe = b.clone();
                    for cut in 0..want.consumed {
                        assert!(probe
                            .next_in(&wire[at..at + cut], &mut scratch)
                            .unwrap()
                            .is_none());
                    }
                    let got = b.next_in(&wire[at..], &mut scratch).unwrap().unwrap();
                    assert_eq!((got.ulpdu, got.consumed), (&want.ulpdu[..], want.consumed));
                    if !markers {
                        assert_eq!(got.ulpdu.as_ptr(), wire[at + ULPDU_LEN_LEN..].as_ptr());
                    }
                    at += want.consumed;
                }
                assert_eq!(a.position(), b.position());
            }
        }
    }

    /// RFC 5044 section 4.1: without CRCs the CRC field is still there; it is sent as zeros
    /// and whatever it holds on receipt is not checked (as Linux siw does).
    #[test]
    fn the_crc_field_is_present_and_unchecked_without_crcs() {
        let plain = Framing {
            markers: false,
            crc: false,
        };
        let mut wire = vec![];
        FpduWriter::new(plain).write(&[&[1, 2, 3, 4, 5]], &mut wire);
        // Length 5, ULPDU, pad 1 (to a multiple of 4 with the length field), CRC field.
        assert_eq!(wire, [0, 5, 1, 2, 3, 4, 5, 0, 0, 0, 0, 0]);
        assert_eq!(wire.len(), plain.fpdu_len(5));
        // Incomplete until the CRC field has arrived.
        assert!(FpduReader::new(plain, 65535)
            .next(&wire[..8])
            .unwrap()
            .is_none());
        wire[8..].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        let f = FpduReader::new(plain, 65535).next(&wire).unwrap().unwrap();
        assert_eq!((f.ulpdu, f.consumed), (vec![1, 2, 3, 4, 5], 12));
    }

    #[test]
    fn rejects_a_flipped_bit_under_crc() {
        for markers in [false, true] {
            let framing = Framing { markers, crc: true };
            let mut wire = vec![];
            FpduWriter::new(framing).write(&[&[7u8; 1000]], &mut wire);
            for i in 0..wire.len() {
                let mut bad = wire.clone();
                bad[i] ^= 0x10;
                let mut r = FpduReader::new(framing, 65535);
                assert!(!matches!(r.next(&bad), Ok(Some(_))), "flip at {i} accepted");
            }
        }
    }
}

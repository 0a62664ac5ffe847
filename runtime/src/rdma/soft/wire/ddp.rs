//! DDP segment headers (RFC 5041 section 4) with the RDMAP control byte (RFC 5040 section 4.2).

use super::WireError;

/// DDP control: Tagged flag.
const T: u8 = 0x80;
/// DDP control: Last flag.
const L: u8 = 0x40;
/// DDP control: version bits.
const DV: u8 = 0x03;
/// RDMAP control: version bits.
const RV: u8 = 0xc0;
/// RDMAP control: opcode bits.
const OPCODE: u8 = 0x0f;

/// Length of a tagged DDP header (control, STag, TO).
pub const TAGGED_LEN: usize = 14;
/// Length of an untagged DDP header (control, RsvdULP, QN, MSN, MO).
pub const UNTAGGED_LEN: usize = 18;

/// Untagged queue of RDMAP Send messages (RFC 5040 section 5.1).
pub const QN_SEND: u32 = 0;
/// Untagged queue of RDMA Read Requests.
pub const QN_READ_REQUEST: u32 = 1;
/// Untagged queue of Terminate messages.
pub const QN_TERMINATE: u32 = 2;

/// The buffer model of a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buffer {
    /// Tagged: placed at `to` in the buffer named by `stag` (RFC 5041 section 4.2).
    Tagged {
        /// Steering tag.
        stag: u32,
        /// Tagged offset.
        to: u64,
    },
    /// Untagged: placed at `mo` in the `msn`th buffer of queue `qn` (RFC 5041 section 4.3).
    Untagged {
        /// The 32-bit RsvdULP field (RDMAP puts the Invalidate STag here).
        rsvd_ulp: u32,
        /// Queue number.
        qn: u32,
        /// Message sequence number.
        msn: u32,
        /// Message offset.
        mo: u32,
    },
}

/// A parsed DDP header with its RDMAP control byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DdpHeader {
    /// L: the last segment of a DDP message.
    pub last: bool,
    /// DDP version.
    pub ddp_version: u8,
    /// RDMAP version.
    pub rdmap_version: u8,
    /// RDMAP opcode (4 bits).
    pub opcode: u8,
    /// The reserved bits of both control bytes as received.
    pub reserved: u8,
    /// The buffer model and its fields.
    pub buffer: Buffer,
}

impl DdpHeader {
    /// Length of this header on the wire.
    pub fn len(&self) -> usize {
        match self.buffer {
            Buffer::Tagged { .. } => TAGGED_LEN,
            Buffer::Untagged { .. } => UNTAGGED_LEN,
        }
    }

    /// Never empty.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The header length a segment starting with control byte `b0` has.
    pub fn len_for(b0: u8) -> usize {
        if b0 & T != 0 {
            TAGGED_LEN
        } else {
            UNTAGGED_LEN
        }
    }

    /// Parses the header at the start of a ULPDU.
    #[inline]
    pub fn parse(b: &[u8]) -> Result<DdpHeader, WireError> {
        let truncated = |need| WireError::DdpHeaderTooShort { got: b.len(), need };
        // Without its control byte a segment is short of even the shorter, tagged, header.
        let &c0 = b.first().ok_or_else(|| truncated(TAGGED_LEN))?;
        // Fixed-size views, so the fields below are read without further bounds checks (this
        // runs for every FPDU received).
        let buffer = if c0 & T != 0 {
            let h = b
                .first_chunk::<TAGGED_LEN>()
                .ok_or_else(|| truncated(TAGGED_LEN))?;
            Buffer::Tagged {
                stag: u32::from_be_bytes([h[2], h[3], h[4], h[5]]),
                to: u64::from_be_bytes([h[6], h[7], h[8], h[9], h[10], h[11], h[12], h[13]]),
            }
        } else {
            let h = b
                .first_chunk::<UNTAGGED_LEN>()
                .ok_or_else(|| truncated(UNTAGGED_LEN))?;
            Buffer::Untagged {
                rsvd_ulp: u32::from_be_bytes([h[2], h[3], h[4], h[5]]),
                qn: u32::from_be_bytes([h[6], h[7], h[8], h[9]]),
                msn: u32::from_be_bytes([h[10], h[11], h[12], h[13]]),
                mo: u32::from_be_bytes([h[14], h[15], h[16], h[17]]),
            }
        };
        let c1 = b[1];
        Ok(DdpHeader {
            last: c0 & L != 0,
            ddp_version: c0 & DV,
            rdmap_version: (c1 & RV) >> 6,
            opcode: c1 & OPCODE,
            reserved: ((c0 & 0x3c) >> 2) | (c1 & 0x30),
            buffer,
        })
    }

    /// Appends the header to `out` (reserved bits zero).
    pub fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_bytes()[..self.len()]);
    }

    /// The header on the wire (reserved bits zero): the first [`DdpHeader::len`] bytes.
    pub fn to_bytes(&self) -> [u8; UNTAGGED_LEN] {
        let mut c0 = self.ddp_version & DV;
        if self.last {
            c0 |= L;
        }
        if matches!(self.buffer, Buffer::Tagged { .. }) {
            c0 |= T;
        }
        let mut b = [0u8; UNTAGGED_LEN];
        b[0] = c0;
        b[1] = ((self.rdmap_version << 6) & RV) | (self.opcode & OPCODE);
        match self.buffer {
            Buffer::Tagged { stag, to } => {
                b[2..6].copy_from_slice(&stag.to_be_bytes());
                b[6..14].copy_from_slice(&to.to_be_bytes());
            }
            Buffer::Untagged {
                rsvd_ulp,
                qn,
                msn,
                mo,
            } => {
                b[2..6].copy_from_slice(&rsvd_ulp.to_be_bytes());
                b[6..10].copy_from_slice(&qn.to_be_bytes());
                b[10..14].copy_from_slice(&msn.to_be_bytes());
                b[14..18].copy_from_slice(&mo.to_be_bytes());
            }
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::super::rdmap::{TermCode, TermLayer};
    use super::*;

    #[test]
    fn send_header_matches_the_wireshark_example() {
        // /work/shared/notes/tshark.md: DDP control 0x41, RDMAP control 0x43, QN 0, MSN 1.
        let h = DdpHeader {
            last: true,
            ddp_version: 1,
            rdmap_version: 1,
            opcode: 3,
            reserved: 0,
            buffer: Buffer::Untagged {
                rsvd_ulp: 0,
                qn: 0,
                msn: 1,
                mo: 0,
            },
        };
        let mut out = vec![];
        h.emit(&mut out);
        assert_eq!(&out[..2], &[0x41, 0x43]);
        assert_eq!(out.len(), UNTAGGED_LEN);
        assert_eq!(DdpHeader::parse(&out).unwrap(), h);
        for cut in 0..out.len() {
            assert!(DdpHeader::parse(&out[..cut]).is_err());
        }
    }

    /// A ULPDU shorter than the header its T bit announces is DDP's error, reported with
    /// the DDP layer in the Terminate (RFC 5041 section 7), never as an MPA startup frame's.
    #[test]
    fn rejects_a_ulpdu_too_short_for_its_ddp_header() {
        let tagged = [0xc1, 0x40, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let untagged = [0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        assert!(DdpHeader::parse(&tagged).is_ok() && DdpHeader::parse(&untagged).is_ok());
        for (whole, need) in [(&tagged[..], TAGGED_LEN), (&untagged[..], UNTAGGED_LEN)] {
            for cut in 1..need {
                let e = DdpHeader::parse(&whole[..cut]).unwrap_err();
                assert_eq!(e, WireError::DdpHeaderTooShort { got: cut, need });
                assert_eq!(e.terminate(), TermCode::DDP_CATASTROPHIC);
                assert_eq!(e.terminate().layer, TermLayer::Ddp);
            }
        }
        let empty = DdpHeader::parse(&[]).unwrap_err();
        assert_eq!(
            empty,
            WireError::DdpHeaderTooShort {
                got: 0,
                need: TAGGED_LEN
            }
        );
        assert_eq!(empty.terminate().layer, TermLayer::Ddp);
    }

    #[test]
    fn tagged_header_round_trips() {
        let h = DdpHeader {
            last: false,
            ddp_version: 0,
            rdmap_version: 0,
            opcode: 0,
            reserved: 0,
            buffer: Buffer::Tagged {
                stag: 0xdead_beef,
                to: 0x0102_0304_0506_0708,
            },
        };
        let mut out = vec![];
        h.emit(&mut out);
        assert_eq!(out[0], 0x80);
        assert_eq!(DdpHeader::parse(&out).unwrap(), h);
    }
}

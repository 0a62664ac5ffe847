//! RDMAP messages (RFC 5040 section 4): opcodes, the RDMA Read Request header and the
//! Terminate header.

use super::{be16, be32, be64, code_points, WireError};

code_points! {
    /// RDMAP opcodes (RFC 5040 section 4.2, table 1).
    pub enum Opcode: u8 {
        /// RDMA Write (tagged).
        RdmaWrite = 0,
        /// RDMA Read Request (untagged, queue 1).
        ReadRequest = 1,
        /// RDMA Read Response (tagged).
        ReadResponse = 2,
        /// Send (untagged, queue 0).
        Send = 3,
        /// Send with Invalidate.
        SendInvalidate = 4,
        /// Send with Solicited Event.
        SendSolicited = 5,
        /// Send with Solicited Event and Invalidate.
        SendSolicitedInvalidate = 6,
        /// Terminate (untagged, queue 2).
        Terminate = 7,
    }
}

impl Opcode {
    /// One of the four Sends, the opcodes of untagged queue 0 (RFC 5040 section 4.2).
    pub fn is_send(self) -> bool {
        matches!(
            self,
            Opcode::Send
                | Opcode::SendInvalidate
                | Opcode::SendSolicited
                | Opcode::SendSolicitedInvalidate
        )
    }
}

/// Length of the RDMA Read Request header (RFC 5040 section 4.4).
pub const READ_REQUEST_LEN: usize = 28;

/// The RDMA Read Request header (the ULPDU payload of an untagged queue-1 segment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadRequest {
    /// Data Sink STag (the requester's buffer).
    pub sink_stag: u32,
    /// Data Sink tagged offset.
    pub sink_to: u64,
    /// RDMA Read Message Size.
    pub size: u32,
    /// Data Source STag (the responder's buffer).
    pub src_stag: u32,
    /// Data Source tagged offset.
    pub src_to: u64,
}

impl ReadRequest {
    /// Parses the header; the payload must be exactly [`READ_REQUEST_LEN`] bytes.
    pub fn parse(b: &[u8]) -> Result<ReadRequest, WireError> {
        if b.len() != READ_REQUEST_LEN {
            return Err(WireError::ReadRequestLength(b.len()));
        }
        Ok(ReadRequest {
            sink_stag: be32(b, 0),
            sink_to: be64(b, 4),
            size: be32(b, 12),
            src_stag: be32(b, 16),
            src_to: be64(b, 20),
        })
    }

    /// Appends the header to `out`.
    pub fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_bytes());
    }

    /// The header on the wire.
    pub fn to_bytes(&self) -> [u8; READ_REQUEST_LEN] {
        let mut b = [0u8; READ_REQUEST_LEN];
        b[0..4].copy_from_slice(&self.sink_stag.to_be_bytes());
        b[4..12].copy_from_slice(&self.sink_to.to_be_bytes());
        b[12..16].copy_from_slice(&self.size.to_be_bytes());
        b[16..20].copy_from_slice(&self.src_stag.to_be_bytes());
        b[20..28].copy_from_slice(&self.src_to.to_be_bytes());
        b
    }
}

code_points! {
    /// The layer that detected a Terminate's error (RFC 5040 section 4.8).
    pub enum TermLayer: u8 {
        /// RDMAP.
        Rdmap = 0,
        /// DDP.
        Ddp = 1,
        /// The lower layer protocol (MPA).
        Llp = 2,
    }
}

/// Layer, error type and code of a Terminate (RFC 5040 section 7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TermCode {
    /// The layer.
    pub layer: TermLayer,
    /// The error type (4 bits; its meaning depends on the layer).
    pub etype: u8,
    /// The error code.
    pub code: u8,
}

impl TermCode {
    /// A code.
    pub const fn new(layer: TermLayer, etype: u8, code: u8) -> TermCode {
        TermCode { layer, etype, code }
    }

    /// RDMAP remote protection error, invalid STag (RFC 5040 section 7.1).
    pub const INVALID_STAG: TermCode = TermCode::new(TermLayer::Rdmap, 1, 0x00);
    /// RDMAP remote protection error, base or bounds violation.
    pub const BASE_BOUNDS: TermCode = TermCode::new(TermLayer::Rdmap, 1, 0x01);
    /// RDMAP remote protection error, access rights violation.
    pub const ACCESS_RIGHTS: TermCode = TermCode::new(TermLayer::Rdmap, 1, 0x02);
    /// RDMAP remote protection error, wrap error.
    pub const TO_WRAP: TermCode = TermCode::new(TermLayer::Rdmap, 1, 0x04);
    /// RDMAP remote operation error, cannot invalidate.
    pub const CANNOT_INVALIDATE: TermCode = TermCode::new(TermLayer::Rdmap, 2, 0x09);
    /// RDMAP catastrophic error, unspecified.
    pub const CATASTROPHIC: TermCode = TermCode::new(TermLayer::Rdmap, 0, 0xff);
    /// DDP local catastrophic error (RFC 5041 section 7.2, error type 0): the DDP layer's
    /// error that names no field, such as a header cut short.
    pub const DDP_CATASTROPHIC: TermCode = TermCode::new(TermLayer::Ddp, 0, 0x00);
    /// DDP tagged buffer error, invalid STag (RFC 5041 section 7.2).
    pub const DDP_INVALID_STAG: TermCode = TermCode::new(TermLayer::Ddp, 1, 0x00);
    /// DDP tagged buffer error, base or bounds violation.
    pub const DDP_BASE_BOUNDS: TermCode = TermCode::new(TermLayer::Ddp, 1, 0x01);
    /// DDP untagged buffer error, no buffer available (invalid MSN).
    pub const DDP_NO_BUFFER: TermCode = TermCode::new(TermLayer::Ddp, 2, 0x02);
    /// DDP untagged buffer error, invalid MSN range.
    pub const DDP_MSN_RANGE: TermCode = TermCode::new(TermLayer::Ddp, 2, 0x03);
    /// DDP untagged buffer error, invalid MO.
    pub const DDP_INVALID_MO: TermCode = TermCode::new(TermLayer::Ddp, 2, 0x04);
    /// DDP untagged buffer error, message too long for the buffer.
    pub const DDP_TOO_LONG: TermCode = TermCode::new(TermLayer::Ddp, 2, 0x05);
}

/// Length of the fixed Terminate control word.
pub const TERMINATE_LEN: usize = 4;
const HDRCT_M: u8 = 0x80;
const HDRCT_D: u8 = 0x40;
const HDRCT_R: u8 = 0x20;

/// A Terminate message (RFC 5040 section 4.8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Terminate {
    /// Layer, type, code.
    pub code: TermCode,
    /// M: the terminated header is an MPA FPDU header.
    pub mpa_header: bool,
    /// The DDP segment length and header of the offending segment (D flag).
    pub ddp: Option<(u16, Vec<u8>)>,
    /// The RDMAP header of the offending message (R flag, 28 bytes).
    pub rdmap: Option<Vec<u8>>,
}

impl Terminate {
    /// A Terminate with no terminated headers.
    pub fn new(code: TermCode) -> Terminate {
        Terminate {
            code,
            mpa_header: false,
            ddp: None,
            rdmap: None,
        }
    }

    /// Parses a Terminate payload. The terminated headers are kept as raw bytes.
    pub fn parse(b: &[u8]) -> Result<Terminate, WireError> {
        if b.len() < TERMINATE_LEN {
            return Err(WireError::Truncated {
                what: "Terminate",
                got: b.len(),
                need: TERMINATE_LEN,
            });
        }
        let code = TermCode {
            layer: TermLayer::from(b[0] >> 4),
            etype: b[0] & 0x0f,
            code: b[1],
        };
        let hdrct = b[2];
        let mut at = TERMINATE_LEN;
        let ddp = if hdrct & HDRCT_D != 0 {
            if b.len() < at + 2 {
                return Err(WireError::Truncated {
                    what: "Terminate DDP segment length",
                    got: b.len(),
                    need: at + 2,
                });
            }
            let seg_len = be16(b, at);
            at += 2;
            // The terminated header's own T bit says how long it is.
            let hlen = match b.get(at) {
                Some(&c0) => super::ddp::DdpHeader::len_for(c0),
                None => super::ddp::UNTAGGED_LEN,
            };
            let hdr = b.get(at..at + hlen).ok_or(WireError::Truncated {
                what: "Terminate DDP header",
                got: b.len(),
                need: at + hlen,
            })?;
            at += hlen;
            Some((seg_len, hdr.to_vec()))
        } else {
            None
        };
        let rdmap = if hdrct & HDRCT_R != 0 {
            let hdr = b
                .get(at..at + READ_REQUEST_LEN)
                .ok_or(WireError::Truncated {
                    what: "Terminate RDMAP header",
                    got: b.len(),
                    need: at + READ_REQUEST_LEN,
                })?;
            Some(hdr.to_vec())
        } else {
            None
        };
        Ok(Terminate {
            code,
            mpa_header: hdrct & HDRCT_M != 0,
            ddp,
            rdmap,
        })
    }

    /// Appends the Terminate payload to `out`.
    pub fn emit(&self, out: &mut Vec<u8>) {
        out.push((u8::from(self.code.layer) << 4) | (self.code.etype & 0x0f));
        out.push(self.code.code);
        let mut hdrct = 0;
        if self.mpa_header {
            hdrct |= HDRCT_M;
        }
        if self.ddp.is_some() {
            hdrct |= HDRCT_D;
        }
        if self.rdmap.is_some() {
            hdrct |= HDRCT_R;
        }
        out.push(hdrct);
        out.push(0);
        if let Some((len, hdr)) = &self.ddp {
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(hdr);
        }
        if let Some(hdr) = &self.rdmap {
            out.extend_from_slice(hdr);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_opcodes_stay_representable() {
        assert_eq!(Opcode::from(0x0c), Opcode::Unknown(0x0c));
        assert_eq!(u8::from(Opcode::Unknown(0x0c)), 0x0c);
        assert_eq!(Opcode::from(4), Opcode::SendInvalidate);
    }

    #[test]
    fn read_request_round_trips() {
        let r = ReadRequest {
            sink_stag: 1,
            sink_to: 2,
            size: 3,
            src_stag: 4,
            src_to: 5,
        };
        let mut out = vec![];
        r.emit(&mut out);
        assert_eq!(ReadRequest::parse(&out).unwrap(), r);
        assert!(ReadRequest::parse(&out[..27]).is_err());
    }

    /// A Read Request of the wrong length is RDMAP's error (RFC 5040 section 7.1), not an
    /// MPA startup frame's.
    #[test]
    fn rejects_a_read_request_of_the_wrong_length_at_the_rdmap_layer() {
        for len in [0, 27, 29] {
            let e = ReadRequest::parse(&vec![0; len]).unwrap_err();
            assert_eq!(e, WireError::ReadRequestLength(len));
            assert_eq!(e.terminate(), TermCode::new(TermLayer::Rdmap, 2, 0xff));
        }
    }

    #[test]
    fn terminate_round_trips_with_headers() {
        let t = Terminate {
            code: TermCode::DDP_TOO_LONG,
            mpa_header: false,
            ddp: Some((100, vec![0x41; 18])),
            rdmap: None,
        };
        let mut out = vec![];
        t.emit(&mut out);
        assert_eq!(Terminate::parse(&out).unwrap(), t);
        for cut in 0..out.len() {
            assert!(Terminate::parse(&out[..cut]).is_err());
        }
        assert_eq!(
            Terminate::parse(&[0x9f, 1, 0, 0]).unwrap().code.layer,
            TermLayer::Unknown(9)
        );
    }
}

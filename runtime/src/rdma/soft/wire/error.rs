//! Parse errors of the wire formats and their Terminate mapping.

use super::rdmap::{TermCode, TermLayer};

/// What was wrong with bytes from the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// Fewer bytes than an MPA startup frame, its private data or a received Terminate needs.
    #[error("{what}: {got} bytes, need {need}")]
    Truncated {
        /// The header.
        what: &'static str,
        /// Bytes available.
        got: usize,
        /// Bytes needed.
        need: usize,
    },
    /// A ULPDU shorter than the DDP header its first byte announces (RFC 5041 section 4: 14
    /// bytes tagged, 18 untagged).
    #[error("a DDP segment of {got} bytes, shorter than its {need}-byte header")]
    DdpHeaderTooShort {
        /// Bytes in the ULPDU.
        got: usize,
        /// The header's length.
        need: usize,
    },
    /// An RDMA Read Request whose payload is not the 28-byte header (RFC 5040 section 4.4).
    #[error("an RDMA Read Request of {0} bytes, not 28")]
    ReadRequestLength(usize),
    /// An MPA Request/Reply frame without the expected key.
    #[error("MPA startup frame without the key \"{expected}\"")]
    BadKey {
        /// The key expected.
        expected: &'static str,
    },
    /// An MPA private data length above 512 (RFC 5044 section 7.1).
    #[error("MPA private data length {0} exceeds 512")]
    PrivateDataTooLong(u16),
    /// The MPA CRC did not match (RFC 5044 section 8).
    #[error("MPA CRC mismatch: received {received:#010x}, computed {computed:#010x}")]
    BadCrc {
        /// The CRC on the wire.
        received: u32,
        /// The CRC computed.
        computed: u32,
    },
    /// A marker whose FPDU pointer does not point at the FPDU start (RFC 5044 section 5).
    #[error("MPA marker at stream offset {at} is invalid")]
    BadMarker {
        /// Stream offset of the marker.
        at: u64,
    },
    /// An FPDU whose ULPDU length is impossible (shorter than a DDP header, above the MULPDU).
    #[error("MPA ULPDU length {0} is invalid")]
    BadUlpduLength(u16),
    /// A DDP version this connection did not negotiate.
    #[error("DDP version {0} not negotiated")]
    DdpVersion(u8),
    /// An RDMAP version this connection did not negotiate.
    #[error("RDMAP version {0} not negotiated")]
    RdmapVersion(u8),
    /// An RDMAP opcode that is unknown or not valid with this DDP buffer model.
    #[error("RDMAP opcode {0:#x} invalid here")]
    Opcode(u8),
    /// An untagged DDP segment for a queue number RDMAP does not use.
    #[error("DDP queue number {0} is invalid")]
    QueueNumber(u32),
}

impl WireError {
    /// The Terminate layer, error type and code for this error (RFC 5040 section 7.1, RFC 5041
    /// section 7.2, RFC 5044 section 8): the one place the mapping is decided.
    pub fn terminate(self) -> TermCode {
        use TermLayer::*;
        match self {
            // RFC 5044 section 8: LLP errors, type 0 (MPA).
            WireError::BadCrc { .. } => TermCode::new(Llp, 0, 0x02),
            WireError::BadMarker { .. } => TermCode::new(Llp, 0, 0x03),
            WireError::BadUlpduLength(_) => TermCode::new(Llp, 0, 0x03),
            WireError::Truncated { .. } | WireError::BadKey { .. } => TermCode::new(Llp, 0, 0x04),
            WireError::PrivateDataTooLong(_) => TermCode::new(Llp, 0, 0x04),
            // The FPDU was whole and, under CRC, intact: what it carries is wrong, which is
            // DDP's to report (RFC 5041 section 7.1). Section 7.2 has no code for a header cut
            // short: each tagged (type 1) and untagged (type 2) code names a field that failed
            // its check (STag, bounds, QN, MSN, MO, version), and a header this short has not
            // got those fields. Type 0, "Local Catastrophic", code 0x00, is DDP's one error
            // that names no field.
            WireError::DdpHeaderTooShort { .. } => TermCode::DDP_CATASTROPHIC,
            // RFC 5040 section 7.1: a remote operation error, the message itself malformed;
            // "Unspecified Error" (0xff), as no code names a Read Request's length.
            WireError::ReadRequestLength(_) => TermCode::new(Rdmap, 2, 0xff),
            // RFC 5041 section 7.2: untagged buffer error, invalid DDP version / QN.
            WireError::DdpVersion(_) => TermCode::new(Ddp, 2, 0x06),
            WireError::QueueNumber(_) => TermCode::new(Ddp, 2, 0x01),
            // RFC 5040 section 7.1: remote operation error, invalid RDMAP version / opcode.
            WireError::RdmapVersion(_) => TermCode::new(Rdmap, 2, 0x05),
            WireError::Opcode(_) => TermCode::new(Rdmap, 2, 0x06),
        }
    }
}

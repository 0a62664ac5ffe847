//! Framing of the contract's private data inside rdma_cm messages.
//!
//! On InfiniBand and RoCE the CM messages carry fixed-size private data fields (IBTA spec,
//! section 12.6: REQ 92 octets, REP 196, REJ 148), and rdma_cm's `RDMA_PS_TCP` header takes 36
//! octets of the REQ, so a peer always receives the full, zero-padded field. To give the
//! contract exact lengths, this provider sends one length octet followed by the data there.
//!
//! On iWARP (Linux siw, iWARP RNICs) the private data travels in the MPA Request and Reply,
//! whose PD_Length field gives its exact length (RFC 5044 section 7.1), and the peer may be
//! any iWARP implementation (this crate's software provider among them): the data goes as is.

use crate::rdma::{Error, Result};

/// The most private data a connect request carries (56 octets after rdma_cm's header, minus
/// the length octet).
pub const MAX_CONNECT: usize = 55;
/// The most private data an accept (CM REP) carries.
pub const MAX_ACCEPT: usize = 195;
/// The most private data a reject (CM REJ) carries.
pub const MAX_REJECT: usize = 147;

/// IB CM REJ status for a rejection by the consumer (IBTA spec, table 112:
/// "Consumer Reject"), as reported by `RDMA_CM_EVENT_REJECTED`.
const IB_CM_REJ_CONSUMER_DEFINED: i32 = 28;

/// How private data travels on a device's transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// InfiniBand and RoCE: a length octet, then the data, in a zero-padded field.
    LengthOctet,
    /// iWARP: the data as is (MPA gives its length).
    Exact,
}

/// Refuses `data` longer than `max` octets (the same limits on every transport).
pub fn check(data: &[u8], max: usize) -> Result<()> {
    if data.len() > max {
        return Err(Error::PrivateDataTooLong {
            len: data.len(),
            max,
        });
    }
    Ok(())
}

impl Framing {
    /// The framing of a device: exact on iWARP, a length octet otherwise.
    pub fn for_transport(iwarp: bool) -> Framing {
        if iwarp {
            Framing::Exact
        } else {
            Framing::LengthOctet
        }
    }

    /// Whether a REJECTED event with `status` is the peer's answer to the request (its
    /// private data then says why), rather than nobody listening or the network. On IB and
    /// RoCE that is the CM's consumer-defined reject reason (28); on iWARP, Linux's iw_cm
    /// reports an MPA reply with the reject bit as `-ECONNRESET` (a refused TCP connection,
    /// nobody listening, is `-ECONNREFUSED`).
    pub fn consumer_reject(self, status: i32) -> bool {
        match self {
            Framing::LengthOctet => status == IB_CM_REJ_CONSUMER_DEFINED,
            Framing::Exact => status == -libc::ECONNRESET,
        }
    }

    /// Frames `data` (at most `max` octets).
    pub fn encode(self, data: &[u8], max: usize) -> Result<Vec<u8>> {
        check(data, max)?;
        let mut framed = Vec::with_capacity(data.len() + 1);
        if self == Framing::LengthOctet {
            framed.push(data.len() as u8);
        }
        framed.extend_from_slice(data);
        Ok(framed)
    }

    /// The data inside a received field. With a length octet, a (possibly zero-padded) field
    /// that does not hold a valid one is returned whole (a peer that does not use the framing).
    pub fn decode(self, field: &[u8]) -> &[u8] {
        if self == Framing::Exact {
            return field;
        }
        match field.split_first() {
            Some((&len, rest)) if (len as usize) <= rest.len() => &rest[..len as usize],
            _ => field,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IB: Framing = Framing::LengthOctet;

    #[test]
    fn framing_survives_zero_padding() {
        let framed = IB.encode(b"hello", MAX_CONNECT).unwrap();
        let mut field = framed.clone();
        field.resize(56, 0);
        assert_eq!(IB.decode(&field), b"hello");
        assert_eq!(IB.decode(&IB.encode(b"", MAX_CONNECT).unwrap()), b"");
    }

    #[test]
    fn refuses_data_beyond_the_cm_limit() {
        for framing in [Framing::LengthOctet, Framing::Exact] {
            let err = framing.encode(&[0; 56], MAX_CONNECT).unwrap_err();
            assert!(matches!(
                err,
                Error::PrivateDataTooLong { len: 56, max: 55 }
            ));
            assert!(framing.encode(&[0; 195], MAX_ACCEPT).is_ok());
        }
    }

    #[test]
    fn unframed_fields_pass_through() {
        assert_eq!(IB.decode(&[200, 1, 2]), &[200, 1, 2]);
        assert_eq!(IB.decode(&[]), &[] as &[u8]);
    }

    /// iWARP peers (siw, the software provider) see exactly the data, and theirs is taken
    /// whole even when its first octet looks like a length.
    #[test]
    fn iwarp_private_data_goes_as_is() {
        let iwarp = Framing::for_transport(true);
        assert_eq!(iwarp.encode(b"hello", MAX_CONNECT).unwrap(), b"hello");
        assert_eq!(iwarp.decode(&[0, 0, 16, 0, 1]), &[0, 0, 16, 0, 1]);
        assert_eq!(Framing::for_transport(false), IB);
    }
}

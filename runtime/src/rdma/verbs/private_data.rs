//! Framing of the contract's private data inside rdma_cm messages.
//!
//! On InfiniBand and RoCE the CM messages carry fixed-size private data fields (IBTA spec,
//! section 12.6: REQ 92 octets, REP 196, REJ 148), and rdma_cm's `RDMA_PS_TCP` header takes 36
//! octets of the REQ, so a peer always receives the full, zero-padded field. To give the
//! contract exact lengths, this provider sends one length octet followed by the data.

use crate::rdma::{Error, Result};

/// The most private data a connect request carries (56 octets after rdma_cm's header, minus
/// the length octet).
pub const MAX_CONNECT: usize = 55;
/// The most private data an accept (CM REP) carries.
pub const MAX_ACCEPT: usize = 195;
/// The most private data a reject (CM REJ) carries.
pub const MAX_REJECT: usize = 147;

/// Frames `data` (at most `max` octets): a length octet, then the data.
pub fn encode(data: &[u8], max: usize) -> Result<Vec<u8>> {
    if data.len() > max {
        return Err(Error::PrivateDataTooLong {
            len: data.len(),
            max,
        });
    }
    let mut framed = Vec::with_capacity(data.len() + 1);
    framed.push(data.len() as u8);
    framed.extend_from_slice(data);
    Ok(framed)
}

/// The data inside a received (possibly zero-padded) field. A field that does not hold a valid
/// length octet is returned whole (a peer that does not use this framing).
pub fn decode(field: &[u8]) -> &[u8] {
    match field.split_first() {
        Some((&len, rest)) if (len as usize) <= rest.len() => &rest[..len as usize],
        _ => field,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_survives_zero_padding() {
        let framed = encode(b"hello", MAX_CONNECT).unwrap();
        let mut field = framed.clone();
        field.resize(56, 0);
        assert_eq!(decode(&field), b"hello");
        assert_eq!(decode(&encode(b"", MAX_CONNECT).unwrap()), b"");
    }

    #[test]
    fn refuses_data_beyond_the_cm_limit() {
        let err = encode(&[0; 56], MAX_CONNECT).unwrap_err();
        assert!(matches!(
            err,
            Error::PrivateDataTooLong { len: 56, max: 55 }
        ));
        assert!(encode(&[0; 195], MAX_ACCEPT).is_ok());
    }

    #[test]
    fn unframed_fields_pass_through() {
        assert_eq!(decode(&[200, 1, 2]), &[200, 1, 2]);
        assert_eq!(decode(&[]), &[] as &[u8]);
    }
}

//! The few file attributes the typed helpers read and write (`fattr4`, RFC 5661 section 3.3:
//! a bitmap, then the values of the attributes set in it, by increasing number).

use bytes::Bytes;
use rpcrdma::xdr::{Decode, Decoder};

use super::error::ClientError;
use crate::nfs4::{
    Bitmap4, Fattr4, NfsFtype4, FATTR4_FILEID, FATTR4_MODE, FATTR4_SIZE, FATTR4_TYPE,
};

/// The attributes [`Session::lookup`](super::Session::lookup) asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BasicAttrs {
    /// `type` (REQUIRED, RFC 5661 section 5.8.1).
    pub kind: NfsFtype4,
    /// `size` (REQUIRED, section 5.8.1).
    pub size: u64,
    /// `fileid` (RECOMMENDED, section 5.8.2), when the server has it.
    pub fileid: Option<u64>,
}

/// A bitmap with `attrs` set.
pub fn bitmap(attrs: &[u32]) -> Bitmap4 {
    let mut words = Vec::new();
    for &attr in attrs {
        let word = (attr / 32) as usize;
        if words.len() <= word {
            words.resize(word + 1, 0);
        }
        words[word] |= 1 << (attr % 32);
    }
    words
}

/// Attribute `attr` is set in `bitmap`.
pub fn is_set(bitmap: &[u32], attr: u32) -> bool {
    bitmap
        .get((attr / 32) as usize)
        .is_some_and(|word| word & (1 << (attr % 32)) != 0)
}

/// The attributes set in `bitmap`, in increasing order.
fn set_attrs(bitmap: &[u32]) -> impl Iterator<Item = u32> + '_ {
    bitmap.iter().enumerate().flat_map(|(i, &word)| {
        (0..32)
            .filter(move |bit| word & (1 << bit) != 0)
            .map(move |bit| i as u32 * 32 + bit)
    })
}

/// The bitmap of [`BasicAttrs`].
pub fn basic_request() -> Bitmap4 {
    bitmap(&[FATTR4_TYPE, FATTR4_SIZE, FATTR4_FILEID])
}

/// Reads [`BasicAttrs`] from a GETATTR result: only the attributes asked for may be set (the
/// values of others cannot be skipped without knowing their types), `type` and `size` must
/// be, and the values must fill `attr_vals` exactly.
pub fn decode_basic(fattr: &Fattr4) -> Result<BasicAttrs, ClientError> {
    if let Some(extra) =
        set_attrs(&fattr.attrmask).find(|a| ![FATTR4_TYPE, FATTR4_SIZE, FATTR4_FILEID].contains(a))
    {
        return Err(ClientError::protocol(format!(
            "GETATTR returned attribute {extra}, which was not asked for"
        )));
    }
    let bad = |e: rpcrdma::xdr::Error| ClientError::protocol(format!("GETATTR values: {e}"));
    let mut dec = Decoder::new(&fattr.attr_vals);
    let mut read = |attr: u32| -> Result<Option<u64>, ClientError> {
        if !is_set(&fattr.attrmask, attr) {
            return Ok(None);
        }
        let value = if attr == FATTR4_TYPE {
            NfsFtype4::decode(&mut dec).map(|t| t.value() as u64)
        } else {
            dec.get_u64()
        };
        value.map(Some).map_err(bad)
    };
    let kind = read(FATTR4_TYPE)?;
    let size = read(FATTR4_SIZE)?;
    let fileid = read(FATTR4_FILEID)?;
    dec.finish().map_err(bad)?;
    let missing = |name| ClientError::protocol(format!("GETATTR without the REQUIRED {name}"));
    let kind = kind
        .and_then(|v| NfsFtype4::from_value(v as i32))
        .ok_or_else(|| missing("type"))?;
    Ok(BasicAttrs {
        kind,
        size: size.ok_or_else(|| missing("size"))?,
        fileid,
    })
}

/// Attributes setting the mode (`mode`, RFC 5661 section 6.2), for a file OPEN creates.
pub fn mode(mode: u32) -> Fattr4 {
    Fattr4 {
        attrmask: bitmap(&[FATTR4_MODE]),
        attr_vals: Bytes::copy_from_slice(&mode.to_be_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fattr(attrs: &[u32], values: &[u8]) -> Fattr4 {
        Fattr4 {
            attrmask: bitmap(attrs),
            attr_vals: Bytes::copy_from_slice(values),
        }
    }

    #[test]
    fn bitmaps_span_words() {
        assert_eq!(bitmap(&[FATTR4_TYPE, FATTR4_MODE]), vec![1 << 1, 1 << 1]);
        assert!(is_set(&[0, 2], FATTR4_MODE));
        assert!(!is_set(&[2], FATTR4_MODE));
    }

    #[test]
    fn accepts_the_basic_attributes_in_order() {
        let mut values = vec![0, 0, 0, 1];
        values.extend_from_slice(&5u64.to_be_bytes());
        values.extend_from_slice(&77u64.to_be_bytes());
        let attrs = decode_basic(&fattr(&[FATTR4_TYPE, FATTR4_SIZE, FATTR4_FILEID], &values));
        assert_eq!(
            attrs.unwrap(),
            BasicAttrs {
                kind: NfsFtype4::Nf4reg,
                size: 5,
                fileid: Some(77)
            }
        );
    }

    #[test]
    fn rejects_extra_missing_short_or_long_values() {
        let mut values = vec![0, 0, 0, 2];
        values.extend_from_slice(&5u64.to_be_bytes());
        assert!(decode_basic(&fattr(&[FATTR4_TYPE, FATTR4_SIZE], &values)).is_ok());
        assert!(decode_basic(&fattr(&[FATTR4_TYPE, FATTR4_SIZE, FATTR4_MODE], &values)).is_err());
        assert!(decode_basic(&fattr(&[FATTR4_TYPE], &values[..4])).is_err());
        assert!(decode_basic(&fattr(&[FATTR4_TYPE, FATTR4_SIZE], &values[..8])).is_err());
        let mut longer = values.clone();
        longer.extend_from_slice(&[0; 4]);
        assert!(decode_basic(&fattr(&[FATTR4_TYPE, FATTR4_SIZE], &longer)).is_err());
        assert!(decode_basic(&fattr(
            &[FATTR4_TYPE, FATTR4_SIZE],
            &[0, 0, 0, 99, 0, 0, 0, 0, 0, 0, 0, 0]
        ))
        .is_err());
    }
}

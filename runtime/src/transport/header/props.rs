//! Transport properties (seed 003 section 4): a property is an id and an opaque value whose
//! contents are the XDR type the property's definition names; a set of them travels in
//! RDMA2_CONNPROP; a subset names some of a set's members by position.

use bytes::Bytes;

use super::v2::{Rpcrdma2Rvreqsup, RDMA2_PROPID_BRS, RDMA2_PROPID_RBSIZ};
use crate::xdr::{self, Decode, Decoder, Encode};

/// One `rpcrdma2_propval`: which property, and its value as XDR bytes (seed 003 section 4.1:
/// "An rdma_data field which is of zero length is interpreted as indicating the default
/// value").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Property {
    /// `rdma_which`.
    pub id: u32,
    /// `rdma_data`: the value encoded as the property's XDR type, or empty for its default.
    pub data: Bytes,
}

impl Property {
    /// A property whose value is `value` encoded as XDR.
    pub fn new<T: Encode>(id: u32, value: &T) -> xdr::Result<Property> {
        Ok(Property {
            id,
            data: xdr::to_bytes(value)?,
        })
    }

    /// Receive Buffer Size (seed 003 section 4.2.1): the sender's receive buffers are at least
    /// `size` bytes.
    pub fn receive_buffer_size(size: u32) -> Property {
        Property {
            id: RDMA2_PROPID_RBSIZ,
            data: Bytes::copy_from_slice(&size.to_be_bytes()),
        }
    }

    /// Reverse Request Support (seed 003 section 4.2.2).
    pub fn reverse_request_support(level: Rpcrdma2Rvreqsup) -> Property {
        Property {
            id: RDMA2_PROPID_BRS,
            data: Bytes::copy_from_slice(&(level.value() as u32).to_be_bytes()),
        }
    }

    /// The value decoded as `T`; `None` for an empty value (the default). Seed 003 section
    /// 4.1: a value that does not conform to the property's type is an error (the receiver
    /// answers RDMA2_ERR_BAD_XDR), bytes left over included.
    pub fn value<T: Decode>(&self) -> xdr::Result<Option<T>> {
        if self.data.is_empty() {
            return Ok(None);
        }
        let mut dec = Decoder::new(&self.data);
        let value = T::decode(&mut dec)?;
        dec.finish()?;
        Ok(Some(value))
    }
}

/// The base properties a peer advertised (seed 003 section 4.2), defaults where it did not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseProperties {
    /// RDMA2_PROPID_RBSIZ: the peer's receive buffers (default 4096, seed 003 Table 1).
    pub receive_size: u32,
    /// RDMA2_PROPID_BRS: what reverse-direction requests the peer accepts (default
    /// RDMA2_RVREQSUP_INLINE).
    pub reverse_requests: Rpcrdma2Rvreqsup,
}

impl Default for BaseProperties {
    fn default() -> Self {
        BaseProperties {
            receive_size: 4096,
            reverse_requests: Rpcrdma2Rvreqsup::Rdma2RvreqsupInline,
        }
    }
}

impl BaseProperties {
    /// The base properties in `props`, defaults for those absent; properties this module does
    /// not know are skipped (seed 003 section 4.1: "no error is to be reported if rdma_which
    /// is unknown to the receiver"). A base property whose value does not decode as its type
    /// is an error naming it (the receiver answers RDMA2_ERR_BAD_XDR).
    pub fn from_props(props: &[Property]) -> Result<BaseProperties, String> {
        let mut base = BaseProperties::default();
        for p in props {
            match p.id {
                RDMA2_PROPID_RBSIZ => {
                    if let Some(size) = p.value::<u32>().map_err(|e| bad("RBSIZ", e))? {
                        base.receive_size = size;
                    }
                }
                RDMA2_PROPID_BRS => {
                    if let Some(level) = p.value::<Rpcrdma2Rvreqsup>().map_err(|e| bad("BRS", e))? {
                        base.reverse_requests = level;
                    }
                }
                _ => {}
            }
        }
        Ok(base)
    }
}

fn bad(name: &str, e: xdr::Error) -> String {
    format!("transport property {name}: {e}")
}

/// An `rpcrdma2_propsubset`: a bit mask naming members of a property set by position (seed
/// 003 section 4.1: "bit number N mod 32 in word N div 32"; "Words beyond the last one
/// specified are treated as containing zero").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PropSubset(pub Vec<u32>);

impl PropSubset {
    /// The subset of the members at `positions`.
    pub fn from_positions(positions: impl IntoIterator<Item = usize>) -> PropSubset {
        let mut words = Vec::new();
        for n in positions {
            if words.len() <= n / 32 {
                words.resize(n / 32 + 1, 0);
            }
            words[n / 32] |= 1 << (n % 32);
        }
        PropSubset(words)
    }

    /// Whether the member at `position` is in the subset.
    pub fn contains(&self, position: usize) -> bool {
        self.0
            .get(position / 32)
            .is_some_and(|w| w & (1 << (position % 32)) != 0)
    }

    /// The members of `set` in the subset, in order; bits past the set's end name nothing.
    pub fn select<'a>(&'a self, set: &'a [Property]) -> impl Iterator<Item = &'a Property> {
        set.iter()
            .enumerate()
            .filter(|(n, _)| self.contains(*n))
            .map(|(_, p)| p)
    }
}

impl Encode for PropSubset {
    fn encode(&self, enc: &mut xdr::Encoder) -> xdr::Result<()> {
        self.0.encode(enc)
    }
}

impl Decode for PropSubset {
    fn decode(dec: &mut Decoder<'_>) -> xdr::Result<Self> {
        Ok(PropSubset(Vec::<u32>::decode(dec)?))
    }
}

//! The zero-copy XDR codec core (RFC 4506).
//!
//! * [`Decoder`] reads from a borrowed [`Bytes`] buffer and hands out opaque data and strings
//!   as slices of that buffer: decoding never copies payload bytes, and touches no reference
//!   count until it hands one out. (Over a plain `&[u8]`, [`Decoder::from_slice`] copies them.)
//! * [`Encoder`] writes small items into a `BytesMut` and keeps large opaque items as their own
//!   [`Bytes`] in a gather list ([`Encoded`]), so a payload is never copied on its way out.
//!   One encoder serves a connection: [`Encoder::take`] hands out each message, or
//!   [`Encoder::as_contiguous`] + [`Encoder::clear`] let a header be copied into registered
//!   memory with no allocation or reference counting per message.
//! * [`Limits`] bounds everything a peer controls: message size, element counts, nesting depth.
//!   The defaults are chosen for canonical encodings (one value, one encoding) and a 2 MiB
//!   thread stack: padding that is not zero is refused (RFC 4506 section 4.10; rpcgen's
//!   library and the Linux kernel write zeros, Stellar's codecs refuse anything else), and
//!   recursive values nest up to 500 levels, deeper than real Stellar ledger values go and
//!   within a quarter of a 2 MiB stack in a debug build. [`Limits`] says why in full.
//! * [`Error`] carries the byte offset where decoding or encoding failed.
//!
//! Generated code (from `xdrgen`) and hand-written types (`#[derive(Xdr)]`) implement
//! [`Encode`] and [`Decode`] by calling the methods of [`Encoder`] and [`Decoder`].
//!
//! ```
//! use bytes::Bytes;
//! use rpcrdma::xdr::{self, XdrString};
//!
//! let wire = xdr::to_bytes(&(7u32, XdrString::from("hello"))).unwrap();
//! assert_eq!(wire.len(), 4 + 4 + 8);
//! let (n, s): (u32, XdrString) = xdr::from_bytes(wire).unwrap();
//! assert_eq!((n, s.as_bytes()), (7, &b"hello"[..]));
//! ```

mod align;
mod block;
pub mod bounds;
mod ddp;
mod ddp_marks;
mod decoder;
mod encoder;
mod error;
mod impls;
mod limits;
mod procedure;
mod string;

pub use align::{AlignPadding, MAX_ALIGN};
pub use block::{Block, BlockNumber, BlockRef};
pub use bounds::EncodedSize;
pub use bytes::Bytes;
pub use ddp::{
    ChunkPolicy, ChunkTarget, ChunkUsage, DdpItem, DdpKind, DdpMark, Direction, MovedItem,
    Placement, ReceivedChunks, ThresholdPolicy,
};
pub use ddp_marks::DdpEligible;
pub use decoder::Decoder;
pub use encoder::{Encoded, Encoder, DEFAULT_GATHER_THRESHOLD};
pub use error::{Error, ErrorKind, Result};
pub use impls::{
    decode_array, decode_array_in_place, decode_fixed_array, decode_list, decode_list_in_place,
    decode_nonempty_list, decode_nonempty_list_in_place, encode_array, encode_fixed_array,
    encode_list, encode_nonempty_list,
};
pub use limits::Limits;
pub use procedure::Procedure;
pub use string::XdrString;

/// The XDR basic block: every item is padded to a multiple of four bytes (RFC 4506 section 3).
pub const BLOCK: usize = 4;

/// The number of zero bytes that pad `len` bytes of opaque data up to a multiple of [`BLOCK`].
#[inline]
pub const fn padding(len: usize) -> usize {
    (BLOCK - len % BLOCK) % BLOCK
}

/// A type that can be written in XDR.
pub trait Encode {
    /// Appends the XDR encoding of `self` to `enc`.
    ///
    /// Fails when a value breaks a declared maximum (a variable-length item longer than its
    /// bound, a fixed-length opaque of the wrong length): encoding never emits a wrong message.
    fn encode(&self, enc: &mut Encoder) -> Result<()>;

    /// Appends a TRUE present flag and then `self`: present optional data, or one element of
    /// a linked list (RFC 4506 section 4.19). Generated types of a fixed size write the flag
    /// and the value as one block.
    #[inline]
    fn encode_present(&self, enc: &mut Encoder) -> Result<()> {
        enc.put_bool(true);
        self.encode(enc)
    }
}

/// A type that can be read from XDR.
pub trait Decode: Sized {
    /// The smallest number of bytes any value of this type occupies on the wire.
    ///
    /// Decoders use it to refuse element counts that the remaining input cannot possibly hold
    /// before allocating for them. Every XDR item takes at least one 4-byte unit, so 4 is the
    /// default; types that can encode to nothing (zero-length fixed arrays) say 0.
    const MIN_ENCODED_LEN: usize = BLOCK;

    /// Reads one value from `dec`.
    fn decode(dec: &mut Decoder) -> Result<Self>;

    /// Reads one value from `dec` into `self`, reusing what `self` already owns: vectors keep
    /// their capacity and their elements are decoded in place, so a receive loop that decodes
    /// every message into the same value stops allocating once it has seen its largest message
    /// (the counterpart of serde's `deserialize_in_place` and prost's `merge`).
    ///
    /// The result equals `Self::decode`'s. On error, `self` holds some valid value of the type
    /// (partly updated): keep it only for its allocations.
    #[inline]
    fn decode_in_place(&mut self, dec: &mut Decoder) -> Result<()> {
        *self = Self::decode(dec)?;
        Ok(())
    }

    /// Reads a present flag (RFC 4506 section 4.19) and, when it is TRUE, the value after
    /// it. Generated types of a fixed size read the flag and the value as one block.
    #[inline]
    fn decode_present(dec: &mut Decoder) -> Result<Option<Self>> {
        if dec.get_present()? {
            Self::decode(dec).map(Some)
        } else {
            Ok(None)
        }
    }

    /// [`decode_present`](Self::decode_present) into `self` (see
    /// [`decode_in_place`](Self::decode_in_place)): true when the flag was TRUE and `self`
    /// now holds the value after it; false, with `self` untouched, when the flag was FALSE.
    #[inline]
    fn decode_present_in_place(&mut self, dec: &mut Decoder) -> Result<bool> {
        if dec.get_present()? {
            self.decode_in_place(dec)?;
            Ok(true)
        } else {
            Ok(false)
        }
    }
}

/// Encodes `value` into one contiguous buffer (copying any gathered parts together once).
pub fn to_bytes<T: Encode + ?Sized>(value: &T) -> Result<Bytes> {
    let mut enc = Encoder::new();
    value.encode(&mut enc)?;
    Ok(enc.finish().into_bytes())
}

/// Decodes one `T` from `buf` with default [`Limits`], rejecting trailing bytes.
pub fn from_bytes<T: Decode>(buf: Bytes) -> Result<T> {
    from_bytes_with_limits(buf, Limits::default())
}

/// Decodes one `T` from `buf` into `value` (see [`Decode::decode_in_place`]) with default
/// [`Limits`], rejecting trailing bytes.
pub fn from_bytes_in_place<T: Decode>(buf: Bytes, value: &mut T) -> Result<()> {
    let mut dec = Decoder::new(&buf);
    value.decode_in_place(&mut dec)?;
    dec.finish()
}

/// Decodes one `T` from `buf` under `limits`, rejecting trailing bytes.
pub fn from_bytes_with_limits<T: Decode>(buf: Bytes, limits: Limits) -> Result<T> {
    let mut dec = Decoder::with_limits(&buf, limits)?;
    let value = T::decode(&mut dec)?;
    dec.finish()?;
    Ok(value)
}

//! Wire formats of MPA (RFC 5044, RFC 6581), DDP (RFC 5041) and RDMAP (RFC 5040).
//!
//! One module per header, smoltcp style: a `Repr` (the parsed form) with `parse` from a byte
//! slice that checks every length before reading, and `emit` into a caller buffer. Parsing never
//! panics; errors are [`WireError`]s, which [`WireError::terminate`] maps onto the Terminate
//! layer, type and code the peer is told.

pub mod crc;
pub mod ddp;
pub mod mpa;
pub mod rdmap;

mod error;

pub use error::WireError;

/// Reads a big-endian `u16` at `at`; the caller has checked the length.
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Reads a big-endian `u32` at `at`; the caller has checked the length.
pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Reads a big-endian `u64` at `at`; the caller has checked the length.
pub(crate) fn be64(b: &[u8], at: usize) -> u64 {
    let mut a = [0; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

/// Defines a code-point enum whose unknown values stay representable (`Unknown(raw)`).
macro_rules! code_points {
    ($(#[$m:meta])* pub enum $name:ident : $ty:ty { $($(#[$vm:meta])* $variant:ident = $value:expr,)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vm])* $variant,)*
            /// A value this implementation does not know.
            Unknown($ty),
        }

        impl From<$ty> for $name {
            fn from(raw: $ty) -> $name {
                match raw {
                    $($value => $name::$variant,)*
                    other => $name::Unknown(other),
                }
            }
        }

        impl From<$name> for $ty {
            fn from(v: $name) -> $ty {
                match v {
                    $($name::$variant => $value,)*
                    $name::Unknown(other) => other,
                }
            }
        }
    };
}
pub(crate) use code_points;

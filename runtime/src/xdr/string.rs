//! The XDR string type.

use bytes::Bytes;
use core::fmt;

/// An XDR `string` (RFC 4506 section 4.11): bytes, usually ASCII, not guaranteed UTF-8.
///
/// Backed by [`Bytes`], so a decoded string is a slice of the receive buffer.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct XdrString(Bytes);

impl XdrString {
    /// Wraps raw bytes.
    pub fn from_bytes(bytes: Bytes) -> Self {
        XdrString(bytes)
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The underlying [`Bytes`].
    pub fn as_bytes_ref(&self) -> &Bytes {
        &self.0
    }

    /// Unwraps into [`Bytes`].
    pub fn into_bytes(self) -> Bytes {
        self.0
    }

    /// The string as UTF-8, if it is.
    pub fn to_str(&self) -> Result<&str, core::str::Utf8Error> {
        core::str::from_utf8(&self.0)
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the string is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for XdrString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&String::from_utf8_lossy(&self.0), f)
    }
}

impl From<&'static str> for XdrString {
    fn from(s: &'static str) -> Self {
        XdrString(Bytes::from_static(s.as_bytes()))
    }
}

impl From<String> for XdrString {
    fn from(s: String) -> Self {
        XdrString(Bytes::from(s))
    }
}

impl From<Bytes> for XdrString {
    fn from(b: Bytes) -> Self {
        XdrString(b)
    }
}

//! Maximum encoded sizes, so a requester can decide before it sends whether a reply may
//! exceed the inline threshold and needs a Reply chunk (seed 002 sections 4.1 and 4.3).
//!
//! `None` means unbounded (a variable-length item without a declared maximum, or a
//! self-referential list). The `const fn` helpers let generated code compute bounds at
//! compile time from its members' bounds.

use bytes::Bytes;

use super::XdrString;

/// The largest encoding of a type, inline and with DDP-eligible items moved to chunks.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not say how large its XDR encoding can be",
    label = "needs `rpcrdma::xdr::EncodedSize`",
    note = "`#[derive(Xdr)]` and xdrgen implement it; for a hand-written codec, implement it with `MAX_LEN = None` if the size is unbounded"
)]
pub trait EncodedSize {
    /// The largest XDR encoding of any value, or `None` when unbounded.
    const MAX_LEN: Option<usize>;
    /// The largest inline stream when every DDP-eligible item has moved to a chunk (its count
    /// or present flag stays inline), or `None` when unbounded. Equals `MAX_LEN` for types
    /// without DDP-eligible items.
    const MAX_INLINE_LEN: Option<usize> = Self::MAX_LEN;
}

/// `a + b`, unbounded if either is.
pub const fn add(a: Option<usize>, b: Option<usize>) -> Option<usize> {
    match (a, b) {
        (Some(a), Some(b)) => a.checked_add(b),
        _ => None,
    }
}

/// `n * a`, unbounded if `a` is.
pub const fn mul(n: usize, a: Option<usize>) -> Option<usize> {
    match a {
        Some(a) => n.checked_mul(a),
        None => None,
    }
}

/// The larger of `a` and `b` (for union arms), unbounded if either is.
pub const fn max(a: Option<usize>, b: Option<usize>) -> Option<usize> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if a > b { a } else { b }),
        _ => None,
    }
}

/// Opaque data of at most `max` bytes: length word, data and padding.
pub const fn opaque(max: Option<u32>) -> Option<usize> {
    match max {
        Some(m) => Some(4 + (m as usize).div_ceil(4) * 4),
        None => None,
    }
}

/// A variable-length array of at most `max` elements of `element` bytes each.
pub const fn array(max: Option<u32>, element: Option<usize>) -> Option<usize> {
    match max {
        Some(m) => add(Some(4), mul(m as usize, element)),
        None => None,
    }
}

macro_rules! fixed {
    ($($t:ty = $n:expr),+) => {$(
        impl EncodedSize for $t {
            const MAX_LEN: Option<usize> = Some($n);
        }
    )+};
}

fixed!(
    u32 = 4,
    i32 = 4,
    u64 = 8,
    i64 = 8,
    f32 = 4,
    f64 = 8,
    bool = 4,
    () = 0
);

impl<T: EncodedSize> EncodedSize for Option<T> {
    const MAX_LEN: Option<usize> = add(Some(4), T::MAX_LEN);
    const MAX_INLINE_LEN: Option<usize> = add(Some(4), T::MAX_INLINE_LEN);
}

impl<T: EncodedSize> EncodedSize for Box<T> {
    const MAX_LEN: Option<usize> = T::MAX_LEN;
    const MAX_INLINE_LEN: Option<usize> = T::MAX_INLINE_LEN;
}

impl<T: EncodedSize, const N: usize> EncodedSize for [T; N] {
    const MAX_LEN: Option<usize> = mul(N, T::MAX_LEN);
    const MAX_INLINE_LEN: Option<usize> = mul(N, T::MAX_INLINE_LEN);
}

/// Unbounded: `opaque<>` without a maximum.
impl EncodedSize for Bytes {
    const MAX_LEN: Option<usize> = None;
}

/// Unbounded: `string<>` without a maximum.
impl EncodedSize for XdrString {
    const MAX_LEN: Option<usize> = None;
}

/// Unbounded: `T<>` without a maximum.
impl<T> EncodedSize for Vec<T> {
    const MAX_LEN: Option<usize> = None;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combines_bounds() {
        assert_eq!(opaque(Some(5)), Some(12));
        assert_eq!(array(Some(3), Some(8)), Some(28));
        assert_eq!(array(Some(3), None), None);
        assert_eq!(add(<Option<u64>>::MAX_LEN, <[u32; 4]>::MAX_LEN), Some(28));
        assert_eq!(max(Some(4), Some(12)), Some(12));
        assert_eq!(
            mul(usize::MAX, Some(2)),
            None,
            "overflow is unbounded, not wrong"
        );
        assert_eq!(<Vec<u32>>::MAX_LEN, None);
    }
}

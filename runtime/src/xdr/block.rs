//! Fixed-size blocks of numbers. Generated code encodes and decodes a run of consecutive
//! numeric fields (nested structs of numbers included) as one [`Block`]: one capacity or
//! bounds check for the run instead of one per field, as rpcgen's `XDR_INLINE` does.
//! Offsets are constants; one beyond the block is a compile-time error.

/// `N` bytes of XDR holding numbers at constant offsets.
///
/// ```
/// use rpcrdma::xdr::Block;
///
/// let mut b = Block::<12>::new();
/// b.put::<0>(7u32);
/// b.put::<4>(-1i64);
/// assert_eq!(b.get::<0, u32>(), 7);
/// assert_eq!(b.get::<4, i64>(), -1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block<const N: usize>(pub [u8; N]);

impl<const N: usize> Block<N> {
    /// A block of zeros.
    #[inline(always)]
    pub const fn new() -> Self {
        Block([0; N])
    }

    /// Writes `v`, big-endian, at byte `AT`.
    #[inline(always)]
    pub fn put<const AT: usize>(&mut self, v: impl BlockNumber) {
        v.write_at::<AT, N>(&mut self.0);
    }

    /// Reads the big-endian number at byte `AT`.
    #[inline(always)]
    pub fn get<const AT: usize, T: BlockNumber>(&self) -> T {
        T::read_at::<AT, N>(&self.0)
    }
}

impl<const N: usize> Default for Block<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// `N` bytes of received XDR holding numbers at constant offsets, read where they lie in the
/// input ([`Decoder::get_block`](super::Decoder::get_block)): each number is loaded straight
/// from the input, not from a copy of the block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRef<'a, const N: usize>(pub &'a [u8; N]);

impl<const N: usize> BlockRef<'_, N> {
    /// Reads the big-endian number at byte `AT`.
    #[inline(always)]
    pub fn get<const AT: usize, T: BlockNumber>(&self) -> T {
        T::read_at::<AT, N>(self.0)
    }
}

/// A fixed-size XDR number that can sit in a [`Block`].
pub trait BlockNumber: Copy {
    /// Reads the big-endian number at byte `AT` of block `b`.
    fn read_at<const AT: usize, const N: usize>(b: &[u8; N]) -> Self;
    /// Writes `self`, big-endian, at byte `AT` of block `b`.
    fn write_at<const AT: usize, const N: usize>(self, b: &mut [u8; N]);
}

macro_rules! block_number {
    ($($t:ty),+) => {$(
        impl BlockNumber for $t {
            #[inline(always)]
            fn read_at<const AT: usize, const N: usize>(b: &[u8; N]) -> Self {
                const { assert!(AT + size_of::<$t>() <= N, "number beyond the end of its block") };
                let mut bytes = [0u8; size_of::<$t>()];
                bytes.copy_from_slice(&b[AT..AT + size_of::<$t>()]);
                <$t>::from_be_bytes(bytes)
            }

            #[inline(always)]
            fn write_at<const AT: usize, const N: usize>(self, b: &mut [u8; N]) {
                const { assert!(AT + size_of::<$t>() <= N, "number beyond the end of its block") };
                b[AT..AT + size_of::<$t>()].copy_from_slice(&self.to_be_bytes());
            }
        }
    )+};
}

block_number!(u32, i32, u64, i64, f32, f64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip_at_their_offsets() {
        let mut b = Block::<16>::new();
        b.put::<0>(7u32);
        b.put::<4>(-2i32);
        b.put::<8>(0x0102_0304_0506_0708u64);
        assert_eq!(b.0[..8], [0, 0, 0, 7, 0xff, 0xff, 0xff, 0xfe]);
        assert_eq!(b.0[8..], [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(b.get::<0, u32>(), 7);
        assert_eq!(b.get::<4, i32>(), -2);
        assert_eq!(b.get::<8, u64>(), 0x0102_0304_0506_0708);
        b.put::<8>(1.5f64);
        assert_eq!(b.get::<8, f64>(), 1.5);
        b.put::<4>(0.25f32);
        assert_eq!(b.get::<4, f32>(), 0.25);
    }
}

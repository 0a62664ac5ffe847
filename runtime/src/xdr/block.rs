//! Numbers at constant offsets of a fixed-size block. Generated code encodes and decodes a
//! run of consecutive numeric fields as one block ([`Encoder::put_array`],
//! [`Decoder::get_array`]): one capacity or bounds check for the run instead of one per
//! field, as rpcgen's `XDR_INLINE` does. An offset beyond the block is a compile-time error.
//!
//! [`Encoder::put_array`]: super::Encoder::put_array
//! [`Decoder::get_array`]: super::Decoder::get_array

/// A fixed-size XDR number that can sit in a block.
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
        let mut b = [0u8; 16];
        7u32.write_at::<0, 16>(&mut b);
        (-2i32).write_at::<4, 16>(&mut b);
        0x0102_0304_0506_0708u64.write_at::<8, 16>(&mut b);
        assert_eq!(b[..8], [0, 0, 0, 7, 0xff, 0xff, 0xff, 0xfe]);
        assert_eq!(b[8..], [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(u32::read_at::<0, 16>(&b), 7);
        assert_eq!(i32::read_at::<4, 16>(&b), -2);
        assert_eq!(u64::read_at::<8, 16>(&b), 0x0102_0304_0506_0708);
        1.5f64.write_at::<8, 16>(&mut b);
        assert_eq!(f64::read_at::<8, 16>(&b), 1.5);
    }
}

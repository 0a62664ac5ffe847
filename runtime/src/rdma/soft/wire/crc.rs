//! The CRC32c (Castagnoli) of MPA FPDUs (RFC 5044 section 4.1): three paths by length.
//!
//! * Up to 256 bytes, the SSE 4.2 CRC32 instruction over the input eight bytes at a time. The
//!   crates' per-call work (aligning the input, setting up their parallel loops) is about 150
//!   instructions whatever the length, which is most of the cost for the FPDUs of small
//!   messages: the six CRCs of an RPC-over-RDMA NULL call's FPDUs (a Send, a confirmation
//!   probe and their answers) took ~940 instructions per side (callgrind).
//! * Up to 2 KiB, the `crc32c` crate (the CRC32 instruction in three parallel streams).
//! * Longer, the `crc-fast` crate, which runs carry-less multiplications beside the CRC32
//!   instruction (they use different execution ports): 2.3x `crc32c` on a 64 KB FPDU, 1.2x at
//!   2 KiB, 0.7x at 1 KiB (measured on a Xeon with AVX-512 and CLMUL, no VPCLMULQDQ). The
//!   CRC of a bulk transfer's FPDUs is paid on both sides, as much CPU as copying the data.

/// Inputs up to this long take the short path.
const SHORT: usize = 256;

/// Inputs from this long take `crc-fast`.
const LONG: usize = 2048;

/// The CRC32c of `data`.
pub fn of(data: &[u8]) -> u32 {
    append(0, data)
}

/// The CRC32c of the bytes whose CRC32c is `crc` followed by `data` (`crc32c::crc32c_append`).
pub fn append(crc: u32, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if data.len() <= SHORT && std::arch::is_x86_feature_detected!("sse4.2") {
        // SAFETY: the CPU has SSE 4.2, checked just above.
        return unsafe { short_sse42(crc, data) };
    }
    if data.len() >= LONG {
        return long(crc, data);
    }
    crc32c::crc32c_append(crc, data)
}

/// [`append`] with `crc-fast`, which keeps the CRC register itself (before the final
/// inversion): a CRC goes on from its complement.
fn long(crc: u32, data: &[u8]) -> u32 {
    let mut digest =
        crc_fast::Digest::new_with_init_state(crc_fast::CrcAlgorithm::Crc32Iscsi, u64::from(!crc));
    digest.update(data);
    digest.finalize() as u32
}

/// [`append`] with the SSE 4.2 CRC32 instruction, one word at a time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn short_sse42(crc: u32, data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let mut state = u64::from(!crc);
    let words = data.chunks_exact(8);
    let tail = words.remainder();
    for word in words {
        let mut bytes = [0; 8];
        bytes.copy_from_slice(word);
        state = _mm_crc32_u64(state, u64::from_le_bytes(bytes));
    }
    let mut state = state as u32;
    for &byte in tail {
        state = _mm_crc32_u8(state, byte);
    }
    !state
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes that are no simple pattern.
    fn data(len: u32) -> Vec<u8> {
        (0..len)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 7) as u8)
            .collect()
    }

    /// [`of`] and [`append`] agree with the crate on `data[start..start + len]`.
    fn agrees(data: &[u8], start: usize, len: usize) {
        let piece = &data[start..start + len];
        assert_eq!(of(piece), crc32c::crc32c(piece), "{start}+{len}");
        assert_eq!(
            append(0x1234_5678, piece),
            crc32c::crc32c_append(0x1234_5678, piece),
            "{start}+{len}"
        );
    }

    #[test]
    fn agrees_with_the_crate_at_every_short_length_and_alignment() {
        let data = data(600);
        for start in 0..8 {
            for len in 0..=SHORT + 40 {
                agrees(&data, start, len);
            }
        }
        // Split anywhere, the pieces add up to the whole.
        let whole = crc32c::crc32c(&data[..300]);
        for cut in 0..300 {
            assert_eq!(
                append(of(&data[..cut]), &data[cut..300]),
                whole,
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn the_long_path_agrees_with_the_crate_around_its_threshold_and_in_pieces() {
        let data = data(70_000);
        let lengths = (LONG - 16..LONG + 80).chain([4096, 4097, 65_000, 69_993]);
        for len in lengths {
            for start in [0, 1, 3, 7] {
                agrees(&data, start, len);
            }
        }
        // An FPDU's CRC as the provider takes it: a short header, then a long payload.
        let whole = crc32c::crc32c(&data[..65_018]);
        assert_eq!(append(of(&data[..18]), &data[18..65_018]), whole);
        assert_eq!(
            append(
                append(of(&data[..18]), &data[18..3000]),
                &data[3000..65_018]
            ),
            whole
        );
    }

    #[test]
    fn the_rfc_3720_check_values() {
        // RFC 3720 appendix B.4: 32 bytes of zeros, of ones, ascending, descending.
        assert_eq!(of(&[0; 32]), 0x8a91_36aa);
        assert_eq!(of(&[0xff; 32]), 0x62a8_ab43);
        let ascending: Vec<u8> = (0..32).collect();
        assert_eq!(of(&ascending), 0x46dd_794e);
        let descending: Vec<u8> = (0..32).rev().collect();
        assert_eq!(of(&descending), 0x113f_db5c);
    }
}

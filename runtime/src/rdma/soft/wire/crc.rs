//! The CRC32c (Castagnoli) of MPA FPDUs (RFC 5044 section 4.1): the `crc32c` crate, with a
//! path of its own for short inputs.
//!
//! The crate's per-call work (aligning the input, setting up its three-way parallel loops) is
//! about 150 instructions whatever the length, which is most of the cost for the FPDUs of
//! small messages: the six CRCs of an RPC-over-RDMA NULL call's FPDUs (a Send, a confirmation
//! probe and their answers) took ~940 instructions per side (callgrind). Up to 256 bytes
//! the same CPU instruction runs over the input eight bytes at a time instead; longer inputs,
//! where the crate's parallel loops pay off, go to the crate.

/// Inputs up to this long take the short path.
const SHORT: usize = 256;

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
    crc32c::crc32c_append(crc, data)
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

    #[test]
    fn agrees_with_the_crate_at_every_short_length_and_alignment() {
        let data: Vec<u8> = (0..600u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 7) as u8)
            .collect();
        for start in 0..8 {
            for len in 0..=SHORT + 40 {
                let piece = &data[start..start + len];
                assert_eq!(of(piece), crc32c::crc32c(piece), "{start}+{len}");
                assert_eq!(
                    append(0x1234_5678, piece),
                    crc32c::crc32c_append(0x1234_5678, piece),
                    "{start}+{len}"
                );
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

//! Alignment padding of opaque data, as RDMA_MSGP messages carry it (seed 000 section 3.5).
//!
//! A sender pads a counted opaque item (or string) whose length is at or above `rdma_thresh`
//! with zero bytes between its length word and its data, so that the data starts at a
//! multiple of `rdma_align` in the receiver's buffer: "XXXXXXXLLLLpppDDDDDDDDDDDDDD". The
//! receiver's XDR decode "will skip over the appropriate padding as indicated by rdma_align and
//! the current XDR stream position". Offsets count from the first byte of the Send, the
//! transport header included, because that is where the receive buffer starts.

/// `rdma_align` and `rdma_thresh` of an RDMA_MSGP header (seed 000 section 4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AlignPadding {
    /// The alignment data starts at, in bytes; 0 for none. A multiple of four, so that every
    /// XDR item after the padding stays on a four-byte boundary (seed 000 does not say; a
    /// Read chunk Position must be a multiple of four, seed 004 section 4.4.4.1).
    pub align: u32,
    /// The smallest opaque length that is padded ("the opaque data size at or above which
    /// padding is applied", seed 000 section 3.5).
    pub thresh: u32,
}

/// The largest `rdma_align` accepted from a peer: padding is at most `align - 1` bytes of a
/// receive buffer, and no receive buffer is larger.
pub const MAX_ALIGN: u32 = 1 << 16;

impl AlignPadding {
    /// Padding to `align` for items of `thresh` bytes or more.
    pub fn new(align: u32, thresh: u32) -> AlignPadding {
        AlignPadding { align, thresh }
    }

    /// True when `align` can be honoured: 0, or a multiple of four up to [`MAX_ALIGN`].
    pub fn is_valid(&self) -> bool {
        self.align % 4 == 0 && self.align <= MAX_ALIGN
    }

    /// True when an opaque item of `len` bytes gets padding before its data. Seed 000 section
    /// 3.5 says "at or above" where it defines the threshold and "exceeds" where it describes
    /// the decode; the definition is taken (specs/ERRATA.md R04-7). An empty item has no data
    /// to align.
    pub fn applies(&self, len: usize) -> bool {
        self.align > 4 && len > 0 && len >= self.thresh as usize
    }

    /// The zero bytes to put before data that would otherwise start at offset `at` of the
    /// receive buffer, so that it starts at a multiple of `align`.
    pub fn before(&self, at: usize) -> usize {
        match self.align as usize {
            0 => 0,
            align => (align - at % align) % align,
        }
    }
}

/// Zero bytes to take padding from without allocating.
pub(crate) static ZEROS: [u8; MAX_ALIGN as usize] = [0; MAX_ALIGN as usize];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pads_to_the_next_multiple_of_align_at_or_above_the_threshold() {
        let p = AlignPadding::new(512, 1024);
        assert!(!p.applies(1023));
        assert!(p.applies(1024));
        assert_eq!(p.before(100), 412);
        assert_eq!(p.before(512), 0);
        assert_eq!(p.before(513), 511);
        // Alignments 0 and 4 never pad: every XDR item already starts on four bytes.
        assert!(!AlignPadding::new(0, 0).applies(4096));
        assert!(!AlignPadding::new(4, 0).applies(4096));
        assert!(!AlignPadding::new(512, 0).applies(0));
    }

    #[test]
    fn only_multiples_of_four_up_to_the_maximum_are_valid() {
        assert!(AlignPadding::new(0, 0).is_valid());
        assert!(AlignPadding::new(4096, 0).is_valid());
        assert!(!AlignPadding::new(6, 0).is_valid());
        assert!(!AlignPadding::new(MAX_ALIGN + 4, 0).is_valid());
    }
}

//! The layout of each target's raw input, shared by the targets (which split it) and the
//! seed generator (which composes it from real messages).
//!
//! Most targets read one leading byte of options and hand the rest to the code under test
//! ([`Flagged`]); the NFSv3 target also carries the chunk data a transport would have
//! received ([`Nfs3Case`]).

/// A leading options byte and the bytes under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flagged<'a> {
    /// Options; each target documents its bits.
    pub flags: u8,
    /// What the code under test reads.
    pub rest: &'a [u8],
}

impl<'a> Flagged<'a> {
    /// Splits `data`; an empty input is all zero options and no bytes.
    pub fn split(data: &'a [u8]) -> Flagged<'a> {
        match data.split_first() {
            Some((&flags, rest)) => Flagged { flags, rest },
            None => Flagged {
                flags: 0,
                rest: &[],
            },
        }
    }

    /// The input that [`Flagged::split`] turns into `flags` and `rest`.
    pub fn compose(flags: u8, rest: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(1 + rest.len());
        out.push(flags);
        out.extend_from_slice(rest);
        out
    }
}

/// The most chunks an NFSv3 case carries (RFC 8267 moves at most one item per message; a
/// few more exercise the "chunk left unused" and "wrong position" paths).
pub const NFS3_MAX_CHUNKS: usize = 4;

/// One received chunk of an NFSv3 case: a Read chunk's XDR position (calls) and its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk<'a> {
    /// The Read chunk's position (ignored for replies, whose chunks are Write chunks).
    pub position: u32,
    /// The chunk's bytes, as the transport pulled or received them.
    pub data: &'a [u8],
}

/// An NFSv3 decode case: which type, the chunks received, and the inline XDR stream.
///
/// Layout: `selector`, `count` (taken modulo [`NFS3_MAX_CHUNKS`] + 1), then per chunk a
/// 4-byte big-endian position and a 2-byte big-endian length, then the chunks' bytes in
/// order (a length past the end of the input is cut short), then the inline stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nfs3Case<'a> {
    /// Which type to decode (the target maps it onto its table).
    pub selector: u8,
    /// The received chunks.
    pub chunks: Vec<Chunk<'a>>,
    /// The inline XDR stream.
    pub inline: &'a [u8],
}

impl<'a> Nfs3Case<'a> {
    /// Splits `data` as documented on the type; never fails (missing bytes are zeros or
    /// empty).
    pub fn split(data: &'a [u8]) -> Nfs3Case<'a> {
        let mut rest = data;
        let mut byte = || match rest.split_first() {
            Some((&b, tail)) => {
                rest = tail;
                b
            }
            None => 0,
        };
        let selector = byte();
        let count = byte() as usize % (NFS3_MAX_CHUNKS + 1);
        let mut heads = [(0u32, 0usize); NFS3_MAX_CHUNKS];
        for head in heads.iter_mut().take(count) {
            let position = u32::from_be_bytes([byte(), byte(), byte(), byte()]);
            let len = u16::from_be_bytes([byte(), byte()]) as usize;
            *head = (position, len);
        }
        let mut chunks = Vec::with_capacity(count);
        for &(position, len) in heads.iter().take(count) {
            let (data, tail) = rest.split_at(len.min(rest.len()));
            rest = tail;
            chunks.push(Chunk { position, data });
        }
        Nfs3Case {
            selector,
            chunks,
            inline: rest,
        }
    }

    /// The input that [`Nfs3Case::split`] turns back into this case. Panics on more than
    /// [`NFS3_MAX_CHUNKS`] chunks or a chunk over 65535 bytes (the seed generator's own
    /// values).
    pub fn compose(&self) -> Vec<u8> {
        assert!(
            self.chunks.len() <= NFS3_MAX_CHUNKS,
            "too many chunks for a case"
        );
        let mut out = vec![self.selector, self.chunks.len() as u8];
        for c in &self.chunks {
            out.extend_from_slice(&c.position.to_be_bytes());
            let len = u16::try_from(c.data.len()).expect("a chunk of at most 65535 bytes");
            out.extend_from_slice(&len.to_be_bytes());
        }
        for c in &self.chunks {
            out.extend_from_slice(c.data);
        }
        out.extend_from_slice(self.inline);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_nfs3_case_survives_compose_and_split() {
        let case = Nfs3Case {
            selector: 3,
            chunks: vec![
                Chunk {
                    position: 96,
                    data: b"hello",
                },
                Chunk {
                    position: 7,
                    data: b"",
                },
            ],
            inline: b"\0\0\0\x05",
        };
        assert_eq!(Nfs3Case::split(&case.compose()), case);
    }

    #[test]
    fn a_short_nfs3_case_is_cut_not_refused() {
        let case = Nfs3Case::split(&[1, 1, 0, 0, 0, 9, 0xff, 0xff, b'a']);
        assert_eq!(
            case.chunks,
            vec![Chunk {
                position: 9,
                data: b"a"
            }]
        );
        assert!(case.inline.is_empty());
        assert_eq!(Nfs3Case::split(&[]).chunks, vec![]);
    }

    #[test]
    fn flagged_splits_the_first_byte() {
        assert_eq!(
            Flagged::split(&Flagged::compose(5, b"ab")),
            Flagged {
                flags: 5,
                rest: b"ab"
            }
        );
        assert_eq!(
            Flagged::split(&[]),
            Flagged {
                flags: 0,
                rest: &[]
            }
        );
    }
}

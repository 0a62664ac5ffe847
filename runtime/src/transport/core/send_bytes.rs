//! [`SendBytes`]: the bytes of one Send, in the pieces they were made of.

use bytes::Bytes;

use crate::xdr::Encoded;

/// Longest transport header kept in place: an RDMA_MSG without chunks (version 1: 28 bytes,
/// version 2: 36) and the other fixed-size headers (RDMA_DONE, RDMA_ERROR) fit.
const INLINE_HEAD: usize = crate::transport::header::PLAIN_MSG_V2_LEN;

/// The bytes of one Send, in order: the transport header, then the pieces of what follows it
/// (the RPC message, or nothing).
///
/// The usual Send (a header without chunks, a message in one piece) needs no allocation of
/// its own: the header is kept in place and one piece inline. A list of pieces and a header
/// in a buffer of its own cost two allocations per call and per reply before (callgrind).
#[derive(Clone, Debug, Default)]
pub struct SendBytes {
    head: Head,
    rest: Rest,
}

/// The transport header of a [`SendBytes`].
#[derive(Clone, Debug)]
enum Head {
    Inline { bytes: [u8; INLINE_HEAD], len: u8 },
    Shared(Bytes),
}

impl Default for Head {
    fn default() -> Head {
        Head::Inline {
            bytes: [0; INLINE_HEAD],
            len: 0,
        }
    }
}

/// The pieces after the header.
#[derive(Clone, Debug, Default)]
enum Rest {
    #[default]
    None,
    One(Bytes),
    Many(Vec<Bytes>),
}

impl SendBytes {
    /// Replaces the header with a copy of `head` (in place when short).
    pub fn set_head(&mut self, head: &[u8]) {
        self.head = if head.len() <= INLINE_HEAD {
            let mut bytes = [0; INLINE_HEAD];
            bytes[..head.len()].copy_from_slice(head);
            Head::Inline {
                bytes,
                len: head.len() as u8,
            }
        } else {
            Head::Shared(Bytes::copy_from_slice(head))
        };
    }

    /// Replaces the header with one kept in place that `write` writes at the start of the
    /// buffer it is given, returning its length; false (the header unchanged) when `write`
    /// returns `None`.
    pub(crate) fn write_head(
        &mut self,
        write: impl FnOnce(&mut [u8; INLINE_HEAD]) -> Option<usize>,
    ) -> bool {
        let mut bytes = [0; INLINE_HEAD];
        let Some(len) = write(&mut bytes) else {
            return false;
        };
        self.head = Head::Inline {
            bytes,
            len: len.min(INLINE_HEAD) as u8,
        };
        true
    }

    /// Replaces the header with `head`, kept in its buffer.
    pub fn set_head_bytes(&mut self, head: Bytes) {
        self.head = Head::Shared(head);
    }

    /// The header.
    pub fn head(&self) -> &[u8] {
        match &self.head {
            Head::Inline { bytes, len } => &bytes[..usize::from(*len)],
            Head::Shared(b) => b,
        }
    }

    /// Appends a piece after the header and the pieces before it.
    pub fn push(&mut self, piece: Bytes) {
        match &mut self.rest {
            Rest::None => self.rest = Rest::One(piece),
            Rest::One(first) => self.rest = Rest::Many(vec![first.clone(), piece]),
            Rest::Many(all) => all.push(piece),
        }
    }

    /// Appends the pieces of an encoded message.
    pub fn push_encoded(&mut self, message: Encoded) {
        message.for_each_part(|p| self.push(p));
    }

    /// The pieces after the header.
    pub fn rest(&self) -> &[Bytes] {
        match &self.rest {
            Rest::None => &[],
            Rest::One(one) => std::slice::from_ref(one),
            Rest::Many(many) => many,
        }
    }

    /// Every piece, the header first.
    pub fn pieces(&self) -> impl Iterator<Item = &[u8]> {
        std::iter::once(self.head()).chain(self.rest().iter().map(|b| &b[..]))
    }

    /// The length of the whole Send.
    pub fn len(&self) -> usize {
        self.head().len() + self.rest().iter().map(Bytes::len).sum::<usize>()
    }

    /// True when the Send carries no byte.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole Send in one buffer (a copy; for tests and tools).
    pub fn to_bytes(&self) -> Bytes {
        let mut all = Vec::with_capacity(self.len());
        self.pieces().for_each(|p| all.extend_from_slice(p));
        Bytes::from(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_send_reads_the_same_whether_its_header_is_in_place_or_shared() {
        let long_head = [7u8; INLINE_HEAD + 1];
        for head in [&b"hdr"[..], &[1u8; INLINE_HEAD][..], &long_head[..]] {
            let mut a = SendBytes::default();
            a.set_head(head);
            let mut b = SendBytes::default();
            b.set_head_bytes(Bytes::copy_from_slice(head));
            for s in [&mut a, &mut b] {
                s.push(Bytes::from_static(b"one"));
                s.push(Bytes::from_static(b"two"));
            }
            let want = [head, b"onetwo"].concat();
            for s in [&a, &b] {
                assert_eq!(s.head(), head);
                assert_eq!(s.len(), want.len());
                assert_eq!(&s.to_bytes()[..], &want[..]);
                assert_eq!(s.pieces().count(), 3);
            }
        }
        let empty = SendBytes::default();
        assert!(empty.is_empty());
        assert_eq!(empty.pieces().count(), 1);
    }
}

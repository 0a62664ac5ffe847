//! Connection private data for RPC-over-RDMA version 1 (RFC 8797, "RDMA Connection Manager
//! Private Data for RPC-over-RDMA Version 1"), the format the Linux kernel's client and server
//! send: a magic word, a version, a flags byte with the remote-invalidation bit, and the
//! sender's send and receive inline sizes.
//!
//! ```text
//!  0               1               2               3
//! +---------------+---------------+---------------+---------------+
//! |                    Format Identifier (0xf6ab0e18)             |
//! +---------------+---------------+---------------+---------------+
//! |    Version    | Reserved    |I|   Send Size   | Receive Size  |
//! +---------------+---------------+---------------+---------------+
//! ```
//!
//! A size byte `n` means `(n + 1) * 1024` bytes. A peer that sends no private data, or data in
//! another format, is assumed to have 1024-byte buffers and no remote invalidation (seed 004
//! section 4.3.1: "In the absense of a mechanism for discovering a peer's inline threshold,
//! senders MUST assume a receiver's inline threshold is 1024 bytes").

/// The Format Identifier (RFC 8797 section 5.1).
pub const FORMAT_IDENTIFIER: u32 = 0xf6ab_0e18;
/// The only version of the format.
pub const VERSION: u8 = 1;
/// Flag: the sender accepts Send With Invalidate of the handles it advertises.
pub const FLAG_REMOTE_INVALIDATE: u8 = 1;
/// The encoded length.
pub const LEN: usize = 8;
/// The inline size assumed for a peer that says nothing (seed 004 section 4.3.1).
pub const DEFAULT_INLINE: usize = 1024;
/// The largest size one byte can express: 256 KiB.
pub const MAX_INLINE: usize = 256 * 1024;

/// What one side tells the other while connecting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrivateData {
    /// The sender accepts Send With Invalidate (RFC 8797 section 5.1, "Remote Invalidation").
    pub remote_invalidate: bool,
    /// The largest message the sender will send, in bytes.
    pub send_size: usize,
    /// The size of the sender's receive buffers: the peer's inline threshold for sending.
    pub receive_size: usize,
}

impl Default for PrivateData {
    fn default() -> PrivateData {
        PrivateData {
            remote_invalidate: false,
            send_size: DEFAULT_INLINE,
            receive_size: DEFAULT_INLINE,
        }
    }
}

/// A size as one byte: `size / 1024 - 1`, rounded down to what the byte can say (so the peer
/// never assumes more than is there), at least 1 KiB.
fn encode_size(size: usize) -> u8 {
    (size.clamp(DEFAULT_INLINE, MAX_INLINE) / 1024 - 1) as u8
}

fn decode_size(byte: u8) -> usize {
    (byte as usize + 1) * 1024
}

impl PrivateData {
    /// The eight bytes on the wire. Sizes are rounded down to a multiple of 1 KiB and clamped
    /// to 1 KiB..=256 KiB.
    pub fn encode(&self) -> [u8; LEN] {
        let mut out = [0; LEN];
        out[..4].copy_from_slice(&FORMAT_IDENTIFIER.to_be_bytes());
        out[4] = VERSION;
        out[5] = if self.remote_invalidate {
            FLAG_REMOTE_INVALIDATE
        } else {
            0
        };
        out[6] = encode_size(self.send_size);
        out[7] = encode_size(self.receive_size);
        out
    }

    /// Parses a peer's private data; `None` when it is absent, too short, or not this format
    /// or version (the peer then gets the defaults: [`PrivateData::default`]). Bytes after the
    /// first eight and reserved flag bits are ignored, as RFC 8797 section 5.1 allows for
    /// later extensions.
    pub fn decode(data: &[u8]) -> Option<PrivateData> {
        let head: &[u8; LEN] = data.get(..LEN)?.try_into().ok()?;
        let magic = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        if magic != FORMAT_IDENTIFIER || head[4] != VERSION {
            return None;
        }
        Some(PrivateData {
            remote_invalidate: head[5] & FLAG_REMOTE_INVALIDATE != 0,
            send_size: decode_size(head[6]),
            receive_size: decode_size(head[7]),
        })
    }

    /// The peer's parameters from its private data, or the defaults.
    pub fn of_peer(data: &[u8]) -> PrivateData {
        PrivateData::decode(data).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_what_the_linux_kernel_sends() {
        // xprtrdma with 4 KiB inline thresholds and remote invalidation: f6ab0e18 01 01 03 03.
        let pd = PrivateData {
            remote_invalidate: true,
            send_size: 4096,
            receive_size: 4096,
        };
        assert_eq!(pd.encode(), [0xf6, 0xab, 0x0e, 0x18, 1, 1, 3, 3]);
        assert_eq!(PrivateData::decode(&pd.encode()), Some(pd));
    }

    #[test]
    fn sizes_round_down_and_clamp() {
        let pd = PrivateData {
            remote_invalidate: false,
            send_size: 1500,
            receive_size: 10 << 20,
        };
        let back = PrivateData::decode(&pd.encode()).unwrap();
        assert_eq!(back.send_size, 1024);
        assert_eq!(back.receive_size, MAX_INLINE);
        assert_eq!(decode_size(encode_size(0)), 1024);
    }

    #[test]
    fn a_peer_without_private_data_gets_1024_and_no_invalidation() {
        for data in [
            &[][..],
            &[1, 2, 3][..],
            &[0; 8][..],
            &[0xf6, 0xab, 0x0e, 0x18, 2, 1, 3, 3],
        ] {
            assert_eq!(PrivateData::decode(data), None, "{data:?}");
            assert_eq!(PrivateData::of_peer(data), PrivateData::default());
        }
    }

    #[test]
    fn ignores_reserved_bits_and_trailing_bytes() {
        let data = [0xf6, 0xab, 0x0e, 0x18, 1, 0xfe, 0, 1, 9, 9];
        let pd = PrivateData::decode(&data).unwrap();
        assert!(!pd.remote_invalidate);
        assert_eq!((pd.send_size, pd.receive_size), (1024, 2048));
    }
}

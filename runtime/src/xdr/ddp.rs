//! Chunk-aware encoding and decoding of DDP-eligible items (RPC-over-RDMA).
//!
//! An Upper Layer Binding names the XDR items that may move by Direct Data Placement
//! (seed 004 section 4.4.1, "DDP-Eligibility"). Generated and derived code encodes those items
//! with [`Encoder::put_ddp_opaque`](super::Encoder::put_ddp_opaque) and friends. Without a
//! chunking context they behave exactly like their plain counterparts; with one, the encoder
//! asks a [`ChunkPolicy`] whether to move each item and records the moved ones as
//! [`MovedItem`]s: Read chunks with their XDR Position for calls, the next Write chunk for
//! replies. Decoding takes the chunk data back through [`ReceivedChunks`].
//!
//! The codec does not know about segments, handles or registrations: it hands the transport
//! the bytes of each chunk (by reference, never copied) and takes them back on receive.

use bytes::Bytes;

use super::{padding, AlignPadding, Error, ErrorKind, Result};

/// The direction of the RPC message being encoded or decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// An RPC call: moved items become Read chunks pulled by the responder.
    Call,
    /// An RPC reply: moved items are pushed into the Write chunks the requester provided.
    Reply,
}

/// What the encoder knows about one DDP-eligible item when it asks the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DdpItem {
    /// The direction of the message.
    pub direction: Direction,
    /// The item's length in bytes, without XDR padding.
    pub len: usize,
    /// The inline stream's length so far (a message offset).
    pub inline_len: usize,
    /// Write chunks the requester provided that are not yet used (replies only).
    pub write_chunks_left: usize,
}

/// Where a DDP-eligible item goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// In the inline stream, as plain XDR.
    Inline,
    /// In a chunk: a Read chunk for calls, the next Write chunk for replies.
    Chunk,
}

/// Decides, item by item, whether a DDP-eligible item moves to a chunk.
pub trait ChunkPolicy: core::fmt::Debug + Send + Sync {
    /// The placement of `item`.
    fn place(&self, item: &DdpItem) -> Placement;
}

/// The usual policy: thresholds for calls, the requester's Write chunks for replies.
///
/// * Calls: an item moves when it is at least `min_ddp_size` long, or when keeping it inline
///   would take the inline stream past `inline_threshold` (the peer's receive buffer size;
///   seed 002 section 4.1).
/// * Replies: an item moves whenever the requester provided a Write chunk for it, because
///   "the RPC server MUST provide any corresponding data via RDMA Write to the memory
///   referenced in the chunk list entries" (seed 002 section 3.7, quoting RFC 5666 section 3.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThresholdPolicy {
    /// The largest message the receiver accepts inline (RFC 8166: 1024 bytes by default).
    pub inline_threshold: usize,
    /// The smallest item worth moving by RDMA even when it would fit inline.
    pub min_ddp_size: usize,
}

impl Default for ThresholdPolicy {
    fn default() -> Self {
        // Seed 002 section 4.2: the default inline buffer size is 1024 bytes.
        ThresholdPolicy {
            inline_threshold: 1024,
            min_ddp_size: 1024,
        }
    }
}

impl ChunkPolicy for ThresholdPolicy {
    fn place(&self, item: &DdpItem) -> Placement {
        let moves = match item.direction {
            Direction::Call => {
                item.len >= self.min_ddp_size
                    || item.inline_len + item.len + padding(item.len) > self.inline_threshold
            }
            Direction::Reply => item.write_chunks_left > 0,
        };
        if moves {
            Placement::Chunk
        } else {
            Placement::Inline
        }
    }
}

/// Where a moved item went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkTarget {
    /// A Read chunk re-inserted at this XDR Position, measured from the start of the RPC
    /// message and always a multiple of four (seed 004 section 4.4.4.1).
    Read {
        /// The XDR Position.
        position: u32,
    },
    /// The Write chunk with this index in the requester's Write list (seed 004 section 6.2:
    /// Write chunks are used in the order the DDP-eligible results appear).
    Write {
        /// Index into the Write list.
        index: usize,
    },
}

/// A DDP-eligible item that the encoder moved out of the inline stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MovedItem {
    /// Where it goes.
    pub target: ChunkTarget,
    /// Its bytes, without XDR padding (seed 004 section 4.4.4.1: the requester MAY send a Read
    /// chunk without padding; section 4.4.5.2: the responder need not write padding), shared
    /// with the caller's buffer: never a copy for opaque data and strings.
    pub data: Bytes,
}

/// The encoder's chunking state (present only when chunking is enabled).
#[derive(Debug)]
pub(super) struct EncodeChunking {
    pub(super) direction: Direction,
    pub(super) policy: Policy,
    /// Capacity of each Write chunk the requester provided (replies), in Write-list order.
    pub(super) write_chunk_capacities: Vec<u64>,
    pub(super) moved: Vec<MovedItem>,
    /// Bytes (with round-up) moved out of the inline stream so far: XDR Positions count them,
    /// because a Position is an offset in the reconstructed stream (seed 002 section 3.5).
    pub(super) removed: usize,
    /// A recording encoder's notes ([`Encoder::recording`](super::Encoder::recording)):
    /// every DDP-eligible item stays inline and is noted here instead of asking the policy.
    pub(super) marks: Option<Vec<DdpMark>>,
}

/// How a DDP-eligible item is written, which decides what stays inline when it moves
/// (seed 004 section 4.4.3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DdpKind {
    /// Variable-length opaque data or a string: its length word stays inline.
    Counted,
    /// Fixed-length opaque data: nothing stays inline.
    Fixed,
    /// A variable-length array: its element count stays inline, the encoded elements move.
    Array,
}

/// Where a [`recording`](super::Encoder::recording) encoder found a DDP-eligible item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DdpMark {
    /// The stream offset of the item's data (after a length word or element count).
    pub offset: usize,
    /// The data's length in bytes, without XDR padding.
    pub len: usize,
    /// How the item was written.
    pub kind: DdpKind,
}

/// An encoder's chunking policy: the usual one held as it is, any other boxed (the usual one
/// boxed cost an allocation per encoded call and reply).
#[derive(Debug)]
pub(super) enum Policy {
    Threshold(ThresholdPolicy),
    Other(Box<dyn ChunkPolicy>),
}

impl Policy {
    pub(super) fn new(policy: impl ChunkPolicy + 'static) -> Policy {
        match (&policy as &dyn std::any::Any).downcast_ref::<ThresholdPolicy>() {
            Some(threshold) => Policy::Threshold(*threshold),
            None => Policy::Other(Box::new(policy)),
        }
    }

    fn place(&self, item: &DdpItem) -> Placement {
        match self {
            Policy::Threshold(p) => p.place(item),
            Policy::Other(p) => p.place(item),
        }
    }
}

impl EncodeChunking {
    fn write_chunks_used(&self) -> usize {
        self.moved
            .iter()
            .filter(|m| matches!(m.target, ChunkTarget::Write { .. }))
            .count()
    }

    /// Asks the policy and, if the item moves, returns its target. `inline_len` is the inline
    /// stream's length, counted from the start of the RPC message.
    pub(super) fn decide(&self, len: usize, inline_len: usize) -> Option<ChunkTarget> {
        let used = self.write_chunks_used();
        let item = DdpItem {
            direction: self.direction,
            len,
            inline_len,
            write_chunks_left: self.write_chunk_capacities.len().saturating_sub(used),
        };
        if self.policy.place(&item) == Placement::Inline {
            return None;
        }
        Some(match self.direction {
            Direction::Call => ChunkTarget::Read {
                position: (inline_len + self.removed) as u32,
            },
            Direction::Reply => ChunkTarget::Write { index: used },
        })
    }
}

/// Chunk data a receiver has gathered for one message, to rebuild DDP-eligible items.
///
/// For a call, the responder has pulled each Read chunk (by RDMA Read) and gives its bytes with
/// its Position. For a reply, the requester gives the bytes the responder wrote into each Write
/// chunk, in Write-list order, each as long as the reply's Write list says (the sum of the
/// segment lengths, possibly including round-up).
#[derive(Debug, Clone, Default)]
pub struct ReceivedChunks {
    read: Vec<(u32, Bytes, bool)>,
    write: Vec<(Bytes, bool)>,
    next_write: usize,
    /// RDMA_MSGP: the sender's padding, and the offset of the message's first byte in the
    /// receive buffer (seed 000 section 3.5).
    alignment: Option<(AlignPadding, usize)>,
}

impl ReceivedChunks {
    /// Chunk data for a call: `(position, bytes)` of each Read chunk. Segments of one chunk
    /// share a Position (seed 004 section 4.4.4) and must already be concatenated.
    pub fn for_call(read_chunks: impl IntoIterator<Item = (u32, Bytes)>) -> Self {
        let mut read: Vec<_> = read_chunks
            .into_iter()
            .map(|(p, b)| (p, b, false))
            .collect();
        read.sort_by_key(|(p, _, _)| *p);
        ReceivedChunks {
            read,
            ..Default::default()
        }
    }

    /// Chunk data for a reply: the bytes of each Write chunk, in Write-list order.
    pub fn for_reply(write_chunks: impl IntoIterator<Item = Bytes>) -> Self {
        ReceivedChunks {
            write: write_chunks.into_iter().map(|b| (b, false)).collect(),
            ..Default::default()
        }
    }

    /// The bytes of all Read chunk data together (a call's DDP-eligible arguments).
    pub fn read_len(&self) -> usize {
        self.read.iter().map(|(_, b, _)| b.len()).sum()
    }

    /// The bytes of all Write chunk data together (a reply's DDP-eligible results).
    pub fn write_len(&self) -> usize {
        self.write.iter().map(|(b, _)| b.len()).sum()
    }

    /// The message came as RDMA_MSGP with `pad`, starting at offset `origin` of the receive
    /// buffer: counted opaque items that `pad` applies to are preceded by padding, which the
    /// decoder skips (seed 000 section 3.5).
    pub fn with_alignment(mut self, pad: AlignPadding, origin: usize) -> Self {
        self.alignment = Some((pad, origin));
        self
    }

    /// The padding the message was sent with, and where the message starts in the receive
    /// buffer.
    pub fn alignment(&self) -> Option<(AlignPadding, usize)> {
        self.alignment
    }

    /// Takes the chunk data for an item at XDR offset `position` (in the reconstructed stream),
    /// if the item was moved. With `count`, the chunk must hold exactly that many bytes, with or
    /// without round-up; the data is returned without round-up.
    pub(super) fn take(&mut self, position: usize, count: Option<usize>) -> Result<Option<Bytes>> {
        if let Ok(i) = self
            .read
            .binary_search_by_key(&(position as u64), |(p, _, _)| *p as u64)
        {
            let (_, data, used) = &mut self.read[i];
            *used = true;
            return check_chunk_len(data, count, position).map(Some);
        }
        if let Some((data, used)) = self.write.get_mut(self.next_write) {
            // An unused (zero-length) Write chunk before a non-empty item means the responder
            // kept the item inline; it stays unused (seed 004 section 4.4.5.1).
            if data.is_empty() && count != Some(0) {
                return Ok(None);
            }
            *used = true;
            self.next_write += 1;
            return check_chunk_len(data, count, position).map(Some);
        }
        Ok(None)
    }

    /// After decoding: Read chunks whose Position matched no DDP-eligible item are an error
    /// (the message and its chunks disagree); Write chunks that no item used are returned so
    /// the transport can report them (seed 004 section 4.4.5.1).
    pub fn finish(&self) -> Result<ChunkUsage> {
        // Seed 004 section 4.4.4.1: "The value in this field MUST be a multiple of four."
        if let Some((p, _, _)) = self.read.iter().find(|(p, _, _)| p % 4 != 0) {
            return Err(Error::new(
                ErrorKind::MisalignedReadChunk { position: *p },
                *p as usize,
            ));
        }
        if let Some((p, _, _)) = self.read.iter().find(|(_, _, used)| !used) {
            return Err(Error::new(
                ErrorKind::UnusedReadChunk { position: *p },
                *p as usize,
            ));
        }
        Ok(ChunkUsage {
            unused_write_chunks: self
                .write
                .iter()
                .enumerate()
                .filter(|(_, (_, used))| !used)
                .map(|(i, _)| i)
                .collect(),
        })
    }
}

/// How a decoded message used the chunks it came with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChunkUsage {
    /// Indexes of Write chunks that no item used (a union arm without the result).
    pub unused_write_chunks: Vec<usize>,
}

/// Seed 004 section 4.4.3.1: "Any byte count left in the XDR stream MUST match the sum of the
/// lengths of the segments making up the chunk." Round-up may or may not be included
/// (sections 4.4.4.1, 4.4.5.2).
fn check_chunk_len(data: &Bytes, count: Option<usize>, position: usize) -> Result<Bytes> {
    let Some(count) = count else {
        return Ok(data.clone());
    };
    if data.len() == count || data.len() == count + padding(count) {
        Ok(data.slice(..count))
    } else {
        Err(Error::new(
            ErrorKind::ChunkLengthMismatch {
                inline_count: count as u64,
                chunk_len: data.len() as u64,
            },
            position,
        ))
    }
}

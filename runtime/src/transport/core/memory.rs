//! Registered memory as the core sees it.
//!
//! The core never registers memory or touches payload bytes: it asks a [`Memory`] (the
//! driver's registered pool, or a test's simulated memory) for buffers, names them in chunk
//! lists by their handle and address, and hands them to the RDMA operations it emits. Payload
//! moves between the application and those buffers without the core copying it.

use std::fmt;
use std::ops::Range;

use bytes::Bytes;

use super::super::header::{AlignPadding, ReadChunk, Segment};
use crate::rdma::Access;
use crate::xdr::ReceivedChunks;

/// A registered buffer: memory with a steering tag, lent by a [`Memory`]. Clones share it; the
/// memory goes back to its pool when the last clone is dropped.
pub trait Buf: Clone + fmt::Debug + Send + Sync + 'static {
    /// The buffer's length in bytes.
    fn len(&self) -> usize;

    /// True for a zero-length buffer.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The steering tag (RDMA handle) a peer names to reach the buffer.
    fn handle(&self) -> u32;

    /// The address (RDMA offset) a peer names for the buffer's first byte.
    fn addr(&self) -> u64;

    /// Bytes `range` of the buffer as [`Bytes`] that keep the buffer lent until dropped. Only
    /// called once nothing remote can write them any more (after invalidation, or for memory
    /// the peer never had a handle to).
    fn freeze(&self, range: Range<usize>) -> Bytes;

    /// Notes that the buffer's handle was invalidated (locally, or by the peer's Send With
    /// Invalidate), so its pool need not revoke it before lending the buffer again.
    fn mark_invalidated(&self) {}
}

/// A byte range of a registered buffer: the local end of one RDMA segment.
#[derive(Clone, Debug)]
pub struct Slice<B> {
    /// The buffer.
    pub buf: B,
    /// The first byte in the buffer.
    pub offset: usize,
    /// The number of bytes.
    pub len: usize,
}

impl<B: Buf> Slice<B> {
    /// The whole of `buf`.
    pub fn whole(buf: B) -> Slice<B> {
        let len = buf.len();
        Slice {
            buf,
            offset: 0,
            len,
        }
    }

    /// The RDMA segment that names this slice for the peer.
    pub fn segment(&self) -> Segment {
        Segment {
            rdma_handle: self.buf.handle(),
            rdma_length: self.len as u32,
            rdma_offset: self.buf.addr().wrapping_add(self.offset as u64),
        }
    }

    /// The first `len` bytes (at most the slice's length) as [`Bytes`].
    pub fn freeze(&self, len: usize) -> Bytes {
        let len = len.min(self.len);
        self.buf.freeze(self.offset..self.offset + len)
    }

    /// The part `from..from + len` of this slice.
    pub fn sub(&self, from: usize, len: usize) -> Slice<B> {
        Slice {
            buf: self.buf.clone(),
            offset: self.offset + from,
            len,
        }
    }
}

/// Why memory could not be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryError(pub String);

impl fmt::Display for MemoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "registered memory: {}", self.0)
    }
}

impl std::error::Error for MemoryError {}

/// Where the core gets registered memory.
pub trait Memory {
    /// The buffers it lends.
    type Buf: Buf;

    /// At least `len` bytes of registered memory, as one or more slices (a pool may split a
    /// large request), reachable by the peer with the rights in `remote` under fresh handles
    /// (`Access::NONE`: local use only, such as an RDMA Read sink or a send buffer).
    fn alloc(&mut self, len: usize, remote: Access) -> Result<Vec<Slice<Self::Buf>>, MemoryError>;

    /// Registered memory holding the concatenation of `parts`, reachable by the peer with the
    /// rights in `remote`. Without a copy when the data already lies in one of this memory's
    /// buffers and that buffer is not exposed for another message; copied otherwise.
    fn source(
        &mut self,
        parts: &[Bytes],
        remote: Access,
    ) -> Result<Vec<Slice<Self::Buf>>, MemoryError>;

    /// Makes `slices` (memory the application took from this pool earlier) reachable by the
    /// peer with `remote` under fresh handles.
    fn expose(&mut self, slices: &[Slice<Self::Buf>], remote: Access) -> Result<(), MemoryError>;

    /// A hint that the peer is about to write into `slices` (a Write chunk of a call being
    /// sent), passed to the provider ([`Connection::expect_write`]); the default ignores it.
    ///
    /// [`Connection::expect_write`]: crate::rdma::Connection::expect_write
    fn expect_write(&mut self, slices: &[Slice<Self::Buf>]) {
        let _ = slices;
    }
}

/// Splits `total` bytes laid over `local` slices onto `remote` segments: the pairs
/// (local part, remote segment part) that RDMA operations move, in order. Both sides are cut
/// where either side has a boundary; `total` is at most the length of each side.
pub fn pair_up<B: Buf>(
    local: &[Slice<B>],
    remote: &[Segment],
    total: usize,
) -> Vec<(Slice<B>, Segment)> {
    let mut out = Vec::new();
    let (mut li, mut loff) = (0usize, 0usize);
    let (mut ri, mut roff) = (0usize, 0u64);
    let mut left = total;
    while left > 0 && li < local.len() && ri < remote.len() {
        let l = &local[li];
        let r = &remote[ri];
        let lrem = l.len - loff;
        let rrem = (r.rdma_length as u64 - roff) as usize;
        let n = lrem.min(rrem).min(left);
        if n > 0 {
            out.push((
                l.sub(loff, n),
                Segment {
                    rdma_handle: r.rdma_handle,
                    rdma_length: n as u32,
                    rdma_offset: r.rdma_offset.wrapping_add(roff),
                },
            ));
        }
        loff += n;
        roff += n as u64;
        left -= n;
        if loff == l.len {
            li += 1;
            loff = 0;
        }
        if roff == r.rdma_length as u64 {
            ri += 1;
            roff = 0;
        }
    }
    out
}

/// The first `len` bytes laid over `slices`, as one [`Bytes`]: the buffer itself when one
/// slice holds them all (no copy), one copy otherwise.
pub fn gather<B: Buf>(slices: &[Slice<B>], len: usize) -> Bytes {
    match slices {
        [one] => one.freeze(len),
        _ if len <= slices.first().map_or(0, |s| s.len) => slices[0].freeze(len),
        _ => {
            let mut out = Vec::with_capacity(len);
            let mut left = len;
            for s in slices {
                if left == 0 {
                    break;
                }
                let n = left.min(s.len);
                out.extend_from_slice(&s.freeze(n));
                left -= n;
            }
            Bytes::from(out)
        }
    }
}

/// Where a message's Read chunks land: each chunk's Position, local memory and length.
pub(super) type Sinks<B> = Vec<(u32, Vec<Slice<B>>, usize)>;

/// The RDMA Reads that fill sinks: a local slice and the peer's segment each.
pub(super) type Pulls<B> = Vec<(Slice<B>, Segment)>;

/// [`read_sinks`]'s answer.
pub(super) type SinksAndPulls<B> = (Sinks<B>, Pulls<B>);

/// Local memory for each of `chunks` (none for an empty one) and the RDMA Reads that fill it.
/// Used by a responder pulling a call's Read chunks and by a Read-Read requester pulling a
/// reply's (seed 000 section 3.8).
pub(super) fn read_sinks<M: Memory>(
    chunks: &[ReadChunk],
    mem: &mut M,
) -> Result<SinksAndPulls<M::Buf>, MemoryError> {
    let mut sinks = Vec::with_capacity(chunks.len());
    let mut pulls = Vec::new();
    for chunk in chunks {
        let len = chunk.len() as usize;
        if len == 0 {
            sinks.push((chunk.position, Vec::new(), 0));
            continue;
        }
        let slices = mem.alloc(len, Access::NONE)?;
        pulls.extend(pair_up(&slices, &chunk.segments, len));
        sinks.push((chunk.position, slices, len));
    }
    Ok((sinks, pulls))
}

/// The RPC message and its decoder's chunk data once the Reads are done: a Position-Zero
/// chunk is the whole message (seed 004 section 5.3.3: decoded "as if it had received it with
/// the Send data"; seed 000 section 5.1), the others go to the decoder at their Positions, with
/// an RDMA_MSGP message's `alignment`.
pub(super) fn pulled_message<B: Buf>(
    inline: Bytes,
    sinks: Sinks<B>,
    alignment: Option<(AlignPadding, usize)>,
) -> (Bytes, Option<ReceivedChunks>) {
    let mut message = inline;
    let mut reads = Vec::new();
    for (position, slices, len) in sinks {
        let data = gather(&slices, len);
        if position == 0 {
            message = data;
        } else {
            reads.push((position, data));
        }
    }
    let mut chunks = (!reads.is_empty()).then(|| ReceivedChunks::for_call(reads));
    if let Some((pad, origin)) = alignment {
        chunks = Some(chunks.unwrap_or_default().with_alignment(pad, origin));
    }
    (message, chunks)
}

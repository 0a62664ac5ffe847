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
pub struct MemoryError {
    kind: MemoryErrorKind,
    message: String,
}

/// What kind of [`MemoryError`] it is: whether asking again can help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemoryErrorKind {
    /// Over a budget now: memory coming back may make room.
    Exhausted,
    /// More than a budget allows at all.
    TooLarge,
    /// The provider failed (registration refused, connection gone).
    Failed,
}

impl MemoryError {
    /// A failure of the provider or the memory itself.
    pub fn failed(message: impl Into<String>) -> MemoryError {
        MemoryError::new(MemoryErrorKind::Failed, message)
    }

    /// An error of `kind`.
    pub fn new(kind: MemoryErrorKind, message: impl Into<String>) -> MemoryError {
        MemoryError {
            kind,
            message: message.into(),
        }
    }

    /// Its kind.
    pub fn kind(&self) -> MemoryErrorKind {
        self.kind
    }
}

impl fmt::Display for MemoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "registered memory: {}", self.message)
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

    /// Memory for data the peer pushes at this side: the sinks of one call's Read chunks,
    /// one list of slices per length in `lens`, taken together or not at all. Unlike
    /// [`Memory::alloc`] it is refused when over a budget: [`MemoryErrorKind::Exhausted`] when
    /// memory coming back could make room, [`MemoryErrorKind::TooLarge`] when nothing could.
    /// The default has no budget.
    fn alloc_sinks(&mut self, lens: &[usize]) -> Result<Vec<Vec<Slice<Self::Buf>>>, MemoryError> {
        lens.iter()
            .map(|&len| self.alloc(len, Access::NONE))
            .collect()
    }

    /// The largest slice [`Memory::alloc_sinks`] hands out for one length: a Read chunk is
    /// pulled in pieces of at most this, each taking its memory as its data is about to come.
    /// The default has no limit.
    fn max_piece(&self) -> usize {
        usize::MAX
    }

    /// Whether `len` bytes that arrived in this memory may stay in it while the application
    /// holds them. False when the memory lent out is near its budget: the data is then copied
    /// to ordinary memory and the registered buffer goes back at once, so what handlers keep
    /// never grows registered (pinned) memory past the budget. The default keeps everything.
    fn keep_received(&self, len: usize) -> bool {
        let _ = len;
        true
    }

    /// Counts `bytes` copied out of registered memory by [`Memory::keep_received`]'s answer.
    fn copied_out(&mut self, bytes: usize) {
        let _ = bytes;
    }

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
/// Used by a Read-Read requester pulling a reply's Read chunks (seed 000 section 3.8).
pub(super) fn read_sinks<M: Memory>(
    chunks: &[ReadChunk],
    mem: &mut M,
) -> Result<SinksAndPulls<M::Buf>, MemoryError> {
    let mut memory = Vec::with_capacity(chunks.len());
    for chunk in chunks {
        let len = chunk.len() as usize;
        memory.push(if len == 0 {
            Vec::new()
        } else {
            mem.alloc(len, Access::NONE)?
        });
    }
    Ok(sinks_and_pulls(chunks, memory))
}

/// The lengths of `chunks` that need memory (the non-empty ones), for
/// [`Memory::alloc_sinks`].
pub(super) fn sink_lens(chunks: &[ReadChunk]) -> Vec<usize> {
    chunks
        .iter()
        .map(|c| c.len() as usize)
        .filter(|&len| len > 0)
        .collect()
}

/// Lays the memory [`Memory::alloc_sinks`] gave for [`sink_lens`] over `chunks`: each chunk's
/// sink, and the RDMA Reads that fill it.
pub(super) fn sinks_and_pulls<B: Buf>(
    chunks: &[ReadChunk],
    memory: Vec<Vec<Slice<B>>>,
) -> SinksAndPulls<B> {
    let mut memory = memory.into_iter();
    let mut sinks = Vec::with_capacity(chunks.len());
    let mut pulls = Vec::new();
    for chunk in chunks {
        let len = chunk.len() as usize;
        let slices = match len {
            0 => Vec::new(),
            _ => memory.next().unwrap_or_default(),
        };
        pulls.extend(pair_up(&slices, &chunk.segments, len));
        sinks.push((chunk.position, slices, len));
    }
    (sinks, pulls)
}

/// Each sink's data as [`Bytes`], with its Position. A sink that lies in one registered
/// buffer stays there unless `keep` says no for its length; it is then copied to ordinary
/// memory (and `copied` told how much), so the registered buffer goes back as soon as the
/// sink is dropped.
pub(super) fn sink_data<B: Buf>(
    sinks: Sinks<B>,
    mut keep: impl FnMut(usize) -> bool,
    mut copied: impl FnMut(usize),
) -> Vec<(u32, Bytes)> {
    sinks
        .into_iter()
        .map(|(position, slices, len)| {
            let data = gather(&slices, len);
            // Several slices were gathered into ordinary memory already.
            if slices.len() == 1 && len > 0 && !keep(len) {
                copied(len);
                (position, Bytes::copy_from_slice(&data))
            } else {
                (position, data)
            }
        })
        .collect()
}

/// The RPC message and its decoder's chunk data once the Reads are done: a Position-Zero
/// chunk is the whole message (seed 004 section 5.3.3: decoded "as if it had received it with
/// the Send data"; seed 000 section 5.1), the others go to the decoder at their Positions, with
/// an RDMA_MSGP message's `alignment`.
pub(super) fn pulled_message(
    inline: Bytes,
    data: Vec<(u32, Bytes)>,
    alignment: Option<(AlignPadding, usize)>,
) -> (Bytes, Option<ReceivedChunks>) {
    let mut message = inline;
    let mut reads = Vec::new();
    for (position, data) in data {
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

//! Writing XDR into a `BytesMut`, with large opaque items kept out of line.

use bytes::{Bytes, BytesMut};

use super::ddp::{
    ChunkPolicy, ChunkTarget, DdpKind, DdpMark, Direction, EncodeChunking, MovedItem, Policy,
    ThresholdPolicy,
};
use super::{padding, AlignPadding, Block, Encode, Error, ErrorKind, Result, XdrString};

/// Opaque items at least this long are kept as their own [`Bytes`] part instead of being
/// copied into the encoder's buffer.
pub const DEFAULT_GATHER_THRESHOLD: usize = 1024;

const ZEROS: [u8; 4] = [0; 4];

/// Writes XDR items.
///
/// Small items are appended to an internal `BytesMut`; opaque items given as [`Bytes`] that are
/// at least the gather threshold long are kept by reference as separate parts of the output
/// (a gather list, ready for `writev` or a multi-SGE send), never copied.
#[derive(Debug)]
pub struct Encoder {
    buf: BytesMut,
    parts: Vec<Bytes>,
    /// Bytes already moved into `parts`.
    flushed: usize,
    gather_threshold: usize,
    copied_opaque: usize,
    /// Offset of this encoder's first byte in the RPC message (for Read chunk Positions).
    base: usize,
    chunking: Option<EncodeChunking>,
    /// Counted opaque items at least this long have their data start recorded in
    /// `pad_points`, for RDMA_MSGP padding ([`Encoder::record_pad_points`]).
    pad_thresh: Option<usize>,
    pad_points: Vec<(usize, usize)>,
}

impl Default for Encoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Encoder {
    /// An encoder with a small initial buffer and [`DEFAULT_GATHER_THRESHOLD`].
    pub fn new() -> Self {
        Self::with_capacity(256)
    }

    /// An encoder whose buffer starts with room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        Encoder {
            buf: BytesMut::with_capacity(capacity),
            parts: Vec::new(),
            flushed: 0,
            gather_threshold: DEFAULT_GATHER_THRESHOLD,
            copied_opaque: 0,
            base: 0,
            chunking: None,
            pad_thresh: None,
            pad_points: Vec::new(),
        }
    }

    /// An encoder for an RPC call whose DDP-eligible items may move to Read chunks, as
    /// `policy` decides.
    pub fn for_call(policy: impl ChunkPolicy + 'static) -> Self {
        let mut enc = Self::new();
        enc.chunking = Some(EncodeChunking {
            direction: Direction::Call,
            policy: Policy::new(policy),
            write_chunk_capacities: Vec::new(),
            moved: Vec::new(),
            removed: 0,
            marks: None,
        });
        enc
    }

    /// An encoder for an RPC reply whose DDP-eligible items go, in order, into the Write
    /// chunks the requester provided (given by their capacities in bytes, in Write-list order).
    pub fn for_reply(policy: impl ChunkPolicy + 'static, write_chunk_capacities: Vec<u64>) -> Self {
        let mut enc = Self::new();
        enc.chunking = Some(EncodeChunking {
            direction: Direction::Reply,
            policy: Policy::new(policy),
            write_chunk_capacities,
            moved: Vec::new(),
            removed: 0,
            marks: None,
        });
        enc
    }

    /// An encoder that keeps every item inline and records where each DDP-eligible item
    /// ([`DdpMark`]) and each non-empty counted opaque item ([`Encoded::pad_points`]) lies, so
    /// that the message can be encoded again later for another chunking: a reply cache
    /// replays a reply over a connection whose Write chunks differ from the first one's.
    /// Take the result with [`finish_recorded`](Self::finish_recorded).
    pub fn recording() -> Self {
        let mut enc = Self::new();
        enc.chunking = Some(EncodeChunking {
            direction: Direction::Reply,
            policy: Policy::new(ThresholdPolicy::default()),
            write_chunk_capacities: Vec::new(),
            moved: Vec::new(),
            removed: 0,
            marks: Some(Vec::new()),
        });
        enc.record_pad_points(1);
        enc
    }

    /// Declares that this encoder's first byte sits at `offset` in the RPC message (when the
    /// RPC header was encoded elsewhere), so Read chunk Positions count from the message start.
    pub fn set_base_offset(&mut self, offset: usize) -> &mut Self {
        self.base = offset;
        self
    }

    /// Records where the data of every counted opaque item (and string) of at least `thresh`
    /// bytes that stays inline starts, so that a transport can pad the message for RDMA_MSGP
    /// once it knows the transport header's length ([`Encoded::aligned`]; seed 000 section
    /// 3.5).
    pub fn record_pad_points(&mut self, thresh: usize) -> &mut Self {
        self.pad_thresh = Some(thresh);
        self
    }

    #[inline]
    fn note_pad_point(&mut self, len: usize) {
        if let Some(thresh) = self.pad_thresh {
            if len > 0 && len >= thresh {
                self.pad_points.push((self.len(), len));
            }
        }
    }

    /// Sets the length from which `Bytes` opaque items are gathered rather than copied.
    pub fn set_gather_threshold(&mut self, threshold: usize) -> &mut Self {
        self.gather_threshold = threshold;
        self
    }

    /// The number of bytes written so far (the current offset).
    pub fn len(&self) -> usize {
        self.flushed + self.buf.len()
    }

    /// Whether nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many bytes the buffer holds before it must grow (written ones included).
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Opaque payload bytes that were copied into the encoder's buffer (items below the
    /// gather threshold, or given as slices). Gathered items do not count.
    pub fn copied_opaque_bytes(&self) -> usize {
        self.copied_opaque
    }

    /// An error of `kind` at the current offset.
    pub fn error(&self, kind: ErrorKind) -> Error {
        Error::new(kind, self.len())
    }

    /// Writes an unsigned 32-bit integer.
    #[inline]
    pub fn put_u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// Writes a signed 32-bit integer.
    #[inline]
    pub fn put_i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// Writes an unsigned hyper integer.
    #[inline]
    pub fn put_u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// Writes a signed hyper integer.
    #[inline]
    pub fn put_i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// Writes a [`Block`]: generated code encodes a run of consecutive fixed-size numeric
    /// fields as one block, with one capacity check and one copy for the run (what rpcgen's
    /// `XDR_INLINE` does). `N` should be a multiple of four.
    #[inline]
    pub fn put_block<const N: usize>(&mut self, block: &Block<N>) {
        self.buf.extend_from_slice(&block.0);
    }

    /// Writes a single-precision float.
    pub fn put_f32(&mut self, v: f32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// Writes a double-precision float.
    pub fn put_f64(&mut self, v: f64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// Writes a boolean.
    #[inline]
    pub fn put_bool(&mut self, v: bool) {
        self.buf.extend_from_slice(&(v as u32).to_be_bytes());
    }

    /// Writes zero padding for an item of `len` bytes.
    #[inline]
    pub fn put_padding(&mut self, len: usize) {
        self.buf.extend_from_slice(&ZEROS[..padding(len)]);
    }

    /// Checks `len` against a declared maximum (and the 32-bit length field of RFC 4506
    /// section 4.10).
    #[inline]
    pub fn check_max(&self, len: usize, max: Option<u32>) -> Result<()> {
        let maximum = max.unwrap_or(u32::MAX);
        if len > maximum as usize {
            return Err(self.over_maximum(len, maximum));
        }
        Ok(())
    }

    #[cold]
    fn over_maximum(&self, len: usize, maximum: u32) -> Error {
        self.error(ErrorKind::ExceedsDeclaredMaximum {
            length: len as u64,
            maximum,
        })
    }

    /// Writes a length or element count after checking it against `max`.
    #[inline]
    pub fn put_length(&mut self, len: usize, max: Option<u32>) -> Result<()> {
        self.check_max(len, max)?;
        self.put_u32(len as u32);
        Ok(())
    }

    /// Writes fixed-length opaque data of exactly `expected` bytes, plus padding.
    pub fn put_fixed_opaque(&mut self, data: &Bytes, expected: usize) -> Result<()> {
        if data.len() != expected {
            return Err(self.error(ErrorKind::WrongFixedLength {
                expected,
                actual: data.len(),
            }));
        }
        self.put_opaque_body(data);
        Ok(())
    }

    /// Writes variable-length opaque data (length, bytes, padding), checked against `max`.
    pub fn put_opaque(&mut self, data: &Bytes, max: Option<u32>) -> Result<()> {
        self.put_length(data.len(), max)?;
        self.note_pad_point(data.len());
        self.put_opaque_body(data);
        Ok(())
    }

    /// Writes variable-length opaque data given as a slice (always copied).
    pub fn put_opaque_slice(&mut self, data: &[u8], max: Option<u32>) -> Result<()> {
        self.put_length(data.len(), max)?;
        self.note_pad_point(data.len());
        self.copied_opaque += data.len();
        self.buf.extend_from_slice(data);
        self.put_padding(data.len());
        Ok(())
    }

    /// Writes a string, checked against `max`.
    pub fn put_string(&mut self, s: &XdrString, max: Option<u32>) -> Result<()> {
        self.put_opaque(s.as_bytes_ref(), max)
    }

    /// Writes the bytes of an opaque item and its padding, gathering large items.
    pub fn put_opaque_body(&mut self, data: &Bytes) {
        if data.len() >= self.gather_threshold {
            self.put_gathered(data.clone());
        } else {
            self.copied_opaque += data.len();
            self.buf.extend_from_slice(data);
        }
        self.put_padding(data.len());
    }

    /// Appends `data` as its own part of the output, by reference.
    pub fn put_gathered(&mut self, data: Bytes) {
        if !self.buf.is_empty() {
            let head = self.buf.split().freeze();
            self.flushed += head.len();
            self.parts.push(head);
        }
        self.flushed += data.len();
        self.parts.push(data);
    }

    /// Items moved to chunks so far.
    pub fn moved_items(&self) -> &[MovedItem] {
        self.chunking.as_ref().map_or(&[], |c| &c.moved)
    }

    /// Asks the chunking policy about an item of `len` bytes; if it moves, records it and
    /// returns `true`. Without chunking, always `false`; a recording encoder notes the item
    /// and keeps it inline.
    fn try_move(&mut self, data: &Bytes, kind: DdpKind) -> Result<bool> {
        let inline_len = self.base + self.len();
        let Some(chunking) = self.chunking.as_mut() else {
            return Ok(false);
        };
        if let Some(marks) = chunking.marks.as_mut() {
            marks.push(DdpMark {
                offset: inline_len,
                len: data.len(),
                kind,
            });
            return Ok(false);
        }
        let Some(target) = chunking.decide(data.len(), inline_len) else {
            return Ok(false);
        };
        if let ChunkTarget::Write { index } = target {
            let capacity = chunking.write_chunk_capacities[index];
            if data.len() as u64 > capacity {
                return Err(Error::new(
                    ErrorKind::WriteChunkTooSmall {
                        index,
                        needed: data.len() as u64,
                        capacity,
                    },
                    inline_len,
                ));
            }
        }
        // Seed 004 section 4.4.4.1: "the requester MUST remove any needed XDR padding for that
        // chunk as well. Alignment of the items remaining in the stream is unaffected."
        chunking.removed += data.len() + padding(data.len());
        chunking.moved.push(MovedItem {
            target,
            data: data.clone(),
        });
        Ok(true)
    }

    /// Writes DDP-eligible variable-length opaque data. If the chunking policy moves it, the
    /// length stays inline and the bytes (by reference) and their padding do not
    /// (seed 004 section 4.4.3.1, "Counted Arrays").
    pub fn put_ddp_opaque(&mut self, data: &Bytes, max: Option<u32>) -> Result<()> {
        self.put_length(data.len(), max)?;
        if !self.try_move(data, DdpKind::Counted)? {
            self.note_pad_point(data.len());
            self.put_opaque_body(data);
        }
        Ok(())
    }

    /// Writes DDP-eligible fixed-length opaque data; if moved, nothing stays inline.
    pub fn put_ddp_fixed_opaque(&mut self, data: &Bytes, expected: usize) -> Result<()> {
        if data.len() != expected {
            return Err(self.error(ErrorKind::WrongFixedLength {
                expected,
                actual: data.len(),
            }));
        }
        if !self.try_move(data, DdpKind::Fixed)? {
            self.put_opaque_body(data);
        }
        Ok(())
    }

    /// Writes a DDP-eligible string; if moved, the length stays inline.
    pub fn put_ddp_string(&mut self, s: &XdrString, max: Option<u32>) -> Result<()> {
        self.put_ddp_opaque(s.as_bytes_ref(), max)
    }

    /// Writes a DDP-eligible variable-length array. If moved, the element count stays inline
    /// and the encoded elements form the chunk (seed 004 section 4.4.3.1: "Individual array
    /// elements appear in the chunk in their entirety").
    pub fn put_ddp_array<T: Encode>(&mut self, items: &[T], max: Option<u32>) -> Result<()> {
        self.put_length(items.len(), max)?;
        if self.chunking.is_none() {
            return items.iter().try_for_each(|v| v.encode(self));
        }
        let mut elements = Encoder::new();
        elements.set_gather_threshold(self.gather_threshold);
        items.iter().try_for_each(|v| v.encode(&mut elements))?;
        let elements = elements.finish();
        if !self.try_move(&elements.to_bytes(), DdpKind::Array)? {
            for part in elements.into_parts() {
                self.put_gathered(part);
            }
        }
        Ok(())
    }

    /// Ends encoding and returns the inline stream and the items moved to chunks.
    pub fn finish_with_chunks(mut self) -> (Encoded, Vec<MovedItem>) {
        let moved = self.chunking.take().map(|c| c.moved).unwrap_or_default();
        (self.finish(), moved)
    }

    /// Ends a [`recording`](Self::recording) encoder's message: the whole stream (nothing
    /// moved; its [`pad_points`](Encoded::pad_points) say where counted opaque data starts)
    /// and where each DDP-eligible item lies, in stream order. Empty marks for any other
    /// encoder.
    pub fn finish_recorded(mut self) -> (Encoded, Vec<DdpMark>) {
        let marks = self
            .chunking
            .take()
            .and_then(|c| c.marks)
            .unwrap_or_default();
        (self.finish(), marks)
    }

    /// The message written so far when it is one contiguous run of bytes (nothing was
    /// gathered by reference): a header to copy into a registered send buffer, or to decode
    /// with [`Decoder::from_slice`](super::Decoder::from_slice). `None` when parts were
    /// gathered; use [`take`](Self::take) or [`finish`](Self::finish) then.
    // Not inlined: inlined right after an encode, the slice's pointer and length were read
    // as one 16-byte load over the length the encode had just stored, a load the store
    // buffer cannot forward (about 2 ns of a v1 header's 60 ns encode + decode; returned in
    // registers, each word is loaded on its own).
    #[inline(never)]
    pub fn as_contiguous(&self) -> Option<&[u8]> {
        self.parts.is_empty().then_some(&self.buf[..])
    }

    /// Forgets the message written so far (and the items it moved to chunks), keeping the
    /// buffer and its capacity for the next message. With
    /// [`as_contiguous`](Self::as_contiguous), the send loop of a transport that copies each header into
    /// registered memory: no allocation and no reference counting per message.
    #[inline]
    pub fn clear(&mut self) {
        self.buf.clear();
        self.parts.clear();
        self.flushed = 0;
        self.copied_opaque = 0;
        self.pad_points.clear();
        if let Some(c) = self.chunking.as_mut() {
            c.moved.clear();
            c.removed = 0;
        }
    }

    /// Ends the message written so far and returns it like [`finish`](Self::finish), leaving
    /// the encoder empty, with the same settings, ready for the next message.
    ///
    /// The returned message shares the encoder's buffer; the buffer's unused capacity is kept
    /// for the next message, and once every message taken from it has been dropped, the whole
    /// buffer is reclaimed. A send loop that reuses one encoder (created with enough
    /// capacity for a few messages) therefore stops allocating.
    pub fn take(&mut self) -> Encoded {
        if self.parts.is_empty() && self.chunking.is_none() {
            // The common case: one contiguous message and nothing moved to chunks.
            self.copied_opaque = 0;
            let one = self.buf.split().freeze();
            return Encoded {
                len: one.len(),
                parts: Parts::One(one),
                pad_points: std::mem::take(&mut self.pad_points),
            };
        }
        self.take_with_chunks().0
    }

    /// [`take`](Self::take) for an encoder with a chunking policy: also returns the items
    /// moved to chunks, and starts the next message with none moved.
    pub fn take_with_chunks(&mut self) -> (Encoded, Vec<MovedItem>) {
        let moved = match self.chunking.as_mut() {
            Some(c) => {
                c.removed = 0;
                std::mem::take(&mut c.moved)
            }
            None => Vec::new(),
        };
        self.copied_opaque = 0;
        let encoded = if self.parts.is_empty() {
            let one = self.buf.split().freeze();
            Encoded {
                len: one.len(),
                parts: Parts::One(one),
                pad_points: std::mem::take(&mut self.pad_points),
            }
        } else {
            if !self.buf.is_empty() {
                let tail = self.buf.split().freeze();
                self.flushed += tail.len();
                self.parts.push(tail);
            }
            Encoded {
                parts: Parts::Many(std::mem::take(&mut self.parts)),
                len: std::mem::take(&mut self.flushed),
                pad_points: std::mem::take(&mut self.pad_points),
            }
        };
        (encoded, moved)
    }

    /// Ends encoding and returns the message as a gather list.
    pub fn finish(mut self) -> Encoded {
        if self.parts.is_empty() {
            // The common case, nothing gathered: `take` hands the buffer over whole (unlike
            // `split`, no shared representation) and the single part needs no list.
            let one = std::mem::take(&mut self.buf).freeze();
            return Encoded {
                len: one.len(),
                parts: Parts::One(one),
                pad_points: self.pad_points,
            };
        }
        if !self.buf.is_empty() {
            let tail = std::mem::take(&mut self.buf).freeze();
            self.flushed += tail.len();
            self.parts.push(tail);
        }
        Encoded {
            parts: Parts::Many(self.parts),
            len: self.flushed,
            pad_points: self.pad_points,
        }
    }
}

/// An encoded message: a gather list of [`Bytes`] parts whose concatenation is the XDR.
#[derive(Debug, Clone, Default)]
pub struct Encoded {
    parts: Parts,
    len: usize,
    /// Where padded opaque data would start ([`Encoder::record_pad_points`]), ascending, with
    /// the item's length.
    pad_points: Vec<(usize, usize)>,
}

/// The parts of an [`Encoded`]; a message with nothing gathered needs no list.
#[derive(Debug, Clone)]
enum Parts {
    One(Bytes),
    Many(Vec<Bytes>),
}

impl Default for Parts {
    fn default() -> Self {
        Parts::Many(Vec::new())
    }
}

impl PartialEq for Encoded {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for Encoded {}

impl Encoded {
    /// A message made of `parts`, in order.
    pub fn from_parts(parts: Vec<Bytes>) -> Encoded {
        let len = parts.iter().map(Bytes::len).sum();
        Encoded {
            parts: Parts::Many(parts),
            len,
            pad_points: Vec::new(),
        }
    }

    /// The message with the Read-chunk items `moved` put back where the encoder took them
    /// from, each with its XDR padding: what the encoder would have produced with nothing
    /// moved. A requester that must resend a call without Read chunks uses it (seed 003
    /// section 5.3.3, RDMA2_ERR_READ_CHUNKS: "The requester SHOULD resend the request using a
    /// Position-Zero Read chunk"). Items that are not Read chunks are ignored.
    pub fn with_reads_inline(&self, moved: &[MovedItem]) -> Encoded {
        // A Read chunk's Position counts in the whole stream, with every earlier item back in
        // place (seed 002 section 3.5): in the reduced stream it sits at Position minus what
        // was removed before it.
        let mut items: Vec<(usize, &Bytes)> = moved
            .iter()
            .filter_map(|m| match m.target {
                ChunkTarget::Read { position } => Some((position as usize, &m.data)),
                ChunkTarget::Write { .. } => None,
            })
            .collect();
        items.sort_by_key(|(p, _)| *p);
        let mut out = Vec::with_capacity(self.parts().len() + 2 * items.len());
        let mut parts = self.parts().iter().cloned();
        let mut current = parts.next().unwrap_or_default();
        let mut at = 0usize; // reduced-stream offset of `current`'s first byte
        let mut removed = 0usize;
        for (position, data) in items {
            let cut = position.saturating_sub(removed);
            while at + current.len() < cut {
                at += current.len();
                out.push(std::mem::replace(
                    &mut current,
                    parts.next().unwrap_or_default(),
                ));
                if current.is_empty() && parts.len() == 0 {
                    break;
                }
            }
            let split = (cut - at).min(current.len());
            out.push(current.split_to(split));
            at += split;
            out.push(data.clone());
            let pad = padding(data.len());
            if pad > 0 {
                out.push(Bytes::from_static(&[0, 0, 0][..pad]));
            }
            removed += data.len() + pad;
        }
        out.push(current);
        out.extend(parts);
        out.retain(|p| !p.is_empty());
        Encoded::from_parts(out)
    }

    /// Where the data of each opaque item recorded by [`Encoder::record_pad_points`] starts,
    /// in ascending offsets of the message, with the item's length.
    pub fn pad_points(&self) -> &[(usize, usize)] {
        &self.pad_points
    }

    /// The message padded for RDMA_MSGP (seed 000 section 3.5): before the data of each
    /// recorded item that `pad` applies to, the zero bytes that make the data start at a
    /// multiple of `pad.align` in the receiver's buffer, where the message starts at `origin`
    /// (the transport header's length). Returns the padded message and, for each insertion,
    /// its offset in the unpadded message and its length, so Read chunk Positions after it
    /// can be moved along. Nothing is copied: the parts are split and zero parts put between.
    pub fn aligned(&self, pad: &AlignPadding, origin: usize) -> (Encoded, Vec<(usize, usize)>) {
        let mut inserted = Vec::new();
        if !pad.is_valid() || self.pad_points.is_empty() {
            return (self.clone(), inserted);
        }
        let mut out = Vec::with_capacity(self.parts().len() + 2 * self.pad_points.len());
        let mut parts = self.parts().iter().cloned();
        let mut current = parts.next().unwrap_or_default();
        let mut at = 0usize; // unpadded offset of `current`'s first byte
        let mut added = 0usize;
        for &point in &self.pad_points {
            let (point, len) = point;
            if !pad.applies(len) {
                continue;
            }
            let n = pad.before(origin + point + added);
            if n == 0 {
                continue;
            }
            while at + current.len() < point {
                let Some(next) = parts.next() else { break };
                at += current.len();
                out.push(std::mem::replace(&mut current, next));
            }
            let split = (point - at).min(current.len());
            out.push(current.split_to(split));
            at += split;
            out.push(Bytes::from_static(&super::align::ZEROS[..n]));
            inserted.push((point, n));
            added += n;
        }
        out.push(current);
        out.extend(parts);
        out.retain(|p| !p.is_empty());
        (Encoded::from_parts(out), inserted)
    }

    /// The parts, in order.
    pub fn parts(&self) -> &[Bytes] {
        match &self.parts {
            Parts::One(one) => std::slice::from_ref(one),
            Parts::Many(many) => many,
        }
    }

    /// Takes the parts.
    pub fn into_parts(self) -> Vec<Bytes> {
        match self.parts {
            Parts::One(one) => vec![one],
            Parts::Many(many) => many,
        }
    }

    /// Hands the parts, in order, to `f` (without the list [`Encoded::into_parts`] allocates
    /// for a single part).
    pub fn for_each_part(self, f: impl FnMut(Bytes)) {
        match self.parts {
            Parts::One(one) => std::iter::once(one).for_each(f),
            Parts::Many(many) => many.into_iter().for_each(f),
        }
    }

    /// Total length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the message is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The message as one contiguous buffer, consuming it: the single part itself when there
    /// is one (not even a reference-count update), one copy otherwise.
    pub fn into_bytes(self) -> Bytes {
        match self.parts {
            Parts::One(one) => one,
            Parts::Many(mut many) if many.len() == 1 => many.pop().unwrap_or_default(),
            Parts::Many(many) => concat(&many, self.len),
        }
    }

    /// The message as one contiguous buffer: free when there is one part, one copy otherwise.
    pub fn to_bytes(&self) -> Bytes {
        match self.parts() {
            [] => Bytes::new(),
            [one] => one.clone(),
            many => concat(many, self.len),
        }
    }
}

fn concat(parts: &[Bytes], len: usize) -> Bytes {
    let mut out = BytesMut::with_capacity(len);
    for p in parts {
        out.extend_from_slice(p);
    }
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_put_back_inline_equal_the_message_never_chunked() {
        // Three DDP-eligible items of odd and even lengths between plain words, some gathered
        // into parts of their own: put back, the message is what no chunking would give.
        let items = [
            Bytes::from(vec![1u8; 1501]),
            Bytes::from(vec![2u8; 6]),
            Bytes::from(vec![3u8; 3000]),
        ];
        let encode = |enc: &mut Encoder| {
            enc.put_u32(0xaaaa);
            for (i, item) in items.iter().enumerate() {
                enc.put_ddp_opaque(item, None).unwrap();
                enc.put_u32(i as u32);
            }
        };
        let mut plain = Encoder::new();
        encode(&mut plain);
        let policy = crate::xdr::ThresholdPolicy {
            inline_threshold: 100,
            min_ddp_size: 1,
        };
        let mut chunked = Encoder::for_call(policy);
        encode(&mut chunked);
        let (reduced, moved) = chunked.finish_with_chunks();
        assert_eq!(moved.len(), 3);
        let back = reduced.with_reads_inline(&moved);
        assert_eq!(back.to_bytes(), plain.finish().to_bytes());
    }

    #[test]
    fn a_recording_encoder_keeps_every_item_inline_and_marks_each() {
        let data = Bytes::from(vec![1u8; 2000]);
        let fixed = Bytes::from_static(&[2; 8]);
        let encode = |enc: &mut Encoder| {
            enc.put_u32(1);
            enc.put_ddp_opaque(&data, None).unwrap();
            enc.put_ddp_fixed_opaque(&fixed, 8).unwrap();
            enc.put_ddp_array(&[5u32, 6], None).unwrap();
            enc.put_opaque(&Bytes::from_static(b"abc"), None).unwrap();
        };
        let mut plain = Encoder::new();
        encode(&mut plain);
        let mut recording = Encoder::recording();
        encode(&mut recording);
        assert!(recording.moved_items().is_empty());
        let (encoded, marks) = recording.finish_recorded();
        assert_eq!(encoded.to_bytes(), plain.finish().to_bytes());
        let at = |offset, len, kind| DdpMark { offset, len, kind };
        assert_eq!(
            marks,
            [
                at(8, 2000, DdpKind::Counted),
                at(2008, 8, DdpKind::Fixed),
                at(2020, 8, DdpKind::Array),
            ]
        );
        // Counted opaque data, DDP-eligible or not.
        assert_eq!(encoded.pad_points(), &[(8, 2000), (2032, 3)]);
    }

    #[test]
    fn one_part_message_is_handed_over_whole() {
        let mut enc = Encoder::new();
        enc.put_u32(7);
        enc.put_u64(0x0102_0304_0506_0708);
        let encoded = enc.finish();
        assert_eq!(encoded.len(), 12);
        assert_eq!(encoded.parts().len(), 1);
        let expected = [0, 0, 0, 7, 1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(&encoded.to_bytes()[..], &expected);
        assert_eq!(&encoded.into_bytes()[..], &expected);
    }

    #[test]
    fn gathered_parts_keep_order_and_concatenate() {
        let payload = Bytes::from(vec![0xab; DEFAULT_GATHER_THRESHOLD + 1]);
        let mut enc = Encoder::new();
        enc.put_u32(1);
        enc.put_opaque(&payload, None).unwrap();
        enc.put_u32(2);
        let encoded = enc.finish();
        let parts = encoded.parts();
        assert_eq!(parts.len(), 3, "head, payload, tail with padding");
        assert_eq!(parts[1].as_ptr(), payload.as_ptr(), "payload not copied");
        let whole = encoded.clone().into_bytes();
        assert_eq!(whole.len(), encoded.len());
        assert_eq!(whole, encoded.to_bytes());
        assert_eq!(&whole[..8], &[0, 0, 0, 1, 0, 0, 4, 1]);
        assert_eq!(&whole[whole.len() - 4..], &[0, 0, 0, 2]);
    }

    #[test]
    fn take_starts_the_next_message_and_reuses_the_buffer() {
        let mut enc = Encoder::with_capacity(64);
        enc.put_u32(1);
        let first = enc.take();
        assert_eq!(&first.to_bytes()[..], &[0, 0, 0, 1]);
        assert!(enc.is_empty());
        enc.put_u32(2);
        enc.put_gathered(Bytes::from(vec![7; DEFAULT_GATHER_THRESHOLD]));
        enc.put_u32(3);
        let second = enc.take();
        assert_eq!(second.parts().len(), 3);
        assert_eq!(second.len(), 8 + DEFAULT_GATHER_THRESHOLD);
        assert!(enc.is_empty());
        let first_ptr = first.parts()[0].as_ptr();
        drop((first, second));
        // Every message taken has been dropped: the next ones reuse the original buffer.
        let mut reused = false;
        for i in 0..64u32 {
            enc.put_u32(i);
            let m = enc.take();
            assert_eq!(&m.to_bytes()[..], &i.to_be_bytes());
            reused |= m.parts()[0].as_ptr() == first_ptr;
        }
        assert!(reused, "the buffer was reclaimed once it was free");
    }

    #[test]
    fn equality_compares_bytes_not_layout() {
        let mut a = Encoder::new();
        a.put_u32(5);
        let one = a.finish();
        let mut b = Encoder::new();
        b.put_gathered(Bytes::from_static(&[0, 0, 0, 5]));
        let many = b.finish();
        assert_eq!(one, many);
        assert_eq!(Encoder::new().finish().into_bytes(), Bytes::new());
        assert_eq!(Encoded::default().parts().len(), 0);
    }

    /// The usual policy is held as it is and any other boxed: both decide the same way as
    /// the policy itself.
    #[test]
    fn threshold_and_custom_policies_both_decide() {
        use crate::xdr::{ChunkPolicy, DdpItem, Placement, ThresholdPolicy};

        #[derive(Debug)]
        struct Everything;
        impl ChunkPolicy for Everything {
            fn place(&self, _item: &DdpItem) -> Placement {
                Placement::Chunk
            }
        }
        let small = Bytes::from_static(b"abc");
        let big = Bytes::from(vec![1u8; 4096]);
        let moved = |mut enc: Encoder| {
            enc.put_ddp_opaque(&small, None).unwrap();
            enc.put_ddp_opaque(&big, None).unwrap();
            enc.finish_with_chunks().1.len()
        };
        let threshold = ThresholdPolicy {
            inline_threshold: 1024,
            min_ddp_size: 1024,
        };
        assert_eq!(moved(Encoder::for_call(threshold)), 1);
        assert_eq!(moved(Encoder::for_call(Everything)), 2);
    }
}

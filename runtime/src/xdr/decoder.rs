//! Reading XDR from a buffer without copying.

use bytes::Bytes;

use super::ddp::ReceivedChunks;
use super::{padding, BlockRef, Decode, Error, ErrorKind, Limits, Result, XdrString, BLOCK};

/// Reads XDR items from a borrowed buffer.
///
/// Over a [`Bytes`] ([`Decoder::new`]), opaque data and strings come back as [`Bytes`] slices
/// that share the input's allocation: no payload byte is copied. Over a plain slice
/// ([`Decoder::from_slice`]), they are copied out. The decoder borrows its input rather than
/// owning a reference count, so decoding a header touches no atomic counter. Every length and
/// count is checked against the declared maximum, the configured [`Limits`] and the input
/// that remains before anything is allocated. No method panics, whatever the input.
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    data: &'a [u8],
    /// The buffer `data` is the whole of, when it is one: opaque items are slices of it.
    owner: Option<&'a Bytes>,
    pos: usize,
    /// Offset of `data[0]` in the whole message, so errors report message offsets.
    base: usize,
    limits: Limits,
    depth: u32,
    chunks: Option<Box<ReceivedChunks>>,
    /// Bytes (with round-up) re-inserted from chunks so far: the offset in the reconstructed
    /// XDR stream is `base + pos + reinserted` (seed 002 section 3.5).
    reinserted: usize,
}

impl<'a> Decoder<'a> {
    /// A decoder over `buf` with default [`Limits`] (any size up to `Limits::DEFAULT`);
    /// opaque data and strings are zero-copy slices of `buf`.
    pub fn new(buf: &'a Bytes) -> Self {
        Decoder {
            owner: Some(buf),
            ..Decoder::from_slice(buf)
        }
    }

    /// A decoder over `data` with default [`Limits`]; opaque data and strings are copied out
    /// of it (use [`Decoder::new`] to share them with the input instead).
    pub fn from_slice(data: &'a [u8]) -> Self {
        Decoder {
            data,
            owner: None,
            pos: 0,
            base: 0,
            limits: Limits::DEFAULT,
            depth: 0,
            chunks: None,
            reinserted: 0,
        }
    }

    /// A decoder over `buf` with `limits`; refuses a buffer over `limits.max_message`.
    pub fn with_limits(buf: &'a Bytes, limits: Limits) -> Result<Self> {
        if buf.len() > limits.max_message {
            return Err(Error::new(
                ErrorKind::LimitExceeded {
                    limit: "message size",
                    value: buf.len() as u64,
                    maximum: limits.max_message as u64,
                },
                0,
            ));
        }
        Ok(Decoder {
            limits,
            ..Decoder::new(buf)
        })
    }

    /// Sets the message offset of the first byte of this decoder's input, for error reports
    /// and for chunk positions when a decoder reads part of a larger message.
    pub fn set_base_offset(&mut self, base: usize) {
        self.base = base;
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The current position as a message offset.
    pub fn offset(&self) -> usize {
        self.base + self.pos
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// The unread rest of the input, without consuming it.
    pub fn rest(&self) -> Bytes {
        self.bytes(self.pos, self.data.len())
    }

    /// Input bytes `start..end` (in range): a slice of the owner, or a copy.
    fn bytes(&self, start: usize, end: usize) -> Bytes {
        match self.owner {
            Some(owner) => owner.slice(start..end),
            None => Bytes::copy_from_slice(&self.data[start..end]),
        }
    }

    /// An error of `kind` at the current offset.
    pub fn error(&self, kind: ErrorKind) -> Error {
        Error::new(kind, self.offset())
    }

    /// Succeeds only if all input has been consumed.
    pub fn finish(self) -> Result<()> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(self.error(ErrorKind::TrailingBytes(n))),
        }
    }

    #[inline]
    fn take<const N: usize>(&mut self) -> Result<[u8; N]> {
        let end = self.pos + N;
        match self.data.get(self.pos..end) {
            Some(s) => {
                let mut out = [0u8; N];
                out.copy_from_slice(s);
                self.pos = end;
                Ok(out)
            }
            None => Err(self.truncated(N)),
        }
    }

    fn truncated(&self, needed: usize) -> Error {
        self.error(ErrorKind::Truncated {
            needed,
            available: self.remaining(),
        })
    }

    /// Reads the next `N` bytes as a [`BlockRef`], with one bounds check: generated code
    /// decodes a run of consecutive fixed-size numeric fields from one block.
    #[inline]
    pub fn get_block<const N: usize>(&mut self) -> Result<BlockRef<'a, N>> {
        let data: &'a [u8] = self.data;
        match data
            .get(self.pos..)
            .and_then(|rest| rest.first_chunk::<N>())
        {
            Some(block) => {
                self.pos += N;
                Ok(BlockRef(block))
            }
            None => Err(self.truncated(N)),
        }
    }

    /// The next `N` bytes as a [`BlockRef`], without consuming them; `None` when fewer
    /// remain. For a reader that recognises a common shape at a glance and otherwise decodes
    /// as usual.
    #[inline]
    pub fn peek_block<const N: usize>(&self) -> Option<BlockRef<'a, N>> {
        let data: &'a [u8] = self.data;
        data.get(self.pos..)
            .and_then(|rest| rest.first_chunk::<N>())
            .map(BlockRef)
    }

    /// Reads a present flag (RFC 4506 section 4.19) and, when it is TRUE, the next `N`
    /// bytes as a [`BlockRef`]: generated code reads optional data or a list element of a fixed
    /// size this way, with one bounds check for the flag and the value. Errors are those of
    /// [`get_present`](Self::get_present) followed by [`get_block`](Self::get_block).
    #[inline]
    pub fn get_present_block<const N: usize>(&mut self) -> Result<Option<BlockRef<'a, N>>> {
        let data: &'a [u8] = self.data;
        let rest = data.get(self.pos..).unwrap_or_default();
        if let Some((flag, value)) = rest.split_first_chunk::<BLOCK>() {
            match (u32::from_be_bytes(*flag), value.first_chunk::<N>()) {
                (0, _) => {
                    self.pos += BLOCK;
                    return Ok(None);
                }
                (1, Some(value)) => {
                    let value = BlockRef(value);
                    self.pos += BLOCK + N;
                    return Ok(Some(value));
                }
                _ => {}
            }
        }
        // A bad flag, or input that ends early.
        if self.get_present()? {
            self.get_block().map(Some)
        } else {
            Ok(None)
        }
    }

    /// Reads an unsigned 32-bit integer.
    #[inline]
    pub fn get_u32(&mut self) -> Result<u32> {
        self.take::<4>().map(u32::from_be_bytes)
    }

    /// Reads a signed 32-bit integer.
    #[inline]
    pub fn get_i32(&mut self) -> Result<i32> {
        self.take::<4>().map(i32::from_be_bytes)
    }

    /// Reads an unsigned hyper integer.
    #[inline]
    pub fn get_u64(&mut self) -> Result<u64> {
        self.take::<8>().map(u64::from_be_bytes)
    }

    /// Reads a signed hyper integer.
    #[inline]
    pub fn get_i64(&mut self) -> Result<i64> {
        self.take::<8>().map(i64::from_be_bytes)
    }

    /// Reads a single-precision float.
    pub fn get_f32(&mut self) -> Result<f32> {
        self.take::<4>().map(f32::from_be_bytes)
    }

    /// Reads a double-precision float.
    pub fn get_f64(&mut self) -> Result<f64> {
        self.take::<8>().map(f64::from_be_bytes)
    }

    /// Reads a boolean; anything but 0 or 1 is an error (RFC 4506 section 4.4).
    #[inline]
    pub fn get_bool(&mut self) -> Result<bool> {
        match self.get_u32()? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(self.invalid_bool(v)),
        }
    }

    /// The error for a boolean that is neither 0 nor 1, just read.
    #[cold]
    fn invalid_bool(&self, v: u32) -> Error {
        Error::new(ErrorKind::InvalidBool(v), self.offset() - BLOCK)
    }

    /// Reads the present flag of optional data (RFC 4506 section 4.19).
    #[inline]
    pub fn get_present(&mut self) -> Result<bool> {
        self.get_bool()
    }

    /// Reads `len` bytes of fixed-length opaque data plus padding, as a slice of the input.
    pub fn get_fixed_opaque(&mut self, len: usize) -> Result<Bytes> {
        let padded = len
            .checked_add(padding(len))
            .ok_or_else(|| self.truncated(usize::MAX))?;
        if padded > self.remaining() {
            return Err(self.truncated(padded));
        }
        let data = self.bytes(self.pos, self.pos + len);
        self.check_padding(self.pos + len, padded - len)?;
        self.pos += padded;
        Ok(data)
    }

    /// RFC 4506 section 4.10: opaque data is "followed by enough (0 to 3) residual zero
    /// bytes"; refused otherwise unless [`Limits::strict_padding`] is off.
    fn check_padding(&self, at: usize, n: usize) -> Result<()> {
        if self.limits.strict_padding && self.data[at..at + n].iter().any(|&b| b != 0) {
            return Err(Error::new(ErrorKind::NonZeroPadding, self.base + at));
        }
        Ok(())
    }

    /// Reads a length-prefixed item's length, checked against `max` (the declared maximum, if
    /// any) and against the input left. Used for variable-length opaque data and strings.
    pub fn get_length(&mut self, max: Option<u32>) -> Result<usize> {
        let at = self.offset();
        let len = self.get_u32()?;
        if let Some(max) = max {
            if len > max {
                return Err(Error::new(
                    ErrorKind::ExceedsDeclaredMaximum {
                        length: len.into(),
                        maximum: max,
                    },
                    at,
                ));
            }
        }
        Ok(len as usize)
    }

    /// Reads variable-length opaque data (RFC 4506 section 4.10) as a slice of the input.
    pub fn get_opaque(&mut self, max: Option<u32>) -> Result<Bytes> {
        let len = self.get_length(max)?;
        self.skip_alignment(len)?;
        self.get_fixed_opaque(len)
    }

    /// RDMA_MSGP: skips the padding the sender put between a counted item's length and its
    /// data (seed 000 section 3.5: "the XDR decode will skip over the appropriate padding as
    /// indicated by rdma_align and the current XDR stream position").
    #[inline]
    fn skip_alignment(&mut self, len: usize) -> Result<()> {
        let Some((pad, origin)) = self.chunks.as_ref().and_then(|c| c.alignment()) else {
            return Ok(());
        };
        if !pad.applies(len) {
            return Ok(());
        }
        self.skip(pad.before(origin + self.base + self.pos))
    }

    /// Reads a string (RFC 4506 section 4.11) as a slice of the input.
    pub fn get_string(&mut self, max: Option<u32>) -> Result<XdrString> {
        self.get_opaque(max).map(XdrString::from_bytes)
    }

    /// Reads the element count of a variable-length array (RFC 4506 section 4.13).
    ///
    /// The count is checked against `max`, [`Limits::max_elements`] and, when each element
    /// takes at least `min_element_len` bytes, against the input left, so a hostile count never
    /// causes an allocation the input cannot back.
    #[inline]
    pub fn get_count(&mut self, max: Option<u32>, min_element_len: usize) -> Result<usize> {
        let count = self.get_u32()?;
        let at = self.offset() - BLOCK;
        if let Some(max) = max {
            if count > max {
                return Err(Error::new(
                    ErrorKind::ExceedsDeclaredMaximum {
                        length: count.into(),
                        maximum: max,
                    },
                    at,
                ));
            }
        }
        self.check_count(count as u64, min_element_len, at)?;
        Ok(count as usize)
    }

    /// Checks that `count` elements of at least `min_element_len` bytes each are within
    /// [`Limits::max_elements`] and the input left.
    #[inline]
    pub fn check_count(&self, count: u64, min_element_len: usize, at: usize) -> Result<()> {
        if count > self.limits.max_elements as u64
            || count.saturating_mul(min_element_len as u64) > self.remaining() as u64
        {
            return Err(self.bad_count(count, at));
        }
        Ok(())
    }

    /// The error for a count that [`check_count`](Self::check_count) refuses.
    #[cold]
    fn bad_count(&self, count: u64, at: usize) -> Error {
        if count > self.limits.max_elements as u64 {
            Error::new(
                ErrorKind::LimitExceeded {
                    limit: "element count",
                    value: count,
                    maximum: self.limits.max_elements as u64,
                },
                at,
            )
        } else {
            Error::new(
                ErrorKind::CountExceedsInput {
                    count,
                    remaining: self.remaining(),
                },
                at,
            )
        }
    }

    /// Enters one level of recursive nesting; pair with [`Decoder::leave`].
    pub fn enter(&mut self) -> Result<()> {
        if self.depth >= self.limits.max_depth {
            return Err(self.error(ErrorKind::TooDeep {
                maximum: self.limits.max_depth,
            }));
        }
        self.depth += 1;
        Ok(())
    }

    /// Leaves one level of recursive nesting.
    pub fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// Skips `n` bytes (used by chunk-aware decoders and by readers of unknown extensions).
    pub fn skip(&mut self, n: usize) -> Result<()> {
        if n > self.remaining() {
            return Err(self.truncated(n));
        }
        self.pos += n;
        Ok(())
    }

    /// Supplies the chunk data that came with this message, so DDP-eligible items are taken
    /// from chunks where they were moved.
    pub fn set_chunks(&mut self, chunks: ReceivedChunks) -> &mut Self {
        self.chunks = Some(Box::new(chunks));
        self
    }

    /// Takes back the chunk data, to check with [`ReceivedChunks::finish`] that every Read
    /// chunk was used and to learn which Write chunks were not.
    pub fn take_chunks(&mut self) -> Option<ReceivedChunks> {
        self.chunks.take().map(|c| *c)
    }

    fn xdr_offset(&self) -> usize {
        self.base + self.pos + self.reinserted
    }

    fn take_chunk(&mut self, count: Option<usize>) -> Result<Option<Bytes>> {
        let position = self.xdr_offset();
        let Some(chunks) = self.chunks.as_mut() else {
            return Ok(None);
        };
        let data = chunks.take(position, count)?;
        if let Some(d) = &data {
            self.reinserted += d.len() + padding(d.len());
        }
        Ok(data)
    }

    /// Reads DDP-eligible variable-length opaque data: the length from the inline stream, the
    /// bytes from the chunk at this position if the item was moved, else inline.
    pub fn get_ddp_opaque(&mut self, max: Option<u32>) -> Result<Bytes> {
        let len = self.get_length(max)?;
        match self.take_chunk(Some(len))? {
            Some(data) => Ok(data),
            None => {
                self.skip_alignment(len)?;
                self.get_fixed_opaque(len)
            }
        }
    }

    /// Reads DDP-eligible fixed-length opaque data.
    pub fn get_ddp_fixed_opaque(&mut self, len: usize) -> Result<Bytes> {
        match self.take_chunk(Some(len))? {
            Some(data) => Ok(data),
            None => self.get_fixed_opaque(len),
        }
    }

    /// Reads a DDP-eligible string.
    pub fn get_ddp_string(&mut self, max: Option<u32>) -> Result<XdrString> {
        self.get_ddp_opaque(max).map(XdrString::from_bytes)
    }

    /// Reads a DDP-eligible variable-length array: the count inline, the elements from the
    /// chunk if the array was moved (the chunk must hold exactly those elements, plus at most
    /// round-up), else inline.
    pub fn get_ddp_array<T: Decode>(&mut self, max: Option<u32>) -> Result<Vec<T>> {
        let at = self.offset();
        let count = self.get_length(max)?;
        let Some(data) = self.take_chunk(None)? else {
            self.pos -= BLOCK;
            return super::decode_array(self, max);
        };
        let mut inner = Decoder::with_limits(&data, self.limits)?;
        inner.depth = self.depth;
        inner.check_count(count as u64, T::MIN_ENCODED_LEN, at)?;
        let items = (0..count)
            .map(|_| T::decode(&mut inner))
            .collect::<Result<Vec<T>>>()?;
        if inner.remaining() >= BLOCK {
            return Err(Error::new(
                ErrorKind::ChunkLengthMismatch {
                    inline_count: count as u64,
                    chunk_len: inner.data.len() as u64,
                },
                at,
            ));
        }
        Ok(items)
    }
}

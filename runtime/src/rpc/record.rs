//! Record marking (RFC 5531 section 11): how ONC RPC messages are delimited on a byte stream
//! such as TCP, without any I/O.
//!
//! RFC 5531 section 11: "A record is composed of one or more record fragments. A record
//! fragment is a four-byte header followed by 0 to (2**31) - 1 bytes of fragment data. [...]
//! a boolean that indicates whether the fragment is the last fragment of the record (bit value
//! 1 implies the fragment is the last fragment) and a 31-bit unsigned binary value that is the
//! length in bytes of the fragment's data."
//!
//! What is legal, and therefore accepted:
//! * a zero-length fragment, last or not (the RFC's range starts at 0); it adds nothing to the
//!   record and costs the reader no memory;
//! * a record made of a single zero-length last fragment: an empty record, handed out as such
//!   (it is not an RPC message; the layer above drops it);
//! * any number of fragments per record, as long as their lengths add up to at most the
//!   reader's configured bound.
//!
//! [`RecordReader`] assembles records from bytes pushed into it; [`RecordWriter`] frames a
//! message as fragments, as a gather list that shares the message's own [`Bytes`].

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::error::TransportError;

/// The bit of a fragment header that marks the last fragment of a record (RFC 5531 section 11).
pub const LAST_FRAGMENT: u32 = 0x8000_0000;

/// The longest fragment: its length is 31 bits (RFC 5531 section 11).
pub const MAX_FRAGMENT: usize = 0x7fff_ffff;

/// The length of a fragment header.
pub const FRAGMENT_HEADER_LEN: usize = 4;

/// Headers are cut from one allocation of this many bytes (1024 headers).
const HEADER_ARENA: usize = 4096;

/// Why a stream of records cannot be read any further.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The fragment headers of one record announce more bytes than the reader accepts. Found
    /// as soon as the header that crosses the bound arrives, before its data is buffered.
    #[error("a record of at least {len} bytes exceeds the limit of {max}")]
    TooLarge {
        /// The record's length as announced by its fragment headers so far.
        len: u64,
        /// The reader's bound.
        max: u64,
    },
    /// The stream ended inside a record.
    #[error("the stream ended inside a record ({buffered} bytes of it received)")]
    Truncated {
        /// Bytes of the unfinished record (headers excluded) that had arrived.
        buffered: u64,
    },
}

impl From<RecordError> for TransportError {
    fn from(e: RecordError) -> TransportError {
        match e {
            RecordError::TooLarge { len, max } => TransportError::TooLarge { len, max },
            RecordError::Truncated { .. } => TransportError::Closed,
        }
    }
}

/// Where the reader is in the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// The next bytes are a fragment header.
    Header,
    /// Inside a fragment: `remaining` data bytes to come; `last` when it ends its record.
    Data { remaining: usize, last: bool },
}

/// Assembles records from a byte stream (sans-IO).
///
/// Contract: append received bytes with [`push`](Self::push), or read straight into
/// [`buffer_mut`](Self::buffer_mut) (appending only, after reserving about
/// [`wanted`](Self::wanted) bytes), then call [`next_record`](Self::next_record) until it
/// returns `Ok(None)`. At the end of the stream, [`finish`](Self::finish) says whether the
/// stream ended between records.
///
/// A record that is one fragment (with at most empty fragments before it) is handed out as a
/// slice of the input buffer, without a copy; the fragments of a longer record are copied
/// together once. After an error the stream is unusable (the connection must be closed) and
/// every later call returns the same error.
#[derive(Debug)]
pub struct RecordReader {
    input: BytesMut,
    state: State,
    /// Data of the current record's earlier non-empty fragments.
    partial: BytesMut,
    /// The sum of the current record's fragment lengths announced so far.
    announced: u64,
    /// A fragment header of the current record has been read.
    in_record: bool,
    max_record: u64,
    failed: Option<RecordError>,
}

impl RecordReader {
    /// A reader that accepts records of at most `max_record` bytes (headers excluded).
    pub fn new(max_record: usize) -> RecordReader {
        RecordReader {
            input: BytesMut::new(),
            state: State::Header,
            partial: BytesMut::new(),
            announced: 0,
            in_record: false,
            max_record: max_record as u64,
            failed: None,
        }
    }

    /// The largest record accepted.
    pub fn max_record(&self) -> usize {
        self.max_record as usize
    }

    /// Appends received bytes (one copy; see [`buffer_mut`](Self::buffer_mut) to avoid it).
    pub fn push(&mut self, data: &[u8]) {
        self.input.extend_from_slice(data);
    }

    /// The input buffer, for a driver to read into directly (`read_buf`). Only append to it.
    pub fn buffer_mut(&mut self) -> &mut BytesMut {
        &mut self.input
    }

    /// How many more bytes the reader needs before it can make progress: the rest of the
    /// current fragment (bounded by the configured record size, since its header was
    /// checked), or what completes the next header. A driver reserves about this much, capped
    /// to what it is willing to allocate ahead of data actually received.
    pub fn wanted(&self) -> usize {
        match self.state {
            State::Header => FRAGMENT_HEADER_LEN.saturating_sub(self.input.len()),
            State::Data { remaining, .. } => remaining.saturating_sub(self.input.len()),
        }
    }

    /// True when no part of a record has been received: the stream may end here.
    pub fn is_idle(&self) -> bool {
        !self.in_record && self.input.is_empty()
    }

    /// The next complete record, `Ok(None)` when more input is needed.
    pub fn next_record(&mut self) -> Result<Option<Bytes>, RecordError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        loop {
            match self.state {
                State::Header => {
                    if self.input.len() < FRAGMENT_HEADER_LEN {
                        return Ok(None);
                    }
                    let word = self.input.get_u32();
                    let last = word & LAST_FRAGMENT != 0;
                    let len = (word & !LAST_FRAGMENT) as usize;
                    let announced = self.announced + len as u64;
                    // Checked on the header, before any of its data is buffered.
                    if announced > self.max_record {
                        let e = RecordError::TooLarge {
                            len: announced,
                            max: self.max_record,
                        };
                        self.failed = Some(e.clone());
                        return Err(e);
                    }
                    self.announced = announced;
                    self.in_record = true;
                    self.state = State::Data {
                        remaining: len,
                        last,
                    };
                }
                State::Data { remaining, last } if last && self.partial.is_empty() => {
                    // The record is this one fragment: hand out the input's own bytes.
                    if self.input.len() < remaining {
                        return Ok(None);
                    }
                    let record = self.input.split_to(remaining).freeze();
                    self.end_record();
                    return Ok(Some(record));
                }
                State::Data { remaining, last } => {
                    let take = remaining.min(self.input.len());
                    self.partial.extend_from_slice(&self.input[..take]);
                    self.input.advance(take);
                    let remaining = remaining - take;
                    if remaining > 0 {
                        self.state = State::Data { remaining, last };
                        return Ok(None);
                    }
                    if last {
                        let record = self.partial.split().freeze();
                        self.end_record();
                        return Ok(Some(record));
                    }
                    self.state = State::Header;
                }
            }
        }
    }

    /// Called at the end of the stream: `Ok` when it ended between records, or the error
    /// that made the stream unusable.
    pub fn finish(&self) -> Result<(), RecordError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.is_idle() {
            return Ok(());
        }
        Err(RecordError::Truncated {
            buffered: (self.partial.len() + self.input.len()) as u64,
        })
    }

    fn end_record(&mut self) {
        self.state = State::Header;
        self.announced = 0;
        self.in_record = false;
    }
}

/// Frames messages as records of fragments (sans-IO).
///
/// The output is a gather list for `write_vectored`: 4-byte headers (cut from one shared
/// allocation) interleaved with slices of the message's own parts, which are never copied.
#[derive(Debug)]
pub struct RecordWriter {
    max_fragment: usize,
    headers: BytesMut,
}

impl Default for RecordWriter {
    fn default() -> Self {
        RecordWriter::new(MAX_FRAGMENT)
    }
}

impl RecordWriter {
    /// A writer whose fragments carry at most `max_fragment` bytes of data (clamped to
    /// 1..=[`MAX_FRAGMENT`]).
    pub fn new(max_fragment: usize) -> RecordWriter {
        RecordWriter {
            max_fragment: max_fragment.clamp(1, MAX_FRAGMENT),
            headers: BytesMut::new(),
        }
    }

    /// The longest fragment this writer emits.
    pub fn max_fragment(&self) -> usize {
        self.max_fragment
    }

    /// Appends one record carrying the concatenation of `parts` to `out`, and returns the
    /// record's length (headers excluded). Empty parts are left out; an empty message becomes
    /// one empty last fragment.
    pub fn frame(&mut self, parts: &[Bytes], out: &mut Vec<Bytes>) -> usize {
        let total: usize = parts.iter().map(Bytes::len).sum();
        let mut left = total;
        let mut parts = parts.iter().filter(|p| !p.is_empty()).cloned();
        let mut current: Option<Bytes> = None;
        loop {
            let fragment = left.min(self.max_fragment);
            left -= fragment;
            out.push(self.header(fragment, left == 0));
            let mut need = fragment;
            while need > 0 {
                let Some(mut part) = current.take().or_else(|| parts.next()) else {
                    break;
                };
                if part.len() <= need {
                    need -= part.len();
                    out.push(part);
                } else {
                    out.push(part.split_to(need));
                    current = Some(part);
                    need = 0;
                }
            }
            if left == 0 {
                return total;
            }
        }
    }

    fn header(&mut self, len: usize, last: bool) -> Bytes {
        if self.headers.capacity() < FRAGMENT_HEADER_LEN {
            self.headers.reserve(HEADER_ARENA);
        }
        // `len` is at most `max_fragment`, which fits 31 bits.
        let mut word = len as u32 & !LAST_FRAGMENT;
        if last {
            word |= LAST_FRAGMENT;
        }
        self.headers.put_u32(word);
        self.headers.split().freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn header(len: u32, last: bool) -> [u8; 4] {
        (len | if last { LAST_FRAGMENT } else { 0 }).to_be_bytes()
    }

    fn concat(parts: &[Bytes]) -> Vec<u8> {
        parts.iter().flat_map(|p| p.iter().copied()).collect()
    }

    fn read_all(reader: &mut RecordReader) -> Vec<Bytes> {
        let mut out = Vec::new();
        while let Some(r) = reader.next_record().unwrap() {
            out.push(r);
        }
        out
    }

    /// Two records: "abc" in one fragment, then "hello world" in three (one empty).
    fn sample_stream() -> Vec<u8> {
        let mut s = Vec::new();
        s.extend_from_slice(&header(3, true));
        s.extend_from_slice(b"abc");
        s.extend_from_slice(&header(5, false));
        s.extend_from_slice(b"hello");
        s.extend_from_slice(&header(0, false));
        s.extend_from_slice(&header(6, true));
        s.extend_from_slice(b" world");
        s
    }

    #[test]
    fn accepts_records_of_several_fragments() {
        let mut r = RecordReader::new(64);
        r.push(&sample_stream());
        let records = read_all(&mut r);
        assert_eq!(records, vec![&b"abc"[..], &b"hello world"[..]]);
        assert!(r.is_idle());
        assert_eq!(r.finish(), Ok(()));
    }

    #[test]
    fn accepts_a_stream_pushed_one_byte_at_a_time() {
        let stream = sample_stream();
        let mut r = RecordReader::new(64);
        let mut records = Vec::new();
        for (i, b) in stream.iter().enumerate() {
            r.push(&[*b]);
            records.extend(read_all(&mut r));
            // A record comes out exactly when its last byte arrives.
            let expected = match i + 1 {
                n if n < 7 => 0,
                n if n < stream.len() => 1,
                _ => 2,
            };
            assert_eq!(records.len(), expected, "after {} bytes", i + 1);
        }
        assert_eq!(records, vec![&b"abc"[..], &b"hello world"[..]]);
    }

    #[test]
    fn accepts_every_split_of_the_stream_in_two() {
        let stream = sample_stream();
        for cut in 0..=stream.len() {
            let mut r = RecordReader::new(64);
            r.push(&stream[..cut]);
            let mut records = read_all(&mut r);
            r.push(&stream[cut..]);
            records.extend(read_all(&mut r));
            assert_eq!(records, vec![&b"abc"[..], &b"hello world"[..]], "cut {cut}");
        }
    }

    #[test]
    fn accepts_empty_fragments_and_an_empty_record() {
        let mut r = RecordReader::new(0);
        r.push(&header(0, false));
        r.push(&header(0, false));
        r.push(&header(0, true));
        assert_eq!(r.next_record(), Ok(Some(Bytes::new())));
        assert_eq!(r.next_record(), Ok(None));
        assert!(r.is_idle());
    }

    #[test]
    fn a_single_fragment_record_is_not_copied() {
        let mut r = RecordReader::new(64);
        r.push(&header(4, true));
        r.push(b"wxyz");
        let start = r.buffer_mut().as_ptr() as usize;
        let record = r.next_record().unwrap().unwrap();
        assert_eq!(record.as_ptr() as usize, start + 4, "a slice of the input");
    }

    #[test]
    fn accepts_a_record_of_exactly_the_bound() {
        let mut r = RecordReader::new(8);
        r.push(&header(5, false));
        r.push(b"01234");
        r.push(&header(3, true));
        r.push(b"567");
        assert_eq!(r.next_record().unwrap().unwrap(), &b"01234567"[..]);
    }

    #[test]
    fn rejects_a_fragment_over_the_bound_on_its_header() {
        let mut r = RecordReader::new(100);
        r.push(&header(0x7fff_ffff, true));
        assert_eq!(
            r.next_record(),
            Err(RecordError::TooLarge {
                len: 0x7fff_ffff,
                max: 100
            })
        );
        // Nothing of the announced data was waited for or buffered, and the stream stays
        // failed.
        assert!(r.buffer_mut().is_empty());
        assert!(r.next_record().is_err());
        assert!(r.finish().is_err());
    }

    #[test]
    fn rejects_fragments_that_add_up_over_the_bound() {
        let mut r = RecordReader::new(10);
        r.push(&header(6, false));
        r.push(b"012345");
        assert_eq!(r.next_record(), Ok(None));
        // The second header crosses the bound: refused before its data arrives.
        r.push(&header(5, true));
        assert_eq!(
            r.next_record(),
            Err(RecordError::TooLarge { len: 11, max: 10 })
        );
    }

    #[test]
    fn the_bound_applies_per_record() {
        let mut r = RecordReader::new(4);
        for _ in 0..3 {
            r.push(&header(4, true));
            r.push(b"abcd");
        }
        assert_eq!(read_all(&mut r).len(), 3);
    }

    #[test]
    fn rejects_every_truncation_inside_a_record() {
        let stream = sample_stream();
        // The first record ends after 7 bytes, the second at the end.
        for cut in 0..stream.len() {
            let mut r = RecordReader::new(64);
            r.push(&stream[..cut]);
            let _ = read_all(&mut r);
            let between_records = cut == 0 || cut == 7;
            assert_eq!(r.finish().is_ok(), between_records, "cut {cut}");
            if !between_records {
                assert!(matches!(r.finish(), Err(RecordError::Truncated { .. })));
            }
        }
    }

    #[test]
    fn a_zero_length_fragment_then_the_end_is_truncation() {
        let mut r = RecordReader::new(64);
        r.push(&header(0, false));
        assert_eq!(r.next_record(), Ok(None));
        assert_eq!(r.finish(), Err(RecordError::Truncated { buffered: 0 }));
    }

    #[test]
    fn frames_one_fragment_by_default_without_copying() {
        let payload = Bytes::from(vec![7u8; 5000]);
        let parts = [Bytes::from_static(b"head"), payload.clone()];
        let mut out = Vec::new();
        let len = RecordWriter::default().frame(&parts, &mut out);
        assert_eq!(len, 5004);
        assert_eq!(out.len(), 3);
        assert_eq!(&out[0][..], &header(5004, true));
        assert_eq!(
            out[2].as_ptr(),
            payload.as_ptr(),
            "the payload is not copied"
        );
    }

    #[test]
    fn frames_a_message_in_fragments_of_the_configured_size() {
        let parts = [
            Bytes::from_static(b"abcde"),
            Bytes::new(),
            Bytes::from_static(b"fghij"),
        ];
        let mut out = Vec::new();
        RecordWriter::new(4).frame(&parts, &mut out);
        let mut expected = Vec::new();
        for (chunk, last) in [(&b"abcd"[..], false), (b"efgh", false), (b"ij", true)] {
            expected.extend_from_slice(&header(chunk.len() as u32, last));
            expected.extend_from_slice(chunk);
        }
        assert_eq!(concat(&out), expected);
        assert!(out.iter().all(|p| !p.is_empty()));
    }

    #[test]
    fn frames_an_empty_message_as_one_empty_last_fragment() {
        let mut out = Vec::new();
        assert_eq!(RecordWriter::new(4).frame(&[], &mut out), 0);
        assert_eq!(concat(&out), header(0, true));
    }

    #[test]
    fn clamps_the_fragment_size() {
        assert_eq!(RecordWriter::new(0).max_fragment(), 1);
        assert_eq!(RecordWriter::new(usize::MAX).max_fragment(), MAX_FRAGMENT);
    }

    proptest! {
        #[test]
        fn records_round_trip_through_any_fragmenting_and_chunking(
            records in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..8),
            split_at in prop::collection::vec(0usize..300, 0..4),
            max_fragment in 1usize..200,
            chunks in prop::collection::vec(1usize..64, 1..16),
        ) {
            // Each record as several parts, cut at arbitrary points.
            let mut writer = RecordWriter::new(max_fragment);
            let mut wire = Vec::new();
            for record in &records {
                let bytes = Bytes::from(record.clone());
                let mut cuts: Vec<usize> = split_at.iter().map(|c| c % (record.len() + 1)).collect();
                cuts.sort_unstable();
                let mut parts = Vec::new();
                let mut at = 0;
                for c in cuts {
                    parts.push(bytes.slice(at..c));
                    at = c;
                }
                parts.push(bytes.slice(at..));
                writer.frame(&parts, &mut wire);
            }
            let stream = concat(&wire);
            let mut reader = RecordReader::new(300);
            let mut got = Vec::new();
            let mut at = 0;
            let mut i = 0;
            while at < stream.len() {
                let n = chunks[i % chunks.len()].min(stream.len() - at);
                reader.push(&stream[at..at + n]);
                at += n;
                i += 1;
                got.extend(read_all(&mut reader));
            }
            prop_assert_eq!(reader.finish(), Ok(()));
            let got: Vec<Vec<u8>> = got.into_iter().map(|b| b.to_vec()).collect();
            prop_assert_eq!(got, records);
        }
    }
}

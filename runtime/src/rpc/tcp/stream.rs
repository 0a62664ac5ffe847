//! Reading records from the reading half of a TCP connection.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, ReadBuf};

use crate::rpc::record::{RecordError, RecordReader};

/// The least a read asks the kernel for.
const MIN_READ: usize = 16 << 10;
/// The least room left in the buffer before a read: below it, a new buffer of at least
/// [`MIN_READ`] is reserved. Small records therefore share one buffer (a record handed out
/// keeps its buffer alive, so reserving a full [`MIN_READ`] before every read allocated a
/// fresh buffer per record).
const MIN_SPARE: usize = 4 << 10;
/// The most reserved ahead of data actually received, for a fragment whose header announced
/// more: a peer announcing a large record and sending nothing makes us allocate this, not the
/// whole record.
const MAX_READ_AHEAD: usize = 256 << 10;

/// Why no further record can be read.
#[derive(Debug, thiserror::Error)]
pub(super) enum ReadError {
    /// The record marking was broken (a record over the bound, a truncated record).
    #[error(transparent)]
    Record(#[from] RecordError),
    /// The socket failed.
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
}

/// A connection's [`RecordReader`], remembering when it has nothing more to give until more
/// bytes arrive, so that a poll goes straight to reading instead of asking the reader first
/// (two calls of `next_record` less per message, each side: after the record, and on the
/// wake-up that brings the next one).
pub(super) struct Records {
    reader: RecordReader,
    /// Nothing received since `next_record` last returned `Ok(None)`, or a record with no
    /// byte after it: asked again, it would return `Ok(None)` (it consumes only what it is
    /// given).
    starved: bool,
}

impl Records {
    /// Records of at most `max_record` bytes.
    pub(super) fn new(max_record: usize) -> Records {
        Records {
            reader: RecordReader::new(max_record),
            starved: false,
        }
    }

    /// The next record already received, if any.
    fn next_record(&mut self) -> Result<Option<Bytes>, RecordError> {
        if self.starved {
            return Ok(None);
        }
        let next = self.reader.next_record();
        // A record taken with nothing after it leaves the reader as wanting as `Ok(None)`.
        self.starved = match &next {
            Ok(None) => true,
            Ok(Some(_)) => self.reader.is_idle(),
            Err(_) => false,
        };
        next
    }

    /// Reads once into the buffer with `read` (which appends and says how many bytes; 0 at the
    /// end of the stream), room made first.
    fn read(
        &mut self,
        read: &mut impl FnMut(&mut BytesMut) -> Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        reserve(&mut self.reader);
        let n = ready!(read(self.reader.buffer_mut()))?;
        if n > 0 {
            self.starved = false;
        }
        Poll::Ready(Ok(n))
    }
}

/// Reads from `stream` until `records` yields a record (`Ok(None)` when the peer closed the
/// stream between records): `Pending`, with `cx` woken when the socket has more, until a
/// record is complete. Cancel-safe: bytes read are kept in `records`.
///
/// (`poll_read` straight into the buffer rather than waiting for readiness and then
/// `try_read`: tokio takes a short read as the end of the available data, which saves a
/// read returning EAGAIN per record.)
pub(super) fn poll_record<R: AsyncRead + Unpin>(
    cx: &mut Context<'_>,
    stream: &mut R,
    records: &mut Records,
) -> Poll<Result<Option<Bytes>, ReadError>> {
    read_records(records, |buffer| {
        let mut read = ReadBuf::uninit(buffer.spare_capacity_mut());
        ready!(Pin::new(&mut *stream).poll_read(cx, &mut read))?;
        let n = read.filled().len();
        // SAFETY: `poll_read` initialised the first `n` bytes of the spare capacity.
        unsafe { buffer.advance_mut(n) };
        Poll::Ready(Ok(n))
    })
}

/// The next record of `records`, reading into its buffer with `read` (which appends and says
/// how many bytes; 0 at the end of the stream) while it needs more.
fn read_records(
    records: &mut Records,
    mut read: impl FnMut(&mut BytesMut) -> Poll<io::Result<usize>>,
) -> Poll<Result<Option<Bytes>, ReadError>> {
    loop {
        if let Some(record) = records.next_record()? {
            return Poll::Ready(Ok(Some(record)));
        }
        match ready!(records.read(&mut read)) {
            Ok(0) => {
                records.reader.finish()?;
                return Poll::Ready(Ok(None));
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Poll::Ready(Err(e.into())),
        }
    }
}

/// Makes room in `reader`'s buffer for the next read.
fn reserve(reader: &mut RecordReader) {
    let ahead = reader_ahead(reader.wanted(), reader.buffer_mut().len());
    let buffer = reader.buffer_mut();
    if buffer.capacity() - buffer.len() < ahead.max(MIN_SPARE) {
        buffer.reserve(ahead.max(MIN_READ));
    }
}

/// How much to reserve for the rest of a fragment of which `wanted` bytes are still to come,
/// `buffered` bytes being already in: all of it, up to a bound that grows with what has
/// actually arrived.
fn reader_ahead(wanted: usize, buffered: usize) -> usize {
    wanted.min(MAX_READ_AHEAD.max(buffered))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    use crate::rpc::record::LAST_FRAGMENT;

    /// A stream that hands out the bytes it was given, one chunk per read at most, then
    /// `Pending` (or the end of the stream once `ended`).
    #[derive(Default)]
    struct Chunks {
        chunks: VecDeque<Vec<u8>>,
        ended: bool,
        reads: usize,
    }

    impl AsyncRead for Chunks {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            self.reads += 1;
            let Some(mut chunk) = self.chunks.pop_front() else {
                return match self.ended {
                    true => Poll::Ready(Ok(())),
                    false => Poll::Pending,
                };
            };
            let n = chunk.len().min(buf.remaining());
            buf.put_slice(&chunk[..n]);
            if n < chunk.len() {
                self.chunks.push_front(chunk.split_off(n));
            }
            Poll::Ready(Ok(()))
        }
    }

    struct Noop;

    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }

    /// `data` as fragments of the given lengths, the last one ending the record.
    fn fragments(data: &[u8], lengths: &[usize]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut at = 0;
        for (i, &len) in lengths.iter().enumerate() {
            let last = if i + 1 == lengths.len() {
                LAST_FRAGMENT
            } else {
                0
            };
            out.extend_from_slice(&(len as u32 | last).to_be_bytes());
            out.extend_from_slice(&data[at..at + len]);
            at += len;
        }
        assert_eq!(at, data.len());
        out
    }

    /// Polls `records` from `stream` until it is `Pending` or ends; the records, and whether
    /// it ended.
    fn poll_all(stream: &mut Chunks, records: &mut Records) -> (Vec<Vec<u8>>, bool) {
        let waker = Waker::from(Arc::new(Noop));
        let mut cx = Context::from_waker(&waker);
        let mut got = Vec::new();
        loop {
            match poll_record(&mut cx, stream, records) {
                Poll::Ready(Ok(Some(record))) => got.push(record.to_vec()),
                Poll::Ready(Ok(None)) => return (got, true),
                Poll::Ready(Err(e)) => panic!("unexpected error: {e}"),
                Poll::Pending => return (got, false),
            }
        }
    }

    #[test]
    fn records_cut_anywhere_and_packed_together_come_out_whole_and_in_order() {
        let one = fragments(b"first", &[5]);
        let two = fragments(b"second record", &[6, 0, 7]);
        let empty = fragments(b"", &[0]);
        let three = fragments(b"third", &[2, 3]);
        let stream_bytes = [one, two, empty, three].concat();
        // Every cut of the byte stream into two reads, and one byte per read.
        let mut cuts: Vec<Vec<Vec<u8>>> = (0..=stream_bytes.len())
            .map(|i| vec![stream_bytes[..i].to_vec(), stream_bytes[i..].to_vec()])
            .collect();
        cuts.push(stream_bytes.iter().map(|&b| vec![b]).collect());
        let expected: Vec<Vec<u8>> = vec![
            b"first".to_vec(),
            b"second record".to_vec(),
            Vec::new(),
            b"third".to_vec(),
        ];
        for chunks in cuts {
            let mut stream = Chunks::default();
            let mut records = Records::new(1 << 10);
            let mut got = Vec::new();
            // One chunk made available at a time, as a socket would: each poll reads what
            // there is and stops at `Pending`.
            for chunk in chunks {
                stream.chunks.push_back(chunk);
                got.extend(poll_all(&mut stream, &mut records).0);
            }
            stream.ended = true;
            let (rest, ended) = poll_all(&mut stream, &mut records);
            got.extend(rest);
            assert!(ended, "the stream ended between records");
            assert_eq!(got, expected);
        }
    }

    #[test]
    fn the_reader_is_asked_again_only_when_it_may_have_a_record() {
        let waker = Waker::from(Arc::new(Noop));
        let mut cx = Context::from_waker(&waker);
        let mut poll = |stream: &mut Chunks, records: &mut Records| match poll_record(
            &mut cx, stream, records,
        ) {
            Poll::Ready(Ok(Some(record))) => Some(record.to_vec()),
            Poll::Pending => None,
            other => panic!("unexpected {other:?}"),
        };
        let record = fragments(b"ping", &[4]);
        let mut stream = Chunks::default();
        // Two records and the first half of a third in one read.
        stream
            .chunks
            .push_back([&record[..], &record[..], &record[..5]].concat());
        let mut records = Records::new(1 << 10);
        assert_eq!(poll(&mut stream, &mut records), Some(b"ping".to_vec()));
        assert!(!records.starved, "a second record is buffered");
        assert_eq!(poll(&mut stream, &mut records), Some(b"ping".to_vec()));
        assert!(!records.starved, "part of a third is buffered");
        assert_eq!(poll(&mut stream, &mut records), None);
        assert!(records.starved, "the reader said it needs more");
        assert_eq!(stream.reads, 2);
        // The rest of the third: taken with nothing after it, the reader wants more.
        stream.chunks.push_back(record[5..].to_vec());
        assert_eq!(poll(&mut stream, &mut records), Some(b"ping".to_vec()));
        assert!(records.starved, "nothing after the record");
        assert_eq!(poll(&mut stream, &mut records), None);
        assert_eq!(stream.reads, 4);
    }

    #[test]
    fn a_record_over_the_bound_is_an_error_and_stays_one() {
        let waker = Waker::from(Arc::new(Noop));
        let mut cx = Context::from_waker(&waker);
        let mut stream = Chunks::default();
        stream.chunks.push_back(fragments(&[0; 64], &[64]));
        let mut records = Records::new(16);
        for _ in 0..2 {
            let result = poll_record(&mut cx, &mut stream, &mut records);
            assert!(
                matches!(result, Poll::Ready(Err(ReadError::Record(_)))),
                "{result:?}"
            );
        }
    }
}

//! Reading records from the reading half of a TCP connection.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::tcp::OwnedReadHalf;

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

/// Reads from `stream` until `reader` yields a record (`Ok(None)` when the peer closed the
/// stream between records): `Pending`, with `cx` woken when the socket has more, until a
/// record is complete. Cancel-safe: bytes read are kept in `reader`.
///
/// (`poll_read` straight into the buffer rather than waiting for readiness and then
/// `try_read`: tokio takes a short read as the end of the available data, which saves a
/// read returning EAGAIN per record.)
pub(super) fn poll_record<R: AsyncRead + Unpin>(
    cx: &mut Context<'_>,
    stream: &mut R,
    reader: &mut RecordReader,
) -> Poll<Result<Option<Bytes>, ReadError>> {
    read_records(reader, |buffer| {
        let mut read = ReadBuf::uninit(buffer.spare_capacity_mut());
        ready!(Pin::new(&mut *stream).poll_read(cx, &mut read))?;
        let n = read.filled().len();
        // SAFETY: `poll_read` initialised the first `n` bytes of the spare capacity.
        unsafe { buffer.advance_mut(n) };
        Poll::Ready(Ok(n))
    })
}

/// The next record already received, without waiting and without asking the kernel when
/// tokio knows the socket has nothing new: `Pending` when more is needed.
pub(super) fn try_record(
    stream: &OwnedReadHalf,
    reader: &mut RecordReader,
) -> Poll<Result<Option<Bytes>, ReadError>> {
    read_records(reader, |buffer| match stream.try_read_buf(buffer) {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Poll::Pending,
        read => Poll::Ready(read),
    })
}

/// The next record of `reader`, reading into its buffer with `read` (which appends and says
/// how many bytes; 0 at the end of the stream) while it needs more.
fn read_records(
    reader: &mut RecordReader,
    mut read: impl FnMut(&mut BytesMut) -> Poll<io::Result<usize>>,
) -> Poll<Result<Option<Bytes>, ReadError>> {
    loop {
        if let Some(record) = reader.next_record()? {
            return Poll::Ready(Ok(Some(record)));
        }
        reserve(reader);
        match ready!(read(reader.buffer_mut())) {
            Ok(0) => {
                reader.finish()?;
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

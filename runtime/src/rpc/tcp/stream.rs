//! Reading records from the reading half of a TCP connection.

use std::io;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::rpc::record::{RecordError, RecordReader};

/// The least a read asks the kernel for.
const MIN_READ: usize = 16 << 10;
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

/// Reads from `stream` until `reader` yields a record; `Ok(None)` when the peer closed the
/// stream between records. Cancel-safe: bytes read are kept in `reader`.
///
/// (`read_buf` rather than `readable` + `try_read_buf`: tokio takes a short read as the end
/// of the available data, which saves a read returning EAGAIN per record.)
pub(super) async fn next_record<R: AsyncRead + Unpin>(
    stream: &mut R,
    reader: &mut RecordReader,
) -> Result<Option<Bytes>, ReadError> {
    loop {
        if let Some(record) = reader.next_record()? {
            return Ok(Some(record));
        }
        let buffered = reader.buffer_mut().len();
        let ahead = reader.wanted().min(MAX_READ_AHEAD.max(buffered));
        reader.buffer_mut().reserve(ahead.max(MIN_READ));
        match stream.read_buf(reader.buffer_mut()).await {
            Ok(0) => {
                reader.finish()?;
                return Ok(None);
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
}

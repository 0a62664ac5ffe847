//! A call's Send and registrations: DDP-eligible arguments as Read chunks at their positions,
//! Write chunks and a Reply chunk for the results, the whole call as a Position-Zero Read chunk
//! when it does not fit the peer's receive buffer, and the header filled in when it goes.

use super::{memory_error, Marshaled, Ready, Requester};
use crate::rdma::Access;
use crate::rpc::TransportError;
use crate::transport::core::{Buf, CoreConfig, Memory, SendBytes, Slice, Stats, WriteTarget};
use crate::transport::header::{self, Body, Chunks, Header, ReadChunk, VERSION};
use crate::xdr::{padding, ChunkTarget, Encoded, MovedItem};

impl<B: Buf> Requester<B> {
    /// Registers what the peer must reach for a call and builds its Send.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn marshal<M: Memory<Buf = B>>(
        &self,
        xid: u32,
        message: Encoded,
        moved: &[MovedItem],
        write_chunks: Vec<WriteTarget<B>>,
        reply_chunk: Option<usize>,
        mem: &mut M,
        config: &CoreConfig,
        header_extra: usize,
        stats: &mut Stats,
    ) -> Result<Marshaled<B>, TransportError> {
        let mut exposed = Vec::new();
        let mut reads = Vec::new();
        for item in moved {
            let ChunkTarget::Read { position } = item.target else {
                return Err(TransportError::Protocol(
                    "a call's moved item is not a Read chunk".into(),
                ));
            };
            if item.data.is_empty() {
                continue;
            }
            let slices = mem
                .source(std::slice::from_ref(&item.data), Access::REMOTE_READ)
                .map_err(memory_error)?;
            reads.push(ReadChunk {
                position,
                segments: slices.iter().map(Slice::segment).collect(),
            });
            exposed.extend(slices);
        }
        let mut writes = Vec::new();
        let mut write_sinks = Vec::new();
        for target in write_chunks {
            let slices = match target {
                // Seed 004 section 4.4.5.2: the requester "SHOULD provide enough segments to
                // accommodate any needed XDR padding" (seed 002 section 3.6: the extra room
                // must remain).
                WriteTarget::Size(n) => mem
                    .alloc((n + padding(n)).max(4), Access::REMOTE_WRITE)
                    .map_err(memory_error)?,
                WriteTarget::Buffer(slices) => {
                    mem.expose(&slices, Access::REMOTE_WRITE)
                        .map_err(memory_error)?;
                    slices
                }
            };
            // The responder's RDMA Writes into a Write chunk come before its reply; not said of
            // the Reply chunk, which most replies leave unused.
            mem.expect_write(&slices);
            writes.push(slices.iter().map(Slice::segment).collect::<Vec<_>>());
            exposed.extend(slices.iter().cloned());
            write_sinks.push(slices);
        }
        let reply_sink = match reply_chunk {
            Some(n) => {
                let slices = mem
                    .alloc((n + padding(n)).max(4), Access::REMOTE_WRITE)
                    .map_err(memory_error)?;
                exposed.extend(slices.iter().cloned());
                Some(slices)
            }
            None => None,
        };
        let reply = reply_sink
            .as_ref()
            .map(|s| s.iter().map(Slice::segment).collect::<Vec<_>>());
        let mut header = Header::v1(
            xid,
            self.requested,
            Body::Msg(Chunks {
                inv_handle: 0,
                reads,
                writes,
                reply,
            }),
        );
        let mut message = message;
        if let Some(pad) = config.mode_2004.as_ref().and_then(|m| m.padding) {
            let room = config.peer_recv_size.saturating_sub(header_extra);
            if !self.backward {
                if let Some((h, m, added)) =
                    super::super::msgp::padded(&header, &message, pad, room)
                {
                    (header, message) = (h, m);
                    stats.padded_sent += 1;
                    stats.padding_bytes_sent += added as u64;
                }
            }
        }
        let inline_len = message.len();
        let mut send = SendBytes::default();
        let had_reads = !moved.is_empty();
        // Seed 004 section 5.1.4 and seed 002 section 4.1: the header and the RPC message
        // together must fit the peer's receive buffer.
        if header::encoded_len(&header) + header_extra + inline_len <= config.peer_recv_size {
            send.push_encoded(message);
            if had_reads {
                stats.calls_read_chunks += 1;
            } else {
                stats.calls_inline += 1;
            }
        } else {
            if self.backward && self.version == VERSION {
                return Err(TransportError::TooLarge {
                    len: inline_len as u64,
                    max: config.peer_recv_size as u64,
                });
            }
            // A long call (seed 004 section 5.3.3): the whole message in a Position-Zero Read
            // chunk, with as many segments as it needs (seed 002 section 3.2); the Read
            // chunks of DDP-eligible items stay, at their Positions (seed 002 section 3.3).
            let slices = mem
                .source(message.parts(), Access::REMOTE_READ)
                .map_err(memory_error)?;
            let (Body::Msg(mut chunks) | Body::MsgP(mut chunks, _)) = header.body else {
                unreachable!("built as RDMA_MSG above")
            };
            chunks.reads.insert(
                0,
                ReadChunk {
                    position: 0,
                    segments: slices.iter().map(Slice::segment).collect(),
                },
            );
            exposed.extend(slices);
            header.body = Body::NoMsg(chunks);
            let len = header::encoded_len(&header) + header_extra;
            if len > config.peer_recv_size {
                return Err(TransportError::TooLarge {
                    len: len as u64,
                    max: config.peer_recv_size as u64,
                });
            }
            stats.calls_long += 1;
        }
        // Version 2: the requester may let the responder invalidate one handle (seed 003
        // section 3.3: "a non-zero value that matches one of the rdma_handle fields").
        let inv_handle = if config.remote_invalidate {
            exposed.first().map_or(0, |s| s.buf.handle())
        } else {
            0
        };
        Ok(Marshaled {
            exposed,
            write_sinks,
            reply_sink,
            inv_handle,
            ready: Ready {
                header,
                message: send,
            },
        })
    }
}

/// A call's Send with its header filled in (in `version`, offering `inv_handle` in version
/// 2).
#[inline]
pub(super) fn with_header(
    version: u32,
    inv_handle: u32,
    ready: Ready,
) -> Result<SendBytes, TransportError> {
    let Ready {
        mut header,
        mut message,
    } = ready;
    header.version = version;
    if version != VERSION {
        if let Body::Msg(c) | Body::NoMsg(c) = &mut header.body {
            c.inv_handle = inv_handle;
        }
    }
    header::encode_into(&header, &mut message)
        .map_err(|e| TransportError::Protocol(e.to_string()))?;
    Ok(message)
}

//! The requester: this side's calls, from marshaling to the fenced reply.
//!
//! Per call (seed 004 sections 4.3, 4.4, 5.3; seed 002 sections 3.2, 4.1, 4.3):
//! * DDP-eligible arguments the encoder moved become Read chunks at their Positions;
//! * each DDP-eligible result gets a Write chunk with room for XDR round-up;
//! * a Reply chunk is provided when the reply may not fit this side's receive buffer;
//! * the whole Send (transport header included) fits the peer's receive buffer, or the call
//!   goes as RDMA_NOMSG with a Position-Zero Read chunk of as many segments as it needs;
//! * no more calls are in flight than the peer granted credits (one until the first reply);
//! * every handle is invalidated before the reply reaches the application, except the one the
//!   peer invalidated with Send With Invalidate.

use std::collections::hash_map::Entry;
use std::collections::VecDeque;
use std::time::Instant;

use bytes::Bytes;

use super::super::header::{
    self, AlignPadding, Body, Chunks, Header, RdmaError, ReadChunk, Segment, VERSION,
};
use super::memory::{pulled_message, read_sinks, Sinks};
use super::slab::CallSlab;
use super::{
    Buf, CallId, CoreConfig, Event, Memory, Outbox, OutgoingCall, Owner, SendBytes, Slice, Stats,
    WriteTarget,
};
use crate::id_map::{IdMap, IdSet};
use crate::rdma::Access;
use crate::rpc::{Reply, TransportError};
use crate::xdr::{padding, ChunkTarget, Encoded, MovedItem, ReceivedChunks};

/// Room left for the transport header when the encoder decides what stays inline: the fixed
/// words, the three list ends, and a Read, a Write and a Reply chunk of one segment each. A
/// message that still does not fit goes as a long call.
pub(super) const CALL_HEADER_ALLOWANCE: usize = header::FIXED_LEN + 12 + 24 + 24 + 24;

/// A call's Send, ready but for its header's version (settled only when it goes).
struct Ready {
    header: Header,
    /// The Send: its header is filled in when it goes.
    message: SendBytes,
}

/// What a version 2 call needs to be sent again in another shape.
struct Plan {
    message: Encoded,
    moved: Vec<MovedItem>,
    write_sizes: Vec<usize>,
    reply_chunk: Option<usize>,
    /// Sent again once already: a second report fails the call (no loop).
    resent: bool,
}

/// A call's registrations and Send.
struct Marshaled<B> {
    exposed: Vec<Slice<B>>,
    write_sinks: Vec<Vec<Slice<B>>>,
    reply_sink: Option<Vec<Slice<B>>>,
    inv_handle: u32,
    ready: Ready,
}

enum Phase<B> {
    /// Waiting for a credit (or, for a version 2 client, for the version).
    Queued(Box<Ready>),
    /// Sent; waiting for the reply.
    Sent,
    /// Replied; waiting for `pending` invalidations before delivering the result.
    Fencing {
        result: Box<Result<Reply, TransportError>>,
        pending: usize,
    },
    /// The responder reported a limit: the old registrations are being invalidated
    /// (`pending`), then `ready` goes again with the same XID (seed 003 section 5.3.3).
    Resending { pending: usize, ready: Box<Ready> },
    /// Read-Read (seed 000 section 3.8): the reply came with Read chunks; `pending` RDMA Reads
    /// of them are not yet complete.
    Pulling(Box<Pull<B>>),
    /// Given up (cancelled or timed out) after it was sent: waiting for the reply, which frees
    /// the credit, and for the invalidations.
    Abandoned {
        awaiting_reply: bool,
        pending: usize,
    },
}

/// A reply whose Read chunks are being pulled.
struct Pull<B> {
    pending: usize,
    failed: bool,
    /// The reply's inline part (empty for RDMA_NOMSG).
    inline: Bytes,
    /// Each Read chunk's position, sink and length.
    sinks: Sinks<B>,
    alignment: Option<(AlignPadding, usize)>,
    invalidated: Option<u32>,
}

struct OutCall<B> {
    xid: u32,
    /// The number of this side's Send that carried it, for RDMA_DONE accounting.
    sent_seq: u64,
    /// Every slice the peer got a handle to.
    exposed: Vec<Slice<B>>,
    write_sinks: Vec<Vec<Slice<B>>>,
    reply_sink: Option<Vec<Slice<B>>>,
    /// When the call times out, and its timeout. Boxed (calls with a timeout of the core's
    /// are rare: the driver keeps its own), so that a call is at most 128 bytes, which the
    /// compiler moves without calling `memcpy` (it is moved into its slot and out whole).
    deadline: Option<Box<(Instant, std::time::Duration)>>,
    /// The handle offered for Send With Invalidate in version 2 (`rdma_inv_handle`), 0 for
    /// none.
    inv_handle: u32,
    /// Version 2: how to send it again. Boxed, like the rare large parts of [`Phase`], to keep
    /// a call small: it is moved into and out of the map of calls whole.
    plan: Option<Box<Plan>>,
    phase: Phase<B>,
}

pub(super) struct Requester<B> {
    backward: bool,
    /// The version calls go in.
    version: u32,
    /// Calls wait for the version (a version 2 client's offer is out).
    hold: bool,
    requested: u32,
    /// The credits the peer granted (seed 004 section 4.3.1: one until the first reply).
    granted: u32,
    in_flight: u32,
    next_xid: u32,
    calls: CallSlab<OutCall<B>>,
    by_xid: IdMap<u32, CallId>,
    queue: VecDeque<CallId>,
    /// Read-Read: RDMA Reads of replies' Read chunks waiting for the responder's IRD, and
    /// how many are posted.
    pulls_waiting: VecDeque<(CallId, Slice<B>, Segment)>,
    pulls_in_flight: usize,
    /// RDMA_DONEs to send, by XID.
    dones_waiting: VecDeque<u32>,
    /// The Send numbers of RDMA_DONEs not yet known to have reached the responder: one is,
    /// once a reply comes to a call sent after it (Sends arrive in order).
    dones_unconfirmed: VecDeque<u64>,
    /// Sends so far (calls and RDMA_DONEs).
    sent: u64,
    /// RDMA_DONEs sent so far.
    pub(super) dones_sent: u64,
}

fn memory_error(e: super::MemoryError) -> TransportError {
    TransportError::Other(Box::new(e))
}

impl<B: Buf> Requester<B> {
    pub(super) fn new(backward: bool, requested: u32, first_xid: u32, hold: bool) -> Requester<B> {
        Requester {
            backward,
            version: VERSION,
            hold,
            requested,
            granted: 1,
            in_flight: 0,
            next_xid: first_xid,
            calls: CallSlab::default(),
            by_xid: IdMap::default(),
            queue: VecDeque::new(),
            pulls_waiting: VecDeque::new(),
            pulls_in_flight: 0,
            dones_waiting: VecDeque::new(),
            dones_unconfirmed: VecDeque::new(),
            sent: 0,
            dones_sent: 0,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.calls.len()
    }

    /// The credits this side asks for.
    pub(super) fn requested(&self) -> u32 {
        self.requested
    }

    pub(super) fn set_version(&mut self, version: u32) {
        self.version = version;
    }

    /// The version is settled: held calls may go.
    pub(super) fn release(&mut self, out: &mut Outbox<B>) {
        self.hold = false;
        self.pump(out);
    }

    /// Fails every call not yet sent (the connection cannot carry them).
    pub(super) fn fail_queued(&mut self, error: TransportError, out: &mut Outbox<B>) {
        let queued: Vec<CallId> = self.queue.drain(..).collect();
        for id in queued {
            if self.discard(id) {
                out.events.push_back(Event::Reply {
                    call: id,
                    result: Err(clone_error(&error)),
                });
            }
        }
    }

    pub(super) fn next_xid(&mut self) -> u32 {
        loop {
            self.next_xid = self.next_xid.wrapping_add(1);
            if !self.by_xid.contains_key(&self.next_xid) {
                return self.next_xid;
            }
        }
    }

    /// The calls the peer lets this side have in flight: "the lower of the requested and
    /// granted credit values" (seed 004 section 4.3).
    fn limit(&self) -> u32 {
        self.granted.min(self.requested).max(1)
    }

    /// A call may go now as far as credits and the version go (never past the limit, and a
    /// version 2 client holds calls until the version is settled).
    fn may_send(&self) -> bool {
        !self.hold && self.in_flight < self.limit()
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn start<M: Memory<Buf = B>>(
        &mut self,
        call: OutgoingCall<B>,
        now: Instant,
        mem: &mut M,
        config: &CoreConfig,
        header_extra: usize,
        out: &mut Outbox<B>,
        stats: &mut Stats,
    ) -> Result<CallId, TransportError> {
        if self.by_xid.contains_key(&call.xid) {
            return Err(TransportError::Protocol(format!(
                "xid {:#x} is already in flight",
                call.xid
            )));
        }
        if self.backward
            && self.version == VERSION
            && (!call.moved.is_empty()
                || !call.write_chunks.is_empty()
                || call.reply_chunk.is_some())
        {
            // Seed 004 section 8.4: "RPC-over-RDMA Version One operation in the backward
            // direction does not allow chunking".
            return Err(TransportError::Protocol(
                "backward-direction calls cannot use chunks".into(),
            ));
        }
        // A version 2 call keeps what it needs to be sent again in another shape when the
        // responder reports a limit (seed 003 section 5.3.3).
        let plan = (self.version != VERSION || self.hold).then(|| {
            Box::new(Plan {
                message: call.message.clone(),
                moved: call.moved.clone(),
                write_sizes: call.write_chunks.iter().map(WriteTarget::size).collect(),
                reply_chunk: call.reply_chunk,
                resent: false,
            })
        });
        let m = self.marshal(
            call.xid,
            call.message,
            &call.moved,
            call.write_chunks,
            call.reply_chunk,
            mem,
            config,
            header_extra,
            stats,
        )?;
        let mut new = OutCall {
            xid: call.xid,
            sent_seq: 0,
            exposed: m.exposed,
            write_sinks: m.write_sinks,
            reply_sink: m.reply_sink,
            deadline: call.timeout.map(|t| Box::new((now + t, t))),
            inv_handle: m.inv_handle,
            plan,
            phase: Phase::Sent,
        };
        // Nothing ahead of it and a credit free (most calls): it goes at once, without a turn
        // through the queue.
        let direct = self.queue.is_empty() && self.dones_waiting.is_empty() && self.may_send();
        if direct {
            let message = with_header(self.version, new.inv_handle, m.ready)?;
            self.in_flight += 1;
            self.sent += 1;
            new.sent_seq = self.sent;
            out.send(Owner::Nobody, message, None);
        } else {
            new.phase = Phase::Queued(Box::new(m.ready));
        }
        let id = self.calls.insert(new);
        self.by_xid.insert(call.xid, id);
        if !direct {
            self.queue.push_back(id);
            self.pump(out);
        }
        Ok(id)
    }

    /// Starts a message of an extension's header type (seed 003 section 9.1) that waits for
    /// an answer with its XID, as a call does.
    pub(super) fn start_message(
        &mut self,
        htype: u32,
        flags: u32,
        body: Bytes,
        peer_recv_size: usize,
        out: &mut Outbox<B>,
    ) -> Result<CallId, TransportError> {
        let xid = self.next_xid();
        let header = Header::v2(xid, self.requested, flags, Body::Other { htype, body });
        // Nothing but a Send carries it: it must fit the peer's receive buffer.
        let len = header::encoded_len(&header);
        if len > peer_recv_size {
            return Err(TransportError::TooLarge {
                len: len as u64,
                max: peer_recv_size as u64,
            });
        }
        let id = self.calls.insert(OutCall {
            xid,
            sent_seq: 0,
            exposed: Vec::new(),
            write_sinks: Vec::new(),
            reply_sink: None,
            deadline: None,
            inv_handle: 0,
            plan: None,
            phase: Phase::Queued(Box::new(Ready {
                header,
                message: SendBytes::default(),
            })),
        });
        self.by_xid.insert(xid, id);
        self.queue.push_back(id);
        self.pump(out);
        Ok(id)
    }

    /// Registers what the peer must reach for a call and builds its Send.
    #[allow(clippy::too_many_arguments)]
    fn marshal<M: Memory<Buf = B>>(
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
                if let Some((h, m, added)) = super::msgp::padded(&header, &message, pad, room) {
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

    /// Sends queued calls while credits allow, each with its header in the settled version.
    fn pump(&mut self, out: &mut Outbox<B>) {
        // Seed 000 section 3.8: "the RPC Done message consumes a credit at the server. The
        // client must account for this". An RDMA_DONE is known to have been taken once a call
        // sent after it is answered; at most credits + 1 can be unconfirmed (the oldest, and
        // one per reply to a call sent before it, of which at most `credits` were in flight),
        // and the responder keeps that many receives for them beside the calls'.
        while self.dones_unconfirmed.len() <= self.limit() as usize {
            let Some(xid) = self.dones_waiting.pop_front() else {
                break;
            };
            if let Ok(send) = header::to_send(&Header::v1(xid, self.requested, Body::Done)) {
                self.dones_sent += 1;
                self.sent += 1;
                self.dones_unconfirmed.push_back(self.sent);
                out.send(Owner::Nobody, send, None);
            }
        }
        while self.may_send() {
            let Some(id) = self.queue.pop_front() else {
                return;
            };
            let Some(call) = self.calls.get_mut(id) else {
                continue;
            };
            let Phase::Queued(ready) = std::mem::replace(&mut call.phase, Phase::Sent) else {
                continue;
            };
            match with_header(self.version, call.inv_handle, *ready) {
                Ok(message) => {
                    self.in_flight += 1;
                    self.sent += 1;
                    call.sent_seq = self.sent;
                    out.send(Owner::Nobody, message, None);
                }
                Err(e) => {
                    let Some(call) = self.remove(id) else {
                        continue;
                    };
                    drop(call);
                    out.events.push_back(Event::Reply {
                        call: id,
                        result: Err(e),
                    });
                }
            }
        }
    }

    /// A reply's credit value becomes the grant; "a grant of 0 treated as 1" (the issue's
    /// rule, from seed 004 section 4.3: "The granted value MUST NOT be zero").
    pub(super) fn grant(&mut self, credit: u32) {
        self.granted = credit.max(1);
    }

    /// Takes an RDMA_MSG or RDMA_NOMSG reply; false when no call waits for its XID.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn reply<M: Memory<Buf = B>>(
        &mut self,
        header: Header,
        inline: Bytes,
        alignment: Option<(AlignPadding, usize)>,
        invalidated: Option<u32>,
        mem: &mut M,
        config: &CoreConfig,
        out: &mut Outbox<B>,
        stats: &mut Stats,
    ) -> bool {
        let read_read = config.mode_2004.as_ref().is_some_and(|m| m.read_read);
        let has_reads =
            matches!(&header.body, Body::Msg(c) | Body::NoMsg(c) if !c.reads.is_empty());
        let Some(id) = self.take_reply(&header) else {
            if read_read && has_reads {
                // Seed 000 section 3.8: the responder releases the chunks on RDMA_DONE, which
                // it needs even when this side no longer waits for the reply.
                self.dones_waiting.push_back(header.xid);
            }
            // A reply to an abandoned call still frees its credit.
            self.pump(out);
            return false;
        };
        if let Some(call) = self.calls.get(id) {
            let seq = call.sent_seq;
            while self.dones_unconfirmed.front().is_some_and(|&d| d < seq) {
                self.dones_unconfirmed.pop_front();
            }
        }
        if has_reads {
            if read_read {
                self.pull(
                    id,
                    header,
                    inline,
                    alignment,
                    invalidated,
                    mem,
                    config,
                    out,
                    stats,
                );
            } else {
                // Seed 004 section 5.7.2: version 1 implementations "do not use the Read-Read
                // transfer model"; data this side was never told to pull cannot be decoded.
                let error = protocol(
                    "a reply with Read chunks (the Read-Read model of the 2004 protocol is off)"
                        .into(),
                );
                self.fence(id, Err(error), invalidated, out, stats);
            }
            self.pump(out);
            return true;
        }
        let long = matches!(header.body, Body::NoMsg(_));
        let written = match &header.body {
            Body::Msg(c) | Body::NoMsg(c) => c.writes.iter().any(|w| header::total_len(w) > 0),
            _ => false,
        };
        let result = match self.calls.get(id) {
            Some(call) => build_reply(call, header.body, inline).map(|mut reply| {
                if let Some((pad, origin)) = alignment {
                    let chunks = reply.chunks.take().unwrap_or_default();
                    reply.chunks = Some(chunks.with_alignment(pad, origin));
                }
                reply
            }),
            None => return true,
        };
        if result.is_ok() {
            if long {
                stats.replies_received_long += 1;
            } else if written {
                stats.replies_received_write_chunks += 1;
            } else {
                stats.replies_received_inline += 1;
            }
        }
        self.fence(id, result, invalidated, out, stats);
        self.pump(out);
        true
    }

    /// Takes an RDMA_ERROR reply; false when no call waits for its XID. A version 2 call that
    /// the responder could serve in another shape is sent again instead of failing.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn error_reply<M: Memory<Buf = B>>(
        &mut self,
        header: &Header,
        error: RdmaError,
        invalidated: Option<u32>,
        mem: &mut M,
        config: &CoreConfig,
        header_extra: usize,
        out: &mut Outbox<B>,
        stats: &mut Stats,
    ) -> bool {
        let Some(id) = self.take_reply(header) else {
            self.pump(out);
            return false;
        };
        if self.resend(
            id,
            error,
            invalidated,
            mem,
            config,
            header_extra,
            out,
            stats,
        ) {
            return true;
        }
        let error = match error {
            RdmaError::Vers { low, high } => TransportError::RdmaVersion { low, high },
            RdmaError::BadXdr => TransportError::RdmaChunk,
            other => TransportError::RdmaRefused(other),
        };
        self.fence(id, Err(error), invalidated, out, stats);
        self.pump(out);
        true
    }

    /// Sends call `id` again, with the same XID, in the shape the responder's `error` asks
    /// for (seed 003 section 5.3.3): without Read chunks after READ_CHUNKS ("The requester
    /// SHOULD resend the request using a Position-Zero Read chunk"; one that then fits inline
    /// goes inline, which needs no Read chunk at all), with fewer Write chunks and a Reply
    /// chunk after WRITE_CHUNKS, with a larger Write chunk after WRITE_RESOURCE or a larger
    /// Reply chunk after REPLY_RESOURCE ("it MAY send the request again using the same XID and
    /// more reply resources"). Once only, and never past the configured byte bound; false
    /// when the call must fail instead.
    #[allow(clippy::too_many_arguments)]
    fn resend<M: Memory<Buf = B>>(
        &mut self,
        id: CallId,
        error: RdmaError,
        invalidated: Option<u32>,
        mem: &mut M,
        config: &CoreConfig,
        header_extra: usize,
        out: &mut Outbox<B>,
        stats: &mut Stats,
    ) -> bool {
        let Some(call) = self.calls.get(id) else {
            return false;
        };
        let Some(plan) = call.plan.as_ref().filter(|p| !p.resent) else {
            return false;
        };
        let bound = config.limits.max_read_bytes.min(u32::MAX as u64) as usize;
        let (mut message, mut moved) = (plan.message.clone(), plan.moved.clone());
        let (mut write_sizes, mut reply_chunk) = (plan.write_sizes.clone(), plan.reply_chunk);
        match error {
            RdmaError::ReadChunks { .. } if !moved.is_empty() => {
                message = message.with_reads_inline(&moved);
                moved.clear();
            }
            RdmaError::WriteChunks { max } if (max as usize) < write_sizes.len() => {
                let dropped: usize = write_sizes.drain(max as usize..).sum();
                let reply = reply_chunk.unwrap_or(config.default_reply_chunk) + dropped;
                if reply > bound {
                    return false;
                }
                reply_chunk = Some(reply);
            }
            RdmaError::WriteResource {
                chunk_index,
                length_needed,
            } => {
                let (i, needed) = (chunk_index as usize, length_needed as usize);
                if i == 0 || i > write_sizes.len() || needed <= write_sizes[i - 1] || needed > bound
                {
                    return false;
                }
                write_sizes[i - 1] = needed;
            }
            RdmaError::ReplyResource { length_needed } => {
                let needed = length_needed as usize;
                if needed > bound || reply_chunk.is_some_and(|r| r >= needed) {
                    return false;
                }
                reply_chunk = Some(needed);
            }
            _ => return false,
        }
        let xid = call.xid;
        let targets = write_sizes.into_iter().map(WriteTarget::Size).collect();
        let Ok(m) = self.marshal(
            xid,
            message,
            &moved,
            targets,
            reply_chunk,
            mem,
            config,
            header_extra,
            stats,
        ) else {
            return false;
        };
        let Some(call) = self.calls.get_mut(id) else {
            return false;
        };
        tracing::debug!(xid, %error, "sending the call again in the shape the responder asks for");
        let old = std::mem::replace(&mut call.exposed, m.exposed);
        call.write_sinks = m.write_sinks;
        call.reply_sink = m.reply_sink;
        call.inv_handle = m.inv_handle;
        if let Some(plan) = call.plan.as_mut() {
            plan.resent = true;
        }
        stats.resent += 1;
        // The first attempt's registrations are fenced before the second goes.
        let pending = invalidate_slices(Owner::Requester(id), &old, invalidated, out, stats);
        if pending == 0 {
            call.phase = Phase::Queued(Box::new(m.ready));
            self.queue.push_front(id);
            self.pump(out);
        } else {
            call.phase = Phase::Resending {
                pending,
                ready: Box::new(m.ready),
            };
        }
        true
    }

    /// Finds the call a reply answers and does the credit accounting; `None` for an unknown
    /// XID or a duplicate reply.
    fn take_reply(&mut self, header: &Header) -> Option<CallId> {
        let &id = self.by_xid.get(&header.xid)?;
        let call = self.calls.get_mut(id)?;
        match &mut call.phase {
            Phase::Sent => {}
            Phase::Abandoned {
                awaiting_reply: waiting @ true,
                pending,
            } => {
                *waiting = false;
                let done = *pending == 0;
                self.in_flight = self.in_flight.saturating_sub(1);
                self.grant(header.credit);
                if done {
                    self.remove(id);
                }
                return None;
            }
            _ => return None,
        }
        self.in_flight = self.in_flight.saturating_sub(1);
        self.grant(header.credit);
        Some(id)
    }

    /// Invalidates the call's handles (all but the one the peer invalidated) and delivers
    /// `result` once that is done (seed 004 section 5.4.1: segments "properly fenced from the
    /// responder before allowing Upper Layer access").
    fn fence(
        &mut self,
        id: CallId,
        result: Result<Reply, TransportError>,
        invalidated: Option<u32>,
        out: &mut Outbox<B>,
        stats: &mut Stats,
    ) {
        let Some(call) = self.calls.get_mut(id) else {
            return;
        };
        if let Some(handle) = invalidated {
            if call.inv_handle != 0 && handle != call.inv_handle {
                // Seed 003 section 8.4: the requester "checks which handle was invalidated";
                // the rest it invalidates itself below, whichever that was.
                tracing::warn!(
                    xid = call.xid,
                    handle,
                    offered = call.inv_handle,
                    "the responder invalidated a handle other than the one offered"
                );
                stats.unexpected_invalidations += 1;
            }
        }
        let owner = Owner::Requester(id);
        let pending = invalidate_slices(owner, &call.exposed, invalidated, out, stats);
        if pending == 0 {
            self.discard(id);
            out.events.push_back(Event::Reply { call: id, result });
        } else {
            call.phase = Phase::Fencing {
                result: Box::new(result),
                pending,
            };
        }
    }

    /// An invalidation of call `id` completed (successfully or not: a failed invalidation
    /// means the connection is down, which fences the memory too).
    pub(super) fn completed(&mut self, id: CallId, _ok: bool, out: &mut Outbox<B>) {
        let Some(call) = self.calls.get_mut(id) else {
            return;
        };
        match &mut call.phase {
            Phase::Fencing { pending, .. } => {
                *pending = pending.saturating_sub(1);
                if *pending == 0 {
                    if let Some(call) = self.remove(id) {
                        if let Phase::Fencing { result, .. } = call.phase {
                            out.events.push_back(Event::Reply {
                                call: id,
                                result: *result,
                            });
                        }
                    }
                }
            }
            Phase::Abandoned {
                awaiting_reply,
                pending,
            } => {
                *pending = pending.saturating_sub(1);
                if *pending == 0 && !*awaiting_reply {
                    self.remove(id);
                }
            }
            Phase::Resending { pending, .. } => {
                *pending = pending.saturating_sub(1);
                if *pending == 0 {
                    if let Phase::Resending { ready, .. } =
                        std::mem::replace(&mut call.phase, Phase::Sent)
                    {
                        call.phase = Phase::Queued(ready);
                        self.queue.push_front(id);
                        self.pump(out);
                    }
                }
            }
            _ => {}
        }
    }

    /// Pulls a reply's Read chunks by RDMA Read (seed 000 section 3.8, "an RPC with read
    /// chunks in the reply message"); the reply is delivered once they are in, and RDMA_DONE
    /// tells the responder it may release them.
    #[allow(clippy::too_many_arguments)]
    fn pull<M: Memory<Buf = B>>(
        &mut self,
        id: CallId,
        header: Header,
        inline: Bytes,
        alignment: Option<(AlignPadding, usize)>,
        invalidated: Option<u32>,
        mem: &mut M,
        config: &CoreConfig,
        out: &mut Outbox<B>,
        stats: &mut Stats,
    ) {
        let (Body::Msg(chunks) | Body::NoMsg(chunks)) = header.body else {
            return;
        };
        // Bounded: a header's Read chunks are at most `max_read_bytes` together.
        let (sinks, pairs) = match read_sinks(&chunks.reads, mem) {
            Ok(r) => r,
            Err(e) => {
                self.dones_waiting.push_back(header.xid);
                return self.fence(id, Err(memory_error(e)), invalidated, out, stats);
            }
        };
        let Some(call) = self.calls.get_mut(id) else {
            return;
        };
        call.phase = Phase::Pulling(Box::new(Pull {
            pending: pairs.len(),
            failed: false,
            inline,
            sinks,
            alignment,
            invalidated,
        }));
        if pairs.is_empty() {
            return self.pulled_all(id, out, stats);
        }
        for (sink, remote) in pairs {
            self.pulls_waiting.push_back((id, sink, remote));
        }
        self.pump_pulls(config, out);
    }

    /// Posts waiting pulls while the responder's IRD allows.
    fn pump_pulls(&mut self, config: &CoreConfig, out: &mut Outbox<B>) {
        while self.pulls_in_flight < config.max_reads.max(1) {
            let Some((id, sink, remote)) = self.pulls_waiting.pop_front() else {
                return;
            };
            if !matches!(
                self.calls.get(id).map(|c| &c.phase),
                Some(Phase::Pulling(_))
            ) {
                continue; // cancelled meanwhile
            }
            self.pulls_in_flight += 1;
            out.read(Owner::Pull(id), sink, remote);
        }
    }

    /// An RDMA Read of call `id`'s reply completed.
    pub(super) fn pulled(
        &mut self,
        id: CallId,
        ok: bool,
        config: &CoreConfig,
        out: &mut Outbox<B>,
        stats: &mut Stats,
    ) {
        self.pulls_in_flight = self.pulls_in_flight.saturating_sub(1);
        let mut all_in = false;
        if let Some(Phase::Pulling(pull)) = self.calls.get_mut(id).map(|c| &mut c.phase) {
            pull.pending = pull.pending.saturating_sub(1);
            pull.failed |= !ok;
            all_in = pull.pending == 0;
        }
        if all_in {
            self.pulled_all(id, out, stats);
        }
        self.pump_pulls(config, out);
        self.pump(out);
    }

    /// Every Read chunk of call `id`'s reply is in: RDMA_DONE goes, and the reply is
    /// delivered once the call's own handles are fenced.
    fn pulled_all(&mut self, id: CallId, out: &mut Outbox<B>, stats: &mut Stats) {
        let Some(call) = self.calls.get_mut(id) else {
            return;
        };
        let Phase::Pulling(pull) = std::mem::replace(&mut call.phase, Phase::Sent) else {
            return;
        };
        self.dones_waiting.push_back(call.xid);
        let Pull {
            failed,
            inline,
            sinks,
            alignment,
            invalidated,
            ..
        } = *pull;
        let result = if failed {
            Err(protocol(
                "an RDMA Read of the reply's Read chunk failed".into(),
            ))
        } else {
            let (message, chunks) = pulled_message(inline, sinks, alignment);
            stats.replies_received_read_chunks += 1;
            Ok(Reply { message, chunks })
        };
        self.fence(id, result, invalidated, out, stats);
    }

    fn remove(&mut self, id: CallId) -> Option<OutCall<B>> {
        let call = self.calls.remove(id)?;
        self.forget_xid(call.xid, id);
        Some(call)
    }

    /// [`Requester::remove`] for a call whose state is not wanted: dropped where it lies (an
    /// `OutCall` is a few hundred bytes to copy out). False when there is no call `id`.
    fn discard(&mut self, id: CallId) -> bool {
        let Some(xid) = self.calls.get(id).map(|call| call.xid) else {
            return false;
        };
        self.calls.discard(id);
        self.forget_xid(xid, id);
        true
    }

    /// Forgets that `xid` is call `id`'s (and only then: a call sent again may have taken it).
    fn forget_xid(&mut self, xid: u32, id: CallId) {
        if let Entry::Occupied(e) = self.by_xid.entry(xid) {
            if *e.get() == id {
                e.remove();
            }
        }
    }

    /// Gives up on call `id`: a queued call is forgotten; a sent one has its handles revoked
    /// at once and keeps its credit until the reply comes.
    pub(super) fn cancel(&mut self, id: CallId, out: &mut Outbox<B>, stats: &mut Stats) {
        let Some(call) = self.calls.get(id) else {
            return;
        };
        match &call.phase {
            Phase::Queued(_) => {
                self.remove(id);
                self.queue.retain(|&q| q != id);
            }
            Phase::Sent => {
                revoke_slices(&call.exposed, out, stats);
                if let Some(call) = self.calls.get_mut(id) {
                    call.phase = Phase::Abandoned {
                        awaiting_reply: true,
                        pending: 0,
                    };
                }
            }
            Phase::Fencing { pending, .. } | Phase::Resending { pending, .. } => {
                let pending = *pending;
                if let Some(call) = self.calls.get_mut(id) {
                    if matches!(call.phase, Phase::Resending { .. }) {
                        // The second attempt's registrations never reached the peer.
                        revoke_slices(&call.exposed, out, stats);
                    }
                    call.phase = Phase::Abandoned {
                        awaiting_reply: false,
                        pending,
                    };
                }
            }
            Phase::Pulling(_) => {
                // The data is no longer wanted: the responder may release it now.
                revoke_slices(&call.exposed, out, stats);
                self.dones_waiting.push_back(call.xid);
                self.remove(id);
                self.pump(out);
            }
            Phase::Abandoned { .. } => {}
        }
    }

    /// Fails call `xid` (an unparsable reply); false when no call waits for it.
    pub(super) fn fail_xid(
        &mut self,
        xid: u32,
        error: TransportError,
        out: &mut Outbox<B>,
        stats: &mut Stats,
    ) -> bool {
        let Some(&id) = self.by_xid.get(&xid) else {
            return false;
        };
        if !matches!(self.calls.get(id).map(|c| &c.phase), Some(Phase::Sent)) {
            return false;
        }
        // The responder answered, so the credit is free again; its grant is unknown.
        self.in_flight = self.in_flight.saturating_sub(1);
        self.fence(id, Err(error), None, out, stats);
        self.pump(out);
        true
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.calls
            .values()
            .filter(|c| matches!(c.phase, Phase::Queued(_) | Phase::Sent))
            .filter_map(|c| c.deadline.as_ref().map(|deadline| deadline.0))
            .min()
    }

    /// Fails every call whose deadline passed with `TimedOut`, and cancels it.
    pub(super) fn expire(&mut self, now: Instant, out: &mut Outbox<B>, stats: &mut Stats) {
        let expired: Vec<(CallId, std::time::Duration)> = self
            .calls
            .iter()
            .filter(|(_, c)| matches!(c.phase, Phase::Queued(_) | Phase::Sent))
            .filter_map(|(id, c)| {
                let &(at, timeout) = c.deadline.as_deref()?;
                (at <= now).then_some((id, timeout))
            })
            .collect();
        for (id, timeout) in expired {
            self.cancel(id, out, stats);
            out.events.push_back(Event::Reply {
                call: id,
                result: Err(TransportError::TimedOut(timeout)),
            });
        }
        self.pump(out);
    }

    /// The connection is gone: every call still awaited fails with `Closed`.
    pub(super) fn fail_all(&mut self, out: &mut Outbox<B>) {
        for (id, call) in self.calls.drain() {
            if !matches!(call.phase, Phase::Abandoned { .. }) {
                out.events.push_back(Event::Reply {
                    call: id,
                    result: Err(TransportError::Closed),
                });
            }
        }
        self.by_xid.clear();
        self.queue.clear();
        self.pulls_waiting.clear();
        self.dones_waiting.clear();
        self.dones_unconfirmed.clear();
        self.in_flight = 0;
        // Seed 004 section 4.3.1: a new connection starts again at one credit.
        self.granted = 1;
    }
}

/// Revokes each handle of `slices` once.
pub(super) fn revoke_slices<B: Buf>(slices: &[Slice<B>], out: &mut Outbox<B>, stats: &mut Stats) {
    let mut seen = IdSet::default();
    for slice in slices {
        if seen.insert(slice.buf.handle()) {
            out.revoke(slice.buf.clone());
            stats.revocations += 1;
        }
    }
}

/// Emits an invalidation of each handle of `slices` once, but `skip` (which the peer
/// invalidated already); returns how many.
fn invalidate_slices<B: Buf>(
    owner: Owner,
    slices: &[Slice<B>],
    skip: Option<u32>,
    out: &mut Outbox<B>,
    stats: &mut Stats,
) -> usize {
    let mut seen = IdSet::default();
    let mut n = 0;
    for slice in slices {
        let handle = slice.buf.handle();
        if !seen.insert(handle) {
            continue;
        }
        if Some(handle) == skip {
            slice.buf.mark_invalidated();
            continue;
        }
        out.invalidate(owner, slice.buf.clone());
        stats.local_invalidations += 1;
        n += 1;
    }
    n
}

/// A call's Send with its header filled in (in `version`, offering `inv_handle` in version
/// 2).
fn with_header(version: u32, inv_handle: u32, ready: Ready) -> Result<SendBytes, TransportError> {
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

/// A copy of `e` for one of several calls (its `Other` and `Io` cases become their text).
fn clone_error(e: &TransportError) -> TransportError {
    match e {
        TransportError::Closed => TransportError::Closed,
        TransportError::TimedOut(t) => TransportError::TimedOut(*t),
        TransportError::TooLarge { len, max } => TransportError::TooLarge {
            len: *len,
            max: *max,
        },
        TransportError::RdmaVersion { low, high } => TransportError::RdmaVersion {
            low: *low,
            high: *high,
        },
        TransportError::RdmaChunk => TransportError::RdmaChunk,
        TransportError::RdmaRefused(r) => TransportError::RdmaRefused(*r),
        other => TransportError::Protocol(other.to_string()),
    }
}

fn protocol(what: String) -> TransportError {
    TransportError::Protocol(what)
}

/// The reply message and its Write chunk data, from the header and this call's sinks.
fn build_reply<B: Buf>(
    call: &OutCall<B>,
    body: Body,
    inline: Bytes,
) -> Result<Reply, TransportError> {
    let (chunks, message) = match body {
        // The answer to an extension's message: its body.
        Body::Other { body, .. } => {
            return Ok(Reply {
                message: body,
                chunks: None,
            })
        }
        Body::Msg(chunks) => (chunks, inline),
        Body::NoMsg(chunks) => {
            // Seed 004 section 5.3.4: the reply is in the Reply chunk.
            let (Some(sinks), Some(returned)) = (&call.reply_sink, &chunks.reply) else {
                return Err(protocol("an RDMA_NOMSG reply without a Reply chunk".into()));
            };
            let message = written(sinks, returned).map_err(protocol)?;
            (chunks, message)
        }
        _ => return Err(protocol("not a reply".into())),
    };
    if chunks.writes.len() > call.write_sinks.len() {
        return Err(protocol(format!(
            "a reply with {} Write chunks for {} provided",
            chunks.writes.len(),
            call.write_sinks.len()
        )));
    }
    let received = if call.write_sinks.is_empty() {
        None
    } else {
        // Seed 004 section 4.4.5: the data of each Write chunk is "the contents of each
        // segment, in array order", each as long as the reply's segment length says; a chunk
        // the reply leaves out or returns with zero lengths is unused (section 4.4.5.1).
        let mut data = Vec::with_capacity(call.write_sinks.len());
        for (i, sinks) in call.write_sinks.iter().enumerate() {
            match chunks.writes.get(i) {
                Some(returned) => data.push(written(sinks, returned).map_err(protocol)?),
                None => data.push(Bytes::new()),
            }
        }
        Some(ReceivedChunks::for_reply(data))
    };
    Ok(Reply {
        message,
        chunks: received,
    })
}

/// The bytes the responder wrote into `sinks`, by the segment lengths of its reply: one
/// returned segment per provided one (at most as many, each at most as long). Only the
/// lengths are taken from the peer: handles and offsets are this side's own.
fn written<B: Buf>(sinks: &[Slice<B>], returned: &[Segment]) -> Result<Bytes, String> {
    if returned.len() > sinks.len() {
        return Err(format!(
            "a chunk returned with {} segments for {} provided",
            returned.len(),
            sinks.len()
        ));
    }
    let mut parts: Vec<Bytes> = Vec::new();
    for (sink, seg) in sinks.iter().zip(returned) {
        if seg.rdma_length as usize > sink.len {
            return Err(format!(
                "a segment returned with {} bytes where {} were provided",
                seg.rdma_length, sink.len
            ));
        }
        if seg.rdma_length > 0 {
            parts.push(sink.freeze(seg.rdma_length as usize));
        }
    }
    Ok(match parts.len() {
        0 => Bytes::new(),
        1 => parts.pop().unwrap_or_default(),
        _ => {
            let mut all = Vec::with_capacity(parts.iter().map(Bytes::len).sum());
            for p in &parts {
                all.extend_from_slice(p);
            }
            Bytes::from(all)
        }
    })
}

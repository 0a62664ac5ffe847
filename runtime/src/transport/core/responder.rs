//! The responder: calls the peer sent, from their header to the reply.
//!
//! Per call (seed 004 sections 4.4.4, 4.4.5, 5.3, 5.5; seed 002 sections 3.2-3.7):
//! * the header's chunks are checked: a Position-Zero Read chunk only in RDMA_NOMSG, and
//!   RDMA_NOMSG only with one; no chunks at all in the backward direction;
//! * every Read chunk is pulled by RDMA Read before the call is dispatched, never more Reads
//!   outstanding than the peer's IRD allows;
//! * DDP-eligible results go by RDMA Write into the requester's Write chunks, whose segment
//!   lengths are rewritten to the bytes written (unused chunks return with zero lengths);
//! * the reply goes inline when it fits the requester's receive buffer, through the Reply
//!   chunk as RDMA_NOMSG when one was provided, and as RDMA_ERROR / ERR_CHUNK otherwise;
//! * with the peer's agreement the reply's Send invalidates one of the requester's handles.

use std::collections::VecDeque;

use bytes::Bytes;

use super::super::header::{
    self, total_len, AlignPadding, Body, Chunks, Header, RdmaError, Segment, F_RESPONSE, VERSION,
};
use super::{
    gather, pair_up, Buf, CallId, CoreConfig, Event, IncomingCall, Memory, Outbox, Owner, Slice,
    Stats,
};
use crate::id_map::IdMap;
use crate::rdma::Access;
use crate::xdr::{ChunkTarget, Encoded, Encoder, MovedItem, ReceivedChunks};

enum Phase {
    /// Pulling Read chunks: `pending` Reads not yet complete.
    Reading { pending: usize, failed: bool },
    /// Handed to the application.
    Dispatched,
    /// The reply is posted: `pending` operations (Writes and the Send) not yet complete.
    Replying { pending: usize },
}

struct InCall<B> {
    xid: u32,
    /// The call's version: its reply goes in the same (seed 003 section 7.3).
    version: u32,
    backward: bool,
    chunks: Chunks,
    /// The inline RPC message (RDMA_MSG), empty for RDMA_NOMSG.
    inline: Bytes,
    /// RDMA_MSGP: the sender's padding and where the message starts in the Send.
    alignment: Option<(AlignPadding, usize)>,
    /// Each Read chunk's position, sink and length.
    sinks: Vec<(u32, Vec<Slice<B>>, usize)>,
    /// Memory that must outlive the posted operations.
    held: Vec<Slice<B>>,
    phase: Phase,
}

pub(super) struct Responder<B> {
    next_id: CallId,
    calls: IdMap<CallId, InCall<B>>,
    reads_waiting: VecDeque<(CallId, Slice<B>, Segment)>,
    reads_in_flight: usize,
    /// Calls received and not yet answered, per direction (forward, backward).
    active: [u32; 2],
}

impl<B: Buf> Responder<B> {
    pub(super) fn new() -> Responder<B> {
        Responder {
            next_id: 0,
            calls: IdMap::default(),
            reads_waiting: VecDeque::new(),
            reads_in_flight: 0,
            active: [0, 0],
        }
    }

    pub(super) fn len(&self) -> usize {
        self.calls.len()
    }

    pub(super) fn clear(&mut self) {
        self.calls.clear();
        self.reads_waiting.clear();
        self.reads_in_flight = 0;
        self.active = [0, 0];
    }

    /// Credits this side grants in the given direction.
    fn grant(config: &CoreConfig, backward: bool) -> u32 {
        if backward {
            config.backward_credits.max(1)
        } else {
            config.credits.max(1)
        }
    }

    /// Sends RDMA_ERROR / RDMA2_ERROR for message `xid` in `version` (version 1 reports
    /// every error but ERR_VERS as ERR_CHUNK).
    pub(super) fn send_error(
        &mut self,
        xid: u32,
        version: u32,
        error: RdmaError,
        config: &CoreConfig,
        out: &mut Outbox<B>,
        stats: &mut Stats,
    ) {
        let credit = config.credits.max(1);
        let header = if version == VERSION {
            Header::v1(xid, credit, Body::Error(error))
        } else {
            // Seed 003 section 5.3.3: the responder "copies the values of the rdma_xid and
            // rdma_vers fields"; the message answers the requester's, hence the flag.
            Header::v2(xid, credit, F_RESPONSE, Body::Error(error))
        };
        if let Some(bytes) = encode(&header) {
            stats.errors_sent += 1;
            out.send(Owner::Nobody, vec![bytes], None);
        }
    }

    /// Takes a call: checks its chunks and starts pulling its Read chunks.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn receive<M: Memory<Buf = B>>(
        &mut self,
        header: Header,
        inline: Bytes,
        alignment: Option<(AlignPadding, usize)>,
        backward: bool,
        mem: &mut M,
        config: &CoreConfig,
        out: &mut Outbox<B>,
        stats: &mut Stats,
    ) {
        let xid = header.xid;
        let version = header.version;
        let (chunks, nomsg) = match header.body {
            Body::Msg(c) => (c, false),
            Body::NoMsg(c) => (c, true),
            _ => return,
        };
        let direction = backward as usize;
        if self.active[direction] >= Self::grant(config, backward) {
            // Seed 004 section 4.3: "The requester MUST NOT send unacknowledged requests in
            // excess of this granted responder credit limit. If the limit is exceeded, the
            // RDMA layer may signal an error, possibly terminating the connection."
            out.events.push_back(Event::Fatal(format!(
                "xid {xid:#x}: more calls than the {} credits granted",
                Self::grant(config, backward)
            )));
            return;
        }
        let refuse = |this: &mut Self, out: &mut Outbox<B>, stats: &mut Stats, why: &str| {
            tracing::debug!(xid, why, "ERR_CHUNK / RDMA2_ERR_BAD_XDR");
            this.send_error(xid, version, RdmaError::BadXdr, config, out, stats);
        };
        let pz = chunks.reads.first().is_some_and(|r| r.position == 0);
        if backward && version == VERSION && !chunks.is_empty() {
            // Seed 004 section 8.3.4: "All three chunk lists MUST be empty." (Version 2 allows
            // them, seed 003 section 8.4.1.)
            return refuse(self, out, stats, "a backward call with chunks");
        }
        if chunks.inv_handle != 0
            && !chunks
                .segments()
                .any(|s| s.rdma_handle == chunks.inv_handle)
        {
            // Seed 003 section 3.3: the value "matches one of the rdma_handle fields in that
            // header"; invalidating any other handle could fence memory of another call.
            return refuse(
                self,
                out,
                stats,
                "rdma_inv_handle names no handle of the call",
            );
        }
        if nomsg && !pz {
            return refuse(
                self,
                out,
                stats,
                "RDMA_NOMSG without a Position-Zero Read chunk",
            );
        }
        if !nomsg && chunks.reads.iter().any(|r| r.position == 0) {
            // Seed 002 section 3.4.1: inline content and a Position-Zero Read chunk cannot
            // both start the message.
            return refuse(self, out, stats, "RDMA_MSG with a Position-Zero Read chunk");
        }
        if nomsg && chunks.reads.iter().skip(1).any(|r| r.position == 0) {
            return refuse(self, out, stats, "two Position-Zero Read chunks");
        }
        self.next_id += 1;
        let id = self.next_id;
        let mut sinks = Vec::with_capacity(chunks.reads.len());
        let mut reads = Vec::new();
        for chunk in &chunks.reads {
            let len = chunk.len() as usize;
            if len == 0 {
                sinks.push((chunk.position, Vec::new(), 0));
                continue;
            }
            let slices = match mem.alloc(len, Access::NONE) {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(xid, error = %e, "no memory for a Read chunk");
                    return refuse(self, out, stats, "no memory for the Read chunks");
                }
            };
            reads.extend(pair_up(&slices, &chunk.segments, len));
            sinks.push((chunk.position, slices, len));
        }
        self.active[direction] += 1;
        let pending = reads.len();
        self.calls.insert(
            id,
            InCall {
                xid,
                version,
                backward,
                chunks,
                inline,
                alignment,
                sinks,
                held: Vec::new(),
                phase: Phase::Reading {
                    pending,
                    failed: false,
                },
            },
        );
        if pending == 0 {
            self.dispatch(id, out);
            return;
        }
        for (sink, remote) in reads {
            self.reads_waiting.push_back((id, sink, remote));
        }
        self.pump_reads(config, out);
    }

    /// Posts waiting RDMA Reads while the peer's IRD allows (seed 004 section 4.3: "limits on
    /// RDMA Read operations in progress at the responder").
    fn pump_reads(&mut self, config: &CoreConfig, out: &mut Outbox<B>) {
        while self.reads_in_flight < config.max_reads.max(1) {
            let Some((id, sink, remote)) = self.reads_waiting.pop_front() else {
                return;
            };
            if !self.calls.contains_key(&id) {
                continue;
            }
            self.reads_in_flight += 1;
            out.read(Owner::Responder(id), sink, remote);
        }
    }

    /// Hands a call whose chunks are all here to the application.
    fn dispatch(&mut self, id: CallId, out: &mut Outbox<B>) {
        let Some(call) = self.calls.get_mut(&id) else {
            return;
        };
        call.phase = Phase::Dispatched;
        let mut message = std::mem::take(&mut call.inline);
        let mut read_chunks = Vec::new();
        for (position, slices, len) in std::mem::take(&mut call.sinks) {
            let data = gather(&slices, len);
            if position == 0 {
                // Seed 004 section 5.3.3: the responder "proceeds to XDR decode the RPC
                // message as if it had received it with the Send data".
                message = data;
            } else {
                read_chunks.push((position, data));
            }
        }
        let mut chunks = (!read_chunks.is_empty()).then(|| ReceivedChunks::for_call(read_chunks));
        if let Some((pad, origin)) = call.alignment {
            chunks = Some(chunks.unwrap_or_default().with_alignment(pad, origin));
        }
        out.events.push_back(Event::Call(IncomingCall {
            id,
            xid: call.xid,
            message,
            chunks,
            write_chunks: call.chunks.writes.iter().map(|w| total_len(w)).collect(),
            reply_chunk: call.chunks.reply.as_ref().map(|r| total_len(r)),
            backward: call.backward,
        }));
    }

    /// An operation of call `id` completed.
    pub(super) fn completed(
        &mut self,
        id: CallId,
        ok: bool,
        config: &CoreConfig,
        out: &mut Outbox<B>,
        stats: &mut Stats,
    ) {
        let Some(call) = self.calls.get_mut(&id) else {
            return;
        };
        match &mut call.phase {
            Phase::Reading { pending, failed } => {
                self.reads_in_flight = self.reads_in_flight.saturating_sub(1);
                *pending = pending.saturating_sub(1);
                *failed |= !ok;
                if *pending == 0 {
                    if *failed {
                        // The peer refused our Read (a bad handle or range in its chunk): the
                        // chunk is unusable (seed 004 section 5.5). Usually the connection is
                        // gone by now, and the answer with it.
                        let (xid, version, backward) = (call.xid, call.version, call.backward);
                        self.finish(id, backward);
                        self.send_error(xid, version, RdmaError::BadXdr, config, out, stats);
                    } else {
                        self.dispatch(id, out);
                    }
                }
                self.pump_reads(config, out);
            }
            Phase::Replying { pending } => {
                *pending = pending.saturating_sub(1);
                if *pending == 0 {
                    self.calls.remove(&id);
                }
            }
            Phase::Dispatched => {}
        }
    }

    /// The call no longer counts against the credits.
    fn finish(&mut self, id: CallId, backward: bool) {
        self.calls.remove(&id);
        let a = &mut self.active[backward as usize];
        *a = a.saturating_sub(1);
    }

    /// The XID, version and direction of call `id`, if it is waiting for its reply.
    fn dispatched(&self, id: CallId) -> Option<(u32, u32, bool)> {
        let call = self.calls.get(&id)?;
        matches!(call.phase, Phase::Dispatched).then_some((call.xid, call.version, call.backward))
    }

    /// Forgets a dispatched call without answering it.
    pub(super) fn discard(&mut self, id: CallId) {
        if let Some((_, _, backward)) = self.dispatched(id) {
            self.finish(id, backward);
        }
    }

    /// Answers call `id` with RDMA_ERROR instead of a reply.
    pub(super) fn reject(
        &mut self,
        id: CallId,
        error: RdmaError,
        config: &CoreConfig,
        out: &mut Outbox<B>,
        stats: &mut Stats,
    ) {
        let Some((xid, version, backward)) = self.dispatched(id) else {
            return;
        };
        self.finish(id, backward);
        self.send_error(xid, version, error, config, out, stats);
    }

    /// Sends the reply to call `id`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn reply<M: Memory<Buf = B>>(
        &mut self,
        id: CallId,
        message: Encoded,
        moved: Vec<MovedItem>,
        mem: &mut M,
        config: &CoreConfig,
        out: &mut Outbox<B>,
        stats: &mut Stats,
    ) {
        let Some((xid, version, backward)) = self.dispatched(id) else {
            return;
        };
        match self.marshal_reply(id, message, moved, mem, config, out, stats) {
            Ok(()) => {
                let a = &mut self.active[backward as usize];
                *a = a.saturating_sub(1);
            }
            Err((error, why)) => {
                tracing::debug!(xid, %why, %error, "the reply fits neither inline nor the chunks");
                self.finish(id, backward);
                self.send_error(xid, version, error, config, out, stats);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn marshal_reply<M: Memory<Buf = B>>(
        &mut self,
        id: CallId,
        message: Encoded,
        moved: Vec<MovedItem>,
        mem: &mut M,
        config: &CoreConfig,
        out: &mut Outbox<B>,
        stats: &mut Stats,
    ) -> Result<(), (RdmaError, String)> {
        let system = |why: String| (RdmaError::System, why);
        let call = self
            .calls
            .get_mut(&id)
            .ok_or_else(|| system("no such call".into()))?;
        let owner = Owner::Responder(id);
        let mut ops = 0usize;
        let mut writes: Vec<(Slice<B>, Segment)> = Vec::new();
        // Seed 004 section 4.4.5.1: an unused Write chunk returns with the same number of
        // segments, all of length zero.
        let mut returned: Vec<Vec<Segment>> = call
            .chunks
            .writes
            .iter()
            .map(|w| {
                w.iter()
                    .map(|s| Segment {
                        rdma_length: 0,
                        ..*s
                    })
                    .collect()
            })
            .collect();
        for item in &moved {
            let ChunkTarget::Write { index } = item.target else {
                return Err(system("a reply item moved to a Read chunk".into()));
            };
            let chunk = call
                .chunks
                .writes
                .get(index)
                .ok_or_else(|| system(format!("no Write chunk {index}")))?;
            if item.data.len() as u64 > total_len(chunk) {
                // Seed 003 section 5.3.3: "Indexing starts at one (1), which represents the
                // first Write chunk."
                return Err((
                    RdmaError::WriteResource {
                        chunk_index: index as u32 + 1,
                        length_needed: item.data.len() as u32,
                    },
                    format!("Write chunk {index} is too small"),
                ));
            }
            let slices = mem
                .source(std::slice::from_ref(&item.data), Access::NONE)
                .map_err(|e| system(e.to_string()))?;
            let pairs = pair_up(&slices, chunk, item.data.len());
            // Seed 004 section 4.4.5: "The responder updates the segment length fields to
            // reflect the actual amount of data that is being returned in the chunk."
            returned[index] = filled(chunk, item.data.len());
            call.held.extend(slices);
            writes.extend(pairs);
        }
        let inline_len = message.len();
        let credit = Self::grant(config, call.backward);
        let mut reply_returned = None;
        let mut reply_writes = Vec::new();
        let body_msg;
        let mut send: Vec<Bytes>;
        if let Some(reply_chunk) = &call.chunks.reply {
            // Seed 004 section 4.6.3: "Responders SHOULD use a Long Message whenever a Reply
            // chunk has been provided by a requester."
            if inline_len as u64 > total_len(reply_chunk) {
                return Err((
                    RdmaError::ReplyResource {
                        length_needed: inline_len as u32,
                    },
                    format!(
                        "a reply of {inline_len} bytes for a Reply chunk of {}",
                        total_len(reply_chunk)
                    ),
                ));
            }
            let slices = mem
                .source(message.parts(), Access::NONE)
                .map_err(|e| system(e.to_string()))?;
            reply_writes = pair_up(&slices, reply_chunk, inline_len);
            reply_returned = Some(filled(reply_chunk, inline_len));
            call.held.extend(slices);
            body_msg = false;
            send = Vec::with_capacity(1);
        } else {
            body_msg = true;
            send = Vec::with_capacity(1 + message.parts().len());
        }
        let chunks = Chunks {
            inv_handle: 0,
            reads: Vec::new(),
            writes: returned,
            reply: reply_returned,
        };
        let body = if body_msg {
            Body::Msg(chunks)
        } else {
            Body::NoMsg(chunks)
        };
        let mut header = if call.version == VERSION {
            Header::v1(call.xid, credit, body)
        } else {
            Header::v2(call.xid, credit, F_RESPONSE, body)
        };
        let mut message = message;
        if let Some(pad) = config.mode_2004.as_ref().and_then(|m| m.padding) {
            if body_msg && !call.backward {
                if let Some((h, m)) = super::msgp::padded(&header, &message, pad, config.peer_recv_size) {
                    (header, message) = (h, m);
                }
            }
        }
        let inline_len = message.len();
        let header_len = header::encoded_len(&header);
        if body_msg && header_len + inline_len > config.peer_recv_size {
            // Seed 004 section 5.5: a reply that fits neither inline nor in the provided
            // chunks gets RDMA_ERROR; seed 003 section 5.3.3: RDMA2_ERR_REPLY_RESOURCE with
            // the bytes needed.
            return Err((
                RdmaError::ReplyResource {
                    length_needed: inline_len as u32,
                },
                format!(
                    "a reply of {} bytes with no Reply chunk (the requester receives {})",
                    header_len + inline_len,
                    config.peer_recv_size
                ),
            ));
        }
        if header_len > config.peer_recv_size {
            return Err(system(
                "the reply's header alone exceeds the requester's receive size".into(),
            ));
        }
        send.push(encode(&header).ok_or_else(|| system("the header does not encode".into()))?);
        if body_msg {
            message.append_parts_to(&mut send);
        }
        let invalidate = if call.version == VERSION {
            // With the requester's agreement (RFC 8797), invalidate one of its handles for it.
            config
                .peer_remote_invalidate
                .then(|| call.chunks.segments().next().map(|s| s.rdma_handle))
                .flatten()
        } else {
            // Version 2: the handle the requester named, if any (seed 003 section 3.3).
            (call.chunks.inv_handle != 0).then_some(call.chunks.inv_handle)
        };
        if !writes.is_empty() {
            stats.replies_write_chunks += 1;
        }
        if body_msg {
            stats.replies_inline += u64::from(writes.is_empty());
        } else {
            stats.replies_long += 1;
        }
        for (source, remote) in writes.into_iter().chain(reply_writes) {
            out.write(owner, source, remote);
            ops += 1;
        }
        // RDMA ordering places every Write before the Send that follows them (seed 004
        // section 4.5).
        out.send(owner, send, invalidate);
        ops += 1;
        call.phase = Phase::Replying { pending: ops };
        Ok(())
    }
}

/// `segments` as a reply returns them after `len` bytes were written into them in order: each
/// segment's length is what it received (zero for those not reached).
fn filled(segments: &[Segment], len: usize) -> Vec<Segment> {
    let mut left = len as u64;
    segments
        .iter()
        .map(|s| {
            let n = left.min(s.rdma_length as u64);
            left -= n;
            Segment {
                rdma_length: n as u32,
                ..*s
            }
        })
        .collect()
}

fn encode(header: &Header) -> Option<Bytes> {
    let mut enc = Encoder::with_capacity(header::encoded_len(header));
    header::encode(header, &mut enc).ok()?;
    Some(enc.finish().into_bytes())
}

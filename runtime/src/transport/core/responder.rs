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

use std::time::Instant;

use bytes::Bytes;

use super::super::header::{
    self, total_len, AlignPadding, Body, Chunks, Header, RdmaError, ReadChunk, Segment, F_RESPONSE,
    VERSION,
};
use super::memory::{pulled_message, sink_data, sink_lens, sinks_and_pulls, Sinks};
use super::pulling::{Pulled, Puller};
use super::requester::revoke_slices;
use super::slab::CallSlab;
use super::{
    pair_up, Buf, CallId, CoreConfig, Event, IncomingCall, Memory, Outbox, Owner, Slice, Stats,
};
use crate::id_map::IdMap;
use crate::rdma::Access;
use crate::xdr::{ChunkTarget, Encoded, MovedItem};

enum Phase {
    /// Its Read chunks are being pulled ([`Puller`]).
    Reading,
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
    /// Memory that must outlive the posted operations.
    held: Vec<Slice<B>>,
    /// Read-Read: this side's memory exposed in the reply's Read chunks, kept until
    /// RDMA_DONE or `done_deadline`.
    exposed: Vec<Slice<B>>,
    done_deadline: Option<Instant>,
    /// RDMA_DONE came before the reply's Send completed.
    done_early: bool,
    phase: Phase,
}

/// A reply's memory exposed in its Read chunks, awaiting RDMA_DONE (seed 000 section 3.8).
struct Exposure<B> {
    slices: Vec<Slice<B>>,
    deadline: Instant,
}

pub(super) struct Responder<B> {
    calls: CallSlab<InCall<B>>,
    /// The calls' Read chunks being pulled.
    puller: Puller<B>,
    /// Calls received and not yet answered, per direction (forward, backward).
    active: [u32; 2],
    /// Read-Read replies sent and awaiting RDMA_DONE, by XID.
    exposures: IdMap<u32, Exposure<B>>,
}

impl<B: Buf> Responder<B> {
    pub(super) fn new() -> Responder<B> {
        Responder {
            calls: CallSlab::default(),
            puller: Puller::new(),
            active: [0, 0],
            exposures: IdMap::default(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.calls.len()
    }

    pub(super) fn clear(&mut self) {
        self.calls.clear();
        self.puller.clear();
        self.active = [0, 0];
        self.exposures.clear();
    }

    /// True while calls wait for memory for their Read chunks: call [`Responder::pull`]
    /// again once memory has come back.
    pub(super) fn memory_waiting(&self) -> bool {
        self.puller.memory_waiting()
    }

    /// Says whether memory is short for others ([`Puller`]).
    pub(super) fn set_pressure(&mut self, on: bool) {
        self.puller.set_pressure(on);
    }

    /// True while RDMA Reads of the peer's Read chunks are watched for progress.
    pub(super) fn reads_watched(&self) -> bool {
        self.puller.watched()
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
        if let Ok(send) = header::to_send(&header) {
            stats.errors_sent += 1;
            out.send(Owner::Nobody, send, None);
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
        self.active[direction] += 1;
        let reads = !sink_lens(&chunks.reads).is_empty();
        let pulled = chunks.reads.clone();
        let id = self.calls.insert(InCall {
            xid,
            version,
            backward,
            chunks,
            inline,
            alignment,
            held: Vec::new(),
            exposed: Vec::new(),
            done_deadline: None,
            done_early: false,
            phase: Phase::Reading,
        });
        if !reads {
            // Nothing to pull (no Read chunk, or only empty ones).
            let sinks = sinks_and_pulls(&pulled, Vec::new()).0;
            return self.dispatch(id, sinks, mem, config, out, stats);
        }
        self.puller.start(id, pulled, mem.max_piece());
        self.pull(mem, config, out, stats);
    }

    /// Takes memory for the pieces of the calls' Read chunks and posts their RDMA Reads as
    /// far as the window, the budget and the peer's IRD allow ([`Puller::pump`]).
    pub(super) fn pull<M: Memory<Buf = B>>(
        &mut self,
        mem: &mut M,
        config: &CoreConfig,
        out: &mut Outbox<B>,
        stats: &mut Stats,
    ) {
        let ended = self.puller.pump(mem, config, out, stats);
        self.pulled(ended, mem, config, out, stats);
    }

    /// Dispatches the calls whose Read chunks are all here, and answers those that cannot
    /// be pulled with ERR_CHUNK (RDMA2_ERR_BAD_XDR): the chunk is unusable, or no budget could
    /// hold it (seed 004 section 5.5). Usually the connection is gone by then when the peer
    /// refused a Read, and the answer with it.
    fn pulled<M: Memory<Buf = B>>(
        &mut self,
        ended: Vec<Pulled<B>>,
        mem: &mut M,
        config: &CoreConfig,
        out: &mut Outbox<B>,
        stats: &mut Stats,
    ) {
        let memory_back = !ended.is_empty();
        for end in ended {
            match end {
                Pulled::Done(id, sinks) => self.dispatch(id, sinks, mem, config, out, stats),
                Pulled::Failed(id) => {
                    let Some(call) = self.calls.get(id) else {
                        continue;
                    };
                    let (xid, version, backward) = (call.xid, call.version, call.backward);
                    self.finish(id, backward);
                    self.send_error(xid, version, RdmaError::BadXdr, config, out, stats);
                }
            }
        }
        if memory_back && self.puller.memory_waiting() {
            // What the ended calls held may be back (a copy out, a failed call's sinks).
            self.pull(mem, config, out, stats);
        }
    }

    /// Hands a call whose chunks are all here to the application. Chunk data stays in its
    /// registered buffer unless `mem` says the memory lent out is near its budget: then it is
    /// copied to ordinary memory, so that what a handler keeps never pins more.
    fn dispatch<M: Memory<Buf = B>>(
        &mut self,
        id: CallId,
        sinks: Sinks<B>,
        mem: &mut M,
        config: &CoreConfig,
        out: &mut Outbox<B>,
        stats: &mut Stats,
    ) {
        let Some(call) = self.calls.get_mut(id) else {
            return;
        };
        let mut copied = 0usize;
        let data = sink_data(sinks, |len| mem.keep_received(len), |len| copied += len);
        if copied > 0 {
            mem.copied_out(copied);
        }
        let (message, chunks) =
            pulled_message(std::mem::take(&mut call.inline), data, call.alignment);
        if let Err(e) = header::check_rpc_xid(call.xid, &message) {
            // Seed 004 section 5.1.1, as for RDMA_MSG in `receive`: here the message came in
            // a Position-Zero Read chunk, so only now is its XID known.
            let (xid, version, backward) = (call.xid, call.version, call.backward);
            tracing::debug!(xid, %e, "ERR_CHUNK / RDMA2_ERR_BAD_XDR");
            self.finish(id, backward);
            return self.send_error(xid, version, RdmaError::BadXdr, config, out, stats);
        }
        call.phase = Phase::Dispatched;
        stats.calls_received += 1;
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
    pub(super) fn completed<M: Memory<Buf = B>>(
        &mut self,
        id: CallId,
        ok: bool,
        mem: &mut M,
        config: &CoreConfig,
        out: &mut Outbox<B>,
        stats: &mut Stats,
    ) {
        let Some(call) = self.calls.get_mut(id) else {
            return;
        };
        match &mut call.phase {
            Phase::Reading => {
                let ended = self.puller.completed(id, ok, mem, config, out, stats);
                self.pulled(ended, mem, config, out, stats);
            }
            Phase::Replying { pending } => {
                *pending = pending.saturating_sub(1);
                if *pending == 0 {
                    if let Some(call) = self.calls.remove(id) {
                        self.expose(call, out, stats);
                    }
                }
            }
            Phase::Dispatched => {}
        }
    }

    /// A replied call whose reply exposed memory in Read chunks: kept until RDMA_DONE (or
    /// released now if RDMA_DONE came first).
    fn expose(&mut self, call: InCall<B>, out: &mut Outbox<B>, stats: &mut Stats) {
        let (Some(deadline), false) = (call.done_deadline, call.exposed.is_empty()) else {
            return;
        };
        if call.done_early {
            return revoke_slices(&call.exposed, out, stats);
        }
        self.exposures.insert(
            call.xid,
            Exposure {
                slices: call.exposed,
                deadline,
            },
        );
    }

    /// Read-Read replies awaiting RDMA_DONE.
    pub(super) fn exposures(&self) -> usize {
        self.exposures.len()
    }

    /// RDMA_DONE for `xid` (seed 000 section 3.8: "the client ... signal\[s\] the server that
    /// it has received the chunks, so the server can de-register and free the memory"). False
    /// when nothing awaited it.
    pub(super) fn done(&mut self, xid: u32, out: &mut Outbox<B>, stats: &mut Stats) -> bool {
        if let Some(e) = self.exposures.remove(&xid) {
            stats.dones_received += 1;
            revoke_slices(&e.slices, out, stats);
            return true;
        }
        // The reply's Send may not have completed yet.
        match self
            .calls
            .values_mut()
            .find(|c| c.xid == xid && !c.backward && !c.exposed.is_empty())
        {
            Some(call) => {
                stats.dones_received += 1;
                call.done_early = true;
                true
            }
            None => false,
        }
    }

    /// When the first exposure without RDMA_DONE runs out, or the RDMA Reads in flight
    /// must have made progress.
    pub(super) fn next_deadline(&self, config: &CoreConfig) -> Option<Instant> {
        let reads = self.puller.next_deadline(config);
        self.exposures
            .values()
            .map(|e| e.deadline)
            .chain(reads)
            .min()
    }

    /// Releases the exposures whose deadline passed (seed 000 section 3.8: "In the event that
    /// the client fails to return the Done message, the server can proceed with a de-register
    /// and free chunk buffers after a time-out").
    pub(super) fn expire(
        &mut self,
        now: Instant,
        config: &CoreConfig,
        out: &mut Outbox<B>,
        stats: &mut Stats,
    ) {
        self.puller.expire(now, config, out);
        let expired: Vec<u32> = self
            .exposures
            .iter()
            .filter(|(_, e)| e.deadline <= now)
            .map(|(xid, _)| *xid)
            .collect();
        for xid in expired {
            if let Some(e) = self.exposures.remove(&xid) {
                tracing::debug!(
                    xid,
                    "no RDMA_DONE in time: releasing the reply's Read chunks"
                );
                stats.exposures_expired += 1;
                revoke_slices(&e.slices, out, stats);
            }
        }
    }

    /// The call no longer counts against the credits.
    fn finish(&mut self, id: CallId, backward: bool) {
        self.calls.discard(id);
        let a = &mut self.active[backward as usize];
        *a = a.saturating_sub(1);
    }

    /// The XID, version and direction of call `id`, if it is waiting for its reply.
    fn dispatched(&self, id: CallId) -> Option<(u32, u32, bool)> {
        let call = self.calls.get(id)?;
        matches!(call.phase, Phase::Dispatched).then_some((call.xid, call.version, call.backward))
    }

    /// True when call `id` is a forward call waiting for its reply.
    pub(super) fn is_forward(&self, id: CallId) -> bool {
        self.dispatched(id)
            .is_some_and(|(_, _, backward)| !backward)
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

    /// Sends the reply to call `id`; false when it fit neither inline nor the call's chunks
    /// and RDMA_ERROR went instead.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn reply<M: Memory<Buf = B>>(
        &mut self,
        id: CallId,
        message: Encoded,
        moved: Vec<MovedItem>,
        padding: Option<AlignPadding>,
        now: impl FnOnce() -> Instant,
        mem: &mut M,
        config: &CoreConfig,
        out: &mut Outbox<B>,
        stats: &mut Stats,
    ) -> bool {
        let Some((xid, version, backward)) = self.dispatched(id) else {
            return true;
        };
        match self.marshal_reply(id, message, moved, padding, now, mem, config, out, stats) {
            Ok(()) => {
                let a = &mut self.active[backward as usize];
                *a = a.saturating_sub(1);
                true
            }
            Err((error, why)) => {
                tracing::debug!(xid, %why, %error, "the reply fits neither inline nor the chunks");
                self.finish(id, backward);
                self.send_error(xid, version, error, config, out, stats);
                false
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn marshal_reply<M: Memory<Buf = B>>(
        &mut self,
        id: CallId,
        message: Encoded,
        moved: Vec<MovedItem>,
        padding: Option<AlignPadding>,
        now: impl FnOnce() -> Instant,
        mem: &mut M,
        config: &CoreConfig,
        out: &mut Outbox<B>,
        stats: &mut Stats,
    ) -> Result<(), (RdmaError, String)> {
        let system = |why: String| (RdmaError::System, why);
        let call = self
            .calls
            .get_mut(id)
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
        let read_read = config
            .mode_2004
            .as_ref()
            .filter(|m| m.read_read && !call.backward);
        let mut reads = Vec::new();
        for item in &moved {
            let index = match item.target {
                ChunkTarget::Write { index } => index,
                // Read-Read (seed 000 section 3.8): the result stays in this side's memory,
                // exposed in a Read chunk of the reply for the requester to pull.
                ChunkTarget::Read { position } if read_read.is_some() => {
                    if item.data.is_empty() {
                        continue;
                    }
                    let slices = mem
                        .source(std::slice::from_ref(&item.data), Access::REMOTE_READ)
                        .map_err(|e| system(e.to_string()))?;
                    reads.push(ReadChunk {
                        position,
                        segments: slices.iter().map(Slice::segment).collect(),
                    });
                    call.exposed.extend(slices);
                    continue;
                }
                ChunkTarget::Read { .. } => {
                    return Err(system("a reply item moved to a Read chunk".into()))
                }
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
        } else {
            body_msg = true;
        }
        let mut body_msg = body_msg;
        if let (true, Some(_)) = (body_msg, read_read) {
            let probe = Header::v1(
                call.xid,
                credit,
                Body::Msg(Chunks {
                    inv_handle: 0,
                    reads: reads.clone(),
                    writes: returned.clone(),
                    reply: None,
                }),
            );
            if header::encoded_len(&probe) + inline_len > config.peer_recv_size {
                // Seed 000 section 5.2: with no Reply chunk, "the message must be returned as
                // a Read chunk": RDMA_NOMSG with the whole reply at Position zero (section 5.1).
                let slices = mem
                    .source(message.parts(), Access::REMOTE_READ)
                    .map_err(|e| system(e.to_string()))?;
                reads.insert(
                    0,
                    ReadChunk {
                        position: 0,
                        segments: slices.iter().map(Slice::segment).collect(),
                    },
                );
                call.exposed.extend(slices);
                body_msg = false;
            }
        }
        if let Some(mode) = read_read.filter(|_| !call.exposed.is_empty()) {
            call.done_deadline = Some(now() + mode.done_timeout);
            stats.replies_read_chunks += 1;
        }
        let chunks = Chunks {
            inv_handle: 0,
            reads,
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
        if let Some(pad) = padding {
            if body_msg && !call.backward {
                if let Some((h, m, added)) =
                    super::msgp::padded(&header, &message, pad, config.peer_recv_size)
                {
                    (header, message) = (h, m);
                    stats.padded_sent += 1;
                    stats.padding_bytes_sent += added as u64;
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
        let mut send =
            header::to_send(&header).map_err(|_| system("the header does not encode".into()))?;
        if body_msg {
            send.push_encoded(message);
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
        if ops == 0 && call.held.is_empty() && call.exposed.is_empty() {
            // A Send alone, with no memory of the call's behind it (most replies): nothing
            // waits for its completion, and the call is done.
            out.send(Owner::Nobody, send, invalidate);
            self.calls.discard(id);
            return Ok(());
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

//! A call's reply: matched by XID, its credit taken as the grant, its Write chunks and Reply
//! chunk read back, an RDMA_ERROR turned into the call's error or a resend in another shape, and
//! the fence: every handle the peer got invalidated before the result is delivered.

use bytes::Bytes;

use super::{invalidate_slices, protocol, OutCall, Phase, Requester};
use crate::rpc::{Reply, TransportError};
use crate::transport::core::{
    Buf, CallId, CoreConfig, Event, Memory, Outbox, Owner, Slice, Stats, WriteTarget,
};
use crate::transport::header::{self, AlignPadding, Body, Header, RdmaError, Segment};
use crate::xdr::ReceivedChunks;

impl<B: Buf> Requester<B> {
    /// Takes an RDMA_MSG or RDMA_NOMSG reply; false when no call waits for its XID.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::transport::core) fn reply<M: Memory<Buf = B>>(
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
    pub(in crate::transport::core) fn error_reply<M: Memory<Buf = B>>(
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
        let error = match self.resend(
            id,
            error,
            invalidated,
            mem,
            config,
            header_extra,
            out,
            stats,
        ) {
            Ok(()) => return true,
            Err(Some(error)) => error,
            Err(None) => match error {
                RdmaError::Vers { low, high } => TransportError::RdmaVersion { low, high },
                RdmaError::BadXdr => TransportError::RdmaChunk,
                other => TransportError::RdmaRefused(other),
            },
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
    /// more reply resources"), and after a version 1 ERR_CHUNK with the Write chunks of the
    /// call's [`room`](crate::transport::core::OutgoingCall::room) when they offer more, in
    /// steps of sixteen times the last attempt's. Once only (but for those steps), and never
    /// past [`CoreConfig::max_reply_size`]. `Err` when the call must
    /// fail instead, with the error to fail it with if not the one `error` maps to.
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
    ) -> Result<(), Option<TransportError>> {
        let Some(call) = self.calls.get(id) else {
            return Err(None);
        };
        let Some(plan) = call.plan.as_ref() else {
            return Err(None);
        };
        let bound = config.max_reply_size;
        let too_large = |needed: Option<usize>| {
            Some(TransportError::ReplyTooLarge {
                needed: needed.map(|n| n as u64),
                limit: bound as u64,
            })
        };
        if plan.resent {
            // Sent again with all the room the bound allows, and still refused.
            let offered = plan.write_sizes.iter().sum::<usize>() + plan.reply_chunk.unwrap_or(0);
            return Err(match error {
                RdmaError::BadXdr if !plan.room.is_empty() && offered >= bound => too_large(None),
                _ => None,
            });
        }
        let (mut message, mut moved) = (plan.message.clone(), plan.moved.clone());
        // The attempt offers part of the room only: another may follow.
        let mut stepping = false;
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
                    return Err(too_large(Some(reply)));
                }
                reply_chunk = Some(reply);
            }
            RdmaError::WriteResource {
                chunk_index,
                length_needed,
            } => {
                let (i, needed) = (chunk_index as usize, length_needed as usize);
                if i == 0 || i > write_sizes.len() || needed <= write_sizes[i - 1] {
                    return Err(None);
                }
                if needed > bound {
                    return Err(too_large(Some(needed)));
                }
                write_sizes[i - 1] = needed;
            }
            RdmaError::ReplyResource { length_needed } => {
                let needed = length_needed as usize;
                if reply_chunk.is_some_and(|r| r >= needed) {
                    return Err(None);
                }
                if needed > bound {
                    return Err(too_large(Some(needed)));
                }
                reply_chunk = Some(needed);
            }
            // Seed 004 section 5.5: version 1 says only that the chunks would not do.
            RdmaError::BadXdr if !plan.room.is_empty() => {
                let room: Vec<usize> = plan.room.iter().map(|&r| r.min(bound)).collect();
                let more = room.len() > write_sizes.len()
                    || room.iter().zip(&write_sizes).any(|(r, w)| r > w);
                if !more {
                    return Err((write_sizes.iter().sum::<usize>() >= bound)
                        .then(|| too_large(None))
                        .flatten());
                }
                // Sixteen times the room of the last attempt (at least the default Write
                // chunk), up to all the room the bound allows, not all of it at once: a device
                // pins what is registered, and a bound of 64 MiB for one reply of kilobytes
                // is what a connection would then keep. The responder keeps the result
                // between attempts (`driver::conn::undelivered`).
                let stepped: Vec<usize> = room
                    .iter()
                    .zip(write_sizes.iter().chain(std::iter::repeat(&0)))
                    .map(|(&r, &w)| {
                        let step = w.saturating_mul(16).max(config.default_write_chunk);
                        r.min(step).max(w)
                    })
                    .collect();
                stepping = stepped != room;
                write_sizes = stepped;
            }
            _ => return Err(None),
        }
        let xid = call.xid;
        let sent = (write_sizes.clone(), reply_chunk);
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
            return Err(None);
        };
        let Some(call) = self.calls.get_mut(id) else {
            return Err(None);
        };
        tracing::debug!(xid, %error, "sending the call again in the shape the responder asks for");
        let old = std::mem::replace(&mut call.exposed, m.exposed);
        call.write_sinks = m.write_sinks;
        call.reply_sink = m.reply_sink;
        call.inv_handle = m.inv_handle;
        if let Some(plan) = call.plan.as_mut() {
            plan.resent = !stepping;
            (plan.write_sizes, plan.reply_chunk) = sent;
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
        Ok(())
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
    pub(super) fn fence(
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
    pub(in crate::transport::core) fn completed(
        &mut self,
        id: CallId,
        _ok: bool,
        out: &mut Outbox<B>,
    ) {
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
    // Seed 004 section 5.1.1: the reply's RPC XID "MUST be the same" as its transport XID,
    // which matched it to this call; a reply that contradicts itself is one this side "cannot
    // parse" (section 5.5), and the call fails (see `header::check_rpc_xid`).
    header::check_rpc_xid(call.xid, &message).map_err(|e| protocol(format!("a reply with {e}")))?;
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

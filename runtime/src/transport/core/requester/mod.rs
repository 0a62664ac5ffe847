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

use super::super::header::{self, Body, Header, Segment, VERSION};
use super::slab::CallSlab;
use super::{
    Buf, CallId, CoreConfig, Event, Memory, Outbox, OutgoingCall, Owner, SendBytes, Slice, Stats,
    WriteTarget,
};
use crate::id_map::{IdMap, IdSet};
use crate::rpc::{Reply, TransportError};
use crate::xdr::{Encoded, MovedItem};

mod marshal;
mod pull;
mod reply;

use marshal::with_header;
use pull::Pull;

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
    /// The Write chunk sizes to offer after a version 1 ERR_CHUNK ([`OutgoingCall::room`]).
    room: Vec<usize>,
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

    /// Calls waiting for a credit (or the version).
    pub(super) fn queued(&self) -> usize {
        self.queue.len()
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
        // responder reports a limit (seed 003 section 5.3.3); so does a call that may need
        // more room for its results than this shape offers.
        let plan = (self.version != VERSION || self.hold || !call.room.is_empty()).then(|| {
            Box::new(Plan {
                message: call.message.clone(),
                moved: call.moved.clone(),
                write_sizes: call.write_chunks.iter().map(WriteTarget::size).collect(),
                reply_chunk: call.reply_chunk,
                room: call.room,
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

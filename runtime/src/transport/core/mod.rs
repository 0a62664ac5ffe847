//! The RPC-over-RDMA version 1 engine of one connection, as a pure state machine (sans-IO).
//!
//! # Contract
//!
//! A [`Core`] owns no socket, no queue pair and no clock. Its caller (the driver, or a test)
//!
//! * feeds it **inputs**: [`Core::handle_recv`] with each received message, in order;
//!   [`Core::handle_completion`] with the outcome of each operation it emitted;
//!   [`Core::start_call`] / [`Core::cancel`] for its own calls; [`Core::send_reply`] with the
//!   reply to each call it was handed; [`Core::handle_timeout`] with the current time once
//!   [`Core::poll_timeout`] has passed; [`Core::close`] when the connection is gone;
//! * and drains the **outputs** after every input: [`Core::poll_op`] returns the RDMA
//!   operations to post, in order (Sends, RDMA Reads, RDMA Writes, local invalidations);
//!   [`Core::poll_event`] returns what happened for the application (a reply to a call, a call
//!   to dispatch).
//!
//! Registered memory comes from the [`Memory`] given to the inputs that need it. Every
//! operation's completion must come back through [`Core::handle_completion`] with the
//! operation's [`OpId`]; a failed operation (other than a flush) means the connection is
//! unusable and the caller should [`close`](Core::close) it.
//!
//! One core serves both directions of a connection (seed 004 section 8): as a client it is
//! the forward requester and, when the backward direction is enabled, a backward responder; as
//! a server the reverse. Directions have their own XIDs and credits.

mod memory;
mod requester;
mod responder;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::header::{self, Body, Header, HeaderError, HeaderLimits, Segment};
use crate::id_map::IdMap;
use crate::rdma::WcStatus;
use crate::rpc::{Reply, TransportError};
use crate::xdr::{Encoded, MovedItem, ReceivedChunks, ThresholdPolicy};

pub use memory::{gather, pair_up, Buf, Memory, MemoryError, Slice};
use requester::Requester;
use responder::Responder;

/// Identifies an operation the core emitted; its completion carries it back.
pub type OpId = u64;

/// Identifies a call the core tracks (requester side: one the application started;
/// responder side: one the peer sent).
pub type CallId = u64;

/// Which end of the connection this core is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The ONC RPC client: it made the connection and sends forward calls.
    Client,
    /// The ONC RPC server: it accepted the connection and answers forward calls.
    Server,
}

/// Settings of one connection's core.
#[derive(Debug, Clone)]
pub struct CoreConfig {
    /// Client or server.
    pub role: Role,
    /// Forward credits: requested by a client in its calls, granted by a server in its
    /// replies (seed 004 section 4.3). At least 1.
    pub credits: u32,
    /// Backward-direction credits (seed 004 section 8.2.1): the backward calls a client
    /// accepts at once, or the backward calls a server asks to send. 0 turns the backward
    /// direction off.
    pub backward_credits: u32,
    /// The size of this side's receive buffers: the largest message the peer may send.
    pub recv_size: usize,
    /// The size of the peer's receive buffers: the largest message this side may send,
    /// transport header included (seed 002 section 4.1).
    pub peer_recv_size: usize,
    /// The peer accepts Send With Invalidate of the handles it advertises (RFC 8797).
    pub peer_remote_invalidate: bool,
    /// RDMA Reads this side may have outstanding (the peer's IRD, our ORD).
    pub max_reads: usize,
    /// Bounds on what a peer's header may ask for.
    pub limits: HeaderLimits,
    /// DDP-eligible arguments at least this long move to Read chunks even when they would fit
    /// inline.
    pub min_ddp_size: usize,
    /// The Write chunk size a requester provides for a DDP-eligible result whose size the
    /// call does not say.
    pub default_write_chunk: usize,
    /// The Reply chunk size a requester provides when the reply's size is unbounded and the
    /// call does not say.
    pub default_reply_chunk: usize,
}

impl CoreConfig {
    /// Defaults for `role`: 32 credits, no backward direction, 4 KiB receive buffers on both
    /// sides, 16 RDMA Reads, DDP from 1 KiB, 1 MiB Write and Reply chunks by default.
    pub fn new(role: Role) -> CoreConfig {
        CoreConfig {
            role,
            credits: 32,
            backward_credits: 0,
            recv_size: 4096,
            peer_recv_size: 4096,
            peer_remote_invalidate: false,
            max_reads: 16,
            limits: HeaderLimits::default(),
            min_ddp_size: 1024,
            default_write_chunk: 1 << 20,
            default_reply_chunk: 1 << 20,
        }
    }

    /// Receives this side must keep posted: one per forward credit and one per backward
    /// credit (seed 004 section 8.2.2).
    pub fn receives(&self) -> usize {
        (self.credits.max(1) + self.backward_credits) as usize
    }
}

/// An RDMA operation to post.
#[derive(Debug, Clone)]
pub enum Op<B> {
    /// A Send of the concatenated `message` (transport header and inline RPC message), with
    /// Send With Invalidate of the peer's handle `invalidate`.
    Send {
        /// The operation.
        id: OpId,
        /// The bytes, in order; at most the peer's receive size in all.
        message: Vec<Bytes>,
        /// Send With Invalidate of this handle.
        invalidate: Option<u32>,
    },
    /// An RDMA Read of `remote` into `sink`.
    Read {
        /// The operation.
        id: OpId,
        /// Where the bytes land (as long as `remote`).
        sink: Slice<B>,
        /// The peer's segment.
        remote: Segment,
    },
    /// An RDMA Write of `source` to `remote`.
    Write {
        /// The operation.
        id: OpId,
        /// The bytes (as long as `remote`).
        source: Slice<B>,
        /// The peer's segment.
        remote: Segment,
    },
    /// A local invalidate of the handle of `buf`: the peer can no longer reach the memory.
    Invalidate {
        /// The operation.
        id: OpId,
        /// The buffer whose handle to invalidate.
        buf: B,
    },
    /// Revoke the handle of `buf` at once, without a work request and without a completion
    /// (the driver rekeys the buffer to no remote rights). For an abandoned call, whose reply
    /// may still come with a Send With Invalidate of that very handle: invalidating a handle
    /// twice is an error on every RNIC (and crashes Linux 6.1's rxe), while a handle that no
    /// longer exists only fails the peer's invalidation.
    Revoke {
        /// The buffer whose handle to revoke.
        buf: B,
    },
}

impl<B> Op<B> {
    /// The operation's id (`None` for a revocation, which has no completion).
    pub fn id(&self) -> Option<OpId> {
        match self {
            Op::Send { id, .. }
            | Op::Read { id, .. }
            | Op::Write { id, .. }
            | Op::Invalidate { id, .. } => Some(*id),
            Op::Revoke { .. } => None,
        }
    }
}

/// A call the peer sent, ready to be dispatched (its Read chunks have been pulled).
#[derive(Debug)]
pub struct IncomingCall {
    /// Pass it back to [`Core::send_reply`].
    pub id: CallId,
    /// The call's XID.
    pub xid: u32,
    /// The whole RPC call message (from a Position-Zero Read chunk for RDMA_NOMSG).
    pub message: Bytes,
    /// Chunk data for DDP-eligible arguments.
    pub chunks: Option<ReceivedChunks>,
    /// The capacity of each Write chunk the requester provided, for the reply's encoder.
    pub write_chunks: Vec<u64>,
    /// The capacity of the Reply chunk, if one was provided.
    pub reply_chunk: Option<u64>,
    /// True for a backward-direction call (the server calling the client).
    pub backward: bool,
}

/// What happened, for the application.
#[derive(Debug)]
pub enum Event {
    /// A call started with [`Core::start_call`] finished: its reply (with every registration
    /// fenced from the peer), or why not.
    Reply {
        /// The call.
        call: CallId,
        /// The reply or the failure.
        result: Result<Reply, TransportError>,
    },
    /// A call to dispatch.
    Call(IncomingCall),
    /// The peer broke the protocol in a way that leaves no answer but closing the connection
    /// (more calls than the credits granted, seed 004 section 4.3).
    Fatal(String),
}

/// A call to send, as the driver prepared it.
#[derive(Debug)]
pub struct OutgoingCall<B> {
    /// The XID, from [`Core::next_xid`], already in `message`.
    pub xid: u32,
    /// The RPC call message, with DDP-eligible items moved out (an [`Encoder::for_call`]
    /// with [`Core::call_policy`]).
    ///
    /// [`Encoder::for_call`]: crate::xdr::Encoder::for_call
    pub message: Encoded,
    /// The moved items: each becomes a Read chunk at its Position.
    pub moved: Vec<MovedItem>,
    /// Where the DDP-eligible results go: one Write chunk each.
    pub write_chunks: Vec<WriteTarget<B>>,
    /// The Reply chunk to provide, if the reply may not fit the receive buffer.
    pub reply_chunk: Option<usize>,
    /// The call fails with [`TransportError::TimedOut`] if no reply came within this long.
    pub timeout: Option<Duration>,
    /// True for a backward-direction call (a server calling its client).
    pub backward: bool,
}

/// The memory behind one Write chunk.
#[derive(Debug)]
pub enum WriteTarget<B> {
    /// Fresh registered memory of this many bytes (plus room for XDR round-up).
    Size(usize),
    /// Memory the application took from the pool, to receive the result in place.
    Buffer(Vec<Slice<B>>),
}

/// Whom an operation's completion concerns.
#[derive(Debug, Clone, Copy)]
enum Owner {
    /// A local invalidation fencing a requester's call.
    Requester(CallId),
    /// An RDMA Read, RDMA Write or Send of a call the responder handles.
    Responder(CallId),
    /// An error reply or other Send nothing waits for.
    Nobody,
}

/// The operations and events produced so far, shared by both directions.
struct Outbox<B> {
    next_op: OpId,
    owners: IdMap<OpId, Owner>,
    ops: VecDeque<Op<B>>,
    events: VecDeque<Event>,
}

impl<B> Outbox<B> {
    fn id(&mut self, owner: Owner) -> OpId {
        self.next_op += 1;
        self.owners.insert(self.next_op, owner);
        self.next_op
    }

    fn send(&mut self, owner: Owner, message: Vec<Bytes>, invalidate: Option<u32>) {
        let id = self.id(owner);
        self.ops.push_back(Op::Send {
            id,
            message,
            invalidate,
        });
    }

    fn read(&mut self, owner: Owner, sink: Slice<B>, remote: Segment) {
        let id = self.id(owner);
        self.ops.push_back(Op::Read { id, sink, remote });
    }

    fn write(&mut self, owner: Owner, source: Slice<B>, remote: Segment) {
        let id = self.id(owner);
        self.ops.push_back(Op::Write { id, source, remote });
    }

    fn invalidate(&mut self, owner: Owner, buf: B)
    where
        B: Buf,
    {
        let id = self.id(owner);
        self.ops.push_back(Op::Invalidate { id, buf });
    }

    fn revoke(&mut self, buf: B) {
        self.ops.push_back(Op::Revoke { buf });
    }
}

/// Counters of what a core has done, for tests and operators.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Calls sent inline (RDMA_MSG, no chunks).
    pub calls_inline: u64,
    /// Calls sent with Read chunks for DDP-eligible arguments.
    pub calls_read_chunks: u64,
    /// Long calls (RDMA_NOMSG with a Position-Zero Read chunk).
    pub calls_long: u64,
    /// Replies sent inline.
    pub replies_inline: u64,
    /// Replies whose DDP-eligible results went by RDMA Write into Write chunks.
    pub replies_write_chunks: u64,
    /// Long replies (RDMA_NOMSG through the Reply chunk).
    pub replies_long: u64,
    /// Replies this side's requester received inline (RDMA_MSG with no Write chunk data).
    pub replies_received_inline: u64,
    /// Replies received with DDP-eligible results in Write chunks.
    pub replies_received_write_chunks: u64,
    /// Long replies received through the Reply chunk (RDMA_NOMSG).
    pub replies_received_long: u64,
    /// RDMA_ERROR messages sent.
    pub errors_sent: u64,
    /// Messages dropped unanswered (too short, RDMA_DONE, unknown XID, ...).
    pub dropped: u64,
    /// Handles the peer invalidated with Send With Invalidate.
    pub remote_invalidations: u64,
    /// Local invalidations posted.
    pub local_invalidations: u64,
    /// Handles of abandoned calls revoked.
    pub revocations: u64,
}

/// The RPC-over-RDMA engine of one connection (see the module documentation for the
/// contract).
pub struct Core<B: Buf> {
    config: CoreConfig,
    out: Outbox<B>,
    requester: Requester<B>,
    responder: Responder<B>,
    stats: Stats,
    closed: bool,
}

impl<B: Buf> Core<B> {
    /// A core for a new connection. `first_xid` seeds the XIDs of this side's calls (use
    /// something that differs between connections, such as a clock).
    pub fn new(config: CoreConfig, first_xid: u32) -> Core<B> {
        let forward = config.role == Role::Client;
        let requested = if forward {
            config.credits
        } else {
            config.backward_credits
        };
        Core {
            requester: Requester::new(!forward, requested.max(1), first_xid),
            responder: Responder::new(),
            out: Outbox {
                next_op: 0,
                owners: IdMap::default(),
                ops: VecDeque::new(),
                events: VecDeque::new(),
            },
            stats: Stats::default(),
            closed: false,
            config,
        }
    }

    /// The settings.
    pub fn config(&self) -> &CoreConfig {
        &self.config
    }

    /// What the core has done so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The next XID for a call of this side's requester.
    pub fn next_xid(&mut self) -> u32 {
        self.requester.next_xid()
    }

    /// The chunking policy for encoding a call: DDP-eligible items move when they are at
    /// least `min_ddp_size` long or would take the message past what fits a Send.
    pub fn call_policy(&self) -> ThresholdPolicy {
        ThresholdPolicy {
            inline_threshold: self
                .config
                .peer_recv_size
                .saturating_sub(requester::CALL_HEADER_ALLOWANCE),
            min_ddp_size: self.config.min_ddp_size,
        }
    }

    /// Whether a reply of at most `max_inline` bytes (after DDP-eligible results moved to
    /// Write chunks; `None` when unbounded) needs a Reply chunk (seed 002 section 4.3).
    pub fn needs_reply_chunk(&self, max_inline: Option<usize>, write_chunks: usize) -> bool {
        let header = header::FIXED_LEN + 12 + write_chunks * (8 + 16);
        match max_inline {
            Some(n) => n + header > self.config.recv_size,
            None => true,
        }
    }

    /// Calls in flight or queued at the requester.
    pub fn calls_outstanding(&self) -> usize {
        self.requester.len()
    }

    /// Calls received and not yet answered at the responder.
    pub fn calls_in_progress(&self) -> usize {
        self.responder.len()
    }

    /// Starts a call: registers what the peer must reach, and emits its Send once a credit
    /// allows (seed 004 section 4.3). The outcome comes as an [`Event::Reply`] for the
    /// returned id.
    pub fn start_call<M: Memory<Buf = B>>(
        &mut self,
        call: OutgoingCall<B>,
        now: Instant,
        mem: &mut M,
    ) -> Result<CallId, TransportError> {
        if self.closed {
            return Err(TransportError::Closed);
        }
        let backward_ok = match self.config.role {
            Role::Client => !call.backward,
            Role::Server => call.backward && self.config.backward_credits > 0,
        };
        if !backward_ok {
            return Err(TransportError::Protocol(
                "this side cannot send calls in that direction".into(),
            ));
        }
        self.requester
            .start(call, now, mem, &self.config, &mut self.out, &mut self.stats)
    }

    /// Abandons a call: its registrations are revoked at once ([`Op::Revoke`]), so the peer
    /// can no longer reach them (seed 004 section 5.4.1: "This includes segments that are
    /// associated with canceled RPCs"). No event follows for it. If the peer then writes the
    /// result or invalidates a handle of it, its operation fails, which on RDMA ends the
    /// connection: the price of fencing memory the peer was told it could use.
    pub fn cancel(&mut self, call: CallId) {
        self.requester.cancel(call, &mut self.out, &mut self.stats);
    }

    /// Sends the reply to `call` (an [`IncomingCall`]'s id): `message` is the RPC reply with
    /// DDP-eligible results moved out (an [`Encoder::for_reply`] over the call's Write chunk
    /// capacities), `moved` the items moved to Write chunks.
    ///
    /// [`Encoder::for_reply`]: crate::xdr::Encoder::for_reply
    pub fn send_reply<M: Memory<Buf = B>>(
        &mut self,
        call: CallId,
        message: Encoded,
        moved: Vec<MovedItem>,
        mem: &mut M,
    ) {
        self.responder.reply(
            call,
            message,
            moved,
            mem,
            &self.config,
            &mut self.out,
            &mut self.stats,
        );
    }

    /// Answers `call` with RDMA_ERROR / ERR_CHUNK instead of a reply (its chunks disagreed
    /// with the message, seed 004 section 5.5).
    pub fn reject_chunks(&mut self, call: CallId) {
        self.responder
            .reject(call, &self.config, &mut self.out, &mut self.stats);
    }

    /// Forgets call `id` without answering it (the application dropped it: a message that was
    /// not a call, or a call a server chooses not to answer). It stops counting against the
    /// credits granted.
    pub fn discard_call(&mut self, call: CallId) {
        self.responder.discard(call);
    }

    /// Takes a received message. `invalidated` is the local handle the peer invalidated with
    /// Send With Invalidate, if any.
    pub fn handle_recv<M: Memory<Buf = B>>(
        &mut self,
        message: &[u8],
        invalidated: Option<u32>,
        mem: &mut M,
    ) {
        if self.closed {
            return;
        }
        if invalidated.is_some() {
            self.stats.remote_invalidations += 1;
        }
        let (header, used) = match header::parse(message, &self.config.limits) {
            Ok(h) => h,
            Err(HeaderError::Short) => {
                tracing::debug!(
                    len = message.len(),
                    "dropping a message shorter than a header"
                );
                self.stats.dropped += 1;
                return;
            }
            Err(e) => return self.header_error(e),
        };
        let rpc = &message[used..];
        match header.body {
            Body::Done => {
                // Seed 004 section 5.7.2: "Receivers MUST drop RDMA_DONE type messages".
                self.stats.dropped += 1;
            }
            Body::ErrVers { .. } | Body::ErrChunk => {
                if !self
                    .requester
                    .error_reply(&header, invalidated, &mut self.out, &mut self.stats)
                {
                    self.stats.dropped += 1;
                }
            }
            Body::NoMsg(_) => match self.config.role {
                // A client gets long replies; a server gets long calls.
                Role::Client => self.reply(header, Bytes::new(), invalidated),
                Role::Server => self.call(header, Bytes::new(), false, mem),
            },
            Body::Msg(_) => {
                // The RPC msg_type (its second word) tells a call from a reply: seed 004
                // sections 8.3.4 and 8.3.5.
                let Some(mtype) = rpc.get(4..8) else {
                    tracing::debug!(xid = header.xid, "an RDMA_MSG without an RPC header");
                    return self.malformed(header.xid, "no RPC message after the header");
                };
                let is_call = mtype == [0, 0, 0, 0];
                let inline = Bytes::copy_from_slice(rpc);
                match (self.config.role, is_call) {
                    (Role::Server, true) => self.call(header, inline, false, mem),
                    (Role::Client, false) => self.reply(header, inline, invalidated),
                    (Role::Client, true) => self.call(header, inline, true, mem),
                    (Role::Server, false) => self.reply(header, inline, invalidated),
                }
            }
        }
    }

    fn reply(&mut self, header: Header, inline: Bytes, invalidated: Option<u32>) {
        if !self
            .requester
            .reply(header, inline, invalidated, &mut self.out, &mut self.stats)
        {
            self.stats.dropped += 1;
        }
    }

    fn call<M: Memory<Buf = B>>(
        &mut self,
        header: Header,
        inline: Bytes,
        backward: bool,
        mem: &mut M,
    ) {
        if backward && self.config.backward_credits == 0 {
            // Seed 004 section 8.3.1: a peer must not send backward calls unless told it may;
            // nothing here can answer one.
            tracing::warn!(
                xid = header.xid,
                "a backward call, but the backward direction is off"
            );
            self.stats.dropped += 1;
            return;
        }
        self.responder.receive(
            header,
            inline,
            backward,
            mem,
            &self.config,
            &mut self.out,
            &mut self.stats,
        );
    }

    fn header_error(&mut self, e: HeaderError) {
        match (self.config.role, e) {
            (_, HeaderError::Short) => self.stats.dropped += 1,
            // A responder answers what it cannot parse (seed 004 section 5.5). A client's
            // only calls are backward ones, which cannot carry another version's header.
            (Role::Server, HeaderError::Version { xid, version }) => {
                tracing::debug!(xid, version, "ERR_VERS");
                self.responder.send_error(
                    xid,
                    Body::ErrVers {
                        low: header::VERSION,
                        high: header::VERSION,
                    },
                    &self.config,
                    &mut self.out,
                    &mut self.stats,
                );
            }
            (Role::Server, HeaderError::Malformed { xid, reason }) => {
                tracing::debug!(xid, %reason, "ERR_CHUNK");
                self.malformed(xid, &reason);
            }
            (
                Role::Client,
                e @ (HeaderError::Version { xid, .. } | HeaderError::Malformed { xid, .. }),
            ) => {
                // Seed 004 section 5.5: "When a requester cannot parse a responder's reply,
                // the requester SHOULD drop the RPC request and return an error".
                if !self.requester.fail_xid(
                    xid,
                    TransportError::Protocol(format!("an unparsable reply: {e}")),
                    &mut self.out,
                    &mut self.stats,
                ) {
                    self.stats.dropped += 1;
                }
            }
        }
    }

    fn malformed(&mut self, xid: u32, reason: &str) {
        tracing::debug!(xid, reason, "ERR_CHUNK");
        self.responder.send_error(
            xid,
            Body::ErrChunk,
            &self.config,
            &mut self.out,
            &mut self.stats,
        );
    }

    /// Takes the outcome of operation `id`.
    pub fn handle_completion(&mut self, id: OpId, status: WcStatus) {
        let Some(owner) = self.out.owners.remove(&id) else {
            return;
        };
        let ok = status == WcStatus::Success;
        match owner {
            Owner::Requester(call) => self.requester.completed(call, ok, &mut self.out),
            Owner::Responder(call) => {
                self.responder
                    .completed(call, ok, &self.config, &mut self.out, &mut self.stats)
            }
            Owner::Nobody => {}
        }
    }

    /// When [`Core::handle_timeout`] should be called next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.requester.next_deadline()
    }

    /// Fails the calls whose deadline is before `now` with [`TransportError::TimedOut`], and
    /// invalidates their registrations.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.requester.expire(now, &mut self.out, &mut self.stats);
    }

    /// The connection is gone: every call fails with [`TransportError::Closed`] (the caller
    /// may retransmit it on a new connection), and no operation is emitted any more. The
    /// provider flushes what was posted; registrations are released with the core.
    pub fn close(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        self.requester.fail_all(&mut self.out);
        self.responder.clear();
        self.out.ops.clear();
        self.out.owners.clear();
    }

    /// True once [`Core::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The next operation to post.
    pub fn poll_op(&mut self) -> Option<Op<B>> {
        self.out.ops.pop_front()
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.out.events.pop_front()
    }
}

#[cfg(test)]
mod tests;

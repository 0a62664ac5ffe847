//! The RPC-over-RDMA engine of one connection, versions 1 and 2, as a pure state machine
//! (sans-IO).
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
//!
//! # Versions
//!
//! With [`CoreConfig::version_2`] a client opens the connection ([`Core::open`]) with an
//! RDMA2_CONNPROP carrying its transport properties, and holds its calls until the server
//! answers (seed 003 section 7): a version 2 server's RDMA2_CONNPROP makes the connection
//! version 2 with the server's properties applied; a version 1 server's ERR_VERS makes it
//! version 1, and the held calls go in version 1, none lost. A server with `version_2`
//! answers every message in the version it came in (section 7.3), and answers a client's
//! RDMA2_CONNPROP with its own. Without `version_2` an endpoint speaks version 1 only and
//! answers a version 2 message with ERR_VERS, as every version 1 implementation does.
//!
//! # Layout
//!
//! This file holds the core's state, its configuration, the calls' and replies' entry points
//! and the completions; `receive` takes each received message (header checks, every message
//! type); `requester` keeps this side's calls, `responder` the calls it answers; `memory` is
//! the registered-memory interface, `send_bytes` a Send's bytes, `msgp` the padded RDMA_MSGP
//! of the 2004 protocol.

mod memory;
mod msgp;
mod receive;
mod requester;
mod responder;
mod send_bytes;
mod slab;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::extension::Extensions;
use super::header::v2::Rpcrdma2Rvreqsup;
use super::header::{
    self, AlignPadding, BaseProperties, Body, Header, HeaderLimits, Property, RdmaError, Segment,
    VERSION, VERSION_2,
};
use super::mode2004::Mode2004;
use crate::id_map::IdMap;
use crate::rdma::WcStatus;
use crate::rpc::{Reply, TransportError};
use crate::xdr::{self, Encoded, MovedItem, ReceivedChunks, ThresholdPolicy};

pub use memory::{gather, pair_up, Buf, Memory, MemoryError, MemoryErrorKind, Slice};
use requester::Requester;
use responder::Responder;
pub use send_bytes::SendBytes;

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
    /// Speak RPC-over-RDMA version 2 (seed 003) with a peer that does: a client offers it in
    /// [`Core::open`], a server accepts it. Off: version 1 only.
    pub version_2: bool,
    /// A client's remembered outcome of an earlier negotiation with the same server: `Some(1)`
    /// starts in version 1 without offering version 2 again (seed 003 section 7.2: "a client
    /// can avoid a possible version negotiation loop").
    pub remembered_version: Option<u32>,
    /// How long a client waits for the answer to its version 2 offer before it assumes a
    /// version 1 server (seed 003 section 7.2: the same is assumed "if the initial negotiation
    /// message is lost or dropped").
    pub negotiation_timeout: Duration,
    /// This side accepts Send With Invalidate of the handles it advertises: a version 2
    /// requester names one in `rdma_inv_handle` (seed 003 section 3.3).
    pub remote_invalidate: bool,
    /// Version 2 extensions this side speaks (seed 003 section 9).
    pub extensions: Extensions,
    /// Speak the 2004 protocol of seed 000 (RDMA_MSGP, the Read-Read model with RDMA_DONE);
    /// `None` is RFC 8166 (seed 004 section 5.7).
    pub mode_2004: Option<Mode2004>,
    /// A server closes a connection whose peer has sent nothing this long after
    /// [`Core::open`] (a peer that connects and stays silent holds a connection slot and its
    /// receive buffers). `None`: no limit.
    pub first_message_timeout: Option<Duration>,
    /// The most a requester offers for one reply's results when sending a call again with
    /// room (after ERR_CHUNK, WRITE_RESOURCE or REPLY_RESOURCE); a reply needing more fails
    /// with [`TransportError::ReplyTooLarge`].
    pub max_reply_size: usize,
    /// The connection closes when RDMA Reads of the peer's Read chunks are in flight and none
    /// completes for this long (between one and two periods): a peer that never answers them
    /// holds the memory they land in. `None`: no limit.
    pub read_timeout: Option<Duration>,
}

impl CoreConfig {
    /// Defaults for `role`: 32 credits, no backward direction, 4 KiB receive buffers on both
    /// sides, 16 RDMA Reads, DDP from 1 KiB, 1 MiB Write and Reply chunks by default, version
    /// 1 only.
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
            version_2: false,
            remembered_version: None,
            negotiation_timeout: Duration::from_secs(2),
            remote_invalidate: false,
            extensions: Extensions::default(),
            mode_2004: None,
            first_message_timeout: None,
            read_timeout: None,
            max_reply_size: crate::rpc::DEFAULT_MAX_MESSAGE,
        }
    }

    /// Receives this side must keep posted: one per forward credit and one per backward
    /// credit (seed 004 section 8.2.2), and in the Read-Read model one more per forward
    /// credit and one more for RDMA_DONE (seed 000 section 3.8).
    pub fn receives(&self) -> usize {
        let done = match &self.mode_2004 {
            Some(m) if m.read_read => self.credits.max(1) + 1,
            _ => 0,
        };
        (self.credits.max(1) + done + self.backward_credits) as usize
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
        message: SendBytes,
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
    /// A client's version negotiation ended: the connection speaks `version` from now on (worth
    /// remembering for the next connection to the same server, [`CoreConfig::remembered_version`]).
    Negotiated {
        /// 1 or 2.
        version: u32,
    },
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
    /// The Write chunk sizes, one per DDP-eligible result, to send the call once more with
    /// (same XID) when a version 1 responder answers ERR_CHUNK because the results did not
    /// fit what this shape offered (seed 004 section 5.5; version 2 says what it needs, seed
    /// 003 section 5.3.3). Empty: such a call fails instead.
    pub room: Vec<usize>,
}

/// The memory behind one Write chunk.
#[derive(Debug)]
pub enum WriteTarget<B> {
    /// Fresh registered memory of this many bytes (plus room for XDR round-up).
    Size(usize),
    /// Memory the application took from the pool, to receive the result in place.
    Buffer(Vec<Slice<B>>),
}

impl<B> WriteTarget<B> {
    /// The bytes the chunk offers.
    pub fn size(&self) -> usize {
        match self {
            WriteTarget::Size(n) => *n,
            WriteTarget::Buffer(slices) => slices.iter().map(|s| s.len).sum(),
        }
    }
}

/// Whom an operation's completion concerns.
#[derive(Debug, Clone, Copy)]
enum Owner {
    /// A local invalidation fencing a requester's call.
    Requester(CallId),
    /// An RDMA Read of a reply's Read chunk (the Read-Read model, seed 000 section 3.8).
    Pull(CallId),
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
        // Nothing waits for an operation of nobody's: its completion needs no entry.
        if !matches!(owner, Owner::Nobody) {
            self.owners.insert(self.next_op, owner);
        }
        self.next_op
    }

    fn send(&mut self, owner: Owner, message: SendBytes, invalidate: Option<u32>) {
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
    /// Calls received whole (their Read chunks pulled) and handed over to be served.
    pub calls_received: u64,
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
    /// Version 2 calls resent after the responder reported a limit (READ_CHUNKS,
    /// WRITE_CHUNKS, WRITE_RESOURCE, REPLY_RESOURCE).
    pub resent: u64,
    /// Replies whose Send With Invalidate named a handle other than the one the call offered.
    pub unexpected_invalidations: u64,
    /// RDMA_MSGP messages sent (seed 000 section 3.5).
    pub padded_sent: u64,
    /// Padding bytes those messages carried (0 when every item was aligned already or none
    /// reached the threshold).
    pub padding_bytes_sent: u64,
    /// RDMA_MSGP messages received and decoded with their padding.
    pub padded_received: u64,
    /// Read-Read (seed 000 section 3.8): replies sent with results exposed in Read chunks.
    pub replies_read_chunks: u64,
    /// Read-Read: replies received with Read chunks, pulled by RDMA Read.
    pub replies_received_read_chunks: u64,
    /// RDMA_DONE messages sent (including for calls this side no longer waited for).
    pub dones_sent: u64,
    /// RDMA_DONE messages that released an exposed reply.
    pub dones_received: u64,
    /// Exposed replies released because no RDMA_DONE came in time.
    pub exposures_expired: u64,
    /// Calls that waited for memory for their Read chunks (a budget was spent when they came).
    pub memory_waits: u64,
}

/// Where a connection stands in version negotiation (seed 003 section 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Negotiation {
    /// A version 2 client that has not sent its offer yet ([`Core::open`]).
    Unopened,
    /// A client's RDMA2_CONNPROP is out: calls wait for the answer.
    Offered {
        /// The offer's XID: the answer carries it.
        xid: u32,
        /// When to give up waiting and assume version 1.
        deadline: Instant,
    },
    /// Settled (a client), or decided per message (a server).
    Settled,
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
    /// The version this side's calls go in (a server's answers follow each call's version).
    version: u32,
    negotiation: Negotiation,
    /// A server's deadline for the peer's first message ([`CoreConfig::first_message_timeout`]).
    first_message: Option<Instant>,
    /// A message came from the peer.
    heard: bool,
    /// The properties the peer advertised, version 2 (defaults until it does).
    peer: BaseProperties,
    /// Every property the peer advertised, as sent.
    peer_properties: Vec<Property>,
    /// The peer showed it speaks the 2004 protocol ([`Core::confirm_mode_2004`]).
    peer_in_mode_2004: bool,
}

/// The smallest and largest receive size a peer's RBSIZ is taken at: below the 1024 bytes
/// every version guarantees (seed 004 section 4.3.1) nothing useful fits; above 256 KiB is more
/// than this side registers send buffers for.
const PEER_RECV_SIZE: (usize, usize) = (1024, 256 << 10);

/// The most a first message may be: "this initial message can be no larger than the version
/// 1 default inline threshold of 1024 bytes" (seed 003 section 7).
pub const FIRST_MESSAGE_MAX: usize = 1024;

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
        let offers = forward && config.version_2 && config.remembered_version != Some(VERSION);
        Core {
            requester: Requester::new(!forward, requested.max(1), first_xid, offers),
            responder: Responder::new(),
            out: Outbox {
                next_op: 0,
                owners: IdMap::default(),
                ops: VecDeque::new(),
                events: VecDeque::new(),
            },
            stats: Stats::default(),
            closed: false,
            peer_in_mode_2004: false,
            version: VERSION,
            negotiation: if offers {
                Negotiation::Unopened
            } else {
                Negotiation::Settled
            },
            first_message: None,
            heard: false,
            peer: BaseProperties::default(),
            peer_properties: Vec::new(),
            config,
        }
    }

    /// Starts the connection. A version 2 client sends its RDMA2_CONNPROP, the offer of
    /// version 2 (seed 003 section 7), and holds calls until the answer; for anyone else this
    /// does nothing. [`Core::start_call`] opens the connection itself if this was not called.
    pub fn open(&mut self, now: Instant) {
        if let (Role::Server, Some(timeout), false) = (
            self.config.role,
            self.config.first_message_timeout,
            self.heard,
        ) {
            self.first_message.get_or_insert(now + timeout);
        }
        if self.negotiation != Negotiation::Unopened || self.closed {
            return;
        }
        let xid = self.requester.next_xid();
        let props = self.own_properties();
        // Seed 003 section 7: the offer is "a single valid RPC-over-RDMA message with the value
        // two (2) in the rdma_vers field" of at most 1024 bytes; section 5.3.4: RDMA2_CONNPROP
        // is "the first message after a connection is established".
        let header = Header::v2(xid, self.requester.requested(), 0, Body::ConnProp(props));
        match header::to_send(&header) {
            Ok(send) if send.len() <= FIRST_MESSAGE_MAX => {
                self.out.send(Owner::Nobody, send, None);
                self.negotiation = Negotiation::Offered {
                    xid,
                    deadline: now + self.config.negotiation_timeout,
                };
            }
            _ => {
                tracing::warn!("the version 2 offer does not fit 1024 bytes: speaking version 1");
                self.settle(VERSION);
            }
        }
    }

    /// The transport properties this side advertises (seed 003 section 4.2).
    fn own_properties(&self) -> Vec<Property> {
        let reverse = match (self.config.role, self.config.backward_credits) {
            (Role::Server, _) | (_, 0) => Rpcrdma2Rvreqsup::Rdma2RvreqsupNone,
            // The responder takes chunks in either direction in version 2 (seed 003 section
            // 8.4.1).
            _ => Rpcrdma2Rvreqsup::Rdma2RvreqsupGenl,
        };
        let mut props = vec![
            Property::receive_buffer_size(self.config.recv_size.min(u32::MAX as usize) as u32),
            Property::reverse_request_support(reverse),
        ];
        // Section 9.2: an extension's properties tell the peer this side knows it.
        props.extend(self.config.extensions.properties());
        props
    }

    /// The version the connection settled on: calls held for the answer go now.
    fn settle(&mut self, version: u32) {
        self.version = version;
        self.negotiation = Negotiation::Settled;
        self.requester.set_version(version);
        if self.config.role == Role::Client {
            self.out.events.push_back(Event::Negotiated { version });
        }
        self.requester.release(&mut self.out);
    }

    /// Takes the properties a peer advertised; a base property that does not decode is an
    /// error (the caller answers RDMA2_ERR_BAD_XDR, seed 003 section 4.1).
    fn apply_properties(&mut self, props: Vec<Property>) -> Result<(), String> {
        let base = BaseProperties::from_props(&props)?;
        for p in &props {
            self.config.extensions.check_property(p)?;
        }
        // Seed 003 section 4.2.1: the peer's receive buffers are "at least the size specified,
        // allowing the endpoint receiving this value to send messages that are of this size".
        let (low, high) = PEER_RECV_SIZE;
        self.config.peer_recv_size = (base.receive_size as usize).clamp(low, high);
        self.peer = base;
        self.peer_properties = props;
        Ok(())
    }

    /// The settings.
    pub fn config(&self) -> &CoreConfig {
        &self.config
    }

    /// What the core has done so far.
    pub fn stats(&self) -> Stats {
        Stats {
            dones_sent: self.requester.dones_sent,
            ..self.stats
        }
    }

    /// The version this side's calls go in: 1 until a version 2 offer is accepted.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// True while a client waits for the answer to its version 2 offer.
    pub fn negotiating(&self) -> bool {
        matches!(
            self.negotiation,
            Negotiation::Unopened | Negotiation::Offered { .. }
        )
    }

    /// The transport properties the peer advertised in RDMA2_CONNPROP (version 2), as sent,
    /// unknown ones included.
    pub fn peer_properties(&self) -> &[Property] {
        &self.peer_properties
    }

    /// The peer's base properties (defaults where it advertised none).
    pub fn peer_base_properties(&self) -> &BaseProperties {
        &self.peer
    }

    /// The next XID for a call of this side's requester.
    pub fn next_xid(&mut self) -> u32 {
        self.requester.next_xid()
    }

    /// What a version 2 header of chunk lists takes beyond version 1's: `rdma_flags` and
    /// `rdma_inv_handle`. While the version is open, calls are sized for version 2.
    fn header_extra(&self) -> usize {
        if self.version == VERSION && !self.negotiating() {
            0
        } else {
            8
        }
    }

    /// The room a call's transport header takes, at most.
    fn call_header_allowance(&self) -> usize {
        requester::CALL_HEADER_ALLOWANCE + self.header_extra()
    }

    /// The chunking policy for encoding a call: DDP-eligible items move when they are at
    /// least `min_ddp_size` long or would take the message past what fits a Send.
    pub fn call_policy(&self) -> ThresholdPolicy {
        ThresholdPolicy {
            inline_threshold: self
                .config
                .peer_recv_size
                .saturating_sub(self.call_header_allowance()),
            min_ddp_size: self.config.min_ddp_size,
        }
    }

    /// Whether a reply of at most `max_inline` bytes (after DDP-eligible results moved to
    /// Write chunks; `None` when unbounded) needs a Reply chunk (seed 002 section 4.3).
    pub fn needs_reply_chunk(&self, max_inline: Option<usize>, write_chunks: usize) -> bool {
        let header = header::FIXED_LEN + 12 + write_chunks * (8 + 16) + self.header_extra();
        match max_inline {
            Some(n) => n + header > self.config.recv_size,
            None => true,
        }
    }

    /// Calls in flight or queued at the requester.
    pub fn calls_outstanding(&self) -> usize {
        self.requester.len()
    }

    /// Calls of the requester queued for a credit (seed 004 section 4.3) or, while a version
    /// 2 client negotiates, for the version.
    pub fn calls_queued(&self) -> usize {
        self.requester.queued()
    }

    /// In the 2004 mode with RDMA_MSGP: the opaque length from which an encoder must record
    /// where data starts ([`Encoder::record_pad_points`](crate::xdr::Encoder::record_pad_points)).
    pub fn pad_threshold(&self) -> Option<usize> {
        let pad = self.sending_padding()?;
        (pad.align > 4).then_some(pad.thresh as usize)
    }

    /// The padding this side's messages go with (RDMA_MSGP). A server with the configuration
    /// call on pads only for a client that showed it speaks the 2004 protocol: a default
    /// client takes RDMA_MSGP as RDMA_MSG (seed 004 section 5.7.1) and would misread padding.
    fn sending_padding(&self) -> Option<AlignPadding> {
        let mode = self.config.mode_2004.as_ref()?;
        let allowed = self.config.role == Role::Client
            || mode.config_program.is_none()
            || self.peer_in_mode_2004;
        mode.padding.filter(|_| allowed)
    }

    /// Read-Read replies awaiting RDMA_DONE (seed 000 section 3.8).
    pub fn exposed_replies(&self) -> usize {
        self.responder.exposures()
    }

    /// The policy for the reply to `call` when it goes in the Read-Read model (seed 000
    /// section 3.8: DDP-eligible results exposed in Read chunks of the reply, for an
    /// [`Encoder::for_call`](crate::xdr::Encoder::for_call)); `None` when the reply goes the
    /// RFC 8166 way ([`Encoder::for_reply`](crate::xdr::Encoder::for_reply) over the call's
    /// Write chunks): the mode is off, the call brought Write chunks, or as many replies as
    /// four times the credits already await RDMA_DONE (a requester that sends none cannot
    /// make this side pin more).
    ///
    /// With the Connection Configuration Protocol on, the requester must have shown that it
    /// speaks the 2004 protocol first (its configuration call, an RDMA_MSGP or an RDMA_DONE):
    /// a requester in the default mode could not pull the results.
    pub fn read_read_policy(&self, call: CallId, write_chunks: &[u64]) -> Option<ThresholdPolicy> {
        let mode = self.config.mode_2004.as_ref()?;
        let forward = self.responder.is_forward(call);
        let peer = mode.config_program.is_none() || self.peer_in_mode_2004;
        let room = self.responder.exposures() < 4 * self.config.credits.max(1) as usize;
        (mode.read_read && forward && peer && write_chunks.is_empty() && room)
            .then(|| self.call_policy())
    }

    /// Applies what the Connection Configuration Protocol settled (seed 000 section 6.2):
    /// the largest Send the peer takes inline, the RDMA Reads this side may have outstanding
    /// against it (0: none, so no Read-Read pulls: "the peer must not issue requests which
    /// require RDMA Read to satisfy"), and, for a client, the alignment the server's receive
    /// buffers want (padding that cannot be honoured is turned off).
    pub fn configure(&mut self, peer_recv_size: usize, max_reads: usize, align: Option<u32>) {
        self.config.peer_recv_size = peer_recv_size;
        self.config.max_reads = max_reads.max(1);
        if let Some(mode) = self.config.mode_2004.as_mut() {
            if let (Some(align), Some(pad)) = (align, mode.padding.as_mut()) {
                pad.align = align;
                if !pad.is_valid() {
                    mode.padding = None;
                }
            }
            if max_reads == 0 && self.config.role == Role::Client {
                mode.read_read = false;
            }
        }
        self.peer_in_mode_2004 = true;
    }

    /// The peer does not speak the 2004 protocol (its answer to the configuration call was
    /// PROG_UNAVAIL): RFC 8166 from now on, with the peer's receive size as its private data
    /// said.
    pub fn leave_mode_2004(&mut self, peer_recv_size: usize) {
        self.config.mode_2004 = None;
        self.config.peer_recv_size = peer_recv_size;
    }

    /// True when this side's calls go in the Read-Read model: no Write and no Reply chunks.
    pub fn read_read_requester(&self) -> bool {
        self.config.role == Role::Client
            && self.config.mode_2004.as_ref().is_some_and(|m| m.read_read)
    }

    /// The peer showed that it speaks the 2004 protocol (a server: its client's
    /// configuration call was answered).
    pub fn confirm_mode_2004(&mut self) {
        self.peer_in_mode_2004 = true;
    }

    /// Calls received and not yet finished at the responder: their Read chunks being pulled,
    /// handed over and not answered, or answered and their reply not yet sent.
    pub fn calls_in_progress(&self) -> usize {
        self.responder.len()
    }

    /// Starts a call: registers what the peer must reach, and emits its Send once a credit
    /// allows (seed 004 section 4.3) and, for a version 2 client, once the version is settled.
    /// The outcome comes as an [`Event::Reply`] for the returned id.
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
        if call.backward && self.version == VERSION_2 {
            // Seed 003 section 4.2.2: the client's Reverse Request Support says what it takes.
            let chunked = !call.moved.is_empty()
                || !call.write_chunks.is_empty()
                || call.reply_chunk.is_some();
            match self.peer.reverse_requests {
                Rpcrdma2Rvreqsup::Rdma2RvreqsupNone => {
                    return Err(TransportError::Protocol(
                        "the client takes no reverse-direction requests (RDMA2_RVREQSUP_NONE)"
                            .into(),
                    ))
                }
                Rpcrdma2Rvreqsup::Rdma2RvreqsupInline if chunked => {
                    return Err(TransportError::Protocol(
                        "the client takes reverse-direction requests inline only".into(),
                    ))
                }
                _ => {}
            }
        }
        if self.negotiation == Negotiation::Unopened {
            self.open(now);
        }
        let extra = self.header_extra();
        self.requester.start(
            call,
            now,
            mem,
            &self.config,
            extra,
            &mut self.out,
            &mut self.stats,
        )
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
    /// capacities, or [`Core::read_read_policy`]'s), `moved` the items moved to chunks. `now`
    /// starts the RDMA_DONE timeout of a Read-Read reply. False when the reply fit neither
    /// inline nor the call's chunks: RDMA_ERROR went instead (seed 004 section 5.5), and the
    /// requester may send the call again with more room.
    ///
    /// [`Encoder::for_reply`]: crate::xdr::Encoder::for_reply
    pub fn send_reply<M: Memory<Buf = B>>(
        &mut self,
        call: CallId,
        message: Encoded,
        moved: Vec<MovedItem>,
        now: Instant,
        mem: &mut M,
    ) -> bool {
        let padding = self.sending_padding();
        self.responder.reply(
            call,
            message,
            moved,
            padding,
            now,
            mem,
            &self.config,
            &mut self.out,
            &mut self.stats,
        )
    }

    /// Answers `call` with RDMA_ERROR / ERR_CHUNK instead of a reply (its chunks disagreed
    /// with the message, seed 004 section 5.5).
    pub fn reject_chunks(&mut self, call: CallId) {
        self.reject(call, RdmaError::BadXdr);
    }

    /// Answers `call` with RDMA_ERROR instead of a reply: `error` in version 2 (for example
    /// WRITE_RESOURCE for a result too long for its Write chunk, seed 003 section 5.3.3),
    /// ERR_CHUNK in version 1, which has no other code.
    pub fn reject(&mut self, call: CallId, error: RdmaError) {
        self.responder
            .reject(call, error, &self.config, &mut self.out, &mut self.stats);
    }

    /// Answers `call` whose reply could not be encoded into the chunks it provided: version 2
    /// names the Write chunk and the room needed (seed 003 section 5.3.3,
    /// RDMA2_ERR_WRITE_RESOURCE); version 1 can only say ERR_CHUNK.
    pub fn reject_reply(&mut self, call: CallId, error: &xdr::Error) {
        let refusal = match *error.kind() {
            xdr::ErrorKind::WriteChunkTooSmall { index, needed, .. } => RdmaError::WriteResource {
                chunk_index: index as u32 + 1,
                length_needed: needed.min(u32::MAX as u64) as u32,
            },
            _ => RdmaError::BadXdr,
        };
        self.reject(call, refusal);
    }

    /// Forgets call `id` without answering it (the application dropped it: a message that was
    /// not a call, or a call a server chooses not to answer). It stops counting against the
    /// credits granted.
    pub fn discard_call(&mut self, call: CallId) {
        self.responder.discard(call);
    }

    /// Sends a message of an extension's header type (version 2 only) and waits for its
    /// answer: an [`Event::Reply`] whose message is the answer's body, or an error
    /// ([`TransportError::RdmaRefused`] with RDMA2_ERR_INVAL_HTYPE from a peer that does not
    /// know the extension). It counts against the credits as a call does.
    pub fn start_extension(
        &mut self,
        htype: u32,
        flags: u32,
        body: Bytes,
        now: Instant,
    ) -> Result<CallId, TransportError> {
        if self.closed {
            return Err(TransportError::Closed);
        }
        if self.negotiation == Negotiation::Unopened {
            self.open(now);
        }
        if self.version != VERSION_2 && !self.negotiating() {
            return Err(TransportError::Protocol(
                "extensions need RPC-over-RDMA version 2".into(),
            ));
        }
        let direction_ok = self.config.role == Role::Client || self.config.backward_credits > 0;
        if !direction_ok {
            return Err(TransportError::Protocol(
                "a server sends extension requests only with the backward direction on".into(),
            ));
        }
        self.requester.start_message(
            htype,
            flags,
            body,
            self.config.peer_recv_size,
            &mut self.out,
        )
    }

    /// Takes the outcome of operation `id`.
    pub fn handle_completion<M: Memory<Buf = B>>(
        &mut self,
        id: OpId,
        status: WcStatus,
        mem: &mut M,
    ) {
        let Some(owner) = self.out.owners.remove(&id) else {
            return;
        };
        let ok = status == WcStatus::Success;
        match owner {
            Owner::Requester(call) => self.requester.completed(call, ok, &mut self.out),
            Owner::Pull(call) => {
                self.requester
                    .pulled(call, ok, &self.config, &mut self.out, &mut self.stats)
            }
            Owner::Responder(call) => self.responder.completed(
                call,
                ok,
                mem,
                &self.config,
                &mut self.out,
                &mut self.stats,
            ),
            Owner::Nobody => {}
        }
    }

    /// True while calls of the peer's wait for memory for their Read chunks: call
    /// [`Core::retry_memory`] when memory has come back.
    pub fn memory_waiting(&self) -> bool {
        !self.closed && self.responder.memory_waiting()
    }

    /// Looks again for memory for the calls waiting for it ([`Core::memory_waiting`]).
    pub fn retry_memory<M: Memory<Buf = B>>(&mut self, mem: &mut M) {
        if self.closed {
            return;
        }
        self.responder
            .admit(mem, &self.config, &mut self.out, &mut self.stats);
    }

    /// When [`Core::handle_timeout`] should be called next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        [self.requester.next_deadline(), self.connection_deadline()]
            .into_iter()
            .flatten()
            .min()
    }

    /// The deadlines of the connection rather than of one of this side's calls: a version 2
    /// offer's, the peer's first message, the progress of RDMA Reads, Read-Read replies'
    /// RDMA_DONE. A driver that times its calls elsewhere needs only these.
    pub fn connection_deadline(&self) -> Option<Instant> {
        let offer = match self.negotiation {
            Negotiation::Offered { deadline, .. } => Some(deadline),
            _ => None,
        };
        [
            offer,
            self.first_message,
            self.responder.next_deadline(&self.config),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Fails the calls whose deadline is before `now` with [`TransportError::TimedOut`], and
    /// invalidates their registrations. A version 2 offer unanswered by then settles on
    /// version 1 (seed 003 section 7.2). A server whose peer has sent nothing by its first
    /// message deadline, or whose RDMA Reads made no progress, emits [`Event::Fatal`].
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Negotiation::Offered { deadline, .. } = self.negotiation {
            if deadline <= now {
                tracing::debug!("no answer to the version 2 offer: speaking version 1");
                self.settle(VERSION);
            }
        }
        if self.first_message.is_some_and(|at| at <= now) {
            self.first_message = None;
            let waited = self.config.first_message_timeout.unwrap_or_default();
            self.out.events.push_back(Event::Fatal(format!(
                "no message from the peer within {waited:?} of the connection opening"
            )));
        }
        self.requester.expire(now, &mut self.out, &mut self.stats);
        self.responder
            .expire(now, &self.config, &mut self.out, &mut self.stats);
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

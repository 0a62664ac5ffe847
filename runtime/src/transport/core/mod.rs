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
//! This file holds the core's state, the calls' and replies' entry points and the
//! completions; `config` its settings, `ops` what it emits and takes (operations, events,
//! calls), `stats` its counters; `receive` takes each received message (header checks, every
//! message type); `requester` keeps this side's calls, `responder` the calls it answers and
//! `pulling` their Read chunks; `memory` is the registered-memory interface, `send_bytes` a
//! Send's bytes, `msgp` the padded RDMA_MSGP of the 2004 protocol.

mod config;
mod memory;
mod msgp;
mod ops;
mod pulling;
mod receive;
mod requester;
mod responder;
mod send_bytes;
mod slab;
mod stats;

use std::collections::VecDeque;
use std::time::Instant;

use bytes::Bytes;

use super::header::v2::Rpcrdma2Rvreqsup;
use super::header::{
    self, AlignPadding, BaseProperties, Body, Header, Property, RdmaError, VERSION, VERSION_2,
};
use crate::id_map::IdMap;
use crate::rdma::WcStatus;
use crate::rpc::TransportError;
use crate::xdr::{self, Encoded, MovedItem, ThresholdPolicy};

pub use config::CoreConfig;
pub use memory::{gather, pair_up, Buf, Memory, MemoryError, MemoryErrorKind, Slice};
pub use ops::{Event, IncomingCall, Op, OutgoingCall, WriteTarget};
use ops::{Outbox, Owner};
use requester::Requester;
use responder::Responder;
pub use send_bytes::SendBytes;
pub use stats::Stats;

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

    /// Changes the credits a responder grants, from its next message on: a server on a shared
    /// receive queue grants what the queue can honour, and more as its peer uses them (seed
    /// 004 section 4.3: the responder "MAY dynamically adjust the granted credit value").
    /// Calls beyond the new value are then refused as beyond the old one were.
    pub fn set_credits(&mut self, credits: u32) {
        self.config.credits = credits.max(1);
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
    /// starts the RDMA_DONE timeout of a Read-Read reply, and is read only for one: reading
    /// the clock is a system call on some hosts (a virtual machine on HPET). False when the reply fit neither
    /// inline nor the call's chunks: RDMA_ERROR went instead (seed 004 section 5.5), and the
    /// requester may send the call again with more room.
    ///
    /// [`Encoder::for_reply`]: crate::xdr::Encoder::for_reply
    pub fn send_reply<M: Memory<Buf = B>>(
        &mut self,
        call: CallId,
        message: Encoded,
        moved: Vec<MovedItem>,
        now: impl FnOnce() -> Instant,
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

    /// Tells the core whether the memory it shares with other connections is short (someone
    /// waits for it): RDMA Reads of the peer's Read chunks that stall then close the connection
    /// after a short while instead of the whole [`CoreConfig::read_timeout`], freeing their
    /// sinks for others.
    pub fn set_memory_pressure(&mut self, on: bool) {
        self.responder.set_pressure(on);
    }

    /// True while RDMA Reads of the peer's Read chunks are watched for progress: a driver that
    /// learns of memory pressure by looking ([`Core::set_memory_pressure`]) looks again in a
    /// while.
    pub fn reads_watched(&self) -> bool {
        self.responder.reads_watched()
    }

    /// Looks again for memory for the calls waiting for it ([`Core::memory_waiting`]).
    pub fn retry_memory<M: Memory<Buf = B>>(&mut self, mem: &mut M) {
        if self.closed {
            return;
        }
        self.responder
            .pull(mem, &self.config, &mut self.out, &mut self.stats);
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

//! Settings of an RPC-over-RDMA endpoint.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::rdma::ConnectParams;
use crate::rpc::Server;
use crate::transport::budget::MemoryLimits;
use crate::transport::extension::{Extension, Extensions};
use crate::transport::header::HeaderLimits;
use crate::transport::mode2004::Mode2004;
use crate::transport::pool::PoolConfig;
use crate::transport::private_data::{self, PrivateData};

/// Settings of an RPC-over-RDMA client or server.
///
/// The defaults follow the Linux kernel's where it has one (Send With Invalidate accepted; 32
/// credits granted by a server and requested by a client), except the receive buffers: 5 KiB
/// where the kernel posts 4 KiB, so that a page of data (a 4 KiB argument or result) and its
/// message's header fit one Send and cost one round trip, as over TCP. In 4 KiB it moves by a
/// chunk instead: a WRITE costs the server an RDMA Read round trip, a READ the client's Write
/// chunk. Each side advertises its own size (RFC 8797), so a Linux peer still receives at
/// most its 4 KiB from this side.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RdmaConfig {
    /// Forward credits: granted by a server, requested by a client (seed 004 section 4.3).
    pub credits: u32,
    /// Backward-direction credits (seed 004 section 8.2): on a client, the server's calls it
    /// accepts at once (it then needs [`RdmaConfig::backchannel`]); on a server, the calls it
    /// asks to send. 0 turns the backward direction off.
    pub backward_credits: u32,
    /// This side's receive buffer size: the largest message the peer may send, advertised in
    /// the connection's private data (RFC 8797). 1 KiB to 256 KiB, a multiple of 1 KiB.
    pub inline_size: usize,
    /// The peer's receive buffer size when its private data does not say (seed 004 section
    /// 4.3.1: 1024).
    pub peer_inline_default: usize,
    /// Accept Send With Invalidate of this side's handles (advertised in the private data).
    pub remote_invalidate: bool,
    /// RDMA Reads outstanding in each direction (IRD and ORD).
    pub max_reads: u32,
    /// DDP-eligible arguments at least this long move to Read chunks even when they would fit
    /// inline. 8 KiB by default, more than the default receive buffer holds: an argument then
    /// moves only when it does not fit the peer's receive buffer, as the Linux client decides.
    /// With larger receive buffers, arguments from this size up still move rather than be
    /// copied into the Send.
    pub min_ddp_size: usize,
    /// The Write chunk provided for a DDP-eligible result when the caller gives a size for
    /// another result of the call but not for this one (without any size, how the procedure's
    /// results came back lately decides: see the crate documentation).
    pub default_write_chunk: usize,
    /// The most a client offers for one reply's results (Write chunks, Reply chunk) when it
    /// sends a call again with room; a reply needing more fails with
    /// [`TransportError::ReplyTooLarge`](crate::rpc::TransportError::ReplyTooLarge), which says
    /// so. [`DEFAULT_MAX_MESSAGE`](crate::rpc::DEFAULT_MAX_MESSAGE) by default, the bound
    /// of a TCP record.
    pub max_reply_size: usize,
    /// The Reply chunk provided when a reply's size is unbounded and the call does not say.
    pub default_reply_chunk: usize,
    /// Bounds on what a peer's header may ask for.
    pub limits: HeaderLimits,
    /// Registered buffer pool settings.
    pub pool: PoolConfig,
    /// How long a call waits for its reply unless its options say otherwise (`None`: forever).
    pub timeout: Option<Duration>,
    /// A client retransmits a call once on a new connection when its connection drops.
    pub retransmit: bool,
    /// A client's server for backward-direction calls (seed 004 section 8).
    pub backchannel: Option<Server>,
    /// Speak RPC-over-RDMA version 2 (seed 003) with peers that do: a client offers it when it
    /// connects and carries on in version 1 with a peer that does not; a server accepts it.
    /// Off by default: the Linux kernel and every other implementation speak version 1.
    pub version_2: bool,
    /// How long a client waits for the answer to its version 2 offer.
    pub negotiation_timeout: Duration,
    /// The versions servers settled on, shared by every clone of this config: a client that
    /// reconnects to a server does not negotiate again (seed 003 section 7.2).
    pub versions: PeerVersions,
    /// Version 2 extensions this endpoint speaks (seed 003 section 9).
    pub extensions: Extensions,
    /// Speak the 2004 protocol of seed 000 on this endpoint's connections
    /// ([`RdmaConfig::mode_2004`]); `None`, the default, is RFC 8166.
    pub mode_2004: Option<Mode2004>,
    /// Registered memory one connection, and a server's connections together, may have lent
    /// at once (see [`budget`](crate::transport::budget)): a peer's calls whose Read chunks
    /// would go past it wait for memory to come back.
    pub memory: MemoryLimits,
    /// A server closes a connection whose peer sends no message this long after it was
    /// accepted (10 s by default, as the software provider's MPA handshake): a silent peer
    /// does not keep a connection and its receive buffers. `None`: no limit.
    pub first_message_timeout: Option<Duration>,
    /// A connection closes when the RDMA Reads it posted for the peer's Read chunks make no
    /// progress for this long (between one and two periods; 30 s by default): a peer that
    /// never answers them does not keep the memory they land in. `None`: no limit.
    pub read_timeout: Option<Duration>,
    /// Server: the most connections it serves at once, those being accepted included. A
    /// request beyond it is rejected at once (the provider's reject: an MPA Reply with the
    /// Reject bit, an rdma_cm REJ), with a rate-limited `warn` line naming the peer and the
    /// limit; the connection's place comes back when it closes.
    ///
    /// Default [`DEFAULT_MAX_CONNECTIONS`](crate::rpc::tcp::DEFAULT_MAX_CONNECTIONS), as over
    /// TCP: above the 10,000 connections a server is meant to
    /// carry, so it only stops a flood; what each connection may hold is bounded by its
    /// credits and pool, not by this. Values below 1 count as 1.
    pub max_connections: usize,
    /// Send-queue work requests (Sends, RDMA Writes and Reads, invalidations) a connection
    /// keeps posted at once; more wait, in order, for completions to make room. A device holds
    /// the queue for each connection, sized up front: Linux rxe rounds the entries (with the
    /// verbs provider's 16 spare slots, and one of its own) up to a power of two, of about 512
    /// bytes each: 4,096 entries would cost 4 MiB per queue pair, where the default fills
    /// 256. A call usually takes one to three (a Send, a Write or Read per
    /// chunk segment, an invalidation), so the default leaves the credits' calls room. Values
    /// below 1 count as 1.
    pub send_queue_depth: u32,
    /// A server's connection that sent and received nothing for between this long and twice
    /// this long gives back the buffers it keeps registered for reuse (free send buffers and
    /// pool buffers; its receives stay): on a device registered memory is pinned, and a
    /// connection that once carried large calls would keep it for as long as it is open.
    /// `None` keeps them. Default 30 s.
    pub release_idle_after: Option<Duration>,
    /// A client's call that provides Write chunks also provides a Reply chunk when the rest
    /// of its reply is unbounded (an NFSv4 COMPOUND's READ). RFC 8166 allows both; the Linux
    /// kernel's server (svcrdma, seen on 6.1) then counts the Write chunk's payload as part
    /// of what went into the Reply chunk, answers nothing and closes the connection when the
    /// Reply chunk is smaller than the whole reply (`svcrdma_send_err ... status=-7`).
    /// Off: such a call provides its Write chunks only, as Linux's own client does, and a
    /// reply that does not fit inline has nowhere to go (the server answers ERR_CHUNK).
    /// Default on. A caller that knows how large its reply can be says so per call instead
    /// ([`CallOptions::max_inline_results`](crate::rpc::CallOptions::max_inline_results),
    /// which the NFSv4.1 client library sets from each COMPOUND's operations): a reply that
    /// then fits inline gets no Reply chunk whatever this says.
    pub reply_chunk_with_write_chunks: bool,
}

/// The RPC-over-RDMA version each server settled on, by address, shared between clones.
#[derive(Debug, Clone, Default)]
pub struct PeerVersions(Arc<Mutex<HashMap<SocketAddr, u32>>>);

impl PeerVersions {
    /// The version `peer` settled on last time, if known.
    pub fn get(&self, peer: SocketAddr) -> Option<u32> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&peer)
            .copied()
    }

    /// Remembers that `peer` settled on `version`.
    pub fn remember(&self, peer: SocketAddr, version: u32) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(peer, version);
    }

    /// Forgets what `peer` settled on (after its software changed, say).
    pub fn forget(&self, peer: SocketAddr) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&peer);
    }
}

impl Default for RdmaConfig {
    fn default() -> Self {
        RdmaConfig {
            credits: 32,
            backward_credits: 0,
            inline_size: 5120,
            peer_inline_default: private_data::DEFAULT_INLINE,
            remote_invalidate: true,
            max_reads: 16,
            min_ddp_size: 8192,
            default_write_chunk: 1 << 20,
            default_reply_chunk: 1 << 20,
            max_reply_size: crate::rpc::DEFAULT_MAX_MESSAGE,
            limits: HeaderLimits::default(),
            pool: PoolConfig::default(),
            timeout: Some(Duration::from_secs(60)),
            retransmit: true,
            backchannel: None,
            version_2: false,
            negotiation_timeout: Duration::from_secs(2),
            versions: PeerVersions::default(),
            extensions: Extensions::default(),
            mode_2004: None,
            memory: MemoryLimits::default(),
            first_message_timeout: Some(Duration::from_secs(10)),
            read_timeout: Some(Duration::from_secs(30)),
            max_connections: crate::rpc::tcp::DEFAULT_MAX_CONNECTIONS,
            send_queue_depth: DEFAULT_SEND_QUEUE_DEPTH,
            release_idle_after: Some(Duration::from_secs(30)),
            reply_chunk_with_write_chunks: true,
        }
    }
}

/// [`RdmaConfig::send_queue_depth`]'s default: 256 entries on rxe with the spare slots.
pub const DEFAULT_SEND_QUEUE_DEPTH: u32 = 224;

impl RdmaConfig {
    /// The defaults.
    pub fn new() -> RdmaConfig {
        RdmaConfig::default()
    }

    /// Sets the forward credits.
    pub fn credits(mut self, credits: u32) -> Self {
        self.credits = credits.max(1);
        self
    }

    /// Sets the backward-direction credits.
    pub fn backward_credits(mut self, credits: u32) -> Self {
        self.backward_credits = credits;
        self
    }

    /// Sets this side's receive buffer size (rounded down to a multiple of 1 KiB, within
    /// 1 KiB..=256 KiB).
    pub fn inline_size(mut self, size: usize) -> Self {
        self.inline_size =
            size.clamp(private_data::DEFAULT_INLINE, private_data::MAX_INLINE) / 1024 * 1024;
        self
    }

    /// Sets the peer's receive buffer size assumed when its private data does not say.
    pub fn peer_inline_default(mut self, size: usize) -> Self {
        self.peer_inline_default = size.max(private_data::DEFAULT_INLINE);
        self
    }

    /// Accepts (or refuses) Send With Invalidate.
    pub fn remote_invalidate(mut self, on: bool) -> Self {
        self.remote_invalidate = on;
        self
    }

    /// Sets the default call timeout.
    pub fn timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the smallest DDP-eligible argument that always moves to a Read chunk.
    pub fn min_ddp_size(mut self, size: usize) -> Self {
        self.min_ddp_size = size;
        self
    }

    /// Sets the registered buffer pool.
    pub fn pool(mut self, pool: PoolConfig) -> Self {
        self.pool = pool;
        self
    }

    /// Speaks RPC-over-RDMA version 2 with peers that do ([`RdmaConfig::version_2`]).
    pub fn version_2(mut self, on: bool) -> Self {
        self.version_2 = on;
        self
    }

    /// Speaks the version 2 extension `extension` (seed 003 section 9): advertises its
    /// properties, answers its header types.
    pub fn extension(mut self, extension: impl Extension) -> Self {
        self.extensions = std::mem::take(&mut self.extensions).with(extension);
        self
    }

    /// Speaks the 2004 protocol of seed 000 as `mode` says (RDMA_MSGP, the Read-Read model
    /// with RDMA_DONE, the Connection Configuration Protocol). Such a connection speaks
    /// version 1 headers: version 2 is turned off. Both ends must agree: a peer in the default
    /// mode takes RDMA_MSGP as RDMA_MSG and drops RDMA_DONE (seed 004 section 5.7).
    pub fn mode_2004(mut self, mode: Mode2004) -> Self {
        self.mode_2004 = Some(mode);
        self.version_2 = false;
        self
    }

    /// Sets the most offered for one reply ([`RdmaConfig::max_reply_size`]).
    pub fn max_reply_size(mut self, bytes: usize) -> Self {
        self.max_reply_size = bytes;
        self
    }

    /// Sets the registered memory budgets ([`RdmaConfig::memory`]).
    pub fn memory(mut self, limits: MemoryLimits) -> Self {
        self.memory = limits;
        self
    }

    /// Sets how long a RDMA Reads may go without progress ([`RdmaConfig::read_timeout`]).
    pub fn read_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.read_timeout = timeout;
        self
    }

    /// Sets how long a server waits for a new connection's first message
    /// ([`RdmaConfig::first_message_timeout`]).
    pub fn first_message_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.first_message_timeout = timeout;
        self
    }

    /// Sets the most connections a server serves at once ([`RdmaConfig::max_connections`]).
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections;
        self
    }

    /// Sets the send-queue work requests kept posted at once
    /// ([`RdmaConfig::send_queue_depth`]).
    pub fn send_queue_depth(mut self, depth: u32) -> Self {
        self.send_queue_depth = depth.max(1);
        self
    }

    /// Sets when an idle server connection gives back its reusable buffers
    /// ([`RdmaConfig::release_idle_after`]).
    pub fn release_idle_after(mut self, after: Option<Duration>) -> Self {
        self.release_idle_after = after;
        self
    }

    /// Provides a Reply chunk beside Write chunks, or not
    /// ([`RdmaConfig::reply_chunk_with_write_chunks`]; off for the Linux kernel's server).
    pub fn reply_chunk_with_write_chunks(mut self, on: bool) -> Self {
        self.reply_chunk_with_write_chunks = on;
        self
    }

    /// Retransmit once on a new connection, or not.
    pub fn retransmit(mut self, on: bool) -> Self {
        self.retransmit = on;
        self
    }

    /// Serves backward-direction calls with `server` (a client), accepting `credits` at once.
    pub fn backchannel(mut self, server: Server, credits: u32) -> Self {
        self.backchannel = Some(server);
        self.backward_credits = credits.max(1);
        self
    }

    /// Receives a connection keeps posted: one per credit granted or requested, one per
    /// backward credit (seed 004 sections 4.3 and 8.2.2).
    /// In the Read-Read model, one more per forward credit and one besides for the
    /// RDMA_DONEs replies bring (seed 000 section 3.8: "the RPC Done message consumes a credit at the server").
    pub fn receives(&self) -> usize {
        let done = match &self.mode_2004 {
            Some(m) if m.read_read => self.credits.max(1) + 1,
            _ => 0,
        };
        (self.credits.max(1) + done + self.backward_credits) as usize
    }

    /// The provider parameters of a connection: this side's private data, the RDMA Read
    /// depths, and queues deep enough for the receives and the operations of many calls.
    pub fn connect_params(&self) -> ConnectParams {
        let without = PrivateData {
            remote_invalidate: false,
            ..self.private_data()
        };
        ConnectParams::new()
            .private_data(self.private_data().encode().to_vec())
            .private_data_without_remote_invalidation(without.encode().to_vec())
            .read_depths(self.max_reads, self.max_reads)
            .queue_depths(self.send_queue_depth.max(1), self.receives() as u32 + 1)
    }

    /// What this side advertises in its connection private data.
    pub fn private_data(&self) -> PrivateData {
        PrivateData {
            remote_invalidate: self.remote_invalidate,
            send_size: self.inline_size,
            receive_size: self.inline_size,
        }
    }

    /// The peer's parameters from its private data, with this side's default for a peer that
    /// sent none.
    pub fn peer(&self, data: &[u8]) -> PrivateData {
        PrivateData::decode(data).unwrap_or(PrivateData {
            remote_invalidate: false,
            send_size: self.peer_inline_default,
            receive_size: self.peer_inline_default,
        })
    }
}

/// The `private_data` event: what RPC-over-RDMA took from the peer's connection private data
/// (RFC 8797 section 4), or that it found none it could read and applies the defaults.
pub(super) fn tell_private_data(peer: std::net::SocketAddr, data: &[u8], taken: &PrivateData) {
    tracing::debug!(
        target: crate::rpc::observe::CONNECTIONS,
        event = "private_data",
        %peer,
        peer_receive_size = taken.receive_size,
        peer_send_size = taken.send_size,
        peer_remote_invalidate = taken.remote_invalidate,
        rfc8797 = PrivateData::decode(data).is_some(),
        "connection private data"
    );
}

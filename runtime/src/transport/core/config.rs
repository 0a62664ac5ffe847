//! The settings of one connection's core.

use std::time::Duration;

use super::Role;
use crate::transport::extension::Extensions;
use crate::transport::header::HeaderLimits;
use crate::transport::mode2004::Mode2004;

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
    /// [`Core::open`](super::Core::open)(super::Core::open), a server accepts it. Off: version 1 only.
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
    /// [`Core::open`](super::Core::open)(super::Core::open) (a peer that connects and stays silent holds a connection slot and its
    /// receive buffers). `None`: no limit.
    pub first_message_timeout: Option<Duration>,
    /// The most a requester offers for one reply's results when sending a call again with
    /// room (after ERR_CHUNK, WRITE_RESOURCE or REPLY_RESOURCE); a reply needing more fails
    /// with [`TransportError::ReplyTooLarge`](crate::rpc::TransportError::ReplyTooLarge).
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

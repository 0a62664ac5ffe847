//! Counters of what a core has done.

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

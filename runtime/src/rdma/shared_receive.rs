//! Shared receive queues: one set of receive buffers for many connections.
//!
//! A connection's own receive queue holds a buffer for every Send its peer may have in flight,
//! whether the peer sends or not: a server with thousands of mostly idle clients keeps
//! thousands of idle buffers. A shared receive queue (verbs: `ibv_create_srq`) holds one set
//! of buffers for every connection accepted with it; a Send takes whichever buffer is free.
//!
//! The queue owns its buffers: the provider registers and posts them, and the consumer reads
//! each message in place and gives its buffer back with [`Connection::take_shared`]. A
//! provider with several devices keeps one queue (with its own buffers) per device, since
//! receives are posted per device.
//!
//! # What the contract adds
//! * A connection accepted with a queue ([`ConnectRequest::accept_shared_with`]) completes
//!   every arriving Send as a receive completion ([`WcOpcode::Recv`](super::WcOpcode), status
//!   success, [`byte_len`](super::Completion::byte_len) the message length) whose `wr_id` is
//!   the provider's; the consumer passes that completion to [`Connection::take_shared`], once.
//!   [`Connection::post_recv`] on such a connection fails.
//! * When such a connection closes it yields one receive completion with status
//!   [`Flushed`](super::WcStatus::Flushed) (it has no receives of its own to flush, and the
//!   consumer learns of the close the same way as without a queue); its successful receive
//!   completions not taken yet give their buffers back when the connection is dropped.
//! * [`Connection::limit_shared_receives`] bounds the buffers one connection may hold at once
//!   (arrived, not taken yet): a Send past it ends that connection as a Send finding no
//!   buffer would, so one peer that ignores its credits cannot empty the queue under the
//!   others. The consumer keeps it at the credits it grants.
//! * A Send that finds the queue empty ends its connection, as a Send finding no posted
//!   receive does (iWARP: a Terminate, RFC 5041 section 7.2's "no buffer available"). A
//!   consumer that grants no more credits than the queue holds buffers (RFC 8166 section 4.3:
//!   "to accommodate the available resources in a shared receive queue") never sees it.
//!
//! [`Connection::take_shared`]: super::Connection::take_shared
//! [`Connection::post_recv`]: super::Connection::post_recv
//! [`Connection::limit_shared_receives`]: super::Connection::limit_shared_receives
//! [`ConnectRequest::accept_shared_with`]: super::ConnectRequest::accept_shared_with

/// The shape of a shared receive queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SharedReceiveParams {
    /// Receive buffers the queue keeps posted (per device).
    pub buffers: usize,
    /// The size of each buffer: the largest Send a connection on the queue can receive.
    pub buffer_size: usize,
}

impl SharedReceiveParams {
    /// `buffers` buffers of `buffer_size` bytes.
    pub fn new(buffers: usize, buffer_size: usize) -> SharedReceiveParams {
        SharedReceiveParams {
            buffers,
            buffer_size,
        }
    }
}

/// Most buffers one shared receive queue may hold: a bound on what a configuration commits.
pub const MAX_SHARED_BUFFERS: usize = 1 << 20;

/// A shared receive queue ([`Provider::shared_receive_queue`](super::Provider)), handed to
/// [`ConnectRequest::accept_shared_with`](super::ConnectRequest::accept_shared_with) for each
/// connection that is to use it. Cheap to share: the connections keep it alive.
pub trait SharedReceiveQueue: Send + Sync + 'static {
    /// The queue's shape.
    fn params(&self) -> SharedReceiveParams;

    /// Buffers posted and free now (on the device with the fewest, for a provider with
    /// several): what Sends may still take.
    fn free_buffers(&self) -> usize;
}

/// Checks a queue's shape against what a provider accepts.
pub(crate) fn check_params(params: &SharedReceiveParams) -> super::Result<()> {
    if params.buffers == 0 || params.buffers > MAX_SHARED_BUFFERS {
        return Err(super::Error::InvalidWorkRequest(format!(
            "a shared receive queue holds 1 to {MAX_SHARED_BUFFERS} buffers, not {}",
            params.buffers
        )));
    }
    if params.buffer_size == 0 || params.buffer_size > u32::MAX as usize {
        return Err(super::Error::InvalidWorkRequest(format!(
            "a shared receive buffer of {} bytes",
            params.buffer_size
        )));
    }
    Ok(())
}

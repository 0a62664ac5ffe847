//! Errors of the provider contract: failures of a verb call itself (the outcome of a posted work
//! request is a [`WcStatus`](super::WcStatus) in its completion, not an error).

/// The result type of provider calls.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a provider call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A socket or device call failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The peer rejected the connection (MPA Reply with the Reject bit, `RDMA_CM_EVENT_REJECTED`).
    #[error("the peer rejected the connection ({} bytes of private data)", private_data.len())]
    Rejected {
        /// The private data of the rejection.
        private_data: Vec<u8>,
    },
    /// Connection establishment failed (negotiation refused, malformed handshake).
    #[error("connection establishment failed: {0}")]
    Establishment(String),
    /// Connection establishment did not finish in time (which step, in the text).
    #[error("connection establishment timed out: {0}")]
    TimedOut(String),
    /// The connection is closed or in error: nothing more can be posted.
    #[error("the connection is closed")]
    Closed,
    /// The work queue already holds its maximum number of outstanding requests.
    #[error("the {queue} queue is full ({depth} outstanding requests)")]
    QueueFull {
        /// "send" or "receive".
        queue: &'static str,
        /// The configured depth.
        depth: usize,
    },
    /// A work request was refused when posted (foreign region, empty gather list, ...).
    #[error("invalid work request: {0}")]
    InvalidWorkRequest(String),
    /// A byte range is outside a registration.
    #[error("range {offset}+{len} is outside a registration of {region_len} bytes")]
    OutOfBounds {
        /// First byte of the range.
        offset: u64,
        /// Length of the range.
        len: u64,
        /// Length of the registration.
        region_len: u64,
    },
    /// Private data longer than the transport can carry.
    #[error("private data of {len} bytes exceeds the limit of {max}")]
    PrivateDataTooLong {
        /// The length given.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The provider does not implement this.
    #[error("not supported: {0}")]
    Unsupported(String),
    /// A provider-specific failure.
    #[error("provider error: {0}")]
    Provider(Box<dyn std::error::Error + Send + Sync>),
}

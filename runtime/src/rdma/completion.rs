//! Work completions (verbs `ibv_wc`): one per posted work request, with a typed status.

use std::fmt;

use super::wr::WrId;

/// Which kind of work request completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WcOpcode {
    /// A Send (any variant) from the send queue.
    Send,
    /// An RDMA Write.
    RdmaWrite,
    /// An RDMA Read.
    RdmaRead,
    /// A local invalidate.
    LocalInvalidate,
    /// A receive: an incoming Send landed in a posted receive buffer.
    Recv,
}

/// The outcome of a work request (verbs `ibv_wc_status`; the iWARP Terminate causes of
/// RFC 5040 section 7 map onto these).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WcStatus {
    /// The request completed.
    Success,
    /// The connection went down (closed, terminated, or in error) before the request was
    /// processed; it was flushed.
    Flushed,
    /// A received message was longer than the posted receive buffer, or a local length was
    /// otherwise wrong.
    LocalLengthError,
    /// A local key or range was invalid or lacked the needed right.
    LocalProtectionError,
    /// The local queue pair hit an internal error.
    LocalQpOperationError,
    /// The peer refused access: invalid or invalidated steering tag, bounds, or access right.
    RemoteAccessError,
    /// The peer could not complete the operation (e.g. its receive buffer was too small).
    RemoteOperationError,
    /// The peer considered the request invalid (unsupported or malformed operation, no
    /// receive posted).
    RemoteInvalidRequest,
    /// The peer's response was not understood.
    BadResponse,
    /// Any other failure.
    GeneralError,
    /// A provider-specific status code with no name here.
    Other(u32),
}

impl WcStatus {
    /// True for [`WcStatus::Success`].
    pub fn is_success(self) -> bool {
        self == WcStatus::Success
    }
}

impl fmt::Display for WcStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            WcStatus::Success => "success",
            WcStatus::Flushed => "flushed",
            WcStatus::LocalLengthError => "local length error",
            WcStatus::LocalProtectionError => "local protection error",
            WcStatus::LocalQpOperationError => "local QP operation error",
            WcStatus::RemoteAccessError => "remote access error",
            WcStatus::RemoteOperationError => "remote operation error",
            WcStatus::RemoteInvalidRequest => "remote invalid request",
            WcStatus::BadResponse => "bad response",
            WcStatus::GeneralError => "general error",
            WcStatus::Other(code) => return write!(f, "provider status {code}"),
        };
        f.write_str(text)
    }
}

/// A work completion.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Completion {
    /// The identifier of the work request.
    pub wr_id: WrId,
    /// The kind of request.
    pub opcode: WcOpcode,
    /// The outcome.
    pub status: WcStatus,
    /// For a successful receive: the number of bytes placed. For a successful RDMA Read: the
    /// number of bytes read. Otherwise zero, or the request length.
    pub byte_len: u32,
    /// For a receive of a Send with Invalidate: the local steering tag the peer invalidated.
    pub invalidated_rkey: Option<u32>,
    /// For a receive: the Send carried a solicited event.
    pub solicited: bool,
}

impl Completion {
    /// A completion with no byte count, no invalidation and no solicited event.
    pub fn new(wr_id: WrId, opcode: WcOpcode, status: WcStatus) -> Completion {
        Completion {
            wr_id,
            opcode,
            status,
            byte_len: 0,
            invalidated_rkey: None,
            solicited: false,
        }
    }

    /// Sets the byte count.
    pub fn with_byte_len(mut self, byte_len: u32) -> Completion {
        self.byte_len = byte_len;
        self
    }

    /// Sets the invalidated steering tag.
    pub fn with_invalidated_rkey(mut self, rkey: u32) -> Completion {
        self.invalidated_rkey = Some(rkey);
        self
    }

    /// Sets the solicited-event flag.
    pub fn with_solicited(mut self, solicited: bool) -> Completion {
        self.solicited = solicited;
        self
    }

    /// True when the request completed successfully.
    pub fn is_success(&self) -> bool {
        self.status.is_success()
    }
}

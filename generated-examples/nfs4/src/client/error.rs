//! What can go wrong with a session: the RPC call, an operation's status, or a reply that
//! breaks RFC 5661.

use crate::nfs4::{NfsOpnum4, Nfsstat4};

/// Why a session operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The RPC call itself failed: the transport, the server's RPC layer, or a reply that did
    /// not decode (an unknown `nfsstat4` or operation number included).
    #[error("NFSv4.1 call failed: {0}")]
    Rpc(#[from] rpcrdma::rpc::Error),
    /// An operation of the COMPOUND answered an error (RFC 5661 section 15.1): the operation
    /// that failed and its status. `NFS4ERR_DELAY` comes here only once the session's retries
    /// ([`DelayPolicy`](super::DelayPolicy)) are spent.
    #[error("{op:?} failed: {status:?} ({})", status.value())]
    Status {
        /// The operation that failed.
        op: NfsOpnum4,
        /// Its status.
        status: Nfsstat4,
    },
    /// The server's reply breaks the protocol (a SEQUENCE result for another session or slot,
    /// more results than operations, a result for another operation, a count beyond what was
    /// asked): nothing of it was used.
    #[error("the server's reply breaks RFC 5661: {0}")]
    Protocol(String),
    /// The COMPOUND has more operations than the session's fore channel allows
    /// (`ca_maxoperations`, RFC 5661 section 18.36.3); it was not sent.
    #[error("{ops} operations in one COMPOUND, the session allows {max}")]
    TooManyOps {
        /// Operations in the COMPOUND, SEQUENCE included.
        ops: usize,
        /// The granted `ca_maxoperations`.
        max: u32,
    },
    /// A READ or WRITE larger than the session's granted request or response size allows; it
    /// was not sent.
    #[error("{what} of {len} bytes exceeds the session's limit of {max}")]
    TooLarge {
        /// `"READ"` or `"WRITE"`.
        what: &'static str,
        /// The bytes asked for.
        len: u64,
        /// The most the session allows ([`Session::max_read`](super::Session::max_read),
        /// [`Session::max_write`](super::Session::max_write)).
        max: u64,
    },
    /// The configuration cannot work on this transport (a backchannel over ONC RPC over TCP
    /// on a connection made without `TcpConfig::backchannel`, which serves no backward
    /// calls).
    #[error("invalid session configuration: {0}")]
    Config(String),
}

impl ClientError {
    /// The status of a failed operation, if that is what this is.
    pub fn status(&self) -> Option<Nfsstat4> {
        match self {
            ClientError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// A protocol violation described by `what`.
    pub(crate) fn protocol(what: impl Into<String>) -> ClientError {
        ClientError::Protocol(what.into())
    }
}

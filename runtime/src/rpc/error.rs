//! What can go wrong with a call: the server's non-SUCCESS replies ([`ReplyError`]), and
//! everything a client sees ([`Error`]).

use std::fmt;
use std::io;

use super::msg::AuthStat;
use crate::xdr;

/// A reply other than SUCCESS, as a server sends it (RFC 5531 section 9): returned by
/// handlers to refuse a call, and produced by the server itself for calls it cannot route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplyError {
    /// MSG_DENIED / RPC_MISMATCH: the call's RPC version is not supported.
    RpcMismatch {
        /// Lowest supported RPC version.
        low: u32,
        /// Highest supported RPC version.
        high: u32,
    },
    /// MSG_DENIED / AUTH_ERROR: the credentials were refused.
    AuthError(AuthStat),
    /// MSG_ACCEPTED / PROG_UNAVAIL: the program is not hosted here.
    ProgUnavail,
    /// MSG_ACCEPTED / PROG_MISMATCH: the program is hosted, but not this version.
    ProgMismatch {
        /// Lowest version hosted.
        low: u32,
        /// Highest version hosted.
        high: u32,
    },
    /// MSG_ACCEPTED / PROC_UNAVAIL: the version has no such procedure.
    ProcUnavail,
    /// MSG_ACCEPTED / GARBAGE_ARGS: the arguments could not be decoded.
    GarbageArgs,
    /// MSG_ACCEPTED / SYSTEM_ERR: the server failed while running the call.
    SystemErr,
}

impl fmt::Display for ReplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplyError::RpcMismatch { low, high } => {
                write!(f, "RPC version mismatch (server speaks {low}..={high})")
            }
            ReplyError::AuthError(stat) => write!(f, "authentication refused ({stat:?})"),
            ReplyError::ProgUnavail => f.write_str("program unavailable"),
            ReplyError::ProgMismatch { low, high } => {
                write!(f, "program version mismatch (server has {low}..={high})")
            }
            ReplyError::ProcUnavail => f.write_str("procedure unavailable"),
            ReplyError::GarbageArgs => f.write_str("the server could not decode the arguments"),
            ReplyError::SystemErr => f.write_str("system error at the server"),
        }
    }
}

impl std::error::Error for ReplyError {}

/// A failure below the RPC layer: the connection, record marking, or RPC-over-RDMA.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// A socket or device call failed.
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
    /// The connection closed before the reply arrived (after any retransmission).
    #[error("the connection closed before the reply arrived")]
    Closed,
    /// No reply came within the call's timeout.
    #[error("no reply within {0:?}")]
    TimedOut(std::time::Duration),
    /// A record or message is larger than the configured bound.
    #[error("a message of {len} bytes exceeds the limit of {max}")]
    TooLarge {
        /// The message's length (or the length announced so far).
        len: u64,
        /// The configured bound.
        max: u64,
    },
    /// RPC-over-RDMA: the responder answered RDMA_ERROR / ERR_VERS (seed 004 section 5.5).
    #[error("the peer does not speak this RPC-over-RDMA version (it speaks {low}..={high})")]
    RdmaVersion {
        /// Lowest version the peer supports.
        low: u32,
        /// Highest version the peer supports.
        high: u32,
    },
    /// RPC-over-RDMA: the responder answered RDMA_ERROR / ERR_CHUNK (seed 004 section 5.5):
    /// it could not use the call's chunks, or the reply fit neither inline nor in them.
    #[error(
        "the peer refused the call's chunks or had nowhere to put the reply (RDMA_ERROR / \
         ERR_CHUNK; a reply larger than CallOptions::max_inline_results promised ends here)"
    )]
    RdmaChunk,
    /// RPC-over-RDMA version 2: the responder answered RDMA2_ERROR with a code other than
    /// ERR_VERS and BAD_XDR (seed 003 section 5.3.3), and the call could not be retried.
    #[error("the peer refused the call: RDMA2_ERROR / {0}")]
    RdmaRefused(RdmaError),
    /// RPC-over-RDMA: the reply needs more room than this side offers for one reply
    /// ([`RdmaConfig::max_reply_size`](crate::transport::RdmaConfig::max_reply_size)).
    #[error("{}", reply_too_large(*.needed, *.limit))]
    ReplyTooLarge {
        /// The bytes the responder said it needs (version 2); `None` when it does not say
        /// (version 1 answers only ERR_CHUNK).
        needed: Option<u64>,
        /// The most this side offers.
        limit: u64,
    },
    /// The peer refused the connection when it was being made (RPC-over-RDMA: the provider's
    /// reject, such as a server at its connection limit; over TCP a refused connect is
    /// [`TransportError::Io`] with [`std::io::ErrorKind::ConnectionRefused`]).
    #[error("the peer rejected the connection")]
    Rejected,
    /// Making the connection failed past the socket: the handshake was refused or malformed
    /// (RPC-over-RDMA: MPA, rdma_cm).
    #[error("connection establishment failed: {0}")]
    Handshake(String),
    /// The peer broke the protocol (an unparsable reply, a message over the inline threshold).
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// A failure of the transport's own machinery (registration, posting, ...).
    #[error("{0}")]
    Other(Box<dyn std::error::Error + Send + Sync>),
}

/// What kind of failure an [`Error`] is, the same on every transport: match on it without
/// knowing which transport a call went over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Nothing listens at the address, or the peer refused the connection.
    ConnectionRefused,
    /// The connection broke (reset, closed) before the reply came.
    ConnectionLost,
    /// No reply (or no connection) within the time allowed.
    TimedOut,
    /// The server's RPC layer refused the call: RPC version, credentials, program, version,
    /// procedure or arguments (RFC 5531 section 9).
    Refused,
    /// The server ran the call and failed (SYSTEM_ERR).
    ServerFailed,
    /// The peer's transport refused the call as sent (RPC-over-RDMA's RDMA_ERROR: ERR_CHUNK,
    /// ERR_VERS and version 2's codes).
    TransportRefused,
    /// A message over a configured bound (a record, a reply's room).
    TooLarge,
    /// The peer broke the protocol, or its reply did not decode.
    Protocol,
    /// The arguments did not encode (a value over a declared maximum).
    Encode,
    /// This side's interceptor refused the call before it was sent
    /// ([`Client::with_interceptor`](crate::rpc::Client::with_interceptor)).
    Intercepted,
    /// Anything else (this side's machinery: registration, posting).
    Other,
}

impl TransportError {
    /// What kind of failure it is ([`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            TransportError::Io(e) => match e.kind() {
                io::ErrorKind::ConnectionRefused => ErrorKind::ConnectionRefused,
                io::ErrorKind::TimedOut => ErrorKind::TimedOut,
                io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::BrokenPipe
                | io::ErrorKind::NotConnected
                | io::ErrorKind::UnexpectedEof => ErrorKind::ConnectionLost,
                _ => ErrorKind::Other,
            },
            TransportError::Closed => ErrorKind::ConnectionLost,
            TransportError::TimedOut(_) => ErrorKind::TimedOut,
            TransportError::TooLarge { .. } | TransportError::ReplyTooLarge { .. } => {
                ErrorKind::TooLarge
            }
            TransportError::RdmaVersion { .. }
            | TransportError::RdmaChunk
            | TransportError::RdmaRefused(_) => ErrorKind::TransportRefused,
            TransportError::Rejected => ErrorKind::ConnectionRefused,
            TransportError::Handshake(_) | TransportError::Protocol(_) => ErrorKind::Protocol,
            TransportError::Other(_) => ErrorKind::Other,
        }
    }
}

fn reply_too_large(needed: Option<u64>, limit: u64) -> String {
    match needed {
        Some(n) => format!(
            "the reply needs {n} bytes, more than the {limit} this side offers for one reply \
             (raise RdmaConfig::max_reply_size)"
        ),
        None => format!(
            "the reply does not fit in {limit} bytes, the most this side offers for one reply \
             (raise RdmaConfig::max_reply_size; an RPC-over-RDMA version 1 peer does not say \
             how much it needs)"
        ),
    }
}

/// Why a call failed, as the caller sees it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server does not speak RPC version 2 (MSG_DENIED / RPC_MISMATCH).
    #[error("the server does not speak RPC version 2 (it speaks {low}..={high})")]
    RpcMismatch {
        /// Lowest RPC version the server supports.
        low: u32,
        /// Highest RPC version the server supports.
        high: u32,
    },
    /// The server refused the credentials (MSG_DENIED / AUTH_ERROR).
    #[error("the server refused the credentials ({0:?})")]
    Auth(AuthStat),
    /// The program is not available at the server (PROG_UNAVAIL).
    #[error("the program is not available at the server")]
    ProgUnavail,
    /// The server hosts the program, but not this version (PROG_MISMATCH).
    #[error("the server hosts versions {low}..={high} of the program, not this one")]
    ProgMismatch {
        /// Lowest version the server hosts.
        low: u32,
        /// Highest version the server hosts.
        high: u32,
    },
    /// The server's version of the program has no such procedure (PROC_UNAVAIL).
    #[error("the procedure is not available at the server")]
    ProcUnavail,
    /// The server could not decode the arguments (GARBAGE_ARGS).
    #[error("the server could not decode the arguments")]
    GarbageArgs,
    /// The server failed while running the call (SYSTEM_ERR).
    #[error("system error at the server")]
    SystemErr,
    /// The arguments could not be encoded (a value over a declared maximum).
    #[error("cannot encode the arguments: {0}")]
    Encode(xdr::Error),
    /// The reply could not be decoded.
    #[error("cannot decode the reply: {0}")]
    Decode(xdr::Error),
    /// The transport failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The client's interceptor refused the call before it was sent
    /// ([`Client::with_interceptor`](crate::rpc::Client::with_interceptor)).
    #[error("the interceptor refused the call: {0}")]
    Refused(Box<dyn std::error::Error + Send + Sync>),
}

impl Error {
    /// What kind of failure it is, the same whichever transport the call went over.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::RpcMismatch { .. }
            | Error::Auth(_)
            | Error::ProgUnavail
            | Error::ProgMismatch { .. }
            | Error::ProcUnavail
            | Error::GarbageArgs => ErrorKind::Refused,
            Error::SystemErr => ErrorKind::ServerFailed,
            Error::Encode(_) => ErrorKind::Encode,
            Error::Refused(_) => ErrorKind::Intercepted,
            Error::Decode(_) => ErrorKind::Protocol,
            Error::Transport(t) => t.kind(),
        }
    }

    /// True for the failures that a server reported (as opposed to encode, decode or transport
    /// failures on this side).
    pub fn is_reply(&self) -> bool {
        matches!(
            self,
            Error::RpcMismatch { .. }
                | Error::Auth(_)
                | Error::ProgUnavail
                | Error::ProgMismatch { .. }
                | Error::ProcUnavail
                | Error::GarbageArgs
                | Error::SystemErr
        )
    }
}

impl From<ReplyError> for Error {
    fn from(e: ReplyError) -> Error {
        match e {
            ReplyError::RpcMismatch { low, high } => Error::RpcMismatch { low, high },
            ReplyError::AuthError(stat) => Error::Auth(stat),
            ReplyError::ProgUnavail => Error::ProgUnavail,
            ReplyError::ProgMismatch { low, high } => Error::ProgMismatch { low, high },
            ReplyError::ProcUnavail => Error::ProcUnavail,
            ReplyError::GarbageArgs => Error::GarbageArgs,
            ReplyError::SystemErr => Error::SystemErr,
        }
    }
}

/// What an RDMA_ERROR / RDMA2_ERROR reports (seed 004 section 5.5; seed 003 section 5.3.3).
/// Version 1 knows only [`RdmaError::Vers`] and [`RdmaError::BadXdr`] (its ERR_CHUNK); a
/// version 1 header reports every other one as ERR_CHUNK. (It lives here, with the transport
/// errors that carry it, so that `rpc` does not depend on the transport.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RdmaError {
    /// ERR_VERS / RDMA2_ERR_VERS: the versions the sender speaks.
    Vers {
        /// Lowest version supported.
        low: u32,
        /// Highest version supported.
        high: u32,
    },
    /// RDMA2_ERR_BAD_XDR, which has ERR_CHUNK's value: the header could not be parsed, or
    /// (version 1) its chunks could not be used.
    BadXdr,
    /// RDMA2_ERR_INVAL_HTYPE: a header type the sender does not know or support.
    InvalHtype,
    /// RDMA2_ERR_READ_CHUNKS: more Read chunks than the responder handles.
    ReadChunks {
        /// The most Read chunks it handles (0: none).
        max: u32,
    },
    /// RDMA2_ERR_WRITE_CHUNKS: more Write chunks than the responder handles.
    WriteChunks {
        /// The most Write chunks it handles.
        max: u32,
    },
    /// RDMA2_ERR_SEGMENTS: a chunk with more segments than the responder handles.
    Segments {
        /// The most segments it handles in one chunk.
        max: u32,
    },
    /// RDMA2_ERR_WRITE_RESOURCE: a Write chunk too small for its result.
    WriteResource {
        /// The chunk, counted from 1; 0 when the responder could not tell which.
        chunk_index: u32,
        /// The bytes that chunk needs.
        length_needed: u32,
    },
    /// RDMA2_ERR_REPLY_RESOURCE: the reply fits neither inline nor the Reply chunk.
    ReplyResource {
        /// The Reply chunk bytes needed.
        length_needed: u32,
    },
    /// RDMA2_ERR_SYSTEM: a permanent failure of another kind.
    System,
    /// A code this module does not know (an extension's, seed 003 section 9.3), with no body.
    Other(u32),
}

impl RdmaError {
    /// The error's code on the wire (ERR_VERS 1 and ERR_CHUNK 2 in version 1; seed 003
    /// section 6.4 for the rest).
    pub fn code(&self) -> u32 {
        match self {
            RdmaError::Vers { .. } => 1,
            RdmaError::BadXdr => 2,
            RdmaError::InvalHtype => 3,
            RdmaError::ReadChunks { .. } => 4,
            RdmaError::WriteChunks { .. } => 5,
            RdmaError::Segments { .. } => 6,
            RdmaError::WriteResource { .. } => 7,
            RdmaError::ReplyResource { .. } => 8,
            RdmaError::System => 9,
            RdmaError::Other(code) => *code,
        }
    }
}

impl std::fmt::Display for RdmaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RdmaError::Vers { low, high } => write!(f, "ERR_VERS (versions {low}..={high})"),
            RdmaError::BadXdr => f.write_str("BAD_XDR / ERR_CHUNK"),
            RdmaError::InvalHtype => f.write_str("INVAL_HTYPE"),
            RdmaError::ReadChunks { max } => write!(f, "READ_CHUNKS (at most {max})"),
            RdmaError::WriteChunks { max } => write!(f, "WRITE_CHUNKS (at most {max})"),
            RdmaError::Segments { max } => write!(f, "SEGMENTS (at most {max} per chunk)"),
            RdmaError::WriteResource {
                chunk_index,
                length_needed,
            } => write!(
                f,
                "WRITE_RESOURCE (Write chunk {chunk_index} needs {length_needed} bytes)"
            ),
            RdmaError::ReplyResource { length_needed } => {
                write!(
                    f,
                    "REPLY_RESOURCE (the Reply chunk needs {length_needed} bytes)"
                )
            }
            RdmaError::System => f.write_str("SYSTEM"),
            RdmaError::Other(code) => write!(f, "error code {code}"),
        }
    }
}

//! How a call ended ([`CallStatus`]), and counters of calls by status ([`CallStats`]).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::rpc::{Error, ReplyError, TransportError};

/// How one call ended, on either side: the reply status of RFC 5531 section 9, or, on a
/// client, the failure that left it without one. The value of a span's `status` field, the
/// `status` label of the `metrics` counters, and the index of [`CallStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum CallStatus {
    /// MSG_ACCEPTED / SUCCESS.
    Ok,
    /// MSG_DENIED / RPC_MISMATCH.
    RpcMismatch,
    /// MSG_DENIED / AUTH_ERROR.
    AuthError,
    /// MSG_ACCEPTED / PROG_UNAVAIL.
    ProgUnavail,
    /// MSG_ACCEPTED / PROG_MISMATCH.
    ProgMismatch,
    /// MSG_ACCEPTED / PROC_UNAVAIL.
    ProcUnavail,
    /// MSG_ACCEPTED / GARBAGE_ARGS.
    GarbageArgs,
    /// MSG_ACCEPTED / SYSTEM_ERR (a handler's panic, a middleware's timeout or shed load
    /// included).
    SystemErr,
    /// A client's call got no reply in time.
    TimedOut,
    /// A client's connection closed before the reply (after any retransmission).
    Closed,
    /// Any other failure of the transport (RDMA_ERROR, a protocol violation, i/o).
    TransportError,
    /// The arguments did not encode, or the reply did not decode (a client).
    Codec,
    /// A client's interceptor refused the call before it was sent.
    Refused,
    /// A server's transport answered RPC-over-RDMA's ERR_CHUNK instead of an RPC reply (the
    /// call's chunks disagreed with it, or the reply fit neither inline nor the chunks).
    ChunkError,
    /// A server dropped the message unanswered (not a call it could answer, or the server
    /// was shutting down).
    Dropped,
}

impl CallStatus {
    /// Every status, in the order of [`CallStats`]'s counters.
    pub const ALL: [CallStatus; 15] = [
        CallStatus::Ok,
        CallStatus::RpcMismatch,
        CallStatus::AuthError,
        CallStatus::ProgUnavail,
        CallStatus::ProgMismatch,
        CallStatus::ProcUnavail,
        CallStatus::GarbageArgs,
        CallStatus::SystemErr,
        CallStatus::TimedOut,
        CallStatus::Closed,
        CallStatus::TransportError,
        CallStatus::Codec,
        CallStatus::Refused,
        CallStatus::ChunkError,
        CallStatus::Dropped,
    ];

    /// The stable name used in spans, events and metric labels (`"ok"`, `"garbage_args"`,
    /// ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            CallStatus::Ok => "ok",
            CallStatus::RpcMismatch => "rpc_mismatch",
            CallStatus::AuthError => "auth_error",
            CallStatus::ProgUnavail => "prog_unavail",
            CallStatus::ProgMismatch => "prog_mismatch",
            CallStatus::ProcUnavail => "proc_unavail",
            CallStatus::GarbageArgs => "garbage_args",
            CallStatus::SystemErr => "system_err",
            CallStatus::TimedOut => "timed_out",
            CallStatus::Closed => "closed",
            CallStatus::TransportError => "transport_error",
            CallStatus::Codec => "codec",
            CallStatus::Refused => "refused",
            CallStatus::ChunkError => "chunk_error",
            CallStatus::Dropped => "dropped",
        }
    }

    /// The status a server's reply carries.
    pub fn of_reply<T>(result: &Result<T, ReplyError>) -> CallStatus {
        match result {
            Ok(_) => CallStatus::Ok,
            Err(e) => CallStatus::of_reply_error(e),
        }
    }

    /// The status of a non-SUCCESS reply.
    pub fn of_reply_error(error: &ReplyError) -> CallStatus {
        match error {
            ReplyError::RpcMismatch { .. } => CallStatus::RpcMismatch,
            ReplyError::AuthError(_) => CallStatus::AuthError,
            ReplyError::ProgUnavail => CallStatus::ProgUnavail,
            ReplyError::ProgMismatch { .. } => CallStatus::ProgMismatch,
            ReplyError::ProcUnavail => CallStatus::ProcUnavail,
            ReplyError::GarbageArgs => CallStatus::GarbageArgs,
            ReplyError::SystemErr => CallStatus::SystemErr,
        }
    }

    /// The status of a client's call that ended with `result`.
    pub fn of_call<T>(result: &Result<T, Error>) -> CallStatus {
        let Err(error) = result else {
            return CallStatus::Ok;
        };
        match error {
            Error::RpcMismatch { .. } => CallStatus::RpcMismatch,
            Error::Auth(_) => CallStatus::AuthError,
            Error::ProgUnavail => CallStatus::ProgUnavail,
            Error::ProgMismatch { .. } => CallStatus::ProgMismatch,
            Error::ProcUnavail => CallStatus::ProcUnavail,
            Error::GarbageArgs => CallStatus::GarbageArgs,
            Error::SystemErr => CallStatus::SystemErr,
            Error::Encode(_) | Error::Decode(_) => CallStatus::Codec,
            Error::Transport(TransportError::TimedOut(_)) => CallStatus::TimedOut,
            Error::Transport(TransportError::Closed) => CallStatus::Closed,
            Error::Refused(_) => CallStatus::Refused,
            _ => CallStatus::TransportError,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for CallStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// Calls counted by how they ended ([`CallStatus`]): a snapshot of a [`Client`]'s calls
/// ([`Client::call_stats`]) or of a [`Server`]'s ([`Server::stats`]), cumulative since it was
/// made, across every connection and transport.
///
/// [`Client`]: crate::rpc::Client
/// [`Client::call_stats`]: crate::rpc::Client::call_stats
/// [`Server`]: crate::rpc::Server
/// [`Server::stats`]: crate::rpc::Server::stats
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallStats {
    counts: [u64; CallStatus::ALL.len()],
}

impl CallStats {
    /// Calls that ended with `status`.
    pub fn count(&self, status: CallStatus) -> u64 {
        self.counts[status.index()]
    }

    /// Every call counted.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The statuses with at least one call, with their counts.
    pub fn iter(&self) -> impl Iterator<Item = (CallStatus, u64)> + '_ {
        CallStatus::ALL
            .iter()
            .map(|&s| (s, self.count(s)))
            .filter(|&(_, n)| n > 0)
    }
}

/// The live counters behind a [`CallStats`]: one relaxed increment per call.
#[derive(Debug, Default)]
pub(crate) struct CallCounters {
    counts: [AtomicU64; CallStatus::ALL.len()],
}

impl CallCounters {
    /// Counts one call that ended with `status`.
    #[inline]
    pub(crate) fn count(&self, status: CallStatus) {
        self.counts[status.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// The counts now.
    pub(crate) fn snapshot(&self) -> CallStats {
        CallStats {
            counts: std::array::from_fn(|i| self.counts[i].load(Ordering::Relaxed)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_has_its_own_counter_and_name() {
        let counters = CallCounters::default();
        for (i, status) in CallStatus::ALL.iter().enumerate() {
            assert_eq!(status.index(), i, "{status} is out of order in ALL");
            for _ in 0..=i {
                counters.count(*status);
            }
        }
        let stats = counters.snapshot();
        for (i, status) in CallStatus::ALL.iter().enumerate() {
            assert_eq!(stats.count(*status), i as u64 + 1);
        }
        let names: std::collections::BTreeSet<_> =
            CallStatus::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(names.len(), CallStatus::ALL.len(), "names are unique");
        assert_eq!(stats.total(), (1..=15).sum::<u64>());
    }

    #[test]
    fn a_client_error_maps_to_its_status() {
        let timed_out: Result<(), Error> = Err(TransportError::TimedOut(Default::default()).into());
        assert_eq!(CallStatus::of_call(&timed_out), CallStatus::TimedOut);
        let closed: Result<(), Error> = Err(TransportError::Closed.into());
        assert_eq!(CallStatus::of_call(&closed), CallStatus::Closed);
        assert_eq!(
            CallStatus::of_call(&Err::<(), _>(Error::ProcUnavail)),
            CallStatus::ProcUnavail
        );
        assert_eq!(CallStatus::of_call(&Ok::<(), Error>(())), CallStatus::Ok);
        assert_eq!(
            CallStatus::of_reply(&Err::<(), _>(ReplyError::GarbageArgs)),
            CallStatus::GarbageArgs
        );
    }
}

//! A transport's counters, cumulative across its connections ([`TransportStats`]), and the
//! atomics ONC RPC over TCP keeps them in.

use std::sync::atomic::{AtomicU64, Ordering};

/// What a transport did since it was made, summed over every connection it made or accepted,
/// closed ones included: from [`Client::transport_stats`](crate::rpc::Client::transport_stats)
/// (any transport that keeps counters, through
/// [`CallTransport::stats`](crate::rpc::CallTransport::stats)), [`TcpServer::stats`] and, over
/// RPC-over-RDMA, `RdmaListener::total_stats`.
///
/// Every field but the RPC-over-RDMA pool's gauges only grows.
///
/// [`TcpServer::stats`]: crate::rpc::tcp::TcpServer::stats
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransportStats {
    /// Connections made (a client: the first and every reconnection) or accepted (a server).
    pub connections: u64,
    /// Those of them that have closed, for whatever reason.
    pub connections_closed: u64,
    /// Calls sent (a client; a retransmission counts again) or received (a server).
    pub calls: u64,
    /// Replies received (a client) or sent (a server).
    pub replies: u64,
    /// Bytes of messages sent: TCP records (their record marks included), RPC-over-RDMA Sends
    /// (transport headers included; chunk data moved by RDMA is in `rdma`).
    pub bytes_sent: u64,
    /// Bytes of messages received, counted as `bytes_sent` is.
    pub bytes_received: u64,
    /// ONC RPC over TCP: calls in the backward direction (RFC 5661 section 2.10.3.1), sent
    /// by a server on its connections, received by a client (not in `calls`). 0 over
    /// RPC-over-RDMA, which counts them in `rdma`.
    pub backward_calls: u64,
    /// ONC RPC over TCP: records received and dropped unanswered: a REPLY no call waits for
    /// (late after a timeout, a duplicate, an unknown XID), and on a client a backward CALL
    /// beyond [`TcpConfig::max_backward_in_flight`](crate::rpc::tcp::TcpConfig) or one that
    /// does not decode. 0 over RPC-over-RDMA.
    pub dropped: u64,
    /// RPC-over-RDMA: the protocol engine's and the registered pool's counters, summed over
    /// every connection (the pool's `live` and `lent_bytes` are of the open ones).
    #[cfg(feature = "transport")]
    pub rdma: Option<RdmaStats>,
}

/// RPC-over-RDMA's own counters, summed over connections (see [`TransportStats::rdma`]).
#[cfg(feature = "transport")]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RdmaStats {
    /// How calls and replies moved: inline, Read, Write and Reply chunks, errors sent,
    /// invalidations.
    pub transport: crate::transport::core::Stats,
    /// Registrations, bytes copied into registered memory and bytes that moved without a copy.
    pub pool: crate::transport::pool::PoolStats,
}

/// The live counters of a TCP client or server: relaxed atomics, one or two increments per
/// message.
#[derive(Debug, Default)]
pub(crate) struct TcpCounters {
    connections: AtomicU64,
    connections_closed: AtomicU64,
    calls: AtomicU64,
    replies: AtomicU64,
    bytes_sent: AtomicU64,
    bytes_received: AtomicU64,
    backward_calls: AtomicU64,
    dropped: AtomicU64,
}

impl TcpCounters {
    /// A connection made or accepted.
    pub(crate) fn opened(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection closed.
    pub(crate) fn closed(&self) {
        self.connections_closed.fetch_add(1, Ordering::Relaxed);
    }

    /// A call of `len` bytes sent (a client) or received (a server, `sent` false).
    #[inline]
    pub(crate) fn call(&self, len: usize, sent: bool) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.bytes(len, sent);
    }

    /// A reply of `len` bytes received (a client) or sent (a server, `sent` true).
    #[inline]
    pub(crate) fn reply(&self, len: usize, sent: bool) {
        self.replies.fetch_add(1, Ordering::Relaxed);
        self.bytes(len, sent);
    }

    /// A backward-direction call of `len` bytes sent (a server) or received (a client).
    pub(crate) fn backward_call(&self, len: usize, sent: bool) {
        self.backward_calls.fetch_add(1, Ordering::Relaxed);
        self.bytes(len, sent);
    }

    /// The reply of `len` bytes to a backward-direction call, received (a server) or sent
    /// (a client, `sent` true): its bytes (not in `replies`, which are the forward
    /// direction's).
    pub(crate) fn backward_reply(&self, len: usize, sent: bool) {
        self.bytes(len, sent);
    }

    /// A record of `len` bytes received and dropped unanswered.
    pub(crate) fn dropped(&self, len: usize) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
        self.bytes(len, false);
    }

    #[inline]
    fn bytes(&self, len: usize, sent: bool) {
        let counter = if sent {
            &self.bytes_sent
        } else {
            &self.bytes_received
        };
        // The record mark's 4 bytes (one fragment, as this crate sends; a peer's other
        // fragments are not told apart here).
        counter.fetch_add(len as u64 + 4, Ordering::Relaxed);
    }

    /// The counts now.
    pub(crate) fn snapshot(&self) -> TransportStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        TransportStats {
            connections: get(&self.connections),
            connections_closed: get(&self.connections_closed),
            calls: get(&self.calls),
            replies: get(&self.replies),
            bytes_sent: get(&self.bytes_sent),
            bytes_received: get(&self.bytes_received),
            backward_calls: get(&self.backward_calls),
            dropped: get(&self.dropped),
            #[cfg(feature = "transport")]
            rdma: None,
        }
    }
}

//! Observability: what a call and a connection did, as `tracing` spans and events, as
//! counters, and (feature `metrics`) as metrics.
//!
//! # Spans: one per call
//!
//! Both ends open a span per call under the target [`CALLS`] (`rpcrdma::call`) at `DEBUG`,
//! and close it with a `DEBUG` event `call finished` inside it. Their fields:
//!
//! | field | `rpc.call` (client) | `rpc.serve` (server) |
//! |---|---|---|
//! | `xid` | the call's XID, once the transport gave it one | from the call |
//! | `program`, `version`, `procedure` | the call's | from the call |
//! | `transport` | `tcp`, `rdma` or `other` | same |
//! | `peer` | | the caller's address |
//! | `args` | how the arguments moved (below) | same |
//! | `result` | how the results moved (below) | same |
//! | `rdma_bytes` | bytes of the call and its reply moved by RDMA Read or Write (chunks) | same |
//! | `copied_bytes` | bytes copied into or out of Sends and receive buffers, or TCP records | same |
//! | `status` | how the call ended: [`CallStatus::as_str`] (`ok`, `garbage_args`, `timed_out`, ...) | same |
//! | `duration_us` | from the call to its decoded result | from the message taken to its reply handed to the connection |
//!
//! `args` is `inline`, `read_chunks` (DDP-eligible arguments in Read chunks the server pulled
//! by RDMA Read), `long_call` (the whole call in a Position-Zero Read chunk, RDMA_NOMSG) or
//! `record` (TCP). `result` is `inline`, `write_chunks` (DDP-eligible results written by RDMA
//! Write into the client's Write chunks), `reply_chunk` (the whole reply written into the
//! Reply chunk, RDMA_NOMSG), `write_and_reply_chunks`, or `record`. Every transport of this
//! crate fills them from what the RPC-over-RDMA engine did for that very call, not from
//! sizes. A call that failed before the transport gave it an XID has none.
//!
//! When no subscriber wants `rpcrdma::call` at `DEBUG`, a span is `Span::none()`, decided by a
//! level check and a cached interest: the transports then skip the clock reads and the
//! bookkeeping (measured: no change of the NULL round trip, see the crate's benchmarks).
//! Middleware (feature `tower`, module `rpc::layer`) runs inside the server's span.
//!
//! # Events: connections
//!
//! Under the target [`CONNECTIONS`] (`rpcrdma::conn`), each with a stable `event` field:
//!
//! | `event` | level | fields | when |
//! |---|---|---|---|
//! | `accept` | `DEBUG` | `peer`, `transport` | a server accepted a connection (RPC-over-RDMA: once the provider's handshake is done and receives are posted) |
//! | `connect` | `DEBUG` | `peer`, `transport` | a client made a connection (the first, or a reconnection) |
//! | `mpa_negotiated` | `DEBUG` | `peer`, `revision`, `markers_sent`, `markers_received`, `crc` | the soft iWARP provider's MPA startup ended (RFC 5044 section 7) |
//! | `private_data` | `DEBUG` | `peer`, `peer_receive_size`, `peer_send_size`, `peer_remote_invalidate`, `rfc8797` | RPC-over-RDMA read the peer's connection private data (RFC 8797; `rfc8797` false: the peer sent none, defaults apply) |
//! | `version_settled` | `DEBUG` | `peer`, `version` | a client's RPC-over-RDMA version negotiation ended (seed 003 section 7) |
//! | `credits_exhausted` | `DEBUG` | `peer`, `transport`, `credits` | a call had to wait for a credit (RPC-over-RDMA, seed 004 section 4.3) or a slot ([`TcpConfig::max_in_flight`](crate::rpc::tcp::TcpConfig::max_in_flight)); once per episode, until a call goes out at once again |
//! | `protocol_error` | `WARN` or `DEBUG` | `peer`, `transport`, `kind`, `detail` | `kind`: `rdma_error_sent`, `rdma_error_received` (RDMA_ERROR, seed 004 section 5.5), `terminate_sent`, `terminate_received` (RDMAP Terminate, RFC 5040 section 7), `fatal` (a violation that closes the connection), `record_marking` (TCP) |
//! | `close` | `DEBUG` (`WARN` for `protocol_violation`) | `peer`, `transport`, `reason` | a connection closed; `reason`: `peer_closed`, `protocol_violation`, `timeout`, `shutdown`, `local` (this side closed it), `error` (the device or socket failed) |
//!
//! # Counters
//!
//! * [`Client::call_stats`](crate::rpc::Client::call_stats): the client's calls by
//!   [`CallStatus`] ([`CallStats`]), every clone of the client and every transport it used.
//! * [`Client::transport_stats`](crate::rpc::Client::transport_stats): the transport's
//!   [`TransportStats`] (connections, calls, replies, bytes; RPC-over-RDMA's own counters in
//!   [`TransportStats::rdma`]), cumulative across reconnections, through
//!   [`CallTransport::stats`](crate::rpc::CallTransport::stats).
//! * [`Server::stats`](crate::rpc::Server::stats): the calls a server answered, by status,
//!   over every transport and connection serving it.
//! * [`TcpServer::stats`](crate::rpc::tcp::TcpServer::stats) and, over RPC-over-RDMA,
//!   `RdmaListener::total_stats`: a server's [`TransportStats`], cumulative across connections.
//!
//! # Metrics (feature `metrics`)
//!
//! With the feature, the same counters also go to the [`metrics`](https://docs.rs/metrics)
//! facade, so that whatever recorder the application installs (a Prometheus exporter) sees
//! them. Their names are in [`metric`]; their labels:
//!
//! * [`metric::CALLS_TOTAL`] (counter): `side` (`client`, `server`), `transport`, `program`,
//!   `version`, `procedure`, `status`;
//! * [`metric::CALL_DURATION`] (histogram, seconds): the same but `status`;
//! * [`metric::CONNECTIONS_TOTAL`] (counter): `side`, `transport`;
//! * [`metric::CONNECTIONS_CLOSED_TOTAL`] (counter): `side`, `transport`, `reason` (as the
//!   `close` event's);
//! * [`metric::BYTES_TOTAL`] (counter): `side`, `transport`, `direction` (`sent`, `received`);
//!   counted as [`TransportStats::bytes_sent`] is;
//! * [`metric::CREDITS_EXHAUSTED_TOTAL`] (counter): `transport`;
//! * [`metric::PROTOCOL_ERRORS_TOTAL`] (counter): `transport`, `kind` (as the
//!   `protocol_error` event's).
//!
//! Without the feature none of this is compiled in.

pub(crate) mod metrics;
mod span;
mod status;
mod transport_stats;

#[cfg(feature = "metrics")]
pub(crate) use span::transport_name;
pub(crate) use span::{
    calls_enabled, client_span, finish_client, record_call, record_reply, Moved, ServerCall,
};
pub(crate) use status::CallCounters;
pub use status::{CallStats, CallStatus};
#[cfg(feature = "transport")]
pub use transport_stats::RdmaStats;
pub(crate) use transport_stats::TcpCounters;
pub use transport_stats::TransportStats;

/// The target of the call spans (`rpc.call`, `rpc.serve`) and their `call finished` events.
pub const CALLS: &str = "rpcrdma::call";

/// The target of the connection events (`event` = `accept`, `close`, ...).
pub const CONNECTIONS: &str = "rpcrdma::conn";

/// True when a subscriber wants connection events at `DEBUG` (the transports then do the
/// bookkeeping some of them need).
#[inline]
#[cfg(feature = "transport")]
pub(crate) fn connection_events_enabled() -> bool {
    tracing::enabled!(target: CONNECTIONS, tracing::Level::DEBUG)
}

/// The names of the metrics of the `metrics` feature (see the [module](self)).
pub mod metric {
    /// Calls finished, by `side`, `transport`, `program`, `version`, `procedure`, `status`.
    pub const CALLS_TOTAL: &str = "rpcrdma_calls_total";
    /// Seconds from a call to its result (client) or from a call taken to its reply sent
    /// (server), by `side`, `transport`, `program`, `version`, `procedure`.
    pub const CALL_DURATION: &str = "rpcrdma_call_duration_seconds";
    /// Connections made or accepted, by `side`, `transport`.
    pub const CONNECTIONS_TOTAL: &str = "rpcrdma_connections_total";
    /// Connections closed, by `side`, `transport`, `reason`.
    pub const CONNECTIONS_CLOSED_TOTAL: &str = "rpcrdma_connections_closed_total";
    /// Bytes of messages, by `side`, `transport`, `direction`.
    pub const BYTES_TOTAL: &str = "rpcrdma_bytes_total";
    /// Episodes of calls waiting for a credit or slot, by `transport`.
    pub const CREDITS_EXHAUSTED_TOTAL: &str = "rpcrdma_credits_exhausted_total";
    /// Protocol errors sent or received, by `transport`, `kind`.
    pub const PROTOCOL_ERRORS_TOTAL: &str = "rpcrdma_protocol_errors_total";
}

/// Why a connection closed: the `reason` of the `close` event and metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CloseReason {
    /// The peer closed it (or its end of the stream).
    PeerClosed,
    /// The peer broke the protocol.
    ProtocolViolation,
    /// A deadline passed (the first record or message, RDMA Reads' progress).
    Timeout,
    /// The server shut down.
    Shutdown,
    /// This side closed it (a client dropped, an explicit disconnect).
    Local,
    /// The device or socket failed.
    Error,
    /// The RDMA device under the connection was removed.
    #[cfg_attr(not(feature = "transport"), allow(dead_code))]
    DeviceRemoved,
}

impl CloseReason {
    /// The `reason` value.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            CloseReason::PeerClosed => "peer_closed",
            CloseReason::ProtocolViolation => "protocol_violation",
            CloseReason::Timeout => "timeout",
            CloseReason::Shutdown => "shutdown",
            CloseReason::Local => "local",
            CloseReason::Error => "error",
            CloseReason::DeviceRemoved => "device_removed",
        }
    }
}

/// Emits the `close` event and counts the metric.
pub(crate) fn closed(
    side: metrics::Side,
    transport: &'static str,
    peer: std::net::SocketAddr,
    reason: CloseReason,
) {
    metrics::connection_closed(side, transport, reason.as_str());
    if matches!(
        reason,
        CloseReason::ProtocolViolation | CloseReason::DeviceRemoved
    ) {
        tracing::warn!(target: CONNECTIONS, event = "close", %peer, transport, reason = reason.as_str(), "connection closed");
    } else {
        tracing::debug!(target: CONNECTIONS, event = "close", %peer, transport, reason = reason.as_str(), "connection closed");
    }
}

/// Emits the `accept` (a server) or `connect` (a client) event and counts the metric.
pub(crate) fn opened(side: metrics::Side, transport: &'static str, peer: std::net::SocketAddr) {
    metrics::connection_opened(side, transport);
    match side {
        metrics::Side::Server => {
            tracing::debug!(target: CONNECTIONS, event = "accept", %peer, transport, "connection accepted")
        }
        metrics::Side::Client => {
            tracing::debug!(target: CONNECTIONS, event = "connect", %peer, transport, "connection made")
        }
    }
}

/// Emits the `protocol_error` event (at `WARN` when `loud`) and counts the metric.
pub(crate) fn protocol_error(
    transport: &'static str,
    peer: std::net::SocketAddr,
    kind: &'static str,
    detail: &dyn std::fmt::Display,
    loud: bool,
) {
    metrics::protocol_error(transport, kind);
    if loud {
        tracing::warn!(target: CONNECTIONS, event = "protocol_error", %peer, transport, kind, %detail, "protocol error");
    } else {
        tracing::debug!(target: CONNECTIONS, event = "protocol_error", %peer, transport, kind, %detail, "protocol error");
    }
}

/// Emits the `credits_exhausted` event and counts the metric.
pub(crate) fn credits_exhausted(transport: &'static str, peer: std::net::SocketAddr, credits: u64) {
    metrics::credits_exhausted(transport);
    tracing::debug!(target: CONNECTIONS, event = "credits_exhausted", %peer, transport, credits, "a call waits for a credit");
}

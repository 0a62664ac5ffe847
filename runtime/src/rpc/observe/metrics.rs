//! The `metrics` facade (feature `metrics`): the counters of the [module](super) as metrics, so
//! that a recorder (a Prometheus exporter, a test's debugging recorder) sees them. Without the
//! feature every function here is empty and inlined away.

#[cfg(feature = "metrics")]
use super::status::CallStatus;

/// Which end of a call or connection a metric is about: the `side` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// The client (caller).
    Client,
    /// The server (responder).
    Server,
}

impl Side {
    #[cfg(feature = "metrics")]
    const fn as_str(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Server => "server",
        }
    }
}

/// A finished call: `rpcrdma_calls_total` and `rpcrdma_call_duration_seconds`.
#[cfg(feature = "metrics")]
#[allow(clippy::too_many_arguments)]
pub(crate) fn call(
    side: Side,
    transport: &'static str,
    program: u32,
    version: u32,
    procedure: u32,
    status: CallStatus,
    seconds: f64,
) {
    let labels = [
        ("side", side.as_str().to_owned()),
        ("transport", transport.to_owned()),
        ("program", program.to_string()),
        ("version", version.to_string()),
        ("procedure", procedure.to_string()),
        ("status", status.as_str().to_owned()),
    ];
    metrics::counter!(super::metric::CALLS_TOTAL, &labels).increment(1);
    metrics::histogram!(super::metric::CALL_DURATION, &labels[..5]).record(seconds);
}

/// A connection made or accepted: `rpcrdma_connections_total`.
#[inline]
pub(crate) fn connection_opened(side: Side, transport: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(super::metric::CONNECTIONS_TOTAL, "side" => side.as_str(), "transport" => transport)
        .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (side, transport);
}

/// A connection closed for `reason`: `rpcrdma_connections_closed_total`.
#[inline]
pub(crate) fn connection_closed(side: Side, transport: &'static str, reason: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(
        super::metric::CONNECTIONS_CLOSED_TOTAL,
        "side" => side.as_str(),
        "transport" => transport,
        "reason" => reason
    )
    .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (side, transport, reason);
}

/// Bytes of messages sent or received: `rpcrdma_bytes_total`.
#[inline]
pub(crate) fn bytes(side: Side, transport: &'static str, sent: bool, bytes: u64) {
    #[cfg(feature = "metrics")]
    metrics::counter!(
        super::metric::BYTES_TOTAL,
        "side" => side.as_str(),
        "transport" => transport,
        "direction" => if sent { "sent" } else { "received" }
    )
    .increment(bytes);
    #[cfg(not(feature = "metrics"))]
    let _ = (side, transport, sent, bytes);
}

/// A caller started waiting for a credit (RPC-over-RDMA) or a slot (TCP):
/// `rpcrdma_credits_exhausted_total`, once per episode.
#[inline]
pub(crate) fn credits_exhausted(transport: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(super::metric::CREDITS_EXHAUSTED_TOTAL, "transport" => transport)
        .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = transport;
}

/// A protocol error sent or received: `rpcrdma_protocol_errors_total`.
#[inline]
pub(crate) fn protocol_error(transport: &'static str, kind: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(super::metric::PROTOCOL_ERRORS_TOTAL, "transport" => transport, "kind" => kind)
        .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (transport, kind);
}

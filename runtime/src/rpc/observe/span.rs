//! The span of one call, on the client ([`client_span`]) and on the server
//! ([`ServerCall`]), and what the transports record in it.
//!
//! Nothing here costs more than a level check per call unless a subscriber wants the
//! [`CALLS`](super::CALLS) target at `DEBUG`: the spans are then `Span::none()`, and the
//! transports skip the bookkeeping they do only for a span (a clock read, the counters'
//! deltas).

use std::net::SocketAddr;
use std::time::Instant;

use tracing::field::Empty;
use tracing::Span;

use super::status::CallStatus;
use super::CALLS;
use crate::rpc::TransportKind;

/// How a call's arguments or a reply's results moved: the value of a span's `args` and
/// `result` fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
// Only RPC-over-RDMA (feature `transport`) moves anything but records.
#[cfg_attr(not(feature = "transport"), allow(dead_code))]
pub(crate) enum Moved {
    /// In the Send (RPC-over-RDMA RDMA_MSG without chunk data).
    Inline,
    /// In the Send, DDP-eligible arguments in Read chunks the responder pulled.
    ReadChunks,
    /// A long call: the whole message in a Position-Zero Read chunk (RDMA_NOMSG).
    LongCall,
    /// In the Send, DDP-eligible results written into Write chunks.
    WriteChunks,
    /// A long reply: the whole message written into the Reply chunk (RDMA_NOMSG).
    ReplyChunk,
    /// Results in Write chunks and the rest in the Reply chunk.
    WriteAndReplyChunks,
    /// A record of ONC RPC over TCP (RFC 5531 section 11), or an in-process message.
    Record,
}

impl Moved {
    /// The field's value.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Moved::Inline => "inline",
            Moved::ReadChunks => "read_chunks",
            Moved::LongCall => "long_call",
            Moved::WriteChunks => "write_chunks",
            Moved::ReplyChunk => "reply_chunk",
            Moved::WriteAndReplyChunks => "write_and_reply_chunks",
            Moved::Record => "record",
        }
    }
}

/// The name of a transport kind in spans, events and metric labels.
pub(crate) const fn transport_name(kind: TransportKind) -> &'static str {
    match kind {
        TransportKind::Tcp => "tcp",
        TransportKind::Rdma => "rdma",
        TransportKind::Other => "other",
    }
}

/// True when a subscriber wants call spans: a level check and a cached interest when none
/// does. Transports ask it before recording into [`Span::current`].
#[inline]
pub(crate) fn calls_enabled() -> bool {
    tracing::enabled!(target: CALLS, tracing::Level::DEBUG)
}

/// A client call's span (`rpc.call`), `Span::none()` unless a subscriber wants it. The
/// transport fills `xid`, `args`, `result`, `rdma_bytes` and `copied_bytes` from inside it
/// ([`record_call`], [`record_reply`]); the client `status` and `duration_us`
/// ([`finish_client`]).
#[inline]
pub(crate) fn client_span(program: u32, version: u32, procedure: u32, kind: TransportKind) -> Span {
    tracing::debug_span!(
        target: CALLS,
        "rpc.call",
        program,
        version,
        procedure,
        transport = transport_name(kind),
        xid = Empty,
        args = Empty,
        result = Empty,
        rdma_bytes = Empty,
        copied_bytes = Empty,
        status = Empty,
        duration_us = Empty,
    )
}

/// Records, in the current call span, the XID and how the call went out. Only call it when
/// [`calls_enabled`].
pub(crate) fn record_call(xid: u32, args: Moved) {
    let span = Span::current();
    span.record("xid", xid);
    span.record("args", args.as_str());
}

/// Records, in the current call span, how the reply came back, and the bytes of the call and
/// its reply together: `rdma` moved by RDMA Read or Write (chunks), `copied` copied into or out
/// of Sends and receive buffers, or TCP records. Only call it when [`calls_enabled`].
pub(crate) fn record_reply(result: Moved, rdma: u64, copied: u64) {
    let span = Span::current();
    span.record("result", result.as_str());
    span.record("rdma_bytes", rdma);
    span.record("copied_bytes", copied);
}

/// Ends a client call's span: its `status` and `duration_us`, and a `DEBUG` event
/// `call finished` inside it.
pub(crate) fn finish_client(span: &Span, started: Instant, status: CallStatus) {
    let micros = started.elapsed().as_micros() as u64;
    span.record("status", status.as_str());
    span.record("duration_us", micros);
    let _in = span.enter();
    tracing::debug!(target: CALLS, status = status.as_str(), duration_us = micros, "call finished");
}

/// A served call's span (`rpc.serve`) and when it arrived, from the moment the transport
/// took the message until its reply went out. Made only when a subscriber wants it
/// ([`ServerCall::start`]); boxed, so that the `None` every call carries otherwise is a word.
pub(crate) struct ServerCall(Box<Observed>);

/// What [`ServerCall`] keeps.
struct Observed {
    span: Span,
    started: Instant,
    rdma_bytes: u64,
    copied_bytes: u64,
    /// Program, version, procedure (for the `metrics` labels).
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    routing: [u32; 3],
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    transport: &'static str,
}

impl ServerCall {
    /// The span of the call in `message` (its routing read from the RPC header's fixed words,
    /// RFC 5531 section 9: xid, msg_type, rpcvers, prog, vers, proc), or `None` when nobody
    /// wants it (with the `metrics` feature, always: its durations need the clock).
    #[inline]
    pub(crate) fn start(
        kind: TransportKind,
        peer: Option<SocketAddr>,
        message: &[u8],
    ) -> Option<ServerCall> {
        if !cfg!(feature = "metrics") && !calls_enabled() {
            return None;
        }
        Some(ServerCall::new(kind, peer, message))
    }

    #[cold]
    fn new(kind: TransportKind, peer: Option<SocketAddr>, message: &[u8]) -> ServerCall {
        let word = |i: usize| {
            message
                .get(i * 4..i * 4 + 4)
                .map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
        };
        let routing = [word(3), word(4), word(5)].map(|w| w.unwrap_or(0));
        let span = tracing::debug_span!(
            target: CALLS,
            "rpc.serve",
            xid = word(0),
            program = word(3),
            version = word(4),
            procedure = word(5),
            transport = transport_name(kind),
            peer = peer.map(tracing::field::display),
            args = Empty,
            result = Empty,
            rdma_bytes = Empty,
            copied_bytes = Empty,
            status = Empty,
            duration_us = Empty,
        );
        ServerCall(Box::new(Observed {
            span,
            started: Instant::now(),
            rdma_bytes: 0,
            copied_bytes: 0,
            routing,
            transport: transport_name(kind),
        }))
    }

    /// The span, to enter while the handler runs.
    pub(crate) fn span(&self) -> &Span {
        &self.0.span
    }

    /// How the call arrived.
    pub(crate) fn arrived(&mut self, args: Moved, rdma: u64, copied: u64) {
        let o = &mut self.0;
        o.span.record("args", args.as_str());
        o.rdma_bytes += rdma;
        o.copied_bytes += copied;
    }

    /// How the reply left.
    pub(crate) fn replied(&mut self, result: Moved, rdma: u64, copied: u64) {
        let o = &mut self.0;
        o.span.record("result", result.as_str());
        o.rdma_bytes += rdma;
        o.copied_bytes += copied;
    }

    /// Ends the span: the `status`, the time since the call was taken, the byte counts, and a
    /// `DEBUG` event `call finished` inside it.
    pub(crate) fn finish(self, status: CallStatus) {
        let o = *self.0;
        let elapsed = o.started.elapsed();
        #[cfg(feature = "metrics")]
        super::metrics::call(
            super::metrics::Side::Server,
            o.transport,
            o.routing[0],
            o.routing[1],
            o.routing[2],
            status,
            elapsed.as_secs_f64(),
        );
        if o.span.is_disabled() {
            return;
        }
        let micros = elapsed.as_micros() as u64;
        let span = &o.span;
        span.record("status", status.as_str());
        span.record("duration_us", micros);
        span.record("rdma_bytes", o.rdma_bytes);
        span.record("copied_bytes", o.copied_bytes);
        let _in = span.enter();
        tracing::debug!(target: CALLS, status = status.as_str(), duration_us = micros, "call finished");
    }
}

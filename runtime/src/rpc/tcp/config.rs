//! The settings of a TCP connection, client or server side.

use std::time::Duration;

use crate::rpc::record::MAX_FRAGMENT;
use crate::rpc::Server;

/// The default bound on a record: [`DEFAULT_MAX_MESSAGE`](crate::rpc::DEFAULT_MAX_MESSAGE),
/// the bound RPC-over-RDMA applies to the same messages. Memory follows the bytes a peer
/// actually sends, not the length it announces: a record is read into a buffer that grows
/// at most 256 KiB ahead of the data received.
pub const DEFAULT_MAX_RECORD: usize = crate::rpc::DEFAULT_MAX_MESSAGE;

/// The default number of calls in flight on one connection (client) or running for one
/// connection (server): 128, the credit limit Linux's RPC-over-RDMA client asks for, so a
/// program behaves the same on either transport.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 128;

/// The default call timeout: 25 seconds, what `rpcgen`'s client stubs pass to `clnt_call`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(25);

/// The default bound on the connections a server serves at once: 16,384, the 10,000
/// connections a server is meant to carry with room to spare. The same default bounds an
/// RPC-over-RDMA server (`RdmaConfig::max_connections`).
pub const DEFAULT_MAX_CONNECTIONS: usize = 16_384;

/// The default time a new connection has to deliver its first complete record: 30 seconds.
///
/// A client connects in order to call, and Linux's and our own clients send their first call
/// at once; but libtirpc's `clnt_create` connects when the client is made, and a program may
/// make its first call a little later. 30 seconds leaves such a program room, and a peer that
/// never speaks gives its place among [`DEFAULT_MAX_CONNECTIONS`] back within half a minute.
pub const DEFAULT_FIRST_RECORD_TIMEOUT: Duration = Duration::from_secs(30);

/// The default bound on backward-direction calls per connection (RFC 5661 section
/// 2.10.3.1): 16. A server sends at most this many calls to its client on one connection at
/// once; a client runs at most this many of its server's calls at once. NFSv4.1 servers
/// rarely have more than one callback outstanding per session (a back channel of a slot or
/// a few, section 2.10.6.1), so 16 leaves room without giving a peer much to flood.
pub const DEFAULT_MAX_BACKWARD_IN_FLIGHT: usize = 16;

/// Settings of ONC RPC over TCP with record marking (RFC 5531 section 11).
///
/// One type serves both ends; each field says which end reads it.
///
/// ```
/// use std::time::Duration;
/// use rpcrdma::rpc::tcp::TcpConfig;
///
/// let config = TcpConfig::new()
///     .max_record(1 << 20)
///     .max_in_flight(32)
///     .timeout(Some(Duration::from_secs(5)));
/// assert_eq!(config.max_record, 1 << 20);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TcpConfig {
    /// The largest record (one RPC message) received or sent, in bytes. A peer announcing a
    /// larger record loses its connection; a call or reply larger than this is not sent
    /// (the caller gets [`TransportError::TooLarge`](crate::rpc::TransportError::TooLarge),
    /// a handler's oversized result becomes SYSTEM_ERR). Both ends.
    pub max_record: usize,
    /// The largest fragment written, in bytes (at most 2^31 - 1, the default: one fragment per
    /// record). Both ends.
    pub max_fragment: usize,
    /// Client: calls in flight on the connection (more callers wait for a slot). Server: calls
    /// of one connection running at once (the server stops reading that connection until one
    /// has been answered).
    pub max_in_flight: usize,
    /// Client: how long a call may take, waiting for a slot, reconnecting and retransmitting
    /// included, unless [`CallOptions::timeout`](crate::rpc::CallOptions::timeout) says
    /// otherwise; `None` waits forever. A call that runs out of time fails with
    /// [`TransportError::TimedOut`](crate::rpc::TransportError::TimedOut) and its XID is
    /// forgotten (a reply arriving later is dropped). No timer per call: a task of the
    /// connection looks for calls past this deadline every eighth of it (between 10 ms and a
    /// second), so such a call fails at most that much later (and a kernel tick, a few ms); a
    /// call's own timeout is exact. Server: how long a backward-direction call
    /// ([`CallContext::backchannel`](crate::rpc::CallContext::backchannel)) may take, waiting
    /// for one of the [`max_backward_in_flight`](Self::max_backward_in_flight) places
    /// included, unless its own options say otherwise.
    pub timeout: Option<Duration>,
    /// Client: how many times a call whose connection was lost before its reply arrived is
    /// sent again, with the same XID, on a new connection (like the RPC-over-RDMA transport
    /// and Linux's client). 0 fails such a call with
    /// [`TransportError::Closed`](crate::rpc::TransportError::Closed). A call that never went
    /// out because the connection was already gone is always sent on a new one.
    pub retransmits: u32,
    /// Server: the most connections served at once. A connection beyond it is accepted and
    /// closed at once, unread, with a rate-limited `warn` line naming the peer and the limit
    /// (TCP offers no way to refuse a connection the kernel has already completed). Default
    /// [`DEFAULT_MAX_CONNECTIONS`]; values below 1 count as 1.
    pub max_connections: usize,
    /// Server: how long a new connection has to deliver its first complete record, counted
    /// from its acceptance, one deadline for the whole record (a peer trickling its record
    /// marker or its call a byte at a time gets no more time than a silent one). A connection
    /// that misses it is closed. After the first record there is no such deadline: a client
    /// may stay connected and idle. Default [`DEFAULT_FIRST_RECORD_TIMEOUT`]; `None` waits
    /// forever.
    pub first_record_timeout: Option<Duration>,
    /// Client: the server that answers the calls the peer sends on the connection (the
    /// backward direction: an NFSv4.1 session's callbacks travel on the forward channel's
    /// connection, RFC 5661 section 2.10.3.1). Its replies go back on that connection; the
    /// client's own calls go on concurrently. While one is set, a task of the connection
    /// reads it at all times (a call alone on the connection no longer reads its reply from
    /// its own task), so that a call arriving while the client waits for nothing is answered.
    /// Without one, such a call is answered PROG_UNAVAIL (RFC 5531 section 9: the program is
    /// not hosted here), which tells the peer at once that there is no callback service
    /// rather than leaving it to time out. `None` by default.
    pub backchannel: Option<Server>,
    /// Both ends: backward-direction calls per connection. Server: the calls its handlers
    /// send to the client on one connection at once (more wait for a place, within their
    /// [`timeout`](Self::timeout)); 0 offers no backchannel
    /// ([`CallContext::backchannel`](crate::rpc::CallContext::backchannel) is then `None`).
    /// Client: the peer's calls it runs at once (at least 1), a place held until the reply
    /// has been written; a call beyond them is dropped unanswered and counted
    /// ([`TransportStats::dropped`](crate::rpc::TransportStats::dropped)), as is one when the
    /// peer does not read the replies (it can only time out: the connection is not held up
    /// for it, so the client's own replies keep coming). Default
    /// [`DEFAULT_MAX_BACKWARD_IN_FLIGHT`].
    pub max_backward_in_flight: usize,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            max_record: DEFAULT_MAX_RECORD,
            max_fragment: MAX_FRAGMENT,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            timeout: Some(DEFAULT_TIMEOUT),
            retransmits: 1,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            first_record_timeout: Some(DEFAULT_FIRST_RECORD_TIMEOUT),
            backchannel: None,
            max_backward_in_flight: DEFAULT_MAX_BACKWARD_IN_FLIGHT,
        }
    }
}

impl TcpConfig {
    /// The defaults: [`DEFAULT_MAX_RECORD`], one fragment per record,
    /// [`DEFAULT_MAX_IN_FLIGHT`], [`DEFAULT_TIMEOUT`], one retransmission,
    /// [`DEFAULT_MAX_CONNECTIONS`], [`DEFAULT_FIRST_RECORD_TIMEOUT`], no backchannel server,
    /// [`DEFAULT_MAX_BACKWARD_IN_FLIGHT`].
    pub fn new() -> TcpConfig {
        TcpConfig::default()
    }

    /// Sets [`max_record`](Self::max_record).
    pub fn max_record(mut self, bytes: usize) -> TcpConfig {
        self.max_record = bytes;
        self
    }

    /// Sets [`max_fragment`](Self::max_fragment) (clamped to 1..=2^31 - 1 when used).
    pub fn max_fragment(mut self, bytes: usize) -> TcpConfig {
        self.max_fragment = bytes;
        self
    }

    /// Sets [`max_in_flight`](Self::max_in_flight) (at least 1 when used).
    pub fn max_in_flight(mut self, calls: usize) -> TcpConfig {
        self.max_in_flight = calls;
        self
    }

    /// Sets [`timeout`](Self::timeout).
    pub fn timeout(mut self, timeout: Option<Duration>) -> TcpConfig {
        self.timeout = timeout;
        self
    }

    /// Sets [`retransmits`](Self::retransmits).
    pub fn retransmits(mut self, times: u32) -> TcpConfig {
        self.retransmits = times;
        self
    }

    /// Sets [`max_connections`](Self::max_connections).
    pub fn max_connections(mut self, connections: usize) -> TcpConfig {
        self.max_connections = connections;
        self
    }

    /// Sets [`first_record_timeout`](Self::first_record_timeout).
    pub fn first_record_timeout(mut self, timeout: Option<Duration>) -> TcpConfig {
        self.first_record_timeout = timeout;
        self
    }

    /// Serves the calls the peer sends on the connection with `server` (a client; see
    /// [`backchannel`](Self::backchannel)).
    ///
    /// ```
    /// use rpcrdma::rpc::tcp::TcpConfig;
    /// use rpcrdma::rpc::Server;
    ///
    /// let callbacks = Server::builder().build();
    /// let config = TcpConfig::new().backchannel(callbacks);
    /// assert!(config.backchannel.is_some());
    /// ```
    pub fn backchannel(mut self, server: Server) -> TcpConfig {
        self.backchannel = Some(server);
        self
    }

    /// Sets [`max_backward_in_flight`](Self::max_backward_in_flight).
    pub fn max_backward_in_flight(mut self, calls: usize) -> TcpConfig {
        self.max_backward_in_flight = calls;
        self
    }

    /// `max_in_flight` as a count of slots: at least 1, at most what one `acquire_many` takes
    /// (the server's semaphore; the client bounds its map of waiting calls with it).
    pub(super) fn slots(&self) -> u32 {
        self.max_in_flight.clamp(1, u32::MAX as usize >> 3) as u32
    }
}

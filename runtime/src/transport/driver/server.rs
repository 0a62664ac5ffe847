//! The responder side: accepting connections and serving an [`rpc::Server`](crate::rpc::Server) on them.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use super::config::RdmaConfig;
use super::conn::{core_config, post_receives, Conn};
use super::totals::Totals;
use crate::admission::Refusals;
use crate::rdma::{self, ConnectRequest, Listener, MemoryRegion, Provider};
use crate::rpc::observe::CloseReason;
use crate::rpc::{Server, TransportStats};
use crate::transport::budget::MemoryBudget;
use crate::transport::core::{Role, Stats};
use crate::transport::pool::PoolStats;

/// The connections a listener accepted, for their counters.
type Accepted<C> = Arc<Mutex<Vec<Weak<Conn<C>>>>>;

/// The log line of a request rejected at the limit.
static AT_LIMIT: Refusals = Refusals::new(
    "rejecting a connection: the server is at its connection limit",
    "RdmaConfig::max_connections",
);

/// How long a rejection may take to go out. A provider's reject writes one small frame (an MPA
/// Reply, an rdma_cm REJ) and does not wait for the peer; the bound only keeps a task from
/// lingering if one ever did.
const REJECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A listening RPC-over-RDMA server; see [`serve`].
///
/// [`run`](Self::run) accepts connections until [`shutdown`](Self::shutdown), which stops
/// accepting, lets every connection answer the calls its handlers are running, and closes
/// them.
pub struct RdmaListener<P: Provider> {
    /// Taken at shutdown; [`RdmaListener::run`] holds its own handle until it returns.
    listener: Mutex<Option<Arc<P::Listener>>>,
    server: Server,
    config: RdmaConfig,
    connections: Accepted<P::Conn>,
    /// Raised at shutdown; read under the `connections` lock by every connection accepted,
    /// so each is either listed before shutdown looks or sees the flag and closes.
    stopping: Arc<watch::Sender<bool>>,
    /// What all connections' pools lend is charged to (each connection's own budget is a
    /// child of it).
    memory: MemoryBudget,
    /// Places for connections: [`RdmaConfig::max_connections`], one held by each connection
    /// from its request until it closes.
    places: Arc<Semaphore>,
    /// The counters of every connection accepted, closed ones included.
    totals: Arc<Totals>,
}

/// Serves `server` on every connection `listener` accepts: each connection posts receives for
/// the credits it grants before it accepts, agrees on inline sizes and remote invalidation
/// with the peer's private data (RFC 8797), and runs until the peer goes away. Errors on one
/// connection never touch the others.
///
/// Every request is accepted in a task of its own, so a peer slow to complete its part of the
/// handshake delays nobody else (the provider bounds that part: the soft provider's listener
/// reads each MPA Request under its own deadline, the verbs provider waits for establishment
/// under its own). At most [`RdmaConfig::max_connections`] connections are served at once,
/// those being accepted included: a request beyond that is rejected at once.
pub fn serve<P: Provider>(
    listener: P::Listener,
    server: Server,
    config: RdmaConfig,
) -> RdmaListener<P> {
    let places = max_connections(&config);
    RdmaListener {
        listener: Mutex::new(Some(Arc::new(listener))),
        server,
        connections: Arc::default(),
        stopping: Arc::new(watch::Sender::new(false)),
        memory: MemoryBudget::new(config.memory.per_server),
        config,
        places: Arc::new(Semaphore::new(places)),
        totals: Arc::default(),
    }
}

impl<P: Provider> RdmaListener<P> {
    /// The address it listens on ([`rdma::Error::Closed`] after [`RdmaListener::shutdown`]).
    pub fn local_addr(&self) -> rdma::Result<SocketAddr> {
        self.listener().ok_or(rdma::Error::Closed)?.local_addr()
    }

    fn listener(&self) -> Option<Arc<P::Listener>> {
        self.listener
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Accepts connections until the listener fails (its error) or shuts down (`Ok`).
    pub async fn run(&self) -> rdma::Result<()> {
        let Some(listener) = self.listener() else {
            return Ok(());
        };
        let mut stop = self.stopping.subscribe();
        loop {
            let request = tokio::select! {
                request = listener.next_request() => request?,
                _ = stop.wait_for(|stopping| *stopping) => return Ok(()),
            };
            let Ok(place) = self.places.clone().try_acquire_owned() else {
                self.reject_at_limit(request);
                continue;
            };
            let server = self.server.clone();
            let config = self.config.clone();
            let connections = self.connections.clone();
            let stopping = self.stopping.clone();
            let budget = self.memory.child(config.memory.per_connection);
            let totals = self.totals.clone();
            tokio::spawn(async move {
                let peer = request.peer_addr();
                match accept::<P>(request, server, &config, budget, totals).await {
                    Ok(conn) => {
                        // Listed before it starts, so its counters show every call it serves.
                        {
                            let mut list = connections.lock().unwrap_or_else(|e| e.into_inner());
                            if *stopping.borrow() {
                                drop(list);
                                return conn.close(CloseReason::Shutdown);
                            }
                            if list.len() == list.capacity() {
                                // Closed ones go when the list is full, and it keeps room for
                                // as many again: an accept costs O(1), not a scan of every
                                // connection.
                                list.retain(|c| c.strong_count() > 0);
                                let live = list.len();
                                list.reserve(live.max(16));
                            }
                            list.push(Arc::downgrade(&conn));
                        }
                        conn.start();
                        hold_until_closed(conn, place).await;
                    }
                    Err(e) => tracing::warn!(%peer, error = %e, "accepting a connection failed"),
                }
            });
        }
    }

    /// Rejects `request`, which came when every place was taken, in a task of its own.
    fn reject_at_limit(&self, request: <P::Listener as Listener>::Request) {
        let peer = request.peer_addr();
        AT_LIMIT.refused(peer, max_connections(&self.config));
        tokio::spawn(async move {
            match tokio::time::timeout(REJECT_TIMEOUT, request.reject(&[])).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "rejecting a connection failed"),
                Err(_) => tracing::debug!(%peer, "rejecting a connection timed out"),
            }
        });
    }

    /// Connections served now, those being accepted included (at most
    /// [`RdmaConfig::max_connections`]).
    pub fn connection_count(&self) -> usize {
        max_connections(&self.config) - self.places.available_permits()
    }

    /// Shuts the server down gracefully: stops accepting at once (the listening endpoint
    /// closes when [`RdmaListener::run`] returns), and on every connection stops taking calls
    /// and closes once the calls its handlers were given have been answered and their replies
    /// sent. A call that had not reached its handler is dropped unanswered; its caller sees
    /// the connection close and may retransmit elsewhere, as after a server restart.
    ///
    /// The returned future completes when every connection has closed. A handler that never
    /// finishes, or a peer that never lets a reply complete, holds it up: bound the wait with
    /// a timeout if that matters (dropping the future leaves the connections to finish in the
    /// background).
    pub fn shutdown(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let draining: Vec<Arc<Conn<P::Conn>>> = {
            let list = self.connections.lock().unwrap_or_else(|e| e.into_inner());
            self.stopping.send_replace(true);
            list.iter().filter_map(Weak::upgrade).collect()
        };
        self.listener
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        for conn in &draining {
            conn.shut_down();
        }
        async move {
            for conn in draining {
                conn.closed().await;
            }
        }
    }

    /// The counters of every connection accepted, closed ones included: connections, calls
    /// received, replies sent, bytes of Sends, and the engine's and pool's counters summed.
    pub fn total_stats(&self) -> TransportStats {
        // Every connection still referenced, closed ones included: one closing now may not
        // have added its counters to the totals yet (each says whether it has).
        let listed: Vec<Arc<Conn<P::Conn>>> = self
            .connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        self.totals.snapshot(listed.iter().map(|c| c.snapshot()))
    }

    /// Counters of the connections alive now: transport and pool, one entry per connection
    /// (see [`total_stats`](Self::total_stats) for the sum over every connection).
    pub fn stats(&self) -> Vec<(Stats, PoolStats)> {
        self.live()
            .iter()
            .map(|c| (c.stats(), c.pool_stats()))
            .collect()
    }

    /// The provider connections underneath the connections alive now (for diagnostics and
    /// tests), in the order of [`RdmaListener::stats`].
    pub fn connections(&self) -> Vec<Arc<P::Conn>> {
        self.live().iter().map(|c| c.connection().clone()).collect()
    }

    /// The server's memory budget: what all its connections have lent now, and the limit.
    pub fn memory(&self) -> &MemoryBudget {
        &self.memory
    }

    /// The connections alive now: accepted, still referenced and not closed.
    fn live(&self) -> Vec<Arc<Conn<P::Conn>>> {
        self.connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|c| !c.is_closed())
            .collect()
    }
}

/// [`RdmaConfig::max_connections`] as a count of places.
fn max_connections(config: &RdmaConfig) -> usize {
    config.max_connections.clamp(1, Semaphore::MAX_PERMITS)
}

/// Keeps a connection's place among [`RdmaConfig::max_connections`] until it closes.
async fn hold_until_closed<C: rdma::Connection>(conn: Arc<Conn<C>>, place: OwnedSemaphorePermit) {
    conn.closed().await;
    drop(place);
}

/// Accepts one connection request; the connection returned is not started yet.
async fn accept<P: Provider>(
    request: <P::Listener as Listener>::Request,
    server: Server,
    config: &RdmaConfig,
    budget: MemoryBudget,
    totals: Arc<Totals>,
) -> rdma::Result<Arc<Conn<P::Conn>>> {
    let peer = config.peer(request.private_data());
    super::config::tell_private_data(request.peer_addr(), request.private_data(), &peer);
    let mut recv: Option<MemoryRegion> = None;
    let conn = request
        .accept_with(config.connect_params(), |c| {
            recv = Some(post_receives(c, config.receives(), config.inline_size)?);
            Ok(())
        })
        .await?;
    let recv = recv.ok_or(rdma::Error::Closed)?;
    let mut core = core_config(Role::Server, config, &peer);
    // Version 2 asks for Send With Invalidate per call (rdma_inv_handle), not in the private
    // data: not from a device that cannot take it.
    core.remote_invalidate &= rdma::Connection::takes_remote_invalidation(&conn);
    Ok(Conn::new(
        conn,
        recv,
        core,
        config,
        Some(server),
        budget,
        Some(totals),
    ))
}

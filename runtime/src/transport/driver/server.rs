//! The responder side: accepting connections and serving an [`rpc::Server`](crate::rpc::Server) on them.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use super::config::RdmaConfig;
use super::conn::{core_config, post_receives, Conn};
use super::shared_credits::{SharedCredits, SharedGrant};
use super::totals::Totals;
use crate::admission::Refusals;
use crate::rdma::{self, ConnectRequest, Listener, MemoryRegion, Provider, SharedReceiveQueue};
use crate::rpc::deadlines::Ticker;
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

/// The log line of a request rejected because the shared receive queue has no buffer left
/// for its first credit.
static NO_SHARED_BUFFER: Refusals = Refusals::new(
    "rejecting a connection: the shared receive queue has no buffer left for its first credit",
    "SharedReceiveParams::buffers",
);

/// A shared receive queue every connection takes its receives from, and the credits granted
/// from it.
struct SharedReceives<Q> {
    queue: Arc<Q>,
    credits: Arc<SharedCredits>,
}

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
    /// The shared receive queue connections take their receives from, if any
    /// ([`RdmaListener::with_shared_receive_queue`]).
    shared: Option<SharedReceives<P::SharedQueue>>,
    /// The idle sweep's timer, made with the listener when a runtime is current (so that
    /// the listener holds its descriptors from the start), else when it runs.
    sweep: Mutex<Option<Ticker>>,
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
        places: Arc::new(Semaphore::new(places)),
        totals: Arc::default(),
        shared: None,
        sweep: Mutex::new(
            tokio::runtime::Handle::try_current()
                .ok()
                .and_then(|_| sweep_timer(&config)),
        ),
        config,
    }
}

/// The timer of [`RdmaConfig::release_idle_after`], if set. A kernel timer, not a tokio one:
/// while any tokio timer is set, each worker reads the clock before it sleeps, on top of the
/// read after (a system call per read where the vDSO cannot read the clock source).
fn sweep_timer(config: &RdmaConfig) -> Option<Ticker> {
    let every = config
        .release_idle_after?
        .max(std::time::Duration::from_millis(1));
    Ticker::new(every)
        .map_err(|error| tracing::error!(%error, "no timer: idle connections keep their buffers"))
        .ok()
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

    /// Serves every connection from `queue` (made by the provider's
    /// [`shared_receive_queue`](Provider::shared_receive_queue)) instead of receives posted
    /// per connection: an idle connection then holds no receive buffer. Each connection is
    /// granted credits from what the queue holds, never more in all than its buffers can take
    /// (seed 004 section 4.3 lets a responder adjust its grant to a shared receive queue): it
    /// starts with two, and gets more, doubling up to [`RdmaConfig::credits`], while it uses
    /// every one and more than an eighth of the queue is free. Grants never shrink. A request
    /// that finds no buffer left for its first credit is rejected at once, with a log line.
    ///
    /// The queue's buffers must hold [`RdmaConfig::inline_size`] bytes, the receive size this
    /// side advertises; a smaller one is refused with
    /// [`rdma::Error::InvalidWorkRequest`]. Size the queue at two buffers per connection (plus
    /// its backward credits) and room for the calls in flight to grow into.
    pub fn with_shared_receive_queue(mut self, queue: P::SharedQueue) -> rdma::Result<Self> {
        let params = queue.params();
        if params.buffer_size < self.config.inline_size {
            return Err(rdma::Error::InvalidWorkRequest(format!(
                "the shared receive queue's buffers hold {} bytes, less than the inline size of \
                 {} this side advertises",
                params.buffer_size, self.config.inline_size
            )));
        }
        self.shared = Some(SharedReceives {
            queue: Arc::new(queue),
            credits: SharedCredits::new(params.buffers),
        });
        Ok(self)
    }

    /// The shared receive queue's buffers not reserved by any connection's grant (`None`
    /// without a queue).
    pub fn shared_receive_free(&self) -> Option<usize> {
        self.shared.as_ref().map(|s| s.credits.free())
    }

    /// Accepts connections until the listener fails (its error) or shuts down (`Ok`).
    pub async fn run(&self) -> rdma::Result<()> {
        let Some(listener) = self.listener() else {
            return Ok(());
        };
        let mut stop = self.stopping.subscribe();
        // One timer for the listener, not one per connection ([`release_idle`]), run here
        // rather than in a task of its own.
        let made = self.sweep.lock().unwrap_or_else(|e| e.into_inner()).take();
        let mut sweep = made.or_else(|| sweep_timer(&self.config));
        // Kept across the sweeps: a request being read is never dropped half way (the verbs
        // listener may be listening again after its device's removal).
        let mut next = std::pin::pin!(listener.next_request());
        loop {
            let swept = async {
                match sweep.as_mut() {
                    Some(tick) => tick.tick().await,
                    None => std::future::pending().await,
                }
            };
            let request = tokio::select! {
                request = &mut next => {
                    next.set(listener.next_request());
                    request?
                }
                _ = stop.wait_for(|stopping| *stopping) => return Ok(()),
                swept = swept => {
                    match swept {
                        Ok(()) => release_idle(&self.connections),
                        Err(error) => {
                            tracing::error!(%error, "the timer failed: idle connections keep their buffers");
                            sweep = None;
                        }
                    }
                    continue;
                }
            };
            let Ok(place) = self.places.clone().try_acquire_owned() else {
                self.reject_at_limit(request);
                continue;
            };
            let shared = match &self.shared {
                Some(shared) => match first_grant(&shared.credits, &self.config) {
                    Some(grant) => Some((shared.queue.clone(), grant)),
                    None => {
                        NO_SHARED_BUFFER.refused(request.peer_addr(), connection_count(self));
                        reject(request);
                        continue;
                    }
                },
                None => None,
            };
            let server = self.server.clone();
            let config = self.config.clone();
            let connections = self.connections.clone();
            let stopping = self.stopping.clone();
            let budget = self.memory.child(config.memory.per_connection);
            let totals = self.totals.clone();
            tokio::spawn(async move {
                let peer = request.peer_addr();
                match accept::<P>(request, server, &config, budget, totals, shared).await {
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
        AT_LIMIT.refused(request.peer_addr(), max_connections(&self.config));
        reject(request);
    }

    /// Connections served now, those being accepted included (at most
    /// [`RdmaConfig::max_connections`]).
    pub fn connection_count(&self) -> usize {
        connection_count(self)
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

/// Each connection that sent and received nothing since the last round gives back its
/// reusable registered buffers ([`Conn::release_if_idle`]).
fn release_idle<C: rdma::Connection>(connections: &Accepted<C>) {
    let live: Vec<Arc<Conn<C>>> = connections
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    let released: usize = live
        .iter()
        .filter(|c| !c.is_closed())
        .map(|c| c.release_if_idle())
        .sum();
    if released > 0 {
        tracing::debug!(
            target: crate::rpc::observe::CONNECTIONS,
            event = "idle_released",
            bytes = released,
            "idle connections gave back their reusable registered buffers"
        );
    }
}

/// Connections served now, those being accepted included.
fn connection_count<P: Provider>(listener: &RdmaListener<P>) -> usize {
    max_connections(&listener.config) - listener.places.available_permits()
}

/// Rejects `request` in a task of its own.
fn reject<R: ConnectRequest>(request: R) {
    let peer = request.peer_addr();
    tokio::spawn(async move {
        match tokio::time::timeout(REJECT_TIMEOUT, request.reject(&[])).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!(%peer, error = %e, "rejecting a connection failed"),
            Err(_) => tracing::debug!(%peer, "rejecting a connection timed out"),
        }
    });
}

/// The first grant of a connection on a shared receive queue, if the queue has room for one
/// credit.
fn first_grant(credits: &Arc<SharedCredits>, config: &RdmaConfig) -> Option<SharedGrant> {
    let forward = config.credits.max(1) as usize;
    // In the Read-Read model each credit also covers its RDMA_DONE (seed 000 section 3.8).
    let per_credit = match &config.mode_2004 {
        Some(m) if m.read_read => 2,
        _ => 1,
    };
    let extra = config.receives() - per_credit * forward;
    SharedGrant::first(credits, config.credits, extra, per_credit)
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
    shared: Option<(Arc<P::SharedQueue>, SharedGrant)>,
) -> rdma::Result<Arc<Conn<P::Conn>>> {
    let peer = config.peer(request.private_data());
    super::config::tell_private_data(request.peer_addr(), request.private_data(), &peer);
    let mut core = core_config(Role::Server, config, &peer);
    let mut recv: Option<MemoryRegion> = None;
    let (conn, grant) = match shared {
        Some((queue, grant)) => {
            let params = config
                .connect_params()
                .queue_depths(config.send_queue_depth.max(1), grant.receives() as u32);
            core.credits = grant.credits();
            let conn = request
                .accept_shared_with(params, &*queue, |_| Ok(()))
                .await?;
            (conn, Some(grant))
        }
        None => {
            let conn = request
                .accept_with(config.connect_params(), |c| {
                    recv = Some(post_receives(c, config.receives(), config.inline_size)?);
                    Ok(())
                })
                .await?;
            if recv.is_none() {
                return Err(rdma::Error::Closed);
            }
            (conn, None)
        }
    };
    // Version 2 asks for Send With Invalidate per call (rdma_inv_handle), not in the private
    // data: not from a device that cannot take it.
    core.remote_invalidate &= rdma::Connection::takes_remote_invalidation(&conn);
    Ok(Conn::new(
        conn,
        recv,
        grant,
        core,
        config,
        Some(server),
        budget,
        Some(totals),
    ))
}

//! The responder side: accepting connections and serving an [`rpc::Server`](crate::rpc::Server) on them.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};

use super::config::RdmaConfig;
use super::conn::{core_config, post_receives, Conn};
use crate::rdma::{self, ConnectRequest, Listener, MemoryRegion, Provider};
use crate::rpc::Server;
use crate::transport::core::{Role, Stats};
use crate::transport::pool::PoolStats;

/// The connections a listener accepted, for their counters.
type Accepted<C> = Arc<Mutex<Vec<Weak<Conn<C>>>>>;

/// A listening RPC-over-RDMA server; see [`serve`].
pub struct RdmaListener<P: Provider> {
    listener: P::Listener,
    server: Server,
    config: RdmaConfig,
    connections: Accepted<P::Conn>,
}

/// Serves `server` on every connection `listener` accepts: each connection posts receives for
/// the credits it grants before it accepts, agrees on inline sizes and remote invalidation
/// with the peer's private data (RFC 8797), and runs until the peer goes away. Errors on one
/// connection never touch the others.
pub fn serve<P: Provider>(
    listener: P::Listener,
    server: Server,
    config: RdmaConfig,
) -> RdmaListener<P> {
    RdmaListener {
        listener,
        server,
        config,
        connections: Arc::default(),
    }
}

impl<P: Provider> RdmaListener<P> {
    /// The address it listens on.
    pub fn local_addr(&self) -> rdma::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accepts connections until the listener fails.
    pub async fn run(&self) -> rdma::Result<()> {
        loop {
            let request = self.listener.next_request().await?;
            let server = self.server.clone();
            let config = self.config.clone();
            let connections = self.connections.clone();
            tokio::spawn(async move {
                let peer = request.peer_addr();
                match accept::<P>(request, server, &config).await {
                    Ok(conn) => {
                        // Listed before it starts, so its counters show every call it serves.
                        {
                            let mut list = connections.lock().unwrap_or_else(|e| e.into_inner());
                            list.retain(|c| c.strong_count() > 0);
                            list.push(Arc::downgrade(&conn));
                        }
                        conn.start();
                    }
                    Err(e) => tracing::warn!(%peer, error = %e, "accepting a connection failed"),
                }
            });
        }
    }

    /// Counters of the connections alive now: transport and pool, one entry per connection.
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

/// Accepts one connection request; the connection returned is not started yet.
async fn accept<P: Provider>(
    request: <P::Listener as Listener>::Request,
    server: Server,
    config: &RdmaConfig,
) -> rdma::Result<Arc<Conn<P::Conn>>> {
    let peer = config.peer(request.private_data());
    let mut recv: Option<MemoryRegion> = None;
    let conn = request
        .accept_with(config.connect_params(), |c| {
            recv = Some(post_receives(c, config.receives(), config.inline_size)?);
            Ok(())
        })
        .await?;
    let recv = recv.ok_or(rdma::Error::Closed)?;
    let core = core_config(Role::Server, config, &peer);
    Ok(Conn::new(conn, recv, core, config, Some(server)))
}

//! The requester side as an [`rpc::CallTransport`]: a client's forward calls
//! ([`RdmaTransport`]) and a server's backward calls ([`Backchannel`]).

use std::net::SocketAddr;
use std::sync::{Arc, Weak};

use super::config::RdmaConfig;
use super::conn::{core_config, post_receives, Conn};
use super::totals::Totals;
use crate::rdma::{Connection, MemoryRegion, Provider};
use crate::rpc::observe::CloseReason;
use crate::rpc::{
    self, BoxFuture, BufferSource, Call, CallTransport, HeapBuffers, Reply, TransportError,
    TransportKind, TransportStats,
};
use crate::transport::budget::MemoryBudget;
use crate::transport::core::{Role, Stats};
use crate::transport::pool::PoolStats;

/// An RPC-over-RDMA version 1 client connection: give it to [`rpc::Client::new`] (or use
/// [`connect`](super::connect)). Calls that find their connection gone are retransmitted once,
/// with the same XID, on a new connection.
pub struct RdmaTransport<P: Provider> {
    provider: Arc<P>,
    addr: SocketAddr,
    config: RdmaConfig,
    current: tokio::sync::Mutex<Arc<Conn<P::Conn>>>,
    /// The current connection, for synchronous readers (stats, buffers).
    latest: parking_lot::Mutex<Arc<Conn<P::Conn>>>,
    /// The counters of every connection made, closed ones included.
    totals: Arc<Totals>,
}

impl<P: Provider> RdmaTransport<P> {
    /// Connects to the RPC-over-RDMA server at `addr`.
    pub async fn connect(
        provider: Arc<P>,
        addr: SocketAddr,
        config: RdmaConfig,
    ) -> Result<RdmaTransport<P>, rpc::Error> {
        let totals = Arc::new(Totals::default());
        let conn = open(&*provider, addr, &config, &totals).await?;
        Ok(RdmaTransport {
            provider,
            addr,
            config,
            current: tokio::sync::Mutex::new(conn.clone()),
            latest: parking_lot::Mutex::new(conn),
            totals,
        })
    }

    fn latest(&self) -> Arc<Conn<P::Conn>> {
        self.latest.lock().clone()
    }

    /// The current connection's transport counters (how calls and replies moved); see
    /// [`total_stats`](Self::total_stats) for every connection's.
    pub fn stats(&self) -> Stats {
        self.latest().stats()
    }

    /// The counters of every connection this transport made (the first and each
    /// reconnection), closed ones included: connections, calls, replies, bytes of Sends, and
    /// the engine's and pool's counters summed (also what
    /// [`Client::transport_stats`](rpc::Client::transport_stats) returns).
    pub fn total_stats(&self) -> TransportStats {
        let latest = self.latest();
        self.totals.snapshot([latest.snapshot()])
    }

    /// The RPC-over-RDMA version the connection's calls go in: 2 once a version 2 offer
    /// ([`RdmaConfig::version_2`]) was accepted, 1 otherwise.
    pub fn version(&self) -> u32 {
        self.latest().version()
    }

    /// The transport properties the server advertised in RDMA2_CONNPROP (version 2), as
    /// sent: an extension's property among them says the server knows the extension.
    pub fn peer_properties(&self) -> Vec<crate::transport::header::Property> {
        self.latest().peer_properties()
    }

    /// Sends a message of a version 2 extension's header type (seed 003 section 9.1) and
    /// returns the body of the server's answer. A server that does not know the extension
    /// answers RDMA2_ERR_INVAL_HTYPE ([`TransportError::RdmaRefused`]) and the connection
    /// carries on.
    pub async fn extension_call(
        &self,
        htype: u32,
        flags: u32,
        body: bytes::Bytes,
    ) -> Result<bytes::Bytes, TransportError> {
        self.latest().extension_call(htype, flags, body).await
    }

    /// The connection's registered-pool counters.
    pub fn pool_stats(&self) -> PoolStats {
        self.latest().pool_stats()
    }

    /// The provider connection underneath (for diagnostics and tests).
    pub fn connection(&self) -> Arc<P::Conn> {
        self.latest().connection().clone()
    }

    /// Closes the connection now; waiting calls fail (or are retransmitted on a new one).
    pub fn disconnect(&self) {
        self.latest().close(CloseReason::Local);
    }

    /// The current connection, if it is open.
    fn open_connection(&self) -> Option<Arc<Conn<P::Conn>>> {
        let latest = self.latest();
        (!latest.is_closed()).then_some(latest)
    }

    /// The connection a call should use when [`Self::open_connection`] had none, or `failed`
    /// broke: the current one if another caller reconnected meanwhile, else a new one.
    async fn connection_after(
        &self,
        failed: Option<&Arc<Conn<P::Conn>>>,
    ) -> Result<Arc<Conn<P::Conn>>, rpc::Error> {
        let mut current = self.current.lock().await;
        let stale = current.is_closed() || failed.is_some_and(|f| Arc::ptr_eq(f, &current));
        if stale {
            // Closed (if it was not already) so that its counters go to the totals.
            current.close(CloseReason::Local);
            let conn = open(&*self.provider, self.addr, &self.config, &self.totals).await?;
            *self.latest.lock() = conn.clone();
            *current = conn;
        }
        Ok(current.clone())
    }
}

impl<P: Provider> Drop for RdmaTransport<P> {
    fn drop(&mut self) {
        self.latest().close(CloseReason::Local);
    }
}

impl<P: Provider> CallTransport for RdmaTransport<P> {
    fn call<'a>(&'a self, mut call: Call<'a>) -> BoxFuture<'a, Result<Reply, rpc::Error>> {
        Box::pin(async move {
            // Reconnecting is rare and its future large (it holds the provider's connect):
            // boxed, it keeps this per-call future small (624 bytes instead of 2,368, moved
            // into its box on every call).
            let mut conn = match self.open_connection() {
                Some(conn) => conn,
                None => Box::pin(self.connection_after(None)).await?,
            };
            let timeout = call.options.timeout;
            // Seed 004 section 8.3.2 and RFC 5531: a retransmission reuses the XID, so a
            // server's duplicate request cache can recognise it.
            let mut xid = None;
            for attempt in 0.. {
                let plan = conn.reply_plan(&mut call, false);
                let result = conn.call(&call, &mut xid, plan, timeout, false).await;
                match result {
                    Err(rpc::Error::Transport(TransportError::Closed))
                        if attempt == 0 && self.config.retransmit =>
                    {
                        tracing::debug!(?xid, "connection lost: retransmitting on a new one");
                        conn = Box::pin(self.connection_after(Some(&conn))).await?;
                    }
                    other => return other,
                }
            }
            unreachable!("the loop returns")
        })
    }

    fn buffers(&self) -> Arc<dyn BufferSource> {
        self.latest().buffers()
    }

    fn kind(&self) -> TransportKind {
        TransportKind::Rdma
    }

    fn stats(&self) -> Option<TransportStats> {
        Some(self.total_stats())
    }

    fn serves_backward(&self) -> bool {
        self.config.backchannel.is_some() && self.config.backward_credits > 0
    }
}

/// A provider's failure to connect as the error every transport gives for it: a refused or
/// reset socket stays an I/O error, as over TCP.
fn connect_error(e: crate::rdma::Error) -> TransportError {
    use crate::rdma::Error as E;
    match e {
        E::Io(e) => TransportError::Io(e),
        E::Rejected { .. } => TransportError::Rejected,
        E::TimedOut(what) => {
            TransportError::Io(std::io::Error::new(std::io::ErrorKind::TimedOut, what))
        }
        E::Establishment(why) => TransportError::Handshake(why),
        E::Closed => TransportError::Closed,
        other => TransportError::Other(Box::new(other)),
    }
}

/// Makes one connection: private data out and in, receives posted before the peer can send.
async fn open<P: Provider>(
    provider: &P,
    addr: SocketAddr,
    config: &RdmaConfig,
    totals: &Arc<Totals>,
) -> Result<Arc<Conn<P::Conn>>, rpc::Error> {
    let mut recv: Option<MemoryRegion> = None;
    let conn = provider
        .connect_with(addr, config.connect_params(), |c| {
            recv = Some(post_receives(c, config.receives(), config.inline_size)?);
            Ok(())
        })
        .await
        .map_err(connect_error)?;
    let recv = recv.ok_or(TransportError::Closed)?;
    let peer = config.peer(conn.peer_private_data());
    super::config::tell_private_data(addr, conn.peer_private_data(), &peer);
    let mut core = core_config(Role::Client, config, &peer);
    // Version 2 asks for Send With Invalidate per call (rdma_inv_handle), not in the private
    // data: not from a device that cannot take it.
    core.remote_invalidate &= conn.takes_remote_invalidation();
    core.remembered_version = config.versions.get(addr);
    let budget = MemoryBudget::new(config.memory.per_connection);
    let conn = Conn::new(
        conn,
        Some(recv),
        None,
        core,
        config,
        config.backchannel.clone(),
        budget,
        Some(totals.clone()),
    );
    conn.start();
    // The 2004 mode: the configuration call is the connection's first (seed 000 section 6.1).
    if let Some(program) = config.mode_2004.as_ref().and_then(|m| m.config_program) {
        if let Err(e) =
            super::ccp::configure_client(&conn, config, program, peer.receive_size).await
        {
            conn.close(CloseReason::Local);
            return Err(e);
        }
    }
    Ok(conn)
}

/// A server's calls to its client on the client's connection (seed 004 section 8): inline
/// only, with the backward direction's own credits and XIDs.
pub(crate) struct Backchannel<C: Connection> {
    pub(crate) conn: Weak<Conn<C>>,
}

impl<C: Connection> CallTransport for Backchannel<C> {
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Reply, rpc::Error>> {
        Box::pin(async move {
            let conn = self.conn.upgrade().ok_or(TransportError::Closed)?;
            // Seed 004 section 8.3.2: a backward caller cannot reconnect; the call fails and
            // the application may try again when the client comes back.
            let timeout = call.options.timeout;
            let mut call = call;
            let plan = conn.reply_plan(&mut call, true);
            conn.call(&call, &mut None, plan, timeout, true).await
        })
    }

    fn buffers(&self) -> Arc<dyn BufferSource> {
        Arc::new(HeapBuffers)
    }

    fn kind(&self) -> TransportKind {
        TransportKind::Rdma
    }
}

//! The tokio driver: runs the [`core`](super::core) of each connection on any
//! [`rdma::Provider`](crate::rdma::Provider), for clients ([`connect`]) and servers
//! ([`serve`]).
//!
//! Nothing here knows which provider it runs on: the software iWARP provider and the verbs
//! provider give the same behaviour.

mod ccp;
mod client;
mod config;
mod conn;
mod server;
mod shared_credits;
mod totals;

pub use client::RdmaTransport;
pub use config::{PeerVersions, RdmaConfig};
pub use server::{serve, RdmaListener};

use std::net::SocketAddr;
use std::sync::Arc;

use crate::rdma::Provider;
use crate::rpc;

/// Connects an ONC RPC client to the RPC-over-RDMA server at `addr`.
///
/// ```no_run
/// # async fn demo() -> Result<(), rpcrdma::rpc::Error> {
/// use std::sync::Arc;
/// use rpcrdma::rdma::soft::SoftProvider;
/// use rpcrdma::transport::{self, RdmaConfig};
///
/// let client = transport::connect(
///     Arc::new(SoftProvider::default()),
///     "192.0.2.1:20049".parse().unwrap(),
///     RdmaConfig::default(),
/// )
/// .await?;
/// // Give `client` to a generated typed client: `NfsV3Client::new(client)`.
/// # Ok(()) }
/// ```
pub async fn connect<P: Provider>(
    provider: Arc<P>,
    addr: SocketAddr,
    config: RdmaConfig,
) -> Result<rpc::Client, rpc::Error> {
    Ok(rpc::Client::new(
        RdmaTransport::connect(provider, addr, config).await?,
    ))
}

//! The transport conformance program served over the software provider on loopback, with a
//! transport connected to it, as the transport tests use them (included with `#[path]`).

use std::net::SocketAddr;
use std::sync::Arc;

use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::Client;
use rpcrdma::transport::conformance::program::{server, TestversClient};
use rpcrdma::transport::{serve, RdmaConfig, RdmaListener, RdmaTransport};
use tokio::task::JoinHandle;

/// A running server of the test program and a client's transport to it.
pub struct Served {
    /// The server, running in a task of its own (its `stats` per connection).
    #[allow(dead_code)] // Not every test looks at the server.
    pub listener: Arc<RdmaListener<SoftProvider>>,
    /// The client's connection.
    pub transport: Arc<RdmaTransport<SoftProvider>>,
    /// The listener's `run`, in its task.
    #[allow(dead_code)] // Only the shutdown tests look at how it ended.
    pub running: JoinHandle<rpcrdma::rdma::Result<()>>,
    provider: Arc<SoftProvider>,
    addr: SocketAddr,
}

impl Served {
    /// Serves the test program on a loopback port of a default software provider and connects
    /// a transport to it, both with the default configuration; in the current runtime.
    pub async fn start() -> Served {
        let provider = Arc::new(SoftProvider::default());
        let (listener, addr, running) = serve_program(&*provider).await;
        let transport = Arc::new(
            RdmaTransport::connect(provider.clone(), addr, RdmaConfig::default())
                .await
                .unwrap(),
        );
        Served {
            listener,
            transport,
            running,
            provider,
            addr,
        }
    }

    /// Another transport to the same server, on a connection of its own.
    #[allow(dead_code)] // Not every test opens more than one connection.
    pub async fn connect(&self) -> Arc<RdmaTransport<SoftProvider>> {
        Arc::new(self.try_connect().await.unwrap())
    }

    /// [`Served::connect`], with its error (the server may have stopped).
    #[allow(dead_code)] // Not every test opens more than one connection.
    pub async fn try_connect(&self) -> Result<RdmaTransport<SoftProvider>, rpcrdma::rpc::Error> {
        RdmaTransport::connect(self.provider.clone(), self.addr, RdmaConfig::default()).await
    }

    /// A typed client of the test program on the transport.
    pub fn client(&self) -> TestversClient {
        TestversClient::new(Client::from_arc(self.transport.clone()))
    }
}

/// The test program served on a loopback port of `provider` with the default configuration,
/// its listener running in a task of the current runtime: the listener, its address and that
/// task.
pub async fn serve_program<P: Provider>(
    provider: &P,
) -> (
    Arc<RdmaListener<P>>,
    SocketAddr,
    JoinHandle<rpcrdma::rdma::Result<()>>,
) {
    serve_program_with(provider, RdmaConfig::default(), |listener| listener).await
}

/// [`serve_program`] with `config`, the listener passed through `prepare` before it runs (to
/// give it a shared receive queue, say).
pub async fn serve_program_with<P: Provider>(
    provider: &P,
    config: RdmaConfig,
    prepare: impl FnOnce(RdmaListener<P>) -> RdmaListener<P>,
) -> (
    Arc<RdmaListener<P>>,
    SocketAddr,
    JoinHandle<rpcrdma::rdma::Result<()>>,
) {
    let listener = provider
        .listen("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let listener = Arc::new(prepare(serve::<P>(listener, server(), config)));
    let running = tokio::spawn({
        let listener = listener.clone();
        async move { listener.run().await }
    });
    (listener, addr, running)
}

/// A two-worker runtime, as the transport tests run on.
pub fn two_workers() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

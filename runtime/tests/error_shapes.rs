//! One failure, one error shape: the same calls fail the same way over ONC RPC over TCP and
//! over RPC-over-RDMA (soft provider), down to the variant, and `Error::kind` says what
//! happened without naming the transport.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::tcp::{TcpConfig, TcpServer, TcpTransport};
use rpcrdma::rpc::{self, Client, ErrorKind, TransportError};
use rpcrdma::transport::conformance::program::{server, TestversClient};
use rpcrdma::transport::{serve, RdmaConfig, RdmaListener, RdmaTransport};

/// A server of the test program on each transport, and a client of each.
struct Both {
    tcp_server: Option<TcpServer>,
    rdma_server: Option<Arc<RdmaListener<SoftProvider>>>,
    tcp: TestversClient,
    rdma: TestversClient,
}

async fn both(timeout: Duration) -> Both {
    let tcp_server = TcpServer::bind("127.0.0.1:0", server(), TcpConfig::new())
        .await
        .unwrap();
    let tcp = TestversClient::new(Client::new(
        TcpTransport::connect(
            tcp_server.local_addr(),
            TcpConfig::new().timeout(Some(timeout)),
        )
        .await
        .unwrap(),
    ));
    let listener = SoftProvider::default()
        .listen("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let rdma_server = Arc::new(serve::<SoftProvider>(
        listener,
        server(),
        RdmaConfig::default(),
    ));
    tokio::spawn({
        let rdma_server = rdma_server.clone();
        async move { rdma_server.run().await }
    });
    let rdma = TestversClient::new(Client::new(
        RdmaTransport::connect(
            Arc::new(SoftProvider::default()),
            addr,
            RdmaConfig::default().timeout(Some(timeout)),
        )
        .await
        .unwrap(),
    ));
    Both {
        tcp_server: Some(tcp_server),
        rdma_server: Some(rdma_server),
        tcp,
        rdma,
    }
}

/// The variant an error has, without its payload.
fn shape(e: &rpc::Error) -> String {
    let full = format!("{e:?}");
    full.split(['(', ' ', '{'])
        .take(2)
        .collect::<Vec<_>>()
        .join("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_past_its_timeout_fails_alike() {
    let b = both(Duration::from_millis(200)).await;
    let tcp = b.tcp.test_sleep(5_000).await.unwrap_err();
    let rdma = b.rdma.test_sleep(5_000).await.unwrap_err();
    assert!(
        matches!(tcp, rpc::Error::Transport(TransportError::TimedOut(_))),
        "{tcp:?}"
    );
    assert!(
        matches!(rdma, rpc::Error::Transport(TransportError::TimedOut(_))),
        "{rdma:?}"
    );
    assert_eq!(
        (tcp.kind(), rdma.kind()),
        (ErrorKind::TimedOut, ErrorKind::TimedOut)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_of_the_servers_rpc_layer_is_the_same_error() {
    let b = both(Duration::from_secs(20)).await;
    // A procedure the version does not have: PROC_UNAVAIL, from the server's RPC layer.
    let call = |c: &TestversClient| {
        let rpc = c.rpc().clone();
        async move {
            rpc.call::<NoSuchProcedure>(&())
                .await
                .expect_err("no such procedure")
        }
    };
    let (tcp, rdma) = (call(&b.tcp).await, call(&b.rdma).await);
    assert!(matches!(tcp, rpc::Error::ProcUnavail), "{tcp:?}");
    assert!(matches!(rdma, rpc::Error::ProcUnavail), "{rdma:?}");
    assert_eq!(
        (tcp.kind(), rdma.kind()),
        (ErrorKind::Refused, ErrorKind::Refused)
    );
}

/// A procedure number the test program does not have.
struct NoSuchProcedure;

impl rpcrdma::xdr::Procedure for NoSuchProcedure {
    const PROGRAM: u32 = rpcrdma::transport::conformance::program::testprog::PROGRAM;
    const VERSION: u32 = rpcrdma::transport::conformance::program::testvers::VERSION;
    const PROCEDURE: u32 = 999;
    const NAME: &'static str = "NO_SUCH_PROCEDURE";
    type Args = ();
    type Result = ();
    const RESULT_DDP_ITEMS: usize = 0;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_gone_is_connection_refused_on_both() {
    let mut b = both(Duration::from_secs(20)).await;
    b.tcp.test_null().await.unwrap();
    b.rdma.test_null().await.unwrap();
    // Both servers go away for good: the next call reconnects, and nothing listens.
    b.tcp_server.take().unwrap().shutdown().await;
    let rdma = b.rdma_server.take().unwrap();
    rdma.shutdown().await;
    drop(rdma);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let tcp = b.tcp.test_null().await.unwrap_err();
    let rdma = b.rdma.test_null().await.unwrap_err();
    assert_eq!(shape(&tcp), shape(&rdma), "{tcp:?} / {rdma:?}");
    assert!(
        matches!(&tcp, rpc::Error::Transport(TransportError::Io(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused),
        "{tcp:?}"
    );
    assert_eq!(
        (tcp.kind(), rdma.kind()),
        (ErrorKind::ConnectionRefused, ErrorKind::ConnectionRefused)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_to_nothing_is_connection_refused_on_both() {
    // A port nothing listens on.
    let addr: SocketAddr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let tcp: rpc::Error = TransportError::from(
        TcpTransport::connect(addr, TcpConfig::new())
            .await
            .unwrap_err(),
    )
    .into();
    let rdma = RdmaTransport::connect(
        Arc::new(SoftProvider::default()),
        addr,
        RdmaConfig::default(),
    )
    .await
    .err()
    .expect("nothing listens");
    assert_eq!(shape(&tcp), shape(&rdma), "{tcp:?} / {rdma:?}");
    assert_eq!(rdma.kind(), ErrorKind::ConnectionRefused);
}

//! The delegation recall of server_rdma.rs over ONC RPC over TCP: the connection is the
//! session's backchannel too (RFC 5661 section 2.10.3.1), CB_RECALL travelling as a CALL record
//! from the server on the client's connection (RFC 5531 section 11 record marking both ways).

mod recall;
use rpcrdma::rpc::tcp::{TcpConfig, TcpServer, TcpTransport};
use rpcrdma::rpc::Client;
use rpcrdma_nfs4::client::{CallbackService, RecallPolicy, Session, SessionConfig};
use rpcrdma_nfs4::nfs4::nfs4_program::nfs_v4::NfsV4Client;
use rpcrdma_nfs4::server::{Nfs4Config, Nfs4Server};
use std::time::Duration;

struct Served {
    _server: Nfs4Server,
    tcp: TcpServer,
}

async fn served() -> Served {
    let server = Nfs4Server::new(Nfs4Config {
        lease_seconds: 5,
        ..Nfs4Config::default()
    });
    let tcp = TcpServer::bind("127.0.0.1:0", server.rpc_server(), TcpConfig::new())
        .await
        .unwrap();
    Served {
        _server: server,
        tcp,
    }
}

async fn session(s: &Served, owner: &str, policy: RecallPolicy) -> Session {
    session_on(s, owner, policy, CallbackService::new()).await
}

/// A session whose callbacks `callbacks` serves (on its program number).
async fn session_on(
    s: &Served,
    owner: &str,
    policy: RecallPolicy,
    callbacks: CallbackService,
) -> Session {
    let config = SessionConfig::new(owner.to_string(), *b"boot0001")
        .backchannel(callbacks.clone())
        .recall_policy(policy);
    let tcp = TcpConfig::new()
        .timeout(Some(Duration::from_secs(20)))
        .backchannel(callbacks.server());
    let transport = TcpTransport::connect(s.tcp.local_addr(), tcp)
        .await
        .expect("TCP connect");
    let session = Session::establish(NfsV4Client::new(Client::new(transport)), config)
        .await
        .expect("session established");
    assert!(
        session.granted().backchannel(),
        "CONN_BACK_CHAN granted over TCP"
    );
    session
}

#[tokio::test]
async fn refused_without_the_tcp_option() {
    let s = served().await;
    let client = rpcrdma::rpc::tcp::connect(s.tcp.local_addr())
        .await
        .unwrap();
    let refused = Session::establish(
        NfsV4Client::new(client),
        SessionConfig::new("x".to_string(), *b"boot0001").backchannel(CallbackService::new()),
    )
    .await;
    assert!(
        matches!(refused, Err(rpcrdma_nfs4::client::ClientError::Config(_))),
        "{refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_gets_the_file_after_the_readers_delegation_is_recalled_and_returned() {
    let s = served().await;
    let a = session(&s, "reader", RecallPolicy::Notify).await;
    let b = session(&s, "writer", RecallPolicy::Notify).await;
    recall::writer_after_recall(a, b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callbacks_go_to_the_program_number_the_client_chose() {
    // RFC 5661 section 18.36.3: csa_cb_program is the client's choice; the server calls it.
    let s = served().await;
    let callbacks = CallbackService::with_program(0x4000_1234);
    let a = session_on(&s, "reader", RecallPolicy::Notify, callbacks).await;
    let b = session(&s, "writer", RecallPolicy::Notify).await;
    recall::writer_after_recall(a, b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_clients_look_at_the_size_recalls_a_write_delegation() {
    let s = served().await;
    let a = session(&s, "holder", RecallPolicy::Notify).await;
    let b = session(&s, "looker", RecallPolicy::Notify).await;
    recall::reader_after_write_delegation(a, b).await;
}

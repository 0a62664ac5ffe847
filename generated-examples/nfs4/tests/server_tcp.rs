//! The delegation recall of server_rdma.rs over ONC RPC over TCP: the connection is the
//! session's backchannel too (RFC 5661 section 2.10.3.1), CB_RECALL travelling as a CALL record
//! from the server on the client's connection (RFC 5531 section 11 record marking both ways).
use bytes::Bytes;
use rpcrdma::rpc::tcp::{TcpConfig, TcpServer, TcpTransport};
use rpcrdma::rpc::Client;
use rpcrdma_nfs4::client::{
    CallbackService, DelegationKind, DelegationWant, OpenOptions, RecallPolicy, Session,
    SessionConfig,
};
use rpcrdma_nfs4::nfs4::nfs4_program::nfs_v4::NfsV4Client;
use rpcrdma_nfs4::nfs4::StableHow4;
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
    let callbacks = CallbackService::new();
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
    let mut recalls = a.recalls().expect("the recall channel");
    let root = a.root_fh().await.expect("PUTROOTFH");
    let made = a
        .open(&root, "shared", OpenOptions::create(0o644))
        .await
        .expect("OPEN create");
    a.write(
        &made.fh,
        &made.stateid,
        0,
        Bytes::from_static(b"before"),
        StableHow4::FileSync4,
    )
    .await
    .expect("WRITE");
    a.close(&made.fh, &made.stateid).await.expect("CLOSE");
    let read = a
        .open(
            &root,
            "shared",
            OpenOptions::read().want(DelegationWant::Read),
        )
        .await
        .expect("OPEN for reading");
    let delegation = read.delegation.clone().expect("a read delegation");
    assert_eq!(delegation.kind, DelegationKind::Read);

    // Another client opens the file for writing: the server answers NFS4ERR_DELAY and recalls
    // the delegation over the reader's backchannel; the writer's session retries.
    let b = session(&s, "writer", RecallPolicy::Notify).await;
    let writer = tokio::spawn({
        let root = b.root_fh().await.expect("PUTROOTFH");
        async move {
            let opened = b.open(&root, "shared", OpenOptions::write()).await;
            (b, opened)
        }
    });
    let recall = tokio::time::timeout(Duration::from_secs(10), recalls.recv())
        .await
        .expect("a CB_RECALL within 10 s")
        .expect("the recall channel open");
    assert_eq!(recall.stateid, delegation.stateid);
    assert_eq!(recall.fh, read.fh);
    a.delegreturn(&recall.fh, &recall.stateid)
        .await
        .expect("DELEGRETURN");
    let (b, opened) = tokio::time::timeout(Duration::from_secs(10), writer)
        .await
        .expect("the writer's OPEN within 10 s")
        .expect("the writer's task");
    let w = opened.expect("the writer's OPEN after the delegation came back");
    assert!(w.delegation.is_none(), "no delegation for a writer");
    b.write(
        &w.fh,
        &w.stateid,
        0,
        Bytes::from_static(b"after!"),
        StableHow4::FileSync4,
    )
    .await
    .expect("WRITE");
    // The reader, no longer caching under a delegation, reads the new bytes.
    let (now, _) = a
        .read(&read.fh, &read.stateid, 0, 6)
        .await
        .expect("READ after the recall");
    assert_eq!(now, Bytes::from_static(b"after!"));
    b.close(&w.fh, &w.stateid).await.expect("CLOSE");
    a.close(&read.fh, &read.stateid).await.expect("CLOSE");
    b.destroy().await.expect("destroy writer");
    a.destroy().await.expect("destroy reader");
}

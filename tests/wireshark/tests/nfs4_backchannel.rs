//! An NFSv4.1 session with its backchannel on one RPC-over-RDMA connection (issue 55 item 4,
//! on the software iWARP provider; the guest's RoCEv2 capture is tests/vm's): our client
//! library and our server on loopback, a read delegation recalled over the reader's
//! connection. Judged by tshark with the dissector xdrgen generates (`dissectors/rpcrdma.lua`)
//! handing the RPC messages to Wireshark's ONC RPC and NFS dissectors:
//!
//! - calls go both ways on the one connection: NFSv4 COMPOUNDs from the client, CB_COMPOUND
//!   (CB_SEQUENCE, CB_RECALL) from the server, and the DELEGRETURN after it;
//! - every backward-direction message is as seed 004 section 8.3.4 and 8.3.5 require: version
//!   1, RDMA_MSG, all three chunk lists empty, the RPC XID equal to rdma_xid, and a credit
//!   value that is never zero (section 8.2.1), the reply granting the client's backward
//!   credits (one);
//! - nothing is malformed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rpcrdma::rdma::soft::{PcapTap, SoftProvider};
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::Client;
use rpcrdma::transport::{serve, RdmaConfig, RdmaTransport};
use rpcrdma_nfs4::client::{
    CallbackService, DelegationWant, OpenOptions, RecallPolicy, Session, SessionConfig,
};
use rpcrdma_nfs4::nfs4::nfs4_program::nfs_v4::NfsV4Client;
use rpcrdma_nfs4::nfs4::StableHow4;
use rpcrdma_nfs4::server::{Nfs4Config, Nfs4Server};
use wireshark_tests::tshark::{self, Tshark};
use wireshark_tests::{save, shipped_dissector, v1};

/// The NFSv4 callback program number our client serves (RFC 5661 section 20's transient
/// number, as the Linux client uses).
const CB_PROGRAM: u64 = 0x4000_0000;

fn provider(tap: Option<Arc<PcapTap>>) -> Arc<SoftProvider> {
    Arc::new(v1::provider(tap))
}

async fn session(
    provider: Arc<SoftProvider>,
    addr: SocketAddr,
    owner: &str,
) -> (Session, Arc<RdmaTransport<SoftProvider>>) {
    let callbacks = CallbackService::new();
    let config = SessionConfig::new(owner.to_string(), *b"boot0001")
        .backchannel(callbacks.clone())
        .recall_policy(RecallPolicy::ReturnAutomatically);
    let rdma = RdmaConfig::default()
        .timeout(Some(Duration::from_secs(20)))
        .backchannel(callbacks.server(), config.back_channel.max_requests);
    let transport = Arc::new(
        RdmaTransport::connect(provider, addr, rdma)
            .await
            .expect("RDMA connect"),
    );
    let client = NfsV4Client::new(Client::from_arc(transport.clone()));
    let session = Session::establish(client, config)
        .await
        .expect("session established");
    (session, transport)
}

/// The reader's side of the recall scenario, captured.
async fn capture() -> Vec<u8> {
    let server = Nfs4Server::new(Nfs4Config::default());
    let listener = provider(None)
        .listen("127.0.0.1:0".parse().unwrap())
        .await
        .expect("listen");
    let addr = listener.local_addr().expect("address");
    let rdma = Arc::new(serve::<SoftProvider>(
        listener,
        server.rpc_server(),
        RdmaConfig::default().backward_credits(1),
    ));
    let serving = tokio::spawn({
        let rdma = rdma.clone();
        async move { rdma.run().await }
    });
    let tap = Arc::new(PcapTap::new());
    let (reader, reader_transport) = session(provider(Some(tap.clone())), addr, "reader").await;
    let root = reader.root_fh().await.expect("PUTROOTFH");
    let made = reader
        .open(&root, "f", OpenOptions::create(0o644))
        .await
        .expect("OPEN create");
    reader
        .write(
            &made.fh,
            &made.stateid,
            0,
            Bytes::from_static(b"hello"),
            StableHow4::FileSync4,
        )
        .await
        .expect("WRITE");
    reader.close(&made.fh, &made.stateid).await.expect("CLOSE");
    let read = reader
        .open(&root, "f", OpenOptions::read().want(DelegationWant::Read))
        .await
        .expect("OPEN for reading");
    assert!(read.delegation.is_some(), "a read delegation");

    // The writer: the server recalls the reader's delegation over the reader's connection;
    // the reader's session returns it (RecallPolicy::ReturnAutomatically).
    let (writer, _w) = session(provider(None), addr, "writer").await;
    let wroot = writer.root_fh().await.expect("PUTROOTFH");
    let w = tokio::time::timeout(
        Duration::from_secs(20),
        writer.open(&wroot, "f", OpenOptions::write()),
    )
    .await
    .expect("the writer's OPEN in time")
    .expect("the writer's OPEN");
    writer.close(&w.fh, &w.stateid).await.expect("CLOSE");
    reader.close(&read.fh, &read.stateid).await.expect("CLOSE");
    reader.destroy().await.expect("destroy");
    writer.destroy().await.expect("destroy");
    reader_transport.disconnect();
    serving.abort();
    tap.pcap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_both_ways_on_one_connection_as_section_8_says() {
    if !test_judge::require("tshark (Debian package tshark)", tshark::present()) {
        return;
    }
    let pcap = save("nfs4-backchannel.pcap", &capture().await);
    let t = Tshark::new(&pcap).lua(shipped_dissector());
    let frames = t.fields(
        "rpc",
        &[
            "rpcrdma.xid",
            "rpcrdma.vers",
            "rpcrdma.credit",
            "rpcrdma.htype",
            "rpcrdma.reads",
            "rpcrdma.writes",
            "rpcrdma.reply",
            "rpc.xid",
            "rpc.msgtyp",
            "rpc.program",
            "tcp.stream",
            "tcp.srcport",
        ],
    );
    assert!(!frames.is_empty(), "no RPC frame dissected");
    let streams: std::collections::BTreeSet<u64> =
        frames.iter().map(|f| f.one("tcp.stream")).collect();
    assert_eq!(streams.len(), 1, "one connection carries both directions");

    let calls = |program: u64| {
        frames
            .iter()
            .filter(|f| f.one("rpc.msgtyp") == 0 && f.one("rpc.program") == program)
            .count()
    };
    assert!(calls(100_003) > 5, "NFSv4 COMPOUNDs from the client");
    assert_eq!(calls(CB_PROGRAM), 1, "one CB_COMPOUND from the server");
    // The server's call comes from the server's port, the client's from the client's.
    let client_port = frames
        .iter()
        .find(|f| f.one("rpc.msgtyp") == 0 && f.one("rpc.program") == 100_003)
        .map(|f| f.one("tcp.srcport"))
        .expect("a forward call");
    let cb_call = frames
        .iter()
        .find(|f| f.one("rpc.msgtyp") == 0 && f.one("rpc.program") == CB_PROGRAM)
        .expect("the backward call");
    assert_ne!(
        cb_call.one("tcp.srcport"),
        client_port,
        "sent by the server"
    );
    let cb_xid = cb_call.one("rpc.xid");
    let cb_reply = frames
        .iter()
        .find(|f| {
            f.one("rpc.msgtyp") == 1
                && f.one("rpc.xid") == cb_xid
                && f.one("tcp.srcport") == client_port
        })
        .expect("the client's reply to the backward call");
    for (what, f) in [("call", cb_call), ("reply", cb_reply)] {
        // Seed 004 sections 8.3.4 and 8.3.5.
        assert_eq!(f.one("rpcrdma.vers"), 1, "backward {what}: version 1");
        assert_eq!(f.one("rpcrdma.htype"), 0, "backward {what}: RDMA_MSG");
        assert_eq!(
            f.one("rpcrdma.xid"),
            f.one("rpc.xid"),
            "backward {what}: XIDs"
        );
        for list in ["rpcrdma.reads", "rpcrdma.writes", "rpcrdma.reply"] {
            assert!(
                f.numbers(list).iter().all(|n| *n == 0),
                "backward {what}: {list} empty"
            );
        }
        // Section 8.2.1: never zero.
        assert_ne!(f.one("rpcrdma.credit"), 0, "backward {what}: credit");
    }
    assert_eq!(
        cb_reply.one("rpcrdma.credit"),
        1,
        "the client grants its one backward credit"
    );
    // The CB_COMPOUND carried CB_SEQUENCE and CB_RECALL, and the DELEGRETURN followed.
    let tree = t.verbose();
    for op in ["CB_SEQUENCE", "CB_RECALL", "DELEGRETURN"] {
        assert!(tree.contains(op), "{op} not in the dissection");
    }
    assert!(!tree.contains("Malformed"), "a malformed packet");
    let ex = t.experts();
    assert!(ex.errors.is_empty(), "{}", ex.report);
}

//! Our NFSv4.1 client library against our NFSv4.1 server over RPC-over-RDMA on the software
//! provider: a session whose connection is also its backchannel (RFC 5661 section 2.10.3.1;
//! bi-directional RPC-over-RDMA, seed 004 section 8), 1 MiB of data both ways in chunks, and a
//! read delegation recalled by CB_RECALL over the holder's backchannel when another client
//! opens the file for writing (section 10.4.1), returned, and the writer's OPEN then granted.

mod recall;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::Client;
use rpcrdma::transport::{serve, RdmaConfig, RdmaListener, RdmaTransport};
use rpcrdma_nfs4::client::{
    CallbackService, DelegationWant, OpenOptions, RecallPolicy, Session, SessionConfig,
};
use rpcrdma_nfs4::nfs4::nfs4_program::nfs_v4::NfsV4Client;
use rpcrdma_nfs4::nfs4::StableHow4;
use rpcrdma_nfs4::server::{Nfs4Config, Nfs4Server};

struct Served {
    server: Nfs4Server,
    provider: Arc<SoftProvider>,
    addr: SocketAddr,
    _rdma: Arc<RdmaListener<SoftProvider>>,
}

async fn served() -> Served {
    served_with_lease(5).await
}

async fn served_with_lease(lease_seconds: u32) -> Served {
    let server = Nfs4Server::new(Nfs4Config {
        lease_seconds,
        ..Nfs4Config::default()
    });
    let provider = Arc::new(SoftProvider::default());
    let listener = provider
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("RDMA listen");
    let addr = listener.local_addr().expect("address");
    // One backward credit: the server sends one callback at a time.
    let rdma = Arc::new(serve::<SoftProvider>(
        listener,
        server.rpc_server(),
        RdmaConfig::default().backward_credits(1),
    ));
    tokio::spawn({
        let rdma = rdma.clone();
        async move { rdma.run().await }
    });
    Served {
        server,
        provider,
        addr,
        _rdma: rdma,
    }
}

async fn session(s: &Served, owner: &str, policy: RecallPolicy) -> Session {
    let callbacks = CallbackService::new();
    let config = SessionConfig::new(owner.to_string(), *b"boot0001")
        .backchannel(callbacks.clone())
        .recall_policy(policy);
    let rdma = RdmaConfig::default()
        .timeout(Some(Duration::from_secs(20)))
        .backchannel(callbacks.server(), config.back_channel.max_requests);
    let transport = RdmaTransport::connect(s.provider.clone(), s.addr, rdma)
        .await
        .expect("RDMA connect");
    Session::establish(NfsV4Client::new(Client::new(transport)), config)
        .await
        .expect("session established")
}

fn pattern(len: usize) -> Bytes {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(29).wrapping_add((i >> 9) as u8))
        .collect::<Vec<u8>>()
        .into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_with_its_backchannel_moves_a_mib_each_way() {
    let s = served().await;
    let a = session(&s, "client-a", RecallPolicy::Notify).await;
    assert!(
        a.granted().backchannel(),
        "the server took the connection as the backchannel"
    );
    let root = a.root_fh().await.expect("PUTROOTFH");
    let file = a
        .open(&root, "data", OpenOptions::create(0o644))
        .await
        .expect("OPEN create");
    let data = pattern(1 << 20);
    let written = a
        .write(
            &file.fh,
            &file.stateid,
            0,
            data.clone(),
            StableHow4::Unstable4,
        )
        .await
        .expect("WRITE");
    assert_eq!(written.count, 1 << 20);
    let (back, eof) = a
        .read(&file.fh, &file.stateid, 0, 1 << 20)
        .await
        .expect("READ");
    assert_eq!(back, data);
    assert!(eof);
    a.close(&file.fh, &file.stateid).await.expect("CLOSE");
    a.destroy()
        .await
        .expect("DESTROY_SESSION and DESTROY_CLIENTID");
    assert_eq!(s.server.state_counts(), (0, 0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_gets_the_file_after_the_readers_delegation_is_recalled_and_returned() {
    let s = served().await;
    let a = session(&s, "reader", RecallPolicy::Notify).await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delegation_not_returned_within_a_lease_is_revoked_and_the_holder_told() {
    use rpcrdma_nfs4::nfs4::{
        FreeStateid4args, NfsArgop4, NfsResop4, Nfsstat4, Putfh4args, Read4args, TestStateid4args,
        TestStateid4res, SEQ4_STATUS_RECALLABLE_STATE_REVOKED,
    };
    let s = served_with_lease(1).await;
    let a = session(&s, "sleepy-reader", RecallPolicy::Notify).await;
    let _recalls = a.recalls().expect("the recall channel");
    let root = a.root_fh().await.expect("PUTROOTFH");
    let made = a
        .open(&root, "g", OpenOptions::create(0o644))
        .await
        .expect("OPEN create");
    a.close(&made.fh, &made.stateid).await.expect("CLOSE");
    let read = a
        .open(&root, "g", OpenOptions::read().want(DelegationWant::Read))
        .await
        .expect("OPEN for reading");
    let deleg = read.delegation.clone().expect("a read delegation").stateid;

    // The writer waits out the recall: the reader ignores it, so after a lease (section
    // 10.2.1) the server revokes the delegation and the writer's retried OPEN succeeds.
    let b = session(&s, "writer", RecallPolicy::Notify).await;
    let broot = b.root_fh().await.expect("PUTROOTFH");
    let w = tokio::time::timeout(
        Duration::from_secs(20),
        b.open(&broot, "g", OpenOptions::write()),
    )
    .await
    .expect("the writer's OPEN in time")
    .expect("the writer's OPEN once the delegation is revoked");
    b.close(&w.fh, &w.stateid).await.expect("CLOSE");

    // The holder learns it from SEQUENCE's flags (section 18.46.3), its stateid is
    // NFS4ERR_DELEG_REVOKED (section 8.2.4), and FREE_STATEID acknowledges it.
    let res = a
        .compound(vec![
            NfsArgop4::OpPutfh(Putfh4args {
                object: read.fh.clone(),
            }),
            NfsArgop4::OpRead(Read4args {
                stateid: deleg.clone(),
                offset: 0,
                count: 1,
            }),
        ])
        .await
        .expect("COMPOUND");
    assert_eq!(res.status, Nfsstat4::Nfs4errDelegRevoked);
    assert!(a
        .status_flags()
        .contains(SEQ4_STATUS_RECALLABLE_STATE_REVOKED));
    let res = a
        .compound(vec![NfsArgop4::OpTestStateid(TestStateid4args {
            ts_stateids: vec![deleg.clone()],
        })])
        .await
        .expect("TEST_STATEID");
    let NfsResop4::OpTestStateid(TestStateid4res::Nfs4Ok(t)) = &res.resarray[0] else {
        panic!("{res:?}")
    };
    assert_eq!(t.tsr_status_codes, vec![Nfsstat4::Nfs4errDelegRevoked]);
    let res = a
        .compound(vec![NfsArgop4::OpFreeStateid(FreeStateid4args {
            fsa_stateid: deleg,
        })])
        .await
        .expect("FREE_STATEID");
    assert_eq!(res.status, Nfsstat4::Nfs4Ok);
    a.compound(vec![]).await.expect("SEQUENCE");
    assert!(!a
        .status_flags()
        .contains(SEQ4_STATUS_RECALLABLE_STATE_REVOKED));
    a.close(&read.fh, &read.stateid).await.expect("CLOSE");
}

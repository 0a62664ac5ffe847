//! What a peer can make a server commit: raw peers (`support/raw_peer.rs`, no crate code) send
//! calls whose Read chunks are as large as the server takes and never answer the server's RDMA
//! Read Requests. The server's memory stays within its budget, returns when they are gone,
//! and a legitimate client is served meanwhile.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::Client;
use rpcrdma::transport::conformance::program::{
    pattern_of, server, testprog, testvers, EchoArgs, TestversClient,
};
use rpcrdma::transport::{serve, MemoryLimits, RdmaConfig, RdmaListener, RdmaTransport};
use tokio::task::JoinSet;

#[path = "support/process.rs"]
mod process;
#[path = "support/raw_peer.rs"]
mod raw_peer;

use process::{descriptors, rss, tasks, until};
use raw_peer::*;

const MIB: usize = 1 << 20;
/// A call's Read chunks may carry 64 MiB and 64 KiB in all by default (`HeaderLimits`).
const MAXIMAL: u32 = 64 << 20;
const TEST_WRITE: u32 = 10;

/// An RDMA_MSG carrying TEST_WRITE whose `data` (DDP-eligible) is a Read chunk of `len` bytes
/// at an address the peer made up: the chunk goes at the data's Position, after the tag and
/// the length word (seed 004 section 4.4.4), 48 bytes into the call.
fn write_with_read_chunk(xid: u32, len: u32) -> Vec<u8> {
    let position = 48;
    let handle = 0x5eed_0000 | (xid & 0xffff);
    let mut m: Vec<u8> = [
        xid, 1, 32, RDMA_MSG, // header: xid, version 1, credits asked, RDMA_MSG
        1, position, handle, len, // read list: one segment
    ]
    .iter()
    .flat_map(|w| w.to_be_bytes())
    .collect();
    m.extend_from_slice(&0x1000_0000_0000u64.to_be_bytes()); // the segment's offset
    m.extend_from_slice(&[0; 12]); // end of the read list, empty write list, no reply chunk
    m.extend_from_slice(&rpc_call(
        xid,
        testprog::PROGRAM,
        testvers::VERSION,
        TEST_WRITE,
        &[xid, len],
    ));
    m
}

/// A hostile connection: connects, sends `calls` maximal writes and never answers a Read
/// Request, reading on (answering only the provider's confirmations) until the server closes
/// it. Returns the largest Read Request it saw, and whether the server closed it.
async fn hostile(addr: SocketAddr, calls: u32) -> (u32, bool) {
    let pd = enhanced_private_data(16, 16, &rfc8797(4096, 4096));
    let Ok(mut peer) = RawPeer::connect(addr, &MpaFrame::request(pd)).await else {
        return (0, true);
    };
    for i in 0..calls {
        let xid = 0x7000 + i;
        if peer
            .send_message(&write_with_read_chunk(xid, MAXIMAL))
            .await
            .is_err()
        {
            return (0, true);
        }
    }
    let mut largest = 0;
    loop {
        match peer.next().await {
            Ok(Inbound::ReadRequest(r)) => largest = largest.max(r.size),
            Ok(Inbound::Closed) | Ok(Inbound::Terminate(_)) | Err(_) => return (largest, true),
            Ok(_) => {}
        }
    }
}

async fn serve_with(config: RdmaConfig) -> (Arc<RdmaListener<SoftProvider>>, SocketAddr) {
    let listener = SoftProvider::default()
        .listen("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let rdma = Arc::new(serve::<SoftProvider>(listener, server(), config));
    tokio::spawn({
        let rdma = rdma.clone();
        async move { rdma.run().await }
    });
    (rdma, addr)
}

/// A legitimate client's WRITE with a 1 MiB Read chunk, checked.
async fn legitimate_write(good: &TestversClient, i: u32, safety: Duration) {
    let written = tokio::time::timeout(
        safety,
        good.test_write(EchoArgs {
            tag: i,
            data: pattern_of(MIB, i as u8),
        }),
    )
    .await
    .unwrap_or_else(|_| panic!("legitimate WRITE {i}: not served within the {safety:?} safety net"))
    .unwrap();
    assert_eq!(written, MIB as u32);
}

async fn legitimate_client(addr: SocketAddr) -> TestversClient {
    TestversClient::new(Client::new(
        RdmaTransport::connect(
            Arc::new(SoftProvider::default()),
            addr,
            RdmaConfig::default(),
        )
        .await
        .unwrap(),
    ))
}

/// The server's default budgets (1 GiB, 128 MiB a connection) and 100 connections that each
/// send 32 calls naming 64 MiB Read chunks (2 GiB each, 200 GiB in all, for 400 KB of input)
/// and never answer a Read: each holds one 4 MiB piece, the legitimate client is served at
/// once, and all of it comes back when the read timeout closes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_connections_of_unanswered_maximal_read_chunks_stay_within_the_server_budget() {
    let budget = MemoryLimits::default();
    let read_timeout = Duration::from_secs(3);
    let config = RdmaConfig::default().read_timeout(Some(read_timeout));
    let (listener, addr) = serve_with(config).await;
    let good = legitimate_client(addr).await;
    // Warm the legitimate path (its pool, the server's task) before the baseline.
    legitimate_write(&good, 0, Duration::from_secs(30)).await;
    let before = rss();
    let (fds_before, tasks_before) = (descriptors(), tasks());

    let mut peers = JoinSet::new();
    for _ in 0..100 {
        peers.spawn(hostile(addr, 32));
    }
    // Every hostile connection holds the first piece of its first call.
    until("100 stalled pieces", Duration::from_secs(60), || {
        listener.memory().used() >= 100 * 4 * MIB
    })
    .await;
    let held = listener.memory().used();
    assert!(
        held <= budget.per_server,
        "{held} bytes lent over the budget"
    );
    // The legitimate client is served meanwhile, without waiting for the stalled ones.
    for i in 1..=20 {
        legitimate_write(&good, i, Duration::from_secs(20)).await;
        good.test_null().await.unwrap();
    }
    assert!(listener.memory().used() <= budget.per_server);
    let during = rss();
    eprintln!(
        "RSS before {} MiB, with the hostile peers {} MiB; {} MiB lent to them (budget {} MiB)",
        before >> 20,
        during >> 20,
        held >> 20,
        budget.per_server >> 20
    );
    assert!(
        during.saturating_sub(before) < budget.per_server,
        "RSS grew by {} MiB, more than the server budget",
        (during - before) >> 20
    );
    // The read timeout closes them, and everything they held comes back.
    let mut closed = 0;
    while let Some(outcome) = tokio::time::timeout(Duration::from_secs(60), peers.join_next())
        .await
        .expect("every hostile connection closed within the 60 s safety net")
    {
        let (largest, was_closed) = outcome.unwrap();
        assert!(largest <= 4 * MIB as u32, "a Read of {largest} bytes");
        closed += usize::from(was_closed);
    }
    assert_eq!(closed, 100);
    until("the memory they held back", Duration::from_secs(30), || {
        listener.memory().used() == 0
    })
    .await;
    let after = rss();
    eprintln!("RSS after they are gone: {} MiB", after >> 20);
    // Their sockets and tasks are gone too (the server closes its side as they close theirs).
    until("descriptors back", Duration::from_secs(30), || {
        descriptors() <= fds_before
    })
    .await;
    until("tasks back", Duration::from_secs(30), || {
        tasks() <= tasks_before
    })
    .await;
    assert!(
        after.saturating_sub(before) < 64 * MIB,
        "RSS stayed {} MiB above where it started",
        (after - before) >> 20
    );
    legitimate_write(&good, 21, Duration::from_secs(20)).await;
}

/// A server budget the stalled connections exceed (40 of them holding 4 MiB pieces against
/// 64 MiB): memory is short, so stalled connections are closed after `PRESSURE_STALL` rather
/// than the read timeout, and the legitimate client is served once they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_memory_pressure_stalled_connections_make_way_for_a_legitimate_client() {
    let budget = MemoryLimits {
        per_connection: 64 * MIB + 64 * 1024,
        per_server: 64 * MIB,
    };
    let config = RdmaConfig::default()
        .memory(budget)
        .read_timeout(Some(Duration::from_secs(600)));
    let (listener, addr) = serve_with(config).await;
    let good = legitimate_client(addr).await;
    legitimate_write(&good, 0, Duration::from_secs(30)).await;
    let mut peers = JoinSet::new();
    for _ in 0..40 {
        peers.spawn(hostile(addr, 4));
    }
    until("the budget spent", Duration::from_secs(60), || {
        listener.memory().used() + 4 * MIB > budget.per_server
    })
    .await;
    // Far sooner than the 600 s read timeout: the stalled connections go under pressure.
    for i in 1..=5 {
        legitimate_write(&good, i, Duration::from_secs(60)).await;
    }
    assert!(listener.memory().used() <= budget.per_server);
    peers.abort_all();
}

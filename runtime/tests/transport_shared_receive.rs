//! An RPC-over-RDMA server on a shared receive queue (software provider): credits come from
//! what the queue holds and never add up to more, a connection that finds no buffer for its
//! first credit is refused, a busy connection's grant grows while an eighth of the queue stays
//! free, and everything reserved comes back when connections close.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Provider, SharedReceiveParams};
use rpcrdma::rpc::{Client, ErrorKind};
use rpcrdma::transport::conformance::program::TestversClient;
use rpcrdma::transport::{RdmaConfig, RdmaListener, RdmaTransport};

#[path = "support/served.rs"]
#[allow(dead_code)] // Each test file uses part of the support module.
mod served;
use served::serve_program_with;

const WAIT: Duration = Duration::from_secs(30);

/// A server whose connections take their receives from a queue of `buffers` buffers.
async fn shared_server(
    provider: &Arc<SoftProvider>,
    buffers: usize,
) -> (Arc<RdmaListener<SoftProvider>>, std::net::SocketAddr) {
    let config = RdmaConfig::default();
    let queue = provider
        .shared_receive_queue(SharedReceiveParams::new(buffers, config.inline_size))
        .unwrap();
    let (listener, addr, _running) = serve_program_with(&**provider, config, |listener| {
        listener.with_shared_receive_queue(queue).unwrap()
    })
    .await;
    (listener, addr)
}

async fn client(
    provider: &Arc<SoftProvider>,
    addr: std::net::SocketAddr,
) -> Result<Arc<TestversClient>, rpcrdma::rpc::Error> {
    let transport = RdmaTransport::connect(
        provider.clone(),
        addr,
        RdmaConfig::default().timeout(Some(WAIT)),
    )
    .await?;
    Ok(Arc::new(TestversClient::new(Client::new(transport))))
}

/// `count` TEST_SLEEP calls at once, of `from`, `from + 1`, ... milliseconds; their answers.
async fn at_once(client: &Arc<TestversClient>, from: u32, count: u32) -> Vec<u32> {
    let tasks: Vec<_> = (from..from + count)
        .map(|ms| {
            let client = client.clone();
            tokio::spawn(async move { client.test_sleep(ms).await.unwrap() })
        })
        .collect();
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    answers
}

/// Waits until the queue has `free` buffers not reserved.
async fn free_becomes(listener: &RdmaListener<SoftProvider>, free: usize) {
    let deadline = Instant::now() + WAIT;
    while listener.shared_receive_free() != Some(free) {
        assert!(
            Instant::now() < deadline,
            "{:?} buffers free, expected {free}",
            listener.shared_receive_free()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credits_never_add_up_to_more_than_the_queue_holds() {
    let provider = Arc::new(SoftProvider::default());
    let (listener, addr) = shared_server(&provider, 6).await;
    // Two credits each (the first grant): three connections take the six buffers.
    let a = client(&provider, addr).await.unwrap();
    let b = client(&provider, addr).await.unwrap();
    let c = client(&provider, addr).await.unwrap();
    for client in [&a, &b, &c] {
        assert_eq!(client.test_sleep(1).await.unwrap(), 1);
    }
    assert_eq!(listener.shared_receive_free(), Some(0));
    match client(&provider, addr).await {
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => {}
        other => panic!("a connection past the queue: {:?}", other.map(|_| ())),
    }
    // Sixteen calls at once on a connection of two credits, which cannot grow: they wait for
    // credits at the client, none is refused.
    assert_eq!(at_once(&c, 0, 16).await, (0..16).collect::<Vec<_>>());
    assert_eq!(listener.shared_receive_free(), Some(0));
    drop(a);
    free_becomes(&listener, 2).await;
    let d = client(&provider, addr).await.unwrap();
    assert_eq!(d.test_sleep(2).await.unwrap(), 2);
    assert_eq!(listener.shared_receive_free(), Some(0));
    drop((b, c, d));
    free_becomes(&listener, 6).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_connection_gets_more_credits_and_an_eighth_stays_free() {
    let provider = Arc::new(SoftProvider::default());
    let (listener, addr) = shared_server(&provider, 64).await;
    let busy = client(&provider, addr).await.unwrap();
    assert_eq!(busy.test_sleep(0).await.unwrap(), 0);
    assert_eq!(listener.shared_receive_free(), Some(62));
    for _ in 0..8 {
        assert_eq!(at_once(&busy, 20, 32).await, (20..52).collect::<Vec<_>>());
    }
    // Grown to the 32 credits configured: 32 of 64 reserved.
    assert_eq!(listener.shared_receive_free(), Some(32));
    let idle = client(&provider, addr).await.unwrap();
    assert_eq!(idle.test_sleep(0).await.unwrap(), 0);
    let other = client(&provider, addr).await.unwrap();
    for _ in 0..8 {
        assert_eq!(at_once(&other, 20, 32).await, (20..52).collect::<Vec<_>>());
    }
    // The second busy connection grew as far as the eighth kept free (8) lets it.
    assert_eq!(listener.shared_receive_free(), Some(8));
    drop((busy, idle, other));
    free_becomes(&listener, 64).await;
}

//! An idle server connection gives back the buffers it keeps registered for reuse
//! (`RdmaConfig::release_idle_after`), and carries calls again afterwards (RPC-over-RDMA on
//! the software provider).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rpcrdma::rdma::soft::{live_registrations, SoftProvider};
use rpcrdma::rpc::Client;
use rpcrdma::transport::conformance::program::{pattern, EchoArgs, TestversClient};
use rpcrdma::transport::{RdmaConfig, RdmaTransport};

#[path = "support/served.rs"]
#[allow(dead_code)] // Each test file uses part of the support module.
mod served;
use served::serve_program_with;

async fn echoes(client: &Arc<TestversClient>, count: u32) {
    let calls: Vec<_> = (0..count)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move {
                let data = pattern(100_000, i as u8);
                let res = client
                    .test_echo(EchoArgs {
                        tag: i,
                        data: data.clone(),
                    })
                    .await
                    .unwrap();
                assert!(res.tag == i && res.data == data, "call {i} came back wrong");
            })
        })
        .collect();
    for call in calls {
        call.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_gives_back_its_reusable_buffers() {
    let provider = Arc::new(SoftProvider::default());
    let config = RdmaConfig::default().release_idle_after(Some(Duration::from_millis(100)));
    let (listener, addr, _running) = serve_program_with(&*provider, config, |l| l).await;
    let transport = RdmaTransport::connect(provider.clone(), addr, RdmaConfig::default())
        .await
        .unwrap();
    let client = Arc::new(TestversClient::new(Client::new(transport)));
    echoes(&client, 8).await;
    let busy = listener.stats()[0].1.live;
    assert!(busy > 0, "the server's pool registered nothing");
    let with_buffers = live_registrations();
    // Idle for two rounds of the sweep at most, and a margin.
    let deadline = Instant::now() + Duration::from_secs(10);
    while listener.stats()[0].1.live > 0 {
        assert!(
            Instant::now() < deadline,
            "the idle connection kept {} pool buffers",
            listener.stats()[0].1.live
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The pool's buffers and the free send buffers went (the client keeps its own).
    assert!(
        live_registrations() + busy as usize <= with_buffers,
        "registrations {with_buffers} -> {}: fewer than the pool's {busy} released",
        live_registrations()
    );
    // The connection carries calls as before, registering again what it needs.
    echoes(&client, 8).await;
    assert!(listener.stats()[0].1.live > 0);
}

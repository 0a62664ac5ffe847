//! A connection whose send queue is smaller than what its calls post at once: operations wait,
//! in order, for completions to make room, and every call still gets its own result
//! (RPC-over-RDMA on the software provider, both ends with a tiny `send_queue_depth`).

use std::sync::Arc;
use std::time::Duration;

use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rpc::Client;
use rpcrdma::transport::conformance::program::{pattern, EchoArgs, TestversClient};
use rpcrdma::transport::{RdmaConfig, RdmaTransport};

#[path = "support/served.rs"]
#[allow(dead_code)] // Each test file uses part of the support module.
mod served;
use served::serve_program_with;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_go_through_a_send_queue_of_one_or_two_entries() {
    for depth in [1, 2] {
        let provider = Arc::new(SoftProvider::default());
        let config = RdmaConfig::default().send_queue_depth(depth);
        let (_listener, addr, running) =
            serve_program_with(&*provider, config.clone(), |l| l).await;
        let transport = RdmaTransport::connect(
            provider.clone(),
            addr,
            config.timeout(Some(Duration::from_secs(30))),
        )
        .await
        .unwrap();
        let client = Arc::new(TestversClient::new(Client::new(transport)));
        // Inline calls and replies, and arguments and results large enough for Read and
        // Write chunks: each call posts a Send and an RDMA Write or Read at least, 32 at once.
        let calls: Vec<_> = (0..32u32)
            .map(|i| {
                let client = client.clone();
                tokio::spawn(async move {
                    let len = [0, 300, 5000, 70_000][i as usize % 4];
                    let data = pattern(len, i as u8);
                    let res = client
                        .test_echo(EchoArgs {
                            tag: i,
                            data: data.clone(),
                        })
                        .await
                        .unwrap_or_else(|e| panic!("depth {depth}: call {i}: {e}"));
                    assert!(
                        res.tag == i && res.data == data,
                        "depth {depth}: call {i} came back wrong"
                    );
                })
            })
            .collect();
        for call in calls {
            call.await.unwrap();
        }
        running.abort();
    }
}

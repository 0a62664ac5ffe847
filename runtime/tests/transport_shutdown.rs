//! A server's graceful shutdown over the software provider: `RdmaListener::shutdown` stops
//! accepting, answers the calls its handlers were given, drops the ones that had not reached
//! a handler, and closes every connection.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::Client;
use rpcrdma::transport::conformance::program::{server, TestversClient};
use rpcrdma::transport::{serve, RdmaConfig, RdmaListener, RdmaTransport};

#[path = "support/served.rs"]
mod served;
use served::{two_workers, Served};

/// Waits until `done` holds, polling: the server's counters change on its own threads.
async fn wait_until(what: &str, done: impl Fn() -> bool) {
    for _ in 0..5000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("gave up waiting: {what}");
}

fn calls_received(listener: &RdmaListener<SoftProvider>) -> u64 {
    listener.stats().iter().map(|(s, _)| s.calls_received).sum()
}

#[test]
fn shutdown_answers_the_calls_being_served_and_drops_the_rest() {
    two_workers().block_on(async {
        let served = Served::start().await;
        let client = served.client();
        let idle = TestversClient::new(Client::from_arc(served.connect().await));
        idle.test_null().await.unwrap();

        let slow = tokio::spawn({
            let client = client.clone();
            async move { client.test_sleep(300).await }
        });
        wait_until("the server runs the slow call", || {
            calls_received(&served.listener) == 2
        })
        .await;
        let shutdown = served.listener.shutdown();

        // Taken by no handler: dropped, so the caller sees its connection close, and the
        // retransmission finds nothing listening.
        let late = client.test_null().await;
        assert!(late.is_err(), "a call made after shutdown began: {late:?}");
        // The call the server was running is answered.
        assert_eq!(slow.await.unwrap().unwrap(), 300);
        tokio::time::timeout(Duration::from_secs(10), shutdown)
            .await
            .expect("shutdown completes once the running call is answered");

        assert_eq!(calls_received(&served.listener), 0, "no connection is left");
        assert!(served.listener.stats().is_empty());
        assert!(
            idle.test_null().await.is_err(),
            "the idle connection is closed"
        );
        assert!(served.listener.local_addr().is_err());
    });
}

#[test]
fn shutdown_with_only_idle_connections_ends_at_once_and_stops_run() {
    two_workers().block_on(async {
        let provider = Arc::new(SoftProvider::default());
        let endpoint = provider
            .listen("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let addr: SocketAddr = endpoint.local_addr().unwrap();
        let listener = Arc::new(serve::<SoftProvider>(
            endpoint,
            server(),
            RdmaConfig::default(),
        ));
        let running = tokio::spawn({
            let listener = listener.clone();
            async move { listener.run().await }
        });
        let mut clients = Vec::new();
        for _ in 0..3 {
            let transport = RdmaTransport::connect(provider.clone(), addr, RdmaConfig::default())
                .await
                .unwrap();
            let client = TestversClient::new(Client::new(transport));
            client.test_null().await.unwrap();
            clients.push(client);
        }
        assert_eq!(listener.stats().len(), 3);

        tokio::time::timeout(Duration::from_secs(10), listener.shutdown())
            .await
            .expect("idle connections close at once");
        let run = tokio::time::timeout(Duration::from_secs(10), running)
            .await
            .expect("run returns after shutdown");
        assert!(matches!(run, Ok(Ok(()))), "{run:?}");

        assert!(listener.stats().is_empty());
        for client in &clients {
            assert!(client.test_null().await.is_err());
        }
        let again = RdmaTransport::connect(provider.clone(), addr, RdmaConfig::default()).await;
        assert!(again.is_err(), "the listening endpoint is closed");
    });
}

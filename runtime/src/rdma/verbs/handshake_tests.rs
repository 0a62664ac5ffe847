//! Hostile handshakes on the verbs provider, served by the RPC-over-RDMA server: initiators
//! that vanish at every point of connection establishment, and a request over the server's
//! connection limit. Run where `RPCRDMA_VERBS_ADDR` names an RDMA-capable interface (the
//! Soft-RoCE guest of `tests/vm/run provider`); each checks that a legitimate client connects
//! and calls meanwhile, and that no rdma_cm or verbs object is left behind.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::rpc::Client;
use crate::transport::conformance::program::{server, TestversClient};
use crate::transport::{serve, RdmaConfig, RdmaListener, RdmaTransport};

/// Safety net of a wait that ends on an event; long, as everything is slow under TCG. A
/// request abandoned by its initiator may keep its identifier until [`ESTABLISH_TIMEOUT`].
const SAFETY: Duration = Duration::from_secs(90);

fn test_ip() -> Option<std::net::IpAddr> {
    let text = std::env::var("RPCRDMA_VERBS_ADDR").ok()?;
    Some(
        text.parse()
            .unwrap_or_else(|e| panic!("RPCRDMA_VERBS_ADDR={text:?}: {e}")),
    )
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Serves the test program on `ip` with `config`, its `run` in a task.
async fn start(
    ip: std::net::IpAddr,
    config: RdmaConfig,
) -> (Arc<RdmaListener<VerbsProvider>>, SocketAddr) {
    let listener = VerbsProvider::new()
        .listen(SocketAddr::new(ip, 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let served = Arc::new(serve::<VerbsProvider>(listener, server(), config));
    tokio::spawn({
        let served = served.clone();
        async move { served.run().await }
    });
    (served, addr)
}

/// A legitimate client: connects, makes a NULL call, disconnects.
async fn legit_client(addr: SocketAddr) -> Result<(), String> {
    let transport =
        RdmaTransport::connect(Arc::new(VerbsProvider::new()), addr, RdmaConfig::default())
            .await
            .map_err(|e| format!("connect: {e}"))?;
    TestversClient::new(Client::new(transport))
        .test_null()
        .await
        .map_err(|e| format!("NULL: {e}"))
}

/// Waits (up to [`SAFETY`]) until [`live_objects`] is back at `before`; how long it took.
async fn objects_back_to(before: usize) -> Duration {
    let started = Instant::now();
    while live_objects() > before && started.elapsed() < SAFETY {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        live_objects(),
        before,
        "rdma_cm/verbs objects left behind: {}",
        live_objects_by_kind()
    );
    started.elapsed()
}

#[test]
fn initiators_vanishing_mid_handshake_hold_up_no_one_and_leak_nothing() {
    let Some(ip) = test_ip() else {
        // No device here: the provider's own tests check the error paths.
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        let before = live_objects();
        let (served, addr) = start(ip, RdmaConfig::default()).await;
        let provider = VerbsProvider::new();
        // How long a whole connect takes here (tens of ms on hardware, far more under TCG).
        let started = Instant::now();
        drop(provider.connect(addr, ConnectParams::new()).await.unwrap());
        let whole = started.elapsed();
        // Connects dropped at fractions of that: before the request leaves, with the request
        // at the server (the identifier destroyed: rdma_cm sends a REJ), after the reply,
        // established (a DREQ). Where each stops varies from run to run; together they cover
        // the stages.
        let mut stages = Vec::new();
        for percent in [0u32, 10, 25, 40, 50, 60, 70, 80, 90, 95, 100, 110] {
            let attempt = tokio::time::timeout(
                whole * percent / 100,
                provider.connect(addr, ConnectParams::new()),
            )
            .await;
            stages.push(match attempt {
                Err(_) => format!("{percent}%: abandoned"),
                Ok(Ok(_)) => format!("{percent}%: established, then dropped"),
                Ok(Err(e)) => format!("{percent}%: failed ({e})"),
            });
        }
        println!(
            "verbs: vanishing initiators (a whole connect took {} ms): {stages:?}",
            whole.as_millis()
        );
        // The listener's event loop took every request at once: a client gets in now.
        let started = Instant::now();
        tokio::time::timeout(SAFETY, legit_client(addr))
            .await
            .expect("the client got in within the safety net")
            .unwrap();
        println!(
            "verbs: a client connected and called {} ms after the vanishing initiators",
            started.elapsed().as_millis()
        );
        tokio::time::timeout(SAFETY, served.shutdown())
            .await
            .expect("the server shut down");
        drop(served);
        let took = objects_back_to(before).await;
        println!(
            "verbs: every identifier of the vanished requests destroyed within {} ms",
            took.as_millis()
        );
    });
}

#[test]
fn a_request_over_the_connection_limit_is_rejected_at_once() {
    let Some(ip) = test_ip() else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        let before = live_objects();
        let (served, addr) = start(ip, RdmaConfig::default().max_connections(1)).await;
        let first =
            RdmaTransport::connect(Arc::new(VerbsProvider::new()), addr, RdmaConfig::default())
                .await
                .unwrap();
        let first = TestversClient::new(Client::new(first));
        first.test_null().await.unwrap();
        assert_eq!(served.connection_count(), 1);
        // The rdma_cm answer: a consumer REJ, which the initiator reports as a rejection.
        let refused = tokio::time::timeout(SAFETY, legit_client(addr))
            .await
            .expect("the rejection came within the safety net");
        assert!(
            refused
                .as_ref()
                .is_err_and(|e| e.contains("rejected the connection")),
            "{refused:?}"
        );
        // The first connection leaves: its place lets the next client in.
        drop(first);
        let deadline = Instant::now() + SAFETY;
        while let Err(e) = legit_client(addr).await {
            assert!(Instant::now() < deadline, "the client never got in: {e}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::timeout(SAFETY, served.shutdown())
            .await
            .expect("the server shut down");
        drop(served);
        objects_back_to(before).await;
    });
}

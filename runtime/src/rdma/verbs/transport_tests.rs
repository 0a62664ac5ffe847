//! The transport conformance suite (`rpcrdma::transport::conformance`) on the verbs provider:
//! RPC-over-RDMA version 1 end to end over a real verbs stack. Runs where `RPCRDMA_VERBS_ADDR`
//! names an RDMA-capable interface (the Soft-RoCE guest of `tests/vm/run provider`); checks
//! that nothing stays registered afterwards.

use std::net::SocketAddr;

use super::*;
use crate::rdma::conformance::Harness;
use crate::transport::conformance::{lies, run_all};

/// The longest one lie may take in the guest (under a second each is usual under TCG). It
/// also catches a teardown that blocks: a connection dropped with a window still bound on it
/// once held the dropping thread ~51 s, where the timeout below cannot fire.
const LIE_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

#[test]
fn transport_conformance_on_a_real_device() {
    let Some(text) = std::env::var("RPCRDMA_VERBS_ADDR").ok() else {
        // No device here: the provider's own tests check the error paths.
        return;
    };
    let ip: std::net::IpAddr = text
        .parse()
        .unwrap_or_else(|e| panic!("RPCRDMA_VERBS_ADDR={text:?}: {e}"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let before = live_registrations();
    // A device without memory windows (siw) takes no Send With Invalidate of its keys.
    let windows = rt.block_on(async {
        let provider = VerbsProvider::new();
        let (_listener, client, _server) =
            super::tests::connected(&provider, SocketAddr::new(ip, 0)).await;
        println!("\ntransport verbs on {}", client.device_name());
        client.has_memory_windows()
    });
    let on_device = |harness: Harness<VerbsProvider>| {
        if windows {
            harness
        } else {
            harness.without_remote_invalidation()
        }
    };
    let report = rt.block_on(async {
        let harness = on_device(Harness::new(VerbsProvider::new(), SocketAddr::new(ip, 0)));
        run_all(&harness).await
    });
    print!("{report}");
    assert!(report.passed(), "the transport failed on verbs:\n{report}");
    if windows {
        // The same suite with the servers taking every connection's receives from one
        // shared receive queue (`ibv_create_srq`).
        println!("transport verbs with a shared receive queue");
        let report = rt.block_on(async {
            let harness = Harness::new(VerbsProvider::new(), SocketAddr::new(ip, 0))
                .with_shared_receive_queue(64);
            run_all(&harness).await
        });
        print!("{report}");
        assert!(
            report.passed(),
            "the transport failed on verbs with a shared receive queue:\n{report}"
        );
    }
    // The hostile-peer table, each lie with a leak check of its own and a time limit, each
    // printed as it ends: under TCG the table takes minutes, and a lie that hangs must name
    // itself rather than leave the whole run to an outer timeout.
    let harness = on_device(Harness::new(VerbsProvider::new(), SocketAddr::new(ip, 0)))
        .with_registration_count(live_registrations);
    let mut failed = Vec::new();
    for (i, name) in lies::names().into_iter().enumerate() {
        let started = std::time::Instant::now();
        let outcome = rt.block_on(async {
            tokio::time::timeout(LIE_TIME_LIMIT, lies::run_lie(&harness, i)).await
        });
        let verdict = match outcome {
            Ok(Ok(())) if started.elapsed() > LIE_TIME_LIMIT => {
                format!("FAILED: blocked past {LIE_TIME_LIMIT:?}")
            }
            Ok(Ok(())) => "ok".to_string(),
            Ok(Err(e)) => format!("FAILED: {e}"),
            Err(_) => format!("FAILED: no end within {LIE_TIME_LIMIT:?}"),
        };
        println!(
            "transport verbs lie {i} {name}: {verdict} ({} ms)",
            started.elapsed().as_millis()
        );
        if verdict != "ok" {
            failed.push((i, name, verdict));
        }
    }
    println!(
        "transport verbs lies: {} passed, {} failed",
        lies::count() - failed.len(),
        failed.len()
    );
    assert!(failed.is_empty(), "lies on verbs failed: {failed:?}");
    // Every connection of the suite is gone: give their teardown a moment, then nothing of
    // theirs may stay registered.
    rt.block_on(async { tokio::time::sleep(std::time::Duration::from_millis(500)).await });
    drop(rt);
    assert_eq!(
        live_registrations(),
        before,
        "registrations left behind by the transport suite"
    );
}

//! The transport conformance suite (`rpcrdma::transport::conformance`) on the verbs provider:
//! RPC-over-RDMA version 1 end to end over a real verbs stack. Runs where `RPCRDMA_VERBS_ADDR`
//! names an RDMA-capable interface (the Soft-RoCE guest of `tests/vm/run provider`); checks
//! that nothing stays registered afterwards.

use std::net::SocketAddr;

use super::*;
use crate::rdma::conformance::Harness;
use crate::transport::conformance::{lies, run_all};

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
    let report = rt.block_on(async {
        let harness = Harness::new(VerbsProvider::new(), SocketAddr::new(ip, 0));
        run_all(&harness).await
    });
    print!("{report}");
    assert!(report.passed(), "the transport failed on verbs:\n{report}");
    // The hostile-peer table, each lie with a leak check of its own.
    let failed = rt.block_on(async {
        let harness = Harness::new(VerbsProvider::new(), SocketAddr::new(ip, 0))
            .with_registration_count(live_registrations);
        lies::run_all_lies(&harness).await
    });
    println!(
        "transport verbs lies: {} passed, {} failed",
        lies::count() - failed.len(),
        failed.len()
    );
    for (i, name, e) in &failed {
        println!("transport verbs lie {i} {name}: FAILED: {e}");
    }
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

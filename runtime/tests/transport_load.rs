//! Load, reduced for CI: 64 clients on their own connections making mixed calls (NULL, small
//! echoes, 1 MiB reads into registered buffers, 1 MiB writes) at once against one server over
//! the software provider; every result checked, none lost. The full run (64 x 10,000 calls,
//! latency percentiles, heap flatness) is `cargo run --release -p rpcrdma --example
//! transport-load`.

use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::transport::conformance::load::{run_load, LoadConfig};

#[test]
fn sixty_four_clients_every_result_right_none_lost() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let config = LoadConfig {
        clients: 64,
        calls_per_client: 40,
        bulk_size: 256 << 10,
    };
    let report = rt
        .block_on(run_load(
            SoftProvider::default(),
            "127.0.0.1:0".parse().unwrap(),
            config,
            || 0,
        ))
        .unwrap();
    for line in report.lines() {
        println!("{line}");
    }
    assert_eq!(report.failed, 0, "{:?}", report.problems);
    assert_eq!(report.ok, 64 * 40);
    assert_eq!(
        report.latency.iter().map(|p| p.count).sum::<usize>(),
        64 * 40
    );
}

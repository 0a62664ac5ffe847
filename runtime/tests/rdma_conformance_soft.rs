//! The generic provider conformance suite against the software iWARP provider, in several
//! MPA configurations (CRC, markers, RDMAC version 0 framing).

use rpcrdma::rdma::conformance::Harness;
use rpcrdma::rdma::soft::{MpaConfig, RnicKind, SoftConfig, SoftProvider};

fn harness(mpa: MpaConfig) -> Harness<SoftProvider> {
    let config = SoftConfig {
        mpa,
        ..SoftConfig::default()
    };
    Harness::new(SoftProvider::new(config), "127.0.0.1:0".parse().unwrap())
}

mod plain {
    use super::*;
    rpcrdma::rdma_conformance_tests!(harness(MpaConfig {
        kind: RnicKind::Ietf,
        markers: false,
        crc: false,
        revision: 1,
    }));
}

mod crc_rev2 {
    use super::*;
    rpcrdma::rdma_conformance_tests!(harness(MpaConfig::default()));
}

mod markers_and_crc {
    use super::*;
    rpcrdma::rdma_conformance_tests!(harness(MpaConfig {
        kind: RnicKind::IetfPermissive,
        markers: true,
        crc: true,
        revision: 2,
    }));
}

mod rdmac {
    use super::*;
    rpcrdma::rdma_conformance_tests!(harness(MpaConfig {
        kind: RnicKind::Rdmac,
        markers: true,
        crc: true,
        revision: 1,
    }));
}

/// As Linux siw: Sends and Writes complete once written (a refusal shows as the end of the
/// connection, not in the requester's completion), and no memory windows.
mod as_siw {
    use super::*;
    rpcrdma::rdma_conformance_tests!(Harness::new(
        SoftProvider::new(SoftConfig {
            confirm_completions: false,
            rekey: false,
            ..SoftConfig::default()
        }),
        "127.0.0.1:0".parse().unwrap(),
    )
    .with_local_requester_completions()
    .without_remote_invalidation());
}

/// The suite on a current-thread runtime (the generated tests use two workers); the driver
/// behaves differently there (replies may be left to a completion poller).
#[test]
fn the_suite_passes_on_a_current_thread_runtime() {
    for mpa in [
        MpaConfig::default(),
        MpaConfig {
            kind: RnicKind::IetfPermissive,
            markers: true,
            crc: true,
            revision: 2,
        },
    ] {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let report = runtime.block_on(rpcrdma::rdma::conformance::run_all(&harness(mpa)));
        let failures: Vec<_> = report.failures().collect();
        assert!(failures.is_empty(), "{failures:#?}");
    }
}

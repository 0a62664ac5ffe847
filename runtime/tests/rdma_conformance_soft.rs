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

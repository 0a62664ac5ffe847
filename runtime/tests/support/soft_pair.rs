//! A connected pair of software-provider connections on loopback, as the driver tests and the
//! `rdma_soft` bench use them (included with `#[path]` by both).

use rpcrdma::rdma::soft::{MpaConfig, RnicKind, SoftConfig, SoftConnection, SoftProvider};
use rpcrdma::rdma::{ConnectParams, Listener, Provider};

/// An IETF RNIC speaking MPA revision 2 without markers, with a 65000-byte MULPDU.
pub fn provider(crc: bool, confirm: bool) -> SoftProvider {
    SoftProvider::new(SoftConfig {
        mpa: MpaConfig {
            kind: RnicKind::Ietf,
            markers: false,
            crc,
            revision: 2,
        },
        mulpdu: 65000,
        confirm_completions: confirm,
        ..SoftConfig::default()
    })
}

/// A client and a server connection of `p` on a loopback port.
pub async fn pair(p: &SoftProvider) -> (SoftConnection, SoftConnection) {
    let listener = p.listen("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (c, s) = tokio::join!(
        p.connect(addr, ConnectParams::new()),
        listener.accept(ConnectParams::new())
    );
    (c.unwrap(), s.unwrap())
}

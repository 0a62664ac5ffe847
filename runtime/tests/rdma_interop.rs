//! Seed 001 (draft-carrier-rddp-rnic-interop-00) over real sockets: RDMAC, non-permissive
//! and permissive IETF endpoints in both roles and with both marker preferences connect
//! through the soft provider; each side reports the outcome (close, or DDP/RDMAP version and
//! marker state per direction) and, when connected, data flows both ways with that framing.

use rpcrdma::rdma::soft::{MpaConfig, RnicKind, SoftConfig, SoftConnection, SoftProvider};
use rpcrdma::rdma::{
    Access, ConnectParams, Connection, Listener, Provider, RecvWr, SendWr, Sge, WcOpcode,
};
use RnicKind::*;

fn provider(kind: RnicKind, markers: bool, revision: u8) -> SoftProvider {
    SoftProvider::new(SoftConfig {
        mpa: MpaConfig {
            kind,
            markers,
            crc: false,
            revision,
        },
        ..SoftConfig::default()
    })
}

/// Expected: `None` = close; `Some((v, x, y))` = version and receive markers of
/// initiator/responder (the figures' "V=v, M=x/y").
type Cell = Option<(u8, bool, bool)>;

/// An endpoint: flavour and marker preference.
type End = (RnicKind, bool);

fn cells() -> Vec<(End, End, Cell)> {
    let ok = |v, x: u8, y: u8| Some((v, x == 1, y == 1));
    vec![
        // Figure 2.
        ((Rdmac, true), (Rdmac, true), ok(0, 1, 1)),
        ((Rdmac, true), (Ietf, false), None),
        ((Rdmac, true), (Ietf, true), None),
        ((Ietf, false), (Rdmac, true), None),
        ((Ietf, true), (Rdmac, true), None),
        ((Ietf, false), (Ietf, true), ok(1, 0, 1)),
        ((Ietf, true), (Ietf, false), ok(1, 1, 0)),
        // Figure 3.
        ((Rdmac, true), (IetfPermissive, false), ok(0, 1, 1)),
        ((Rdmac, true), (IetfPermissive, true), ok(0, 1, 1)),
        ((IetfPermissive, false), (Rdmac, true), ok(0, 1, 1)),
        ((IetfPermissive, true), (Rdmac, true), ok(0, 1, 1)),
        ((IetfPermissive, false), (IetfPermissive, true), ok(1, 0, 1)),
        ((IetfPermissive, true), (IetfPermissive, false), ok(1, 1, 0)),
        // Figure 4.
        ((Ietf, false), (IetfPermissive, false), ok(1, 0, 0)),
        ((Ietf, true), (IetfPermissive, true), ok(1, 1, 1)),
        ((IetfPermissive, false), (Ietf, true), ok(1, 0, 1)),
        ((IetfPermissive, true), (Ietf, false), ok(1, 1, 0)),
    ]
}

async fn exchange(a: &SoftConnection, b: &SoftConnection) {
    // Large enough to cross several 512-octet marker intervals.
    let rb = b.register(vec![0; 3000], Access::LOCAL_WRITE).unwrap();
    b.post_recv(RecvWr::new(1, Sge::whole(&rb))).unwrap();
    let sa = a
        .register((0..3000).map(|i| i as u8).collect(), Access::NONE)
        .unwrap();
    a.post_send(SendWr::send(2, vec![Sge::whole(&sa)])).unwrap();
    loop {
        let c = b.poll_completion().await;
        assert!(c.is_success(), "{c:?}");
        if c.opcode == WcOpcode::Recv {
            break;
        }
    }
    assert_eq!(rb.to_vec(0..3000).unwrap(), sa.to_vec(0..3000).unwrap());
    let c = a.poll_completion().await;
    assert!(c.is_success(), "{c:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rnic_pairing_over_sockets() {
    for revision in [1, 2] {
        for ((ik, im), (rk, rm), expected) in cells() {
            let name = format!("{ik:?} M={im} -> {rk:?} M={rm} (rev {revision})");
            let ini = provider(ik, im, revision);
            let resp = provider(rk, rm, revision);
            let listener = resp.listen("127.0.0.1:0".parse().unwrap()).await.unwrap();
            let addr = listener.local_addr().unwrap();
            let (c, s) = tokio::join!(
                ini.connect(addr, ConnectParams::new()),
                listener.accept(ConnectParams::new())
            );
            match expected {
                None => {
                    // The side that cannot interoperate closes; the initiator always learns it.
                    assert!(c.is_err() || s.is_err(), "{name}: expected close");
                    if let Ok(s) = s {
                        // An RDMAC responder cannot tell; the initiator's close reaches it.
                        let r = s.register(vec![0; 8], Access::LOCAL_WRITE).unwrap();
                        match s.post_recv(RecvWr::new(9, Sge::whole(&r))) {
                            // Already closed: posting is refused.
                            Err(_) => assert!(!s.is_connected(), "{name}"),
                            // Still open: the close flushes the receive.
                            Ok(()) => {
                                let done = tokio::time::timeout(
                                    std::time::Duration::from_secs(10),
                                    s.poll_completion(),
                                )
                                .await
                                .expect("the initiator's close reaches the responder");
                                assert!(!done.is_success(), "{name}: {done:?}");
                            }
                        }
                    }
                    assert!(c.is_err(), "{name}: the initiator must report the close");
                }
                Some((v, x, y)) => {
                    let (c, s) = (c.expect(&name), s.expect(&name));
                    let (ci, si) = (c.negotiated(), s.negotiated());
                    assert_eq!((ci.version, si.version), (v, v), "{name}");
                    assert_eq!((ci.rx_markers, si.rx_markers), (x, y), "{name}");
                    assert_eq!((ci.tx_markers, si.tx_markers), (y, x), "{name}");
                    if v == 0 {
                        assert!(ci.crc && si.crc, "{name}: RDMAC mode uses CRC");
                    }
                    exchange(&c, &s).await;
                    exchange(&s, &c).await;
                }
            }
        }
    }
}

//! Every cell of figures 2, 3 and 4 of draft-carrier-rddp-rnic-interop-00, table-driven.

use super::*;
use RnicKind::*;

/// An endpoint of a figure: its flavour and marker preference.
#[derive(Clone, Copy, Debug)]
struct End(RnicKind, bool);

/// The expected outcome of a cell: close, or version V and marker state
/// X/Y = receive direction of initiator/responder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cell {
    Close,
    Ok { v: u8, ini_rx: bool, resp_rx: bool },
}

fn ok(v: u8, x: u8, y: u8) -> Cell {
    Cell::Ok {
        v,
        ini_rx: x == 1,
        resp_rx: y == 1,
    }
}

fn config(end: End, revision: u8) -> MpaConfig {
    MpaConfig {
        kind: end.0,
        markers: end.1,
        crc: false,
        revision,
    }
}

/// Runs the exchange of startup frames and returns the cell both sides agree on.
fn run(ini: End, resp: End, revision: u8) -> Cell {
    let ini_cfg = config(ini, revision);
    let resp_cfg = config(resp, revision);
    let depths = ReadDepths { ird: 8, ord: 4 };
    let request = ini_cfg.request(b"ini", depths);
    // Round-trip through the wire format, as on a socket.
    let mut wire = vec![];
    request.emit(&mut wire);
    let (request, _) = StartupFrame::parse(FrameKind::Request, &wire).unwrap();
    let (reply, resp_outcome) = resp_cfg.respond(&request, b"resp", depths);
    let mut wire = vec![];
    reply.emit(&mut wire);
    let (reply, _) = StartupFrame::parse(FrameKind::Reply, &wire).unwrap();
    if resp_cfg.kind == RnicKind::IetfPermissive && request.revision == 0 {
        // Figure 3, "N/A": a permissive responder never replies M=0 to an RDMAC initiator.
        assert!(reply.markers, "permissive responder replied M=0 to RDMAC");
    }
    let ini_outcome = ini_cfg.complete(&request, &reply);
    match (ini_outcome, resp_outcome) {
        (Ok(i), Ok(r)) => {
            // Section 5.1: the version is the same in both directions, and what one side
            // sends with markers the other receives with markers.
            assert_eq!(i.version, r.version, "{ini:?} -> {resp:?}");
            assert_eq!(i.tx_markers, r.rx_markers, "{ini:?} -> {resp:?}");
            assert_eq!(r.tx_markers, i.rx_markers, "{ini:?} -> {resp:?}");
            assert_eq!(i.crc, r.crc);
            assert_eq!(i.peer_private_data, b"resp");
            assert_eq!(r.peer_private_data, b"ini");
            if i.version == 0 {
                assert!(i.crc, "RDMAC mode always uses CRC");
            }
            Cell::Ok {
                v: i.version,
                ini_rx: i.rx_markers,
                resp_rx: r.rx_markers,
            }
        }
        // Either side closing closes the connection (the other sees the TCP close).
        _ => Cell::Close,
    }
}

/// (initiator, responder, expected) for every cell of figures 2, 3 and 4.
fn figures() -> Vec<(&'static str, End, End, Cell)> {
    let rdmac = End(Rdmac, true);
    let np0 = End(Ietf, false);
    let np1 = End(Ietf, true);
    let p0 = End(IetfPermissive, false);
    let p1 = End(IetfPermissive, true);
    vec![
        // Figure 2: RDMAC and non-permissive IETF.
        ("fig2 RDMAC -> RDMAC", rdmac, rdmac, ok(0, 1, 1)),
        ("fig2 RDMAC -> NP M=0", rdmac, np0, Cell::Close),
        ("fig2 RDMAC -> NP M=1", rdmac, np1, Cell::Close),
        ("fig2 NP M=0 -> RDMAC", np0, rdmac, Cell::Close),
        ("fig2 NP M=0 -> NP M=0", np0, np0, ok(1, 0, 0)),
        ("fig2 NP M=0 -> NP M=1", np0, np1, ok(1, 0, 1)),
        ("fig2 NP M=1 -> RDMAC", np1, rdmac, Cell::Close),
        ("fig2 NP M=1 -> NP M=0", np1, np0, ok(1, 1, 0)),
        ("fig2 NP M=1 -> NP M=1", np1, np1, ok(1, 1, 1)),
        // Figure 3: RDMAC and permissive IETF. The N/A cell (RDMAC -> P M=0) behaves as
        // M=1, checked in `run`.
        ("fig3 RDMAC -> RDMAC", rdmac, rdmac, ok(0, 1, 1)),
        ("fig3 RDMAC -> P M=0 (N/A)", rdmac, p0, ok(0, 1, 1)),
        ("fig3 RDMAC -> P M=1", rdmac, p1, ok(0, 1, 1)),
        ("fig3 P M=0 -> RDMAC", p0, rdmac, ok(0, 1, 1)),
        ("fig3 P M=0 -> P M=0", p0, p0, ok(1, 0, 0)),
        ("fig3 P M=0 -> P M=1", p0, p1, ok(1, 0, 1)),
        ("fig3 P M=1 -> RDMAC", p1, rdmac, ok(0, 1, 1)),
        ("fig3 P M=1 -> P M=0", p1, p0, ok(1, 1, 0)),
        ("fig3 P M=1 -> P M=1", p1, p1, ok(1, 1, 1)),
        // Figure 4: non-permissive and permissive IETF.
        ("fig4 NP M=0 -> NP M=0", np0, np0, ok(1, 0, 0)),
        ("fig4 NP M=0 -> NP M=1", np0, np1, ok(1, 0, 1)),
        ("fig4 NP M=0 -> P M=0", np0, p0, ok(1, 0, 0)),
        ("fig4 NP M=0 -> P M=1", np0, p1, ok(1, 0, 1)),
        ("fig4 NP M=1 -> NP M=0", np1, np0, ok(1, 1, 0)),
        ("fig4 NP M=1 -> NP M=1", np1, np1, ok(1, 1, 1)),
        ("fig4 NP M=1 -> P M=0", np1, p0, ok(1, 1, 0)),
        ("fig4 NP M=1 -> P M=1", np1, p1, ok(1, 1, 1)),
        ("fig4 P M=0 -> NP M=0", p0, np0, ok(1, 0, 0)),
        ("fig4 P M=0 -> NP M=1", p0, np1, ok(1, 0, 1)),
        ("fig4 P M=0 -> P M=0", p0, p0, ok(1, 0, 0)),
        ("fig4 P M=0 -> P M=1", p0, p1, ok(1, 0, 1)),
        ("fig4 P M=1 -> NP M=0", p1, np0, ok(1, 1, 0)),
        ("fig4 P M=1 -> NP M=1", p1, np1, ok(1, 1, 1)),
        ("fig4 P M=1 -> P M=0", p1, p0, ok(1, 1, 0)),
        ("fig4 P M=1 -> P M=1", p1, p1, ok(1, 1, 1)),
    ]
}

#[test]
fn every_cell_of_figures_2_3_4_with_mpa_revision_1() {
    for (name, ini, resp, expected) in figures() {
        assert_eq!(run(ini, resp, 1), expected, "{name}");
    }
}

#[test]
fn every_cell_of_figures_2_3_4_with_mpa_revision_2() {
    // RFC 6581 changes the startup frames' revision and private data, not the outcome.
    for (name, ini, resp, expected) in figures() {
        assert_eq!(run(ini, resp, 2), expected, "{name} (revision 2)");
    }
}

#[test]
fn revision_2_exchanges_ird_and_ord() {
    let cfg = MpaConfig::default();
    let depths = ReadDepths { ird: 12, ord: 7 };
    let request = cfg.request(b"x", depths);
    assert_eq!(request.revision, 2);
    assert_eq!(&request.private_data[..4], &[0, 12, 0, 7]);
    let (reply, resp) = cfg.respond(&request, b"y", ReadDepths { ird: 3, ord: 5 });
    let resp = resp.unwrap();
    assert_eq!(resp.peer_enhanced.unwrap().ird, 12);
    assert_eq!(resp.peer_private_data, b"x");
    let ini = cfg.complete(&request, &reply).unwrap();
    assert_eq!(ini.peer_enhanced.unwrap().ord, 5);
    assert_eq!(ini.peer_private_data, b"y");
}

#[test]
fn revision_2_initiator_falls_back_to_a_revision_1_responder() {
    let ini = MpaConfig::default();
    let resp = MpaConfig {
        revision: 1,
        ..MpaConfig::default()
    };
    let request = ini.request(b"hi", ReadDepths::default());
    let (reply, outcome) = resp.respond(&request, b"ok", ReadDepths::default());
    assert_eq!(reply.revision, 1);
    assert_eq!(outcome.unwrap().peer_private_data, b"hi");
    let done = ini.complete(&request, &reply).unwrap();
    assert_eq!((done.peer_revision, done.version), (1, 1));
    assert_eq!(done.peer_private_data, b"ok");
}

#[test]
fn crc_is_used_when_either_side_asks() {
    let a = MpaConfig {
        crc: true,
        ..MpaConfig::default()
    };
    let b = MpaConfig {
        crc: false,
        ..MpaConfig::default()
    };
    let request = b.request(b"", ReadDepths::default());
    let (reply, outcome) = a.respond(&request, b"", ReadDepths::default());
    assert!(outcome.unwrap().crc);
    assert!(b.complete(&request, &reply).unwrap().crc);
}

#[test]
fn rejection_carries_private_data() {
    let cfg = MpaConfig::default();
    let request = cfg.request(b"", ReadDepths::default());
    let reply = cfg.reject(&request, b"no");
    assert_eq!(
        cfg.complete(&request, &reply),
        Err(Refusal::Rejected {
            private_data: b"no".to_vec()
        })
    );
}

#[test]
fn revision_2_sets_the_s_bit_and_honours_its_absence() {
    let cfg = MpaConfig::default();
    let request = cfg.request(b"pd", ReadDepths::default());
    let mut wire = vec![];
    request.emit(&mut wire);
    // RFC 6581 section 9: S bit (0x10 of the flags byte, siw's MPA_RR_FLAG_ENHANCED).
    assert_eq!(wire[16] & 0x10, 0x10);
    assert_eq!(wire[17], 2);
    // A revision 2 request without S carries no IRD/ORD words: all of it is ULP data.
    let plain = StartupFrame {
        enhanced: false,
        private_data: b"abcdef".to_vec(),
        ..request
    };
    let (reply, outcome) = cfg.respond(&plain, b"ok", ReadDepths::default());
    let outcome = outcome.unwrap();
    assert_eq!(outcome.peer_private_data, b"abcdef");
    assert_eq!(outcome.peer_enhanced, None);
    assert!(!reply.enhanced);
    assert_eq!(reply.private_data, b"ok");
}

/// A revision 2 request with the S bit and `pd` as its private data.
fn enhanced_request(pd: &[u8]) -> StartupFrame {
    StartupFrame {
        private_data: pd.to_vec(),
        ..MpaConfig::default().request(b"", ReadDepths::default())
    }
}

/// RFC 6581 section 9: the IRD/ORD words are the first four octets of revision 2 private data.
/// A request without them gets a Reply with the Reject bit, whatever the responder's flavour
/// or revision, and no accepting Reply is ever built for it.
#[test]
fn rejects_a_revision_2_request_with_short_private_data() {
    let responders = [
        MpaConfig::default(),
        MpaConfig {
            kind: Ietf,
            ..MpaConfig::default()
        },
        MpaConfig {
            revision: 1,
            ..MpaConfig::default()
        },
    ];
    for cfg in responders {
        for len in 0..ENHANCED_LEN {
            let request = enhanced_request(&[0x00, 0x04, 0x00][..len]);
            let (reply, outcome) = cfg.respond(&request, b"welcome", ReadDepths::default());
            assert!(reply.reject, "{cfg:?}, {len} bytes: an accepting Reply");
            assert_eq!(reply.kind, FrameKind::Reply);
            assert!(
                matches!(outcome, Err(Refusal::Malformed(_))),
                "{cfg:?}, {len} bytes: {outcome:?}"
            );
            // The application's private data is not sent with the rejection.
            let (_, ulp) =
                MpaConfig::split(reply.revision >= 2 && reply.enhanced, &reply.private_data)
                    .unwrap();
            assert!(ulp.is_empty(), "{cfg:?}, {len} bytes: {ulp:?}");
            assert_eq!(
                MpaConfig::malformed(&request),
                outcome.err(),
                "{cfg:?}, {len} bytes"
            );
        }
    }
    // Four octets are enough, and so is the same short data without the S bit or below
    // revision 2, where it is all ULP private data.
    let (reply, outcome) =
        MpaConfig::default().respond(&enhanced_request(&[0, 4, 0, 4]), b"", ReadDepths::default());
    assert!(!reply.reject && outcome.is_ok());
    for request in [
        StartupFrame {
            enhanced: false,
            ..enhanced_request(&[1, 2])
        },
        StartupFrame {
            revision: 1,
            ..enhanced_request(&[1, 2])
        },
    ] {
        let (reply, outcome) = MpaConfig::default().respond(&request, b"", ReadDepths::default());
        assert!(!reply.reject);
        assert_eq!(outcome.unwrap().peer_private_data, [1, 2]);
    }
}

/// The initiator's side of the same rule: a revision 2 Reply with the S bit and fewer than
/// four octets of private data is malformed, and the initiator refuses it.
#[test]
fn rejects_a_revision_2_reply_with_short_private_data() {
    let cfg = MpaConfig::default();
    let request = cfg.request(b"", ReadDepths::default());
    let (good, _) = cfg.respond(&request, b"", ReadDepths::default());
    for len in 0..ENHANCED_LEN {
        let reply = StartupFrame {
            private_data: vec![0; len],
            ..good.clone()
        };
        assert!(
            matches!(cfg.complete(&request, &reply), Err(Refusal::Malformed(_))),
            "{len} bytes"
        );
    }
    assert!(cfg.complete(&request, &good).is_ok());
}

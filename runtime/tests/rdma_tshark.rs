//! Wire-format proof: the soft provider's traffic, connection setup included, written to a
//! pcap file (with synthesized IPv4/TCP headers, one FPDU per TCP segment) and dissected by
//! Wireshark's MPA and DDP/RDMAP dissectors through `tshark`. Every frame must decode, no
//! malformed packets or expert errors, and every CRC must be good — with and without markers.
//!
//! Skips, loudly, when `tshark` is not installed (scripts/setup installs it); fails instead
//! under `CI=true` (`test_judge`).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use rpcrdma::rdma::soft::wire::mpa::Framing;
use rpcrdma::rdma::soft::{MpaConfig, PcapTap, RnicKind, SoftConfig, SoftProvider};
use rpcrdma::rdma::{
    Access, ConnectParams, Connection, Listener, Provider, RecvWr, RemoteAddr, SendWr, Sge,
};

/// Runs Sends (several sizes, segmented above the MULPDU), a Send with Solicited Event and
/// with Invalidate, RDMA Writes and RDMA Reads; returns the client's capture (a pcap file,
/// `rpcrdma::rdma::soft::pcap`) and framings.
async fn traffic(client_mpa: MpaConfig, server_mpa: MpaConfig) -> (Vec<u8>, Framing, Framing) {
    let capture = Arc::new(PcapTap::new());
    // Local completions: without confirmation probes, whose number depends on timing, the
    // streams are the same in every run. That matters with markers: Wireshark 4.0's MPA
    // dissector counts a marker at the very end of a segment (`number_of_markers` in
    // packet-iwarp-mpa.c: `(size - offset) / 512 + 1`), so it cannot dissect a stream in which an
    // FPDU ends exactly where a marker goes. One run in about 66 produced such a stream with
    // probes (the stream itself was valid: our reader parsed it). Read Requests still appear,
    // from the RDMA Reads below.
    let client = SoftProvider::new(SoftConfig {
        mpa: client_mpa,
        mulpdu: 4096,
        tap: Some(capture.clone()),
        confirm_completions: false,
        ..SoftConfig::default()
    });
    let server = SoftProvider::new(SoftConfig {
        mpa: server_mpa,
        mulpdu: 4096,
        confirm_completions: false,
        ..SoftConfig::default()
    });
    let listener = server.listen("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (c, s) = tokio::join!(
        client.connect(addr, ConnectParams::new().private_data(&b"tshark"[..])),
        listener.accept(ConnectParams::new().private_data(&b"ok"[..]))
    );
    let (c, s) = (c.unwrap(), s.unwrap());
    let n = c.negotiated().clone();
    let tx = Framing {
        markers: n.tx_markers,
        crc: n.crc,
    };
    let rx = Framing {
        markers: n.rx_markers,
        crc: n.crc,
    };

    let rbuf = s.register(vec![0; 8 * 16384], Access::LOCAL_WRITE).unwrap();
    let target = s
        .register(vec![0; 20000], Access::REMOTE_WRITE | Access::REMOTE_READ)
        .unwrap();
    for i in 0..8 {
        s.post_recv(RecvWr::new(
            i,
            Sge::new(&rbuf, i as usize * 16384..(i as usize + 1) * 16384).unwrap(),
        ))
        .unwrap();
    }
    let data = c
        .register(
            (0..20000).map(|i| (i % 251) as u8).collect(),
            Access::LOCAL_WRITE,
        )
        .unwrap();
    let sink = c.register(vec![0; 20000], Access::LOCAL_WRITE).unwrap();
    let remote = RemoteAddr::new(target.rkey(), target.addr());
    let mut posted = 0;
    for len in [0usize, 1, 3, 64, 1000, 4096, 10000] {
        c.post_send(SendWr::send(posted, vec![Sge::new(&data, 0..len).unwrap()]))
            .unwrap();
        posted += 1;
    }
    c.post_send(SendWr::write(
        posted,
        vec![Sge::new(&data, 0..20000).unwrap()],
        remote,
    ))
    .unwrap();
    posted += 1;
    c.post_send(SendWr::read(
        posted,
        Sge::new(&sink, 0..20000).unwrap(),
        remote,
    ))
    .unwrap();
    posted += 1;
    c.post_send(
        SendWr::send(posted, vec![Sge::new(&data, 0..100).unwrap()])
            .solicited()
            .with_invalidate(target.rkey()),
    )
    .unwrap();
    posted += 1;
    for _ in 0..posted {
        let done = c.poll_completion().await;
        assert!(done.is_success(), "{done:?}");
    }
    for _ in 0..8 {
        assert!(s.poll_completion().await.is_success());
    }
    c.disconnect().await.unwrap();
    drop(s);
    (capture.pcap(), tx, rx)
}

fn tshark(args: &[&str]) -> String {
    // The payloads are test patterns, not RPC-over-RDMA: keep its heuristic dissector off.
    // MPA has no port of its own: Wireshark finds it by heuristics, which by default run only
    // when no dissector claims the TCP port, and the connection's ports are real ephemeral
    // ones (a client port of 48898 once made Beckhoff's AMS claim every segment).
    let out = Command::new("tshark")
        .args(["--disable-protocol", "rpcordma"])
        .args(["-o", "tcp.try_heuristic_first:TRUE"])
        .args(args)
        .output()
        .expect("running tshark");
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Dissects `path` and checks it; `allowed` lists expert infos that are expected.
fn check(path: &Path, expect_markers: bool, crc: bool, allowed: &[&str]) {
    let file = path.to_str().unwrap();
    // Every TCP segment with payload is MPA (startup frames and FPDUs).
    let all = tshark(&[
        "-r",
        file,
        "-Y",
        "tcp.len > 0",
        "-T",
        "fields",
        "-e",
        "frame.number",
    ]);
    let mpa = tshark(&[
        "-r",
        file,
        "-Y",
        "tcp.len > 0 && iwarp_mpa",
        "-T",
        "fields",
        "-e",
        "frame.number",
    ]);
    assert_eq!(all, mpa, "segments the MPA dissector did not claim");
    let fpdus = tshark(&[
        "-r",
        file,
        "-Y",
        "iwarp_mpa.fpdu",
        "-T",
        "fields",
        "-e",
        "frame.number",
    ]);
    let ddp = tshark(&[
        "-r",
        file,
        "-Y",
        "iwarp_ddp_rdmap",
        "-T",
        "fields",
        "-e",
        "frame.number",
    ]);
    assert!(!fpdus.trim().is_empty(), "no FPDUs dissected");
    assert_eq!(fpdus, ddp, "FPDUs without a DDP/RDMAP dissection");
    // CRCs: all good, none bad; without CRCs every FPDU still has the (unchecked) field.
    let verbose = tshark(&["-r", file, "-V"]);
    let good = verbose.matches("Good CRC32").count();
    let fpdu_count = fpdus.lines().count();
    assert!(!verbose.contains("Bad CRC"), "a bad CRC");
    if crc {
        assert_eq!(good, fpdu_count, "every FPDU has a good CRC");
    } else {
        assert_eq!(good, 0, "CRCs checked on a connection without them");
        let fields = verbose.matches("CRC: 0x00000000").count();
        assert_eq!(fields, fpdu_count, "every FPDU has a zero CRC field");
    }
    if expect_markers {
        assert!(verbose.contains("Marker"), "markers were not dissected");
    }
    assert!(!verbose.contains("Malformed"), "malformed packet");
    // Expert infos: nothing above a note except the allowed ones.
    let expert = tshark(&["-r", file, "-q", "-z", "expert"]);
    let mut section = "";
    for line in expert.lines() {
        let t = line.trim();
        if t.starts_with("Errors")
            || t.starts_with("Warns")
            || t.starts_with("Notes")
            || t.starts_with("Chats")
        {
            section = t;
            continue;
        }
        if (section.starts_with("Errors") || section.starts_with("Warns"))
            && !t.is_empty()
            && !t.starts_with("Frequency")
            && !t.starts_with('=')
            && !t.starts_with("---")
        {
            assert!(
                allowed.iter().any(|a| t.contains(a)),
                "unexpected expert info in {section}: {t}\n{expert}"
            );
        }
    }
}

/// What names the judge when it is missing.
const TSHARK: &str = "tshark (Debian package tshark)";

/// Whether `tshark -v` runs with `PATH` set to `path` (`None`: the environment's).
fn tshark_on(path: Option<&std::ffi::OsStr>) -> bool {
    test_judge::program_runs("tshark", &["-v"], path)
}

/// The judge is here, or the test skips loudly; under `CI=true` it fails instead.
fn tshark_present() -> bool {
    test_judge::require(TSHARK, tshark_on(None))
}

/// Without tshark on `PATH`, a CI run fails naming tshark and scripts/setup (a wire-format
/// test whose judge never ran must not pass); elsewhere it skips.
#[test]
fn a_missing_tshark_fails_under_ci() {
    let found = tshark_on(Some(std::ffi::OsStr::new("/nonexistent")));
    assert!(!found, "no tshark can run from an empty PATH");
    assert!(
        !test_judge::require_under(TSHARK, found, false),
        "skips outside CI"
    );
    let err = std::panic::catch_unwind(|| test_judge::require_under(TSHARK, found, true))
        .expect_err("fails under CI");
    let msg = err.downcast_ref::<String>().expect("a formatted message");
    assert!(
        msg.contains("tshark") && msg.contains("scripts/setup"),
        "{msg}"
    );
}

fn ietf(markers: bool, revision: u8) -> MpaConfig {
    MpaConfig {
        kind: RnicKind::Ietf,
        markers,
        crc: true,
        revision,
    }
}

/// Without CRCs (both sides must not ask for them): the FPDUs still carry the CRC field,
/// which the dissector then shows without checking it.
fn ietf_no_crc(markers: bool, revision: u8) -> MpaConfig {
    MpaConfig {
        crc: false,
        ..ietf(markers, revision)
    }
}

async fn run_case(name: &str, client: MpaConfig, server: MpaConfig, allowed: &[&str]) {
    let (cap, tx, rx) = traffic(client, server).await;
    let dir = std::env::temp_dir().join(format!("rpcrdma-tshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.pcap"));
    std::fs::write(&path, cap).unwrap();
    assert_eq!(tx.crc, rx.crc, "CRC use is negotiated for both directions");
    check(&path, tx.markers || rx.markers, tx.crc, allowed);
    eprintln!("tshark check passed: {}", path.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tshark_decodes_crc_without_markers() {
    if !tshark_present() {
        return;
    }
    run_case("crc", ietf(false, 1), ietf(false, 1), &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tshark_decodes_fpdus_without_crc() {
    if !tshark_present() {
        return;
    }
    run_case("nocrc", ietf_no_crc(false, 1), ietf_no_crc(false, 1), &[]).await;
    run_case(
        "nocrc-markers",
        ietf_no_crc(true, 1),
        ietf_no_crc(true, 1),
        &[],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tshark_decodes_crc_with_markers_both_ways() {
    if !tshark_present() {
        return;
    }
    run_case("markers", ietf(true, 1), ietf(true, 1), &[]).await;
}

// Markers in one direction only (figure 4 cells M=0/1 and M=1/0) are not checked here:
// Wireshark 4.0's MPA dissector assumes markers in both directions as soon as either startup
// frame has M=1 (`get_state_of_first_fpdu` in packet-iwarp-mpa.c). Our own reader checks them
// (conformance suite, core tests).

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tshark_decodes_mpa_revision_2() {
    if !tshark_present() {
        return;
    }
    // Wireshark 4.0's MPA dissector knows RFC 5044 only: it warns that Rev is not 1 and that
    // the RFC 6581 S bit (reserved in RFC 5044) is set.
    run_case(
        "rev2",
        ietf(false, 2),
        ietf(false, 2),
        &[
            "Rev field is NOT set to one",
            "Res field is NOT set to zero",
        ],
    )
    .await;
}

//! Wire-format proof: the soft provider's traffic, connection setup included, written to a
//! pcap file (with synthesized IPv4/TCP headers, one FPDU per TCP segment) and dissected by
//! Wireshark's MPA and DDP/RDMAP dissectors through `tshark`. Every frame must decode, no
//! malformed packets or expert errors, and every CRC must be good — with and without markers.
//!
//! Skips, loudly, when `tshark` is not installed (scripts/setup installs it); fails instead
//! under `CI=true` (`test_judge`).

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use rpcrdma::rdma::soft::wire::mpa::{FpduReader, Framing, STARTUP_HEADER_LEN};
use rpcrdma::rdma::soft::{Direction, MpaConfig, RnicKind, SoftConfig, SoftProvider, WireTap};
use rpcrdma::rdma::{
    Access, ConnectParams, Connection, Listener, Provider, RecvWr, RemoteAddr, SendWr, Sge,
};

/// Collects both directions of one connection's stream.
#[derive(Default)]
struct Capture {
    inner: Mutex<CaptureInner>,
}

#[derive(Default)]
struct CaptureInner {
    addrs: Option<(SocketAddr, SocketAddr)>,
    sent: Vec<u8>,
    received: Vec<u8>,
}

impl WireTap for Capture {
    fn record(&self, local: SocketAddr, peer: SocketAddr, direction: Direction, bytes: &[u8]) {
        let mut c = self.inner.lock().unwrap();
        c.addrs.get_or_insert((local, peer));
        match direction {
            Direction::Sent => c.sent.extend_from_slice(bytes),
            Direction::Received => c.received.extend_from_slice(bytes),
        }
    }
}

/// Splits a direction's stream into its startup frame and FPDUs.
fn segments(stream: &[u8], framing: Framing) -> Vec<&[u8]> {
    let pd = u16::from_be_bytes([stream[18], stream[19]]) as usize;
    let first = STARTUP_HEADER_LEN + pd;
    let mut out = vec![&stream[..first]];
    let mut reader = FpduReader::new(framing, 65535);
    let mut at = first;
    while at < stream.len() {
        let f = reader
            .next(&stream[at..])
            .expect("our own stream parses")
            .expect("complete FPDU");
        out.push(&stream[at..at + f.consumed]);
        at += f.consumed;
    }
    out
}

/// A minimal classic-pcap writer for raw IPv4 packets (LINKTYPE_RAW).
struct Pcap {
    buf: Vec<u8>,
    t: u32,
}

fn checksum(data: &[u8], mut sum: u32) -> u16 {
    for pair in data.chunks(2) {
        let word = if pair.len() == 2 {
            u16::from_be_bytes([pair[0], pair[1]])
        } else {
            u16::from_be_bytes([pair[0], 0])
        };
        sum += word as u32;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl Pcap {
    fn new() -> Pcap {
        let mut buf = Vec::new();
        buf.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        buf.extend_from_slice(&2u16.to_le_bytes());
        buf.extend_from_slice(&4u16.to_le_bytes());
        buf.extend_from_slice(&0i32.to_le_bytes());
        buf.extend_from_slice(&0u32.to_le_bytes());
        buf.extend_from_slice(&65535u32.to_le_bytes());
        buf.extend_from_slice(&101u32.to_le_bytes()); // LINKTYPE_RAW
        Pcap { buf, t: 0 }
    }

    #[allow(clippy::too_many_arguments)]
    fn tcp(
        &mut self,
        src: SocketAddr,
        dst: SocketAddr,
        seq: u32,
        ack: u32,
        flags: u8,
        payload: &[u8],
    ) {
        let (SocketAddr::V4(s), SocketAddr::V4(d)) = (src, dst) else {
            panic!("IPv4 only")
        };
        let total = 40 + payload.len();
        assert!(total <= 65535, "segment too large for IPv4");
        let mut tcp = Vec::with_capacity(20 + payload.len());
        tcp.extend_from_slice(&s.port().to_be_bytes());
        tcp.extend_from_slice(&d.port().to_be_bytes());
        tcp.extend_from_slice(&seq.to_be_bytes());
        tcp.extend_from_slice(&ack.to_be_bytes());
        tcp.push(5 << 4);
        tcp.push(flags);
        tcp.extend_from_slice(&65535u16.to_be_bytes());
        tcp.extend_from_slice(&[0, 0, 0, 0]);
        tcp.extend_from_slice(payload);
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&s.ip().octets());
        pseudo.extend_from_slice(&d.ip().octets());
        pseudo.extend_from_slice(&[0, 6]);
        pseudo.extend_from_slice(&(tcp.len() as u16).to_be_bytes());
        let mut sum = 0u32;
        for pair in pseudo.chunks(2) {
            sum += u16::from_be_bytes([pair[0], pair[1]]) as u32;
        }
        let c = checksum(&tcp, sum);
        tcp[16..18].copy_from_slice(&c.to_be_bytes());
        let mut ip = vec![0x45, 0];
        ip.extend_from_slice(&(total as u16).to_be_bytes());
        ip.extend_from_slice(&[0, 0, 0x40, 0, 64, 6, 0, 0]);
        ip.extend_from_slice(&s.ip().octets());
        ip.extend_from_slice(&d.ip().octets());
        let c = checksum(&ip, 0);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        ip.extend_from_slice(&tcp);
        self.t += 1;
        self.buf
            .extend_from_slice(&(1_700_000_000u32).to_le_bytes());
        self.buf.extend_from_slice(&self.t.to_le_bytes());
        self.buf.extend_from_slice(&(ip.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(&(ip.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(&ip);
    }
}

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const PSH: u8 = 0x08;
const FIN: u8 = 0x01;

/// Writes the connection as a TCP conversation: handshake, the client's startup frame, the
/// server's, then the FPDUs of each direction (client first), then FINs.
fn write_pcap(path: &Path, cap: &CaptureInner, tx: Framing, rx: Framing) {
    let (client, server) = cap.addrs.expect("traffic was recorded");
    let out = segments(&cap.sent, tx);
    let inn = segments(&cap.received, rx);
    let mut p = Pcap::new();
    let (mut cseq, mut sseq) = (1000u32, 5000u32);
    p.tcp(client, server, cseq, 0, SYN, &[]);
    p.tcp(server, client, sseq, cseq + 1, SYN | ACK, &[]);
    cseq += 1;
    sseq += 1;
    p.tcp(client, server, cseq, sseq, ACK, &[]);
    let send = |p: &mut Pcap, from_client: bool, seg: &[u8], cseq: &mut u32, sseq: &mut u32| {
        if from_client {
            p.tcp(client, server, *cseq, *sseq, PSH | ACK, seg);
            *cseq = cseq.wrapping_add(seg.len() as u32);
        } else {
            p.tcp(server, client, *sseq, *cseq, PSH | ACK, seg);
            *sseq = sseq.wrapping_add(seg.len() as u32);
        }
    };
    send(&mut p, true, out[0], &mut cseq, &mut sseq);
    send(&mut p, false, inn[0], &mut cseq, &mut sseq);
    for seg in &out[1..] {
        send(&mut p, true, seg, &mut cseq, &mut sseq);
    }
    for seg in &inn[1..] {
        send(&mut p, false, seg, &mut cseq, &mut sseq);
    }
    p.tcp(client, server, cseq, sseq, FIN | ACK, &[]);
    p.tcp(server, client, sseq, cseq + 1, FIN | ACK, &[]);
    p.tcp(client, server, cseq + 1, sseq + 1, ACK, &[]);
    std::fs::write(path, &p.buf).unwrap();
}

/// Runs Sends (several sizes, segmented above the MULPDU), a Send with Solicited Event and
/// with Invalidate, RDMA Writes and RDMA Reads; returns the client's capture and framings.
async fn traffic(client_mpa: MpaConfig, server_mpa: MpaConfig) -> (CaptureInner, Framing, Framing) {
    let capture = Arc::new(Capture::default());
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
    let inner = std::mem::take(&mut *capture.inner.lock().unwrap());
    (inner, tx, rx)
}

fn tshark(args: &[&str]) -> String {
    // The payloads are test patterns, not RPC-over-RDMA: keep its heuristic dissector off.
    let out = Command::new("tshark")
        .args(["--disable-protocol", "rpcordma"])
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
    write_pcap(&path, &cap, tx, rx);
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

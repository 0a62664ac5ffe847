//! An extension written to the draft's section 9 conventions (`ext/ping.x`: a header type,
//! a transport property, an error code, a flag) is dissected by a dissector generated from
//! `common.x + baseops.x + ping.x`, with no change to xdrgen; the shipped dissector, made
//! without it, shows the same frames as unknown, not malformed. The ping's members take
//! most XDR shapes, so this also runs the generic part of the generated Lua in tshark.

use bytes::{BufMut, Bytes, BytesMut};
use wireshark_tests::tshark::{self, Tshark};
use wireshark_tests::{save, scratch, shipped_dissector, v2, workspace};

/// The dissector for version 2 with the ping extension, generated now.
fn ping_dissector() -> std::path::PathBuf {
    let ws = workspace();
    let lua = rpcrdma_xdrgen::Config::new()
        .dissector(&[&[
            ws.join("specs/common.x"),
            ws.join("specs/baseops.x"),
            ws.join("tests/wireshark/ext/ping.x"),
        ][..]])
        .expect("the extension compiles with the base protocol");
    let path = scratch().join("rpcrdma-ping.lua");
    std::fs::write(&path, lua).unwrap();
    path
}

const RDMA2_PING: u32 = 6;
const RDMA2_PROPID_MAXSEG: u32 = 3;
const RDMA2_ERR_PING: u32 = 10;
const RPCRDMA2_F_PINGED: u32 = 2;

fn prefix(b: &mut BytesMut, xid: u32, htype: u32, flags: u32) {
    for w in [xid, 2, 8, htype, flags] {
        b.put_u32(w);
    }
}

/// An RDMA2_PING of `kind`: cookie, kind, note "hello", tag 01 02 03, scores -1 and 7, a
/// route of two hops, a timed ping sent at 123456789 ns, a TTL of 64.
fn ping(xid: u32, kind: u32, flags: u32) -> Bytes {
    let mut b = BytesMut::new();
    prefix(&mut b, xid, RDMA2_PING, flags);
    b.put_u64(0x0123_4567_89ab_cdef);
    b.put_u32(kind);
    b.put_u32(5);
    b.put_slice(b"hello\0\0\0");
    b.put_slice(&[1, 2, 3, 0]);
    b.put_i32(-1);
    b.put_i32(7);
    for node in [10, 20] {
        b.put_u32(1);
        b.put_u32(node);
    }
    b.put_u32(0);
    b.put_u32(1);
    b.put_i64(123_456_789);
    b.put_u32(1);
    b.put_u32(64);
    b.freeze()
}

const RDMA2_TRACE: u32 = 7;

/// An RDMA2_TRACE whose tree is `depth` nodes down the left, each node's hop its depth, and
/// one right child at the root.
fn trace(xid: u32, depth: u32) -> Bytes {
    let mut b = BytesMut::new();
    prefix(&mut b, xid, RDMA2_TRACE, 0);
    fn node(b: &mut BytesMut, hop: u32, depth: u32, right: bool) {
        b.put_u32(hop);
        if hop < depth {
            b.put_u32(1);
            node(b, hop + 1, depth, false);
        } else {
            b.put_u32(0);
        }
        if right {
            b.put_u32(1);
            node(b, 100, 100, false);
        } else {
            b.put_u32(0);
        }
    }
    node(&mut b, 1, depth, true);
    b.freeze()
}

fn payloads() -> Vec<(bool, Bytes)> {
    let mut connprop = BytesMut::new();
    prefix(&mut connprop, 0x301, 5, 0);
    for w in [1, RDMA2_PROPID_MAXSEG, 4, 16] {
        connprop.put_u32(w);
    }
    let mut error = BytesMut::new();
    prefix(&mut error, 0x302, 4, 1);
    error.put_u32(RDMA2_ERR_PING);
    vec![
        (true, connprop.freeze()),
        (true, ping(0x303, 2, RPCRDMA2_F_PINGED)),
        (false, error.freeze()),
        // 9 is not a value of enum rpcrdma2_ping_kind: a warning, not malformed.
        (true, ping(0x304, 9, 0)),
        (true, trace(0x305, 3)),
        // Nested deeper than the dissector follows: malformed, not a stack overflow.
        (true, trace(0x306, 40)),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_is_dissected_from_its_xdr_alone() {
    if !tshark::present() {
        return;
    }
    let pcap = save("ping.pcap", &v2::send_payloads(&payloads()).await);
    let with = Tshark::new(&pcap).lua(ping_dissector());
    let fields = [
        "rpcrdma.xid",
        "rpcrdma.htype",
        "rpcrdma.flags.pinged",
        "rpcrdma.rpcrdma2_prop_maxseg",
        "rpcrdma.rpcrdma2_error.rdma_err",
        "rpcrdma.rpcrdma2_ping.rdma_cookie",
        "rpcrdma.rpcrdma2_ping.rdma_kind",
        "rpcrdma.rpcrdma2_ping.rdma_note",
        "rpcrdma.rpcrdma2_ping.rdma_tag",
        "rpcrdma.rpcrdma2_ping.rdma_scores",
        "rpcrdma.rpcrdma2_hop.rdma_node",
        "rpcrdma.rpcrdma2_ping_time.rdma_timed",
        "rpcrdma.rpcrdma2_ping_time.rdma_sent_ns",
        "rpcrdma.rpcrdma2_ping.rdma_ttl",
        "rpcrdma.rpcrdma2_trace.rdma_hop",
        "rpcrdma.expert.malformed",
    ];
    let frames = with.fields("rpcrdma.xid", &fields);
    assert_eq!(frames.len(), 6);
    // Depth first: the root, its left subtree, then its right child.
    assert_eq!(
        frames[4].numbers("rpcrdma.rpcrdma2_trace.rdma_hop"),
        [1, 2, 3, 100]
    );
    assert!(!frames[4].has("rpcrdma.expert.malformed"));
    assert!(frames[5].has("rpcrdma.expert.malformed"));
    let (prop, ping, err, odd) = (&frames[0], &frames[1], &frames[2], &frames[3]);
    assert_eq!(prop.one("rpcrdma.rpcrdma2_prop_maxseg"), 16);
    assert_eq!(
        err.one("rpcrdma.rpcrdma2_error.rdma_err"),
        u64::from(RDMA2_ERR_PING)
    );
    assert_eq!(ping.one("rpcrdma.htype"), u64::from(RDMA2_PING));
    assert_eq!(ping.one("rpcrdma.flags.pinged"), 1);
    assert_eq!(
        ping.one("rpcrdma.rpcrdma2_ping.rdma_cookie"),
        0x0123_4567_89ab_cdef
    );
    assert_eq!(ping.one("rpcrdma.rpcrdma2_ping.rdma_kind"), 2);
    assert_eq!(ping.all("rpcrdma.rpcrdma2_ping.rdma_note"), ["hello"]);
    assert_eq!(
        ping.all("rpcrdma.rpcrdma2_ping.rdma_tag")[0].replace(':', ""),
        "010203"
    );
    assert_eq!(ping.all("rpcrdma.rpcrdma2_ping.rdma_scores"), ["-1", "7"]);
    assert_eq!(ping.numbers("rpcrdma.rpcrdma2_hop.rdma_node"), [10, 20]);
    assert_eq!(ping.one("rpcrdma.rpcrdma2_ping_time.rdma_timed"), 1);
    assert_eq!(
        ping.one("rpcrdma.rpcrdma2_ping_time.rdma_sent_ns"),
        123_456_789
    );
    assert_eq!(ping.one("rpcrdma.rpcrdma2_ping.rdma_ttl"), 64);
    assert_eq!(odd.one("rpcrdma.rpcrdma2_ping.rdma_kind"), 9);
    let tree = with.verbose();
    for text in [
        "Header type: RDMA2_PING (6)",
        "rdma_which: RDMA2_PROPID_MAXSEG (3)",
        "rdma_err: RDMA2_ERR_PING (10)",
        "RPCRDMA2_F_PINGED: True",
        "rdma_kind: PING_TIMED (2)",
        "rdma_route: 2 entries",
    ] {
        assert!(tree.contains(text), "`{text}` not shown");
    }
    let ex = with.experts();
    assert_eq!(ex.errors.len(), 1, "{}", ex.report);
    assert!(
        ex.errors[0].contains("rpcrdma2_trace: nested more than 24 deep"),
        "{}",
        ex.report
    );
    assert_eq!(ex.warnings.len(), 1, "{}", ex.report);
    assert!(
        ex.warnings[0].contains("rdma_kind: 9 is not a value of its enum"),
        "{}",
        ex.report
    );
    assert!(
        ex.notes.iter().all(|n| !n.contains("RPCRDMA")),
        "{}",
        ex.report
    );

    // Without the extension: its parts are unknown (notes), nothing is malformed; the ping
    // with the extension's flag set is not taken at all, its flag being a reserved bit to a
    // dissector that does not know it (sections 3.2, 9.4).
    let without = Tshark::new(&pcap).lua(shipped_dissector());
    let xids: Vec<u64> = without
        .fields("rpcrdma.xid", &["rpcrdma.xid"])
        .iter()
        .map(|f| f.one("rpcrdma.xid"))
        .collect();
    assert_eq!(xids, [0x301, 0x302, 0x304, 0x305, 0x306]);
    let ex = without.experts();
    assert!(ex.errors.is_empty(), "{}", ex.report);
    assert!(ex.warnings.is_empty(), "{}", ex.report);
    for note in ["unknown property 3", "header type 6", "header type 7"] {
        assert!(
            ex.notes.iter().any(|n| n.contains(note)),
            "{note}: {}",
            ex.report
        );
    }
}

//! Hostile and truncated frames: the generated dissector reports each as malformed (an
//! expert info of group Malformed, what was read still shown), never with a Lua error
//! (`Tshark::run` fails on one), never through an exception of Wireshark's ("Malformed
//! Packet"), and never by taking frames that are not RPC-over-RDMA.

use bytes::{BufMut, Bytes, BytesMut};
use wireshark_tests::tshark::{self, Tshark};
use wireshark_tests::v2::{self, Body};
use wireshark_tests::{save, shipped_dissector};

fn words(w: &[u32]) -> Bytes {
    let mut b = BytesMut::new();
    for x in w {
        b.put_u32(*x);
    }
    b.freeze()
}

fn with_tail(w: &[u32], tail: &[u8]) -> Bytes {
    let mut b = BytesMut::from(&words(w)[..]);
    b.put_slice(tail);
    b.freeze()
}

/// No frame ends in an exception of Wireshark's (an uncaught bounds error shows as
/// "[Malformed Packet: ...]"; the dissector's own reports are expert infos).
fn no_exception(t: &Tshark) {
    let tree = t.verbose();
    assert!(
        !tree.contains("[Malformed Packet"),
        "an exception:\n{}",
        tree.lines()
            .filter(|l| l.contains("Malformed Packet"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// (what, payload, the text the malformed expert info must contain)
fn hostile() -> Vec<(&'static str, Bytes, &'static str)> {
    vec![
        (
            "v2 RDMA2_CONNPROP announcing 3 properties, carrying 1",
            words(&[0x100, 2, 1, 5, 0, 3, 1, 4, 4096]),
            "rdma_props: 3 elements of at least 8 bytes do not fit in the 12 bytes left",
        ),
        (
            "v2 RDMA2_NOMSG whose read segment stops after its handle",
            words(&[0x101, 2, 1, 1, 0, 0, 1, 0, 0x1234]),
            "rdma_reads: a read segment ends early",
        ),
        (
            "v1 RDMA_NOMSG with a Write chunk of 2^32 - 1 segments",
            words(&[0x102, 1, 1, 1, 0, 1, 0xffff_ffff, 1, 2, 0, 0]),
            "Write chunk 1: 4294967295 segments announced, room for 1",
        ),
        (
            "v2 RDMA2_ERROR RDMA2_ERR_VERS without its version range",
            words(&[0x103, 2, 1, 4, 1, 1]),
            "rdma_vers_low",
        ),
        (
            "v2 RDMA2_CONNPROP whose RBSIZ value is 2 bytes, not a uint32",
            with_tail(&[0x104, 2, 1, 5, 0, 1, 1, 2], &[0x10, 0x00, 0, 0]),
            "RDMA2_PROPID_RBSIZ: rdma_data is not a rpcrdma2_prop_rbsiz",
        ),
        (
            "v1 RDMA_NOMSG whose Read list says 7 where XDR allows 0 or 1",
            words(&[0x105, 1, 1, 1, 7]),
            "7 where XDR allows only 0 or 1",
        ),
        (
            "v1 RDMA_ERROR with nothing after the four words",
            words(&[0x106, 1, 1, 4]),
            "err: 4 bytes needed at offset 16, 0 left",
        ),
        (
            "v1 RDMA_ERROR with an error code the union has no arm for",
            words(&[0x107, 1, 1, 4, 9]),
            "rpcrdma1_error: no arm for err 9",
        ),
        (
            "v2 RDMA2_CONNPROP of garbage: 2^32 - 1 properties",
            with_tail(&[0x108, 2, 1, 5, 0, 0xffff_ffff], &[0xa5; 40]),
            "4294967295 elements of at least 8 bytes do not fit",
        ),
        (
            "v2 RDMA2_CONNPROP whose property's data length runs past the frame",
            words(&[0x109, 2, 1, 5, 0, 1, 0x7777, 1000, 1]),
            "rdma_data: 1000 bytes needed",
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_headers_are_malformed_not_lua_errors() {
    if !tshark::present() {
        return;
    }
    let cases = hostile();
    let payloads: Vec<(bool, Bytes)> = cases.iter().map(|c| (true, c.1.clone())).collect();
    let pcap = save("hostile.pcap", &v2::send_payloads(&payloads).await);
    let ours = Tshark::new(&pcap)
        .lua(shipped_dissector())
        .disable("rpcordma");
    let frames = ours.fields(
        "rpcrdma.xid",
        &[
            "rpcrdma.xid",
            "rpcrdma.expert.malformed",
            "_ws.expert.message",
        ],
    );
    assert_eq!(frames.len(), cases.len(), "every hostile header is taken");
    no_exception(&ours);
    for (f, (what, _, text)) in frames.iter().zip(&cases) {
        let messages = f.all("_ws.expert.message").join(" / ");
        assert!(
            f.has("rpcrdma.expert.malformed") && messages.contains(text),
            "{what}: frame {} says `{messages}`, expected `{text}`",
            f.number
        );
    }
    let ex = ours.experts();
    assert_eq!(ex.errors.len(), cases.len(), "{}", ex.report);
}

/// Every shorter prefix of the scenario's headers that carry no RPC message (an RDMA2_MSG
/// cut short is not taken for RPC-over-RDMA at all, as Wireshark's own dissector does for
/// version 1) is malformed, and nothing else is wrong with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_cut_header_is_malformed() {
    if !tshark::present() {
        return;
    }
    let mut payloads = Vec::new();
    for sent in v2::scenario() {
        if matches!(sent.body, Body::Msg(..) | Body::Other(_)) {
            continue;
        }
        let whole = sent.encode();
        // From the shortest header the heuristic takes (the prefix's 20 bytes).
        for len in 20..whole.len() {
            payloads.push((true, whole.slice(..len)));
        }
    }
    let pcap = save("cut.pcap", &v2::send_payloads(&payloads).await);
    let ours = Tshark::new(&pcap).lua(shipped_dissector());
    let frames = ours.fields("rpcrdma.xid", &["rpcrdma.xid", "rpcrdma.expert.malformed"]);
    assert_eq!(frames.len(), payloads.len(), "every cut header is taken");
    let whole_lengths: Vec<usize> = payloads.iter().map(|p| p.1.len()).collect();
    no_exception(&ours);
    let malformed = frames
        .iter()
        .filter(|f| f.has("rpcrdma.expert.malformed"))
        .count();
    assert_eq!(
        malformed,
        frames.len(),
        "every cut header is malformed ({} payloads of lengths {:?})",
        payloads.len(),
        whole_lengths
    );
}

/// Sends that are not RPC-over-RDMA (another version, a version 2 header with reserved
/// flags) are left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_payloads_are_not_taken() {
    if !tshark::present() {
        return;
    }
    let payloads = vec![
        (true, words(&[0x200, 3, 1, 0, 0, 0, 0, 0])),
        (true, words(&[0x201, 2, 1, 5, 0x8000_0000, 0])),
        (true, words(&[0x202, 1, 1, 9])),
        (
            true,
            Bytes::from_static(b"not RPC-over-RDMA at all, only text"),
        ),
        // RDMA_MSG whose RPC message has another XID (Wireshark's own rule).
        (true, words(&[0x203, 1, 1, 0, 0, 0, 0, 0x999, 0])),
    ];
    let pcap = save("others.pcap", &v2::send_payloads(&payloads).await);
    let ours = Tshark::new(&pcap)
        .lua(shipped_dissector())
        .disable("rpcordma");
    assert!(ours.fields("rpcrdma", &["rpcrdma.xid"]).is_empty());
}

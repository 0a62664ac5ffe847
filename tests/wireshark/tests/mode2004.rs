//! The 2004 protocol (seed 000) of `rpcrdma::transport` (`RdmaConfig::mode_2004` on both
//! ends) through the generated dissector: the configuration call first, as RDMA_MSGP with
//! its alignment and threshold, then Read-Read replies each followed by the client's
//! RDMA_DONE with the reply's XID, no Write or Reply chunk offered by the client, nothing
//! malformed; Wireshark's own dissector sees the same message types, nothing malformed.

use rpcrdma::transport::mode2004::Mode2004;
use rpcrdma::transport::RdmaConfig;
use wireshark_tests::tshark::{self, Tshark};
use wireshark_tests::{save, shipped_dissector, v1};

/// RDMA_MSGP and RDMA_DONE (seed 000 section 4.2).
const RDMA_MSGP: u64 = 2;
const RDMA_DONE: u64 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_2004_mode_as_tshark_sees_it() {
    if !tshark::present() {
        return;
    }
    let mode = Mode2004::default();
    let pad = mode.padding.expect("the default mode pads");
    let pcap = v1::capture_with(RdmaConfig::default().mode_2004(mode)).await;
    let pcap = save("mode2004-transport.pcap", &pcap);
    let ours = Tshark::new(&pcap)
        .lua(shipped_dissector())
        .disable("rpcordma");
    let frames = ours.fields(
        "rpcrdma.xid",
        &[
            "tcp.srcport",
            "rpcrdma.xid",
            "rpcrdma.vers",
            "rpcrdma.htype",
            "rpcrdma.rpcrdma1_padded.rdma_align",
            "rpcrdma.rpcrdma1_padded.rdma_thresh",
            "rpcrdma.reads",
            "rpcrdma.writes",
            "rpcrdma.reply",
        ],
    );
    assert!(frames.len() >= 10, "{} frames", frames.len());
    assert!(
        frames.iter().all(|f| f.one("rpcrdma.vers") == 1),
        "version 1 headers"
    );
    // Seed 000 section 6.1: the configuration call is the connection's first, RDMA_MSGP with
    // this side's padding. (Wireshark's RPC dissector decodes calls of programs it knows only,
    // so the program number is checked by the transport's own tests.)
    let first = &frames[0];
    assert_eq!(first.one("rpcrdma.htype"), RDMA_MSGP);
    assert_eq!(
        first.one("rpcrdma.rpcrdma1_padded.rdma_align"),
        pad.align as u64
    );
    assert_eq!(
        first.one("rpcrdma.rpcrdma1_padded.rdma_thresh"),
        pad.thresh as u64
    );
    let client = first.one("tcp.srcport");
    let mut exposed = Vec::new();
    let mut dones = 0;
    for f in &frames {
        let from_client = f.one("tcp.srcport") == client;
        let htype = f.one("rpcrdma.htype");
        if from_client && htype == RDMA_DONE {
            // "the client ... signal[s] the server that it has received the chunks": the
            // XID of a reply that exposed Read chunks, after it.
            let xid = f.one("rpcrdma.xid");
            assert!(
                exposed.contains(&xid),
                "frame {}: RDMA_DONE for {xid:#x}",
                f.number
            );
            dones += 1;
        } else if from_client {
            assert_eq!(
                f.one("rpcrdma.writes"),
                0,
                "frame {}: a Write chunk",
                f.number
            );
            assert_eq!(
                f.one("rpcrdma.reply"),
                0,
                "frame {}: a Reply chunk",
                f.number
            );
        } else if f.one("rpcrdma.reads") > 0 {
            exposed.push(f.one("rpcrdma.xid"));
        }
    }
    // ECHO's result and BIG's long reply (section 5.1, at Position zero).
    assert!(exposed.len() >= 2, "{} Read-Read replies", exposed.len());
    assert_eq!(dones, exposed.len(), "one RDMA_DONE per Read-Read reply");
    let ex = ours.experts();
    assert!(ex.errors.is_empty(), "{}", ex.report);
    assert!(!ours.verbose().contains("Malformed"), "a malformed packet");
    // Wireshark's own dissector, which knows RDMA_MSGP and RDMA_DONE, sees the same types.
    let theirs = Tshark::new(&pcap);
    let types: Vec<u64> = theirs
        .fields("rpcordma", &["rpcordma.msg_type"])
        .iter()
        .map(|f| f.one("rpcordma.msg_type"))
        .collect();
    let ours_types: Vec<u64> = frames.iter().map(|f| f.one("rpcrdma.htype")).collect();
    assert_eq!(types, ours_types);
    assert!(
        !theirs.verbose().contains("Malformed"),
        "malformed for rpcordma"
    );
}

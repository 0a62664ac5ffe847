//! Version 1 through two judges: the traffic of `rpcrdma::transport` (inline calls, Read
//! chunks at one and two Positions, a Write chunk, a Reply chunk, a long call) dissected
//! once by Wireshark's own RPC-over-RDMA dissector (`rpcordma`) and once by the one xdrgen
//! generates (`dissectors/rpcrdma.lua`, with `rpcordma` disabled). Both must see the same
//! headers frame by frame, and neither may find anything malformed.

use wireshark_tests::tshark::{self, Frame, Tshark};
use wireshark_tests::{save, shipped_dissector, v1};

/// One header as a dissector showed it: the four words, each Read segment with its Position
/// (sorted: the generated dissector groups them by chunk), the Write and Reply chunks'
/// segments in order, and the chunk counts.
#[derive(Debug, PartialEq, Eq)]
struct Header {
    frame: u32,
    xid: u64,
    vers: u64,
    credit: u64,
    proc_: u64,
    reads: Vec<(u64, u64, u64, u64)>,
    write_and_reply: Vec<(u64, u64, u64)>,
    segment_counts: Vec<u64>,
    writes: u64,
    reply: u64,
}

/// The field names of one dissector, in `Header` order.
struct Names {
    filter: &'static str,
    fields: [&'static str; 11],
}

const THEIRS: Names = Names {
    filter: "rpcordma.xid",
    fields: [
        "rpcordma.xid",
        "rpcordma.version",
        "rpcordma.flow_control",
        "rpcordma.msg_type",
        "rpcordma.position",
        "rpcordma.rdma_handle",
        "rpcordma.rdma_length",
        "rpcordma.rdma_offset",
        "rpcordma.segment_count",
        "rpcordma.writes_count",
        "rpcordma.reply_count",
    ],
};

const OURS: Names = Names {
    filter: "rpcrdma.xid",
    fields: [
        "rpcrdma.xid",
        "rpcrdma.vers",
        "rpcrdma.credit",
        "rpcrdma.htype",
        "rpcrdma.position",
        "rpcrdma.handle",
        "rpcrdma.length",
        "rpcrdma.offset",
        "rpcrdma.segments",
        "rpcrdma.writes",
        "rpcrdma.reply",
    ],
};

fn header(f: &Frame, n: &Names) -> Header {
    let [xid, vers, credit, proc_, pos, handle, len, off, segs, writes, reply] = n.fields;
    let positions = f.numbers(pos);
    let (h, l, o) = (f.numbers(handle), f.numbers(len), f.numbers(off));
    assert!(
        h.len() == l.len() && l.len() == o.len() && positions.len() <= h.len(),
        "frame {}: segments do not add up",
        f.number
    );
    let r = positions.len();
    let mut reads: Vec<_> = (0..r).map(|i| (positions[i], h[i], l[i], o[i])).collect();
    reads.sort_unstable();
    Header {
        frame: f.number,
        xid: f.one(xid),
        vers: f.one(vers),
        credit: f.one(credit),
        proc_: f.one(proc_),
        reads,
        write_and_reply: (r..h.len()).map(|i| (h[i], l[i], o[i])).collect(),
        segment_counts: f.numbers(segs),
        writes: f.one(writes),
        reply: f.one(reply),
    }
}

fn headers(t: &Tshark, n: &Names) -> Vec<Header> {
    t.fields(n.filter, &n.fields)
        .iter()
        .map(|f| header(f, n))
        .collect()
}

/// Nothing malformed and no expert errors (only TCP's connection notes are expected).
fn clean(t: &Tshark, who: &str) {
    let ex = t.experts();
    assert!(ex.errors.is_empty(), "{who}: expert errors\n{}", ex.report);
    assert!(
        ex.warnings.is_empty(),
        "{who}: expert warnings\n{}",
        ex.report
    );
    let tree = t.verbose();
    assert!(!tree.contains("Malformed"), "{who}: a malformed packet");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_1_shows_the_same_headers_with_both_dissectors() {
    if !tshark::present() {
        return;
    }
    let pcap = save("v1.pcap", &v1::capture().await);
    let theirs = Tshark::new(&pcap);
    let ours = Tshark::new(&pcap)
        .lua(shipped_dissector())
        .disable("rpcordma");
    let t = headers(&theirs, &THEIRS);
    let o = headers(&ours, &OURS);
    assert_eq!(
        t.iter().map(|h| h.frame).collect::<Vec<_>>(),
        o.iter().map(|h| h.frame).collect::<Vec<_>>(),
        "the dissectors took different frames for RPC-over-RDMA"
    );
    for (a, b) in t.iter().zip(&o) {
        assert_eq!(a, b, "frame {}: Wireshark's dissector, then ours", a.frame);
    }
    // The traffic has what the comparison is about: 5 calls and their replies, RDMA_MSG and
    // RDMA_NOMSG, Read chunks at two Positions in one call and at Position zero (the long
    // call), a Write chunk and a Reply chunk.
    assert_eq!(o.len(), 10, "{o:#?}");
    assert!(o.iter().all(|h| h.vers == 1));
    assert!(o.iter().any(|h| h.proc_ == 1), "an RDMA_NOMSG");
    assert!(o.iter().any(|h| {
        let mut p: Vec<_> = h.reads.iter().map(|r| r.0).collect();
        p.dedup();
        p.len() == 2
    }));
    assert!(o.iter().any(|h| h.reads.iter().any(|r| r.0 == 0)));
    assert!(o.iter().any(|h| h.writes == 1));
    assert!(o.iter().any(|h| h.reply == 1));
    clean(&theirs, "Wireshark's dissector");
    clean(&ours, "the generated dissector");
}

//! Version 2 through the generated dissector (`dissectors/rpcrdma.lua`): every transport
//! message of [`v2::capture`] shows exactly the fields and values it was sent with (the
//! prefix, chunks grouped into Read, Write and Reply chunks, properties dissected by their
//! own types, error codes with their arms), the RPC message after an RDMA2_MSG reaches ONC
//! RPC, and nothing is malformed. Wireshark's own dissector refuses version 2.

use std::collections::BTreeMap;

use rpcrdma_specs::v2::{
    Rpcrdma2ChunkLists, Rpcrdma2Error, RDMA2_PROPID_BRS, RDMA2_PROPID_RBSIZ, RPCRDMA2_F_RESPONSE,
};
use wireshark_tests::tshark::{self, Frame, Tshark};
use wireshark_tests::v2::{self, Body, Sent};
use wireshark_tests::{save, shipped_dissector};

/// The numeric fields compared.
const FIELDS: &[&str] = &[
    "rpcrdma.xid",
    "rpcrdma.vers",
    "rpcrdma.credit",
    "rpcrdma.htype",
    "rpcrdma.flags",
    "rpcrdma.flags.response",
    "rpcrdma.rpcrdma2_chunk_lists.rdma_inv_handle",
    "rpcrdma.reads",
    "rpcrdma.position",
    "rpcrdma.handle",
    "rpcrdma.length",
    "rpcrdma.offset",
    "rpcrdma.writes",
    "rpcrdma.segments",
    "rpcrdma.reply",
    "rpcrdma.chunk_length",
    "rpcrdma.rpcrdma2_connprop.rdma_props.count",
    "rpcrdma.rpcrdma2_propval.rdma_which",
    "rpcrdma.rpcrdma2_propval.rdma_data.len",
    "rpcrdma.rpcrdma2_prop_rbsiz",
    "rpcrdma.rpcrdma2_prop_brs",
    "rpcrdma.rpcrdma2_error.rdma_err",
    "rpcrdma.rpcrdma2_err_vers.rdma_vers_low",
    "rpcrdma.rpcrdma2_err_vers.rdma_vers_high",
    "rpcrdma.rpcrdma2_err_write.rdma_chunk_index",
    "rpcrdma.rpcrdma2_err_write.rdma_length_needed",
    "rpcrdma.rpcrdma2_error.rdma_max_chunks",
    "rpcrdma.rpcrdma2_error.rdma_max_segments",
    "rpcrdma.rpcrdma2_error.rdma_length_needed",
    "rpc.xid",
    "rpc.msgtyp",
];

/// The byte fields compared (as hex digits).
const BYTES: &[&str] = &["rpcrdma.rpcrdma2_propval.rdma_data", "rpcrdma.body"];

type Shown = BTreeMap<String, Vec<String>>;

fn put(m: &mut Shown, field: &str, values: impl IntoIterator<Item = u64>) {
    let values: Vec<String> = values.into_iter().map(|v| v.to_string()).collect();
    if !values.is_empty() {
        m.entry(field.to_string()).or_default().extend(values);
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// What the chunk views show: Read segments grouped by Position (first appearance order),
/// then the Write chunks, then the Reply chunk.
fn chunks(m: &mut Shown, c: &Rpcrdma2ChunkLists) {
    put(
        m,
        "rpcrdma.rpcrdma2_chunk_lists.rdma_inv_handle",
        [c.rdma_inv_handle.into()],
    );
    let mut groups: Vec<(u32, Vec<_>)> = Vec::new();
    for r in &c.rdma_reads {
        let e = &r.rdma_entry;
        match groups.iter_mut().find(|g| g.0 == e.rdma_position) {
            Some(g) => g.1.push(e.rdma_target),
            None => groups.push((e.rdma_position, vec![e.rdma_target])),
        }
    }
    put(m, "rpcrdma.reads", [groups.len() as u64]);
    let mut segs = Vec::new();
    for (pos, g) in &groups {
        put(m, "rpcrdma.position", g.iter().map(|_| u64::from(*pos)));
        put(
            m,
            "rpcrdma.chunk_length",
            [g.iter().map(|s| u64::from(s.rdma_length)).sum()],
        );
        segs.extend(g.iter().copied());
    }
    put(m, "rpcrdma.writes", [c.rdma_writes.len() as u64]);
    let written = c.rdma_writes.iter().map(|w| &w.rdma_entry);
    for w in written.chain(&c.rdma_reply) {
        put(m, "rpcrdma.segments", [w.rdma_target.len() as u64]);
        put(
            m,
            "rpcrdma.chunk_length",
            [w.rdma_target.iter().map(|s| u64::from(s.rdma_length)).sum()],
        );
        segs.extend(w.rdma_target.iter().copied());
    }
    put(m, "rpcrdma.reply", [u64::from(c.rdma_reply.is_some())]);
    put(
        m,
        "rpcrdma.handle",
        segs.iter().map(|s| s.rdma_handle.into()),
    );
    put(
        m,
        "rpcrdma.length",
        segs.iter().map(|s| s.rdma_length.into()),
    );
    put(m, "rpcrdma.offset", segs.iter().map(|s| s.rdma_offset));
}

/// What the generated dissector must show for `s`.
fn expected(s: &Sent) -> Shown {
    let mut m = Shown::new();
    let p = &s.prefix;
    put(&mut m, "rpcrdma.xid", [p.rdma_start.rdma_xid.into()]);
    put(&mut m, "rpcrdma.vers", [p.rdma_start.rdma_vers.into()]);
    put(&mut m, "rpcrdma.credit", [p.rdma_start.rdma_credit.into()]);
    put(&mut m, "rpcrdma.htype", [p.rdma_start.rdma_htype.into()]);
    put(&mut m, "rpcrdma.flags", [p.rdma_flags.into()]);
    put(
        &mut m,
        "rpcrdma.flags.response",
        [u64::from(p.rdma_flags & RPCRDMA2_F_RESPONSE != 0)],
    );
    match &s.body {
        Body::Msg(c, rpc) => {
            chunks(&mut m, c);
            let written: u32 = c
                .rdma_writes
                .iter()
                .flat_map(|w| &w.rdma_entry.rdma_target)
                .map(|s| s.rdma_length)
                .sum();
            let msg_type = u32::from_be_bytes(rpc[4..8].try_into().unwrap());
            // A message without its DDP items is shown as data (RFC 8166 section 3.5).
            let reduced = !c.rdma_reads.is_empty() || (msg_type == 1 && written > 0);
            if !reduced {
                put(&mut m, "rpc.xid", [p.rdma_start.rdma_xid.into()]);
                put(&mut m, "rpc.msgtyp", [msg_type.into()]);
            }
        }
        Body::Nomsg(c) => chunks(&mut m, c),
        Body::Connprop(c) => {
            put(
                &mut m,
                "rpcrdma.rpcrdma2_connprop.rdma_props.count",
                [c.rdma_props.len() as u64],
            );
            for prop in &c.rdma_props {
                let d = &prop.rdma_data;
                put(
                    &mut m,
                    "rpcrdma.rpcrdma2_propval.rdma_which",
                    [prop.rdma_which.into()],
                );
                put(
                    &mut m,
                    "rpcrdma.rpcrdma2_propval.rdma_data.len",
                    [d.len() as u64],
                );
                let word = || u64::from(u32::from_be_bytes(d[..4].try_into().unwrap()));
                match prop.rdma_which {
                    _ if d.is_empty() => {}
                    RDMA2_PROPID_RBSIZ => put(&mut m, "rpcrdma.rpcrdma2_prop_rbsiz", [word()]),
                    RDMA2_PROPID_BRS => put(&mut m, "rpcrdma.rpcrdma2_prop_brs", [word()]),
                    _ => m
                        .entry("rpcrdma.rpcrdma2_propval.rdma_data".into())
                        .or_default()
                        .push(hex(d)),
                }
            }
        }
        Body::Error(e) => {
            let (code, arm): (u32, Vec<(&str, u32)>) = match e {
                Rpcrdma2Error::Rdma2ErrVers(v) => (
                    1,
                    vec![
                        ("rpcrdma.rpcrdma2_err_vers.rdma_vers_low", v.rdma_vers_low),
                        ("rpcrdma.rpcrdma2_err_vers.rdma_vers_high", v.rdma_vers_high),
                    ],
                ),
                Rpcrdma2Error::Rdma2ErrReadChunks(n) => {
                    (4, vec![("rpcrdma.rpcrdma2_error.rdma_max_chunks", *n)])
                }
                Rpcrdma2Error::Rdma2ErrWriteChunks(n) => {
                    (5, vec![("rpcrdma.rpcrdma2_error.rdma_max_chunks", *n)])
                }
                Rpcrdma2Error::Rdma2ErrSegments(n) => {
                    (6, vec![("rpcrdma.rpcrdma2_error.rdma_max_segments", *n)])
                }
                Rpcrdma2Error::Rdma2ErrWriteResource(w) => (
                    7,
                    vec![
                        (
                            "rpcrdma.rpcrdma2_err_write.rdma_chunk_index",
                            w.rdma_chunk_index,
                        ),
                        (
                            "rpcrdma.rpcrdma2_err_write.rdma_length_needed",
                            w.rdma_length_needed,
                        ),
                    ],
                ),
                Rpcrdma2Error::Rdma2ErrReplyResource(n) => {
                    (8, vec![("rpcrdma.rpcrdma2_error.rdma_length_needed", *n)])
                }
                Rpcrdma2Error::Default { discriminant } => (*discriminant, vec![]),
            };
            put(&mut m, "rpcrdma.rpcrdma2_error.rdma_err", [code.into()]);
            for (f, v) in arm {
                put(&mut m, f, [v.into()]);
            }
        }
        Body::Other(b) => m.entry("rpcrdma.body".into()).or_default().push(hex(b)),
    }
    m
}

/// What tshark showed in `f`.
fn shown(f: &Frame) -> Shown {
    let mut m = Shown::new();
    for field in FIELDS {
        if f.has(field) {
            put(&mut m, field, f.numbers(field));
        }
    }
    for field in BYTES {
        for v in f.all(field) {
            m.entry(field.to_string())
                .or_default()
                .push(v.replace(':', ""));
        }
    }
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_2_shows_every_field_it_was_sent_with() {
    if !tshark::present() {
        return;
    }
    let cap = v2::capture().await;
    let pcap = save("v2.pcap", &cap.pcap);
    let ours = Tshark::new(&pcap).lua(shipped_dissector());
    let mut fields: Vec<&str> = FIELDS.to_vec();
    fields.extend(BYTES);
    let frames = ours.fields("rpcrdma.xid", &fields);
    assert_eq!(
        frames.len(),
        cap.sent.len(),
        "one dissected frame per message sent"
    );
    for (f, s) in frames.iter().zip(&cap.sent) {
        assert_eq!(
            shown(f),
            expected(s),
            "frame {} (XID {:#x}): shown, then sent",
            f.number,
            s.xid()
        );
    }
    // The RPC message after RDMA2_MSG went to ONC RPC and on to NFS.
    let nfs = ours.fields("nfs", &["rpc.xid"]);
    assert_eq!(nfs.len(), 2, "the NFS NULL call and its reply");
    // Nothing malformed; the unknown property and header type are notes, not errors.
    let ex = ours.experts();
    assert!(ex.errors.is_empty(), "{}", ex.report);
    assert!(ex.warnings.is_empty(), "{}", ex.report);
    for note in [
        format!("unknown property {}", v2::UNKNOWN_PROPERTY),
        format!("header type {}", v2::UNKNOWN_HTYPE),
    ] {
        assert!(
            ex.notes.iter().any(|n| n.contains(&note)),
            "{note}: {}",
            ex.report
        );
    }
    let tree = ours.verbose();
    assert!(!tree.contains("Malformed"), "a malformed packet");
    // The names the XDR gives: header types, error codes, properties, the flag.
    for text in [
        "Header type: RDMA2_CONNPROP (5)",
        "Header type: RDMA2_NOMSG (1)",
        "rdma_err: RDMA2_ERR_VERS (1)",
        "rdma_err: RDMA2_ERR_WRITE_RESOURCE (7)",
        "rdma_err: RDMA2_ERR_READ_CHUNKS (4)",
        "rdma_which: RDMA2_PROPID_BRS (2)",
        "rpcrdma2_prop_brs: RDMA2_RVREQSUP_GENL (2)",
        "RPCRDMA2_F_RESPONSE: True",
        "Read chunk 1: position 40, 2 segments, 5096 bytes",
        "rdma_data is empty: the property's default value",
    ] {
        assert!(tree.contains(text), "`{text}` not shown");
    }
}

/// The real version 2 transport (`rpcrdma::transport` with `RdmaConfig::version_2` on both
/// ends) over the software provider, dissected by tshark with the generated dissector: the
/// negotiation both ways, then every call and reply in version 2 with the chunks the version 1
/// run uses, replies flagged as responses, the handle offered for remote invalidation one of
/// the call's own, nothing malformed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_version_2_transport_as_tshark_sees_it() {
    if !tshark::present() {
        return;
    }
    let pcap = wireshark_tests::v1::capture_with(
        rpcrdma::transport::RdmaConfig::default().version_2(true),
    )
    .await;
    let pcap = save("v2-transport.pcap", &pcap);
    let ours = Tshark::new(&pcap).lua(shipped_dissector());
    let frames = ours.fields(
        "rpcrdma.xid",
        &[
            "tcp.srcport",
            "rpcrdma.vers",
            "rpcrdma.htype",
            "rpcrdma.flags.response",
            "rpcrdma.rpcrdma2_chunk_lists.rdma_inv_handle",
            "rpcrdma.reads",
            "rpcrdma.writes",
            "rpcrdma.reply",
            "rpcrdma.handle",
            "rpcrdma.rpcrdma2_prop_rbsiz",
        ],
    );
    assert!(frames.len() >= 12, "{} frames", frames.len());
    assert!(
        frames.iter().all(|f| f.one("rpcrdma.vers") == 2),
        "all version 2"
    );
    // Seed 003 sections 5.3.4 and 7.1: the client's RDMA2_CONNPROP first, the server's answer
    // (a response) second, each with a Receive Buffer Size.
    assert_eq!(frames[0].one("rpcrdma.htype"), 5);
    assert_eq!(frames[0].one("rpcrdma.flags.response"), 0);
    assert_eq!(frames[1].one("rpcrdma.htype"), 5);
    assert_eq!(frames[1].one("rpcrdma.flags.response"), 1);
    let rbsiz = rpcrdma::transport::RdmaConfig::default().inline_size as u64;
    assert!(frames[..2]
        .iter()
        .all(|f| f.one("rpcrdma.rpcrdma2_prop_rbsiz") == rbsiz));
    // Both ends are 127.0.0.1: the client is the TCP port the first message came from.
    let client = frames[0].one("tcp.srcport");
    let (mut reads, mut writes, mut replies) = (0, 0, 0);
    for f in &frames[2..] {
        let from_client = f.one("tcp.srcport") == client;
        assert!(
            matches!(f.one("rpcrdma.htype"), 0 | 1),
            "frame {}: RDMA2_MSG or RDMA2_NOMSG",
            f.number
        );
        // The flag tells replies from calls (seed 003 section 3.2).
        assert_eq!(f.one("rpcrdma.flags.response"), u64::from(!from_client));
        let inv = f.one("rpcrdma.rpcrdma2_chunk_lists.rdma_inv_handle");
        if from_client && inv != 0 {
            assert!(
                f.numbers("rpcrdma.handle").contains(&inv),
                "frame {}: rdma_inv_handle {inv:#x} is one of the call's handles",
                f.number
            );
        }
        if from_client {
            reads += f.one("rpcrdma.reads");
            writes += f.one("rpcrdma.writes");
            replies += f.one("rpcrdma.reply");
        }
    }
    assert!(
        reads >= 3 && writes >= 1 && replies >= 1,
        "{reads}/{writes}/{replies}"
    );
    let ex = ours.experts();
    assert!(ex.errors.is_empty(), "{}", ex.report);
    assert!(!ours.verbose().contains("Malformed"), "a malformed packet");
}

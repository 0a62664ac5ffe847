//! nfs-wire: tshark, an independent judge, on a capture of `nfs3-client`'s session with an
//! NFS server over RoCEv2 (`tests/vm/run nfs` captures one in the guest).
//!
//! ```text
//! nfs-wire CAPTURE.pcapng [--client 203.0.113.2] [--ours client|server] [--summary] [--offer-v2]
//! ```
//!
//! Prints, per RPC, what Wireshark's dissectors (InfiniBand, RPC-over-RDMA, ONC RPC, NFS) saw:
//! the procedure, the chunk lists of the call and how the reply came back, and checks that
//!
//! - every RPC-over-RDMA message is version 1 and dissects, and nothing our end sent is
//!   malformed; with `--offer-v2`, but for our client's version 2 offer (seed 003 section 7),
//!   which Wireshark's own dissector does not decode (it knows version 1 only): tshark with
//!   the dissector xdrgen generates (`dissectors/rpcrdma.lua`, `--dissector`) must show the
//!   client's first Send as an RDMA2_CONNPROP (at most 1024 bytes) and the server's answer with
//!   its XID as RDMA_ERROR / ERR_VERS, after which every message is version 1. (The Linux
//!   kernel's answer copies the offer's `rdma_vers`, 2, into a version 1 body: tshark calls it
//!   malformed as a version 2 header, and nfs-wire prints what tshark said.)
//! - with `--ours client`, the chunks are the ones our client meant to offer (RFC 8267 section 4 and seed 002
//!   section 4.3): a Write chunk on every READ call, a Read chunk for the data of a large WRITE,
//!   a Reply chunk on READDIRPLUS, and none on the other calls;
//! - what moved by RDMA matches the chunk lists: the server's RDMA Writes into a Write chunk or
//!   the Reply chunk cover exactly the length its reply declares, from the chunk's offset,
//!   without gaps; its RDMA Read requests cover the client's Read chunk.
//!
//! - through the dissector xdrgen generates from `specs/` (`dissectors/rpcrdma.lua`, with
//!   Wireshark's own `rpcordma` turned off), every RPC-over-RDMA frame dissects and none is
//!   malformed.
//!
//! A reply that Wireshark's own dissector calls malformed is accepted only when its data came by RDMA Write and
//! those Writes fill every segment of the chunk exactly by their own RETH addresses (checked
//! above): tshark 4.0 does not put back a Write chunk of several segments (the Linux client
//! offers 8 x 128 KiB for a 1 MiB READ) and places a second RDMA Write into one chunk at the
//! wrong offset (seen: the Writes' addresses contiguous, tshark's fragment offsets not), so
//! such replies show as malformed though every byte is where the chunk said. Those frames are
//! listed. A malformed call, or a reply whose data did not move by RDMA, always fails. Exits non-zero when a check fails.

use std::collections::{BTreeMap, HashMap};
use std::process::ExitCode;

use clap::Parser;

#[path = "support/tshark.rs"]
mod tshark;

use tshark::{list, num, tshark};

/// Checks a capture of an NFSv3 session over RPC-over-RDMA with tshark.
#[derive(Parser, Debug)]
struct Args {
    /// The capture (pcap or pcapng).
    capture: String,
    /// The client's IP address (the other end is the server).
    #[arg(long, default_value = "203.0.113.2")]
    client: String,
    /// Which end is ours: `client` (nfs3-client against another server, whose chunk choices
    /// are checked too) or `server` (nfs3-server under another client, the Linux kernel's:
    /// its chunk choices are its own).
    #[arg(long, value_enum, default_value_t = Ours::Client)]
    ours: Ours,
    /// One line per procedure and way of moving (calls, bytes moved by RDMA) instead of one
    /// per RPC.
    #[arg(long)]
    summary: bool,
    /// The client offered RPC-over-RDMA version 2 to a version 1 server: expect the offer and
    /// its ERR_VERS before the version 1 session.
    #[arg(long)]
    offer_v2: bool,
    /// The Lua dissector that reads version 2 (xdrgen's, generated from specs/).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../dissectors/rpcrdma.lua"))]
    dissector: String,
}

/// The options that load the generated dissector.
fn lua(args: &Args) -> Vec<String> {
    vec!["-X".into(), format!("lua_script:{}", args.dissector)]
}

/// A client Send that tshark's RPC-over-RDMA dissector did not take: its frame, and the bytes
/// of the Send (the InfiniBand payload).
fn undissected_client_sends(args: &Args) -> Result<Vec<(u64, Vec<u8>)>, String> {
    // Opcode 4: RC SEND Only (the whole message in one packet, as a first message is).
    let filter = format!(
        "ip.src == {} && infiniband.bth.opcode == 4 && !rpcordma",
        args.client
    );
    let rows = tshark(&args.capture, &[], &filter, &["frame.number", "data.data"])?;
    Ok(rows
        .into_iter()
        .filter(|r| r.len() >= 2)
        .map(|r| (num(&r[0]), hex_bytes(&r[1])))
        .collect())
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    let hex: String = hex.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    (0..hex.len() / 2)
        .filter_map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
        .collect()
}

/// The version 2 offer among the undissected Sends: (frame, XID, length). Seed 003 section 7:
/// the client "sends a single valid RPC-over-RDMA message with the value two (2) in the
/// rdma_vers field", at most 1024 bytes; section 5.3.4: RDMA2_CONNPROP (header type 5).
fn version_2_offer(sends: &[(u64, Vec<u8>)]) -> Option<(u64, u32, usize)> {
    sends.iter().find_map(|(frame, b)| {
        let word = |i: usize| -> Option<u32> {
            Some(u32::from_be_bytes(b.get(i..i + 4)?.try_into().ok()?))
        };
        (word(4)? == 2 && word(12)? == 5).then(|| (*frame, word(0).unwrap_or(0), b.len()))
    })
}

/// The bytes a reply moved by RDMA Write: the Write list's filled segments, or the Reply chunk.
fn reply_bytes(reply: &Message) -> u64 {
    if reply.msg_type == 1 || reply.writes > 0 {
        reply.segments.iter().map(|s| s.1).sum()
    } else {
        0
    }
}

/// Which end of the capture is our code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Ours {
    Client,
    Server,
}

/// One RPC-over-RDMA message as tshark dissected it.
#[derive(Debug, Default, Clone)]
struct Message {
    frame: u64,
    from_client: bool,
    version: u32,
    msg_type: u32,
    reads: u32,
    writes: u32,
    replies: u32,
    /// Every segment of the header's chunk lists, in order: (handle, length, offset).
    segments: Vec<(u32, u64, u64)>,
    procedure: Option<u32>,
    /// The ONC RPC program, when tshark read the RPC header.
    program: Option<u32>,
}

/// One RDMA Write or RDMA Read request: who sent it, the target key, address and length.
#[derive(Debug, Clone, Copy)]
struct Transfer {
    from_client: bool,
    rkey: u32,
    va: u64,
    len: u64,
    /// The packet sequence number: a retransmitted packet has its original's.
    psn: u64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match judge(&args) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(n) => {
            eprintln!("nfs-wire: {n} check(s) failed");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("nfs-wire: {e}");
            ExitCode::FAILURE
        }
    }
}

fn first(text: &str) -> Option<u64> {
    list(text).first().copied()
}

/// The NFSv3 procedure of an RPC call header that tshark left undissected (a WRITE whose data
/// is in a Read chunk it did not fetch), read from the message's first words: XID, CALL,
/// RPC version 2, program 100003, version 3, procedure (RFC 5531 section 9).
fn nfs_call_procedure(hex: &str, xid: u32) -> Option<u32> {
    let bytes: Vec<u8> = (0..hex.len().min(48) / 2)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
        .collect::<Option<_>>()?;
    let word = |i: usize| {
        bytes
            .get(4 * i..4 * i + 4)
            .map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
    };
    (word(0)? == xid && word(1)? == 0 && word(2)? == 2 && word(3)? == 100_003 && word(4)? == 3)
        .then(|| word(5))
        .flatten()
}

/// Every RPC-over-RDMA message, by XID.
fn messages(args: &Args) -> Result<BTreeMap<u32, Vec<Message>>, String> {
    let rows = tshark(
        &args.capture,
        &[],
        "rpcordma",
        &[
            "frame.number",
            "ip.src",
            "rpcordma.xid",
            "rpcordma.version",
            "rpcordma.msg_type",
            "rpcordma.reads_count",
            "rpcordma.writes_count",
            "rpcordma.reply_count",
            "rpcordma.rdma_handle",
            "rpcordma.rdma_length",
            "rpcordma.rdma_offset",
            "nfs.procedure_v3",
            "data.data",
            "rpc.program",
        ],
    )?;
    let mut by_xid: BTreeMap<u32, Vec<Message>> = BTreeMap::new();
    for r in rows {
        if r.len() < 14 {
            continue;
        }
        let (handles, lengths, offsets) = (list(&r[8]), list(&r[9]), list(&r[10]));
        let segments = handles
            .iter()
            .zip(&lengths)
            .zip(&offsets)
            .map(|((h, l), o)| (*h as u32, *l, *o))
            .collect();
        let m = Message {
            frame: num(&r[0]),
            from_client: r[1] == args.client,
            version: num(&r[3]) as u32,
            msg_type: num(&r[4]) as u32,
            reads: first(&r[5]).unwrap_or(0) as u32,
            writes: first(&r[6]).unwrap_or(0) as u32,
            replies: first(&r[7]).unwrap_or(0) as u32,
            segments,
            procedure: first(&r[11])
                .map(|p| p as u32)
                .or_else(|| nfs_call_procedure(&r[12], num(&r[2]) as u32)),
            program: first(&r[13]).map(|p| p as u32),
        };
        by_xid.entry(num(&r[2]) as u32).or_default().push(m);
    }
    Ok(by_xid)
}

/// The RDMA Writes and RDMA Read requests (the first packet of each carries the RETH).
fn transfers(args: &Args) -> Result<Vec<Transfer>, String> {
    let rows = tshark(
        &args.capture,
        &[],
        "infiniband.reth",
        &[
            "ip.src",
            "infiniband.reth.r_key",
            "infiniband.reth.va",
            "infiniband.reth.dmalen",
            "infiniband.bth.psn",
        ],
    )?;
    Ok(rows
        .into_iter()
        .filter(|r| r.len() >= 5)
        .map(|r| Transfer {
            from_client: r[0] == args.client,
            rkey: num(&r[1]) as u32,
            va: num(&r[2]),
            len: num(&r[3]),
            psn: num(&r[4]),
        })
        .collect())
}

/// Whether the transfers to `rkey` by the server cover `[offset, offset + len)` exactly,
/// without gaps or overlaps. A packet the RC transport sent again (same PSN) counts once.
fn covered(transfers: &[Transfer], rkey: u32, offset: u64, len: u64) -> bool {
    // One piece per PSN (a packet sent twice has its original's). A retried RDMA Read request
    // asks again from where the responses stopped arriving (seen on rxe: 131072 bytes at PSN n,
    // then the last 130048 at PSN n + 1): pieces may overlap, but together they must cover the
    // segment without a gap and nothing outside it.
    let mut pieces: Vec<(u64, u64)> = transfers
        .iter()
        .filter(|t| !t.from_client && t.rkey == rkey)
        .map(|t| (t.psn, (t.va, t.len)))
        .collect::<BTreeMap<_, _>>()
        .into_values()
        .collect();
    pieces.sort_unstable();
    let end = offset + len;
    let mut at = offset;
    for (va, n) in pieces {
        if va > at || va < offset || va + n > end {
            return false;
        }
        at = at.max(va + n);
    }
    at == end
}

const NAMES: [&str; 22] = [
    "NULL",
    "GETATTR",
    "SETATTR",
    "LOOKUP",
    "ACCESS",
    "READLINK",
    "READ",
    "WRITE",
    "CREATE",
    "MKDIR",
    "SYMLINK",
    "MKNOD",
    "REMOVE",
    "RMDIR",
    "RENAME",
    "LINK",
    "READDIR",
    "READDIRPLUS",
    "FSSTAT",
    "FSINFO",
    "PATHCONF",
    "COMMIT",
];

fn judge(args: &Args) -> Result<usize, String> {
    let by_xid = messages(args)?;
    let moves = transfers(args)?;
    let malformed: HashMap<u64, bool> = tshark(
        &args.capture,
        &[],
        "_ws.malformed",
        &["frame.number", "ip.src"],
    )?
    .into_iter()
    .filter(|r| r.len() >= 2)
    .map(|r| (num(&r[0]), r[1] == args.client))
    .collect();
    if by_xid.is_empty() {
        return Err("no RPC-over-RDMA message in the capture".into());
    }

    let mut failures = Vec::new();
    // Our client's version 2 offer and the server's answer (seed 003 section 7.2).
    let sends = undissected_client_sends(args)?;
    let offer = version_2_offer(&sends);
    let mut by_xid = by_xid;
    // The Linux kernel's answer to the offer: version 2 in a version 1 body (see below).
    let mut hybrid_answer = None;
    match (args.offer_v2, offer) {
        (true, Some((frame, xid, len))) => {
            // Wireshark's own dissector takes version 1 only: the offer and the answer are
            // judged by the dissector xdrgen generates from specs/ (dissectors/rpcrdma.lua).
            by_xid.remove(&xid);
            let seen = tshark(
                &args.capture,
                &lua(args),
                &format!("rpcrdma.xid == {xid}"),
                &[
                    "frame.number",
                    "ip.src",
                    "rpcrdma.vers",
                    "rpcrdma.htype",
                    "rpcrdma.rpcrdma2_error.rdma_err",
                    "rpcrdma.rpcrdma2_err_vers.rdma_vers_low",
                    "_ws.expert.message",
                ],
            )?;
            let offer_row = seen.iter().find(|r| r.len() >= 4 && num(&r[0]) == frame);
            let answer = seen
                .iter()
                .find(|r| r.len() >= 7 && r[1] != args.client && num(&r[3]) == 4);
            match (offer_row, answer) {
                (Some(o), Some(a)) if num(&o[2]) == 2 && num(&o[3]) == 5 && num(&a[4]) == 1 => {
                    hybrid_answer = Some(num(&a[0]));
                    println!(
                        "version 2 offer: frame {frame}, xid {xid:#010x}, RDMA2_CONNPROP of {len} \
                         bytes (tshark with dissectors/rpcrdma.lua); the server's answer: frame {}, \
                         RDMA_ERROR / ERR_VERS, low version {}, rdma_vers {} in its header{}; the \
                         session then in version 1",
                        a[0],
                        a[5],
                        a[2],
                        if a[6].is_empty() {
                            String::new()
                        } else {
                            format!(" (tshark: {})", a[6])
                        }
                    );
                    if len > 1024 {
                        failures.push(format!("the offer is {len} bytes (at most 1024)"));
                    }
                }
                _ => failures.push(format!(
                    "the version 2 offer (frame {frame}, xid {xid:#010x}) and its ERR_VERS, as \
                     tshark with dissectors/rpcrdma.lua sees them: {seen:?}"
                )),
            }
        }
        (true, None) => failures.push("no version 2 offer from the client".into()),
        (false, Some((frame, ..))) => {
            failures.push(format!("frame {frame}: an unexpected version 2 offer"))
        }
        (false, None) => {}
    }
    for (frame, _) in sends.iter().filter(|(f, _)| Some(*f) != offer.map(|o| o.0)) {
        failures.push(format!(
            "frame {frame}: a Send of the client that tshark does not dissect as RPC-over-RDMA"
        ));
    }
    let mut excused = Vec::new();
    // With --summary: (procedure, call kind, reply kind) -> (calls, bytes by RDMA, all ok).
    let mut summary: BTreeMap<(&str, &str, String), (u64, u64, bool)> = BTreeMap::new();
    if !args.summary {
        println!(
            "{:<12} {:<12} {:<28} {:<26} tshark",
            "xid", "procedure", "call (read/write/reply)", "reply"
        );
    }
    // Calls the client sent again with other chunks (on a new connection) after an attempt the
    // server never answered: (xid, frames of the unanswered attempts, frame of the answered one).
    let mut retried = Vec::new();
    for (xid, msgs) in &by_xid {
        // The attempt the first reply answers: the last call before it. The Linux client sends
        // a call again on a new connection when its Send was lost below RPC-over-RDMA (seen: an
        // RC Send that Soft-RoCE dropped after a PSN sequence error, not sent again by the
        // client's RC transport, the session held up until the client reconnected): an earlier
        // attempt with other chunks was never served, so its Read chunk was never read.
        let reply = msgs.iter().find(|m| !m.from_client);
        let call = msgs
            .iter()
            .rev()
            .find(|m| m.from_client && reply.map_or(true, |r| m.frame < r.frame))
            .or_else(|| msgs.iter().find(|m| m.from_client));
        if let Some(answered) = call {
            let earlier: Vec<u64> = msgs
                .iter()
                .filter(|m| m.from_client && m.frame < answered.frame)
                .filter(|m| m.segments != answered.segments)
                .map(|m| m.frame)
                .collect();
            if !earlier.is_empty() {
                retried.push((*xid, earlier, answered.frame));
            }
        }
        let procedure = msgs.iter().find_map(|m| m.procedure);
        let program = msgs.iter().find_map(|m| m.program);
        let name = match (procedure, program) {
            (Some(p), _) => NAMES.get(p as usize).copied().unwrap_or("?"),
            // The Linux client probes NFSACL (100227) on the same connection.
            (None, Some(100_227)) => "NFSACL",
            _ => "?",
        };
        let mut fail = |what: String| failures.push(format!("xid {xid:#010x} {name}: {what}"));
        for m in msgs {
            if m.version != 1 {
                fail(format!("frame {}: version {}", m.frame, m.version));
            }
        }
        let (Some(call), Some(reply)) = (call, reply) else {
            fail("a call without a reply, or a reply without a call".into());
            continue;
        };

        // What our client meant to offer.
        let expected = match name {
            "READ" => (0, 1, 0),
            "WRITE" => (call.reads.min(1), 0, 0),
            "READDIRPLUS" => (0, 0, 1),
            _ => (0, 0, 0),
        };
        let offered = (call.reads.min(1), call.writes, call.replies);
        if args.ours == Ours::Client && offered != expected {
            fail(format!(
                "the call offered {offered:?}, the client means {expected:?}"
            ));
        }
        if args.ours == Ours::Client && name == "WRITE" && call.reads == 0 {
            // `nfs3-client`'s one WRITE carries 1 MiB: far over the inline threshold.
            fail("a 1 MiB WRITE without a Read chunk".into());
        }

        // What moved by RDMA against what the headers say.
        let mut moved = "inline".to_string();
        if call.reads > 0 {
            for &(handle, len, offset) in &call.segments {
                if !covered(&moves, handle, offset, len) {
                    fail(format!(
                        "the server's RDMA Reads do not cover the Read chunk {handle:#x}"
                    ));
                }
            }
        }
        let mut writes_ok = true;
        if reply.msg_type == 1 {
            moved = "reply chunk (RDMA_NOMSG)".into();
            let Some(&(handle, len, offset)) = reply.segments.last() else {
                fail("an RDMA_NOMSG reply without a Reply chunk".into());
                continue;
            };
            let _ = (handle, len, offset);
            // Every segment of the Reply chunk the server filled, written exactly.
            writes_ok = reply
                .segments
                .iter()
                .filter(|s| s.1 > 0)
                .all(|&(h, len, off)| covered(&moves, h, off, len));
            if !writes_ok {
                fail(format!(
                    "the RDMA Writes do not fill the Reply chunk ({len} bytes)"
                ));
            }
        } else if reply.writes > 0 {
            // The reply's Write list: every segment the server filled (its length is what it
            // wrote) must have been written exactly.
            let written: Vec<_> = reply.segments.iter().filter(|s| s.1 > 0).collect();
            let bytes: u64 = written.iter().map(|s| s.1).sum();
            if bytes > 0 {
                moved = format!("write chunk ({bytes} bytes, {} seg)", written.len());
                writes_ok = written
                    .iter()
                    .all(|&&(h, len, off)| covered(&moves, h, off, len));
                if !writes_ok {
                    fail(format!(
                        "the RDMA Writes do not fill the Write chunk ({bytes} bytes)"
                    ));
                }
            } else {
                moved = "inline (write chunk unused)".into();
            }
        }

        let mut verdict = "ok".to_string();
        for m in msgs {
            let Some(&from_client) = malformed.get(&m.frame) else {
                continue;
            };
            // A reply whose data moved by RDMA Write can be excused: its Writes were checked
            // above against every segment. tshark reassembles neither a Write chunk of
            // several segments nor Writes that do not arrive in one piece per chunk.
            if from_client || !writes_ok || !(reply.writes > 0 || reply.msg_type == 1) {
                fail(format!("frame {} is malformed", m.frame));
                verdict = format!("MALFORMED frame {}", m.frame);
            } else {
                excused.push(m.frame);
                verdict = format!("ok (frame {}: reassembly, see below)", m.frame);
            }
        }
        let line = format!(
            "{:<12} {:<12} {:<28} {:<26} {verdict}",
            format!("{xid:#010x}"),
            name,
            format!("{}/{}/{}", call.reads, call.writes, call.replies),
            moved
        );
        if args.summary {
            let kind = moved.split(" (").next().unwrap_or("").to_string();
            let call_kind = if call.reads > 0 {
                "read chunk"
            } else {
                "inline"
            };
            let row = summary
                .entry((name, call_kind, kind))
                .or_insert((0u64, 0u64, true));
            row.0 += 1;
            row.1 += call
                .segments
                .iter()
                .filter(|_| call.reads > 0)
                .map(|s| s.1)
                .sum::<u64>()
                + reply_bytes(reply);
            row.2 &= verdict.starts_with("ok");
        } else {
            println!("{line}");
        }
    }
    for ((name, call_kind, reply_kind), (n, bytes, ok)) in &summary {
        println!(
            "{name:<12} {n:>6} calls  {bytes:>10} bytes by RDMA  call {call_kind:<11} reply {reply_kind:<22} {}",
            if *ok { "ok" } else { "FAILED" }
        );
    }
    for (xid, earlier, answered) in &retried {
        println!(
            "xid {xid:#010x}: sent again with other chunks in frame {answered}, which is the \
             attempt judged above; the earlier attempt(s) in frame(s) {earlier:?} had no reply \
             (the client reconnected and sent the call again)"
        );
    }
    if !excused.is_empty() {
        println!(
            "frames {excused:?}: tshark calls these replies malformed because it did not put back \
             the data that came by RDMA Write (a Write chunk of several segments, or a chunk \
             written in several Writes, some packets sent twice by the RC transport); their \
             RDMA Writes, checked above by RETH address and PSN, fill every segment exactly"
        );
    }
    // The same capture through the dissector xdrgen generates from specs/, with Wireshark's
    // own rpcordma off: every RPC-over-RDMA frame dissects and none is malformed (it shows a
    // message whose data moved by RDMA as data instead of reassembling it).
    let mut own = lua(args);
    own.extend(["--disable-protocol".into(), "rpcordma".into()]);
    let dissected = tshark(&args.capture, &own, "rpcrdma", &["frame.number"])?.len();
    let bad: Vec<u64> = tshark(
        &args.capture,
        &own,
        "rpcrdma && _ws.malformed",
        &["frame.number"],
    )?
    .iter()
    .map(|r| num(&r[0]))
    .filter(|f| Some(*f) != hybrid_answer)
    .collect();
    println!(
        "tshark with dissectors/rpcrdma.lua (Wireshark's rpcordma off): {dissected} RPC-over-RDMA \
         frames, {} malformed{}",
        bad.len(),
        if hybrid_answer.is_some() {
            " (besides the kernel's answer to the version 2 offer, above)"
        } else {
            ""
        }
    );
    if dissected == 0 {
        failures.push("the generated dissector took no frame".into());
    }
    for f in bad {
        failures.push(format!(
            "frame {f} is malformed as the generated dissector sees it"
        ));
    }
    for f in &failures {
        println!("FAILED: {f}");
    }
    println!(
        "nfs-wire: {} RPCs, {} RDMA transfers, {} failure(s)",
        by_xid.len(),
        moves.len(),
        failures.len()
    );
    Ok(failures.len())
}

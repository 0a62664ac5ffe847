//! nfs4-wire: tshark, an independent judge, on a capture of `nfs4-delegation`'s NFSv4.1 session
//! with a server over RoCEv2 (`tests/vm/run nfs4-knfsd` captures one against the Linux kernel's
//! knfsd in the guest; the host runs this on it).
//!
//! ```text
//! nfs4-wire CAPTURE.pcapng [--client 203.0.113.2] [--read-bytes N] [--write-bytes N]
//! ```
//!
//! The RPC-over-RDMA headers are read by the dissector xdrgen generates
//! (`dissectors/rpcrdma.lua`, with Wireshark's own `rpcordma` turned off), which hands the RPC
//! messages to Wireshark's ONC RPC and NFS dissectors. Prints one line per RPC-over-RDMA
//! message, then checks (seed 004, RFC 8166, as `tests/wireshark/tests/nfs4_backchannel.rs`
//! does for the soft provider):
//!
//! - every message is version 1, and all go over one queue pair (one destination QP each way);
//! - calls go both ways on it: NFSv4 COMPOUNDs from the client, and from the server a
//!   CB_COMPOUND carrying CB_SEQUENCE and CB_RECALL;
//! - every backward-direction message (the server's calls, the client's replies to them) is as
//!   seed 004 sections 8.3.4 and 8.3.5 require: RDMA_MSG, the three chunk lists empty,
//!   `rdma_xid` equal to the RPC XID, and a credit value that is never zero (section 8.2.1);
//! - the READs' data came in Write chunks: each READ call carries one, the server's RDMA Writes
//!   into it add up to what its reply's Write list says, at least `--read-bytes` in all;
//! - the WRITEs' data went in Read chunks: each WRITE call carries one, and the server's RDMA
//!   Read requests of it add up to at least `--write-bytes` in all;
//! - nothing is malformed, and tshark's expert infos hold no error.
//!
//! Exits non-zero when a check fails.

use std::collections::BTreeSet;
use std::process::{Command, ExitCode};

use clap::Parser;

// The tshark runner nfs3's nfs-wire uses too.
#[path = "../../nfs3/examples/support/tshark.rs"]
mod tshark;

use rpcrdma_nfs4::client::DEFAULT_CB_PROGRAM;
use tshark::{list, num, tshark};

/// Checks a capture of an NFSv4.1 session with a backchannel over RPC-over-RDMA with tshark.
#[derive(Parser, Debug)]
#[command(name = "nfs4-wire")]
struct Args {
    /// The capture (pcap or pcapng).
    capture: String,
    /// The client's IP address (the other end is the server).
    #[arg(long, default_value = "203.0.113.2")]
    client: String,
    /// The least the READs must have moved by RDMA Write.
    #[arg(long, default_value_t = 1 << 20)]
    read_bytes: u64,
    /// The least the WRITEs must have moved by RDMA Read.
    #[arg(long, default_value_t = 1 << 20)]
    write_bytes: u64,
    /// The dissector that reads the RPC-over-RDMA headers (xdrgen's, generated from specs/).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../dissectors/rpcrdma.lua"))]
    dissector: String,
}

/// NFSv4 operation numbers (RFC 5661 section 16.2 and 20) named in the output.
const OP_READ: u64 = 25;
const OP_WRITE: u64 = 38;
const CB_SEQUENCE: u64 = 11;
const CB_RECALL: u64 = 4;
const NFS_PROGRAM: u64 = 100_003;
/// InfiniBand BTH opcodes (RC): RDMA WRITE First and Only carry the RETH, as does an RDMA READ
/// Request.
const RDMA_WRITE_FIRST: u64 = 6;
const RDMA_WRITE_ONLY: u64 = 10;
const RDMA_READ_REQUEST: u64 = 12;

fn op_name(op: u64, callback: bool) -> String {
    let name = if callback {
        match op {
            CB_RECALL => "CB_RECALL",
            CB_SEQUENCE => "CB_SEQUENCE",
            _ => "",
        }
    } else {
        match op {
            4 => "CLOSE",
            8 => "DELEGRETURN",
            9 => "GETATTR",
            10 => "GETFH",
            15 => "LOOKUP",
            18 => "OPEN",
            22 => "PUTFH",
            24 => "PUTROOTFH",
            OP_READ => "READ",
            OP_WRITE => "WRITE",
            42 => "EXCHANGE_ID",
            43 => "CREATE_SESSION",
            44 => "DESTROY_SESSION",
            53 => "SEQUENCE",
            57 => "DESTROY_CLIENTID",
            58 => "RECLAIM_COMPLETE",
            _ => "",
        }
    };
    if name.is_empty() {
        format!("op{op}")
    } else {
        name.to_string()
    }
}

/// One RPC-over-RDMA message as tshark dissected it.
#[derive(Debug, Default)]
struct Message {
    frame: u64,
    from_client: bool,
    dest_qp: u64,
    xid: u64,
    vers: u64,
    credit: u64,
    htype: u64,
    reads: u64,
    writes: u64,
    reply: u64,
    /// The chunk segments' handles and lengths, every list's, in header order.
    handles: Vec<u64>,
    lengths: Vec<u64>,
    rpc_xid: Option<u64>,
    /// 0 call, 1 reply; `None` when the RPC message was not dissected (its body went by RDMA).
    msg_type: Option<u64>,
    program: Option<u64>,
    ops: Vec<u64>,
    cb_ops: Vec<u64>,
}

const FIELDS: &[&str] = &[
    "frame.number",
    "ip.src",
    "infiniband.bth.destqp",
    "rpcrdma.xid",
    "rpcrdma.vers",
    "rpcrdma.credit",
    "rpcrdma.htype",
    "rpcrdma.reads",
    "rpcrdma.writes",
    "rpcrdma.reply",
    "rpcrdma.handle",
    "rpcrdma.length",
    "rpc.xid",
    "rpc.msgtyp",
    "rpc.program",
    "nfs.opcode",
    "nfs.cb.operation",
];

fn main() -> ExitCode {
    let args = Args::parse();
    match judge(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            println!("FAILED nfs4-wire: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The checks' results, printed as they come.
struct Verdict {
    failed: usize,
}

impl Verdict {
    fn check(&mut self, ok: bool, what: String) {
        if ok {
            println!("ok {what}");
        } else {
            println!("FAILED {what}");
            self.failed += 1;
        }
    }
}

fn judge(args: &Args) -> Result<bool, String> {
    let lua = vec![
        "-X".to_string(),
        format!("lua_script:{}", args.dissector),
        "--disable-protocol".to_string(),
        "rpcordma".to_string(),
    ];
    let messages: Vec<Message> = tshark(&args.capture, &lua, "rpcrdma", FIELDS)?
        .iter()
        .map(|r| message(r, &args.client))
        .collect();
    if messages.is_empty() {
        return Err("no RPC-over-RDMA message dissected".into());
    }
    for m in &messages {
        println!("{}", describe(m));
    }
    let mut v = Verdict { failed: 0 };

    let bad_vers: Vec<u64> = messages
        .iter()
        .filter(|m| m.vers != 1)
        .map(|m| m.frame)
        .collect();
    v.check(
        bad_vers.is_empty(),
        format!(
            "{} RPC-over-RDMA messages, all version 1 (not: frames {bad_vers:?})",
            messages.len()
        ),
    );
    for (side, from_client) in [("client", true), ("server", false)] {
        let qps: BTreeSet<u64> = messages
            .iter()
            .filter(|m| m.from_client == from_client)
            .map(|m| m.dest_qp)
            .collect();
        v.check(
            qps.len() == 1,
            format!("one queue pair: the {side}'s messages go to QP {qps:x?}"),
        );
    }

    // Calls both ways.
    let forward: Vec<&Message> = messages
        .iter()
        .filter(|m| m.from_client && m.msg_type == Some(0) && m.program == Some(NFS_PROGRAM))
        .collect();
    let cb_program = u64::from(DEFAULT_CB_PROGRAM);
    let backward: Vec<&Message> = messages
        .iter()
        .filter(|m| !m.from_client && m.msg_type == Some(0) && m.program == Some(cb_program))
        .collect();
    v.check(
        forward.len() >= 8,
        format!("{} NFSv4 COMPOUND calls from the client", forward.len()),
    );
    v.check(
        !backward.is_empty(),
        format!(
            "{} CB_COMPOUND call(s) from the server (program {cb_program:#x})",
            backward.len()
        ),
    );
    v.check(
        backward
            .iter()
            .any(|m| m.cb_ops.contains(&CB_SEQUENCE) && m.cb_ops.contains(&CB_RECALL)),
        "a CB_COMPOUND with CB_SEQUENCE and CB_RECALL".into(),
    );

    // Seed 004 sections 8.3.4, 8.3.5 and 8.2.1 for every backward-direction message.
    for call in &backward {
        let reply = messages
            .iter()
            .find(|m| m.from_client && m.msg_type == Some(1) && m.rpc_xid == call.rpc_xid);
        v.check(
            reply.is_some(),
            format!(
                "frame {}: the client answered the backward call",
                call.frame
            ),
        );
        for (what, m) in std::iter::once(("call", *call)).chain(reply.map(|r| ("reply", r))) {
            let problems = backward_problems(m);
            v.check(
                problems.is_empty(),
                format!(
                    "frame {}: backward {what} XID {:#010x}: RDMA_MSG, no chunks, rdma_xid = RPC XID, credit {} (not zero){}",
                    m.frame,
                    m.xid,
                    m.credit,
                    if problems.is_empty() { String::new() } else { format!(": {}", problems.join(", ")) }
                ),
            );
        }
    }

    // READ data in Write chunks, WRITE data in Read chunks.
    let writes = server_rdma_ops(
        &args.capture,
        &args.client,
        &format!(
            "infiniband.bth.opcode == {RDMA_WRITE_FIRST} || infiniband.bth.opcode == {RDMA_WRITE_ONLY}"
        ),
    )?;
    let reads = server_rdma_ops(
        &args.capture,
        &args.client,
        &format!("infiniband.bth.opcode == {RDMA_READ_REQUEST}"),
    )?;
    let mut read_total = 0;
    let read_calls: Vec<&&Message> = forward
        .iter()
        .filter(|m| m.ops.contains(&OP_READ))
        .collect();
    for call in &read_calls {
        let reply = messages
            .iter()
            .find(|m| !m.from_client && m.xid == call.xid);
        let declared: u64 = reply.map(|r| r.lengths.iter().sum()).unwrap_or(0);
        let keys: BTreeSet<u64> = call.handles.iter().copied().collect();
        let moved: u64 = writes
            .iter()
            .filter(|(k, _)| keys.contains(k))
            .map(|(_, n)| n)
            .sum();
        read_total += moved;
        // No Reply chunk beside the Write chunk: Linux's server (6.1) fails such a call, and
        // the client library bounds a READ COMPOUND's reply so that it needs none.
        v.check(
            call.writes >= 1
                && call.reads == 0
                && call.reply == 0
                && moved == declared
                && moved > 0,
            format!(
                "frame {}: READ call with {} Write chunk(s) (Reply chunk: {}); the server's RDMA Writes into it: {moved} bytes, its reply's Write list: {declared}",
                call.frame, call.writes, call.reply
            ),
        );
    }
    v.check(
        !read_calls.is_empty() && read_total >= args.read_bytes,
        format!(
            "{} READ call(s) moved {read_total} bytes by RDMA Write (at least {})",
            read_calls.len(),
            args.read_bytes
        ),
    );
    let mut write_total = 0;
    // A WRITE call whose data is in a Read chunk is not dissected as RPC (tshark does not
    // fetch the chunk); its RPC-over-RDMA header is.
    let write_calls: Vec<&Message> = messages
        .iter()
        .filter(|m| m.from_client && m.reads >= 1)
        .collect();
    for call in &write_calls {
        let keys: BTreeSet<u64> = call.handles.iter().copied().collect();
        let pulled: u64 = reads
            .iter()
            .filter(|(k, _)| keys.contains(k))
            .map(|(_, n)| n)
            .sum();
        write_total += pulled;
        v.check(
            pulled > 0,
            format!(
                "frame {}: a call with {} Read chunk(s){}; the server's RDMA Read requests of it: {pulled} bytes",
                call.frame,
                call.reads,
                if call.ops.contains(&OP_WRITE) { " (WRITE)" } else { "" }
            ),
        );
    }
    v.check(
        !write_calls.is_empty() && write_total >= args.write_bytes,
        format!(
            "{} call(s) with Read chunks moved {write_total} bytes by RDMA Read (at least {})",
            write_calls.len(),
            args.write_bytes
        ),
    );

    // Nothing malformed, no expert error.
    let malformed = tshark(&args.capture, &lua, "_ws.malformed", &["frame.number"])?;
    v.check(
        malformed.is_empty(),
        format!(
            "no malformed frame (frames: {:?})",
            malformed.iter().map(|r| r[0].clone()).collect::<Vec<_>>()
        ),
    );
    let expert = expert_errors(&args.capture, &lua)?;
    v.check(
        expert.is_empty(),
        format!(
            "no expert error{}",
            if expert.is_empty() {
                String::new()
            } else {
                format!(": {expert}")
            }
        ),
    );

    println!(
        "nfs4-wire: {} messages, {} forward calls, {} backward calls, {} check(s) failed",
        messages.len(),
        forward.len(),
        backward.len(),
        v.failed
    );
    Ok(v.failed == 0)
}

/// What a backward-direction message breaks of seed 004 sections 8.3.4, 8.3.5 and 8.2.1.
fn backward_problems(m: &Message) -> Vec<String> {
    let mut p = Vec::new();
    if m.vers != 1 {
        p.push(format!("version {}", m.vers));
    }
    if m.htype != 0 {
        p.push(format!("header type {} (not RDMA_MSG)", m.htype));
    }
    if m.reads != 0 || m.writes != 0 || m.reply != 0 {
        p.push(format!(
            "chunks: {} read, {} write, {} reply",
            m.reads, m.writes, m.reply
        ));
    }
    if m.rpc_xid != Some(m.xid) {
        p.push(format!(
            "RPC XID {:?}",
            m.rpc_xid.map(|x| format!("{x:#010x}"))
        ));
    }
    if m.credit == 0 {
        p.push("credit 0".into());
    }
    p
}

fn describe(m: &Message) -> String {
    let callback = m.program == Some(u64::from(DEFAULT_CB_PROGRAM));
    let ops: Vec<String> = if callback {
        m.cb_ops.iter().map(|o| op_name(*o, true)).collect()
    } else {
        m.ops.iter().map(|o| op_name(*o, false)).collect()
    };
    let what = match m.msg_type {
        Some(0) if callback => "CB call",
        Some(0) => "call",
        Some(_) if callback => "CB reply",
        Some(_) => "reply",
        None => "(body by RDMA)",
    };
    format!(
        "frame {:>5} {} QP {:#x} xid {:#010x} v{} credit {} htype {} chunks r{}/w{}/rp{} {what} {}",
        m.frame,
        if m.from_client {
            "client->server"
        } else {
            "server->client"
        },
        m.dest_qp,
        m.xid,
        m.vers,
        m.credit,
        m.htype,
        m.reads,
        m.writes,
        m.reply,
        ops.join(",")
    )
}

fn message(r: &[String], client: &str) -> Message {
    let get = |i: usize| r.get(i).map(String::as_str).unwrap_or("");
    Message {
        frame: num(get(0)),
        from_client: get(1) == client,
        dest_qp: num(get(2)),
        xid: num(get(3)),
        vers: num(get(4)),
        credit: num(get(5)),
        htype: num(get(6)),
        reads: num(get(7)),
        writes: num(get(8)),
        reply: num(get(9)),
        handles: list(get(10)),
        lengths: list(get(11)),
        rpc_xid: list(get(12)).first().copied(),
        msg_type: list(get(13)).first().copied(),
        program: list(get(14)).first().copied(),
        ops: list(get(15)),
        cb_ops: list(get(16)),
    }
}

/// The server's RDMA operations matching `filter` (first packets, which carry the RETH): each
/// one's remote key and length.
fn server_rdma_ops(capture: &str, client: &str, filter: &str) -> Result<Vec<(u64, u64)>, String> {
    let rows = tshark(
        capture,
        &[],
        &format!("ip.src != {client} && ({filter}) && infiniband.reth"),
        &["infiniband.reth.r_key", "infiniband.reth.dmalen"],
    )?;
    Ok(rows
        .iter()
        .filter(|r| r.len() >= 2)
        .map(|r| (num(&r[0]), num(&r[1])))
        .collect())
}

/// The error lines of tshark's expert infos, if any.
fn expert_errors(capture: &str, options: &[String]) -> Result<String, String> {
    let out = Command::new("tshark")
        .args(options)
        .args(["-r", capture, "-q", "-z", "expert,error"])
        .output()
        .map_err(|e| format!("tshark: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text
        .lines()
        .skip_while(|l| !l.starts_with("Errors"))
        .filter(|l| !l.trim().is_empty() && !l.starts_with('='))
        .collect::<Vec<_>>()
        .join(" | "))
}

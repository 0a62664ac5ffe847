//! A real ONC RPC program over RPC-over-RDMA version 1 on the software iWARP provider.
//!
//! The program "ECHO" ([`ECHO_PROG`], version 1) has two procedures: NULL (0) and ECHO (1,
//! `opaque data<>` in, the same `opaque data<>` out; the data is DDP-eligible both ways). The
//! requester moves large ECHO arguments into a Read chunk and provides a Write chunk for the
//! result; the responder pulls the chunk by RDMA Read and pushes the result by RDMA Write.
//! Section numbers refer to seed 004 (draft-ietf-nfsv4-rfc5666bis, RPC-over-RDMA version 1).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rpcrdma::rdma::soft::{SoftConfig, SoftConnection, SoftListener, SoftProvider};
use rpcrdma::rdma::{
    self, Access, Completion, ConnectParams, ConnectRequest, Connection, Listener, MemoryRegion,
    Provider, RecvWr, RemoteAddr, SendWr, Sge, WcOpcode, WcStatus,
};
use rpcrdma::xdr::{self, Decode, Decoder, Encode, Encoded, Encoder, ReceivedChunks};
use rpcrdma::xdr::{ChunkTarget, ThresholdPolicy};

use crate::rpc_msg::{
    AcceptStat, AcceptedReply, AcceptedReplyData, AuthFlavor, CallBody, MismatchInfo, OpaqueAuth,
    RejectedReply, ReplyBody, RpcMsg, RpcMsgBody,
};
use crate::v1::{
    Rpcrdma1Body, Rpcrdma1Chunks, Rpcrdma1ErrVers, Rpcrdma1Error, Rpcrdma1Msg, Rpcrdma1ReadList,
    Rpcrdma1ReadSegment, Rpcrdma1Segment, Rpcrdma1WriteChunk, Rpcrdma1WriteList,
};

/// The ECHO program number, in the "defined by user" range 0x20000000-0x3fffffff
/// (RFC 5531 section 7.3).
pub const ECHO_PROG: u32 = 0x2000_ec40;
/// The ECHO program version.
pub const ECHO_VERS: u32 = 1;
/// Procedure NULL: no arguments, no results.
pub const PROC_NULL: u32 = 0;
/// Procedure ECHO: `opaque data<>` in, the same out.
pub const PROC_ECHO: u32 = 1;
/// Receive buffer size on both sides: the inline threshold (section 4.3.1: "Implementations
/// MUST support an inline threshold of 1024 bytes").
pub const INLINE_THRESHOLD: usize = 1024;
/// Receives posted on each side and the credits granted (section 4.3, `rdma_credit`).
pub const CREDITS: u32 = 8;
/// ECHO data at least this long moves by DDP (Read chunk out, Write chunk back).
pub const MIN_DDP_SIZE: usize = 512;
/// The largest ECHO payload the responder accepts: every size from the wire is bounded.
pub const MAX_ECHO_SIZE: usize = 64 << 20;
const RPC_VERSION: u32 = 2;
const TIMEOUT: Duration = Duration::from_secs(30);

/// What went wrong, in words meant for the person running the demo.
#[derive(Debug)]
pub struct DemoError(pub String);

impl std::fmt::Display for DemoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DemoError {}

impl From<rdma::Error> for DemoError {
    fn from(e: rdma::Error) -> Self {
        DemoError(format!("RDMA: {e}"))
    }
}

impl From<xdr::Error> for DemoError {
    fn from(e: xdr::Error) -> Self {
        DemoError(format!("XDR: {e}"))
    }
}

/// The demo's result type.
pub type Result<T> = std::result::Result<T, DemoError>;

fn fail<T>(msg: impl Into<String>) -> Result<T> {
    Err(DemoError(msg.into()))
}

/// What the requester observed.
#[derive(Debug, Clone)]
pub struct Report {
    /// Round-trip time of the NULL call.
    pub null_rtt: Duration,
    /// Round-trip time of the ECHO call (registration, chunk transfers and both messages).
    pub echo_rtt: Duration,
    /// The ECHO payload size.
    pub size: usize,
    /// Whether the ECHO arguments went in a Read chunk (and the result in a Write chunk).
    pub used_chunks: bool,
    /// The echoed data equalled the data sent.
    pub verified: bool,
    /// The responder answered a version-2 header with RDMA_ERROR / ERR_VERS.
    pub err_vers_ok: bool,
    /// The responder answered a misplaced Read chunk with RDMA_ERROR / ERR_CHUNK.
    pub err_chunk_ok: bool,
    /// The responder answered an unknown procedure with PROC_UNAVAIL and an ECHO call without
    /// its argument with GARBAGE_ARGS (RFC 5531 section 9).
    pub rpc_refusals_ok: bool,
}

/// One end of the connection: the connection, its receive buffers and completions seen early.
struct Endpoint {
    conn: SoftConnection,
    recv: MemoryRegion,
    early: Vec<Completion>,
    next_wr: u64,
    side: &'static str,
}

/// Step 1 (section 4.3): post [`CREDITS`] receives of [`INLINE_THRESHOLD`] bytes before the
/// peer can send anything; returns the receive region.
fn post_receives(conn: &SoftConnection) -> rdma::Result<MemoryRegion> {
    let region = conn.register(
        vec![0; CREDITS as usize * INLINE_THRESHOLD],
        Access::LOCAL_WRITE,
    )?;
    for slot in 0..CREDITS as usize {
        repost(conn, &region, slot)?;
    }
    Ok(region)
}

fn repost(conn: &SoftConnection, region: &MemoryRegion, slot: usize) -> rdma::Result<()> {
    let range = slot * INLINE_THRESHOLD..(slot + 1) * INLINE_THRESHOLD;
    conn.post_recv(RecvWr::new(slot as u64, Sge::new(region, range)?))
}

impl Endpoint {
    fn new(conn: SoftConnection, recv: MemoryRegion, side: &'static str) -> Self {
        Endpoint {
            conn,
            recv,
            early: Vec::new(),
            next_wr: 1000,
            side,
        }
    }

    /// Waits for the completion `want` picks, keeping the others for later.
    async fn wait(&mut self, want: impl Fn(&Completion) -> bool) -> Result<Completion> {
        if let Some(i) = self.early.iter().position(&want) {
            return Ok(self.early.remove(i));
        }
        loop {
            let c = tokio::time::timeout(TIMEOUT, self.conn.poll_completion())
                .await
                .map_err(|_| DemoError(format!("{}: timed out", self.side)))?;
            if want(&c) {
                return Ok(c);
            }
            if !c.is_success() && c.status != WcStatus::Flushed {
                return fail(format!("{}: work request failed: {c:?}", self.side));
            }
            self.early.push(c);
        }
    }

    /// Posts a work request built by `wr` and waits for its completion.
    async fn run(&mut self, wr: impl FnOnce(u64) -> SendWr) -> Result<()> {
        self.next_wr += 1;
        let id = self.next_wr;
        self.conn.post_send(wr(id))?;
        let c = self
            .wait(|c| c.wr_id == id && c.opcode != WcOpcode::Recv)
            .await?;
        if !c.is_success() {
            return fail(format!(
                "{}: {:?} failed: {:?}",
                self.side, c.opcode, c.status
            ));
        }
        Ok(())
    }

    /// Sends an RPC-over-RDMA header followed by `rpc` (the inline part of an RPC message).
    async fn send(&mut self, header: &Rpcrdma1Msg, rpc: Option<Encoded>) -> Result<()> {
        let mut msg = xdr::to_bytes(header)?.to_vec();
        for part in rpc.map(Encoded::into_parts).unwrap_or_default() {
            msg.extend_from_slice(&part);
        }
        if msg.len() > INLINE_THRESHOLD {
            return fail(format!(
                "{}: message of {} bytes exceeds the inline threshold",
                self.side,
                msg.len()
            ));
        }
        let region = self.conn.register(msg, Access::NONE)?;
        self.run(|id| SendWr::send(id, vec![Sge::whole(&region)]))
            .await
    }

    /// The next received message, or `None` once the peer has disconnected.
    async fn recv(&mut self) -> Result<Option<Bytes>> {
        let c = self.wait(|c| c.opcode == WcOpcode::Recv).await?;
        if c.status == WcStatus::Flushed {
            return Ok(None);
        }
        if !c.is_success() {
            return fail(format!("{}: receive failed: {:?}", self.side, c.status));
        }
        let slot = c.wr_id as usize;
        let start = slot * INLINE_THRESHOLD;
        let data = self.recv.to_vec(start..start + c.byte_len as usize)?;
        repost(&self.conn, &self.recv, slot)?;
        Ok(Some(Bytes::from(data)))
    }

    /// Registers `data` with `access`, for the peer to read or write.
    fn register(&self, data: Vec<u8>, access: Access) -> Result<MemoryRegion> {
        Ok(self.conn.register(data, access)?)
    }
}

/// A version-1 header (section 5.1) granting or requesting [`CREDITS`].
fn header(xid: u32, body: Rpcrdma1Body) -> Rpcrdma1Msg {
    Rpcrdma1Msg {
        rdma_xid: xid,
        rdma_vers: 1,
        rdma_credit: CREDITS,
        rdma_body: body,
    }
}

fn rdma_msg(reads: Vec<Rpcrdma1ReadList>, writes: Vec<Rpcrdma1WriteList>) -> Rpcrdma1Body {
    Rpcrdma1Body::RdmaMsg(Rpcrdma1Chunks {
        rdma_reads: reads,
        rdma_writes: writes,
        rdma_reply: None,
    })
}

fn auth_none() -> OpaqueAuth {
    OpaqueAuth {
        flavor: AuthFlavor::AuthNone,
        body: Bytes::new(),
    }
}

fn call(xid: u32, proc: u32) -> RpcMsg {
    RpcMsg {
        xid,
        body: RpcMsgBody::Call(CallBody {
            rpcvers: RPC_VERSION,
            prog: ECHO_PROG,
            vers: ECHO_VERS,
            proc,
            cred: auth_none(),
            verf: auth_none(),
        }),
    }
}

fn accepted(xid: u32, reply_data: AcceptedReplyData) -> RpcMsg {
    RpcMsg {
        xid,
        body: RpcMsgBody::Reply(ReplyBody::MsgAccepted(AcceptedReply {
            verf: auth_none(),
            reply_data,
        })),
    }
}

/// The ECHO test pattern: deterministic, so both verification and payload are regenerated.
pub fn pattern(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i * 31 + i / 251) as u8).collect()
}

fn policy() -> ThresholdPolicy {
    ThresholdPolicy {
        inline_threshold: INLINE_THRESHOLD,
        min_ddp_size: MIN_DDP_SIZE,
    }
}

/// Splits a received message into its header and the RPC message after it.
fn parse(msg: Bytes) -> Result<(Rpcrdma1Msg, Bytes)> {
    let mut dec = Decoder::new(&msg);
    let hdr = Rpcrdma1Msg::decode(&mut dec)?;
    Ok((hdr, dec.rest()))
}

// ----------------------------------------------------------------------------- requester

/// Step 2: NULL as RDMA_MSG with empty chunk lists; returns the round-trip time.
async fn call_null(ep: &mut Endpoint, xid: u32) -> Result<Duration> {
    let t0 = Instant::now();
    let mut enc = Encoder::new();
    call(xid, PROC_NULL).encode(&mut enc)?;
    ep.send(&header(xid, rdma_msg(vec![], vec![])), Some(enc.finish()))
        .await?;
    let (hdr, rpc) = expect_reply(ep, xid).await?;
    let mut dec = Decoder::new(&rpc);
    check_success(&RpcMsg::decode(&mut dec)?, xid)?;
    dec.finish()?;
    println!(
        "requester: NULL xid={xid:#x} -> accepted SUCCESS (credits granted {})",
        hdr.rdma_credit
    );
    Ok(t0.elapsed())
}

/// Sends calls that the responder must refuse at the RPC level: an unknown procedure
/// (PROC_UNAVAIL) and ECHO without its argument (GARBAGE_ARGS, not an RPC-over-RDMA error).
async fn probe_rpc_refusals(ep: &mut Endpoint, xid: u32) -> Result<bool> {
    let mut ok = true;
    for (xid, proc, expected) in [
        (xid, 7, AcceptStat::ProcUnavail),
        (xid + 1, PROC_ECHO, AcceptStat::GarbageArgs),
    ] {
        let mut enc = Encoder::new();
        call(xid, proc).encode(&mut enc)?;
        ep.send(&header(xid, rdma_msg(vec![], vec![])), Some(enc.finish()))
            .await?;
        let (_, rpc) = expect_reply(ep, xid).await?;
        let reply = RpcMsg::decode(&mut Decoder::new(&rpc))?;
        let got = match &reply.body {
            RpcMsgBody::Reply(ReplyBody::MsgAccepted(a)) => Some(a.reply_data.discriminant()),
            _ => None,
        };
        println!("requester: proc {proc} (no arguments) -> {got:?}");
        ok &= got == Some(expected);
    }
    Ok(ok)
}

/// Receives the reply for `xid`: an RDMA_MSG, or an error for RDMA_ERROR.
async fn expect_reply(ep: &mut Endpoint, xid: u32) -> Result<(Rpcrdma1Msg, Bytes)> {
    let msg = ep
        .recv()
        .await?
        .ok_or(DemoError("the responder disconnected".into()))?;
    let (hdr, rpc) = parse(msg)?;
    if hdr.rdma_xid != xid {
        return fail(format!("reply xid {:#x}, expected {xid:#x}", hdr.rdma_xid));
    }
    if let Rpcrdma1Body::RdmaError(e) = &hdr.rdma_body {
        return fail(format!("the responder sent RDMA_ERROR {e:?}"));
    }
    Ok((hdr, rpc))
}

fn check_success(msg: &RpcMsg, xid: u32) -> Result<()> {
    match &msg.body {
        RpcMsgBody::Reply(ReplyBody::MsgAccepted(AcceptedReply {
            reply_data: AcceptedReplyData::Success,
            ..
        })) if msg.xid == xid => Ok(()),
        other => fail(format!("unexpected reply for xid {xid:#x}: {other:?}")),
    }
}

/// Step 3: ECHO with `size` bytes; returns (round-trip time, used chunks, verified).
async fn call_echo(ep: &mut Endpoint, xid: u32, size: usize) -> Result<(Duration, bool, bool)> {
    let t0 = Instant::now();
    // Encode the call; the policy moves the payload to a Read chunk (section 4.4.4).
    let mut enc = Encoder::for_call(policy());
    call(xid, PROC_ECHO).encode(&mut enc)?;
    enc.put_ddp_opaque(&Bytes::from(pattern(size)), None)?;
    let (inline, moved) = enc.finish_with_chunks();
    // Register each moved item for REMOTE READ. Nothing else shares the payload any more, so
    // `Vec::from` takes its buffer over instead of copying it.
    let mut reads = Vec::new();
    let mut sources = Vec::new();
    for item in moved {
        let ChunkTarget::Read { position } = item.target else {
            return fail("a call moved an item to a Write chunk");
        };
        let len = item.data.len() as u32;
        let mr = ep.register(Vec::from(item.data), Access::REMOTE_READ)?;
        println!(
            "requester: ECHO arg -> Read chunk position {position}, {len} bytes, handle {:#x}",
            mr.rkey()
        );
        reads.push(Rpcrdma1ReadList {
            rdma_entry: Rpcrdma1ReadSegment {
                rdma_position: position,
                rdma_target: segment(&mr),
            },
        });
        sources.push(mr);
    }
    // Section 4.4.5: a Write chunk large enough for the largest possible result.
    let sink = if size >= MIN_DDP_SIZE {
        Some(ep.register(vec![0; size], Access::LOCAL_WRITE | Access::REMOTE_WRITE)?)
    } else {
        None
    };
    let writes = sink
        .iter()
        .map(|mr| write_chunk(vec![segment(mr)]))
        .collect();
    ep.send(&header(xid, rdma_msg(reads, writes)), Some(inline))
        .await?;
    let (hdr, rpc) = expect_reply(ep, xid).await?;
    let written = written_chunks(&hdr, sink.as_ref())?;
    let mut dec = Decoder::new(&rpc);
    dec.set_chunks(ReceivedChunks::for_reply(written));
    check_success(&RpcMsg::decode(&mut dec)?, xid)?;
    let echoed = dec.get_ddp_opaque(Some(MAX_ECHO_SIZE as u32))?;
    let usage = dec.take_chunks().map(|c| c.finish()).transpose()?;
    dec.finish()?;
    let rtt = t0.elapsed();
    drop(sources);
    let verified = echoed[..] == pattern(size)[..];
    println!(
        "requester: ECHO xid={xid:#x} {size} bytes -> {} echoed bytes{}, unused write chunks {:?}: {}",
        echoed.len(),
        if sink.is_some() { " (via Write chunk)" } else { " (inline)" },
        usage.map(|u| u.unused_write_chunks).unwrap_or_default(),
        if verified { "verification OK" } else { "MISMATCH" }
    );
    Ok((rtt, sink.is_some(), verified))
}

fn segment(mr: &MemoryRegion) -> Rpcrdma1Segment {
    Rpcrdma1Segment {
        rdma_handle: mr.rkey(),
        rdma_length: mr.len() as u32,
        rdma_offset: mr.addr(),
    }
}

fn write_chunk(segments: Vec<Rpcrdma1Segment>) -> Rpcrdma1WriteList {
    Rpcrdma1WriteList {
        rdma_entry: Rpcrdma1WriteChunk {
            rdma_target: segments,
        },
    }
}

/// The bytes the responder wrote into our Write chunk, as long as its updated Write list says.
fn written_chunks(hdr: &Rpcrdma1Msg, sink: Option<&MemoryRegion>) -> Result<Vec<Bytes>> {
    let Rpcrdma1Body::RdmaMsg(chunks) = &hdr.rdma_body else {
        return fail("the reply is not RDMA_MSG");
    };
    match (chunks.rdma_writes.as_slice(), sink) {
        ([], None) => Ok(vec![]),
        ([w], Some(mr)) => {
            // Section 4.4.5: "the responder MUST NOT change the number of segments".
            let [seg] = w.rdma_entry.rdma_target.as_slice() else {
                return fail("the responder changed the number of Write chunk segments");
            };
            if seg.rdma_length as usize > mr.len() {
                return fail("the responder claims more bytes than the Write chunk holds");
            }
            println!(
                "requester: reply Write list says {} bytes written",
                seg.rdma_length
            );
            Ok(vec![Bytes::from(mr.to_vec(0..seg.rdma_length as usize)?)])
        }
        _ => fail("the reply's Write list does not match the Write chunks provided"),
    }
}

/// Step 4 (section 5.5): a version-2 header must get ERR_VERS; a Read chunk at a Position that
/// holds no DDP-eligible item must get ERR_CHUNK.
async fn probe_errors(ep: &mut Endpoint, xid: u32) -> Result<(bool, bool)> {
    let mut bad = header(xid, rdma_msg(vec![], vec![]));
    bad.rdma_vers = 2;
    ep.send(&bad, None).await?;
    let (hdr, _) = parse(ep.recv().await?.ok_or(DemoError("disconnected".into()))?)?;
    let vers_ok = matches!(hdr.rdma_body, Rpcrdma1Body::RdmaError(Rpcrdma1Error::RdmaErrVers(v)) if v.rdma_vers_low == 1 && v.rdma_vers_high == 1);
    println!("requester: version-2 header -> {:?}", hdr.rdma_body);

    let stray = ep.register(vec![7; 8], Access::REMOTE_READ)?;
    let mut enc = Encoder::new();
    call(xid + 1, PROC_ECHO).encode(&mut enc)?;
    enc.put_opaque(&Bytes::from_static(b"hi"), None)?;
    let reads = vec![Rpcrdma1ReadList {
        rdma_entry: Rpcrdma1ReadSegment {
            rdma_position: 8,
            rdma_target: segment(&stray),
        },
    }];
    ep.send(
        &header(xid + 1, rdma_msg(reads, vec![])),
        Some(enc.finish()),
    )
    .await?;
    let (hdr, _) = parse(ep.recv().await?.ok_or(DemoError("disconnected".into()))?)?;
    let chunk_ok = matches!(
        hdr.rdma_body,
        Rpcrdma1Body::RdmaError(Rpcrdma1Error::RdmaErrChunk)
    );
    println!(
        "requester: Read chunk at position 8 (no DDP item there) -> {:?}",
        hdr.rdma_body
    );
    Ok((vers_ok, chunk_ok))
}

/// Runs the requester against the responder at `addr`.
pub async fn request(provider: &SoftProvider, addr: SocketAddr, size: usize) -> Result<Report> {
    if size > MAX_ECHO_SIZE {
        return fail(format!("ECHO size {size} exceeds {MAX_ECHO_SIZE} bytes"));
    }
    let mut recv = None;
    let conn = provider
        .connect_with(addr, ConnectParams::new(), |c: &SoftConnection| {
            recv = Some(post_receives(c)?);
            Ok(())
        })
        .await
        .map_err(|e| DemoError(format!("connecting to {addr}: {e}")))?;
    let recv = recv.ok_or(DemoError("receives were not posted".into()))?;
    println!(
        "requester: connected to {addr}, {CREDITS} receives of {INLINE_THRESHOLD} bytes posted"
    );
    let mut ep = Endpoint::new(conn, recv, "requester");
    let null_rtt = call_null(&mut ep, 0x1000).await?;
    let (echo_rtt, used_chunks, verified) = call_echo(&mut ep, 0x1001, size).await?;
    let (err_vers_ok, err_chunk_ok) = probe_errors(&mut ep, 0x1002).await?;
    let rpc_refusals_ok = probe_rpc_refusals(&mut ep, 0x1004).await?;
    let _ = ep.conn.disconnect().await;
    Ok(Report {
        null_rtt,
        echo_rtt,
        size,
        used_chunks,
        verified,
        err_vers_ok,
        err_chunk_ok,
        rpc_refusals_ok,
    })
}

// ----------------------------------------------------------------------------- responder

/// Accepts one connection on `listener` and serves it until the requester disconnects;
/// returns the number of messages handled.
pub async fn serve(listener: &SoftListener) -> Result<u32> {
    let request = listener.next_request().await?;
    let mut recv = None;
    let conn = request
        .accept_with(ConnectParams::new(), |c: &SoftConnection| {
            recv = Some(post_receives(c)?);
            Ok(())
        })
        .await?;
    let recv = recv.ok_or(DemoError("receives were not posted".into()))?;
    println!("responder: connection from {}", conn.peer_addr());
    let mut ep = Endpoint::new(conn, recv, "responder");
    let mut handled = 0;
    while let Some(msg) = ep.recv().await? {
        if let Err(e) = handle(&mut ep, msg).await {
            // A requester may disconnect as soon as it has our reply, before our Send
            // completes locally: that flushes the Send, and is the end of the session.
            if ep.conn.is_connected() {
                return Err(e);
            }
            println!("responder: the requester left while a reply was completing ({e})");
            break;
        }
        handled += 1;
    }
    println!("responder: requester disconnected after {handled} messages");
    Ok(handled)
}

/// Why a message cannot be answered with an RPC reply (section 5.5).
enum Refusal {
    Vers,
    Chunk(String),
}

impl From<xdr::Error> for Refusal {
    fn from(e: xdr::Error) -> Self {
        Refusal::Chunk(e.to_string())
    }
}

impl From<DemoError> for Refusal {
    fn from(e: DemoError) -> Self {
        Refusal::Chunk(e.0)
    }
}

async fn handle(ep: &mut Endpoint, msg: Bytes) -> Result<()> {
    // Section 5.1: the four fixed fields come first; too short a message has no XID to answer.
    if msg.len() < 16 {
        println!("responder: dropped a {}-byte message", msg.len());
        return Ok(());
    }
    let xid = u32::from_be_bytes([msg[0], msg[1], msg[2], msg[3]]);
    match answer(ep, msg).await {
        Ok(()) => Ok(()),
        Err(refusal) => {
            // Section 5.5: ERR_VERS with the supported range, ERR_CHUNK for other header or
            // chunk decoding errors.
            let err = match refusal {
                Refusal::Vers => Rpcrdma1Error::RdmaErrVers(Rpcrdma1ErrVers {
                    rdma_vers_low: 1,
                    rdma_vers_high: 1,
                }),
                Refusal::Chunk(why) => {
                    println!("responder: xid={xid:#x} ERR_CHUNK: {why}");
                    Rpcrdma1Error::RdmaErrChunk
                }
            };
            ep.send(&header(xid, Rpcrdma1Body::RdmaError(err)), None)
                .await
        }
    }
}

async fn answer(ep: &mut Endpoint, msg: Bytes) -> std::result::Result<(), Refusal> {
    if u32::from_be_bytes([msg[4], msg[5], msg[6], msg[7]]) != 1 {
        return Err(Refusal::Vers);
    }
    let (hdr, rpc) = parse(msg)?;
    let Rpcrdma1Body::RdmaMsg(chunks) = &hdr.rdma_body else {
        return Err(Refusal::Chunk("only RDMA_MSG is supported".into()));
    };
    let pulled = pull_read_chunks(ep, &chunks.rdma_reads).await?;
    let mut dec = Decoder::new(&rpc);
    dec.set_chunks(ReceivedChunks::for_call(pulled));
    let msg = RpcMsg::decode(&mut dec)?;
    let RpcMsgBody::Call(body) = &msg.body else {
        return Err(Refusal::Chunk("a reply where a call was expected".into()));
    };
    if let Some(refused) = check_program(msg.xid, body) {
        return reply_plain(ep, &hdr, refused).await;
    }
    let result = match decode_args(dec, body.proc) {
        Ok(result) => result,
        // Section 5.5: chunk errors get ERR_CHUNK; other argument errors RPC GARBAGE_ARGS.
        Err(e) if e.kind().is_chunk_error() => return Err(Refusal::Chunk(e.to_string())),
        Err(e) => {
            println!("responder: xid={:#x} GARBAGE_ARGS: {e}", msg.xid);
            let garbage = accepted(msg.xid, default(AcceptStat::GarbageArgs));
            return reply_plain(ep, &hdr, garbage).await;
        }
    };
    println!(
        "responder: xid={:#x} proc {} ({} argument bytes)",
        msg.xid,
        body.proc,
        result.as_ref().map_or(0, Bytes::len)
    );
    send_result(ep, &chunks.rdma_writes, msg.xid, result).await?;
    Ok(())
}

/// The RFC 5531 section 9 refusals: RPC_MISMATCH, PROG_UNAVAIL, PROG_MISMATCH, PROC_UNAVAIL.
fn check_program(xid: u32, call: &CallBody) -> Option<RpcMsg> {
    let data = if call.rpcvers != RPC_VERSION {
        let mismatch = MismatchInfo {
            low: RPC_VERSION,
            high: RPC_VERSION,
        };
        let body = ReplyBody::MsgDenied(RejectedReply::RpcMismatch(mismatch));
        return Some(RpcMsg {
            xid,
            body: RpcMsgBody::Reply(body),
        });
    } else if call.prog != ECHO_PROG {
        default(AcceptStat::ProgUnavail)
    } else if call.vers != ECHO_VERS {
        AcceptedReplyData::ProgMismatch(MismatchInfo {
            low: ECHO_VERS,
            high: ECHO_VERS,
        })
    } else if call.proc != PROC_NULL && call.proc != PROC_ECHO {
        default(AcceptStat::ProcUnavail)
    } else {
        return None;
    };
    Some(accepted(xid, data))
}

/// Decodes the arguments of `proc` (NULL: none; ECHO: `opaque data<>`, DDP-eligible) and checks
/// that nothing is left over: no trailing bytes, and (section 4.4.4.2) every Read chunk was
/// consumed at its Position.
fn decode_args(mut dec: Decoder<'_>, proc: u32) -> xdr::Result<Option<Bytes>> {
    let result = match proc {
        PROC_ECHO => Some(dec.get_ddp_opaque(Some(MAX_ECHO_SIZE as u32))?),
        _ => None,
    };
    dec.take_chunks().map(|c| c.finish()).transpose()?;
    dec.finish()?;
    Ok(result)
}

fn default(discriminant: AcceptStat) -> AcceptedReplyData {
    AcceptedReplyData::Default { discriminant }
}

async fn reply_plain(
    ep: &mut Endpoint,
    hdr: &Rpcrdma1Msg,
    reply: RpcMsg,
) -> std::result::Result<(), Refusal> {
    let mut enc = Encoder::new();
    reply.encode(&mut enc)?;
    ep.send(
        &header(hdr.rdma_xid, rdma_msg(vec![], vec![])),
        Some(enc.finish()),
    )
    .await?;
    Ok(())
}

/// RDMA Reads every Read chunk (segments sharing a Position form one chunk, section 4.4.4).
async fn pull_read_chunks(
    ep: &mut Endpoint,
    reads: &[Rpcrdma1ReadList],
) -> Result<Vec<(u32, Bytes)>> {
    let total: u64 = reads
        .iter()
        .map(|r| r.rdma_entry.rdma_target.rdma_length as u64)
        .sum();
    if total > MAX_ECHO_SIZE as u64 {
        return fail(format!(
            "Read chunks of {total} bytes exceed {MAX_ECHO_SIZE}"
        ));
    }
    let mut chunks: Vec<(u32, Vec<u8>)> = Vec::new();
    for r in reads {
        let seg = r.rdma_entry.rdma_target;
        let mut data = vec![0; seg.rdma_length as usize];
        if !data.is_empty() {
            let sink = ep.register(data, Access::LOCAL_WRITE)?;
            let remote = RemoteAddr::new(seg.rdma_handle, seg.rdma_offset);
            ep.run(|id| SendWr::read(id, Sge::whole(&sink), remote))
                .await?;
            data = sink.to_vec(0..sink.len())?;
        }
        println!(
            "responder: RDMA Read {} bytes for position {}",
            data.len(),
            r.rdma_entry.rdma_position
        );
        match chunks
            .iter_mut()
            .find(|(p, _)| *p == r.rdma_entry.rdma_position)
        {
            Some((_, chunk)) => chunk.extend_from_slice(&data),
            None => chunks.push((r.rdma_entry.rdma_position, data)),
        }
    }
    Ok(chunks
        .into_iter()
        .map(|(p, d)| (p, Bytes::from(d)))
        .collect())
}

/// Encodes the accepted reply; moved results go by RDMA Write into the requester's Write
/// chunks, whose segment lengths are updated to the bytes written (section 4.4.5).
async fn send_result(
    ep: &mut Endpoint,
    writes: &[Rpcrdma1WriteList],
    xid: u32,
    result: Option<Bytes>,
) -> Result<()> {
    let capacity = |w: &Rpcrdma1WriteList| {
        w.rdma_entry
            .rdma_target
            .iter()
            .map(|s| s.rdma_length as u64)
            .sum()
    };
    let mut enc = Encoder::for_reply(policy(), writes.iter().map(capacity).collect());
    accepted(xid, AcceptedReplyData::Success).encode(&mut enc)?;
    if let Some(data) = &result {
        enc.put_ddp_opaque(data, None)?;
    }
    let (inline, moved) = enc.finish_with_chunks();
    // Section 4.4.5.1: a Write chunk the reply does not use goes back with zero lengths.
    let mut updated: Vec<Rpcrdma1WriteList> = writes.to_vec();
    for w in &mut updated {
        w.rdma_entry
            .rdma_target
            .iter_mut()
            .for_each(|s| s.rdma_length = 0);
    }
    for item in moved {
        let ChunkTarget::Write { index } = item.target else {
            return fail("a reply moved an item to a Read chunk");
        };
        let source = if item.data.is_empty() {
            None
        } else {
            Some(ep.register(item.data.to_vec(), Access::NONE)?)
        };
        let mut done = 0usize;
        let original = &writes[index].rdma_entry.rdma_target;
        for (seg, orig) in updated[index]
            .rdma_entry
            .rdma_target
            .iter_mut()
            .zip(original)
        {
            let n = (item.data.len() - done).min(orig.rdma_length as usize);
            if n > 0 {
                let src = source.as_ref().expect("non-empty data has a region");
                let sge = Sge::new(src, done..done + n)?;
                let remote = RemoteAddr::new(seg.rdma_handle, seg.rdma_offset);
                ep.run(|id| SendWr::write(id, vec![sge], remote)).await?;
            }
            seg.rdma_length = n as u32;
            done += n;
        }
        println!("responder: RDMA Write {done} bytes into Write chunk {index}");
    }
    ep.send(&header(xid, rdma_msg(vec![], updated)), Some(inline))
        .await
}

// ----------------------------------------------------------------------------- both

/// Runs responder and requester in one process on 127.0.0.1 (ephemeral port).
pub async fn run_in_process(size: usize) -> Result<Report> {
    let provider = SoftProvider::new(SoftConfig::default());
    let listener = provider
        .listen("127.0.0.1:0".parse().expect("address"))
        .await?;
    let addr = listener.local_addr()?;
    println!("responder: listening on {addr}");
    let server = tokio::spawn(async move { serve(&listener).await });
    let report = request(&provider, addr, size).await;
    let served = server
        .await
        .map_err(|e| DemoError(format!("responder task: {e}")))?;
    let report = report?;
    served?;
    Ok(report)
}

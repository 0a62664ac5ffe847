//! Two cores driven against each other without sockets: a simulated fabric carries their
//! Sends, RDMA Reads and Writes between simulated registered memories and enforces handles,
//! rights and invalidation the way an RNIC does.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::*;
use crate::rdma::Access;
use crate::rpc::{
    self, decode_args, encode_reply, encode_reply_header, handler, CallContext, DispatchError,
    HandlerFuture, HeapBuffers, Incoming, ReplyError, Server, Service, TransportKind,
};
use crate::transport::header::{self as hdr, Body, Chunks, Header, RdmaError, ReadChunk, Segment};
use crate::xdr::{self, Decode, Decoder, Encode, EncodedSize, Encoder, Procedure, ThresholdPolicy};

// ---------------------------------------------------------------------------------------------
// Simulated registered memory.

#[derive(Debug)]
struct SimInner {
    handle: AtomicU32,
    addr: u64,
    data: Mutex<Vec<u8>>,
    /// Remote rights of the current handle (REMOTE_READ / REMOTE_WRITE bits).
    remote: AtomicU32,
    valid: AtomicBool,
    /// The budget this buffer's bytes are charged to, given back when it goes.
    charged: Option<Arc<AtomicUsize>>,
}

impl Drop for SimInner {
    fn drop(&mut self) {
        if let Some(used) = &self.charged {
            used.fetch_sub(self.data.get_mut().unwrap().len(), Ordering::SeqCst);
        }
    }
}

#[derive(Clone, Debug)]
struct SimBuf(Arc<SimInner>);

impl Buf for SimBuf {
    fn len(&self) -> usize {
        self.0.data.lock().unwrap().len()
    }
    fn handle(&self) -> u32 {
        self.0.handle.load(Ordering::SeqCst)
    }
    fn addr(&self) -> u64 {
        self.0.addr
    }
    fn freeze(&self, range: std::ops::Range<usize>) -> Bytes {
        Bytes::copy_from_slice(&self.0.data.lock().unwrap()[range])
    }
}

/// One side's memory: its handle table, and how it splits large requests.
struct SimMemory {
    table: Arc<Mutex<HashMap<u32, SimBuf>>>,
    next_handle: u32,
    next_addr: u64,
    /// The largest buffer handed out: larger requests become several slices.
    max_buf: usize,
    copied: usize,
    /// A budget for Read chunk sinks: its limit and the bytes charged now.
    sink_budget: Option<(usize, Arc<AtomicUsize>)>,
    /// Bytes of received data copied out because the budget was past half.
    copied_out: usize,
}

impl SimMemory {
    fn new(base: u32, max_buf: usize) -> SimMemory {
        SimMemory {
            table: Arc::default(),
            next_handle: base,
            next_addr: 0x10_0000,
            max_buf,
            copied: 0,
            sink_budget: None,
            copied_out: 0,
        }
    }

    /// Limits Read chunk sinks to `limit` bytes at once.
    fn limit_sinks(&mut self, limit: usize) {
        self.sink_budget = Some((limit, Arc::default()));
    }

    /// Bytes of sinks charged now.
    fn sinks_used(&self) -> usize {
        self.sink_budget
            .as_ref()
            .map_or(0, |(_, used)| used.load(Ordering::SeqCst))
    }

    fn fresh_handle(&mut self) -> u32 {
        self.next_handle += 1;
        self.next_handle
    }

    fn new_buf(&mut self, len: usize, remote: Access) -> SimBuf {
        let handle = self.fresh_handle();
        let addr = self.next_addr;
        self.next_addr += (len as u64 + 4095) & !4095;
        let buf = SimBuf(Arc::new(SimInner {
            handle: AtomicU32::new(handle),
            addr,
            data: Mutex::new(vec![0; len]),
            remote: AtomicU32::new(remote.bits() as u32),
            valid: AtomicBool::new(remote.is_remote()),
            charged: None,
        }));
        if remote.is_remote() {
            self.table.lock().unwrap().insert(handle, buf.clone());
        }
        buf
    }

    /// Every handle the peer can still reach.
    fn reachable(&self) -> Vec<u32> {
        let table = self.table.lock().unwrap();
        let mut v: Vec<u32> = table
            .iter()
            .filter(|(_, b)| b.0.valid.load(Ordering::SeqCst))
            .map(|(h, _)| *h)
            .collect();
        v.sort();
        v
    }
}

impl Memory for SimMemory {
    type Buf = SimBuf;

    fn alloc(&mut self, len: usize, remote: Access) -> Result<Vec<Slice<SimBuf>>, MemoryError> {
        let mut out = Vec::new();
        let mut left = len.max(1);
        while left > 0 {
            let n = left.min(self.max_buf);
            out.push(Slice::whole(self.new_buf(n, remote)));
            left -= n;
        }
        Ok(out)
    }

    fn source(
        &mut self,
        parts: &[Bytes],
        remote: Access,
    ) -> Result<Vec<Slice<SimBuf>>, MemoryError> {
        let all: Vec<u8> = parts.iter().flat_map(|p| p.iter().copied()).collect();
        self.copied += all.len();
        let slices = self.alloc(all.len(), remote)?;
        let mut at = 0;
        for s in &slices {
            let n = s.len.min(all.len() - at);
            s.buf.0.data.lock().unwrap()[..n].copy_from_slice(&all[at..at + n]);
            at += n;
        }
        Ok(slices)
    }

    fn alloc_sinks(&mut self, lens: &[usize]) -> Result<Vec<Vec<Slice<SimBuf>>>, MemoryError> {
        let Some((limit, used)) = self.sink_budget.clone() else {
            return lens
                .iter()
                .map(|&len| self.alloc(len, Access::NONE))
                .collect();
        };
        let total: usize = lens.iter().sum();
        if total > limit {
            return Err(MemoryError::new(
                MemoryErrorKind::TooLarge,
                "over the limit",
            ));
        }
        if used.load(Ordering::SeqCst) + total > limit {
            return Err(MemoryError::new(
                MemoryErrorKind::Exhausted,
                "over the budget now",
            ));
        }
        let mut out = Vec::new();
        for &len in lens {
            let handle = self.fresh_handle();
            let buf = SimBuf(Arc::new(SimInner {
                handle: AtomicU32::new(handle),
                addr: self.next_addr,
                data: Mutex::new(vec![0; len]),
                remote: AtomicU32::new(0),
                valid: AtomicBool::new(false),
                charged: Some(used.clone()),
            }));
            self.next_addr += (len as u64 + 4095) & !4095;
            used.fetch_add(len, Ordering::SeqCst);
            out.push(vec![Slice::whole(buf)]);
        }
        Ok(out)
    }

    fn max_piece(&self) -> usize {
        self.max_buf
    }

    fn keep_received(&self, _len: usize) -> bool {
        self.sink_budget
            .as_ref()
            .is_none_or(|(limit, used)| used.load(Ordering::SeqCst) <= limit / 2)
    }

    fn copied_out(&mut self, bytes: usize) {
        self.copied_out += bytes;
    }

    fn expose(&mut self, slices: &[Slice<SimBuf>], remote: Access) -> Result<(), MemoryError> {
        for s in slices {
            let handle = self.fresh_handle();
            s.buf.0.handle.store(handle, Ordering::SeqCst);
            s.buf.0.remote.store(remote.bits() as u32, Ordering::SeqCst);
            s.buf.0.valid.store(true, Ordering::SeqCst);
            self.table.lock().unwrap().insert(handle, s.buf.clone());
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// A test program with DDP-eligible arguments and results.

const PROG: u32 = 0x2000_0077;

/// `opaque data<>` marked DDP-eligible.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct DdpData(Bytes);

impl Encode for DdpData {
    fn encode(&self, enc: &mut Encoder) -> xdr::Result<()> {
        enc.put_ddp_opaque(&self.0, None)
    }
}
impl Decode for DdpData {
    fn decode(dec: &mut Decoder) -> xdr::Result<Self> {
        Ok(DdpData(dec.get_ddp_opaque(None)?))
    }
}
impl EncodedSize for DdpData {
    const MAX_LEN: Option<usize> = None;
    const MAX_INLINE_LEN: Option<usize> = Some(4);
}

/// `union switch (int) { case 0: DdpData data; default: void; }`
#[derive(Debug, Clone, PartialEq, Eq)]
enum Maybe {
    Data(DdpData),
    Nothing,
}
impl Encode for Maybe {
    fn encode(&self, enc: &mut Encoder) -> xdr::Result<()> {
        match self {
            Maybe::Data(d) => {
                enc.put_u32(0);
                d.encode(enc)
            }
            Maybe::Nothing => {
                enc.put_u32(1);
                Ok(())
            }
        }
    }
}
impl Decode for Maybe {
    fn decode(dec: &mut Decoder) -> xdr::Result<Self> {
        Ok(match dec.get_u32()? {
            0 => Maybe::Data(DdpData::decode(dec)?),
            _ => Maybe::Nothing,
        })
    }
}
impl EncodedSize for Maybe {
    const MAX_LEN: Option<usize> = None;
    const MAX_INLINE_LEN: Option<usize> = Some(8);
}

macro_rules! procedure {
    ($name:ident, $proc:expr, $args:ty, $res:ty, $ddp:expr) => {
        struct $name;
        impl Procedure for $name {
            const PROGRAM: u32 = PROG;
            const VERSION: u32 = 1;
            const PROCEDURE: u32 = $proc;
            const NAME: &'static str = stringify!($name);
            type Args = $args;
            type Result = $res;
            const RESULT_DDP_ITEMS: usize = $ddp;
        }
    };
}

procedure!(Null, 0, (), (), 0);
procedure!(Echo, 1, DdpData, DdpData, 1);
procedure!(Big, 2, u32, Bytes, 0);
procedure!(LongArgs, 3, Bytes, u32, 0);
procedure!(Two, 4, (DdpData, u32, DdpData), u32, 0);
procedure!(MaybeData, 5, u32, Maybe, 1);
procedure!(Where, 6, Bytes, u32, 0);

struct TestService;

impl Service for TestService {
    fn program(&self) -> u32 {
        PROG
    }
    fn version(&self) -> u32 {
        1
    }
    fn call(
        &self,
        _ctx: CallContext,
        procedure: u32,
        args: &mut Decoder<'_>,
    ) -> Result<HandlerFuture, DispatchError> {
        Ok(match procedure {
            0 => handler(async { Ok(()) }),
            1 => {
                let d: DdpData = decode_args(args)?;
                handler(async move { Ok(d) })
            }
            2 => {
                let n: u32 = decode_args(args)?;
                handler(async move { Ok(Bytes::from(vec![0xb1; n as usize])) })
            }
            3 => {
                let b: Bytes = decode_args(args)?;
                handler(async move { Ok(b.len() as u32) })
            }
            4 => {
                let (a, n, b): (DdpData, u32, DdpData) = decode_args(args)?;
                handler(async move { Ok(a.0.len() as u32 + n + b.0.len() as u32) })
            }
            5 => {
                let n: u32 = decode_args(args)?;
                handler(async move {
                    Ok(if n == 0 {
                        Maybe::Nothing
                    } else {
                        Maybe::Data(DdpData(Bytes::from(vec![0x5d; n as usize])))
                    })
                })
            }
            6 => {
                // Where the argument's data lies in memory, modulo 4096 (RDMA_MSGP keeps it
                // aligned), or 0xffff_ffff when it is not what the client sent.
                let b: Bytes = decode_args(args)?;
                let ok = b
                    .iter()
                    .enumerate()
                    .all(|(i, &x)| x == (i as u8).wrapping_mul(7));
                let at = if ok {
                    (b.as_ptr() as usize % 4096) as u32
                } else {
                    u32::MAX
                };
                handler(async move { Ok(at) })
            }
            _ => return Err(DispatchError::ProcUnavail),
        })
    }
}

fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The pair and its fabric.

struct Side {
    core: Core<SimBuf>,
    mem: SimMemory,
    replies: HashMap<CallId, Result<rpc::Reply, rpc::TransportError>>,
    fatal: Vec<String>,
    /// Versions the core reported settling on.
    negotiated: Vec<u32>,
    /// Handles reachable at the moment each reply event came out.
    reachable_at_reply: HashMap<CallId, Vec<u32>>,
    failed_ops: usize,
    /// The responder's calls in progress just after each reply was handed to the core.
    in_progress_after_reply: Vec<usize>,
}

impl Side {
    fn new(config: CoreConfig, base: u32, max_buf: usize) -> Side {
        Side {
            core: Core::new(config, base),
            mem: SimMemory::new(base << 16, max_buf),
            replies: HashMap::new(),
            fatal: Vec::new(),
            negotiated: Vec::new(),
            reachable_at_reply: HashMap::new(),
            failed_ops: 0,
            in_progress_after_reply: Vec::new(),
        }
    }
}

/// Rewrites a Send in flight (index 0: client to server, 1: server to client).
type Tamper = Box<dyn FnMut(usize, &mut Vec<u8>)>;

struct Pair {
    sides: [Side; 2],
    server: Server,
    /// The server's RDMA Reads are held here, unanswered, instead of being carried out
    /// (`Some`), until [`Pair::release_reads`].
    held_reads: Option<Vec<Op<SimBuf>>>,
    /// Every message that crossed, with the sender's index.
    wire: Vec<(usize, Vec<u8>)>,
    tamper: Option<Tamper>,
    max_reads_seen: usize,
}

const CLIENT: usize = 0;
const SERVER: usize = 1;

fn config(role: Role) -> CoreConfig {
    CoreConfig {
        recv_size: 1024,
        peer_recv_size: 1024,
        ..CoreConfig::new(role)
    }
}

impl Pair {
    fn new() -> Pair {
        Pair::with(config(Role::Client), config(Role::Server), 1 << 20)
    }

    fn with(client: CoreConfig, server: CoreConfig, max_buf: usize) -> Pair {
        let mut b = Server::builder();
        b.add(TestService);
        Pair {
            sides: [Side::new(client, 1, max_buf), Side::new(server, 2, max_buf)],
            server: b.build(),
            held_reads: None,
            wire: Vec::new(),
            tamper: None,
            max_reads_seen: 0,
        }
    }

    fn client(&mut self) -> &mut Side {
        &mut self.sides[CLIENT]
    }

    /// Carries out the server's held RDMA Reads (and holds none from now on), then runs.
    fn release_reads(&mut self) {
        for op in self.held_reads.take().unwrap_or_default() {
            self.apply(SERVER, op);
        }
        self.run();
    }

    /// Runs the fabric and both applications until nothing moves.
    fn run(&mut self) {
        loop {
            let mut moved = false;
            for side in [CLIENT, SERVER] {
                let mut reads_now = 0;
                while let Some(op) = self.sides[side].core.poll_op() {
                    if matches!(op, Op::Read { .. }) {
                        reads_now += 1;
                        self.max_reads_seen = self.max_reads_seen.max(reads_now);
                        if let (SERVER, Some(held)) = (side, self.held_reads.as_mut()) {
                            held.push(op);
                            continue;
                        }
                    }
                    self.apply(side, op);
                    moved = true;
                }
                while let Some(ev) = self.sides[side].core.poll_event() {
                    self.event(side, ev);
                    moved = true;
                }
            }
            if !moved {
                return;
            }
        }
    }

    fn apply(&mut self, from: usize, op: Op<SimBuf>) {
        let to = 1 - from;
        let Some(id) = op.id() else {
            if let Op::Revoke { buf } = op {
                buf.0.valid.store(false, Ordering::SeqCst);
            }
            return;
        };
        let status = match op {
            Op::Send {
                message,
                invalidate,
                ..
            } => {
                let mut bytes: Vec<u8> = message.to_bytes().to_vec();
                assert!(
                    bytes.len() <= self.sides[to].core.config().recv_size,
                    "a Send of {} bytes overruns the peer's {}-byte receive buffer",
                    bytes.len(),
                    self.sides[to].core.config().recv_size
                );
                if let Some(t) = self.tamper.as_mut() {
                    t(from, &mut bytes);
                }
                self.wire.push((from, bytes.clone()));
                let mut invalidated = None;
                if let Some(h) = invalidate {
                    let table = self.sides[to].mem.table.lock().unwrap();
                    let b = table
                        .get(&h)
                        .expect("Send With Invalidate of an unknown handle");
                    assert!(
                        b.0.valid.swap(false, Ordering::SeqCst),
                        "handle already invalid"
                    );
                    invalidated = Some(h);
                }
                let peer = &mut self.sides[to];
                peer.core.handle_recv(&bytes, invalidated, &mut peer.mem);
                WcStatus::Success
            }
            Op::Read { sink, remote, .. } => match self.remote(to, &remote, Access::REMOTE_READ) {
                Some((buf, off)) => {
                    let data =
                        buf.0.data.lock().unwrap()[off..off + remote.rdma_length as usize].to_vec();
                    sink.buf.0.data.lock().unwrap()[sink.offset..sink.offset + sink.len]
                        .copy_from_slice(&data);
                    WcStatus::Success
                }
                None => WcStatus::RemoteAccessError,
            },
            Op::Write { source, remote, .. } => {
                match self.remote(to, &remote, Access::REMOTE_WRITE) {
                    Some((buf, off)) => {
                        let data = source.buf.0.data.lock().unwrap()
                            [source.offset..source.offset + source.len]
                            .to_vec();
                        buf.0.data.lock().unwrap()[off..off + data.len()].copy_from_slice(&data);
                        WcStatus::Success
                    }
                    None => WcStatus::RemoteAccessError,
                }
            }
            Op::Invalidate { buf, .. } => {
                let table = self.sides[from].mem.table.lock().unwrap();
                match table.get(&buf.handle()) {
                    Some(b) if b.0.valid.swap(false, Ordering::SeqCst) => WcStatus::Success,
                    _ => WcStatus::LocalProtectionError,
                }
            }
            Op::Revoke { .. } => unreachable!("handled above"),
        };
        if status != WcStatus::Success {
            self.sides[from].failed_ops += 1;
        }
        let side = &mut self.sides[from];
        side.core.handle_completion(id, status, &mut side.mem);
    }

    /// The peer's buffer and offset for `seg`, if the RNIC would allow the access.
    fn remote(&self, owner: usize, seg: &Segment, need: Access) -> Option<(SimBuf, usize)> {
        let table = self.sides[owner].mem.table.lock().unwrap();
        let b = table.get(&seg.rdma_handle)?;
        if !b.0.valid.load(Ordering::SeqCst)
            || !Access::from_bits_truncate(b.0.remote.load(Ordering::SeqCst) as u8).contains(need)
            || b.handle() != seg.rdma_handle
        {
            return None;
        }
        let off = seg.rdma_offset.checked_sub(b.addr())? as usize;
        (off + seg.rdma_length as usize <= b.len()).then(|| (b.clone(), off))
    }

    fn event(&mut self, side: usize, ev: Event) {
        match ev {
            Event::Reply { call, result } => {
                let reachable = self.sides[side].mem.reachable();
                let s = &mut self.sides[side];
                s.reachable_at_reply.insert(call, reachable);
                s.replies.insert(call, result);
            }
            Event::Call(inc) => self.serve(side, inc),
            Event::Fatal(why) => self.sides[side].fatal.push(why),
            Event::Negotiated { version } => self.sides[side].negotiated.push(version),
        }
    }

    /// The application at `side`: dispatches the call to the test program and replies.
    fn serve(&mut self, side: usize, inc: IncomingCall) {
        let d = self.server.dispatch(Incoming {
            message: inc.message,
            chunks: inc.chunks,
            transport: TransportKind::Rdma,
            peer: None,
            buffers: Arc::new(HeapBuffers),
            backchannel: None,
            caller: None,
            deadline: None,
        });
        let s = &mut self.sides[side];
        let mut enc = match s.core.read_read_policy(inc.id, &inc.write_chunks) {
            Some(policy) => Encoder::for_call(policy),
            None => Encoder::for_reply(ThresholdPolicy::default(), inc.write_chunks.clone()),
        };
        if let Some(thresh) = s.core.pad_threshold() {
            enc.record_pad_points(thresh);
        }
        let encoded = match d {
            rpc::Dispatch::Run { xid, future } => {
                let result = block_on(future);
                encode_reply(&mut enc, xid, &result)
            }
            rpc::Dispatch::Reply { xid, error } => encode_reply_header(&mut enc, xid, Err(error)),
            rpc::Dispatch::ChunkError { .. } => return s.core.reject_chunks(inc.id),
            _ => return s.core.discard_call(inc.id),
        };
        match encoded {
            Ok(()) => {
                let (message, moved) = enc.finish_with_chunks();
                s.core
                    .send_reply(inc.id, message, moved, Instant::now, &mut s.mem);
                let in_progress = s.core.calls_in_progress();
                s.in_progress_after_reply.push(in_progress);
            }
            Err(e) => s.core.reject_reply(inc.id, &e),
        }
    }

    /// Starts a call of `P` from the client (not yet run).
    fn start<P: Procedure>(
        &mut self,
        args: &P::Args,
        write_chunks: Vec<WriteTarget<SimBuf>>,
        reply_chunk: Option<usize>,
    ) -> Result<CallId, rpc::TransportError> {
        let c = &mut self.sides[CLIENT];
        let xid = c.core.next_xid();
        let mut enc = Encoder::for_call(c.core.call_policy());
        if let Some(thresh) = c.core.pad_threshold() {
            enc.record_pad_points(thresh);
        }
        let none = rpc::msg::OpaqueAuth {
            flavor: rpc::msg::AuthFlavor::AuthNone,
            body: Bytes::new(),
        };
        rpc::encode_call_header(
            &mut enc,
            xid,
            P::PROGRAM,
            P::VERSION,
            P::PROCEDURE,
            &none,
            &none,
        )
        .unwrap();
        args.encode(&mut enc).unwrap();
        let (message, moved) = enc.finish_with_chunks();
        c.core.start_call(
            OutgoingCall {
                xid,
                message,
                moved,
                write_chunks,
                reply_chunk,
                timeout: None,
                backward: false,
                room: Vec::new(),
            },
            Instant::now(),
            &mut c.mem,
        )
    }

    /// The decoded reply of call `id`, once it arrived.
    fn result<P: Procedure>(&mut self, id: CallId) -> Result<P::Result, rpc::Error> {
        let reply = self.sides[CLIENT]
            .replies
            .remove(&id)
            .unwrap_or_else(|| panic!("no reply for call {id}"))?;
        rpc::decode_reply::<P::Result>(reply)
    }

    /// Calls `P` and returns its result.
    fn call<P: Procedure>(
        &mut self,
        args: &P::Args,
        write_chunks: Vec<WriteTarget<SimBuf>>,
        reply_chunk: Option<usize>,
    ) -> Result<P::Result, rpc::Error> {
        let id = self.start::<P>(args, write_chunks, reply_chunk)?;
        self.run();
        self.result::<P>(id)
    }
}

fn pattern(len: usize, seed: u8) -> Bytes {
    Bytes::from(
        (0..len)
            .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
            .collect::<Vec<_>>(),
    )
}

// ---------------------------------------------------------------------------------------------
// Message forms.

#[test]
fn a_null_call_goes_inline_both_ways() {
    let mut p = Pair::new();
    p.call::<Null>(&(), vec![], None).unwrap();
    assert_eq!(p.client().core.stats().calls_inline, 1);
    assert_eq!(p.sides[SERVER].core.stats().replies_inline, 1);
    assert_eq!(p.wire.len(), 2);
    // RDMA_MSG, no chunks: 28 bytes of transport header, then the RPC message's XID.
    let (_, call) = &p.wire[0];
    assert_eq!(&call[4..8], &[0, 0, 0, 1], "version 1");
    assert_eq!(&call[12..28], &[0; 16], "RDMA_MSG and three empty lists");
    assert_eq!(
        &call[..4],
        &call[28..32],
        "the header's XID is the RPC message's"
    );
}

#[test]
fn ddp_arguments_move_in_read_chunks_of_several_segments() {
    // 64 KiB pieces: a 200 KiB argument becomes one Read chunk of four segments.
    let mut p = Pair::with(config(Role::Client), config(Role::Server), 64 << 10);
    let data = pattern(200 << 10, 3);
    let back = p
        .call::<Echo>(
            &DdpData(data.clone()),
            vec![WriteTarget::Size(200 << 10)],
            None,
        )
        .unwrap();
    assert_eq!(back.0, data);
    assert_eq!(p.client().core.stats().calls_read_chunks, 1);
    assert_eq!(p.sides[SERVER].core.stats().replies_write_chunks, 1);
    assert_eq!(p.client().core.stats().replies_received_write_chunks, 1);
    let (h, _) = hdr::parse(&p.wire[0].1, &Default::default()).unwrap();
    let Body::Msg(chunks) = h.body else { panic!() };
    assert_eq!(chunks.reads.len(), 1);
    assert_eq!(chunks.reads[0].segments.len(), 4);
    assert_eq!(chunks.reads[0].len(), 200 << 10);
    assert_eq!(chunks.writes.len(), 1);
}

#[test]
fn several_read_chunks_land_at_their_positions() {
    let mut p = Pair::with(config(Role::Client), config(Role::Server), 4096);
    let (a, b) = (pattern(10_001, 1), pattern(5_003, 2));
    let sum = p
        .call::<Two>(&(DdpData(a), 7, DdpData(b)), vec![], None)
        .unwrap();
    assert_eq!(sum, 10_001 + 7 + 5_003);
    let (h, _) = hdr::parse(&p.wire[0].1, &Default::default()).unwrap();
    let Body::Msg(chunks) = h.body else { panic!() };
    assert_eq!(chunks.reads.len(), 2);
    assert_eq!(
        chunks.reads[0].segments.len(),
        3,
        "10,001 bytes in 4 KiB pieces"
    );
    assert_eq!(chunks.reads[1].segments.len(), 2);
    // Positions count in the reconstructed stream: the second item's data starts after the
    // first's data and round-up (10,004 bytes), the 4-byte integer and its own length word.
    assert_eq!(
        chunks.reads[1].position,
        chunks.reads[0].position + 10_004 + 8
    );
    assert!(chunks.reads.iter().all(|r| r.position % 4 == 0));
}

#[test]
fn a_long_call_goes_as_rdma_nomsg_with_a_multi_segment_position_zero_chunk() {
    // Receive buffers of 1 KiB, registrations of 512 bytes: a 3,000-byte argument that is not
    // DDP-eligible makes a long call whose Position-Zero chunk needs several segments.
    let mut p = Pair::with(config(Role::Client), config(Role::Server), 512);
    let len = p.call::<LongArgs>(&pattern(3000, 9), vec![], None).unwrap();
    assert_eq!(len, 3000);
    assert_eq!(p.client().core.stats().calls_long, 1);
    let (h, used) = hdr::parse(&p.wire[0].1, &Default::default()).unwrap();
    assert_eq!(used, p.wire[0].1.len(), "RDMA_NOMSG carries no RPC message");
    let Body::NoMsg(chunks) = h.body else {
        panic!("{:?}", h.body)
    };
    assert_eq!(chunks.reads[0].position, 0);
    assert!(chunks.reads[0].segments.len() >= 6);
    assert!(chunks.reads[0]
        .segments
        .iter()
        .all(|s| s.rdma_length <= 512));
}

#[test]
fn ddp_results_come_back_in_write_chunks_with_round_up() {
    let mut p = Pair::new();
    // 1,001 bytes: the Write chunk is provided with room for three bytes of round-up.
    let data = pattern(1001, 4);
    let back = p
        .call::<Echo>(&DdpData(data.clone()), vec![WriteTarget::Size(1001)], None)
        .unwrap();
    assert_eq!(back.0, data);
    let (h, _) = hdr::parse(&p.wire[0].1, &Default::default()).unwrap();
    let Body::Msg(chunks) = h.body else { panic!() };
    assert_eq!(hdr::total_len(&chunks.writes[0]), 1004);
    let (r, _) = hdr::parse(&p.wire[1].1, &Default::default()).unwrap();
    let Body::Msg(chunks) = r.body else { panic!() };
    assert_eq!(
        hdr::total_len(&chunks.writes[0]),
        1001,
        "the reply's segment lengths are the bytes written"
    );
}

#[test]
fn an_inline_reply_ends_its_call_at_once_and_one_with_a_write_chunk_once_its_operations_complete() {
    let mut p = Pair::new();
    p.call::<Null>(&(), vec![], None).unwrap();
    let data = pattern(1001, 4);
    p.call::<Echo>(&DdpData(data), vec![WriteTarget::Size(1001)], None)
        .unwrap();
    // The inline reply's Send needs no completion; the RDMA Write's source stays held until
    // the Write and the Send behind it complete.
    assert_eq!(p.sides[SERVER].in_progress_after_reply, [0, 1]);
    assert_eq!(p.sides[SERVER].core.calls_in_progress(), 0);
}

#[test]
fn an_unused_write_chunk_comes_back_with_zero_lengths() {
    let mut p = Pair::new();
    let r = p
        .call::<MaybeData>(&0, vec![WriteTarget::Size(4096)], None)
        .unwrap();
    assert_eq!(r, Maybe::Nothing);
    assert_eq!(p.client().core.stats().replies_received_inline, 1);
    let (h, _) = hdr::parse(&p.wire[1].1, &Default::default()).unwrap();
    let Body::Msg(chunks) = h.body else { panic!() };
    assert_eq!(chunks.writes.len(), 1, "the same number of Write chunks");
    assert!(chunks.writes[0].iter().all(|s| s.rdma_length == 0));
    assert!(!chunks.writes[0].is_empty(), "the same number of segments");
    let r = p
        .call::<MaybeData>(&10, vec![WriteTarget::Size(4096)], None)
        .unwrap();
    assert_eq!(r, Maybe::Data(DdpData(Bytes::from(vec![0x5d; 10]))));
}

#[test]
fn a_long_reply_comes_through_the_reply_chunk() {
    let mut p = Pair::with(config(Role::Client), config(Role::Server), 1024);
    let r = p.call::<Big>(&5000, vec![], Some(8192)).unwrap();
    assert_eq!(r, Bytes::from(vec![0xb1; 5000]));
    assert_eq!(p.sides[SERVER].core.stats().replies_long, 1);
    assert_eq!(p.client().core.stats().replies_received_long, 1);
    let (h, _) = hdr::parse(&p.wire[1].1, &Default::default()).unwrap();
    let Body::NoMsg(chunks) = h.body else {
        panic!()
    };
    let reply = chunks.reply.unwrap();
    assert_eq!(reply.len(), 8, "the Reply chunk's eight 1 KiB segments");
    assert!(hdr::total_len(&reply) > 5000);
}

#[test]
fn a_reply_that_fits_nowhere_is_err_chunk_and_a_typed_error() {
    let mut p = Pair::new();
    let err = p.call::<Big>(&5000, vec![], None).unwrap_err();
    assert!(
        matches!(err, rpc::Error::Transport(rpc::TransportError::RdmaChunk)),
        "{err}"
    );
    assert_eq!(p.sides[SERVER].core.stats().errors_sent, 1);
    // A reply chunk that is too small is no better.
    let err = p.call::<Big>(&5000, vec![], Some(2048)).unwrap_err();
    assert!(matches!(
        err,
        rpc::Error::Transport(rpc::TransportError::RdmaChunk)
    ));
    // The connection carries on.
    p.call::<Null>(&(), vec![], None).unwrap();
}

#[test]
fn a_ddp_result_larger_than_its_write_chunk_is_err_chunk() {
    let mut p = Pair::new();
    let err = p
        .call::<MaybeData>(&5000, vec![WriteTarget::Size(100)], None)
        .unwrap_err();
    assert!(
        matches!(err, rpc::Error::Transport(rpc::TransportError::RdmaChunk)),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// Credits.

#[test]
fn one_call_in_flight_until_the_first_reply_grants_more() {
    let mut p = Pair::new();
    let ids: Vec<_> = (0..5)
        .map(|_| p.start::<Null>(&(), vec![], None).unwrap())
        .collect();
    // Seed 004 section 4.3.1: "a requester MUST NOT assume more than one credit is available".
    let mut sends = 0;
    while let Some(op) = p.sides[CLIENT].core.poll_op() {
        sends += matches!(op, Op::Send { .. }) as usize;
        p.apply(CLIENT, op);
    }
    assert_eq!(sends, 1);
    p.run();
    for id in ids {
        p.result::<Null>(id).unwrap();
    }
}

#[test]
fn never_more_outstanding_than_granted_and_zero_counts_as_one() {
    let mut server = config(Role::Server);
    server.credits = 3;
    let mut p = Pair::with(config(Role::Client), server, 1 << 20);
    p.call::<Null>(&(), vec![], None).unwrap();
    for _ in 0..10 {
        p.start::<Null>(&(), vec![], None).unwrap();
    }
    let mut sends = 0;
    while let Some(op) = p.sides[CLIENT].core.poll_op() {
        sends += matches!(op, Op::Send { .. }) as usize;
        p.apply(CLIENT, op);
    }
    assert_eq!(sends, 3, "three credits granted");
    p.run();
    assert_eq!(p.client().replies.len(), 10);

    // A reply granting 0 credits is taken as 1.
    p.tamper = Some(Box::new(|from, bytes| {
        if from == SERVER {
            bytes[8..12].copy_from_slice(&0u32.to_be_bytes());
        }
    }));
    p.call::<Null>(&(), vec![], None).unwrap();
    for _ in 0..4 {
        p.start::<Null>(&(), vec![], None).unwrap();
    }
    let mut sends = 0;
    while let Some(op) = p.sides[CLIENT].core.poll_op() {
        sends += matches!(op, Op::Send { .. }) as usize;
        p.apply(CLIENT, op);
    }
    assert_eq!(sends, 1);
    p.run();
}

#[test]
fn a_requester_over_its_credits_is_fatal_at_the_responder() {
    let mut server = config(Role::Server);
    server.credits = 2;
    let mut p = Pair::with(config(Role::Client), server, 1 << 20);
    // A client that believes it has 5 credits.
    p.tamper = Some(Box::new(|from, bytes| {
        if from == SERVER {
            bytes[8..12].copy_from_slice(&5u32.to_be_bytes());
        }
    }));
    p.call::<Null>(&(), vec![], None).unwrap();
    // Hold the server's replies: nothing gets back until all five are there.
    let ids: Vec<_> = (0..5)
        .map(|_| p.start::<Null>(&(), vec![], None).unwrap())
        .collect();
    while let Some(op) = p.sides[CLIENT].core.poll_op() {
        p.apply(CLIENT, op);
    }
    let _ = ids;
    p.run();
    assert!(
        p.sides[SERVER].fatal.iter().any(|f| f.contains("credits")),
        "{:?}",
        p.sides[SERVER].fatal
    );
}

// ---------------------------------------------------------------------------------------------
// Invalidation.

#[test]
fn every_handle_is_fenced_before_the_reply_is_delivered() {
    let mut p = Pair::with(config(Role::Client), config(Role::Server), 4096);
    let id = p
        .start::<Echo>(
            &DdpData(pattern(20_000, 1)),
            vec![WriteTarget::Size(20_000)],
            None,
        )
        .unwrap();
    p.run();
    assert_eq!(p.client().reachable_at_reply[&id], Vec::<u32>::new());
    // Five Read segments and five Write segments, each its own handle.
    assert_eq!(p.client().core.stats().local_invalidations, 10);
    p.result::<Echo>(id).unwrap();
}

#[test]
fn send_with_invalidate_spares_one_local_invalidation() {
    let mut server = config(Role::Server);
    server.peer_remote_invalidate = true;
    let mut p = Pair::with(config(Role::Client), server, 1 << 20);
    let id = p
        .start::<Echo>(
            &DdpData(pattern(5000, 1)),
            vec![WriteTarget::Size(5000)],
            None,
        )
        .unwrap();
    p.run();
    let stats = p.client().core.stats();
    assert_eq!(stats.remote_invalidations, 1);
    assert_eq!(
        stats.local_invalidations, 1,
        "two handles, one invalidated by the peer"
    );
    assert_eq!(p.client().reachable_at_reply[&id], Vec::<u32>::new());
    p.result::<Echo>(id).unwrap();
}

#[test]
fn a_cancelled_call_leaves_nothing_the_peer_can_write() {
    let mut p = Pair::new();
    let id = p
        .start::<Echo>(
            &DdpData(pattern(5000, 1)),
            vec![WriteTarget::Size(5000)],
            None,
        )
        .unwrap();
    // The Send is out; the server has not answered yet.
    let send = p.sides[CLIENT].core.poll_op().unwrap();
    p.client().core.cancel(id);
    while let Some(op) = p.sides[CLIENT].core.poll_op() {
        assert!(matches!(op, Op::Revoke { .. }), "{op:?}");
        p.apply(CLIENT, op);
    }
    assert_eq!(p.client().core.stats().revocations, 2);
    assert_eq!(p.client().mem.reachable(), Vec::<u32>::new());
    // The call reaches the server late: its Read and its Write are refused, no reply event.
    p.apply(CLIENT, send);
    p.run();
    assert!(p.client().replies.is_empty());
    assert!(p.sides[SERVER].failed_ops > 0);
}

#[test]
fn the_reply_to_an_abandoned_call_frees_its_credit_for_the_next() {
    let mut p = Pair::new();
    // One credit before the first reply: the first call is sent, the second waits.
    let first = p.start::<Null>(&(), vec![], None).unwrap();
    let send = p.sides[CLIENT].core.poll_op().unwrap();
    p.client().core.cancel(first);
    let second = p.start::<Null>(&(), vec![], None).unwrap();
    assert!(
        p.sides[CLIENT].core.poll_op().is_none(),
        "no credit for the second yet"
    );
    p.apply(CLIENT, send);
    p.run();
    assert!(
        !p.client().replies.contains_key(&first),
        "no event for the abandoned call"
    );
    p.result::<Null>(second).unwrap();
}

#[test]
fn a_timed_out_call_fails_and_is_fenced() {
    let mut p = Pair::new();
    let c = &mut p.sides[CLIENT];
    let xid = c.core.next_xid();
    let start = Instant::now();
    let id = c
        .core
        .start_call(
            OutgoingCall {
                xid,
                message: Encoder::new().finish(),
                moved: vec![],
                write_chunks: vec![WriteTarget::Size(100)],
                reply_chunk: None,
                timeout: Some(Duration::from_secs(5)),
                backward: false,
                room: Vec::new(),
            },
            start,
            &mut c.mem,
        )
        .unwrap();
    assert_eq!(c.core.poll_timeout(), Some(start + Duration::from_secs(5)));
    c.core.handle_timeout(start + Duration::from_secs(4));
    assert!(c.core.poll_event().is_none());
    c.core.handle_timeout(start + Duration::from_secs(5));
    match c.core.poll_event() {
        Some(Event::Reply {
            call,
            result: Err(rpc::TransportError::TimedOut(t)),
        }) => assert_eq!((call, t), (id, Duration::from_secs(5))),
        other => panic!("{other:?}"),
    }
    while let Some(op) = p.sides[CLIENT].core.poll_op() {
        p.apply(CLIENT, op);
    }
    assert_eq!(p.client().mem.reachable(), Vec::<u32>::new());
}

#[test]
fn close_fails_every_call_and_resets_the_credits() {
    let mut p = Pair::new();
    let a = p.start::<Null>(&(), vec![], None).unwrap();
    let b = p.start::<Null>(&(), vec![], None).unwrap();
    p.client().core.close();
    let mut failed = vec![];
    while let Some(Event::Reply { call, result }) = p.client().core.poll_event() {
        assert!(matches!(result, Err(rpc::TransportError::Closed)));
        failed.push(call);
    }
    failed.sort();
    assert_eq!(failed, vec![a, b]);
    assert!(p.client().core.poll_op().is_none());
}

// ---------------------------------------------------------------------------------------------
// Errors and hostile headers.

/// Sends `message` to the server as if the client had, returns what the server sent back.
fn inject(p: &mut Pair, message: Vec<u8>) -> Vec<Vec<u8>> {
    let before = p.wire.len();
    let s = &mut p.sides[SERVER];
    s.core.handle_recv(&message, None, &mut s.mem);
    // Answers go to the client's core too, which drops replies to XIDs it never sent.
    p.run();
    p.wire[before..]
        .iter()
        .filter(|(from, _)| *from == SERVER)
        .map(|(_, m)| m.clone())
        .collect()
}

fn header_bytes(h: &Header) -> Vec<u8> {
    let mut enc = Encoder::new();
    hdr::encode(h, &mut enc).unwrap();
    enc.finish().into_bytes().to_vec()
}

fn rpc_null_call(xid: u32) -> Vec<u8> {
    let mut enc = Encoder::new();
    let none = rpc::msg::OpaqueAuth {
        flavor: rpc::msg::AuthFlavor::AuthNone,
        body: Bytes::new(),
    };
    rpc::encode_call_header(&mut enc, xid, PROG, 1, 0, &none, &none).unwrap();
    enc.finish().into_bytes().to_vec()
}

fn answer(messages: &[Vec<u8>]) -> Body {
    assert_eq!(messages.len(), 1, "one answer");
    hdr::parse(&messages[0], &Default::default())
        .unwrap()
        .0
        .body
}

fn seg(handle: u32, len: u32) -> Segment {
    Segment {
        rdma_handle: handle,
        rdma_length: len,
        rdma_offset: 0x1000,
    }
}

#[test]
fn err_vers_names_version_1_for_another_version() {
    let mut p = Pair::new();
    let mut m = header_bytes(&Header::v1(9, 1, Body::Msg(Chunks::default())));
    m[4..8].copy_from_slice(&2u32.to_be_bytes());
    m.extend(rpc_null_call(9));
    let out = inject(&mut p, m);
    assert_eq!(
        answer(&out),
        Body::Error(RdmaError::Vers { low: 1, high: 1 })
    );
    assert_eq!(&out[0][..4], &9u32.to_be_bytes(), "the call's XID");
}

#[test]
fn err_chunk_for_malformed_chunk_lists() {
    let cases: Vec<(&str, Body)> = vec![
        (
            "misaligned position",
            Body::Msg(Chunks {
                reads: vec![ReadChunk {
                    position: 42,
                    segments: vec![seg(7, 8)],
                }],
                ..Default::default()
            }),
        ),
        (
            "RDMA_MSG with a Position-Zero Read chunk",
            Body::Msg(Chunks {
                reads: vec![ReadChunk {
                    position: 0,
                    segments: vec![seg(7, 8)],
                }],
                ..Default::default()
            }),
        ),
        (
            "RDMA_NOMSG without a Position-Zero Read chunk",
            Body::NoMsg(Chunks::default()),
        ),
        (
            "too many segments",
            Body::Msg(Chunks {
                writes: vec![vec![seg(7, 8); 65]],
                ..Default::default()
            }),
        ),
        (
            "a segment that wraps",
            Body::Msg(Chunks {
                writes: vec![vec![Segment {
                    rdma_handle: 1,
                    rdma_length: 16,
                    rdma_offset: u64::MAX - 3,
                }]],
                ..Default::default()
            }),
        ),
    ];
    for (what, body) in cases {
        let mut p = Pair::with(
            CoreConfig {
                recv_size: 4096,
                ..config(Role::Client)
            },
            CoreConfig {
                recv_size: 4096,
                ..config(Role::Server)
            },
            1 << 20,
        );
        let mut m = header_bytes(&Header::v1(5, 1, body));
        m.extend(rpc_null_call(5));
        assert_eq!(
            answer(&inject(&mut p, m)),
            Body::Error(RdmaError::BadXdr),
            "{what}"
        );
    }
}

#[test]
fn err_chunk_when_a_read_chunk_does_not_add_up() {
    // An ECHO whose Read chunk holds 8 bytes where the inline length word says 4,000.
    let mut p = Pair::new();
    let target = p.sides[CLIENT]
        .mem
        .alloc(8, Access::REMOTE_READ)
        .unwrap()
        .remove(0);
    let mut rpc_msg = Vec::new();
    let none = rpc::msg::OpaqueAuth {
        flavor: rpc::msg::AuthFlavor::AuthNone,
        body: Bytes::new(),
    };
    let mut enc = Encoder::new();
    rpc::encode_call_header(&mut enc, 11, PROG, 1, 1, &none, &none).unwrap();
    enc.put_u32(4000);
    rpc_msg.extend_from_slice(&enc.finish().into_bytes());
    let position = rpc_msg.len() as u32;
    let mut m = header_bytes(&Header::v1(
        11,
        1,
        Body::Msg(Chunks {
            reads: vec![ReadChunk {
                position,
                segments: vec![target.segment()],
            }],
            ..Default::default()
        }),
    ));
    m.extend(rpc_msg);
    assert_eq!(answer(&inject(&mut p, m)), Body::Error(RdmaError::BadXdr));
}

#[test]
fn rdma_msgp_is_taken_as_rdma_msg_and_rdma_done_is_dropped() {
    let mut p = Pair::new();
    // RDMA_MSGP: proc 2, align, thresh, then empty chunk lists.
    let mut m = Vec::new();
    for w in [21u32, 1, 1, 2, 0, 0, 0, 0, 0] {
        m.extend_from_slice(&w.to_be_bytes());
    }
    m.extend(rpc_null_call(21));
    let out = inject(&mut p, m);
    assert!(
        matches!(answer(&out), Body::Msg(_)),
        "answered like RDMA_MSG"
    );
    let mut done = Vec::new();
    for w in [22u32, 1, 1, 3] {
        done.extend_from_slice(&w.to_be_bytes());
    }
    assert!(inject(&mut p, done).is_empty());
    assert_eq!(p.sides[SERVER].core.stats().dropped, 1);
}

#[test]
fn short_and_cut_headers_never_panic() {
    let mut p = Pair::new();
    let mut full = header_bytes(&Header::v1(
        3,
        1,
        Body::Msg(Chunks {
            inv_handle: 0,
            reads: vec![ReadChunk {
                position: 100,
                segments: vec![seg(1, 8), seg(2, 8)],
            }],
            writes: vec![vec![seg(3, 64)]],
            reply: Some(vec![seg(4, 64)]),
        }),
    ));
    full.extend(rpc_null_call(3));
    for cut in 0..full.len() {
        let out = inject(&mut p, full[..cut].to_vec());
        if cut < hdr::FIXED_LEN {
            assert!(out.is_empty(), "a {cut}-byte stub is dropped");
        } else {
            assert!(out.len() <= 1, "at most one answer to a {cut}-byte prefix");
        }
    }
    assert!(p.sides[SERVER].fatal.is_empty());
}

#[test]
fn a_requester_fails_the_call_on_rdma_error() {
    let mut p = Pair::new();
    p.tamper = Some(Box::new(|from, bytes| {
        if from == SERVER {
            let xid = u32::from_be_bytes(bytes[..4].try_into().unwrap());
            *bytes = header_bytes(&Header::v1(
                xid,
                8,
                Body::Error(RdmaError::Vers { low: 2, high: 3 }),
            ));
        }
    }));
    let err = p.call::<Null>(&(), vec![], None).unwrap_err();
    assert!(
        matches!(
            err,
            rpc::Error::Transport(rpc::TransportError::RdmaVersion { low: 2, high: 3 })
        ),
        "{err}"
    );
}

#[test]
fn replies_for_unknown_xids_and_duplicates_are_dropped() {
    let mut p = Pair::new();
    let mut reply = None;
    p.tamper = Some(Box::new(move |from, bytes| {
        if from == SERVER {
            reply.get_or_insert_with(|| bytes.clone());
        }
    }));
    p.call::<Null>(&(), vec![], None).unwrap();
    let first = p.wire[1].1.clone();
    let c = &mut p.sides[CLIENT];
    c.core.handle_recv(&first, None, &mut c.mem);
    let mut stranger = first.clone();
    stranger[..4].copy_from_slice(&0xdead_beefu32.to_be_bytes());
    c.core.handle_recv(&stranger, None, &mut c.mem);
    assert!(c.core.poll_event().is_none());
    assert_eq!(c.core.stats().dropped, 2);
}

#[test]
fn rdma_reads_stay_within_the_peers_ird() {
    let mut server = config(Role::Server);
    server.max_reads = 2;
    // 1 KiB registrations: a 20 KiB argument is 20 Read segments.
    let mut p = Pair::with(config(Role::Client), server, 1024);
    let data = pattern(20 << 10, 5);
    let id = p
        .start::<Echo>(
            &DdpData(data.clone()),
            vec![WriteTarget::Size(20 << 10)],
            None,
        )
        .unwrap();
    while let Some(op) = p.sides[CLIENT].core.poll_op() {
        p.apply(CLIENT, op);
    }
    // Hold the server's Reads: only two are posted until one completes.
    let mut completed = 0;
    loop {
        let mut posted = Vec::new();
        while let Some(op) = p.sides[SERVER].core.poll_op() {
            posted.push(op);
        }
        let reads = posted
            .iter()
            .filter(|o| matches!(o, Op::Read { .. }))
            .count();
        if reads == 0 {
            for op in posted {
                p.apply(SERVER, op);
            }
            break;
        }
        assert!(reads <= 2, "{reads} Reads outstanding");
        for op in posted {
            p.apply(SERVER, op);
            completed += 1;
        }
    }
    assert_eq!(completed, 20);
    p.run();
    assert_eq!(p.result::<Echo>(id).unwrap().0, data);
}

// ---------------------------------------------------------------------------------------------
// The backward direction.

#[test]
fn the_server_calls_back_while_forward_calls_are_in_flight() {
    let mut client = config(Role::Client);
    client.backward_credits = 2;
    let mut server = config(Role::Server);
    server.backward_credits = 2;
    let mut p = Pair::with(client, server, 1 << 20);
    // A forward call in flight at the server...
    let forward = p
        .start::<Echo>(&DdpData(pattern(50, 1)), vec![WriteTarget::Size(64)], None)
        .unwrap();
    while let Some(op) = p.sides[CLIENT].core.poll_op() {
        p.apply(CLIENT, op);
    }
    // ... while the server calls the client's NULL procedure (the client hosts the test program
    // too: both sides share the Pair's server).
    let s = &mut p.sides[SERVER];
    let xid = s.core.next_xid();
    let msg = rpc_null_call(xid);
    let mut enc = Encoder::new();
    enc.put_gathered(Bytes::from(msg));
    let backward = s
        .core
        .start_call(
            OutgoingCall {
                xid,
                message: enc.finish(),
                moved: vec![],
                write_chunks: vec![],
                reply_chunk: None,
                timeout: None,
                backward: true,
                room: Vec::new(),
            },
            Instant::now(),
            &mut s.mem,
        )
        .unwrap();
    p.run();
    let reply = p.sides[SERVER].replies.remove(&backward).unwrap().unwrap();
    rpc::decode_reply::<()>(reply).unwrap();
    p.result::<Echo>(forward).unwrap();
    // A backward call cannot carry chunks.
    let s = &mut p.sides[SERVER];
    let xid = s.core.next_xid();
    let err = s
        .core
        .start_call(
            OutgoingCall {
                xid,
                message: Encoder::new().finish(),
                moved: vec![],
                write_chunks: vec![WriteTarget::Size(10)],
                reply_chunk: None,
                timeout: None,
                backward: true,
                room: Vec::new(),
            },
            Instant::now(),
            &mut s.mem,
        )
        .unwrap_err();
    assert!(matches!(err, rpc::TransportError::Protocol(_)));
}

#[test]
fn a_client_without_a_backward_direction_drops_backward_calls() {
    let mut p = Pair::new();
    let mut m = header_bytes(&Header::v1(77, 1, Body::Msg(Chunks::default())));
    m.extend(rpc_null_call(77));
    let c = &mut p.sides[CLIENT];
    c.core.handle_recv(&m, None, &mut c.mem);
    assert!(c.core.poll_op().is_none());
    assert_eq!(c.core.stats().dropped, 1);
}

#[test]
fn garbage_args_travel_as_an_rpc_reply_not_a_transport_error() {
    let mut p = Pair::new();
    procedure!(EchoWithNothing, 1, (), DdpData, 1);
    let err = p
        .call::<EchoWithNothing>(&(), vec![WriteTarget::Size(10)], None)
        .unwrap_err();
    assert!(matches!(err, rpc::Error::GarbageArgs), "{err}");
    let err = p.call::<Null>(&(), vec![], None).map(|_| ());
    assert!(err.is_ok());
    procedure!(Nope, 99, (), (), 0);
    let err = p.call::<Nope>(&(), vec![], None).unwrap_err();
    assert!(matches!(err, rpc::Error::ProcUnavail));
    let _ = ReplyError::SystemErr;
}

#[test]
fn a_read_chunk_with_or_without_its_round_up_is_taken() {
    // Seed 004 section 4.4.4.1: "the requester MAY choose to send a Read chunk without any XDR
    // padding. The responder MUST be prepared to provide appropriate round-up".
    for chunk_len in [5u32, 8] {
        let mut p = Pair::new();
        let src = p.sides[CLIENT]
            .mem
            .alloc(8, Access::REMOTE_READ)
            .unwrap()
            .remove(0);
        src.buf
            .0
            .data
            .lock()
            .unwrap()
            .copy_from_slice(b"hello\0\0\0");
        let none = rpc::msg::OpaqueAuth {
            flavor: rpc::msg::AuthFlavor::AuthNone,
            body: Bytes::new(),
        };
        let mut enc = Encoder::new();
        rpc::encode_call_header(&mut enc, 31, PROG, 1, 1, &none, &none).unwrap();
        enc.put_u32(5);
        let rpc_msg = enc.finish().into_bytes().to_vec();
        let mut seg = src.segment();
        seg.rdma_length = chunk_len;
        let mut m = header_bytes(&Header::v1(
            31,
            1,
            Body::Msg(Chunks {
                reads: vec![ReadChunk {
                    position: rpc_msg.len() as u32,
                    segments: vec![seg],
                }],
                ..Default::default()
            }),
        ));
        m.extend(rpc_msg);
        let out = inject(&mut p, m);
        assert_eq!(out.len(), 1, "chunk of {chunk_len}");
        let (h, used) = hdr::parse(&out[0], &Default::default()).unwrap();
        assert!(
            matches!(h.body, Body::Msg(_)),
            "chunk of {chunk_len}: {h:?}"
        );
        let echoed = rpc::decode_reply::<DdpData>(rpc::Reply {
            message: Bytes::copy_from_slice(&out[0][used..]),
            chunks: None,
        })
        .unwrap();
        assert_eq!(&echoed.0[..], b"hello", "chunk of {chunk_len}");
    }
}

mod budget;
mod mode2004;
mod v2;
mod xid;

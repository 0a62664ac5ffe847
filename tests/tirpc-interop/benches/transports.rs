//! The RPC transports against each other and against their baselines, measured in the same
//! run on loopback:
//!
//! * NULL round trip, one call at a time: RPC-over-RDMA on the software provider, our ONC RPC
//!   over TCP, and a libtirpc `rpcgen` client and server over TCP. Targets: our TCP no slower
//!   than libtirpc, RPC-over-RDMA at most 1.3x our TCP.
//! * 1 MiB read (a result in a Write chunk) and 1 MiB write (an argument in a Read chunk) over
//!   RPC-over-RDMA, against raw TCP moving 1 MiB each way. Target: at least 75% of raw TCP,
//!   judged with client and server in two processes (see "Bulk").
//! * 1 MiB READ and WRITE over our ONC RPC over TCP too: in one process with the same test
//!   program (RPC-over-RDMA against it), and in two processes against libtirpc's client and
//!   server (FILL and SINK of `interop.x`; no targets).
//! * 4 KiB and 64 KiB READ and WRITE, one call at a time, RPC-over-RDMA against our TCP in one
//!   process and in two. Target (issue 54): at least our TCP's throughput. The same typed
//!   call on both transports, without options: over RPC-over-RDMA the transport decides how a
//!   READ's data comes back (a 4 KiB one inline, as the receive buffer holds it; a 64 KiB one
//!   in a Write chunk it sizes from the procedure's recent results), where the 1 MiB rows
//!   give it a registered buffer to land in.
//! * NULL throughput with 1, 2, 4 .. 64 calls in flight: RPC-over-RDMA and our TCP in one
//!   process (one connection, a task per call in flight), our TCP client and server in two
//!   processes, and libtirpc, whose client has one call in flight, as that many C client
//!   processes (a plot in the report). Target (issue 54): RPC-over-RDMA's calls per second at
//!   least our TCP's with 1, 8 and 64 in flight, in one process.
//!
//! # Process structure
//!
//! The libtirpc client and server are two processes (rpcgen programs, single-threaded). Every
//! message between two processes wakes the other one: on the same CPU a context switch, on
//! another CPU an inter-processor wake-up, which on a VM costs tens of microseconds (a 2-vCPU
//! VM measured 6 us per libtirpc NULL call with both processes on one CPU and about 70 us
//! across the two; unpinned, the scheduler picks either, run to run). So the NULL figures
//! come in two structures, each compared only with its own kind:
//!
//! * **two processes**, as libtirpc runs: this bench binary started again as a client
//!   (`--client`) and as servers (`--serve tcp`, our TCP server alone; `--serve rdma`, our
//!   RPC-over-RDMA server and the raw TCP server), each on a current-thread runtime, against
//!   the C client and server. Our TCP processes have one thread each for their work, as the C
//!   programs: a second thread sharing a process's descriptor table makes each of its system
//!   calls on a socket dearer (Linux then takes a reference on the file per call), 0.8 % of a
//!   NULL round trip, so our TCP server no longer shares a process with the other servers'
//!   threads (and our client times calls out without a thread: `rpc::tcp`'s `deadlines`).
//!   All are pinned with `taskset`, client on CPU 0 and server on CPU 0 (*same CPU*)
//!   or CPU 1 (*across CPUs*). The mixed pairs (our client with the C server, the C client
//!   with our server) are shown too. **Our TCP against libtirpc is judged here**, same CPU and
//!   across CPUs: the only fair comparison with a two-process baseline. The C clients of the
//!   calls-in-flight rows go to a second C server, so that the one judged has only ever had
//!   one client at a time, as ours (after 64 clients at once libtirpc's server stays ~0.2 us
//!   slower per call: it keeps polling every slot they used).
//! * **one process**: our client and server in this process on one runtime (two workers;
//!   `TRANSPORTS_RUNTIME=current` for a current-thread runtime), as an application embedding
//!   both, or our other benches, run them. **RPC-over-RDMA against our TCP is judged here**:
//!   both have the same structure, and without a process wake-up per message the figures
//!   show the transports' own cost (across CPUs, two processes pay 30+ us of wake-ups per
//!   message, which hides any difference between transports). The two-process ratios are
//!   shown too, with the same target. Both NULL figures of a round come from one task that
//!   calls the two transports in turn, 250 calls at a time (`null_pair_us`), so that both
//!   run where the scheduler put that one task.
//!
//! Without `taskset` (or with one CPU) the two-process figures run unpinned and say so.
//!
//! # Bulk
//!
//! The bulk target is judged in two processes on two CPUs (the *across CPUs* placement), as a
//! client and a server on two machines run: our client process (`--client rdma|raw`) against
//! our server process (`--serve rdma`, which also runs a raw TCP server of blocking sockets).
//!
//! It is judged with both RPC-over-RDMA ends configured without MPA CRC (`--client
//! rdma-nocrc`, the server's second port), where TCP's checksum alone guards the data, as it
//! guards raw TCP's: the same integrity as the baseline (and Linux siw's default). The default
//! configuration, MPA CRC on, adds a CRC32c over every byte on both sides (10-13 % of each
//! process's CPU time in a 1 MiB READ between two processes, `perf record`, 2-vCPU VM); it is
//! measured in the same rounds and shown beside the judged rows, without a target.
//! In one process the raw TCP baseline is bimodal: when tokio runs its sender and its receiver on
//! different workers, both CPUs copy one transfer (7.2-7.8 GB/s on a 2-vCPU VM), otherwise
//! 3.3-3.7 GB/s, round to round; RPC-over-RDMA's four tasks (two applications, two provider
//! connections) measured 3.0-3.4 GB/s there either way. Those one-process ratios are shown,
//! not judged.
//!
//! The raw TCP server answers from a buffer it filled once; likewise the RPC-over-RDMA server
//! answers the 1 MiB READ (FILL) from a registered buffer it filled once per connection (a
//! cache, not a copy per call: the copy would be a file read, which the raw TCP side does not
//! do either).
//!
//! Each round's raw TCP transfers run on a new connection, and so do the RPC-over-RDMA ones.
//! Both ends of each connection live in this one runtime: on a connection that first carried
//! a NULL ping-pong, tokio keeps both ends' tasks on one worker (each wakes the next in its
//! LIFO slot), so sender and receiver no longer run in parallel and the READ measured 1770-1870
//! MB/s instead of 2530-2920 on a new connection (2-vCPU VM). Separate machines or processes
//! do not share workers.
//!
//! Rounds are interleaved so that every measurement sees the same conditions; each figure is
//! the median of its rounds (or runs), each ratio the median of the per-round (per-run)
//! ratios. A missed target is marked `MISSED`; with `--check` (or `BENCH_CHECK=1`) the bench
//! then exits non-zero.
//!
//! `cargo bench -p tirpc-interop --bench transports [-- --check]`; `TRANSPORTS_ROUNDS` and
//! `TRANSPORTS_CALLS` change the rounds (default 9, 3 with `BENCH_QUICK=1`) and calls per
//! latency round (default 5000, 2000 quick), `TRANSPORTS_NULL_REPEATS` how many times each
//! two-process NULL pair runs per round (default 3, 1 quick). Every ratio and the
//! calls-in-flight curves are also written as records for `scripts/bench`'s report
//! (`bench_report`).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bench_report::{Recorder, Target};
use bytes::Bytes;
use rpcrdma::rdma::soft::{SoftConfig, SoftProvider};
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::tcp::{TcpConfig, TcpServer, TcpTransport};
use rpcrdma::rpc::{CallContext, CallOptions, Client, ReplyError, Server};
use rpcrdma::transport::conformance::program::{
    pattern_of, testvers, EchoArgs, EchoRes, MaybeRes, PlainArgs, PlainRes, TestServer,
    TestversClient, TestversServer, TwoArgs,
};
use rpcrdma::transport::{serve, RdmaConfig, RdmaTransport};
use tirpc_interop::c::{self, CPrograms, CServer};
use tirpc_interop::interop::interop_prog::interop_vers::{Fill, InteropNull, Sink};
use tirpc_interop::service;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const MIB: usize = 1 << 20;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The test program's server, except that FILL answers from a registered buffer filled once
/// per connection (see the module documentation).
#[derive(Default)]
struct BenchServer {
    inner: TestServer,
    /// The buffer filled for each connection (by its peer's address): registered memory of
    /// that connection.
    filled: Mutex<HashMap<Option<SocketAddr>, Bytes>>,
}

impl TestversServer for BenchServer {
    async fn test_null(&self, ctx: CallContext) -> Result<(), ReplyError> {
        self.inner.test_null(ctx).await
    }
    async fn test_echo(&self, ctx: CallContext, args: EchoArgs) -> Result<EchoRes, ReplyError> {
        self.inner.test_echo(ctx, args).await
    }
    async fn test_big(&self, ctx: CallContext, len: u32) -> Result<PlainRes, ReplyError> {
        self.inner.test_big(ctx, len).await
    }
    async fn test_longargs(&self, ctx: CallContext, args: PlainArgs) -> Result<u32, ReplyError> {
        self.inner.test_longargs(ctx, args).await
    }
    async fn test_two(&self, ctx: CallContext, args: TwoArgs) -> Result<u32, ReplyError> {
        self.inner.test_two(ctx, args).await
    }
    async fn test_maybe(&self, ctx: CallContext, n: u32) -> Result<MaybeRes, ReplyError> {
        self.inner.test_maybe(ctx, n).await
    }
    async fn test_sleep(&self, ctx: CallContext, ms: u32) -> Result<u32, ReplyError> {
        self.inner.test_sleep(ctx, ms).await
    }
    async fn test_callback(&self, ctx: CallContext, n: u32) -> Result<u32, ReplyError> {
        self.inner.test_callback(ctx, n).await
    }
    async fn test_fill(&self, ctx: CallContext, len: u32) -> Result<EchoRes, ReplyError> {
        let peer = ctx.peer();
        let cached = self.filled.lock().unwrap().get(&peer).cloned();
        let data = match cached.filter(|d| d.len() == len as usize) {
            Some(data) => data,
            None => {
                let data = self.inner.test_fill(ctx, len).await?.data;
                self.filled.lock().unwrap().insert(peer, data.clone());
                data
            }
        };
        Ok(EchoRes { tag: len, data })
    }
    async fn test_sum(&self, ctx: CallContext, args: EchoArgs) -> Result<u64, ReplyError> {
        self.inner.test_sum(ctx, args).await
    }
    async fn test_slowecho(&self, ctx: CallContext, args: EchoArgs) -> Result<EchoRes, ReplyError> {
        self.inner.test_slowecho(ctx, args).await
    }
    async fn test_write(&self, ctx: CallContext, args: EchoArgs) -> Result<u32, ReplyError> {
        self.inner.test_write(ctx, args).await
    }
}

fn bench_server() -> Server {
    let mut b = Server::builder();
    testvers::register(&mut b, BenchServer::default());
    b.build()
}

/// An RPC-over-RDMA server on loopback (soft provider, its defaults); returns its address.
/// The soft provider as configured by default (MPA CRC on), or with `crc: false`: TCP's
/// checksum then guards the data, as it does raw TCP's (see "Bulk").
fn soft_provider(crc: bool) -> SoftProvider {
    let mut config = SoftConfig::default();
    config.mpa.crc = crc;
    SoftProvider::new(config)
}

async fn rdma_server(server: Server) -> SocketAddr {
    rdma_server_with(server, true).await
}

async fn rdma_server_with(server: Server, crc: bool) -> SocketAddr {
    let provider = Arc::new(soft_provider(crc));
    let listener = provider
        .listen((Ipv4Addr::LOCALHOST, 0).into())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let rdma_server = Arc::new(serve::<SoftProvider>(
        listener,
        server,
        RdmaConfig::default().credits(128),
    ));
    tokio::spawn(async move { rdma_server.run().await });
    addr
}

async fn rdma_client(addr: SocketAddr) -> TestversClient {
    rdma_client_with(addr, true).await
}

async fn rdma_client_with(addr: SocketAddr, crc: bool) -> TestversClient {
    let provider = Arc::new(soft_provider(crc));
    TestversClient::new(Client::new(
        RdmaTransport::connect(provider, addr, RdmaConfig::default().credits(128))
            .await
            .unwrap(),
    ))
}

async fn tcp_client(addr: SocketAddr) -> TestversClient {
    TestversClient::new(Client::new(
        TcpTransport::connect(addr, TcpConfig::new()).await.unwrap(),
    ))
}

/// A current-thread runtime with what our clients and servers use (I/O and time; not the
/// process and signal drivers, whose work on every park showed in the client's profile).
fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .unwrap()
}

/// The program the two-process pairs call (the one the C server serves): `interop.x`, whose
/// NULL our client calls as the C client does.
/// The server of the two-process rows: `interop.x` (FILL and SINK as the C server answers
/// them) and the test program (FILL from a registered buffer, for RPC-over-RDMA's bulk rows).
fn serving_server() -> Server {
    let mut b = Server::builder();
    service::register(&mut b, service::Reference);
    testvers::register(&mut b, BenchServer::default());
    b.build()
}

/// `--serve tcp`: our TCP server of [`serving_server`] alone on a current-thread runtime, the
/// process's one thread (as libtirpc's server; see "Process structure"); prints its port.
/// `--serve rdma`: our RPC-over-RDMA server of [`serving_server`] on a current-thread runtime
/// and the raw TCP server of blocking sockets ([`raw_blocking_server`]); prints
/// `RDMA_PORT RAW_PORT`. Either serves until its standard input closes.
fn serve_main(what: Option<&str>) -> ExitCode {
    let tcp = match what {
        Some("tcp") => true,
        Some("rdma") => false,
        _ => {
            eprintln!("usage: --serve tcp|rdma");
            return ExitCode::FAILURE;
        }
    };
    current_thread().block_on(async {
        let _server = if tcp {
            let tcp = TcpServer::bind((Ipv4Addr::LOCALHOST, 0), serving_server(), TcpConfig::new())
                .await
                .unwrap();
            println!("{}", tcp.local_addr().port());
            Some(tcp)
        } else {
            let raw_port = raw_blocking_server();
            let rdma = rdma_server(serving_server()).await;
            let rdma_no_crc = rdma_server_with(serving_server(), false).await;
            println!("{} {raw_port} {}", rdma.port(), rdma_no_crc.port());
            None
        };
        std::io::stdout().flush().unwrap();
        stdin_closed().await;
    });
    ExitCode::SUCCESS
}

/// Waits until standard input closes (whoever started this process went away), read by the
/// runtime itself when it is a pipe: tokio's `stdin` reads on a thread of its blocking pool,
/// a second thread in the process (see "Process structure"). Otherwise waits forever.
async fn stdin_closed() {
    use std::os::fd::AsFd;
    use tokio::net::unix::pipe;
    let stdin = std::io::stdin().as_fd().try_clone_to_owned().ok();
    let Some(stdin) = stdin.and_then(|fd| pipe::Receiver::from_owned_fd(fd).ok()) else {
        return std::future::pending().await;
    };
    let mut buffer = [0u8; 64];
    loop {
        if stdin.readable().await.is_err() {
            return;
        }
        match stdin.try_read(&mut buffer) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
    }
}

/// The raw TCP server of [`raw_server`]'s protocol on blocking sockets, a thread per
/// connection (as iperf3 moves bytes: plain `read` and `write`, no runtime); returns its port.
fn raw_blocking_server() -> u16 {
    use std::io::Read;
    let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in listener.incoming().map_while(Result::ok) {
            std::thread::spawn(move || {
                s.set_nodelay(true).unwrap();
                let data = pattern_of(4 * MIB, 1);
                let mut sink = vec![0u8; 4 * MIB];
                let mut head = [0u8; 4];
                while s.read_exact(&mut head).is_ok() {
                    let word = u32::from_be_bytes(head);
                    let n = (word & 0x7fff_ffff) as usize;
                    let ok = if word & 0x8000_0000 != 0 {
                        s.write_all(&data[..n]).is_ok()
                    } else {
                        s.read_exact(&mut sink[..n]).is_ok() && s.write_all(&head).is_ok()
                    };
                    if !ok {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// `--client raw PORT CALLS read|write`: CALLS raw TCP transfers of 1 MiB to (`read`) or
/// from the client on blocking sockets, after CALLS / 10 unmeasured ones; the mean time per
/// transfer.
fn raw_client_mean_us(addr: SocketAddr, calls: usize, read: bool) -> f64 {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    let data = pattern_of(MIB, 2);
    let mut sink = vec![0u8; MIB];
    let mut one = || {
        if read {
            s.write_all(&(0x8000_0000 | MIB as u32).to_be_bytes())
                .unwrap();
            s.read_exact(&mut sink).unwrap();
        } else {
            s.write_all(&(MIB as u32).to_be_bytes()).unwrap();
            s.write_all(&data).unwrap();
            let mut head = [0u8; 4];
            s.read_exact(&mut head).unwrap();
        }
    };
    for _ in 0..calls / 10 {
        one();
    }
    let start = Instant::now();
    for _ in 0..calls {
        one();
    }
    start.elapsed().as_secs_f64() * 1e6 / calls as f64
}

/// `--client tcp|rdma|raw PORT CALLS [null|read|write[:BYTES] [IN_FLIGHT]]`: our client on a
/// current-thread runtime, from spawned tasks (how clients run on tokio; in `block_on`'s
/// future it measured 0.25 us more per call). `null`: CALLS NULL calls, IN_FLIGHT (default 1)
/// at a time on the one connection; `read` / `write`: CALLS calls of 1 MiB (or BYTES) one at a
/// time, over
/// TCP FILL / SINK of `interop.x` (as the C client makes them), over RPC-over-RDMA the test
/// program's FILL into a registered reply buffer and WRITE from a registered buffer (as the
/// one-process rows); `raw`: raw TCP moving 1 MiB each way ([`raw_client_mean_us`]). Prints
/// the wall-clock time per call as `mean_us=...` (as the C client does).
fn client_main(args: &[String]) -> ExitCode {
    let (kind, port, calls, op, in_flight) = match args {
        [kind, port, calls, rest @ ..] if rest.len() <= 2 => (
            kind.clone(),
            port,
            calls,
            rest.first().cloned().unwrap_or_else(|| "null".into()),
            rest.get(1)
                .map_or(1, |n| n.parse::<usize>().unwrap().max(1)),
        ),
        _ => {
            eprintln!(
                "usage: --client tcp|rdma|rdma-nocrc|raw PORT CALLS [null|read|write[:BYTES] [IN_FLIGHT]]"
            );
            return ExitCode::FAILURE;
        }
    };
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port.parse().unwrap()));
    let calls: usize = calls.parse().unwrap();
    if kind == "raw" {
        println!("mean_us={}", raw_client_mean_us(addr, calls, op == "read"));
        return ExitCode::SUCCESS;
    }
    // `rdma-nocrc`: both ends without MPA CRC (see "Bulk").
    let rdma = kind.starts_with("rdma");
    let crc = kind != "rdma-nocrc";
    let op = Op::parse(&op);
    let size = op.size().max(1);
    let us = current_thread().block_on(async move {
        let client = match rdma {
            true => rdma_client_with(addr, crc).await,
            false => tcp_client(addr).await,
        }
        .rpc()
        .clone();
        let data = if rdma {
            let mut buffer = client.buffer(size);
            buffer.as_mut_slice().copy_from_slice(&pattern_of(size, 2));
            buffer.freeze(size)
        } else {
            Bytes::from(vec![0x5a; size])
        };
        // Each of `in_flight` tasks makes its share of `calls`, one after the other.
        let run = move |calls: usize| {
            let tasks: Vec<_> = (0..in_flight)
                .map(|i| {
                    let (client, data) = (client.clone(), data.clone());
                    let share = calls / in_flight + usize::from(i < calls % in_flight);
                    tokio::spawn(async move {
                        for _ in 0..share {
                            one_call(&client, op, rdma, &data).await;
                        }
                    })
                })
                .collect();
            async move {
                for t in tasks {
                    t.await.unwrap();
                }
            }
        };
        run(calls / 10).await;
        let start = Instant::now();
        run(calls).await;
        start.elapsed().as_secs_f64() * 1e6 / calls as f64
    });
    println!("mean_us={us}");
    ExitCode::SUCCESS
}

/// What `--client` calls.
#[derive(Clone, Copy)]
enum Op {
    Null,
    /// This many bytes to the client, as a typed call without options: the transport
    /// decides how they come back (over RPC-over-RDMA inline when they fit the client's
    /// receive buffer, else in a Write chunk of fresh registered memory).
    Read(usize),
    /// This many bytes to the client, into a registered buffer the caller gives (over
    /// RPC-over-RDMA always a Write chunk: the result is a view of that buffer).
    ReadInto(usize),
    /// This many bytes from the client (`data`).
    Write(usize),
}

impl Op {
    /// `null`, `read` (1 MiB into a registered buffer), `write` (1 MiB), or `read:BYTES`
    /// (a typed call without options), `write:BYTES`.
    fn parse(s: &str) -> Op {
        match s.split_once(':') {
            Some(("read", size)) => Op::Read(size.parse().expect("a size in bytes")),
            Some(("write", size)) => Op::Write(size.parse().expect("a size in bytes")),
            None if s == "read" => Op::ReadInto(MIB),
            None if s == "write" => Op::Write(MIB),
            _ => Op::Null,
        }
    }

    /// Bytes a call moves (0 for NULL).
    fn size(self) -> usize {
        match self {
            Op::Null => 0,
            Op::Read(n) | Op::ReadInto(n) | Op::Write(n) => n,
        }
    }
}

/// One call of `--client`: over RPC-over-RDMA (`rdma`) the test program's FILL and WRITE,
/// over TCP `interop.x`'s FILL and SINK, as the C client.
async fn one_call(client: &Client, op: Op, rdma: bool, data: &Bytes) {
    match op {
        Op::Read(size) if rdma => {
            let r = client
                .call::<testvers::TestFill>(&(size as u32))
                .await
                .unwrap();
            assert_eq!(r.data.len(), size);
        }
        Op::ReadInto(size) if rdma => {
            let buffer = client.buffer(size);
            let r = client
                .call_with::<testvers::TestFill>(
                    &(size as u32),
                    CallOptions::new().reply_buffer(buffer),
                )
                .await
                .unwrap();
            assert_eq!(r.data.len(), size);
        }
        Op::Write(size) if rdma => {
            let args = EchoArgs {
                tag: 0,
                data: data.clone(),
            };
            let n = client.call::<testvers::TestWrite>(&args).await.unwrap();
            assert_eq!(n as usize, size);
        }
        Op::Read(size) | Op::ReadInto(size) => {
            let r = client.call::<Fill>(&(size as u32)).await.unwrap();
            assert_eq!(r.len(), size);
        }
        Op::Write(size) => {
            let n = client.call::<Sink>(data).await.unwrap();
            assert_eq!(n as usize, size);
        }
        Op::Null => client.call::<InteropNull>(&()).await.unwrap(),
    }
}

/// Calls each transport makes in turn in [`null_pair_us`].
const NULL_BLOCK: usize = 250;

/// Mean NULL round trips of `tcp` and `rdma`, in µs, over `calls` calls each (rounded down to
/// whole blocks, at least one), from one spawned task (how clients run on tokio) that calls
/// them in turn, [`NULL_BLOCK`] calls at a time, the first transport alternating.
///
/// Both figures of a round come from the same task: measured in a task each, each placed by
/// the scheduler on its own, a round's ratio compared two placements as much as two
/// transports. RPC-over-RDMA / our TCP on a 2-vCPU VM, 9 rounds of 5,000 calls: from two
/// tasks 1.14 [0.93 .. 1.30] (median [range] of the rounds), in turn from one task 1.17
/// [1.15 .. 1.23] and 1.18 [1.13 .. 1.25] in the next two runs of this bench.
async fn null_pair_us(tcp: &TestversClient, rdma: &TestversClient, calls: usize) -> (f64, f64) {
    async fn block_us(client: &TestversClient, calls: usize) -> f64 {
        let start = Instant::now();
        for _ in 0..calls {
            client.test_null().await.unwrap();
        }
        start.elapsed().as_secs_f64() * 1e6
    }
    let (tcp, rdma) = (tcp.clone(), rdma.clone());
    tokio::spawn(async move {
        block_us(&tcp, calls / 10).await;
        block_us(&rdma, calls / 10).await;
        let blocks = (calls / NULL_BLOCK).max(1);
        let (mut tcp_us, mut rdma_us) = (0.0, 0.0);
        for block in 0..blocks {
            if block % 2 == 0 {
                tcp_us += block_us(&tcp, NULL_BLOCK).await;
                rdma_us += block_us(&rdma, NULL_BLOCK).await;
            } else {
                rdma_us += block_us(&rdma, NULL_BLOCK).await;
                tcp_us += block_us(&tcp, NULL_BLOCK).await;
            }
        }
        let calls = (blocks * NULL_BLOCK) as f64;
        (tcp_us / calls, rdma_us / calls)
    })
    .await
    .unwrap()
}

/// Our servers, in two processes (see [`serve_main`]): TCP alone in one, RPC-over-RDMA and raw
/// TCP in the other; stopped when dropped.
struct OurServer {
    children: [Child; 2],
    tcp_port: u16,
    rdma_port: u16,
    raw_port: u16,
    /// RPC-over-RDMA without MPA CRC.
    rdma_no_crc_port: u16,
}

impl OurServer {
    fn start(exe: &Path) -> OurServer {
        let (tcp, tcp_ports) = Self::process(exe, "tcp");
        let (rdma, rdma_ports) = Self::process(exe, "rdma");
        let port = |ports: &[u16], i: usize| *ports.get(i).expect("a port per server");
        OurServer {
            tcp_port: port(&tcp_ports, 0),
            rdma_port: port(&rdma_ports, 0),
            raw_port: port(&rdma_ports, 1),
            rdma_no_crc_port: port(&rdma_ports, 2),
            children: [tcp, rdma],
        }
    }

    /// Pins both processes as `placement` wants its servers.
    fn pin(&self, placement: Placement) {
        for child in &self.children {
            placement.pin_server(child.id());
        }
    }

    /// Starts `--serve WHAT`; returns it and the ports it printed.
    fn process(exe: &Path, what: &str) -> (Child, Vec<u16>) {
        let mut child = Command::new(exe)
            .args(["--serve", what])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start our server process");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let ports = line
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect();
        (child, ports)
    }
}

impl Drop for OurServer {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Where the two processes of a pair run.
#[derive(Clone, Copy, PartialEq)]
enum Placement {
    /// Client and server pinned to CPU 0.
    SameCpu,
    /// Client on CPU 0, server on CPU 1.
    AcrossCpus,
    /// Wherever the scheduler puts them (no `taskset`, or one CPU).
    Unpinned,
}

impl Placement {
    fn label(self) -> &'static str {
        match self {
            Placement::SameCpu => "two processes, same CPU",
            Placement::AcrossCpus => "two processes, across CPUs",
            Placement::Unpinned => "two processes, unpinned",
        }
    }

    fn server_cpu(self) -> Option<&'static str> {
        match self {
            Placement::SameCpu => Some("0"),
            Placement::AcrossCpus => Some("1"),
            Placement::Unpinned => None,
        }
    }

    /// Pins every thread of process `pid` as this placement wants its server.
    fn pin_server(self, pid: u32) {
        if let Some(cpu) = self.server_cpu() {
            let ok = Command::new("taskset")
                .args(["-a", "-p", "-c", cpu, &pid.to_string()])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "taskset could not pin process {pid}");
        }
    }

    /// Runs a client program (which prints `mean_us=...`) as this placement wants it.
    fn client_mean_us(self, program: &Path, args: &[String]) -> f64 {
        let mut cmd = if self == Placement::Unpinned {
            Command::new(program)
        } else {
            let mut c = Command::new("taskset");
            c.args(["-c", "0"]).arg(program);
            c
        };
        let out = cmd.args(args).output().expect("run a client");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "a client failed ({:?}): {stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
            .trim()
            .strip_prefix("mean_us=")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("unexpected client output {stdout:?}"))
    }
}

/// The placements this machine allows.
fn placements() -> Vec<Placement> {
    let taskset = Command::new("taskset")
        .args(["-c", "0", "true"])
        .status()
        .is_ok_and(|s| s.success());
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    match (taskset, cpus) {
        (true, 2..) => vec![Placement::SameCpu, Placement::AcrossCpus],
        (true, _) => vec![Placement::SameCpu],
        (false, _) => vec![Placement::Unpinned],
    }
}

/// NULL calls per second with `n` in flight on `client`'s connection.
async fn concurrent_per_s(client: &TestversClient, n: usize, calls_each: usize) -> f64 {
    let start = Instant::now();
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let c = client.clone();
            tokio::spawn(async move {
                for _ in 0..calls_each {
                    c.test_null().await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    (n * calls_each) as f64 / start.elapsed().as_secs_f64()
}

/// MB/s of 1 MiB reads over RPC-over-RDMA on a new connection to `addr` (as the raw TCP
/// baseline makes one; see the module documentation): FILL's result comes from a registered
/// buffer at the server and lands in one at the client. One read before the clock starts
/// fills the connection's buffer pools.
async fn rdma_read_mbps(addr: SocketAddr, ops: usize) -> f64 {
    rdma_bulk_mbps(addr, Op::ReadInto(MIB), ops).await
}

/// MB/s of 1 MiB writes over RPC-over-RDMA on a new connection to `addr`: the argument lies
/// in a registered buffer of the client, from which the server pulls it by RDMA Read. One
/// write before the clock starts fills the connection's buffer pools.
async fn rdma_write_mbps(addr: SocketAddr, ops: usize) -> f64 {
    rdma_bulk_mbps(addr, Op::Write(MIB), ops).await
}

/// MB/s of `ops` calls `op` over RPC-over-RDMA on a new connection to `addr`, as
/// [`one_call`] makes them, after one unmeasured call.
async fn rdma_bulk_mbps(addr: SocketAddr, op: Op, ops: usize) -> f64 {
    tokio::spawn(async move {
        let c = rdma_client(addr).await;
        let client = c.rpc();
        let size = op.size().max(1);
        let mut buffer = client.buffer(size);
        buffer.as_mut_slice().copy_from_slice(&pattern_of(size, 2));
        let data = buffer.freeze(size);
        one_call(client, op, true, &data).await;
        let start = Instant::now();
        for _ in 0..ops {
            one_call(client, op, true, &data).await;
        }
        (ops * size) as f64 / start.elapsed().as_secs_f64() / 1e6
    })
    .await
    .unwrap()
}

/// A raw TCP server: a request is a 4-byte length `n` with the top bit set for "send me n
/// bytes" or clear for "here come n bytes"; the answer is n bytes or a 4-byte length.
async fn raw_server() -> SocketAddr {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            s.set_nodelay(true).unwrap();
            tokio::spawn(async move {
                let data = pattern_of(4 * MIB, 1);
                let mut sink = vec![0u8; 4 * MIB];
                let mut head = [0u8; 4];
                while s.read_exact(&mut head).await.is_ok() {
                    let word = u32::from_be_bytes(head);
                    let n = (word & 0x7fff_ffff) as usize;
                    if word & 0x8000_0000 != 0 {
                        if s.write_all(&data[..n]).await.is_err() {
                            return;
                        }
                    } else {
                        if s.read_exact(&mut sink[..n]).await.is_err() {
                            return;
                        }
                        if s.write_all(&head).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    addr
}

/// MB/s of raw TCP moving 1 MiB to the client (`read`) or from it.
async fn raw_mbps(addr: SocketAddr, read: bool, ops: usize) -> f64 {
    tokio::spawn(async move {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.set_nodelay(true).unwrap();
        let data = pattern_of(MIB, 2);
        let mut sink = vec![0u8; MIB];
        let start = Instant::now();
        for _ in 0..ops {
            if read {
                s.write_all(&(0x8000_0000 | MIB as u32).to_be_bytes())
                    .await
                    .unwrap();
                s.read_exact(&mut sink).await.unwrap();
            } else {
                s.write_all(&(MIB as u32).to_be_bytes()).await.unwrap();
                s.write_all(&data).await.unwrap();
                let mut head = [0u8; 4];
                s.read_exact(&mut head).await.unwrap();
            }
        }
        (ops * MIB) as f64 / start.elapsed().as_secs_f64() / 1e6
    })
    .await
    .unwrap()
}

/// MB/s of `size`-byte READs (`read`) or WRITEs over our ONC RPC over TCP on a new connection to
/// `addr`, the same test program as the RPC-over-RDMA rows: FILL answers from the buffer the
/// server filled once per connection, WRITE's argument is one buffer the client filled once.
async fn tcp_bulk_mbps(addr: SocketAddr, read: bool, ops: usize, size: usize) -> f64 {
    tokio::spawn(async move {
        let c = tcp_client(addr).await;
        let data = pattern_of(size, 2);
        let mut start = Instant::now();
        for i in 0..ops + 1 {
            if i == 1 {
                start = Instant::now();
            }
            if read {
                let r = c.test_fill(size as u32).await.unwrap();
                assert_eq!(r.data.len(), size);
            } else {
                let n = c
                    .test_write(EchoArgs {
                        tag: i as u32,
                        data: data.clone(),
                    })
                    .await
                    .unwrap();
                assert_eq!(n as usize, size);
            }
        }
        (ops * size) as f64 / start.elapsed().as_secs_f64() / 1e6
    })
    .await
    .unwrap()
}

/// NULL calls per second of `n` C clients (processes, one connection each: a libtirpc client
/// has one call in flight) against `port`, `calls` in all, placed as `placement` places
/// clients; wall-clock time from starting the first to the end of the last, process start-up
/// included.
fn c_clients_per_s(
    programs: &CPrograms,
    placement: Placement,
    port: u16,
    n: usize,
    calls: usize,
) -> f64 {
    let each = (calls / n).max(1);
    let start = Instant::now();
    let children: Vec<Child> = (0..n)
        .map(|_| {
            let mut cmd = if placement == Placement::Unpinned {
                Command::new(&programs.client)
            } else {
                let mut c = Command::new("taskset");
                c.args(["-c", "0"]).arg(&programs.client);
                c
            };
            cmd.args([port.to_string(), "bench".into(), each.to_string()])
                .stdout(Stdio::null())
                .spawn()
                .expect("start a C client")
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success(), "a C client failed");
    }
    (n * each) as f64 / start.elapsed().as_secs_f64()
}

/// The sizes of the small and medium READ and WRITE rows (issue 54).
const SIZED: [usize; 2] = [4 << 10, 64 << 10];

/// Calls of `size` bytes per measurement of a [`SIZED`] row: the bytes of `bulk_ops` 1 MiB
/// calls, at most 2,000 calls.
fn sized_ops(size: usize, bulk_ops: usize) -> usize {
    (bulk_ops * MIB / size).min(2000)
}

/// Calls in flight in the concurrency sweep.
const IN_FLIGHT: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];

/// One measured quantity over the rounds.
#[derive(Default, Clone)]
struct Series(Vec<f64>);

impl Series {
    fn median(&self) -> f64 {
        let mut v = self.0.clone();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }
    fn range(&self) -> (f64, f64) {
        let min = self.0.iter().copied().fold(f64::INFINITY, f64::min);
        let max = self.0.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (min, max)
    }
}

/// The report groups.
const NULL_GROUP: &str = "ONC RPC: NULL round trip";
const BULK_GROUP: &str = "ONC RPC: 1 MiB READ and WRITE";
const FLIGHT_GROUP: &str = "ONC RPC: calls in flight";
const SIZED_GROUP: &str = "ONC RPC: 4 KiB and 64 KiB READ and WRITE";

/// A ratio over the rounds and its target, with what it compares (for the records).
struct Ratio {
    group: &'static str,
    name: String,
    /// The measured series' key and label, its baseline's, and their unit.
    value: String,
    baseline: (String, String),
    unit: &'static str,
    values: Series,
    /// `Some((bound, true))`: at most `bound`; `Some((bound, false))`: at least.
    target: Option<(f64, bool)>,
}

impl Ratio {
    fn missed(&self) -> bool {
        match self.target {
            Some((bound, true)) => self.values.median() > bound,
            Some((bound, false)) => self.values.median() < bound,
            None => false,
        }
    }

    fn print(&self) {
        let (lo, hi) = self.values.range();
        let target = match self.target {
            Some((b, true)) => format!("target <= {b:.2}x"),
            Some((b, false)) => format!("target >= {:.0}%", b * 100.0),
            None => "for reference".into(),
        };
        let verdict = if self.target.is_none() {
            ""
        } else if self.missed() {
            "  MISSED"
        } else {
            "  met"
        };
        println!(
            "  {:<58} {:>6.2} [{lo:.2} .. {hi:.2}]   ({target}){verdict}",
            self.name,
            self.values.median()
        );
    }

    fn record(&self, rec: &mut Recorder, s: &std::collections::BTreeMap<String, Series>) {
        let (lo, hi) = self.values.range();
        let f = rec
            .figure(self.group, &self.name, s[&self.value].median(), self.unit)
            .baseline(self.baseline.1.clone(), s[&self.baseline.0].median())
            .ratio(self.values.median(), "value / baseline")
            .ratio_range(lo, hi);
        match self.target {
            Some((b, true)) => {
                f.target(Target::at_most(b));
            }
            Some((b, false)) => {
                f.target(Target::at_least(b));
            }
            None => {}
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--serve") {
        return serve_main(args.get(i + 1).map(String::as_str));
    }
    if let Some(i) = args.iter().position(|a| a == "--client") {
        return client_main(&args[i + 1..]);
    }
    let check =
        args.iter().any(|a| a == "--check") || std::env::var("BENCH_CHECK").is_ok_and(|v| v == "1");
    let quick = bench_report::quick();
    let rounds = env_or("TRANSPORTS_ROUNDS", if quick { 3 } else { 9 }).max(1);
    let calls = env_or("TRANSPORTS_CALLS", if quick { 2000 } else { 5000 }).max(10);
    // Runs of each two-process NULL pair per round: across CPUs a run varies by +-10 % (the
    // wake-ups between CPUs), too much for 9 samples to judge a 1 % difference.
    let null_repeats = env_or("TRANSPORTS_NULL_REPEATS", if quick { 1 } else { 3 }).max(1);
    let bulk_ops = if quick { 16 } else { 64 };
    let exe: PathBuf = std::env::current_exe().expect("this bench's path");
    let programs: CPrograms = c::programs().unwrap_or_else(|why| panic!("{why}"));
    let c_server = CServer::start(&programs).expect("start the C server");
    // For the calls-in-flight rows' C clients (see "Process structure": after 64 of them at
    // once, libtirpc's `svc_run` polls 51 slots instead of 2, seen with strace).
    let c_server_many = CServer::start(&programs).expect("start a second C server");
    let our_server = OurServer::start(&exe);
    let placements = placements();
    // The two-process bulk rows run in one placement: across CPUs where there are two.
    let bulk_placement = *placements.last().expect("a placement");
    let current = std::env::var("TRANSPORTS_RUNTIME").is_ok_and(|v| v == "current");
    let rt = if current {
        current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    };
    let one_process = if current {
        "one process, current-thread runtime"
    } else {
        "one process, two-worker runtime"
    };

    let (rdma_addr, rdma, tcp, raw, tcp_server) = rt.block_on(async {
        let rdma_addr = rdma_server(bench_server()).await;
        let rdma = rdma_client(rdma_addr).await;
        let tcp_server =
            TcpServer::bind((Ipv4Addr::LOCALHOST, 0), bench_server(), TcpConfig::new())
                .await
                .unwrap();
        let tcp = tcp_client(tcp_server.local_addr()).await;
        (rdma_addr, rdma, tcp, raw_server().await, tcp_server)
    });
    let tcp_addr = tcp_server.local_addr();

    // Series by key; the two-process ones per placement.
    let mut s = std::collections::BTreeMap::<String, Series>::new();
    let mut push = |key: String, v: f64| s.entry(key).or_default().0.push(v);
    let c_port = c_server.port().to_string();
    let ours = |kind: &str, port: u16, calls: usize, op: &str, in_flight: usize| {
        vec![
            "--client".to_string(),
            kind.into(),
            port.to_string(),
            calls.to_string(),
            op.into(),
            in_flight.to_string(),
        ]
    };
    let c_args = |port: &str| vec![port.to_string(), "bench".into(), calls.to_string()];
    let c_bulk = |op: &str| {
        vec![
            c_port.clone(),
            op.into(),
            bulk_ops.to_string(),
            MIB.to_string(),
        ]
    };
    let mbps = |mean_us: f64| MIB as f64 / mean_us;
    for round in 0..rounds {
        eprint!("\rround {}/{rounds}", round + 1);
        for &p in &placements {
            p.pin_server(c_server.pid());
            our_server.pin(p);
            let tag = p.label();
            for repeat in 0..null_repeats {
                // Which pair runs first alternates, so that neither always follows the other
                // (or the bulk rows of the round before).
                let c_pair = || p.client_mean_us(&programs.client, &c_args(&c_port));
                let our_pair =
                    || p.client_mean_us(&exe, &ours("tcp", our_server.tcp_port, calls, "null", 1));
                let (c, tcp) = if (round * null_repeats + repeat) % 2 == 0 {
                    let c = c_pair();
                    (c, our_pair())
                } else {
                    let tcp = our_pair();
                    (c_pair(), tcp)
                };
                push(format!("{tag}/libtirpc"), c);
                push(format!("{tag}/tcp"), tcp);
                push(
                    format!("{tag}/rdma"),
                    p.client_mean_us(&exe, &ours("rdma", our_server.rdma_port, calls, "null", 1)),
                );
                push(
                    format!("{tag}/C client, our server"),
                    p.client_mean_us(&programs.client, &c_args(&our_server.tcp_port.to_string())),
                );
                push(
                    format!("{tag}/our client, C server"),
                    p.client_mean_us(&exe, &ours("tcp", c_server.port(), calls, "null", 1)),
                );
            }
            if p == bulk_placement {
                for op in ["read", "write"] {
                    push(
                        format!("2p libtirpc {op}"),
                        mbps(p.client_mean_us(&programs.client, &c_bulk(op))),
                    );
                    for (kind, port) in [
                        ("tcp", our_server.tcp_port),
                        ("rdma", our_server.rdma_port),
                        ("rdma-nocrc", our_server.rdma_no_crc_port),
                        ("raw", our_server.raw_port),
                    ] {
                        push(
                            format!("2p {kind} {op}"),
                            mbps(p.client_mean_us(&exe, &ours(kind, port, bulk_ops, op, 1))),
                        );
                    }
                    for size in SIZED {
                        let ops = sized_ops(size, bulk_ops);
                        for (kind, port) in
                            [("tcp", our_server.tcp_port), ("rdma", our_server.rdma_port)]
                        {
                            let sized = format!("{op}:{size}");
                            let us = p.client_mean_us(&exe, &ours(kind, port, ops, &sized, 1));
                            push(format!("2p {kind} {op} {size}"), size as f64 / us);
                        }
                    }
                }
            }
        }
        rt.block_on(async {
            let (tcp_us, rdma_us) = null_pair_us(&tcp, &rdma, calls).await;
            push("in/tcp".into(), tcp_us);
            push("in/rdma".into(), rdma_us);
            push("raw read".into(), raw_mbps(raw, true, bulk_ops).await);
            push(
                "rdma read".into(),
                rdma_read_mbps(rdma_addr, bulk_ops).await,
            );
            push(
                "tcp read".into(),
                tcp_bulk_mbps(tcp_addr, true, bulk_ops, MIB).await,
            );
            push("raw write".into(), raw_mbps(raw, false, bulk_ops).await);
            push(
                "rdma write".into(),
                rdma_write_mbps(rdma_addr, bulk_ops).await,
            );
            push(
                "tcp write".into(),
                tcp_bulk_mbps(tcp_addr, false, bulk_ops, MIB).await,
            );
            for size in SIZED {
                let ops = sized_ops(size, bulk_ops);
                push(
                    format!("rdma read {size}"),
                    rdma_bulk_mbps(rdma_addr, Op::Read(size), ops).await,
                );
                push(
                    format!("tcp read {size}"),
                    tcp_bulk_mbps(tcp_addr, true, ops, size).await,
                );
                push(
                    format!("rdma write {size}"),
                    rdma_bulk_mbps(rdma_addr, Op::Write(size), ops).await,
                );
                push(
                    format!("tcp write {size}"),
                    tcp_bulk_mbps(tcp_addr, false, ops, size).await,
                );
            }
        });
        // Calls in flight: the servers where the bulk rows had them (across CPUs where there
        // are two), the client processes where that placement puts clients.
        bulk_placement.pin_server(c_server_many.pid());
        our_server.pin(bulk_placement);
        for n in IN_FLIGHT {
            let each = (calls / n).max(20);
            rt.block_on(async {
                push(
                    format!("cif tcp {n}"),
                    concurrent_per_s(&tcp, n, each).await,
                );
                push(
                    format!("cif rdma {n}"),
                    concurrent_per_s(&rdma, n, each).await,
                );
            });
            push(
                format!("cif tcp2 {n}"),
                1e6 / bulk_placement
                    .client_mean_us(&exe, &ours("tcp", our_server.tcp_port, calls, "null", n)),
            );
            push(
                format!("cif libtirpc {n}"),
                c_clients_per_s(&programs, bulk_placement, c_server_many.port(), n, calls),
            );
        }
    }
    eprintln!();
    let per_round = |a: &str, b: &str| -> Series {
        Series(s[a].0.iter().zip(&s[b].0).map(|(x, y)| x / y).collect())
    };

    println!("RPC transports on loopback, median of {rounds} interleaved rounds [min .. max]");
    println!("NULL round trip, {calls} calls per round (us):");
    let show = |key: &str, label: &str| {
        let (lo, hi) = s[key].range();
        println!(
            "  {label:<58} {:>8.2} [{lo:.2} .. {hi:.2}]",
            s[key].median()
        );
    };
    for &p in &placements {
        let tag = p.label();
        show(
            &format!("{tag}/libtirpc"),
            &format!("libtirpc client and server, {tag}"),
        );
        show(
            &format!("{tag}/tcp"),
            &format!("our TCP client and server, {tag}"),
        );
        show(
            &format!("{tag}/rdma"),
            &format!("RPC-over-RDMA (soft), {tag}"),
        );
        show(
            &format!("{tag}/C client, our server"),
            &format!("libtirpc client, our TCP server, {tag}"),
        );
        show(
            &format!("{tag}/our client, C server"),
            &format!("our TCP client, libtirpc server, {tag}"),
        );
    }
    show(
        "in/tcp",
        &format!("our TCP client and server, {one_process}"),
    );
    show("in/rdma", &format!("RPC-over-RDMA (soft), {one_process}"));
    let bulk_tag = bulk_placement.label();
    println!("bulk, {bulk_ops} x 1 MiB per round (MB/s):");
    for (key, label) in [
        ("raw read", "1 MiB to the client, raw TCP".to_string()),
        (
            "rdma read",
            "1 MiB READ, RPC-over-RDMA (Write chunk)".into(),
        ),
        ("tcp read", "1 MiB READ, our TCP".into()),
        (
            "2p raw read",
            format!("1 MiB to the client, raw TCP, {bulk_tag}"),
        ),
        (
            "2p rdma-nocrc read",
            format!("1 MiB READ, RPC-over-RDMA without MPA CRC, {bulk_tag}"),
        ),
        (
            "2p rdma read",
            format!("1 MiB READ, RPC-over-RDMA (MPA CRC, the default), {bulk_tag}"),
        ),
        ("2p tcp read", format!("1 MiB READ, our TCP, {bulk_tag}")),
        (
            "2p libtirpc read",
            format!("1 MiB READ, libtirpc, {bulk_tag}"),
        ),
        ("raw write", "1 MiB from the client, raw TCP".into()),
        (
            "rdma write",
            "1 MiB WRITE, RPC-over-RDMA (Read chunk)".into(),
        ),
        ("tcp write", "1 MiB WRITE, our TCP".into()),
        (
            "2p raw write",
            format!("1 MiB from the client, raw TCP, {bulk_tag}"),
        ),
        (
            "2p rdma-nocrc write",
            format!("1 MiB WRITE, RPC-over-RDMA without MPA CRC, {bulk_tag}"),
        ),
        (
            "2p rdma write",
            format!("1 MiB WRITE, RPC-over-RDMA (MPA CRC, the default), {bulk_tag}"),
        ),
        ("2p tcp write", format!("1 MiB WRITE, our TCP, {bulk_tag}")),
        (
            "2p libtirpc write",
            format!("1 MiB WRITE, libtirpc, {bulk_tag}"),
        ),
    ] {
        show(key, &label);
    }
    println!("NULL calls in flight (calls/s):");
    for (kind, label) in [
        ("rdma", "RPC-over-RDMA, one connection, one process"),
        ("tcp", "our TCP, one connection, one process"),
        ("tcp2", "our TCP, one connection, two processes"),
        ("libtirpc", "libtirpc, a process and connection per call"),
    ] {
        let row: Vec<String> = IN_FLIGHT
            .iter()
            .map(|n| format!("{n}: {:.0}", s[&format!("cif {kind} {n}")].median()))
            .collect();
        println!("  {label:<46} {}", row.join("  "));
    }

    let ratio = |group: &'static str,
                 name: String,
                 (value, base, base_label): (&str, &str, String),
                 unit: &'static str,
                 target: Option<(f64, bool)>| Ratio {
        group,
        name,
        value: value.into(),
        baseline: (base.into(), base_label),
        unit,
        values: per_round(value, base),
        target,
    };
    let mut ratios = Vec::new();
    for &p in &placements {
        let tag = p.label();
        ratios.push(ratio(
            NULL_GROUP,
            format!("our TCP / libtirpc, {tag}"),
            (
                &format!("{tag}/tcp"),
                &format!("{tag}/libtirpc"),
                format!("libtirpc, {tag}"),
            ),
            "us",
            Some((1.0, true)),
        ));
    }
    ratios.push(ratio(
        NULL_GROUP,
        format!("RPC-over-RDMA / our TCP, {one_process}"),
        ("in/rdma", "in/tcp", format!("our TCP, {one_process}")),
        "us",
        Some((1.3, true)),
    ));
    for &p in &placements {
        let tag = p.label();
        ratios.push(ratio(
            NULL_GROUP,
            format!("RPC-over-RDMA / our TCP, {tag}"),
            (
                &format!("{tag}/rdma"),
                &format!("{tag}/tcp"),
                format!("our TCP, {tag}"),
            ),
            "us",
            Some((1.3, true)),
        ));
    }
    for &p in &placements {
        let tag = p.label();
        for (mixed, who) in [
            ("C client, our server", "our TCP server"),
            ("our client, C server", "our TCP client"),
        ] {
            ratios.push(ratio(
                NULL_GROUP,
                format!("{who} / libtirpc's, {tag}"),
                (
                    &format!("{tag}/{mixed}"),
                    &format!("{tag}/libtirpc"),
                    format!("libtirpc client and server, {tag}"),
                ),
                "us",
                None,
            ));
        }
    }
    for (op, chunk) in [("read", "Write chunk"), ("write", "Read chunk")] {
        // Judged without MPA CRC: the integrity raw TCP has (TCP's checksum); see "Bulk".
        ratios.push(ratio(
            BULK_GROUP,
            format!("RPC-over-RDMA 1 MiB {op} ({chunk}) / raw TCP, {bulk_tag}"),
            (
                &format!("2p rdma-nocrc {op}"),
                &format!("2p raw {op}"),
                format!("raw TCP, 1 MiB {op}, {bulk_tag}"),
            ),
            "MB/s",
            Some((0.75, false)),
        ));
        ratios.push(ratio(
            BULK_GROUP,
            format!("RPC-over-RDMA with MPA CRC, 1 MiB {op} ({chunk}) / raw TCP, {bulk_tag}"),
            (
                &format!("2p rdma {op}"),
                &format!("2p raw {op}"),
                format!("raw TCP, 1 MiB {op}, {bulk_tag}"),
            ),
            "MB/s",
            None,
        ));
        ratios.push(ratio(
            BULK_GROUP,
            format!("RPC-over-RDMA 1 MiB {op} / our TCP, {bulk_tag}"),
            (
                &format!("2p rdma {op}"),
                &format!("2p tcp {op}"),
                format!("our ONC RPC over TCP, 1 MiB {op}, {bulk_tag}"),
            ),
            "MB/s",
            None,
        ));
        ratios.push(ratio(
            BULK_GROUP,
            format!("our TCP 1 MiB {op} / libtirpc, {bulk_tag}"),
            (
                &format!("2p tcp {op}"),
                &format!("2p libtirpc {op}"),
                format!("libtirpc, 1 MiB {op}, {bulk_tag}"),
            ),
            "MB/s",
            None,
        ));
        ratios.push(ratio(
            BULK_GROUP,
            format!("RPC-over-RDMA 1 MiB {op} ({chunk}) / raw TCP, {one_process}"),
            (
                &format!("rdma {op}"),
                &format!("raw {op}"),
                format!("raw TCP, 1 MiB {op}, {one_process}"),
            ),
            "MB/s",
            None,
        ));
        ratios.push(ratio(
            BULK_GROUP,
            format!("RPC-over-RDMA 1 MiB {op} / our TCP, {one_process}"),
            (
                &format!("rdma {op}"),
                &format!("tcp {op}"),
                format!("our ONC RPC over TCP, 1 MiB {op}, {one_process}"),
            ),
            "MB/s",
            None,
        ));
    }
    // Issue 54: RPC-over-RDMA's NULL calls per second with 1, 8 and 64 in flight at least our
    // TCP's.
    for n in [1, 8, 64] {
        let calls_in_flight = if n == 1 {
            "1 NULL call".to_string()
        } else {
            format!("{n} NULL calls")
        };
        let processes = if n == 1 {
            "1 client process".to_string()
        } else {
            format!("{n} client processes")
        };
        ratios.push(ratio(
            FLIGHT_GROUP,
            format!("RPC-over-RDMA / our TCP, {calls_in_flight} in flight, one process"),
            (
                &format!("cif rdma {n}"),
                &format!("cif tcp {n}"),
                format!("our TCP, {n} in flight"),
            ),
            "calls/s",
            Some((1.0, false)),
        ));
        ratios.push(ratio(
            FLIGHT_GROUP,
            format!("our TCP (two processes) / libtirpc, {calls_in_flight} in flight"),
            (
                &format!("cif tcp2 {n}"),
                &format!("cif libtirpc {n}"),
                format!("libtirpc, {processes}"),
            ),
            "calls/s",
            None,
        ));
    }
    // Issue 54: RPC-over-RDMA's 4 KiB and 64 KiB READs and WRITEs at least as fast as our
    // TCP's, in one process and in two.
    for size in SIZED {
        let kib = size >> 10;
        for (op, name) in [("read", "READ"), ("write", "WRITE")] {
            ratios.push(ratio(
                SIZED_GROUP,
                format!("RPC-over-RDMA / our TCP, {kib} KiB {name}, {one_process}"),
                (
                    &format!("rdma {op} {size}"),
                    &format!("tcp {op} {size}"),
                    format!("our TCP, {kib} KiB {name}, {one_process}"),
                ),
                "MB/s",
                Some((1.0, false)),
            ));
            ratios.push(ratio(
                SIZED_GROUP,
                format!("RPC-over-RDMA / our TCP, {kib} KiB {name}, {bulk_tag}"),
                (
                    &format!("2p rdma {op} {size}"),
                    &format!("2p tcp {op} {size}"),
                    format!("our TCP, {kib} KiB {name}, {bulk_tag}"),
                ),
                "MB/s",
                Some((1.0, false)),
            ));
        }
    }
    println!("ratios (median of per-round ratios [min .. max]):");
    for r in &ratios {
        r.print();
    }

    let mut rec = Recorder::new("transports");
    for r in &ratios {
        r.record(&mut rec, &s);
    }
    let title = "ONC RPC NULL throughput vs calls in flight (loopback)";
    for (kind, label) in [
        ("rdma", "RPC-over-RDMA (soft), one process"),
        ("tcp", "our TCP, one process"),
        ("tcp2", "our TCP, client and server processes"),
        (
            "libtirpc",
            "libtirpc, one client process per call in flight",
        ),
    ] {
        let line = rec.series("rpc_in_flight", title, label);
        line.axes("NULL calls in flight", "calls/s")
            .log_x()
            .group(FLIGHT_GROUP);
        for n in IN_FLIGHT {
            line.point(n as f64, s[&format!("cif {kind} {n}")].median());
        }
    }
    let placement_note = if placements == [Placement::Unpinned] {
        "without taskset (or on one CPU) they ran unpinned"
    } else {
        "pinned with taskset: client on CPU 0, server on CPU 0 (same CPU) or CPU 1 (across \
         CPUs)"
    };
    rec.note(
        NULL_GROUP,
        format!(
            "{rounds} rounds of {calls} calls, one at a time, each two-process pair run \
             {null_repeats} times per round (which of libtirpc's pair and ours runs first \
             alternates); each ratio is the median of the per-run ratios [range]. \
             libtirpc's client and server are rpcgen \
             C programs, one process each, so our TCP is judged against it in the same \
             structure (two processes, {placement_note}); RPC-over-RDMA (soft iWARP \
             provider) is judged against our TCP in one process, where no process wake-up \
             per message hides the transports' own cost."
        ),
    );
    rec.note(
        BULK_GROUP,
        format!(
            "{bulk_ops} x 1 MiB per round, one at a time, medians of {rounds} interleaved \
             rounds. RPC-over-RDMA READ puts the result in a Write chunk into the client's \
             registered buffer, WRITE's argument is pulled by RDMA Read from one; raw TCP moves \
             1 MiB each way and answers with 4 bytes. Judged in two processes ({bulk_tag}), \
             client and server as on two machines: our client process against our server \
             process for RPC-over-RDMA (soft provider, its defaults: MPA CRC on), our TCP and \
             raw TCP (blocking sockets), and libtirpc's client and server (FILL and SINK of \
             interop.x). In one process (two tokio workers, unpinned) the raw TCP baseline \
             is bimodal: when tokio puts its sender and receiver on different workers both \
             CPUs copy one transfer (about 7 GB/s), otherwise about 3.5 GB/s; those ratios are \
             shown, not judged."
        ),
    );
    rec.note(
        FLIGHT_GROUP,
        format!(
            "NULL calls with 1 to 64 in flight, {calls} per point and round, medians of \
             {rounds} rounds. In one process: two tokio workers, unpinned. In two processes \
             ({bulk_tag}): the server process(es) and the client process(es) placed as the \
             bulk rows. Ours multiplexes every call on one \
             connection (tasks of one client); a libtirpc client has one call in flight, so \
             N in flight is N client processes with a connection each against the \
             single-threaded rpcgen server (process start-up included in the time)."
        ),
    );
    rec.note(
        SIZED_GROUP,
        format!(
            "Calls of 4 KiB and 64 KiB one at a time, the bytes of {bulk_ops} 1 MiB calls (at \
             most 2,000 calls) per size and round, medians of {rounds} interleaved rounds; \
             each ratio is the median of the per-round ratios. The same programs as the 1 MiB \
             rows: RPC-over-RDMA (soft provider, its defaults) READ into a registered reply \
             buffer and WRITE from a registered buffer, our TCP FILL and WRITE of the test \
             program; in one process ({one_process}, unpinned) and in two ({bulk_tag})."
        ),
    );
    if let Err(e) = rec.save() {
        eprintln!("transports: records not written: {e}");
    }

    drop(rt.block_on(async move {
        drop((rdma, tcp));
        tcp_server
    }));
    let missed: Vec<_> = ratios
        .iter()
        .filter(|r| r.missed())
        .map(|r| r.name.as_str())
        .collect();
    if missed.is_empty() {
        println!("every target met");
        ExitCode::SUCCESS
    } else {
        println!("targets MISSED: {}", missed.join("; "));
        if check {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        }
    }
}

//! How close RPC-over-RDMA on the software provider can come to our ONC RPC over TCP, measured
//! in one run (issue 54 item 2 asks for at least our TCP's NULL calls per second).
//!
//! The software provider carries its messages over a TCP connection, so an RPC-over-RDMA call
//! does all the socket work of an RPC over TCP plus the provider's (MPA, DDP and RDMAP framing,
//! CRC, completions) and the transport's (RPC-over-RDMA headers, chunks, credits, receive
//! buffers). Four one-at-a-time round trips, 64 bytes or a NULL call, all in one process on a
//! two-worker runtime as the judged rows of `benches/transports.rs`, each from a task of its
//! own, the order turning every round:
//!
//! * **raw TCP**: a 64-byte ping-pong on a tokio TCP stream;
//! * **soft Send/Recv**: a 64-byte Send and its answer on a software-provider connection with
//!   the provider's defaults (CRC on, confirmed completions), no RPC at all;
//! * **our TCP**: a NULL call of our ONC RPC over TCP;
//! * **RPC-over-RDMA**: a NULL call over RPC-over-RDMA on the software provider (its defaults,
//!   128 credits as in `benches/transports.rs`).
//!
//! What RPC costs above its stream is `our TCP - raw TCP`. Were the RPC-over-RDMA transport free
//! beyond that, a call would take `soft Send/Recv + (our TCP - raw TCP)`: the **ceiling** row
//! is our TCP's time over that, the best RPC-over-RDMA / our TCP ratio this machine allows
//! while the provider costs what it does; **transport above the ceiling** is what the
//! RPC-over-RDMA layer adds beyond it (the part a change to the transport can remove).
//!
//! `cargo bench -p tirpc-interop --bench rpc_floor`; `BENCH_QUICK=1` for 3 rounds,
//! `RPC_FLOOR_ROUNDS` and `RPC_FLOOR_CALLS` to choose.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Instant;

use bench_report::Recorder;
use rpcrdma::rdma::soft::{SoftConfig, SoftConnection, SoftProvider};
use rpcrdma::rdma::{Access, Connection, Listener, Provider, RecvWr, SendWr, Sge, WcOpcode};
use rpcrdma::rpc::tcp::{TcpConfig, TcpServer, TcpTransport};
use rpcrdma::rpc::{Client, Server};
use rpcrdma::transport::conformance::program::{testvers, TestServer, TestversClient};
use rpcrdma::transport::{serve, RdmaConfig, RdmaTransport};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

// The runtime's loopback pair of soft-provider connections (its `provider` is not used here).
#[allow(dead_code)]
#[path = "../../../runtime/tests/support/soft_pair.rs"]
mod soft_pair;

/// Bytes of each ping-pong message, about a NULL call's (an RPC-over-RDMA NULL call is 68
/// bytes, its reply 52).
const PING: usize = 64;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn server() -> Server {
    let mut b = Server::builder();
    testvers::register(&mut b, TestServer);
    b.build()
}

/// A raw TCP client whose server task answers every 64 bytes with 64 bytes.
async fn raw_tcp() -> TcpStream {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        s.set_nodelay(true).unwrap();
        let mut buf = [0u8; PING];
        while s.read_exact(&mut buf).await.is_ok() {
            if s.write_all(&buf).await.is_err() {
                return;
            }
        }
    });
    let s = TcpStream::connect(addr).await.unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// A software-provider connection (provider defaults) whose peer's task answers every Send
/// with a Send of its own.
async fn echoed_connection() -> SoftConnection {
    let (c, s) = soft_pair::pair(&SoftProvider::new(SoftConfig::default())).await;
    let rbuf = s.register(vec![0; PING], Access::LOCAL_WRITE).unwrap();
    let sbuf = s.register(vec![1; PING], Access::NONE).unwrap();
    s.post_recv(RecvWr::new(0, Sge::whole(&rbuf))).unwrap();
    tokio::spawn(async move {
        loop {
            let done = s.poll_completion().await;
            if !done.is_success() {
                return;
            }
            if done.opcode == WcOpcode::Recv {
                s.post_recv(RecvWr::new(0, Sge::whole(&rbuf))).unwrap();
                s.post_send(SendWr::send(1, Sge::whole(&sbuf))).unwrap();
            }
        }
    });
    c
}

/// The four round trips' ends, each measured by [`Endpoints::mean_us`].
struct Endpoints {
    raw: TcpStream,
    soft: (
        SoftConnection,
        rpcrdma::rdma::MemoryRegion,
        rpcrdma::rdma::MemoryRegion,
    ),
    tcp: TestversClient,
    rdma: TestversClient,
    /// Serves `tcp` for as long as the bench runs.
    _tcp_server: TcpServer,
}

#[derive(Clone, Copy)]
enum Kind {
    Raw,
    Soft,
    Tcp,
    Rdma,
}

const KINDS: [Kind; 4] = [Kind::Raw, Kind::Soft, Kind::Tcp, Kind::Rdma];

impl Endpoints {
    /// Mean microseconds per round trip of `kind` over `calls` of them, after a tenth as many
    /// unmeasured.
    async fn mean_us(&mut self, kind: Kind, calls: usize) -> f64 {
        self.run(kind, calls / 10).await;
        let start = Instant::now();
        self.run(kind, calls).await;
        start.elapsed().as_secs_f64() * 1e6 / calls as f64
    }

    async fn run(&mut self, kind: Kind, calls: usize) {
        match kind {
            Kind::Raw => {
                let mut buf = [7u8; PING];
                for _ in 0..calls {
                    self.raw.write_all(&buf).await.unwrap();
                    self.raw.read_exact(&mut buf).await.unwrap();
                }
            }
            Kind::Soft => {
                let (c, rbuf, sbuf) = &self.soft;
                for i in 0..calls as u64 {
                    c.post_recv(RecvWr::new(i, Sge::whole(rbuf))).unwrap();
                    c.post_send(SendWr::send(i, Sge::whole(sbuf))).unwrap();
                    loop {
                        let done = c.poll_completion().await;
                        assert!(done.is_success(), "{done:?}");
                        if done.opcode == WcOpcode::Recv {
                            break;
                        }
                    }
                }
            }
            Kind::Tcp => {
                for _ in 0..calls {
                    self.tcp.test_null().await.unwrap();
                }
            }
            Kind::Rdma => {
                for _ in 0..calls {
                    self.rdma.test_null().await.unwrap();
                }
            }
        }
    }
}

/// A derived row: its name, its value from one round's times, and its unit and meaning.
type Derived = (&'static str, fn(&[f64; 4]) -> f64, &'static str);

/// Median and range of `v`.
fn summary(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// What a NULL call over RPC-over-RDMA would take were its transport layer free beyond what
/// RPC costs over TCP: the provider's round trip plus RPC's cost above raw TCP.
fn ceiling(t: &[f64; 4]) -> f64 {
    t[1] + t[2] - t[0]
}

fn main() {
    let quick = bench_report::quick();
    let rounds = env_or("RPC_FLOOR_ROUNDS", if quick { 3 } else { 9 }).max(1);
    let calls = env_or("RPC_FLOOR_CALLS", if quick { 5000 } else { 20000 }).max(10);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let ends = rt.block_on(async {
        let provider = Arc::new(SoftProvider::new(SoftConfig::default()));
        let listener = provider
            .listen((Ipv4Addr::LOCALHOST, 0).into())
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let config = RdmaConfig::default().credits(128);
        let rdma_server = Arc::new(serve::<SoftProvider>(listener, server(), config.clone()));
        tokio::spawn(async move { rdma_server.run().await });
        let rdma = TestversClient::new(Client::new(
            RdmaTransport::connect(provider, addr, config)
                .await
                .unwrap(),
        ));
        let tcp_server = TcpServer::bind((Ipv4Addr::LOCALHOST, 0), server(), TcpConfig::new())
            .await
            .unwrap();
        let tcp = TestversClient::new(Client::new(
            TcpTransport::connect(tcp_server.local_addr(), TcpConfig::new())
                .await
                .unwrap(),
        ));
        let soft = echoed_connection().await;
        let rbuf = soft.register(vec![0; PING], Access::LOCAL_WRITE).unwrap();
        let sbuf = soft.register(vec![7; PING], Access::NONE).unwrap();
        Endpoints {
            raw: raw_tcp().await,
            soft: (soft, rbuf, sbuf),
            tcp,
            rdma,
            _tcp_server: tcp_server,
        }
    });
    // Each round measures from a task of its own (how clients run on tokio).
    let ends = Arc::new(tokio::sync::Mutex::new(ends));
    // Per round: microseconds of raw TCP, soft Send/Recv, our TCP, RPC-over-RDMA.
    let mut us: Vec<[f64; 4]> = Vec::new();
    for round in 0..rounds {
        let ends = ends.clone();
        let times = rt.block_on(async move {
            tokio::spawn(async move {
                let mut p = ends.lock().await;
                let mut times = [0.0; 4];
                for k in 0..KINDS.len() {
                    let at = (k + round) % KINDS.len();
                    times[at] = p.mean_us(KINDS[at], calls).await;
                }
                times
            })
            .await
            .unwrap()
        });
        eprintln!(
            "round {}: raw TCP {:.2} us, soft Send/Recv {:.2} us, our TCP NULL {:.2} us, \
             RPC-over-RDMA NULL {:.2} us",
            round + 1,
            times[0],
            times[1],
            times[2],
            times[3]
        );
        us.push(times);
    }
    let column = |i: usize| summary(us.iter().map(|t| t[i]).collect());
    let ratio_of = |f: fn(&[f64; 4]) -> f64| summary(us.iter().map(f).collect());
    println!(
        "rpc_floor: {rounds} rounds of {calls} round trips each, one at a time, one process \
         (two-worker runtime); medians [range]"
    );
    for (i, name) in [
        "raw TCP 64 B ping-pong",
        "soft provider 64 B Send/Recv (no RPC)",
        "our TCP NULL call",
        "RPC-over-RDMA NULL call",
    ]
    .iter()
    .enumerate()
    {
        let (m, lo, hi) = column(i);
        println!("  {name:<40} {m:7.2} us [{lo:.2} .. {hi:.2}]");
    }
    let rows: [Derived; 5] = [
        (
            "soft Send/Recv / raw TCP",
            |t| t[1] / t[0],
            "x (time; the provider alone)",
        ),
        (
            "RPC over TCP above raw TCP",
            |t| t[2] - t[0],
            " us (what RPC costs above its stream)",
        ),
        (
            "RPC-over-RDMA / our TCP, calls per second",
            |t| t[2] / t[3],
            "x (issue 54 item 2: >= 1)",
        ),
        (
            "ceiling: our TCP / (soft + RPC above raw)",
            |t| t[2] / ceiling(t),
            "x (the best ratio with a free transport layer)",
        ),
        (
            "transport above the ceiling",
            |t| t[3] - ceiling(t),
            " us per call",
        ),
    ];
    for (name, f, unit) in rows {
        let (m, lo, hi) = ratio_of(f);
        println!("  {name:<42} {m:7.3}{unit} [{lo:.3} .. {hi:.3}]");
    }
    record(&us, rounds, calls);
}

/// The report's rows (`scripts/bench`): the ratios above, each against its same-run baseline,
/// without targets (issue 54's is judged by `benches/transports.rs`; these say how far it can
/// be met on this provider).
fn record(us: &[[f64; 4]], rounds: usize, calls: usize) {
    const GROUP: &str = "ONC RPC: how close RPC-over-RDMA can come to our TCP (soft provider)";
    let median = |f: &dyn Fn(&[f64; 4]) -> f64| summary(us.iter().map(f).collect());
    let mut rec = Recorder::new("rpc_floor");
    let rows: [(&str, usize, usize, &str); 3] = [
        (
            "soft provider 64 B Send/Recv round trip (no RPC)",
            1,
            0,
            "raw TCP 64 B ping-pong",
        ),
        ("RPC-over-RDMA NULL call", 3, 2, "our TCP NULL call"),
        (
            "RPC-over-RDMA NULL call",
            3,
            4,
            "the ceiling: soft Send/Recv + (our TCP - raw TCP)",
        ),
    ];
    for (name, value, base, base_name) in rows {
        let of = |t: &[f64; 4], i: usize| if i == 4 { ceiling(t) } else { t[i] };
        let (v, ..) = median(&|t| t[value]);
        let (b, ..) = median(&|t| of(t, base));
        let (r, lo, hi) = median(&|t| t[value] / of(t, base));
        rec.figure(GROUP, name, v, "us")
            .baseline(base_name, b)
            .ratio(r, "value / baseline")
            .ratio_range(lo, hi);
    }
    let (c, lo, hi) = median(&|t| t[2] / ceiling(t));
    rec.figure(
        GROUP,
        "the ceiling: our TCP's NULL call over soft Send/Recv + (our TCP - raw TCP)",
        c,
        "x",
    )
    .ratio(c, "best RPC-over-RDMA / our TCP calls per second")
    .ratio_range(lo, hi);
    rec.note(
        GROUP,
        format!(
            "{rounds} rounds of {calls} round trips of each, one at a time, in one process \
             (two-worker runtime), the order turning every round; medians of the rounds and of \
             the per-round ratios. The software provider carries its messages over TCP: were \
             the RPC-over-RDMA layer free beyond what RPC costs over TCP, a NULL call would take \
             the provider's bare 64 B round trip plus (our TCP NULL - raw TCP). Our TCP's time \
             over that is the ceiling of RPC-over-RDMA / our TCP on this provider \
             (`cargo bench -p tirpc-interop --bench rpc_floor`)."
        ),
    );
    if let Err(e) = rec.save() {
        eprintln!("rpc_floor: records not written: {e}");
    }
}

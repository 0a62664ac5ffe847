//! The RPC transports against each other and against their baselines, measured in the same
//! run on loopback:
//!
//! * NULL round trip: RPC-over-RDMA on the software provider, our ONC RPC over TCP, and a
//!   libtirpc `rpcgen` client and server over TCP. Targets: our TCP no slower than libtirpc,
//!   RPC-over-RDMA at most 1.3x our TCP.
//! * 1 MiB read (a result in a Write chunk) and 1 MiB write (an argument in a Read chunk) over
//!   RPC-over-RDMA, against raw TCP moving 1 MiB each way. Target: at least 75% of raw TCP.
//! * 64 calls in flight at once (NULL), RPC-over-RDMA against our TCP (no target; reported).
//!
//! Rounds are interleaved so that every measurement sees the same conditions; each figure is
//! the median of its rounds, each ratio the median of the per-round ratios. A missed target
//! is marked `MISSED`; with `--check` (or `BENCH_CHECK=1`) the bench then exits non-zero.
//!
//! `cargo bench -p tirpc-interop --bench transports [-- --check]`; `TRANSPORTS_ROUNDS` and
//! `TRANSPORTS_CALLS` change the rounds (default 9) and calls per latency round (default 5000).

use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::Instant;

use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::tcp::{TcpConfig, TcpServer, TcpTransport};
use rpcrdma::rpc::{CallOptions, Client};
use rpcrdma::transport::conformance::program::{
    self, pattern_of, testvers, EchoArgs, TestversClient,
};
use rpcrdma::transport::{serve, RdmaConfig, RdmaTransport};
use tirpc_interop::c::{self, CPrograms, CServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const MIB: usize = 1 << 20;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The C client's own mean NULL round trip, in µs, against the C server.
fn libtirpc_null_us(programs: &CPrograms, port: u16, calls: usize) -> f64 {
    let out = Command::new(&programs.client)
        .args([port.to_string(), "bench".into(), calls.to_string()])
        .output()
        .expect("run the C client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the C client failed: {stdout}");
    stdout
        .trim()
        .strip_prefix("mean_us=")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("unexpected C client output {stdout:?}"))
}

/// Mean NULL round trip of `client`, in µs, from a spawned task (how clients run on tokio).
async fn null_us(client: &TestversClient, calls: usize) -> f64 {
    let c = client.clone();
    tokio::spawn(async move {
        for _ in 0..calls / 10 {
            c.test_null().await.unwrap();
        }
        let start = Instant::now();
        for _ in 0..calls {
            c.test_null().await.unwrap();
        }
        start.elapsed().as_secs_f64() * 1e6 / calls as f64
    })
    .await
    .unwrap()
}

/// NULL calls per second with 64 in flight.
async fn concurrent_per_s(client: &TestversClient, calls_each: usize) -> f64 {
    let start = Instant::now();
    let tasks: Vec<_> = (0..64)
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
    (64 * calls_each) as f64 / start.elapsed().as_secs_f64()
}

/// MB/s of 1 MiB reads over RPC-over-RDMA: FILL's result is filled into a registered buffer
/// at the server (as a file read into it would be) and lands in one at the client.
async fn rdma_read_mbps(client: &TestversClient, ops: usize) -> f64 {
    let c = client.clone();
    tokio::spawn(async move {
        let start = Instant::now();
        for _ in 0..ops {
            let buffer = c.rpc().buffer(MIB);
            let r = c
                .rpc()
                .call_with::<testvers::TestFill>(
                    &(MIB as u32),
                    CallOptions::new().reply_buffer(buffer),
                )
                .await
                .unwrap();
            assert_eq!(r.data.len(), MIB);
        }
        (ops * MIB) as f64 / start.elapsed().as_secs_f64() / 1e6
    })
    .await
    .unwrap()
}

/// MB/s of 1 MiB writes over RPC-over-RDMA: the argument lies in a registered buffer of the
/// client, from which the server pulls it by RDMA Read.
async fn rdma_write_mbps(client: &TestversClient, ops: usize) -> f64 {
    let c = client.clone();
    tokio::spawn(async move {
        let mut buffer = c.rpc().buffer(MIB);
        buffer.as_mut_slice().copy_from_slice(&pattern_of(MIB, 2));
        let data = buffer.freeze(MIB);
        let start = Instant::now();
        for i in 0..ops {
            let n = c
                .test_write(EchoArgs {
                    tag: i as u32,
                    data: data.clone(),
                })
                .await
                .unwrap();
            assert_eq!(n as usize, MIB);
        }
        (ops * MIB) as f64 / start.elapsed().as_secs_f64() / 1e6
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

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One measured quantity over the rounds.
#[derive(Default)]
struct Series(Vec<f64>);

impl Series {
    fn median(&self) -> f64 {
        median(&mut self.0.clone())
    }
    fn range(&self) -> (f64, f64) {
        let min = self.0.iter().copied().fold(f64::INFINITY, f64::min);
        let max = self.0.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (min, max)
    }
}

/// A ratio over the rounds and its target.
struct Ratio {
    name: &'static str,
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
            None => "no target".into(),
        };
        let verdict = if self.target.is_none() {
            ""
        } else if self.missed() {
            "  MISSED"
        } else {
            "  met"
        };
        println!(
            "  {:<44} {:>6.2} [{lo:.2} .. {hi:.2}]   ({target}){verdict}",
            self.name,
            self.values.median()
        );
    }
}

fn main() -> ExitCode {
    let check = std::env::args().any(|a| a == "--check")
        || std::env::var("BENCH_CHECK").is_ok_and(|v| v == "1");
    let rounds = env_or("TRANSPORTS_ROUNDS", 9).max(1);
    let calls = env_or("TRANSPORTS_CALLS", 5000).max(10);
    let bulk_ops = 64;
    let programs = c::programs().unwrap_or_else(|why| panic!("{why}"));
    let c_server = CServer::start(&programs).expect("start the C server");
    let rt = if std::env::var("TRANSPORTS_RUNTIME").is_ok_and(|v| v == "current") {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    };

    let (rdma, tcp, raw, _tcp_server) = rt.block_on(async {
        let provider = Arc::new(SoftProvider::default());
        let listener = provider
            .listen((Ipv4Addr::LOCALHOST, 0).into())
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let rdma_server = Arc::new(serve::<SoftProvider>(
            listener,
            program::server(),
            RdmaConfig::default().credits(128),
        ));
        tokio::spawn(async move { rdma_server.run().await });
        let rdma = TestversClient::new(Client::new(
            RdmaTransport::connect(provider, addr, RdmaConfig::default().credits(128))
                .await
                .unwrap(),
        ));
        let tcp_server = TcpServer::bind(
            (Ipv4Addr::LOCALHOST, 0),
            program::server(),
            TcpConfig::new(),
        )
        .await
        .unwrap();
        let tcp_addr = tcp_server.local_addr();
        let tcp = TestversClient::new(Client::new(
            TcpTransport::connect(tcp_addr, TcpConfig::new())
                .await
                .unwrap(),
        ));
        (rdma, tcp, raw_server().await, tcp_server)
    });

    let mut s = std::collections::HashMap::<&str, Series>::new();
    for round in 0..rounds {
        eprint!("\rround {}/{rounds}", round + 1);
        s.entry("libtirpc null")
            .or_default()
            .0
            .push(libtirpc_null_us(&programs, c_server.port(), calls));
        rt.block_on(async {
            let tcp_null = null_us(&tcp, calls).await;
            let rdma_null = null_us(&rdma, calls).await;
            s.entry("tcp null").or_default().0.push(tcp_null);
            s.entry("rdma null").or_default().0.push(rdma_null);
            s.entry("raw read")
                .or_default()
                .0
                .push(raw_mbps(raw, true, bulk_ops).await);
            s.entry("rdma read")
                .or_default()
                .0
                .push(rdma_read_mbps(&rdma, bulk_ops).await);
            s.entry("raw write")
                .or_default()
                .0
                .push(raw_mbps(raw, false, bulk_ops).await);
            s.entry("rdma write")
                .or_default()
                .0
                .push(rdma_write_mbps(&rdma, bulk_ops).await);
            s.entry("tcp 64")
                .or_default()
                .0
                .push(concurrent_per_s(&tcp, calls / 64 + 20).await);
            s.entry("rdma 64")
                .or_default()
                .0
                .push(concurrent_per_s(&rdma, calls / 64 + 20).await);
        });
    }
    eprintln!();
    let per_round = |a: &str, b: &str| -> Series {
        Series(s[a].0.iter().zip(&s[b].0).map(|(x, y)| x / y).collect())
    };
    let ratios = [
        Ratio {
            name: "our TCP NULL / libtirpc NULL",
            values: per_round("tcp null", "libtirpc null"),
            target: Some((1.0, true)),
        },
        Ratio {
            name: "RPC-over-RDMA NULL / our TCP NULL",
            values: per_round("rdma null", "tcp null"),
            target: Some((1.3, true)),
        },
        Ratio {
            name: "RPC-over-RDMA 1 MiB read / raw TCP",
            values: per_round("rdma read", "raw read"),
            target: Some((0.75, false)),
        },
        Ratio {
            name: "RPC-over-RDMA 1 MiB write / raw TCP",
            values: per_round("rdma write", "raw write"),
            target: Some((0.75, false)),
        },
        Ratio {
            name: "RPC-over-RDMA / our TCP, 64 in flight",
            values: per_round("rdma 64", "tcp 64"),
            target: None,
        },
    ];
    println!("RPC transports on loopback, median of {rounds} interleaved rounds [min .. max]");
    for (key, label, unit) in [
        (
            "libtirpc null",
            "NULL round trip, libtirpc (rpcgen C)",
            "us",
        ),
        ("tcp null", "NULL round trip, our ONC RPC over TCP", "us"),
        ("rdma null", "NULL round trip, RPC-over-RDMA (soft)", "us"),
        ("raw read", "1 MiB to the client, raw TCP", "MB/s"),
        (
            "rdma read",
            "1 MiB READ, RPC-over-RDMA (Write chunk)",
            "MB/s",
        ),
        ("raw write", "1 MiB from the client, raw TCP", "MB/s"),
        (
            "rdma write",
            "1 MiB WRITE, RPC-over-RDMA (Read chunk)",
            "MB/s",
        ),
        ("tcp 64", "64 NULL calls in flight, our TCP", "calls/s"),
        (
            "rdma 64",
            "64 NULL calls in flight, RPC-over-RDMA",
            "calls/s",
        ),
    ] {
        let (lo, hi) = s[key].range();
        println!(
            "  {label:<44} {:>10.1} {unit} [{lo:.1} .. {hi:.1}]",
            s[key].median()
        );
    }
    println!("ratios:");
    for r in &ratios {
        r.print();
    }
    let missed: Vec<_> = ratios
        .iter()
        .filter(|r| r.missed())
        .map(|r| r.name)
        .collect();
    if missed.is_empty() {
        println!("every target met");
        ExitCode::SUCCESS
    } else {
        println!("targets missed: {}", missed.join("; "));
        if check {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        }
    }
}

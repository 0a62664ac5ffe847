//! RPC-over-RDMA version 2 against version 1 on the same workload, measured in the same run
//! over the software provider (seed 003 does not change how data moves, so version 2 must be
//! at least as fast: every target is a ratio of version 2 to version 1 within 5 %, the noise
//! of this machine between alternating rounds):
//!
//! * NULL round trip, one call at a time (µs per call; target: at most 1.05x version 1);
//! * 1 MiB WRITE (the argument by RDMA Read from a Read chunk) and 1 MiB READ (the result by
//!   RDMA Write into a Write chunk), MB/s (target: at least 0.95x);
//! * many small calls: 100-byte ECHOs, 64 in flight (calls/s; target: at least 0.95x).
//!
//! Both connections (a version 2 client with a version 2 server, a version 1 client with a
//! version 1 server) live on one two-worker tokio runtime, made afresh every round; rounds
//! alternate which is made and measured first. NULL calls are made from a task of that
//! runtime, the rest from `block_on` (see [`run_placed`]).
//! Prints medians with their ranges and the median per-round ratio. Run with `cargo bench -p
//! rpcrdma --bench versions [-- --check]`; `BENCH_QUICK=1` measures briefly; the figures are
//! also written as records for `scripts/bench`'s report.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bench_report::{Recorder, Target};
use bytes::Bytes;
use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::Client;
use rpcrdma::transport::conformance::program::{server, EchoArgs, TestversClient};
use rpcrdma::transport::{serve, RdmaConfig, RdmaTransport};

const MIB: usize = 1 << 20;
const GROUP: &str = "RPC-over-RDMA version 2 vs version 1 (soft provider)";

async fn connect(version_2: bool) -> TestversClient {
    let provider = Arc::new(SoftProvider::default());
    let listener = provider
        .listen("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let config = RdmaConfig::default().version_2(version_2);
    let listener = serve::<SoftProvider>(listener, server(), config.clone());
    tokio::spawn(async move { listener.run().await });
    let transport = Arc::new(
        RdmaTransport::connect(provider, addr, config)
            .await
            .unwrap(),
    );
    let client = TestversClient::new(Client::from_arc(transport.clone()));
    client.test_null().await.unwrap();
    assert_eq!(transport.version(), if version_2 { 2 } else { 1 });
    client
}

/// One measurement: `per` units of work done in the returned time.
#[derive(Clone, Copy)]
enum Work {
    Null(usize),
    Write(usize),
    Read(usize),
    Small { calls: usize, in_flight: usize },
}

async fn run(client: &TestversClient, work: Work) -> Duration {
    let start = Instant::now();
    match work {
        Work::Null(n) => {
            for _ in 0..n {
                client.test_null().await.unwrap();
            }
        }
        Work::Write(n) => {
            let data = Bytes::from(vec![0x5a; MIB]);
            for _ in 0..n {
                let got = client
                    .test_write(EchoArgs {
                        tag: 0,
                        data: data.clone(),
                    })
                    .await
                    .unwrap();
                assert_eq!(got as usize, MIB);
            }
        }
        Work::Read(n) => {
            for _ in 0..n {
                let got = client.test_fill(MIB as u32).await.unwrap();
                assert_eq!(got.data.len(), MIB);
            }
        }
        Work::Small { calls, in_flight } => {
            let per_task = calls / in_flight;
            let tasks: Vec<_> = (0..in_flight)
                .map(|_| {
                    let c = client.clone();
                    tokio::spawn(async move {
                        let data = Bytes::from(vec![7u8; 100]);
                        for _ in 0..per_task {
                            c.test_echo(EchoArgs {
                                tag: 1,
                                data: data.clone(),
                            })
                            .await
                            .unwrap();
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        }
    }
    start.elapsed()
}

/// [`run`] in a task of the runtime (NULL calls, where tokio clients usually run) or in
/// `block_on`'s own future, on the calling thread (the rest). The placement whose noise is
/// smaller for the work, both versions alike, on a 2-vCPU VM (ranges of the per-round ratios,
/// 15 rounds):
/// - NULL calls in a task: in `block_on` every message crosses to the calling thread, and
///   whether it shares a vCPU with the worker answering it (the scheduler settles that per
///   round) moved a call between about 20 and 90 us: v2/v1 0.747-1.309 there, 0.989-1.163 and
///   0.851-1.267 in a task;
/// - 1 MiB transfers in `block_on`: in a task the client's copies compete with the server's
///   tasks for the two workers: READ 0.617-1.795 and 0.442-1.115 in a task, 0.855-1.185 in
///   `block_on`.
async fn run_placed(client: &TestversClient, work: Work) -> Duration {
    if !matches!(work, Work::Null(_)) {
        return run(client, work).await;
    }
    let client = client.clone();
    tokio::spawn(async move { run(&client, work).await })
        .await
        .expect("the measured calls do not panic")
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// `-- ping v1|v2 [N]`: N (default 10,000) NULL calls of one version, in a task on the
/// two-worker runtime, for a profiler: under callgrind, the difference between two values of N
/// is each version's instructions per call, a measure that, unlike the time, does not move
/// with the machine's load.
fn ping(args: &[String]) -> ExitCode {
    let version_2 = match args.first().map(String::as_str) {
        Some("v1") => false,
        Some("v2") => true,
        _ => {
            eprintln!("usage: versions ping v1|v2 [CALLS]");
            return ExitCode::FAILURE;
        }
    };
    let calls = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dt = rt.block_on(async move {
        let client = connect(version_2).await;
        tokio::spawn(async move { run(&client, Work::Null(calls)).await })
            .await
            .unwrap()
    });
    println!(
        "{calls} NULL calls, {:.2} us each",
        dt.as_secs_f64() * 1e6 / calls as f64
    );
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "ping") {
        return ping(&args[i + 1..]);
    }
    let check = std::env::args().any(|a| a == "--check")
        || std::env::var("BENCH_CHECK").is_ok_and(|v| v == "1");
    let quick = bench_report::quick();
    let rounds = if quick { 5 } else { 15 };
    let scale = if quick { 1 } else { 4 };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    // (name, work, unit, value from (work, seconds), higher is better)
    type Value = fn(Work, f64) -> f64;
    let per_call: Value = |w, s| match w {
        Work::Null(n) => s * 1e6 / n as f64,
        _ => unreachable!(),
    };
    let mbps: Value = |w, s| match w {
        Work::Write(n) | Work::Read(n) => (n * MIB) as f64 / s / 1e6,
        _ => unreachable!(),
    };
    let calls_per_s: Value = |w, s| match w {
        Work::Small { calls, .. } => calls as f64 / s,
        _ => unreachable!(),
    };
    let cases: [(&str, Work, &str, Value, bool); 4] = [
        (
            "NULL round trip (per call)",
            Work::Null(2000 * scale),
            "us",
            per_call,
            false,
        ),
        (
            "1 MiB WRITE (Read chunk)",
            Work::Write(16 * scale),
            "MB/s",
            mbps,
            true,
        ),
        (
            "1 MiB READ (Write chunk)",
            Work::Read(16 * scale),
            "MB/s",
            mbps,
            true,
        ),
        (
            "100-byte ECHO, 64 in flight",
            Work::Small {
                calls: 64 * 40 * scale,
                in_flight: 64,
            },
            "calls/s",
            calls_per_s,
            true,
        ),
    ];
    let mut rec = Recorder::new("versions");
    let mut missed = Vec::new();
    println!("{GROUP}: {rounds} rounds, alternating which version goes first");
    for (name, work, unit, value, higher) in cases {
        let (mut a, mut b, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        rt.block_on(async {
            for round in 0..rounds {
                // Fresh connections every round, made and measured in alternating order: a
                // connection's tasks land on the runtime's workers as they happen to, which
                // on two CPUs favoured one connection for a whole run (0.7x one run, 1.1x the
                // next, with identical counters).
                let first_v2 = round % 2 == 1;
                let made_first = connect(first_v2).await;
                let made_second = connect(!first_v2).await;
                let (v1, v2) = if first_v2 {
                    (made_second, made_first)
                } else {
                    (made_first, made_second)
                };
                // Warm both (pools, registrations).
                run_placed(&v1, work).await;
                run_placed(&v2, work).await;
                let (t1, t2) = if first_v2 {
                    let t2 = run_placed(&v2, work).await;
                    (run_placed(&v1, work).await, t2)
                } else {
                    let t1 = run_placed(&v1, work).await;
                    (t1, run_placed(&v2, work).await)
                };
                let (x1, x2) = (value(work, t1.as_secs_f64()), value(work, t2.as_secs_f64()));
                a.push(x1);
                b.push(x2);
                ratios.push(x2 / x1);
            }
        });
        let (lo, hi) = ratios
            .iter()
            .fold((f64::MAX, f64::MIN), |(l, h), r| (l.min(*r), h.max(*r)));
        let (m1, m2, r) = (median(&mut a), median(&mut b), median(&mut ratios));
        let target = if higher {
            Target::at_least(0.95)
        } else {
            Target::at_most(1.05)
        };
        let met = target.holds(r);
        println!(
            "  {name:<30} v2 {m2:>10.1} {unit:<8} v1 {m1:>10.1} {unit:<8} v2/v1 {r:.3} [{lo:.3} .. {hi:.3}]  target {target}: {}",
            if met { "met" } else { "MISSED" }
        );
        rec.figure(GROUP, name, m2, unit)
            .baseline("version 1", m1)
            .ratio(r, "version 2 / version 1, median of the rounds")
            .ratio_range(lo, hi)
            .target(target);
        if !met {
            missed.push(name);
        }
    }
    rec.note(
        GROUP,
        format!("{rounds} alternating rounds on one two-worker runtime, fresh connections each round; both sides of each connection in this process"),
    );
    if let Err(e) = rec.save() {
        eprintln!("writing the records: {e}");
    }
    if check && !missed.is_empty() {
        eprintln!("missed: {}", missed.join(", "));
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

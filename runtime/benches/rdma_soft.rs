//! Soft iWARP provider against raw TCP on loopback, measured in the same run:
//!
//! * 64-byte Send/receive round trip vs. a 64-byte TCP ping-pong (target: at most 1.3x);
//! * 1 MiB RDMA Write and RDMA Read throughput with CRC off vs. 1 MiB TCP writes
//!   (target: at least 80 % of raw TCP).
//!
//! Run with `cargo bench -p rpcrdma --bench rdma_soft` (`-- latency` or `-- throughput` for one
//! part, `-- task`, `-- block_on` or `-- current` for one placement of the round trips).
//! Baseline and provider run on the same tokio runtime (two workers; the round trips also on a
//! current-thread runtime) with the same sizes; rounds alternate baseline and provider. On the
//! two-worker runtime the round trips run twice: with the client loop in a spawned task (the
//! server side always is one), and in `block_on`'s future, which is not a task and so pays a
//! cross-thread wake-up per message (both protocols alike). Prints per-variant medians with
//! their ranges, and the median (and range) of the per-round ratios.
//!
//! Each target is judged on the median of the per-round ratios and marked `met` or `MISSED`;
//! with `-- --check` (or `BENCH_CHECK=1`) a missed target makes the bench exit non-zero. The
//! round-trip target applies to the default, confirmed completions, in every placement; local
//! completions are shown for reference.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Access, Connection, RecvWr, RemoteAddr, SendWr, Sge, WcOpcode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const MIB: usize = 1 << 20;

#[path = "../tests/support/soft_pair.rs"]
mod soft_pair;
use soft_pair::pair;

/// The bench's provider: CRC off.
fn provider(confirm: bool) -> SoftProvider {
    soft_pair::provider(false, confirm)
}

async fn tcp_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let (c, s) = tokio::join!(TcpStream::connect(addr), l.accept());
    let (c, s) = (c.unwrap(), s.unwrap().0);
    c.set_nodelay(true).unwrap();
    s.set_nodelay(true).unwrap();
    (c, s)
}

async fn tcp_round_trip(iters: usize) -> Duration {
    let (mut c, mut s) = tcp_pair().await;
    let server = tokio::spawn(async move {
        let mut buf = [0u8; 64];
        for _ in 0..iters {
            s.read_exact(&mut buf).await.unwrap();
            s.write_all(&buf).await.unwrap();
        }
    });
    let msg = [7u8; 64];
    let mut buf = [0u8; 64];
    let t = Instant::now();
    for _ in 0..iters {
        c.write_all(&msg).await.unwrap();
        c.read_exact(&mut buf).await.unwrap();
    }
    let dt = t.elapsed();
    server.await.unwrap();
    dt / iters as u32
}

async fn soft_round_trip(iters: usize, confirm: bool) -> Duration {
    let (c, s) = pair(&provider(confirm)).await;
    // The server's receive is posted before the client can send.
    let rbuf = s.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    let sbuf = s.register(vec![1; 64], Access::NONE).unwrap();
    s.post_recv(RecvWr::new(0, Sge::whole(&rbuf))).unwrap();
    let srv = s;
    let server = tokio::spawn(async move {
        let mut echoed = 0;
        while echoed < iters {
            let done = srv.poll_completion().await;
            assert!(done.is_success(), "{done:?}");
            if done.opcode == WcOpcode::Recv {
                srv.post_recv(RecvWr::new(0, Sge::whole(&rbuf))).unwrap();
                srv.post_send(SendWr::send(1, vec![Sge::whole(&sbuf)]))
                    .unwrap();
                echoed += 1;
            }
        }
        // Drain the last send completions.
        tokio::time::sleep(Duration::from_millis(50)).await;
    });
    let rbuf = c.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    let sbuf = c.register(vec![7; 64], Access::NONE).unwrap();
    let t = Instant::now();
    for i in 0..iters as u64 {
        c.post_recv(RecvWr::new(i, Sge::whole(&rbuf))).unwrap();
        c.post_send(SendWr::send(i, vec![Sge::whole(&sbuf)]))
            .unwrap();
        loop {
            let done = c.poll_completion().await;
            assert!(done.is_success(), "{done:?}");
            if done.opcode == WcOpcode::Recv {
                break;
            }
        }
    }
    let dt = t.elapsed();
    server.await.unwrap();
    dt / iters as u32
}

async fn tcp_throughput(total: usize) -> f64 {
    let (mut c, mut s) = tcp_pair().await;
    let reader = tokio::spawn(async move {
        let mut buf = vec![0u8; MIB];
        let mut got = 0;
        while got < total {
            s.read_exact(&mut buf).await.unwrap();
            got += MIB;
        }
    });
    let data = vec![5u8; MIB];
    let t = Instant::now();
    let mut sent = 0;
    while sent < total {
        c.write_all(&data).await.unwrap();
        sent += MIB;
    }
    reader.await.unwrap();
    total as f64 / t.elapsed().as_secs_f64()
}

async fn soft_throughput(total: usize, read: bool) -> f64 {
    let (c, s) = pair(&provider(true)).await;
    let target = s
        .register(
            vec![3u8; MIB],
            Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
        )
        .unwrap();
    let remote = RemoteAddr::new(target.rkey(), target.addr());
    let local = c.register(vec![5u8; MIB], Access::LOCAL_WRITE).unwrap();
    const WINDOW: usize = 4;
    let ops = total / MIB;
    let t = Instant::now();
    let (mut posted, mut done) = (0, 0);
    while done < ops {
        while posted < ops && posted - done < WINDOW {
            let wr = if read {
                SendWr::read(posted as u64, Sge::whole(&local), remote)
            } else {
                SendWr::write(posted as u64, vec![Sge::whole(&local)], remote)
            };
            c.post_send(wr).unwrap();
            posted += 1;
        }
        let comp = c.poll_completion().await;
        assert!(comp.is_success(), "{comp:?}");
        done += 1;
    }
    let rate = total as f64 / t.elapsed().as_secs_f64();
    drop(s);
    rate
}

/// Median, minimum and maximum.
fn stats(v: &[f64]) -> (f64, f64, f64) {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// Per-round ratios `a[i] / b[i]`: both were measured in the same round, under the same load.
fn ratios(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x / y).collect()
}

/// The targets: a round trip at most this many times raw TCP's, a transfer at least this
/// fraction of raw TCP's rate.
const LATENCY_TARGET: f64 = 1.3;
const THROUGHPUT_TARGET: f64 = 0.8;

/// The verdict on a median ratio: `met` or `MISSED`, with the target.
fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "MISSED"
    }
}

/// Rounds of interleaved measurements: the machine is shared, so the baseline and the
/// provider are measured alternately (the order rotates every round), each round's ratio is
/// taken, and the medians are reported with their ranges.
const ROUNDS: usize = 15;

/// Runs variant `v` of round `round`; the variants run in rotated order.
fn rotated(round: usize, variants: usize) -> impl Iterator<Item = usize> {
    (0..variants).map(move |k| (round + k) % variants)
}

/// Where the client's loop runs.
#[derive(Clone, Copy, PartialEq)]
enum Client {
    /// A spawned task, as servers and clients on tokio usually run: a wake-up from a worker
    /// runs it on that worker.
    Task,
    /// `block_on`'s own future, which is not a task: every wake-up crosses threads.
    BlockOn,
}

/// Runs `f` where `client` says.
async fn run_client<F>(client: Client, f: F) -> Duration
where
    F: std::future::Future<Output = Duration> + Send + 'static,
{
    match client {
        Client::Task => tokio::spawn(f).await.unwrap(),
        Client::BlockOn => f.await,
    }
}

/// 64-byte round trips: raw TCP, and soft with confirmed and with local completions. Returns
/// the targets missed.
async fn latency(runtime: &str, client: Client) -> Vec<String> {
    let iters = 2000;
    // Warm up both paths once.
    run_client(client, tcp_round_trip(1000)).await;
    run_client(client, soft_round_trip(1000, true)).await;
    let mut us: [Vec<f64>; 3] = Default::default();
    for round in 0..ROUNDS {
        for v in rotated(round, 3) {
            let dt = match v {
                0 => run_client(client, tcp_round_trip(iters)).await,
                1 => run_client(client, soft_round_trip(iters, true)).await,
                _ => run_client(client, soft_round_trip(iters, false)).await,
            };
            us[v].push(dt.as_secs_f64() * 1e6);
        }
    }
    let [tcp, soft, local] = &us;
    let place = match client {
        Client::Task => "client in a task",
        Client::BlockOn => "client in block_on",
    };
    println!(
        "64-byte round trip, {runtime}, {place}, {ROUNDS} rounds of {iters}: median [min .. max] of the rounds"
    );
    let (m, lo, hi) = stats(tcp);
    println!("  raw TCP ping-pong                       {m:7.2} us [{lo:.2} .. {hi:.2}]");
    let mut missed = Vec::new();
    for (name, v, judged) in [
        ("soft Send/recv, confirmed completions", soft, true),
        ("soft Send/recv, local completions    ", local, false),
    ] {
        let (m, lo, hi) = stats(v);
        let (r, rlo, rhi) = stats(&ratios(v, tcp));
        let target = if judged {
            let met = r <= LATENCY_TARGET;
            if !met {
                missed.push(format!("{runtime}, {place}: {r:.2}x"));
            }
            format!("(target <= {LATENCY_TARGET}x) {}", verdict(met))
        } else {
            "(for reference)".into()
        };
        println!(
            "  {name}   {m:7.2} us [{lo:.2} .. {hi:.2}]   ratio {r:.2}x [{rlo:.2} .. {rhi:.2}] {target}"
        );
    }
    missed
}

/// 1 MiB RDMA Write and RDMA Read against 1 MiB TCP writes. Returns the targets missed.
async fn throughput() -> Vec<String> {
    let total = 128 * MIB;
    let mut mbs: [Vec<f64>; 3] = Default::default();
    for round in 0..ROUNDS {
        for v in rotated(round, 3) {
            let rate = match v {
                0 => tcp_throughput(total).await,
                1 => soft_throughput(total, false).await,
                _ => soft_throughput(total, true).await,
            };
            mbs[v].push(rate / 1e6);
        }
    }
    let [tcp, write, read] = &mbs;
    println!(
        "1 MiB transfers, two-worker runtime, CRC off, markers off, {ROUNDS} rounds of {} MiB: median [min .. max] of the rounds",
        total / MIB
    );
    let (m, lo, hi) = stats(tcp);
    println!("  raw TCP       {m:6.0} MB/s [{lo:.0} .. {hi:.0}]");
    let mut missed = Vec::new();
    for (name, v) in [("RDMA Write", write), ("RDMA Read ", read)] {
        let (m, lo, hi) = stats(v);
        let (r, rlo, rhi) = stats(&ratios(v, tcp));
        let met = r >= THROUGHPUT_TARGET;
        if !met {
            missed.push(format!("1 MiB {}: {:.0}%", name.trim(), 100.0 * r));
        }
        println!(
            "  {name}    {m:6.0} MB/s [{lo:.0} .. {hi:.0}]   {:.0}% of raw TCP [{:.0}% .. {:.0}%] (target >= {:.0}%) {}",
            100.0 * r,
            100.0 * rlo,
            100.0 * rhi,
            100.0 * THROUGHPUT_TARGET,
            verdict(met)
        );
    }
    missed
}

fn main() -> ExitCode {
    // `cargo bench -p rpcrdma --bench rdma_soft -- latency` (or `throughput`, or one placement:
    // `task`, `block_on`, `current`) runs one part.
    let check = std::env::args().any(|a| a == "--check")
        || std::env::var("BENCH_CHECK").is_ok_and(|v| v == "1");
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut missed = Vec::new();
    let wants = |part: &str| filter.is_empty() || filter.iter().any(|f| part.contains(f.as_str()));
    let two_workers = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if wants("latency/task") {
        missed.extend(two_workers.block_on(latency("two-worker runtime", Client::Task)));
    }
    if wants("latency/block_on") {
        // `block_on`'s thread is not a worker: both TCP and soft pay a cross-thread wake-up
        // per message there, which on a VM costs more than either protocol's own work.
        missed.extend(two_workers.block_on(latency("two-worker runtime", Client::BlockOn)));
    }
    if wants("latency/current") {
        // The same on a current-thread runtime: without cross-thread wake-ups, whose cost
        // varies with what else runs on the machine, this shows the code path itself.
        let one_thread = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        missed.extend(one_thread.block_on(latency("current-thread runtime", Client::BlockOn)));
    }
    if wants("throughput") {
        missed.extend(two_workers.block_on(throughput()));
    }
    if missed.is_empty() {
        println!("every target met");
        return ExitCode::SUCCESS;
    }
    println!("targets MISSED: {}", missed.join("; "));
    if check {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

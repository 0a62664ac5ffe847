//! Soft iWARP provider against raw TCP on loopback, measured in the same run:
//!
//! * 64-byte Send/receive round trip vs. a 64-byte TCP ping-pong (target: at most 1.3x);
//! * 1 MiB RDMA Write and RDMA Read throughput, CRC off and on, vs. the best single TCP stream
//!   of 1 MiB writes in the same round and the same structure (targets: at least 85 % with CRC
//!   off, 70 % with CRC on): in one process, raw blocking std sockets (a sender and a receiver
//!   thread) or tokio, whichever was faster, with the process's CPU time per byte moved;
//!   between two processes pinned to two CPUs (the active end here on CPU 0, the passive end,
//!   raw TCP's receiver or the RDMA target, in a child on CPU 1), raw TCP between the same two
//!   processes or iperf3 placed alike, whichever was faster. Without iperf3 the bench says so
//!   and judges against raw TCP (under `CI=true` it fails instead); unpinned (one CPU, no
//!   `taskset`) the two-process rows are shown without targets;
//! * the sweep (no targets; plots): throughput and CPU time per byte for 4 KiB .. 1 MiB
//!   messages, and the Send/Recv round trip for 64 B .. 64 KiB, each against raw TCP.
//!
//! Run with `cargo bench -p rpcrdma --bench rdma_soft` (`-- latency`, `-- throughput`,
//! `-- processes` or `-- sweep` for one part, `-- task`, `-- block_on` or `-- current` for one placement of the
//! round trips; `-- profile read crc-on` runs one bulk variant for `PROFILE_SECS` seconds,
//! default 10, to record with `perf` (from `block_on`; with `PROFILE_TASK=1` from a spawned
//! task); `-- ping confirmed 10000` runs one round-trip variant
//! for callgrind, see `scripts/soft-profile --round-trip`). Every figure is also written as a record for `scripts/bench`'s report
//! (`bench_report`); `BENCH_QUICK=1` runs fewer, shorter rounds.
//! Baseline and provider run on the same tokio runtime (two workers; the round trips also on a
//! current-thread runtime) with the same sizes; rounds alternate baseline and provider. On the
//! two-worker runtime the round trips run twice: with the client loop in a spawned task (the
//! server side always is one), and in `block_on`'s future, which is not a task and so pays a
//! cross-thread wake-up per message (both protocols alike). Prints per-variant medians with
//! their ranges, and the median (and range) of the per-round ratios. Each round-trip table
//! also says where its rounds ran: how many had the client and the server on one CPU
//! throughout, with the provider's median in those against raw TCP's, and how many ran split
//! (`sched_getcpu` at every round trip on both ends); `-- ping` prints the same share.
//!
//! Each target is judged on the median of the per-round ratios and marked `met` or `MISSED`;
//! with `-- --check` (or `BENCH_CHECK=1`) a missed target makes the bench exit non-zero. The
//! round-trip target applies to the default, confirmed completions, in every placement; local
//! completions are shown for reference. The same target is also judged for a machine with fast
//! loopback (issue 12's, raw TCP 4.1 us): the provider's time above raw TCP in each round,
//! measured here, added to that machine's 4.1 us. This machine's own ratio can pass where that
//! one fails (a slow loopback hides the provider's cost), so both are judged.
//!
//! With `-- --floor` the bench exits non-zero when a 1 MiB transfer falls below its regression
//! floor (75 % of the best TCP stream with CRC off, 60 % with CRC on), well under the targets:
//! CI runs `-- throughput --floor`, which catches a bulk regression without failing on a few
//! points of noise. A variant below its floor is measured again (all variants, not recorded),
//! up to three measurements in all, and the run fails only if it is below its floor in each.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use bench_report::cpu::Stopwatch;
use bench_report::{Recorder, Target};

use rpcrdma::rdma::soft::{SoftConnection, SoftProvider};
use rpcrdma::rdma::{
    Access, ConnectParams, Connection, Listener, Provider, RecvWr, RemoteAddr, SendWr, Sge,
    WcOpcode,
};
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

/// What a run of round trips measured: the mean round trip, and the share of the round trips
/// for which the client and the server's task ran on the same CPU (which the scheduler decides
/// when the run starts; see [`latency`]).
struct RoundTrips {
    mean: Duration,
    same_cpu: f64,
}

impl RoundTrips {
    /// `client[i]` and `server[i]`: the CPU each end ran on in round trip `i`.
    fn of(elapsed: Duration, client: &[i32], server: &[i32]) -> RoundTrips {
        let same = client.iter().zip(server).filter(|(c, s)| c == s).count();
        RoundTrips {
            mean: elapsed / client.len().max(1) as u32,
            same_cpu: same as f64 / client.len().max(1) as f64,
        }
    }
}

/// The CPU the calling thread runs on (-1 where that is not known).
fn current_cpu() -> i32 {
    #[cfg(target_os = "linux")]
    // SAFETY: sched_getcpu takes no arguments and only reads the calling thread's state.
    return unsafe { libc::sched_getcpu() };
    #[cfg(not(target_os = "linux"))]
    return -1;
}

/// How long the server of every round-trip run stays after its last reply, unmeasured: the
/// provider's drains its last send completions, raw TCP's only waits. Every run, and the setup
/// of the next, then starts after the same quiet time, whichever variant ran before.
///
/// In `block_on` on two vCPUs what ran just before decides where a round runs. When only the
/// provider's server waited, a round after raw TCP's started at once and one after the provider's
/// after 50 ms of quiet; the rounds that followed raw TCP's (two of three confirmed ones) often ran
/// with the client and its worker on different vCPUs to the end, and raw TCP, which always followed
/// a quiet one, rarely did. Four alternating runs of `-- latency/block_on` with and without raw
/// TCP's wait: confirmed round trips on one CPU 53-79 % -> 98-100 % (raw TCP 94-99 % -> 99-100 %),
/// judged ratio 1.08-1.75x -> 0.99-1.08x, carried over to 4.1 us 1.43-8.70x -> 0.96-1.42x. A quiet
/// start favours one vCPU for both paths, and both drift apart the longer a run lasts: with runs of
/// 8,000 round trips raw TCP kept 33 % of its round trips on one CPU and confirmed completions
/// 44 %, at 0.87x raw TCP's time (two runs); in a fresh process (`PING_BLOCK_ON=1 -- ping raw
/// 100000`) raw TCP ran 0 % of them on one CPU, confirmed completions 13-20 %.
const QUIET_AFTER_RUN: Duration = Duration::from_millis(50);

async fn tcp_round_trip(iters: usize, size: usize) -> RoundTrips {
    let (mut c, mut s) = tcp_pair().await;
    let server = tokio::spawn(async move {
        let mut buf = vec![0u8; size];
        let mut cpus = Vec::with_capacity(iters);
        for _ in 0..iters {
            s.read_exact(&mut buf).await.unwrap();
            cpus.push(current_cpu());
            s.write_all(&buf).await.unwrap();
        }
        tokio::time::sleep(QUIET_AFTER_RUN).await;
        cpus
    });
    let msg = vec![7u8; size];
    let mut buf = vec![0u8; size];
    let mut cpus = Vec::with_capacity(iters);
    let t = Instant::now();
    for _ in 0..iters {
        c.write_all(&msg).await.unwrap();
        c.read_exact(&mut buf).await.unwrap();
        cpus.push(current_cpu());
    }
    let dt = t.elapsed();
    RoundTrips::of(dt, &cpus, &server.await.unwrap())
}

async fn soft_round_trip(iters: usize, size: usize, confirm: bool) -> RoundTrips {
    let (c, s) = pair(&provider(confirm)).await;
    // The server's receive is posted before the client can send.
    let rbuf = s.register(vec![0; size], Access::LOCAL_WRITE).unwrap();
    let sbuf = s.register(vec![1; size], Access::NONE).unwrap();
    s.post_recv(RecvWr::new(0, Sge::whole(&rbuf))).unwrap();
    let srv = s;
    let server = tokio::spawn(async move {
        let mut cpus = Vec::with_capacity(iters);
        while cpus.len() < iters {
            let done = srv.poll_completion().await;
            assert!(done.is_success(), "{done:?}");
            if done.opcode == WcOpcode::Recv {
                cpus.push(current_cpu());
                srv.post_recv(RecvWr::new(0, Sge::whole(&rbuf))).unwrap();
                srv.post_send(SendWr::send(1, Sge::whole(&sbuf))).unwrap();
            }
        }
        // Drain the last send completions.
        tokio::time::sleep(QUIET_AFTER_RUN).await;
        cpus
    });
    let rbuf = c.register(vec![0; size], Access::LOCAL_WRITE).unwrap();
    let sbuf = c.register(vec![7; size], Access::NONE).unwrap();
    let mut cpus = Vec::with_capacity(iters);
    let t = Instant::now();
    for i in 0..iters as u64 {
        c.post_recv(RecvWr::new(i, Sge::whole(&rbuf))).unwrap();
        c.post_send(SendWr::send(i, Sge::whole(&sbuf))).unwrap();
        loop {
            let done = c.poll_completion().await;
            assert!(done.is_success(), "{done:?}");
            if done.opcode == WcOpcode::Recv {
                break;
            }
        }
        cpus.push(current_cpu());
    }
    let dt = t.elapsed();
    RoundTrips::of(dt, &cpus, &server.await.unwrap())
}

/// The round trip of [`soft_round_trip`] between two sans-IO cores in memory: the same work
/// requests and the same bytes, without a socket, the driver's tasks and locks, or tokio. For
/// `-- ping core-confirmed` (callgrind): what the protocol engine itself costs per round trip.
fn core_round_trip(iters: usize, size: usize, confirm: bool) -> Duration {
    use rpcrdma::rdma::soft::core::{Core, CoreConfig, Transmit};
    use rpcrdma::rdma::soft::tags::TagTable;
    use rpcrdma::rdma::soft::wire::mpa::Framing;
    use std::sync::Arc;

    let framing = Framing {
        markers: false,
        crc: false,
    };
    let cfg = CoreConfig {
        version: 1,
        tx: framing,
        rx: framing,
        mulpdu: 65000,
        sq_depth: 64,
        rq_depth: 64,
        ord: 4,
        ird: 4,
        confirm,
        gather_min: rpcrdma::rdma::soft::core::DEFAULT_GATHER_MIN,
    };
    let (tc, ts) = (Arc::new(TagTable::default()), Arc::new(TagTable::default()));
    let (mut c, mut s) = (Core::new(cfg, tc.clone()), Core::new(cfg, ts.clone()));
    // Everything a core has to send, handed to the other core as one read would (each side
    // keeps its transmit queue, as the driver does).
    let (mut tx_c, mut tx_s) = (Transmit::new(), Transmit::new());
    let mut wire = Vec::new();
    let mut pass = |from: &mut Core, t: &mut Transmit, to: &mut Core| {
        from.poll_transmit(t);
        wire.clear();
        t.write_all_to(&mut wire);
        from.transmitted(t);
        assert_eq!(to.handle_input(&wire), wire.len());
    };
    let (c_rbuf, c_sbuf) = (
        tc.register(vec![0; size], Access::LOCAL_WRITE).unwrap(),
        tc.register(vec![7; size], Access::NONE).unwrap(),
    );
    let (s_rbuf, s_sbuf) = (
        ts.register(vec![0; size], Access::LOCAL_WRITE).unwrap(),
        ts.register(vec![1; size], Access::NONE).unwrap(),
    );
    s.post_recv(RecvWr::new(0, Sge::whole(&s_rbuf))).unwrap();
    // Takes every completion (all successful); true when a receive was among them.
    let drain_received = |core: &mut Core| {
        let mut received = false;
        while let Some(done) = core.poll_completion() {
            assert!(done.is_success(), "{done:?}");
            received |= done.opcode == WcOpcode::Recv;
        }
        received
    };
    let t = Instant::now();
    for i in 0..iters as u64 {
        c.post_recv(RecvWr::new(i, Sge::whole(&c_rbuf))).unwrap();
        c.post_send(SendWr::send(i, Sge::whole(&c_sbuf))).unwrap();
        pass(&mut c, &mut tx_c, &mut s);
        assert!(
            drain_received(&mut s),
            "the server's receive did not complete"
        );
        s.post_recv(RecvWr::new(0, Sge::whole(&s_rbuf))).unwrap();
        s.post_send(SendWr::send(1, Sge::whole(&s_sbuf))).unwrap();
        pass(&mut s, &mut tx_s, &mut c);
        assert!(
            drain_received(&mut c),
            "the client's receive did not complete"
        );
    }
    t.elapsed() / iters as u32
}

/// A transfer's rate and cost.
#[derive(Clone, Copy)]
struct Transfer {
    /// Bytes per second.
    rate: f64,
    /// Process CPU time (user + system, both ends) per byte moved, in ns.
    cpu_ns_per_byte: f64,
}

impl Transfer {
    fn of(total: usize, watch: Stopwatch) -> Transfer {
        let (wall, cpu) = watch.elapsed();
        Transfer {
            rate: total as f64 / wall.as_secs_f64(),
            cpu_ns_per_byte: cpu.as_secs_f64() * 1e9 / total as f64,
        }
    }
}

/// `total` bytes in writes of `size` over one loopback TCP connection.
async fn tcp_throughput(total: usize, size: usize) -> Transfer {
    let (mut c, mut s) = tcp_pair().await;
    let reader = tokio::spawn(async move {
        let mut buf = vec![0u8; size];
        let mut got = 0;
        while got < total {
            s.read_exact(&mut buf).await.unwrap();
            got += size;
        }
    });
    let data = vec![5u8; size];
    let watch = Stopwatch::start();
    let mut sent = 0;
    while sent < total {
        c.write_all(&data).await.unwrap();
        sent += size;
    }
    reader.await.unwrap();
    Transfer::of(total, watch)
}

/// `total` bytes in writes of `size` over one loopback TCP connection of blocking std
/// sockets, a sender thread and a receiver thread: the raw single-stream baseline, with no
/// runtime in the way.
fn std_tcp_throughput(total: usize, size: usize) -> Transfer {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let mut s = l.accept().unwrap().0;
    let watch = Stopwatch::start();
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; size];
        let mut got = 0;
        while got < total {
            std::io::Read::read_exact(&mut s, &mut buf).unwrap();
            got += size;
        }
    });
    let writer = std::thread::spawn(move || {
        let data = vec![5u8; size];
        let mut sent = 0;
        while sent < total {
            std::io::Write::write_all(&mut c, &data).unwrap();
            sent += size;
        }
    });
    writer.join().unwrap();
    reader.join().unwrap();
    Transfer::of(total, watch)
}

/// Work requests in flight for RDMA Writes and Reads of `size`: about 4 MiB in flight, at
/// least 4, at most 128 (`ib_write_bw`'s and `ib_read_bw`'s default send-queue depth; the
/// provider keeps Reads past the ORD queued until earlier ones finish, as a device does).
fn window(size: usize) -> usize {
    (4 * MIB / size).clamp(4, 128)
}

/// `total` bytes in RDMA Writes (or Reads) of `size`, with MPA CRCs when `crc`.
async fn soft_throughput(total: usize, size: usize, read: bool, crc: bool) -> Transfer {
    let (c, s) = pair(&soft_pair::provider(crc, true)).await;
    let target = s
        .register(
            vec![3u8; size],
            Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
        )
        .unwrap();
    let remote = RemoteAddr::new(target.rkey(), target.addr());
    let t = soft_transfer(&c, remote, total, size, read).await;
    drop(s);
    t
}

/// `total` bytes in RDMA Writes (or Reads) of `size` on `c` to (from) `remote`. As a verbs
/// consumer streams (`ibv_poll_cq` into an array, one `ibv_post_send` of a chain), it takes
/// every completion that is ready and posts their replacements as one list.
async fn soft_transfer(
    c: &SoftConnection,
    remote: RemoteAddr,
    total: usize,
    size: usize,
    read: bool,
) -> Transfer {
    let local = c.register(vec![5u8; size], Access::LOCAL_WRITE).unwrap();
    let window = window(size);
    let ops = total / size;
    let watch = Stopwatch::start();
    let (mut posted, mut done) = (0, 0);
    let mut list = Vec::with_capacity(window);
    while done < ops {
        while posted < ops && posted - done < window {
            list.push(if read {
                SendWr::read(posted as u64, Sge::whole(&local), remote)
            } else {
                SendWr::write(posted as u64, Sge::whole(&local), remote)
            });
            posted += 1;
        }
        if !list.is_empty() {
            c.post_sends(std::mem::take(&mut list)).unwrap();
        }
        let comp = c.poll_completion().await;
        assert!(comp.is_success(), "{comp:?}");
        done += 1;
        while let Some(comp) = c.try_completion() {
            assert!(comp.is_success(), "{comp:?}");
            done += 1;
        }
    }
    Transfer::of(total, watch)
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

/// The targets: a round trip at most this many times raw TCP's, a 1 MiB transfer at least
/// this fraction of the best single TCP stream's rate, with CRC off and with CRC on (one more
/// pass over the data each way: hardware CRC32c runs at several times the copy speed).
const LATENCY_TARGET: f64 = 1.3;
const THROUGHPUT_TARGET: f64 = 0.85;
const THROUGHPUT_TARGET_CRC: f64 = 0.70;

/// Regression floors for the 1 MiB transfers, judged with `-- --floor` (CI runs
/// `-- throughput --floor`): well below the targets, which a shared or slower machine may miss
/// by a few points, but above what a real regression costs. A completion poller that read 1 MiB
/// RDMA Reads on `block_on`'s thread measured 72 % (CRC off) and 44-48 % (CRC on) where the
/// receive task measured 86-95 % and 73-78 % (2-vCPU VM, alternating runs); benches are only
/// built by the tests, so that passed CI.
const THROUGHPUT_FLOOR: f64 = 0.75;
const THROUGHPUT_FLOOR_CRC: f64 = 0.60;

/// How many measurements a 1 MiB transfer must fall below its floor in, one after the other,
/// before `--floor` fails the run (the later ones only run for the variants below it).
const FLOOR_MEASUREMENTS: usize = 3;

/// A 1 MiB transfer whose median ratio fell below its regression floor in one measurement.
struct BelowFloor {
    /// The variant's name in [`BULK`].
    variant: &'static str,
    /// The median ratio to the best TCP stream, one per measurement that fell below.
    ratios: Vec<f64>,
    /// The floor it fell below.
    floor: f64,
}

/// The variants below their floor, for one line of output.
fn joined(below_floor: &[BelowFloor]) -> String {
    let what: Vec<String> = below_floor
        .iter()
        .map(|b| {
            let ratios: Vec<String> = b
                .ratios
                .iter()
                .map(|r| format!("{:.0}%", 100.0 * r))
                .collect();
            format!(
                "1 MiB {}: {} (floor {:.0}%)",
                b.variant,
                ratios.join(", then "),
                100.0 * b.floor
            )
        })
        .collect();
    what.join("; ")
}

/// Raw tokio TCP's 64-byte round trip on the fast-loopback machine of issue 12 (2-vCPU VM),
/// where the provider measured 1.56x. The round-trip target must hold there too: the
/// provider's time above raw TCP, measured here, is judged as if added to this loopback
/// ([`latency`]). That assumes the provider's own cost does not shrink on the faster machine,
/// so meeting it here is enough, not necessary.
const FAST_LOOPBACK_US: f64 = 4.1;

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
/// taken, and the medians are reported with their ranges. Fewer when quick.
fn rounds() -> usize {
    if bench_report::quick() {
        5
    } else {
        15
    }
}

/// The report group of these rows.
const GROUP: &str = "Soft iWARP provider vs raw TCP";

/// Records `v` against `base` (both per round): medians, the median per-round ratio
/// value / baseline with its range, and the target.
fn record(
    rec: &mut Recorder,
    name: &str,
    (v, unit): (&[f64], &str),
    (base_name, base): (&str, &[f64]),
    target: Option<Target>,
) {
    let (r, rlo, rhi) = stats(&ratios(v, base));
    let f = rec
        .figure(GROUP, name, stats(v).0, unit)
        .baseline(base_name, stats(base).0)
        .ratio(r, "value / baseline")
        .ratio_range(rlo, rhi);
    if let Some(t) = target {
        f.target(t);
    }
}

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
async fn run_client<F>(client: Client, f: F) -> RoundTrips
where
    F: std::future::Future<Output = RoundTrips> + Send + 'static,
{
    match client {
        Client::Task => tokio::spawn(f).await.unwrap(),
        Client::BlockOn => f.await,
    }
}

/// 64-byte round trips: raw TCP, and soft with confirmed and with local completions. Returns
/// the targets missed; with `judged` false the rows are shown and recorded without targets.
async fn latency(rec: &mut Recorder, runtime: &str, client: Client, judged: bool) -> Vec<String> {
    let (rounds, iters) = (rounds(), if bench_report::quick() { 500 } else { 2000 });
    // Warm up both paths once.
    run_client(client, tcp_round_trip(1000, 64)).await;
    run_client(client, soft_round_trip(1000, 64, true)).await;
    let mut us: [Vec<f64>; 3] = Default::default();
    let mut same_cpu: [Vec<f64>; 3] = Default::default();
    for round in 0..rounds {
        for v in rotated(round, 3) {
            let run = match v {
                0 => run_client(client, tcp_round_trip(iters, 64)).await,
                1 => run_client(client, soft_round_trip(iters, 64, true)).await,
                _ => run_client(client, soft_round_trip(iters, 64, false)).await,
            };
            us[v].push(run.mean.as_secs_f64() * 1e6);
            same_cpu[v].push(run.same_cpu);
        }
    }
    let [tcp, soft, local] = &us;
    let place = match client {
        Client::Task => "client in a task",
        Client::BlockOn => "client in block_on",
    };
    println!(
        "64-byte round trip, {runtime}, {place}, {rounds} rounds of {iters}: median [min .. max] of the rounds"
    );
    let (m, lo, hi) = stats(tcp);
    println!("  raw TCP ping-pong                       {m:7.2} us [{lo:.2} .. {hi:.2}]");
    let mut missed = Vec::new();
    for (name, v, row_judged) in [
        ("soft Send/recv, confirmed completions", soft, judged),
        ("soft Send/recv, local completions    ", local, false),
    ] {
        let (m, lo, hi) = stats(v);
        let (r, rlo, rhi) = stats(&ratios(v, tcp));
        let target = if row_judged {
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
        record(
            rec,
            &format!(
                "64 B Send/Recv round trip, {}, {runtime}, {place}",
                name.trim_start_matches("soft Send/recv, ").trim()
            ),
            (v, "us"),
            ("raw TCP 64 B ping-pong", tcp),
            row_judged.then(|| Target::at_most(LATENCY_TARGET)),
        );
    }
    let placements = placements(&us, &same_cpu);
    println!("  {placements}");
    rec.note(
        GROUP,
        format!("64 B round trips, {runtime}, {place}: {placements}."),
    );
    // The provider's own time per round trip (above raw TCP, same round), carried over to the
    // fast-loopback machine: (4.1 us + overhead) / 4.1 us.
    let overhead: Vec<f64> = soft.iter().zip(tcp).map(|(s, t)| s - t).collect();
    let (o, olo, ohi) = stats(&overhead);
    let projected: Vec<f64> = overhead
        .iter()
        .map(|o| (FAST_LOOPBACK_US + o) / FAST_LOOPBACK_US)
        .collect();
    let (p, plo, phi) = stats(&projected);
    let met = p <= LATENCY_TARGET;
    if judged && !met {
        missed.push(format!(
            "{runtime}, {place}, over a {FAST_LOOPBACK_US} us loopback: {p:.2}x"
        ));
    }
    let budget = (LATENCY_TARGET - 1.0) * FAST_LOOPBACK_US;
    let target = if judged {
        format!(
            "(target <= {LATENCY_TARGET}x: {budget:.2} us) {}",
            verdict(met)
        )
    } else {
        "(for reference)".into()
    };
    println!(
        "  confirmed, time above raw TCP          {o:7.2} us [{olo:.2} .. {ohi:.2}]   over a {FAST_LOOPBACK_US} us loopback {p:.2}x [{plo:.2} .. {phi:.2}] {target}"
    );
    let figure = rec.figure(
        GROUP,
        &format!(
            "64 B Send/Recv round trip, confirmed completions, time above raw TCP carried over to a {FAST_LOOPBACK_US} us loopback, {runtime}, {place}"
        ),
        o,
        "us",
    )
    .baseline("raw TCP 64 B ping-pong on the fast-loopback machine", FAST_LOOPBACK_US)
    .ratio(p, "(baseline + value) / baseline")
    .ratio_range(plo, phi);
    if judged {
        figure.target(Target::at_most(LATENCY_TARGET));
    }
    missed
}

/// Where each round of [`latency`]'s variants ran, in words (`us`, in the order raw TCP, confirmed,
/// local; `same_cpu`, per round the share of round trips with the client and the server on one
/// CPU): how many rounds ran on one CPU throughout (at least 95 % of their round trips), with
/// the provider's median in those rounds against raw TCP's in theirs, how many ran split for
/// most of the round, and the share of all round trips on one CPU. Unpinned on two vCPUs each
/// wake-up goes where the one before put the thread: the pair stays shared (the client's
/// thread and the worker answering it take turns on one vCPU) or split (every message wakes
/// the other vCPU, several times slower) until another thread's wake-up moves one of them.
/// It tells a row that missed because more of its rounds ran split from one whose round
/// trips cost more where both placed alike. Not judged: the judged rows compare every round.
fn placements(us: &[Vec<f64>; 3], same_cpu: &[Vec<f64>; 3]) -> String {
    let rounds = |v: usize, keep: fn(f64) -> bool| -> Vec<f64> {
        us[v]
            .iter()
            .zip(&same_cpu[v])
            .filter(|(_, s)| keep(**s))
            .map(|(u, _)| *u)
            .collect()
    };
    let shared = |v: usize| rounds(v, |s| s >= 0.95);
    let split = |v: usize| rounds(v, |s| s < 0.5).len();
    let against_raw = |v: usize| match (shared(v).as_slice(), shared(0).as_slice()) {
        ([], _) | (_, []) => "-".to_string(),
        (a, b) => format!("{:.2}x", stats(a).0 / stats(b).0),
    };
    let n = us[0].len();
    // Of all round trips, not per round: moves less by chance than the counts of rounds.
    let share = |v: usize| 100.0 * same_cpu[v].iter().sum::<f64>() / same_cpu[v].len() as f64;
    format!(
        "rounds on one CPU throughout: raw TCP {}/{n}, confirmed {}/{n} (median {} raw's), local {}/{n} (median {} raw's); split most of the round: raw TCP {}, confirmed {}, local {}; round trips on one CPU: raw TCP {:.0} %, confirmed {:.0} %, local {:.0} %",
        shared(0).len(),
        shared(1).len(),
        against_raw(1),
        shared(2).len(),
        against_raw(2),
        split(0),
        split(1),
        split(2),
        share(0),
        share(1),
        share(2),
    )
}

/// The bulk variants of [`throughput`], in the order of their per-round slots.
const BULK: [&str; 6] = [
    "raw TCP (std, blocking)",
    "tokio TCP",
    "RDMA Write, CRC off",
    "RDMA Read, CRC off",
    "RDMA Write, CRC on",
    "RDMA Read, CRC on",
];

/// Runs bulk variant `v` (an index into [`BULK`]): `total` bytes in messages of `size`.
async fn bulk(v: usize, total: usize, size: usize) -> Transfer {
    match v {
        0 => std_tcp_throughput(total, size),
        1 => tcp_throughput(total, size).await,
        2 => soft_throughput(total, size, false, false).await,
        3 => soft_throughput(total, size, true, false).await,
        4 => soft_throughput(total, size, false, true).await,
        _ => soft_throughput(total, size, true, true).await,
    }
}

/// 1 MiB RDMA Write and RDMA Read, CRC off and on, against the best single TCP stream of
/// 1 MiB writes measured in the same round (raw blocking sockets or tokio). Returns the
/// targets missed; the variants below their regression floor go to `below_floor`.
async fn throughput(rec: &mut Recorder, below_floor: &mut Vec<BelowFloor>) -> Vec<String> {
    let rounds = rounds();
    // Long enough for TCP to leave slow start and the socket buffers to grow: a single
    // loopback stream of blocking sockets moved 4.3 GB/s over 128 MiB and 5.1-5.5 over 2 GiB
    // on a 2-vCPU VM.
    let total = if bench_report::quick() { 256 } else { 1024 } * MIB;
    let mut mbs: [Vec<f64>; 6] = Default::default();
    let mut cpu: [Vec<f64>; 6] = Default::default();
    for round in 0..rounds {
        for v in rotated(round, BULK.len()) {
            let t = bulk(v, total, MIB).await;
            mbs[v].push(t.rate / 1e6);
            cpu[v].push(t.cpu_ns_per_byte);
        }
    }
    // The baseline of each round: the faster of the two TCP streams.
    let best: Vec<f64> = mbs[0].iter().zip(&mbs[1]).map(|(a, b)| a.max(*b)).collect();
    println!(
        "1 MiB transfers, two-worker runtime, markers off, {rounds} rounds of {} MiB: median [min .. max] of the rounds",
        total / MIB
    );
    for v in 0..2 {
        let (m, lo, hi) = stats(&mbs[v]);
        println!(
            "  {:<24} {m:6.0} MB/s [{lo:.0} .. {hi:.0}]   CPU {:.3} ns/B",
            BULK[v],
            stats(&cpu[v]).0
        );
    }
    let (m, lo, hi) = stats(&best);
    println!(
        "  {:<24} {m:6.0} MB/s [{lo:.0} .. {hi:.0}]",
        "best TCP of the round"
    );
    record(
        rec,
        "1 MiB tokio TCP throughput",
        (&mbs[1], "MB/s"),
        ("raw TCP (std, blocking), 1 MiB writes", &mbs[0]),
        None,
    );
    let mut missed = Vec::new();
    for v in 2..BULK.len() {
        let name = BULK[v];
        let (target, floor) = if name.ends_with("CRC on") {
            (THROUGHPUT_TARGET_CRC, THROUGHPUT_FLOOR_CRC)
        } else {
            (THROUGHPUT_TARGET, THROUGHPUT_FLOOR)
        };
        let (m, lo, hi) = stats(&mbs[v]);
        let (r, rlo, rhi) = stats(&ratios(&mbs[v], &best));
        let met = r >= target;
        if !met {
            missed.push(format!("1 MiB {name}: {:.0}%", 100.0 * r));
        }
        if r < floor {
            below_floor.push(BelowFloor {
                variant: name,
                ratios: vec![r],
                floor,
            });
        }
        println!(
            "  {name:<24} {m:6.0} MB/s [{lo:.0} .. {hi:.0}]   {:.0}% of best TCP [{:.0}% .. {:.0}%] (target >= {:.0}%) {}{}   CPU {:.3} ns/B ({:.2}x raw TCP's)",
            100.0 * r,
            100.0 * rlo,
            100.0 * rhi,
            100.0 * target,
            verdict(met),
            if r < floor { ", BELOW the regression floor" } else { "" },
            stats(&cpu[v]).0,
            stats(&ratios(&cpu[v], &cpu[0])).0,
        );
        record(
            rec,
            &format!("1 MiB {name} throughput"),
            (&mbs[v], "MB/s"),
            (
                "best single TCP stream in this process (raw or tokio), 1 MiB writes",
                &best,
            ),
            Some(Target::at_least(target)),
        );
        record(
            rec,
            &format!("1 MiB {name}, CPU time per byte (both ends)"),
            (&cpu[v], "ns/B"),
            ("raw TCP (std, blocking), 1 MiB writes", &cpu[0]),
            None,
        );
    }
    rec.note(
        GROUP,
        format!(
            "Both ends in one process on loopback (markers off), rounds alternating \
             baselines and provider: {rounds} rounds for the judged rows, each ratio the median \
             of the per-round ratios [range]. The 1 MiB transfers are judged against the best \
             single TCP stream of the same round in the same structure: here the faster of raw \
             blocking sockets (std::net, a sender and a receiver thread) and tokio in this \
             process; between two pinned processes, see below; each one stream of 1 MiB writes; with \
             CRC off at least {:.0} %, with CRC on (MPA CRC32c both ways) at least {:.0} %. \
             Round trips are 64 B Send/Recv ping-pongs \
             against a 64 B TCP ping-pong, on a two-worker runtime (client in a task, or in \
             `block_on`, which pays a cross-thread wake-up per message) and on a \
             current-thread runtime; confirmed completions are judged, local completions \
             shown. In `block_on` on two vCPUs the scheduler decides each round: the client's \
             thread and the worker answering it share a vCPU (about 18-25 us per round trip) \
             or not (45-100 us, every message waking a halted vCPU), for raw TCP and the \
             provider alike, and what ran just before decides it, so every run ends with the \
             same 50 ms of quiet and each round starts alike whichever variant came before; \
             the same rows with the process pinned to one CPU, shown for reference, compare \
             the two paths' own cost. CPU per byte is the process's user + system time (getrusage) over the \
             measured loop divided by the bytes moved: sender, receiver and the kernel's TCP \
             work on their behalf. Where that CPU time goes (CRC, copies, wake-ups, TCP and \
             syscalls): docs/bench/soft_profile.md, made by scripts/soft-profile.",
            100.0 * THROUGHPUT_TARGET,
            100.0 * THROUGHPUT_TARGET_CRC,
        ),
    );
    missed
}

/// The passive end of a two-process transfer, in a child process of this bench (`serve tcp`,
/// `serve crc-off`, `serve crc-on`): prints where to connect (and for RDMA the target's steering
/// tag and address), takes one connection, and serves it until its standard input closes.
async fn serve(args: &[String]) {
    use std::io::Write;
    let stdin_closed = || {
        tokio::task::spawn_blocking(|| {
            let mut sink = Vec::new();
            let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
        })
    };
    if args.first().is_some_and(|a| a == "tcp") {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        println!("{}", l.local_addr().unwrap());
        std::io::stdout().flush().unwrap();
        let mut s = l.accept().unwrap().0;
        let mut buf = vec![0u8; MIB];
        while std::io::Read::read(&mut s, &mut buf).unwrap() > 0 {}
        return;
    }
    let crc = args.first().is_some_and(|a| a == "crc-on");
    let p = soft_pair::provider(crc, true);
    let listener = p.listen("127.0.0.1:0".parse().unwrap()).await.unwrap();
    println!("{}", listener.local_addr().unwrap());
    std::io::stdout().flush().unwrap();
    let s = listener.accept(ConnectParams::new()).await.unwrap();
    let target = s
        .register(
            vec![3u8; MIB],
            Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
        )
        .unwrap();
    println!("{} {}", target.rkey(), target.addr());
    std::io::stdout().flush().unwrap();
    stdin_closed().await.unwrap();
    drop(s);
}

/// Bulk variant `v` of [`BULK`] (not tokio TCP) with its passive end in a child process
/// (pinned to `child_cpu` when given): `total` bytes in 1 MiB messages.
async fn bulk_two_processes(v: usize, total: usize, child_cpu: Option<usize>) -> f64 {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let mode = match v {
        0 => "tcp",
        2 | 3 => "crc-off",
        _ => "crc-on",
    };
    let exe = std::env::current_exe().unwrap();
    let mut command = match child_cpu {
        Some(cpu) => {
            let mut c = Command::new("taskset");
            c.args(["-c", &cpu.to_string()]).arg(exe);
            c
        }
        None => Command::new(exe),
    };
    let mut child = command
        .args(["serve", mode])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let addr: std::net::SocketAddr = lines.next().unwrap().unwrap().parse().unwrap();
    let rate = if v == 0 {
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        let data = vec![5u8; MIB];
        let t = Instant::now();
        for _ in 0..total / MIB {
            std::io::Write::write_all(&mut c, &data).unwrap();
        }
        drop(c);
        // The child has read everything once it exits.
        drop(child.stdin.take());
        child.wait().unwrap();
        total as f64 / t.elapsed().as_secs_f64()
    } else {
        let c = soft_pair::provider(mode == "crc-on", true)
            .connect(addr, ConnectParams::new())
            .await
            .unwrap();
        let line = lines.next().unwrap().unwrap();
        let (rkey, to) = line.split_once(' ').unwrap();
        let remote = RemoteAddr::new(rkey.parse().unwrap(), to.parse().unwrap());
        let t = soft_transfer(&c, remote, total, MIB, v % 2 == 1).await;
        drop(c);
        drop(child.stdin.take());
        child.wait().unwrap();
        t.rate
    };
    rate / 1e6
}

/// Pins every thread of this process to `cpus` (a `taskset` list); false without `taskset`.
fn pin_this_process(cpus: &str) -> bool {
    std::process::Command::new("taskset")
        .args(["-a", "-p", "-c", cpus, &std::process::id().to_string()])
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// This process's CPU list as `taskset -c -p` reports it ("0-1"), to restore after pinning.
fn this_process_cpus() -> Option<String> {
    let out = std::process::Command::new("taskset")
        .args(["-c", "-p", &std::process::id().to_string()])
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    // "pid 123's current affinity list: 0-1"
    Some(text.rsplit(':').next()?.trim().to_string()).filter(|l| !l.is_empty())
}

/// The 1 MiB transfers between two processes pinned to two CPUs, as iperf3 runs: this process
/// (the active end: raw TCP's sender, the RDMA requester) on CPU 0, the passive end (raw TCP's
/// receiver, the RDMA target of Writes and Reads) in a child on CPU 1; rounds alternating, each
/// with raw TCP and iperf3 between two processes placed alike. The RDMA transfers are judged
/// against the faster of the two (the targets of [`throughput`]). Returns the targets missed.
/// Unpinned, and without targets, on one CPU or without `taskset`.
async fn two_processes(rec: &mut Recorder) -> Vec<String> {
    // As many rounds as the one-process rows: with 7, two back-to-back runs each missed a
    // different row (per-round ratios spread over 54-136 %, 2-vCPU VM).
    let rounds = rounds();
    let total = if bench_report::quick() { 256 } else { 1024 } * MIB;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let before = this_process_cpus();
    let pinned = cpus >= 2 && before.is_some() && pin_this_process("0");
    let child_cpu = pinned.then_some(1);
    let variants = [0, 2, 3, 4, 5];
    let mut mbs = vec![Vec::new(); variants.len()];
    let mut iperf3: Result<Vec<f64>, String> = Ok(Vec::new());
    for round in 0..rounds {
        for k in rotated(round, variants.len()) {
            mbs[k].push(bulk_two_processes(variants[k], total, child_cpu).await);
        }
        if let Ok(rates) = &mut iperf3 {
            match bench_report::iperf3::stream_rate(total, MIB, pinned.then_some((0, 1))) {
                Ok(rate) => rates.push(rate / 1e6),
                Err(e) => iperf3 = Err(e.to_string()),
            }
        }
    }
    if let (true, Some(cpus)) = (pinned, &before) {
        pin_this_process(cpus);
    }
    let placement = if pinned {
        "two processes pinned to CPUs 0 and 1"
    } else {
        "two processes, unpinned"
    };
    // The baseline of each round: the faster of raw TCP and iperf3, placed alike.
    let mut best = mbs[0].clone();
    let best_name = match &iperf3 {
        Ok(rates) => {
            best.iter_mut().zip(rates).for_each(|(b, i)| *b = b.max(*i));
            format!("best single TCP stream, {placement} (raw or iperf3), 1 MiB writes")
        }
        Err(why) => {
            // A judge that is missing fails under CI=true rather than passing on a weaker one.
            assert!(
                std::env::var("CI").map_or(true, |v| v != "true"),
                "no iperf3 baseline under CI=true: {why}"
            );
            println!("  iperf3 baseline missing ({why}): judged against raw TCP only");
            rec.note(
                GROUP,
                format!("iperf3 baseline missing in this run ({why}): the two-process rows are judged against raw TCP only."),
            );
            format!("raw TCP (std, blocking), {placement}, 1 MiB writes")
        }
    };
    println!(
        "1 MiB transfers, {placement}, {rounds} rounds of {} MiB: median [min .. max] of the rounds",
        total / MIB
    );
    let (m, lo, hi) = stats(&mbs[0]);
    println!("  {:<24} {m:6.0} MB/s [{lo:.0} .. {hi:.0}]", BULK[0]);
    if let Ok(rates) = &iperf3 {
        let (m, lo, hi) = stats(rates);
        println!("  {:<24} {m:6.0} MB/s [{lo:.0} .. {hi:.0}]", "iperf3");
        record(
            rec,
            &format!("1 MiB iperf3 throughput, {placement}"),
            (rates, "MB/s"),
            (
                &format!("raw TCP (std, blocking), {placement}, 1 MiB writes"),
                &mbs[0],
            ),
            None,
        );
    }
    let mut missed = Vec::new();
    for k in 1..variants.len() {
        let name = BULK[variants[k]];
        let target = if name.ends_with("CRC on") {
            THROUGHPUT_TARGET_CRC
        } else {
            THROUGHPUT_TARGET
        };
        let (m, lo, hi) = stats(&mbs[k]);
        let (r, rlo, rhi) = stats(&ratios(&mbs[k], &best));
        let met = r >= target;
        if pinned && !met {
            missed.push(format!("1 MiB {name}, {placement}: {:.0}%", 100.0 * r));
        }
        println!(
            "  {name:<24} {m:6.0} MB/s [{lo:.0} .. {hi:.0}]   {:.0}% of best TCP [{:.0}% .. {:.0}%] (target >= {:.0}%) {}",
            100.0 * r,
            100.0 * rlo,
            100.0 * rhi,
            100.0 * target,
            if pinned { verdict(met) } else { "for reference" },
        );
        record(
            rec,
            &format!("1 MiB {name} throughput, {placement}"),
            (&mbs[k], "MB/s"),
            (&best_name, &best),
            pinned.then(|| Target::at_least(target)),
        );
    }
    rec.note(
        GROUP,
        format!(
            "Two processes ({placement}): the same 1 MiB transfers with the passive end (raw \
             TCP's receiver, the RDMA target of Writes and Reads) in a child process, \
             {rounds} rounds of {} MiB, each round also measuring raw TCP between the same two \
             processes and iperf3 (`iperf3 -l 1M`, client and server placed alike); the RDMA \
             rows are judged against the faster of those two, with the targets above.",
            total / MIB
        ),
    );
    missed
}

/// `-- ping raw|confirmed|local [N]`: N (default 10,000) 64-byte round trips of one variant of
/// [`latency`], in a task on the two-worker runtime (with `PING_CURRENT=1` on a current-thread
/// runtime, with `PING_BLOCK_ON=1` in `block_on`'s own future; or `core-confirmed`, `core-local`: the
/// provider's sans-IO core alone, [`core_round_trip`]), for a profiler: `scripts/soft-profile
/// --round-trip` counts the instructions per round trip under callgrind from two values of N
/// (which cancels the setup), a measure of the provider's own cost that, unlike the time,
/// does not move with the machine's load or its loopback.
async fn ping(args: &[String]) -> ExitCode {
    let iters = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let client = if std::env::var("PING_BLOCK_ON").is_ok_and(|v| v == "1") {
        Client::BlockOn
    } else {
        Client::Task
    };
    // `PING_SIZE=BYTES`: messages of that size instead of 64 bytes.
    let size = std::env::var("PING_SIZE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(64);
    let sockets = |run: RoundTrips| (run.mean, Some(run.same_cpu));
    let (dt, same_cpu) = match args.first().map(String::as_str) {
        Some("raw") => sockets(run_client(client, tcp_round_trip(iters, size)).await),
        Some("confirmed") => sockets(run_client(client, soft_round_trip(iters, size, true)).await),
        Some("local") => sockets(run_client(client, soft_round_trip(iters, size, false)).await),
        Some("core-confirmed") => (core_round_trip(iters, size, true), None),
        Some("core-local") => (core_round_trip(iters, size, false), None),
        _ => {
            eprintln!(
                "usage: rdma_soft ping raw|confirmed|local|core-confirmed|core-local [ROUND_TRIPS]"
            );
            return ExitCode::FAILURE;
        }
    };
    let placement = same_cpu.map_or(String::new(), |s| {
        format!(
            ", {:.0} % of them with client and server on one CPU",
            100.0 * s
        )
    });
    println!(
        "{iters} round trips, {:.2} us each{placement}",
        dt.as_secs_f64() * 1e6
    );
    ExitCode::SUCCESS
}

/// Runs one bulk variant (named by words of one of [`BULK`]'s names, e.g. `profile write
/// crc-on`; no words: the first, raw TCP) over and over for about `PROFILE_SECS` seconds
/// (default 10) in messages of `PROFILE_SIZE` bytes (default 1 MiB), for `perf record`: no
/// rounds, no records.
async fn profile(args: &[String]) -> ExitCode {
    let words: Vec<String> = args.iter().map(|a| a.replace('-', " ")).collect();
    // Words that name no variant are refused: profiling another one in their place misleads.
    let found = (0..BULK.len()).find(|&v| {
        let name = BULK[v].to_lowercase();
        words.iter().all(|w| name.contains(w.as_str()))
    });
    let Some(v) = found else {
        eprintln!(
            "profile: no variant named by all of {args:?}; the variants: {}",
            BULK.join("; ")
        );
        return ExitCode::FAILURE;
    };
    let size: usize = std::env::var("PROFILE_SIZE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(MIB);
    let secs: f64 = std::env::var("PROFILE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10.0);
    println!(
        "profiling {} in messages of {size} bytes for {secs} s",
        BULK[v]
    );
    let t = Instant::now();
    let (mut rates, mut cpu) = (Vec::new(), Vec::new());
    while t.elapsed().as_secs_f64() < secs {
        let run = if std::env::var("PROFILE_TASK").is_ok() {
            tokio::spawn(bulk(v, 256 * MIB, size)).await.unwrap()
        } else {
            bulk(v, 256 * MIB, size).await
        };
        rates.push(run.rate / 1e6);
        cpu.push(run.cpu_ns_per_byte);
    }
    let (m, lo, hi) = stats(&rates);
    println!(
        "  {m:.0} MB/s median [{lo:.0} .. {hi:.0}] over {} runs of 256 MiB, CPU {:.3} ns/B",
        rates.len(),
        stats(&cpu).0
    );
    ExitCode::SUCCESS
}

/// Payload sizes of the sweeps.
const SWEEP_SIZES: [usize; 5] = [4 << 10, 16 << 10, 64 << 10, 256 << 10, MIB];
const LATENCY_SIZES: [usize; 5] = [64, 1 << 10, 4 << 10, 16 << 10, 64 << 10];

/// Issue 54's targets for small and medium messages: 4 KiB and 16 KiB RDMA Writes and Reads at
/// least this fraction of raw TCP's throughput at the same message size, at most this many
/// times its CPU time per byte, and Send/Recv round trips of 4, 16 and 64 KiB at most this many
/// times raw TCP's ping-pong of the same size.
const SMALL_THROUGHPUT_TARGET: f64 = 0.9;
const SMALL_CPU_TARGET: f64 = 1.2;
const SIZED_LATENCY_TARGET: f64 = 1.2;

/// The sizes of the sweeps whose rows issue 54 judges.
const JUDGED_SWEEP_SIZES: [usize; 2] = [4 << 10, 16 << 10];
const JUDGED_LATENCY_SIZES: [usize; 3] = [4 << 10, 16 << 10, 64 << 10];

/// Records `v` against `base` as [`record`] does, with the target `bound` (`at_least`: the
/// ratio must not be below it, else not above), prints the verdict, and adds `name` to
/// `missed` when the median of the per-round ratios misses it.
fn record_judged(
    rec: &mut Recorder,
    missed: &mut Vec<String>,
    name: &str,
    (v, unit): (&[f64], &str),
    (base_name, base): (&str, &[f64]),
    (bound, at_least): (f64, bool),
) {
    let target = if at_least {
        Target::at_least(bound)
    } else {
        Target::at_most(bound)
    };
    record(rec, name, (v, unit), (base_name, base), Some(target));
    let r = stats(&ratios(v, base)).0;
    let met = if at_least { r >= bound } else { r <= bound };
    println!(
        "  {name}: {r:.3}x (target {} {bound}x) {}",
        if at_least { ">=" } else { "<=" },
        verdict(met)
    );
    if !met {
        missed.push(format!("{name} {r:.3}x"));
    }
}

/// Throughput and CPU per byte against message size, and round trip against message size:
/// plots, and the rows of issue 54's targets (4 and 16 KiB transfers, 4, 16 and 64 KiB round
/// trips). Returns the targets missed.
async fn sweep(rec: &mut Recorder) -> Vec<String> {
    let mut missed = Vec::new();
    let quick = bench_report::quick();
    let rounds = if quick { 3 } else { 7 };
    let total = if quick { 16 } else { 64 } * MIB;
    let names = ["raw TCP", "RDMA Write", "RDMA Read"];
    // [variant][size] -> per-round values
    let mut rate = vec![vec![Vec::new(); SWEEP_SIZES.len()]; 3];
    let mut cpu = rate.clone();
    for round in 0..rounds {
        for (k, &size) in SWEEP_SIZES.iter().enumerate() {
            for v in rotated(round, 3) {
                let t = match v {
                    0 => tcp_throughput(total, size).await,
                    1 => soft_throughput(total, size, false, false).await,
                    _ => soft_throughput(total, size, true, false).await,
                };
                rate[v][k].push(t.rate / 1e6);
                cpu[v][k].push(t.cpu_ns_per_byte);
            }
        }
    }
    println!(
        "throughput and CPU per byte vs message size, {rounds} rounds of {} MiB, medians:",
        total / MIB
    );
    let title = "Soft provider vs raw TCP: throughput vs message size (loopback)";
    let cpu_title = "Soft provider vs raw TCP: CPU time per byte vs message size";
    for (v, name) in names.iter().enumerate() {
        let line = rec.series("soft_throughput", title, name);
        line.axes("message size (bytes)", "MB/s").log_x();
        for (k, &size) in SWEEP_SIZES.iter().enumerate() {
            line.point(size as f64, stats(&rate[v][k]).0);
        }
        let line = rec.series("soft_cpu_per_byte", cpu_title, name);
        line.axes("message size (bytes)", "CPU ns per byte (both ends)")
            .log_x();
        for (k, &size) in SWEEP_SIZES.iter().enumerate() {
            line.point(size as f64, stats(&cpu[v][k]).0);
        }
        let row: Vec<String> = SWEEP_SIZES
            .iter()
            .enumerate()
            .map(|(k, &size)| {
                format!(
                    "{} KiB {:.0} MB/s {:.2} ns/B",
                    size >> 10,
                    stats(&rate[v][k]).0,
                    stats(&cpu[v][k]).0
                )
            })
            .collect();
        println!("  {name:<10} {}", row.join(", "));
    }
    for (v, name) in names.iter().enumerate().skip(1) {
        for (k, &size) in SWEEP_SIZES.iter().enumerate() {
            if !JUDGED_SWEEP_SIZES.contains(&size) {
                continue;
            }
            let kib = size >> 10;
            let base = format!("raw TCP (tokio), {kib} KiB writes");
            record_judged(
                rec,
                &mut missed,
                &format!("{kib} KiB {name} throughput"),
                (&rate[v][k], "MB/s"),
                (&base, &rate[0][k]),
                (SMALL_THROUGHPUT_TARGET, true),
            );
            record_judged(
                rec,
                &mut missed,
                &format!("{kib} KiB {name}, CPU time per byte (both ends)"),
                (&cpu[v][k], "ns/B"),
                (&base, &cpu[0][k]),
                (SMALL_CPU_TARGET, false),
            );
        }
    }

    let iters = if quick { 300 } else { 1000 };
    let mut us = vec![vec![Vec::new(); LATENCY_SIZES.len()]; 2];
    for round in 0..rounds {
        for (k, &size) in LATENCY_SIZES.iter().enumerate() {
            for v in rotated(round, 2) {
                let run = match v {
                    0 => tokio::spawn(tcp_round_trip(iters, size)).await.unwrap(),
                    _ => tokio::spawn(soft_round_trip(iters, size, true))
                        .await
                        .unwrap(),
                };
                us[v][k].push(run.mean.as_secs_f64() * 1e6);
            }
        }
    }
    let title = "Soft provider vs raw TCP: round trip vs message size (client in a task)";
    for (v, name) in ["raw TCP ping-pong", "soft Send/Recv, confirmed completions"]
        .iter()
        .enumerate()
    {
        let line = rec.series("soft_latency", title, name);
        line.axes("message size (bytes)", "round trip (us)").log_x();
        let row: Vec<String> = LATENCY_SIZES
            .iter()
            .enumerate()
            .map(|(k, &size)| {
                line.point(size as f64, stats(&us[v][k]).0);
                format!("{size} B {:.1} us", stats(&us[v][k]).0)
            })
            .collect();
        println!("  {name:<38} {}", row.join(", "));
    }
    for (k, &size) in LATENCY_SIZES.iter().enumerate() {
        if !JUDGED_LATENCY_SIZES.contains(&size) {
            continue;
        }
        let kib = size >> 10;
        let row = format!(
            "{kib} KiB Send/Recv round trip, confirmed completions, two-worker runtime, client in a task"
        );
        record_judged(
            rec,
            &mut missed,
            &row,
            (&us[1][k], "us"),
            (&format!("raw TCP {kib} KiB ping-pong"), &us[0][k]),
            (SIZED_LATENCY_TARGET, false),
        );
    }
    rec.note(
        GROUP,
        format!(
            "The plots and the 4 and 16 KiB rows: {rounds} rounds of {} MiB per size for \
             throughput (RDMA with up to 4 MiB in flight, 4 to 128 work requests, each refill \
             posted as one list after taking every ready completion; TCP one stream of writes \
             of that size, tokio) and {iters} round trips per size for latency, \
             medians of the rounds; each ratio is the median of the per-round ratios.",
            total / MIB
        ),
    );
    missed
}

fn main() -> ExitCode {
    // `cargo bench -p rpcrdma --bench rdma_soft -- latency` (or `throughput`, or one placement:
    // `task`, `block_on`, `current`) runs one part.
    let check = std::env::args().any(|a| a == "--check")
        || std::env::var("BENCH_CHECK").is_ok_and(|v| v == "1");
    let floor = std::env::args().any(|a| a == "--floor");
    let mut below_floor = Vec::new();
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
    if filter.first().is_some_and(|f| f == "serve") {
        two_workers.block_on(serve(&filter[1..]));
        return ExitCode::SUCCESS;
    }
    if filter.first().is_some_and(|f| f == "ping") {
        // `PING_CURRENT=1`: on a current-thread runtime, the `current` placement of the round
        // trips (everything on one thread, so the whole cost is on the critical path).
        if std::env::var("PING_CURRENT").is_ok_and(|v| v == "1") {
            let one_thread = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            return one_thread.block_on(ping(&filter[1..]));
        }
        return two_workers.block_on(ping(&filter[1..]));
    }
    if filter.first().is_some_and(|f| f == "profile") {
        return two_workers.block_on(profile(&filter[1..]));
    }
    let mut rec = Recorder::new("rdma_soft");
    if wants("latency/task") {
        missed.extend(two_workers.block_on(latency(
            &mut rec,
            "two-worker runtime",
            Client::Task,
            true,
        )));
    }
    if wants("latency/block_on") {
        // `block_on`'s thread is not a worker: both TCP and soft pay a cross-thread wake-up
        // per message there, which on a VM costs more than either protocol's own work.
        missed.extend(two_workers.block_on(latency(
            &mut rec,
            "two-worker runtime",
            Client::BlockOn,
            true,
        )));
    }
    if wants("latency/block_on/one CPU") {
        // The same with every thread of the process on one CPU, for reference. Unpinned, the
        // client's thread and the worker that answers it either share a vCPU (18-25 us per
        // round trip on a 2-vCPU VM) or not (45-100 us: every message wakes a halted vCPU),
        // for raw TCP and the provider alike, and the scheduler settles a round either way;
        // pinned, both paths run alike and the rows show their own cost.
        match this_process_cpus() {
            Some(cpus) if pin_this_process("0") => {
                two_workers.block_on(latency(
                    &mut rec,
                    "two-worker runtime pinned to one CPU",
                    Client::BlockOn,
                    false,
                ));
                pin_this_process(&cpus);
            }
            _ => println!("64-byte round trip pinned to one CPU: not measured (no taskset)"),
        }
    }
    if wants("latency/current") {
        // The same on a current-thread runtime: without cross-thread wake-ups, whose cost
        // varies with what else runs on the machine, this shows the code path itself.
        let one_thread = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        missed.extend(one_thread.block_on(latency(
            &mut rec,
            "current-thread runtime",
            Client::BlockOn,
            true,
        )));
    }
    if wants("throughput") {
        missed.extend(two_workers.block_on(throughput(&mut rec, &mut below_floor)));
    }
    if wants("processes") {
        missed.extend(two_workers.block_on(two_processes(&mut rec)));
    }
    if wants("sweep") {
        missed.extend(two_workers.block_on(sweep(&mut rec)));
    }
    if let Err(e) = rec.save() {
        eprintln!("rdma_soft: records not written: {e}");
    }
    // A shared machine moves single medians by several points: a clean run measured the RDMA
    // Write at 74 % of the best TCP stream (its rounds 65-102 %), and 5-round runs minutes apart
    // 96 % and 71 %. A regression is slow in every measurement: a variant below its floor is
    // measured again, unrecorded, and the run fails only if it stays below in all of them.
    let mut measurement = 1;
    while floor && !below_floor.is_empty() && measurement < FLOOR_MEASUREMENTS {
        measurement += 1;
        println!(
            "below the regression floor ({}); measuring again ({measurement} of {FLOOR_MEASUREMENTS}) to confirm",
            joined(&below_floor)
        );
        let mut again = Vec::new();
        let mut unsaved = Recorder::new("rdma_soft-floor-confirmation");
        two_workers.block_on(throughput(&mut unsaved, &mut again));
        below_floor = again
            .into_iter()
            .filter_map(|mut later| {
                let earlier = below_floor.iter().find(|f| f.variant == later.variant)?;
                later.ratios.splice(0..0, earlier.ratios.iter().copied());
                Some(later)
            })
            .collect();
    }
    if !below_floor.is_empty() {
        println!("BELOW the regression floor: {}", joined(&below_floor));
        if floor {
            return ExitCode::FAILURE;
        }
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

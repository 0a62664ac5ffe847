//! Latency and bandwidth of the verbs provider, next to perftest baselines measured in the same
//! run (`tests/vm/run perf` passes them in).
//!
//! ```text
//! verbs-bench --listen 192.0.2.1:7472
//! verbs-bench --connect 192.0.2.1:7472 [--lat-iters N] [--bw-iters N] [--busy-only]
//!             [--baseline-lat-us 15.1] [--baseline-typical-us 12.4]
//!             [--baseline-events-lat-us ..] [--baseline-events-typical-us ..]
//!             [--baseline-bw-mbs 46]
//! ```
//!
//! * Latency: 64-byte Send/Receive ping-pong; reported like `ib_send_lat` (half the round
//!   trip), once with busy polling (`try_completion`, compared with `ib_send_lat -R`) and once
//!   waiting on the completion channel (`poll_completion`, compared with `ib_send_lat -R -e`).
//! * Bandwidth: RDMA Writes of 4 KiB, 64 KiB and 1 MiB into a region the server advertises in
//!   its first Send, 128 outstanding and one in 64 signaled (`ib_write_bw` keeps 128 and
//!   signals one in 100), reported like `ib_write_bw` (MB/s with MB = 2^20).
//!
//! Sends are posted unsignaled but for one in [`SIGNAL_EVERY`], as perftest posts them: a
//! completion per Send would be work neither side needs.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rpcrdma::rdma::verbs::{VerbsConnection, VerbsProvider};
use rpcrdma::rdma::{
    Access, Completion, ConnectParams, ConnectRequest, Connection, Listener, MemoryRegion,
    Provider, RecvWr, RemoteAddr, SendWr, Sge, WcOpcode,
};

const MSG: usize = 64;
const BW_MSG: usize = 1 << 20;
/// Writes outstanding in the bandwidth runs: `ib_write_bw`'s default `--tx-depth`.
const BW_WINDOW: usize = 128;
/// One Send or Write in this many is signaled (the others complete with it).
const SIGNAL_EVERY: u64 = 64;
/// The bandwidth runs' sizes and the key of each in the `BENCH` line. `--bw-iters` is the
/// 1 MiB run's count of Writes; the smaller runs move about as many bytes, up to 10,000 Writes.
const BW_SIZES: [(usize, &str); 3] = [
    (4 << 10, "write_4k_mbs"),
    (64 << 10, "write_64k_mbs"),
    (BW_MSG, "write_mbs"),
];
const RECV_SLOTS: usize = 16;
const MARK_PING: u8 = 1;
const MARK_DONE: u8 = 0xff;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

struct Args {
    listen: Option<SocketAddr>,
    connect: Option<SocketAddr>,
    lat_iters: usize,
    bw_iters: usize,
    /// Only the busy-poll round trips (for a profile of them).
    busy_only: bool,
    baseline_lat_us: f64,
    baseline_typical_us: f64,
    baseline_events_lat_us: f64,
    baseline_events_typical_us: f64,
    baseline_bw_mbs: f64,
}

fn parse_args() -> Result<Args, BoxError> {
    let mut args = Args {
        listen: None,
        connect: None,
        lat_iters: 2000,
        bw_iters: 200,
        busy_only: false,
        baseline_lat_us: 0.0,
        baseline_typical_us: 0.0,
        baseline_events_lat_us: 0.0,
        baseline_events_typical_us: 0.0,
        baseline_bw_mbs: 0.0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--busy-only" => args.busy_only = true,
            "--listen" => args.listen = Some(value()?.parse()?),
            "--connect" => args.connect = Some(value()?.parse()?),
            "--lat-iters" => args.lat_iters = value()?.parse()?,
            "--bw-iters" => args.bw_iters = value()?.parse()?,
            "--baseline-lat-us" => args.baseline_lat_us = value()?.parse()?,
            "--baseline-typical-us" => args.baseline_typical_us = value()?.parse()?,
            "--baseline-events-lat-us" => args.baseline_events_lat_us = value()?.parse()?,
            "--baseline-events-typical-us" => args.baseline_events_typical_us = value()?.parse()?,
            "--baseline-bw-mbs" => args.baseline_bw_mbs = value()?.parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    if args.listen.is_some() == args.connect.is_some() {
        return Err("give exactly one of --listen ADDR:PORT and --connect ADDR:PORT".into());
    }
    Ok(args)
}

/// Waits for the next completion, by busy polling or on the completion channel.
async fn next(conn: &VerbsConnection, busy: bool) -> Result<Completion, BoxError> {
    let c = if busy {
        loop {
            if let Some(c) = conn.try_completion() {
                break c;
            }
            std::hint::spin_loop();
        }
    } else {
        tokio::time::timeout(Duration::from_secs(30), conn.poll_completion())
            .await
            .map_err(|_| "no completion within 30 s")?
    };
    if !c.is_success() {
        return Err(format!("work request failed: {c:?}").into());
    }
    Ok(c)
}

/// Waits for the next receive completion, skipping send completions.
async fn next_recv(conn: &VerbsConnection, busy: bool) -> Result<Completion, BoxError> {
    loop {
        let c = next(conn, busy).await?;
        if c.opcode == WcOpcode::Recv {
            return Ok(c);
        }
    }
}

/// The Send of `sbuf` numbered `slot`: unsignaled unless `slot` is a multiple of
/// [`SIGNAL_EVERY`].
fn send(slot: u64, sbuf: &MemoryRegion) -> SendWr {
    let wr = SendWr::send(slot, Sge::whole(sbuf));
    if slot % SIGNAL_EVERY == 0 {
        wr
    } else {
        wr.unsignaled()
    }
}

fn post_recv(conn: &VerbsConnection, rbuf: &MemoryRegion, slot: u64) -> Result<(), BoxError> {
    let at = (slot as usize % RECV_SLOTS) * MSG;
    conn.post_recv(RecvWr::new(slot, Sge::new(rbuf, at..at + MSG)?))?;
    Ok(())
}

async fn server(addr: SocketAddr) -> Result<(), BoxError> {
    let provider = VerbsProvider::new();
    let listener = provider.listen(addr).await?;
    // The guest harness starts the client once it reads this line.
    println!("listening on {}", listener.local_addr()?);
    let request = listener.next_request().await?;
    // The target region must exist before accepting, but regions belong to a connection; so
    // accept first and advertise the target in a Send.
    let conn = request.accept(ConnectParams::new()).await?;
    let rbuf = conn.register(vec![0; MSG * RECV_SLOTS], Access::LOCAL_WRITE)?;
    let target = conn.register(vec![0; BW_MSG], Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
    let sbuf = conn.register(vec![0; MSG], Access::NONE)?;
    for slot in 0..RECV_SLOTS as u64 {
        post_recv(&conn, &rbuf, slot)?;
    }
    let mut keys = target.rkey().to_be_bytes().to_vec();
    keys.extend_from_slice(&target.addr().to_be_bytes());
    sbuf.write(0, &keys)?;
    conn.post_send(SendWr::send(0, vec![Sge::new(&sbuf, 0..keys.len())?]))?;
    let mut slot = RECV_SLOTS as u64;
    loop {
        // Echo every ping; the client's busy-poll and blocking phases both need a prompt reply,
        // so the server always busy-polls.
        let c = next_recv(&conn, true).await?;
        let at = (c.wr_id as usize % RECV_SLOTS) * MSG;
        let mark = rbuf.with_slice(|s| s[at]);
        post_recv(&conn, &rbuf, slot)?;
        slot += 1;
        if mark == MARK_DONE {
            break;
        }
        conn.post_send(send(slot, &sbuf))?;
    }
    // Let the client see the last completions before tearing down.
    tokio::time::sleep(Duration::from_millis(100)).await;
    conn.disconnect().await?;
    Ok(())
}

async fn ping_pong(
    conn: &VerbsConnection,
    sbuf: &MemoryRegion,
    rbuf: &MemoryRegion,
    slot: &mut u64,
    iters: usize,
    busy: bool,
) -> Result<Latency, BoxError> {
    let mut rtts = Vec::with_capacity(iters);
    let start = Instant::now();
    let start_ticks = ticks();
    for _ in 0..iters {
        let t = ticks();
        conn.post_send(send(*slot, sbuf))?;
        next_recv(conn, busy).await?;
        rtts.push(ticks() - t);
        post_recv(conn, rbuf, *slot)?;
        *slot += 1;
    }
    let total = start.elapsed();
    // Ticks per second, calibrated over the whole loop (as perftest calibrates its cycle
    // counter): reading the clock per iteration costs microseconds in an emulated guest.
    let tick_rate = (ticks() - start_ticks) as f64 / total.as_secs_f64().max(1e-9);
    rtts.sort();
    // One-way figures, like ib_send_lat: half the round trip.
    let us = |t: u64| t as f64 / tick_rate * 1e6 / 2.0;
    Ok(Latency {
        avg_us: total.as_secs_f64() * 1e6 / (2 * iters.max(1)) as f64,
        min_us: rtts.first().map_or(0.0, |&d| us(d)),
        median_us: rtts.get(iters / 2).map_or(0.0, |&d| us(d)),
        p99_us: rtts.get(iters * 99 / 100).map_or(0.0, |&d| us(d)),
    })
}

/// A cheap monotonic tick counter: the time-stamp counter where there is one.
fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no preconditions on x86_64.
        unsafe { std::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        use std::sync::OnceLock;
        static EPOCH: OnceLock<Instant> = OnceLock::new();
        EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// One-way latency figures in microseconds.
struct Latency {
    avg_us: f64,
    min_us: f64,
    median_us: f64,
    p99_us: f64,
}

impl std::fmt::Display for Latency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "avg {:.2} us (min {:.2}, median {:.2}, p99 {:.2})",
            self.avg_us, self.min_us, self.median_us, self.p99_us
        )
    }
}

fn ratio(ours: f64, baseline: f64) -> String {
    if baseline > 0.0 {
        format!("{:.2}x", ours / baseline)
    } else {
        "n/a (no baseline)".into()
    }
}

/// MB/s (MB = 2^20) of `iters` RDMA Writes of `size` from the start of `wbuf` to `remote`,
/// [`BW_WINDOW`] outstanding.
async fn write_bandwidth(
    conn: &VerbsConnection,
    wbuf: &MemoryRegion,
    remote: RemoteAddr,
    size: usize,
    iters: usize,
) -> Result<f64, BoxError> {
    let start = Instant::now();
    let (mut posted, mut done) = (0usize, 0usize);
    while done < iters {
        while posted < iters && posted - done < BW_WINDOW {
            let n = posted + 1;
            let wr = SendWr::write(1 << 32 | n as u64, Sge::new(wbuf, 0..size)?, remote);
            // The last Write is signaled too, so that every one is known to be done.
            let signaled = n as u64 % SIGNAL_EVERY == 0 || n == iters;
            conn.post_send(if signaled { wr } else { wr.unsignaled() })?;
            posted = n;
        }
        let c = next(conn, true).await?;
        if c.opcode == WcOpcode::RdmaWrite {
            // Everything up to the signaled Write it names is done.
            done = (c.wr_id & 0xffff_ffff) as usize;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    Ok((iters * size) as f64 / secs / (1 << 20) as f64)
}

/// Tells the server to stop, waits for that Send to complete and disconnects.
async fn finish(conn: &VerbsConnection, sbuf: &MemoryRegion) -> Result<(), BoxError> {
    sbuf.write(0, &[MARK_DONE])?;
    conn.post_send(SendWr::send(u64::MAX, Sge::whole(sbuf)))?;
    loop {
        let c = next(conn, false).await?;
        if c.wr_id == u64::MAX {
            break;
        }
    }
    conn.disconnect().await?;
    Ok(())
}

async fn client(args: &Args, addr: SocketAddr) -> Result<(), BoxError> {
    let provider = VerbsProvider::new();
    let conn = provider.connect(addr, ConnectParams::new()).await?;
    let rbuf = conn.register(vec![0; MSG * RECV_SLOTS], Access::LOCAL_WRITE)?;
    let sbuf = conn.register(vec![MARK_PING; MSG], Access::NONE)?;
    let wbuf = conn.register(vec![0x5a; BW_MSG], Access::NONE)?;
    for slot in 0..RECV_SLOTS as u64 {
        post_recv(&conn, &rbuf, slot)?;
    }
    let mut slot = RECV_SLOTS as u64;
    // The server's first Send carries the target's rkey and address.
    let c = next_recv(&conn, false).await?;
    let at = (c.wr_id as usize % RECV_SLOTS) * MSG;
    let keys = rbuf.to_vec(at..at + 12)?;
    let remote = RemoteAddr::new(
        u32::from_be_bytes(keys[0..4].try_into()?),
        u64::from_be_bytes(keys[4..12].try_into()?),
    );
    post_recv(&conn, &rbuf, slot)?;
    slot += 1;

    // Latency.
    ping_pong(&conn, &sbuf, &rbuf, &mut slot, 100, true).await?;
    let busy = ping_pong(&conn, &sbuf, &rbuf, &mut slot, args.lat_iters, true).await?;
    if args.busy_only {
        println!("PERF verbs provider send/recv 64 B (busy poll): {busy}");
        return finish(&conn, &sbuf).await;
    }
    let blocking = ping_pong(&conn, &sbuf, &rbuf, &mut slot, args.lat_iters, false).await?;

    let mut bandwidth = Vec::new();
    for (size, key) in BW_SIZES {
        let iters = (args.bw_iters * (BW_MSG / size)).min(10_000);
        let mbs = write_bandwidth(&conn, &wbuf, remote, size, iters).await?;
        bandwidth.push((size, key, mbs));
    }

    finish(&conn, &sbuf).await?;

    // One machine-readable line for harnesses that aggregate several runs.
    let bw_keys: Vec<String> = bandwidth
        .iter()
        .map(|(_, key, mbs)| format!(" {key}={mbs:.2}"))
        .collect();
    println!(
        "BENCH busy_median_us={:.2} busy_avg_us={:.2} chan_median_us={:.2} chan_avg_us={:.2}{}",
        busy.median_us,
        busy.avg_us,
        blocking.median_us,
        blocking.avg_us,
        bw_keys.concat()
    );
    println!(
        "PERF verbs provider send/recv 64 B (busy poll): {busy}; vs perftest: median/typical {}, avg/avg {}",
        ratio(busy.median_us, args.baseline_typical_us),
        ratio(busy.avg_us, args.baseline_lat_us)
    );
    println!(
        "PERF verbs provider send/recv 64 B (completion channel): {blocking}; vs perftest -e: median/typical {}, avg/avg {}",
        ratio(blocking.median_us, args.baseline_events_typical_us),
        ratio(blocking.avg_us, args.baseline_events_lat_us)
    );
    for (size, _, mbs) in bandwidth {
        println!(
            "PERF verbs provider RDMA Write {} KiB: {mbs:.2} MB/s{}",
            size >> 10,
            if size == BW_MSG && args.baseline_bw_mbs > 0.0 {
                format!("; vs perftest: {:.0}%", 100.0 * mbs / args.baseline_bw_mbs)
            } else {
                String::new()
            }
        );
    }
    Ok(())
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("verbs-bench: {e}");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let outcome = rt.block_on(async {
        match (args.listen, args.connect) {
            (Some(addr), _) => server(addr).await,
            (_, Some(addr)) => client(&args, addr).await,
            _ => unreachable!("checked in parse_args"),
        }
    });
    if let Err(e) = outcome {
        eprintln!("verbs-bench: {e}");
        std::process::exit(1);
    }
}

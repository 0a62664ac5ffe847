//! The coordinator: for each transport and number of connections, a fresh server process,
//! client processes holding the connections, the server sampled before the connections, when
//! they are idle and under load, and the clients' calls collected.

use std::path::Path;
use std::time::Duration;

use crate::client::ClientArgs;
use crate::histogram::Histogram;
use crate::probe::{self, Footprint};
use crate::procs::{ClientProc, ClientResult, ServerProc, ServerSample};
use crate::rounds::{Rounds, Run};
use crate::Transport;

/// The backlog libtirpc's server listens with (`listen(sock, 64)` in `csrc/server.c`). The
/// client processes together set up at most this many connections at once, so that no
/// server's accept queue overflows (a dropped SYN costs a second's retransmission, which
/// would be counted as set-up time); ours accept far more at once (tokio's backlog of 1024,
/// the soft provider's `max_handshakes`).
const CONNECTS_AT_ONCE: usize = 64;

/// How often the server is sampled while its connections settle after their set-up call.
/// Ten times the soft provider's longest deferral of work on a quiet connection (its flusher
/// comes round every 10 ms), so that two equal samples in a row mean nothing is pending.
const SETTLE_STEP: Duration = Duration::from_millis(100);

/// Samples after which the connections count as settled even if the tasks or descriptors
/// still move (a safety net; settling takes one or two samples).
const SETTLE_SAMPLES: usize = 50;

/// How a sweep runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Numbers of connections, ascending.
    pub points: Vec<usize>,
    /// Transports, in order.
    pub transports: Vec<Transport>,
    /// Calls in flight in all, at every point.
    pub in_flight: usize,
    /// Client processes (fewer when there are fewer connections).
    pub client_processes: usize,
    /// Calls before the measurement starts.
    pub warmup: Duration,
    /// The measurement.
    pub measure: Duration,
    /// ECHO of this many bytes instead of NULL (0: NULL).
    pub echo: usize,
    /// Times every point is measured.
    pub rounds: usize,
    /// Where the server and the clients run (`None`: wherever the scheduler puts them).
    pub pin: Option<Pinning>,
    /// The soft provider, server and clients, without confirmed completions.
    pub local_completions: bool,
}

/// The CPUs of the server and of the client processes.
#[derive(Debug, Clone)]
pub struct Pinning {
    /// The server's.
    pub server: Vec<usize>,
    /// The client processes'.
    pub clients: Vec<usize>,
}

/// The machine's limits a point must fit in.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Descriptors each process may open (RLIMIT_NOFILE after raising it).
    pub nofile: u64,
    /// Local ports for outgoing connections.
    pub ports: u64,
    /// Memory mappings a process may have.
    pub max_maps: u64,
}

/// Per connection: what the server holds beyond what it held before any connection, divided
/// by the connections.
#[derive(Debug, Clone, Copy, Default)]
pub struct PerConnection {
    /// Resident memory, bytes.
    pub rss: f64,
    /// `VmData`, bytes (heap and mappings, touched or not).
    pub data: f64,
    /// Heap, bytes (ours only).
    pub heap: Option<f64>,
    /// Tasks (ours only).
    pub tasks: Option<f64>,
    /// Descriptors.
    pub fds: f64,
    /// Timer descriptors.
    pub timerfds: f64,
    /// Memory mappings.
    pub maps: f64,
}

impl PerConnection {
    fn between(base: &ServerSample, now: &ServerSample, n: usize) -> PerConnection {
        let n = n as f64;
        let per = |a: u64, b: u64| (b as f64 - a as f64) / n;
        let (b, f) = (&base.footprint, &now.footprint);
        PerConnection {
            rss: per(b.rss, f.rss),
            data: per(b.data, f.data),
            heap: base
                .report
                .zip(now.report)
                .map(|(a, b)| (b.heap - a.heap) as f64 / n),
            tasks: base
                .report
                .zip(now.report)
                .map(|(a, b)| per(a.tasks, b.tasks)),
            fds: per(b.fds, f.fds),
            timerfds: per(b.timerfds, f.timerfds),
            maps: per(b.maps, f.maps),
        }
    }
}

/// One measured point.
#[derive(Debug, Clone)]
pub struct Point {
    /// Connections.
    pub connections: usize,
    /// Client processes.
    pub processes: usize,
    /// Seconds until the slowest client process had every connection up and called once.
    pub connect_seconds: f64,
    /// Calls completed per second, all clients.
    pub calls_per_s: f64,
    /// Calls measured.
    pub calls: u64,
    /// Median latency, microseconds.
    pub p50_us: f64,
    /// 99th percentile latency, microseconds.
    pub p99_us: f64,
    /// 99.9th percentile latency, microseconds.
    pub p999_us: f64,
    /// The server per connection, idle (every connection called once).
    pub idle: PerConnection,
    /// The server per connection, under load.
    pub load: PerConnection,
    /// The server per connection, idle again after the load (every connection still open):
    /// what connections that were busy keep.
    pub after: PerConnection,
    /// Server CPU time (user + system) per call, microseconds.
    pub cpu_us_per_call: f64,
    /// The client processes' resident memory per connection, bytes (for the next point's
    /// memory estimate).
    pub clients_rss: f64,
}

/// What became of a point.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Measured (boxed: a point is large, the other outcomes a sentence).
    Measured(Box<Point>),
    /// Not run: the machine could not hold it, or an earlier point failed (why).
    Skipped(String),
    /// libtirpc's server did not serve every connection or call (what happened): where it
    /// stops, not a failure of this bench.
    Stopped(String),
    /// A call of ours failed or came back wrong, or a process misbehaved (what happened).
    Failed(String),
}

/// Runs every transport's points, `options.rounds` times, printing a line per point and
/// round. Rounds alternate the order of the points (ascending, then descending), so that a
/// machine getting busier or quieter during the sweep weighs on small and large points alike.
pub fn sweep(exe: &Path, options: &Options, limits: Limits) -> Vec<Run> {
    let mut runs: Vec<Run> = options
        .transports
        .iter()
        .map(|&transport| Run {
            transport,
            points: options
                .points
                .iter()
                .map(|&connections| Rounds {
                    connections,
                    rounds: Vec::new(),
                })
                .collect(),
        })
        .collect();
    for round in 0..options.rounds {
        for run in &mut runs {
            let transport = run.transport;
            let order: Vec<usize> = if round % 2 == 0 {
                (0..run.points.len()).collect()
            } else {
                (0..run.points.len()).rev().collect()
            };
            for i in order {
                let n = run.points[i].connections;
                // Where a transport stopped or failed, in any round, it is not asked for as
                // much or more again.
                let ended = run
                    .points
                    .iter()
                    .filter(|p| p.ended().is_some())
                    .map(|p| p.connections)
                    .min();
                let outcome = match ended {
                    Some(m) if m <= n => Outcome::Skipped(format!(
                        "{} stopped at {m} connections (see that point)",
                        transport.label()
                    )),
                    _ => {
                        let largest = run.largest_measured().cloned();
                        point(exe, transport, n, options, limits, largest.as_ref())
                    }
                };
                println!(
                    "round {}/{}: {}",
                    round + 1,
                    options.rounds,
                    describe(transport, n, &outcome)
                );
                run.points[i].rounds.push(outcome);
            }
        }
    }
    runs
}

/// One line about a point.
fn describe(transport: Transport, n: usize, outcome: &Outcome) -> String {
    let head = format!("{:<9} {n:>6} connections:", transport.arg());
    match outcome {
        Outcome::Measured(p) => {
            let kib = |b: f64| b / 1024.0;
            format!(
                "{head} {:.0} calls/s ({} calls), p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us; per connection \
                 idle: RSS {:.1} KiB, VmData {:.1} KiB, heap {}, tasks {}, fds {:.2}, timerfds \
                 {:.2}, maps {:.2}; under load: RSS {:.1} KiB, heap {}; after: RSS {:.1} KiB; CPU {:.2} us/call; \
                 set up in {:.2} s by {} processes",
                p.calls_per_s,
                p.calls,
                p.p50_us,
                p.p99_us,
                p.p999_us,
                kib(p.idle.rss),
                kib(p.idle.data),
                p.idle
                    .heap
                    .map_or("n/a".into(), |h| format!("{:.1} KiB", kib(h))),
                p.idle.tasks.map_or("n/a".into(), |t| format!("{t:.2}")),
                p.idle.fds,
                p.idle.timerfds,
                p.idle.maps,
                kib(p.load.rss),
                p.load
                    .heap
                    .map_or("n/a".into(), |h| format!("{:.1} KiB", kib(h))),
                kib(p.after.rss),
                p.cpu_us_per_call,
                p.connect_seconds,
                p.processes,
            )
        }
        Outcome::Skipped(why) => format!("{head} skipped: {why}"),
        Outcome::Stopped(why) => format!("{head} STOPPED: {why}"),
        Outcome::Failed(why) => format!("{head} FAILED: {why}"),
    }
}

/// `share` of `total` split over `parts`: the first `total % parts` get one more.
fn share(total: usize, parts: usize, i: usize) -> usize {
    total / parts + usize::from(i < total % parts)
}

/// Whether the machine can hold `n` connections, judged before they are made: descriptors
/// and ports from the limits, memory and mappings from what the largest point measured so
/// far took per connection.
fn room(
    transport: Transport,
    n: usize,
    base: &Footprint,
    limits: Limits,
    largest: Option<&Point>,
) -> Result<(), String> {
    let fds = n as u64 + base.fds;
    if fds > limits.nofile {
        return Err(format!(
            "the server would need {fds} descriptors (a connection each, {} held before), \
             above its limit of {} (RLIMIT_NOFILE's hard limit)",
            base.fds, limits.nofile
        ));
    }
    if n as u64 > limits.ports {
        return Err(format!(
            "{n} connections to one address need as many local ports; \
             net.ipv4.ip_local_port_range gives {}",
            limits.ports
        ));
    }
    let Some(p) = largest else { return Ok(()) };
    let per_connection = p.idle.rss.max(p.load.rss).max(0.0) + p.clients_rss;
    let need = per_connection * n as f64;
    let available = probe::mem_available().map_err(|e| format!("MemAvailable: {e}"))? as f64;
    if need > available {
        return Err(format!(
            "{transport} at {} connections took {:.0} KiB per connection (server and clients), \
             so {n} would take {:.0} MiB; {:.0} MiB is available",
            p.connections,
            per_connection / 1024.0,
            need / f64::from(1 << 20),
            available / f64::from(1 << 20),
            transport = transport.label(),
        ));
    }
    let maps = base.maps as f64 + p.idle.maps.max(0.0) * n as f64;
    if maps > limits.max_maps as f64 {
        return Err(format!(
            "the server would need about {maps:.0} memory mappings ({:.2} per connection at {} \
             connections); vm.max_map_count is {}",
            p.idle.maps, p.connections, limits.max_maps
        ));
    }
    Ok(())
}

/// A failure at a point: where libtirpc stops, or a failure of ours.
fn failure(transport: Transport, what: String) -> Outcome {
    match transport {
        Transport::Libtirpc => Outcome::Stopped(what),
        Transport::Rdma | Transport::Tcp => Outcome::Failed(what),
    }
}

/// Measures `n` connections over `transport` once.
fn point(
    exe: &Path,
    transport: Transport,
    n: usize,
    options: &Options,
    limits: Limits,
    largest: Option<&Point>,
) -> Outcome {
    let mut server = match ServerProc::start(
        exe,
        transport,
        options.local_completions,
        options.pin.as_ref().map(|p| &p.server[..]),
    ) {
        Ok(s) => s,
        Err(e) => return Outcome::Failed(format!("starting the server: {e}")),
    };
    let sampled = |server: &mut ServerProc| {
        server
            .sample()
            .map_err(|e| Outcome::Failed(format!("sampling the server: {e}")))
    };
    let base = match sampled(&mut server) {
        Ok(s) => s,
        Err(o) => return o,
    };
    if let Err(why) = room(transport, n, &base.footprint, limits, largest) {
        return Outcome::Skipped(why);
    }
    let processes = options.client_processes.clamp(1, n.max(1));
    let mut clients = Vec::with_capacity(processes);
    for i in 0..processes {
        let args = ClientArgs {
            transport,
            addr: server.addr(),
            connections: share(n, processes, i),
            workers: share(options.in_flight, processes, i).max(1),
            connects_at_once: (CONNECTS_AT_ONCE / processes).max(1),
            echo: options.echo,
            local_completions: options.local_completions,
            cpus: options.pin.as_ref().map(|p| p.clients.clone()),
        };
        match ClientProc::start(exe, &args) {
            Ok(c) => clients.push(c),
            Err(e) => return Outcome::Failed(format!("starting a client process: {e}")),
        }
    }
    let mut connect_seconds: f64 = 0.0;
    for c in &mut clients {
        match c.ready() {
            Ok(s) => connect_seconds = connect_seconds.max(s),
            Err(e) => return failure(transport, format!("setting up the connections: {e}")),
        }
    }

    // Idle: every connection made its call; wait until the server's tasks and descriptors
    // stop moving.
    let mut idle = match sampled(&mut server) {
        Ok(s) => s,
        Err(o) => return o,
    };
    for _ in 0..SETTLE_SAMPLES {
        std::thread::sleep(SETTLE_STEP);
        let now = match sampled(&mut server) {
            Ok(s) => s,
            Err(o) => return o,
        };
        let settled = now.footprint.fds == idle.footprint.fds
            && now.report.map(|r| r.tasks) == idle.report.map(|r| r.tasks);
        idle = now;
        if settled {
            break;
        }
    }
    if let Some(r) = idle.report {
        if r.connections != n as u64 {
            return Outcome::Failed(format!(
                "the server counts {} connections, {n} were made",
                r.connections
            ));
        }
    }
    let clients_rss: u64 = clients
        .iter()
        .filter_map(|c| Footprint::of(c.pid()).ok())
        .map(|f| f.rss)
        .sum();

    // Load: warm up, then measure.
    let send_all = |clients: &mut Vec<ClientProc>, command: &str| -> Result<(), Outcome> {
        for c in clients.iter_mut() {
            c.send(command)
                .map_err(|e| Outcome::Failed(format!("telling a client to {command}: {e}")))?;
        }
        Ok(())
    };
    if let Err(o) = send_all(&mut clients, "run") {
        return o;
    }
    std::thread::sleep(options.warmup);
    if let Err(o) = send_all(&mut clients, "record") {
        return o;
    }
    let pid = server.pid();
    let cpu_before = probe::cpu_seconds(pid);
    std::thread::sleep(options.measure);
    let load = sampled(&mut server);
    let cpu_after = probe::cpu_seconds(pid);
    if let Err(o) = send_all(&mut clients, "stop") {
        return o;
    }
    let mut results: Vec<ClientResult> = Vec::with_capacity(clients.len());
    for c in &mut clients {
        match c.result() {
            Ok(r) => results.push(r),
            Err(e) => return Outcome::Failed(format!("reading a client's result: {e}")),
        }
    }
    let after = sampled(&mut server);
    let mut clean_exits = true;
    for c in clients {
        clean_exits &= c.finish().unwrap_or(false);
    }
    drop(server);
    let (load, after) = match (load, after) {
        (Ok(l), Ok(a)) => (l, a),
        (Err(o), _) | (_, Err(o)) => return o,
    };
    if let Some(r) = results.iter().find(|r| r.failures > 0) {
        let failed: u64 = results.iter().map(|r| r.failures).sum();
        return failure(
            transport,
            format!(
                "{failed} workers stopped on a failed call; the first: {}",
                r.error.as_deref().unwrap_or("(no text)")
            ),
        );
    }
    if !clean_exits {
        return Outcome::Failed("a client process exited with a failure".into());
    }
    let mut latencies = Histogram::default();
    for r in &results {
        match Histogram::from_text(&r.histogram) {
            Ok(h) => latencies.merge(&h),
            Err(e) => return Outcome::Failed(format!("a client's histogram: {e}")),
        }
    }
    let calls: u64 = results.iter().map(|r| r.calls).sum();
    if latencies.count() != calls {
        return Outcome::Failed(format!(
            "the clients counted {calls} calls but {} latencies",
            latencies.count()
        ));
    }
    let calls_per_s: f64 = results
        .iter()
        .filter(|r| r.seconds > 0.0)
        .map(|r| r.calls as f64 / r.seconds)
        .sum();
    let cpu = match (cpu_before, cpu_after) {
        (Ok(a), Ok(b)) => b - a,
        (Err(e), _) | (_, Err(e)) => {
            return Outcome::Failed(format!("reading the server's CPU time: {e}"))
        }
    };
    Outcome::Measured(Box::new(Point {
        connections: n,
        processes,
        connect_seconds,
        calls_per_s,
        calls,
        p50_us: latencies.quantile_us(0.50),
        p99_us: latencies.quantile_us(0.99),
        p999_us: latencies.quantile_us(0.999),
        idle: PerConnection::between(&base, &idle, n),
        load: PerConnection::between(&base, &load, n),
        after: PerConnection::between(&base, &after, n),
        cpu_us_per_call: if calls > 0 {
            cpu * 1e6 / calls as f64
        } else {
            f64::NAN
        },
        clients_rss: clients_rss as f64 / n as f64,
    }))
}

//! One point, one round: a fresh server process, client processes holding the connections,
//! the server sampled before any connection, once they are idle, under load and idle again,
//! and the clients' calls collected.

use std::path::Path;
use std::time::Duration;

use crate::client::ClientArgs;
use crate::histogram::Histogram;
use crate::probe::{self, Footprint};
use crate::procs::{ClientProc, ClientResult, ServerProc, ServerSample};
use crate::sweep::{Limits, Options, Outcome, PerConnection, Point};
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

/// Measures `n` connections over `transport` once; `largest` is the largest point of the
/// transport measured so far (for the estimate of what `n` connections will take).
pub fn point(
    exe: &Path,
    transport: Transport,
    n: usize,
    options: &Options,
    limits: Limits,
    largest: Option<&Point>,
) -> Outcome {
    match measure(exe, transport, n, options, limits, largest) {
        Ok(p) => Outcome::Measured(Box::new(p)),
        Err(o) => o,
    }
}

/// A failure at a point: where libtirpc stops, or a failure of ours.
fn failure(transport: Transport, what: String) -> Outcome {
    match transport {
        Transport::Libtirpc => Outcome::Stopped(what),
        Transport::Rdma | Transport::RdmaShared | Transport::Tcp | Transport::RawTcp => {
            Outcome::Failed(what)
        }
    }
}

fn sample(server: &mut ServerProc) -> Result<ServerSample, Outcome> {
    server
        .sample()
        .map_err(|e| Outcome::Failed(format!("sampling the server: {e}")))
}

fn measure(
    exe: &Path,
    transport: Transport,
    n: usize,
    options: &Options,
    limits: Limits,
    largest: Option<&Point>,
) -> Result<Point, Outcome> {
    let mut server = ServerProc::start(
        exe,
        transport,
        options.tuning,
        options.pin.as_ref().map(|p| &p.server[..]),
        crate::shared_buffers(n, options.in_flight),
    )
    .map_err(|e| Outcome::Failed(format!("starting the server: {e}")))?;
    let base = sample(&mut server)?;
    room(transport, n, &base.footprint, limits, largest).map_err(Outcome::Skipped)?;
    let processes = options.client_processes.clamp(1, n.max(1));
    let (mut clients, connect_seconds) =
        start_clients(exe, transport, n, processes, &server, options)?;
    let idle = settle(&mut server, n)?;
    let load = run_load(&mut server, &mut clients, options)?;
    let after = sample(&mut server)?;
    // After the load, when the clients hold the most.
    let clients_rss: u64 = clients
        .iter()
        .filter_map(|c| Footprint::of(c.pid()).ok())
        .map(|f| f.rss)
        .sum();
    let mut clean_exits = true;
    for c in clients {
        clean_exits &= c.finish().unwrap_or(false);
    }
    drop(server);
    let calls = merge(transport, &load.results)?;
    if !clean_exits {
        return Err(Outcome::Failed(
            "a client process exited with a failure".into(),
        ));
    }
    let count = calls.latencies.count();
    Ok(Point {
        connections: n,
        processes,
        connect_seconds,
        calls_per_s: calls.per_s,
        calls: count,
        p50_us: calls.latencies.quantile_us(0.50),
        p99_us: calls.latencies.quantile_us(0.99),
        p999_us: calls.latencies.quantile_us(0.999),
        idle: PerConnection::between(&base, &idle, n),
        load: PerConnection::between(&base, &load.sample, n),
        after: PerConnection::between(&base, &after, n),
        cpu_us_per_call: if count > 0 {
            load.cpu_seconds * 1e6 / count as f64
        } else {
            f64::NAN
        },
        clients_rss: clients_rss as f64 / n as f64,
    })
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

/// Starts the client processes and waits until every connection is up and called once:
/// them, and the seconds the slowest took.
fn start_clients(
    exe: &Path,
    transport: Transport,
    n: usize,
    processes: usize,
    server: &ServerProc,
    options: &Options,
) -> Result<(Vec<ClientProc>, f64), Outcome> {
    let mut clients = Vec::with_capacity(processes);
    for i in 0..processes {
        let args = ClientArgs {
            transport,
            addr: server.addr(),
            connections: share(n, processes, i),
            workers: share(options.in_flight, processes, i).max(1),
            connects_at_once: (CONNECTS_AT_ONCE / processes).max(1),
            echo: options.echo,
            tuning: options.tuning,
            cpus: options.pin.as_ref().map(|p| p.clients.clone()),
        };
        let client = ClientProc::start(exe, &args)
            .map_err(|e| Outcome::Failed(format!("starting a client process: {e}")))?;
        clients.push(client);
    }
    let mut seconds: f64 = 0.0;
    for c in &mut clients {
        let took = c
            .ready()
            .map_err(|e| failure(transport, format!("setting up the connections: {e}")))?;
        seconds = seconds.max(took);
    }
    Ok((clients, seconds))
}

/// Once every connection made its call: samples the server until its tasks and descriptors
/// stop moving, and checks it counts `n` connections (ours).
fn settle(server: &mut ServerProc, n: usize) -> Result<ServerSample, Outcome> {
    let mut idle = sample(server)?;
    for _ in 0..SETTLE_SAMPLES {
        std::thread::sleep(SETTLE_STEP);
        let now = sample(server)?;
        let settled = now.footprint.fds == idle.footprint.fds
            && now.report.map(|r| r.tasks) == idle.report.map(|r| r.tasks);
        idle = now;
        if settled {
            break;
        }
    }
    match idle.report {
        Some(r) if r.connections != n as u64 => Err(Outcome::Failed(format!(
            "the server counts {} connections, {n} were made",
            r.connections
        ))),
        _ => Ok(idle),
    }
}

/// What the load phase saw.
struct Load {
    /// The server at the end of the measurement.
    sample: ServerSample,
    /// The server's CPU time over the measurement.
    cpu_seconds: f64,
    /// Each client process's calls.
    results: Vec<ClientResult>,
}

/// Sends `command` to every client process.
fn tell(clients: &mut [ClientProc], command: &str) -> Result<(), Outcome> {
    for c in clients {
        c.send(command)
            .map_err(|e| Outcome::Failed(format!("telling a client to {command}: {e}")))?;
    }
    Ok(())
}

/// Runs the calls: the warm-up, then the measurement, the server sampled at its end.
fn run_load(
    server: &mut ServerProc,
    clients: &mut [ClientProc],
    options: &Options,
) -> Result<Load, Outcome> {
    tell(clients, "run")?;
    std::thread::sleep(options.warmup);
    tell(clients, "record")?;
    let pid = server.pid();
    let cpu = |what: &str| {
        probe::cpu_seconds(pid)
            .map_err(|e| Outcome::Failed(format!("the server's CPU time {what}: {e}")))
    };
    let before = cpu("before")?;
    std::thread::sleep(options.measure);
    let sample = sample(server)?;
    let after = cpu("after")?;
    tell(clients, "stop")?;
    let mut results = Vec::with_capacity(clients.len());
    for c in clients {
        let r = c
            .result()
            .map_err(|e| Outcome::Failed(format!("reading a client's result: {e}")))?;
        results.push(r);
    }
    Ok(Load {
        sample,
        cpu_seconds: after - before,
        results,
    })
}

/// The client processes' calls together.
struct Calls {
    /// Calls per second, all client processes.
    per_s: f64,
    /// Every call's latency.
    latencies: Histogram,
}

/// Merges the client processes' results; a failed call is a failure of the point.
fn merge(transport: Transport, results: &[ClientResult]) -> Result<Calls, Outcome> {
    if let Some(r) = results.iter().find(|r| r.failures > 0) {
        let failed: u64 = results.iter().map(|r| r.failures).sum();
        return Err(failure(
            transport,
            format!(
                "{failed} workers stopped on a failed call; the first: {}",
                r.error.as_deref().unwrap_or("(no text)")
            ),
        ));
    }
    let mut latencies = Histogram::default();
    for r in results {
        let h = Histogram::from_text(&r.histogram)
            .map_err(|e| Outcome::Failed(format!("a client's histogram: {e}")))?;
        latencies.merge(&h);
    }
    let calls: u64 = results.iter().map(|r| r.calls).sum();
    if latencies.count() != calls {
        return Err(Outcome::Failed(format!(
            "the clients counted {calls} calls but {} latencies",
            latencies.count()
        )));
    }
    Ok(Calls {
        per_s: results
            .iter()
            .filter(|r| r.seconds > 0.0)
            .map(|r| r.calls as f64 / r.seconds)
            .sum(),
        latencies,
    })
}

//! The coordinator's sweep: every transport and number of connections, in rounds, each
//! point measured by [`crate::point`]; and what a point's measurement is.

use std::path::Path;
use std::time::Duration;

use crate::point::point;
use crate::procs::ServerSample;
use crate::rounds::{Rounds, Run};
use crate::tuning::Tuning;
use crate::Transport;

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
    /// Our endpoints' settings.
    pub tuning: Tuning,
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
    /// What `now` holds beyond `base`, per connection of `n`.
    pub fn between(base: &ServerSample, now: &ServerSample, n: usize) -> PerConnection {
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
    /// The client processes' resident memory per connection after the load, bytes (for the
    /// estimate of what a larger point will take).
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

//! The sweep's results: a table, the ratios against the 64-connection point, the targets of
//! issue 53 judged (MET or MISSED), and the records for `scripts/bench`'s report.

use std::fmt::Write as _;

use bench_report::{Recorder, Target};

use crate::sweep::{Options, Outcome, Point, Run};
use crate::Transport;

/// The report's section.
pub const GROUP: &str = "Connections at scale";

/// The point every other is compared with: as many connections as calls in flight, each
/// connection carrying one call at a time.
const BASELINE_POINT: usize = 64;

/// Where issue 53's targets are judged.
const JUDGED_POINT: usize = 4096;

/// The points that get rows of their own in the report (every point is in its table).
const ROW_POINTS: [usize; 2] = [JUDGED_POINT, 10_000];

/// Issue 53: calls/s at 4,096 connections at least this fraction of calls/s at 64.
const CALLS_TARGET: f64 = 0.8;

/// Issue 53: p99 latency at 4,096 connections at most this many times p50.
const TAIL_TARGET: f64 = 3.0;

/// Issue 53: what an idle connection may cost the server without a shared receive queue,
/// KiB.
const IDLE_BUDGET_KIB: f64 = 256.0;

/// The transport the targets are judged on.
const JUDGED: Transport = Transport::Rdma;

const KIB: f64 = 1024.0;

/// A target judged in this run.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// What was judged.
    pub name: String,
    /// The ratio (NaN when it could not be measured).
    pub ratio: f64,
    /// The bound.
    pub target: Target,
}

impl Verdict {
    /// Whether the target was met.
    pub fn met(&self) -> bool {
        self.target.holds(self.ratio)
    }
}

fn number(v: f64) -> String {
    if v.is_nan() {
        "n/a".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The whole sweep as a markdown table, a row per transport and point.
pub fn table(runs: &[Run]) -> String {
    let mut md = String::from(
        "| transport | connections | calls/s | vs 64 conns | p50 us | p99 us | p99 / p50 | \
         idle RSS KiB/conn | idle heap KiB/conn | idle VmData KiB/conn | loaded RSS KiB/conn | \
         loaded heap KiB/conn | server CPU us/call | tasks/conn | timerfds/conn | fds/conn | \
         maps/conn | set-up s |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for run in runs {
        let base = run.point(BASELINE_POINT).map(|p| p.calls_per_s);
        for (n, outcome) in &run.points {
            let head = format!("| {} | {} |", run.transport.arg(), thousands(*n));
            let p = match outcome {
                Outcome::Measured(p) => p,
                Outcome::Skipped(why) => {
                    let _ = writeln!(md, "{head} skipped: {} |", why.replace('|', "/"));
                    continue;
                }
                Outcome::Stopped(why) => {
                    let _ = writeln!(md, "{head} stopped: {} |", why.replace('|', "/"));
                    continue;
                }
                Outcome::Failed(why) => {
                    let _ = writeln!(md, "{head} FAILED: {} |", why.replace('|', "/"));
                    continue;
                }
            };
            let opt = |v: Option<f64>| v.map_or("n/a".to_string(), number);
            let _ = writeln!(
                md,
                "{head} {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                number(p.calls_per_s),
                opt(base.map(|b| p.calls_per_s / b)),
                number(p.p50_us),
                number(p.p99_us),
                number(p.p99_us / p.p50_us),
                number(p.idle.rss / KIB),
                opt(p.idle.heap.map(|h| h / KIB)),
                number(p.idle.data / KIB),
                number(p.load.rss / KIB),
                opt(p.load.heap.map(|h| h / KIB)),
                number(p.cpu_us_per_call),
                opt(p.idle.tasks),
                number(p.idle.timerfds),
                number(p.idle.fds),
                number(p.idle.maps),
                number(p.connect_seconds),
            );
        }
    }
    md
}

/// The targets, judged on [`JUDGED`] at [`JUDGED_POINT`] (NaN, so MISSED, when not measured).
pub fn verdicts(runs: &[Run]) -> Vec<Verdict> {
    let run = runs.iter().find(|r| r.transport == JUDGED);
    let at = |n: usize| run.and_then(|r| r.point(n));
    let judged = at(JUDGED_POINT);
    let base = at(BASELINE_POINT);
    let label = JUDGED.label();
    let n = thousands(JUDGED_POINT);
    vec![
        Verdict {
            name: format!("{label}: calls/s at {n} connections / at {BASELINE_POINT}"),
            ratio: judged
                .zip(base)
                .map_or(f64::NAN, |(j, b)| j.calls_per_s / b.calls_per_s),
            target: Target::at_least(CALLS_TARGET),
        },
        Verdict {
            name: format!("{label}: p99 / p50 latency at {n} connections"),
            ratio: judged.map_or(f64::NAN, |j| j.p99_us / j.p50_us),
            target: Target::at_most(TAIL_TARGET),
        },
        Verdict {
            name: format!(
                "{label}: server RSS per idle connection at {n} connections / {IDLE_BUDGET_KIB} KiB"
            ),
            ratio: judged.map_or(f64::NAN, |j| j.idle.rss / KIB / IDLE_BUDGET_KIB),
            target: Target::at_most(1.0),
        },
    ]
}

/// Prints the ratios against the 64-connection point, transport by transport.
pub fn print_ratios(runs: &[Run]) {
    for run in runs {
        let Some(base) = run.point(BASELINE_POINT) else {
            println!(
                "{}: no {BASELINE_POINT}-connection point, no ratios",
                run.transport.label()
            );
            continue;
        };
        println!(
            "{} (ratios against {BASELINE_POINT} connections):",
            run.transport.label()
        );
        for p in run.measured() {
            println!(
                "  {:>6} connections: calls/s {:.2}x, p99/p50 {:.2}, p99 {:.2}x, CPU/call {:.2}x",
                p.connections,
                p.calls_per_s / base.calls_per_s,
                p.p99_us / p.p50_us,
                p.p99_us / base.p99_us,
                p.cpu_us_per_call / base.cpu_us_per_call,
            );
        }
    }
}

/// Rows of one transport at `p` (against its 64-connection point `base`), judged where the
/// targets are.
fn rows(rec: &mut Recorder, run: &Run, p: &Point, base: Option<&Point>) {
    let label = run.transport.label();
    let n = thousands(p.connections);
    let judged = run.transport == JUDGED && p.connections == JUDGED_POINT;
    let base_name = format!("{BASELINE_POINT} connections, same run");
    let f = rec.figure(
        GROUP,
        &format!("{label}: NULL calls/s, {n} connections"),
        p.calls_per_s,
        "calls/s",
    );
    if let Some(b) = base {
        f.baseline(&base_name, b.calls_per_s)
            .ratio(p.calls_per_s / b.calls_per_s, "value / baseline");
    }
    if judged {
        f.target(Target::at_least(CALLS_TARGET));
    }
    let f = rec.figure(
        GROUP,
        &format!("{label}: p99 latency, {n} connections"),
        p.p99_us,
        "us",
    );
    f.baseline(format!("p50 at {n} connections"), p.p50_us)
        .ratio(p.p99_us / p.p50_us, "value / baseline");
    if judged {
        f.target(Target::at_most(TAIL_TARGET));
    }
    let budget = "issue 53's budget per idle connection (no shared receive queue)";
    let f = rec.figure(
        GROUP,
        &format!("{label}: server RSS per idle connection, {n} connections"),
        p.idle.rss / KIB,
        "KiB",
    );
    f.baseline(budget, IDLE_BUDGET_KIB)
        .ratio(p.idle.rss / KIB / IDLE_BUDGET_KIB, "value / baseline");
    if judged {
        f.target(Target::at_most(1.0));
    }
    if let Some(heap) = p.idle.heap {
        rec.figure(
            GROUP,
            &format!("{label}: server heap per idle connection, {n} connections"),
            heap / KIB,
            "KiB",
        )
        .baseline(budget, IDLE_BUDGET_KIB)
        .ratio(heap / KIB / IDLE_BUDGET_KIB, "value / baseline");
    }
    let f = rec.figure(
        GROUP,
        &format!("{label}: server CPU time per call, {n} connections"),
        p.cpu_us_per_call,
        "us",
    );
    if let Some(b) = base {
        f.baseline(&base_name, b.cpu_us_per_call)
            .ratio(p.cpu_us_per_call / b.cpu_us_per_call, "value / baseline");
    }
}

/// Writes the rows, plots and notes of the sweep into `rec`.
pub fn record(rec: &mut Recorder, runs: &[Run], options: &Options, setup: &str) {
    rec.note(GROUP, method(options, setup));
    let mut skipped = Vec::new();
    for run in runs {
        for (n, outcome) in &run.points {
            let what = match outcome {
                Outcome::Skipped(why) => format!("skipped: {why}"),
                Outcome::Stopped(why) => format!("stopped there: {why}"),
                Outcome::Failed(why) => format!("FAILED: {why}"),
                Outcome::Measured(_) => continue,
            };
            skipped.push(format!(
                "{} at {} connections {what}",
                run.transport.label(),
                thousands(*n)
            ));
        }
    }
    if !skipped.is_empty() {
        rec.note(GROUP, format!("Not measured: {}.", skipped.join("; ")));
    }
    rec.note(GROUP, table(runs));

    for run in runs {
        let base = run.point(BASELINE_POINT).cloned();
        for &n in &ROW_POINTS {
            match run.point(n) {
                Some(p) => rows(rec, run, &p.clone(), base.as_ref()),
                None if run.transport == JUDGED && n == JUDGED_POINT => {
                    // Not measured: the judged rows say so (n/a, MISSED).
                    let label = JUDGED.label();
                    let n = thousands(n);
                    rec.figure(
                        GROUP,
                        &format!("{label}: NULL calls/s, {n} connections"),
                        f64::NAN,
                        "calls/s",
                    )
                    .target(Target::at_least(CALLS_TARGET));
                    rec.figure(
                        GROUP,
                        &format!("{label}: p99 latency, {n} connections"),
                        f64::NAN,
                        "us",
                    )
                    .target(Target::at_most(TAIL_TARGET));
                    rec.figure(
                        GROUP,
                        &format!("{label}: server RSS per idle connection, {n} connections"),
                        f64::NAN,
                        "KiB",
                    )
                    .target(Target::at_most(1.0));
                }
                None => {}
            }
        }
    }
    plots(rec, runs, options);
}

/// The method, as the report's first note.
fn method(options: &Options, setup: &str) -> String {
    let call = if options.echo > 0 {
        format!(
            "{}-byte ECHO calls (every reply compared with what was sent)",
            options.echo
        )
    } else {
        "NULL calls".to_string()
    };
    format!(
        "One server process (a fresh one per point; ours on a multi-thread runtime with a worker \
         per CPU, the library's default settings) and up to {clients} client processes holding \
         the connections, all on loopback: our RPC-over-RDMA server on the soft iWARP provider, \
         our ONC RPC over TCP server, and libtirpc's rpcgen server (`csrc/server.c`, \
         single-threaded), the last two called by our TCP clients. {call}, {in_flight} in \
         flight in all at every point: each client process's workers take the next of its \
         connections in turn for every call, so with fewer connections than calls in flight \
         each connection carries several at once, and with more every connection is used in \
         turn and at most {in_flight} have a call in flight at a time. {warmup:.1} s of calls, \
         then {measure:.1} s measured; latencies are per call as the client saw it \
         (histograms merged over the client processes). The ratios compare each point with \
         the {BASELINE_POINT}-connection point of the same run; issue 53's targets are \
         judged on RPC-over-RDMA at {JUDGED_POINT} connections: calls/s at least \
         {CALLS_TARGET}x the {BASELINE_POINT}-connection point, p99 at most {TAIL_TARGET}x \
         p50, an idle connection at most {IDLE_BUDGET_KIB} KiB of the server's resident \
         memory. Per connection: what the server holds beyond what it held before any \
         connection, divided by the connections: idle once every connection made one call \
         and the server's tasks and descriptors stopped moving, loaded at the end of the \
         measurement; RSS is resident memory (VmRSS), heap what our server's allocator holds \
         (registered memory of 64 KiB or more is mapped apart from the heap: it shows in \
         VmData, and in RSS only where touched), tasks tokio's `num_alive_tasks` (tokio \
         keeps no count of its timers: timer descriptors are counted, timerfds). Server CPU \
         per call: its user + system time over the measurement divided by the calls. \
         {setup}",
        clients = options.client_processes,
        in_flight = options.in_flight,
        warmup = options.warmup.as_secs_f64(),
        measure = options.measure.as_secs_f64(),
    )
}

/// A plot line's name and what it shows of a point.
type Line<T> = (&'static str, fn(&Point) -> T);

/// The plots: calls/s, latency and memory per idle connection against connections.
fn plots(rec: &mut Recorder, runs: &[Run], options: &Options) {
    let title = format!(
        "NULL calls/s vs connections ({} in flight in all, loopback)",
        options.in_flight
    );
    for run in runs {
        let s = rec
            .series("scale_calls", &title, run.transport.label())
            .axes("connections", "calls/s")
            .group(GROUP)
            .log_x();
        for p in run.measured() {
            s.point(p.connections as f64, p.calls_per_s);
        }
    }
    for run in runs {
        let quantiles: &[Line<f64>] = &[("p50", |p| p.p50_us), ("p99", |p| p.p99_us)];
        for (q, value) in quantiles {
            let s = rec
                .series(
                    "scale_latency",
                    "NULL call latency vs connections (p50 and p99)",
                    &format!("{} {q}", run.transport.label()),
                )
                .axes("connections", "us per call")
                .group(GROUP)
                .log_x()
                .log_y();
            for p in run.measured() {
                s.point(p.connections as f64, value(p));
            }
        }
    }
    for run in runs {
        let kinds: &[Line<Option<f64>>] =
            &[("RSS", |p| Some(p.idle.rss)), ("heap", |p| p.idle.heap)];
        for (kind, value) in kinds {
            let s = rec
                .series(
                    "scale_memory",
                    "Server memory per idle connection vs connections",
                    &format!("{} {kind}", run.transport.label()),
                )
                .axes("connections", "KiB per connection")
                .group(GROUP)
                .log_x()
                .log_y();
            for p in run.measured() {
                // A logarithmic axis cannot show a connection that cost nothing (or less:
                // noise at one connection).
                if let Some(v) = value(p).filter(|v| *v > 0.0) {
                    s.point(p.connections as f64, v / KIB);
                }
            }
        }
    }
}

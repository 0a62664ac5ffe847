//! The sweep's results: a table, the ratios against the 64-connection point, the targets of
//! issue 53 judged (MET or MISSED), and the records for `scripts/bench`'s report. Every
//! figure is the median of the point's rounds; every ratio the median of the per-round
//! ratios, with their range.

use std::fmt::Write as _;

use bench_report::{Recorder, Target};

use crate::rounds::{Rounds, Run, Spread, Status};
use crate::sweep::{Options, Point};
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

/// Issue 53: what an idle connection may cost the server with a shared receive queue, KiB.
const IDLE_SHARED_BUDGET_KIB: f64 = 64.0;

/// What an idle connection of `transport` may cost the server, KiB, and the budget's name.
fn idle_budget(transport: Transport) -> (f64, &'static str) {
    match transport {
        Transport::RdmaShared => (
            IDLE_SHARED_BUDGET_KIB,
            "issue 53's budget per idle connection (shared receive queue)",
        ),
        _ => (
            IDLE_BUDGET_KIB,
            "issue 53's budget per idle connection (no shared receive queue)",
        ),
    }
}

/// The transport the targets are judged on.
const JUDGED: Transport = Transport::Rdma;

/// The transport the budget with a shared receive queue is judged on.
const JUDGED_SHARED: Transport = Transport::RdmaShared;

const KIB: f64 = 1024.0;

/// A target judged in this run.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// What was judged.
    pub name: String,
    /// The ratio, over the rounds (`None` when it could not be measured).
    pub ratio: Option<Spread>,
    /// The bound.
    pub target: Target,
}

impl Verdict {
    /// Whether the target was met (never when not measured).
    pub fn met(&self) -> bool {
        self.ratio.is_some_and(|r| self.target.holds(r.median))
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

/// A ratio with its range: `0.93 [0.90 .. 0.97]`.
fn spread_text(s: Option<Spread>) -> String {
    match s {
        Some(s) if s.lo < s.hi => format!(
            "{} [{} .. {}]",
            number(s.median),
            number(s.lo),
            number(s.hi)
        ),
        Some(s) => number(s.median),
        None => "n/a".into(),
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

/// The ratios of a point: calls/s against the same round's 64-connection point, and p99
/// over p50, each round's.
fn calls_ratio(run: &Run, n: usize) -> Option<Spread> {
    run.ratio(n, BASELINE_POINT, |p| p.calls_per_s)
}

fn tail_ratio(point: &Rounds) -> Option<Spread> {
    point.spread(|p| p.p99_us / p.p50_us)
}

/// The whole sweep as a markdown table, a row per transport and point.
pub fn table(runs: &[Run]) -> String {
    let mut md = String::from(
        "| transport | connections | rounds | calls/s | vs 64 conns | p50 us | p99 us | p99 / p50 | \
         idle RSS KiB/conn | idle heap KiB/conn | idle VmData KiB/conn | loaded RSS KiB/conn | \
         loaded heap KiB/conn | RSS KiB/conn idle after load | server CPU us/call | tasks/conn | timerfds/conn | fds/conn | \
         maps/conn | set-up s |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for run in runs {
        for point in &run.points {
            let head = format!(
                "| {} | {} |",
                run.transport.arg(),
                thousands(point.connections)
            );
            let why = match point.status() {
                Status::Measured => None,
                Status::Skipped(why) => Some(format!("skipped: {why}")),
                Status::Stopped(why) => Some(format!("stopped: {why}")),
                Status::Failed(why) => Some(format!("FAILED: {why}")),
            };
            if let Some(why) = why {
                let _ = writeln!(md, "{head} {} |", why.replace('|', "/"));
                continue;
            }
            let med = |f: fn(&Point) -> f64| number(point.median(f));
            let opt =
                |f: fn(&Point) -> Option<f64>| point.median_of(f).map_or("n/a".into(), number);
            let _ = writeln!(
                md,
                "{head} {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                point.measured().len(),
                med(|p| p.calls_per_s),
                spread_text(calls_ratio(run, point.connections)),
                med(|p| p.p50_us),
                med(|p| p.p99_us),
                spread_text(tail_ratio(point)),
                med(|p| p.idle.rss / KIB),
                opt(|p| p.idle.heap.map(|h| h / KIB)),
                med(|p| p.idle.data / KIB),
                med(|p| p.load.rss / KIB),
                opt(|p| p.load.heap.map(|h| h / KIB)),
                med(|p| p.after.rss / KIB),
                med(|p| p.cpu_us_per_call),
                opt(|p| p.idle.tasks),
                med(|p| p.idle.timerfds),
                med(|p| p.idle.fds),
                med(|p| p.idle.maps),
                med(|p| p.connect_seconds),
            );
        }
    }
    md
}

/// The targets, judged on [`JUDGED`] at [`JUDGED_POINT`] (MISSED when not measured).
pub fn verdicts(runs: &[Run]) -> Vec<Verdict> {
    let run = runs.iter().find(|r| r.transport == JUDGED);
    let judged = run.and_then(|r| r.point(JUDGED_POINT));
    let label = JUDGED.label();
    let n = thousands(JUDGED_POINT);
    vec![
        Verdict {
            name: format!("{label}: calls/s at {n} connections / at {BASELINE_POINT}"),
            ratio: run.and_then(|r| calls_ratio(r, JUDGED_POINT)),
            target: Target::at_least(CALLS_TARGET),
        },
        Verdict {
            name: format!("{label}: p99 / p50 latency at {n} connections"),
            ratio: judged.and_then(tail_ratio),
            target: Target::at_most(TAIL_TARGET),
        },
        Verdict {
            name: format!(
                "{label}: server RSS per idle connection at {n} connections / {IDLE_BUDGET_KIB} KiB"
            ),
            ratio: judged.and_then(|j| j.spread(|p| p.idle.rss / KIB / IDLE_BUDGET_KIB)),
            target: Target::at_most(1.0),
        },
        Verdict {
            name: format!(
                "{}: server RSS per idle connection at {n} connections / \
                 {IDLE_SHARED_BUDGET_KIB} KiB",
                JUDGED_SHARED.label()
            ),
            ratio: runs
                .iter()
                .find(|r| r.transport == JUDGED_SHARED)
                .and_then(|r| r.point(JUDGED_POINT))
                .and_then(|j| j.spread(|p| p.idle.rss / KIB / IDLE_SHARED_BUDGET_KIB)),
            target: Target::at_most(1.0),
        },
    ]
}

/// Prints the ratios against the 64-connection point, transport by transport.
pub fn print_ratios(runs: &[Run]) {
    for run in runs {
        if run.point(BASELINE_POINT).is_none() {
            println!(
                "{}: no {BASELINE_POINT}-connection point, no ratios",
                run.transport.label()
            );
            continue;
        }
        println!(
            "{} (medians of the per-round ratios against {BASELINE_POINT} connections, [range]):",
            run.transport.label()
        );
        for p in run.measured() {
            let n = p.connections;
            println!(
                "  {n:>6} connections: calls/s {}x{}, p99/p50 {}, p99 {}x, CPU/call {}x",
                spread_text(calls_ratio(run, n)),
                against_substrate(runs, run, n),
                spread_text(tail_ratio(p)),
                spread_text(run.ratio(n, BASELINE_POINT, |p| p.p99_us)),
                spread_text(run.ratio(n, BASELINE_POINT, |p| p.cpu_us_per_call)),
            );
        }
    }
}

/// For a transport other than raw TCP, when raw TCP ran at `n` connections too: its
/// calls/s ratio divided by raw TCP's (medians), the share of the substrate's own scaling it
/// keeps. Only from the baseline point up: below it a raw connection carries several calls
/// one after the other (`raw.rs`), where the others pipeline them, so the share means nothing.
fn against_substrate(runs: &[Run], run: &Run, n: usize) -> String {
    if run.transport == Transport::RawTcp || n < BASELINE_POINT {
        return String::new();
    }
    let raw = runs.iter().find(|r| r.transport == Transport::RawTcp);
    match (calls_ratio(run, n), raw.and_then(|r| calls_ratio(r, n))) {
        (Some(ours), Some(raw)) if raw.median > 0.0 => format!(
            " (raw TCP {}x; {} of its scaling)",
            number(raw.median),
            number(ours.median / raw.median)
        ),
        _ => String::new(),
    }
}

/// Sets `ratio` (and its range, when there were several rounds) on a figure.
fn with_ratio(f: &mut bench_report::Figure, ratio: Option<Spread>) {
    if let Some(r) = ratio {
        f.ratio(r.median, "value / baseline");
        if r.lo < r.hi {
            f.ratio_range(r.lo, r.hi);
        }
    }
}

/// Rows of one transport at `point` (against its 64-connection point), judged where the
/// targets are.
fn rows(rec: &mut Recorder, run: &Run, point: &Rounds) {
    let label = run.transport.label();
    let n = thousands(point.connections);
    let judged = run.transport == JUDGED && point.connections == JUDGED_POINT;
    let judged_idle = (run.transport == JUDGED || run.transport == JUDGED_SHARED)
        && point.connections == JUDGED_POINT;
    let (idle_budget, budget) = idle_budget(run.transport);
    let base = run.point(BASELINE_POINT);
    let base_name = format!("{BASELINE_POINT} connections, same rounds");
    let f = rec.figure(
        GROUP,
        &format!("{label}: NULL calls/s, {n} connections"),
        point.median(|p| p.calls_per_s),
        "calls/s",
    );
    if let Some(b) = base {
        f.baseline(&base_name, b.median(|p| p.calls_per_s));
    }
    with_ratio(f, calls_ratio(run, point.connections));
    if judged {
        f.target(Target::at_least(CALLS_TARGET));
    }
    let f = rec.figure(
        GROUP,
        &format!("{label}: p99 latency, {n} connections"),
        point.median(|p| p.p99_us),
        "us",
    );
    f.baseline(
        format!("p50 at {n} connections"),
        point.median(|p| p.p50_us),
    );
    with_ratio(f, tail_ratio(point));
    if judged {
        f.target(Target::at_most(TAIL_TARGET));
    }
    let f = rec.figure(
        GROUP,
        &format!("{label}: server RSS per idle connection, {n} connections"),
        point.median(|p| p.idle.rss / KIB),
        "KiB",
    );
    f.baseline(budget, idle_budget);
    with_ratio(f, point.spread(|p| p.idle.rss / KIB / idle_budget));
    if judged_idle {
        f.target(Target::at_most(1.0));
    }
    rec.figure(
        GROUP,
        &format!("{label}: server RSS per connection idle after the load, {n} connections"),
        point.median(|p| p.after.rss / KIB),
        "KiB",
    )
    .baseline(budget, idle_budget)
    .ratio(
        point.median(|p| p.after.rss / KIB / idle_budget),
        "value / baseline",
    );
    if let Some(heap) = point.median_of(|p| p.idle.heap) {
        let f = rec.figure(
            GROUP,
            &format!("{label}: server heap per idle connection, {n} connections"),
            heap / KIB,
            "KiB",
        );
        f.baseline(budget, idle_budget);
        with_ratio(
            f,
            point.spread(|p| p.idle.heap.unwrap_or(f64::NAN) / KIB / idle_budget),
        );
    }
    let f = rec.figure(
        GROUP,
        &format!("{label}: server CPU time per call, {n} connections"),
        point.median(|p| p.cpu_us_per_call),
        "us",
    );
    if let Some(b) = base {
        f.baseline(&base_name, b.median(|p| p.cpu_us_per_call));
    }
    with_ratio(
        f,
        run.ratio(point.connections, BASELINE_POINT, |p| p.cpu_us_per_call),
    );
}

/// Writes the rows, plots and notes of the sweep into `rec`.
pub fn record(rec: &mut Recorder, runs: &[Run], options: &Options, setup: &str) {
    rec.note(GROUP, method(options, setup));
    let mut skipped = Vec::new();
    for run in runs {
        for point in &run.points {
            let what = match point.status() {
                Status::Skipped(why) => format!("skipped: {why}"),
                Status::Stopped(why) => format!("stopped there: {why}"),
                Status::Failed(why) => format!("FAILED: {why}"),
                Status::Measured => continue,
            };
            skipped.push(format!(
                "{} at {} connections {what}",
                run.transport.label(),
                thousands(point.connections)
            ));
        }
    }
    if !skipped.is_empty() {
        rec.note(GROUP, format!("Not measured: {}.", skipped.join("; ")));
    }
    rec.note(GROUP, table(runs));

    for run in runs {
        for &n in &ROW_POINTS {
            match run.point(n) {
                Some(point) => rows(rec, run, point),
                None if run.transport == JUDGED && n == JUDGED_POINT => {
                    // Not measured: the judged rows say so (n/a, MISSED).
                    let label = JUDGED.label();
                    let n = thousands(n);
                    for (name, unit, target) in [
                        (
                            format!("{label}: NULL calls/s, {n} connections"),
                            "calls/s",
                            Target::at_least(CALLS_TARGET),
                        ),
                        (
                            format!("{label}: p99 latency, {n} connections"),
                            "us",
                            Target::at_most(TAIL_TARGET),
                        ),
                        (
                            format!("{label}: server RSS per idle connection, {n} connections"),
                            "KiB",
                            Target::at_most(1.0),
                        ),
                    ] {
                        rec.figure(GROUP, &name, f64::NAN, unit).target(target);
                    }
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
        "{rounds} rounds, alternating the order of the points (ascending, then descending): \
         every figure is the median of a point's rounds, every ratio the median of the \
         per-round ratios [their range]. One server process (a fresh one per point and round; ours on a multi-thread runtime with a worker \
         per CPU, the library's default settings) and up to {clients} client processes holding \
         the connections, all on loopback: our RPC-over-RDMA server on the soft iWARP provider, \
         the same server taking every connection's receives from one shared receive queue \
         (`rdma-srq`: two buffers per connection and eight per call in flight, credits \
         granted from them), our ONC RPC over TCP server, and libtirpc's rpcgen server \
         (`csrc/server.c`, single-threaded), the last two called by our TCP clients. {call}, {in_flight} in \
         flight in all at every point: each client process's workers take the next of its \
         connections in turn for every call, so with fewer connections than calls in flight \
         each connection carries several at once, and with more every connection is used in \
         turn and at most {in_flight} have a call in flight at a time. {warmup:.1} s of calls, \
         then {measure:.1} s measured; latencies are per call as the client saw it \
         (histograms merged over the client processes), so they include the client \
         processes' own scheduling: where two client processes share a CPU, a reply can wait \
         for the other's time slice (a p99 of about 4.4 ms on the 2-CPU machine this was \
         written on, for every server; `--pin --client-processes 1` leaves that out). The ratios compare each point with \
         the {BASELINE_POINT}-connection point of the same round; issue 53's targets are \
         judged on RPC-over-RDMA at {judged} connections: calls/s at least \
         {CALLS_TARGET}x the {BASELINE_POINT}-connection point of the same round, p99 at most {TAIL_TARGET}x \
         p50, an idle connection at most {IDLE_BUDGET_KIB} KiB of the server's resident \
         memory, and at most {IDLE_SHARED_BUDGET_KIB} KiB with the shared receive queue. Per connection: what the server holds beyond what it held before any \
         connection, divided by the connections: idle once every connection made one call \
         and the server's tasks and descriptors stopped moving, loaded at the end of the \
         measurement, and idle again after it (every connection still open: what busy \
         connections keep); RSS is resident memory (VmRSS), heap what our server's allocator holds \
         (registered memory of 64 KiB or more is mapped apart from the heap: it shows in \
         VmData, and in RSS only where touched), tasks tokio's `num_alive_tasks` (tokio \
         keeps no count of its timers: timer descriptors are counted, timerfds). Server CPU \
         per call: its user + system time over the measurement divided by the calls. \
         {pinned}{local}{setup}",
        rounds = options.rounds,
        clients = options.client_processes,
        pinned = match &options.pin {
            Some(p) => format!(
                "The server ran on CPU {:?} and the client processes on CPUs {:?} (`--pin`). ",
                p.server, p.clients
            ),
            None => String::new(),
        },
        local = options.tuning.describe(),
        in_flight = options.in_flight,
        warmup = options.warmup.as_secs_f64(),
        measure = options.measure.as_secs_f64(),
        judged = thousands(JUDGED_POINT),
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
            s.point(p.connections as f64, p.median(|p| p.calls_per_s));
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
                s.point(p.connections as f64, p.median(value));
            }
        }
    }
    for run in runs {
        let kinds: &[Line<Option<f64>>] = &[
            ("RSS", |p| Some(p.idle.rss)),
            ("RSS after load", |p| Some(p.after.rss)),
            ("heap", |p| p.idle.heap),
        ];
        for (kind, value) in kinds {
            // libtirpc's server has no heap figure: no empty line in the legend.
            if run.measured().all(|p| p.median_of(value).is_none()) {
                continue;
            }
            let s = rec
                .series(
                    "scale_memory",
                    "Server memory per connection vs connections (idle after one call, and after the load)",
                    &format!("{} {kind}", run.transport.label()),
                )
                .axes("connections", "KiB per connection")
                .group(GROUP)
                .log_x()
                .log_y();
            for p in run.measured() {
                // A logarithmic axis cannot show a connection that cost nothing (or less:
                // noise at one connection).
                if let Some(v) = p.median_of(value).filter(|v| *v > 0.0) {
                    s.point(p.connections as f64, v / KIB);
                }
            }
        }
    }
}

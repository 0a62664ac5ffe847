//! `bench-report`: reads the benches' records and writes BENCHMARKS.md and its SVG plots.
//!
//! ```text
//! bench-report [--results target/bench-results] [--out BENCHMARKS.md] [--plots docs/bench]
//!              [--guest-results tests/vm/work/results] [--label TEXT] [--command TEXT] [--check]
//! ```
//!
//! Every `*.json` file in the results directory is read (JSON lines, [`bench_report::Record`]),
//! in the order they were written;
//! a `loadavg` file there, when present, is shown as the load at the start of the run. With
//! `--check` the tool exits 1 when a target was missed, naming each on standard error; it
//! exits 2 when the records cannot be read or the files cannot be written.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bench_report::machine::Machine;
use bench_report::record::read_records;
use bench_report::report::{render, Options};
use bench_report::{guest, Record};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "Writes BENCHMARKS.md and SVG plots from the benches' records")]
struct Args {
    /// The directory of the records (`<bench>.json`, JSON lines).
    #[arg(long, default_value = "target/bench-results")]
    results: PathBuf,
    /// The markdown file to write.
    #[arg(long, default_value = "BENCHMARKS.md")]
    out: PathBuf,
    /// The directory for the SVG plots (its old `*.svg` files are replaced).
    #[arg(long, default_value = "docs/bench")]
    plots: PathBuf,
    /// A QEMU guest results directory (`tests/vm/work/results`) to take the verbs and kernel
    /// NFS rows from; without it the report says the guest was not run.
    #[arg(long)]
    guest_results: Option<PathBuf>,
    /// A warning shown at the top of the report.
    #[arg(long)]
    label: Option<String>,
    /// The command that produced the records, shown under the title.
    #[arg(long)]
    command: Option<String>,
    /// Exit 1 when any target was missed.
    #[arg(long)]
    check: bool,
}

fn load(results: &Path) -> Result<Vec<Record>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(results)
        .map_err(|e| format!("{}: {e}", results.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    // In the order the benches ran (then by name), so rows and notes keep the run's order.
    files.sort_by_key(|p| {
        let modified = std::fs::metadata(p).and_then(|m| m.modified()).ok();
        (modified, p.clone())
    });
    if files.is_empty() {
        return Err(format!(
            "no records (*.json) in {}: run the benches first (scripts/bench)",
            results.display()
        ));
    }
    let mut records = Vec::new();
    for f in files {
        records.extend(read_records(&f)?);
    }
    Ok(records)
}

/// `to` as a link from the directory of `from` (`to` itself when it does not lie under it).
fn link_from(from: &Path, to: &Path) -> String {
    let base = from.parent().unwrap_or(Path::new(""));
    to.strip_prefix(base)
        .unwrap_or(to)
        .to_string_lossy()
        .into_owned()
}

fn write(args: &Args, report: &bench_report::report::Report) -> std::io::Result<()> {
    if let Some(dir) = args.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::create_dir_all(&args.plots)?;
    for old in std::fs::read_dir(&args.plots)? {
        let path = old?.path();
        if path.extension().is_some_and(|x| x == "svg") {
            std::fs::remove_file(path)?;
        }
    }
    for (name, svg) in &report.plots {
        std::fs::write(args.plots.join(name), svg)?;
    }
    std::fs::write(&args.out, &report.markdown)
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut records = match load(&args.results) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("bench-report: {e}");
            return ExitCode::from(2);
        }
    };
    records.extend(match &args.guest_results {
        Some(dir) => guest::records(dir),
        None => guest::not_run(),
    });
    let mut machine = Machine::probe();
    machine.load = std::fs::read_to_string(args.results.join("loadavg"))
        .ok()
        .map(|s| s.trim().to_string());
    let options = Options {
        label: args.label.clone(),
        command: args.command.clone(),
        plots_link: link_from(&args.out, &args.plots),
    };
    let report = render(&records, &machine, &options);
    if let Err(e) = write(&args, &report) {
        eprintln!("bench-report: writing the report: {e}");
        return ExitCode::from(2);
    }
    println!(
        "bench-report: wrote {} and {} plots in {}",
        args.out.display(),
        report.plots.len(),
        args.plots.display()
    );
    if report.missed.is_empty() {
        println!("bench-report: every target met");
        return ExitCode::SUCCESS;
    }
    for m in &report.missed {
        eprintln!("bench-report: target MISSED: {m}");
    }
    if args.check {
        eprintln!(
            "bench-report: {} target(s) missed (--check)",
            report.missed.len()
        );
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

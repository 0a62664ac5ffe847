//! The report tool on fixture records: a missed target is marked in the table and fails
//! `--check`; the markdown and an SVG plot are written; the guest rows say they did not run.

use std::path::Path;
use std::process::{Command, Output};

fn fixtures() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/results"
    ))
}

fn run(out: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bench-report"))
        .arg("--results")
        .arg(fixtures())
        .arg("--out")
        .arg(out.join("BENCHMARKS.md"))
        .arg("--plots")
        .arg(out.join("docs/bench"))
        .args(["--label", "fixture records"])
        .args(extra)
        .output()
        .expect("run bench-report")
}

#[test]
fn missed_target_is_marked_and_fails_check() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &["--check"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("target MISSED: Soft iWARP provider vs raw TCP: 64 B round trip vs raw TCP (ratio 1.50x"),
        "{stderr}"
    );
    let md = std::fs::read_to_string(dir.path().join("BENCHMARKS.md")).unwrap();
    let row = md
        .lines()
        .find(|l| l.starts_with("| 64 B round trip |"))
        .expect("the missed row");
    assert!(
        row.contains("**MISSED**") && row.contains("1.50x [1.40 .. 1.60]"),
        "{row}"
    );
    assert!(row.contains("<= 1.3"), "{row}");
    let met = md
        .lines()
        .find(|l| l.starts_with("| 1 MiB RDMA Write |"))
        .expect("the met row");
    assert!(met.ends_with("| >= 0.8 | met |"), "{met}");
    assert!(md.contains("2 targets, 1 met, 1 missed."), "{md}");
    assert!(md.contains("> **fixture records**"), "{md}");
    assert!(
        md.contains("## Machine") && md.contains("| CPUs available |"),
        "{md}"
    );
    assert!(
        md.contains("![Throughput vs message size](docs/bench/sample_throughput.svg)"),
        "{md}"
    );
    assert!(
        md.contains("Not run: these rows come from the QEMU guest"),
        "{md}"
    );
    let svg = std::fs::read_to_string(dir.path().join("docs/bench/sample_throughput.svg")).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
    assert!(svg.contains("Throughput vs message size") && svg.contains("RDMA Write"));
}

#[test]
fn without_check_a_miss_is_reported_but_passes() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &[]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("target MISSED"));
}

#[test]
fn no_records_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_bench-report"))
        .arg("--results")
        .arg(dir.path())
        .arg("--out")
        .arg(dir.path().join("B.md"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no records"));
}

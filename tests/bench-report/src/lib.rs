//! The project's benchmark records and report.
//!
//! Every bench writes what it measured as [`Record`]s ([`Recorder`], one JSON object a line in
//! `target/bench-results/<bench>.json`); `scripts/bench` runs every bench, then the
//! `bench-report` tool (feature `report`, on by default) reads the records and writes
//! `BENCHMARKS.md` with SVG plots, marking every missed target and, with `--check`, failing on
//! one. Benches depend on this crate with `default-features = false`: records only.
#![warn(missing_docs)]

pub mod cpu;
pub mod iperf3;
pub mod record;

#[cfg(feature = "report")]
pub mod guest;
#[cfg(feature = "report")]
pub mod machine;
#[cfg(feature = "report")]
pub mod plot;
#[cfg(feature = "report")]
pub mod report;

pub use record::{quick, Cmp, Figure, Record, Recorder, Series, Target};

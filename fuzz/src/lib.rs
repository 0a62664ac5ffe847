//! Shared pieces of the fuzz targets in `fuzz_targets/`.
//!
//! * [`alloc_bound`]: the counting global allocator every target installs; one allocation
//!   larger than the target's bound (derived from the input's length) aborts the run, which
//!   libFuzzer reports as a crash with the input saved.
//! * [`cases`]: how a target splits its raw input into a case (options, chunk data, bytes to
//!   decode), and the inverse, used by `examples/make_seeds.rs` to write the seed corpus.
//! * [`targets`]: the targets' bodies and bounds, shared by the libFuzzer entries in
//!   `fuzz_targets/`, the replay test (`tests/replay.rs`: every seed and regression input,
//!   under plain `cargo test`) and `examples/alloc_peaks.rs`.
#![warn(missing_docs)]

pub mod alloc_bound;
pub mod cases;
pub mod targets;

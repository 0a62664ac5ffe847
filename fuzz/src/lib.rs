//! Shared pieces of the fuzz targets in `fuzz_targets/`.
//!
//! * [`alloc_bound`]: the counting global allocator every target installs; one allocation
//!   larger than the target's bound (derived from the input's length) aborts the run, which
//!   libFuzzer reports as a crash with the input saved.
//! * [`cases`]: how a target splits its raw input into a case (options, chunk data, bytes to
//!   decode), and the inverse, used by `examples/make_seeds.rs` to write the seed corpus.
#![warn(missing_docs)]

pub mod alloc_bound;
pub mod cases;

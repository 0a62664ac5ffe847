//! Every committed input of every target, replayed without libFuzzer: the seeds
//! (`seeds/TARGET/`) and the inputs of past findings (`regressions/TARGET/`, each fixed in the
//! crate that owns the code and tested there too). Each must run without a panic and without
//! an allocation over the target's bound (an allocation over it aborts this test binary).

use std::fs;
use std::path::Path;

use rpcrdma_fuzz::alloc_bound::{with_bound, BoundedAlloc};
use rpcrdma_fuzz::targets::ALL;

#[global_allocator]
static ALLOC: BoundedAlloc = BoundedAlloc;

/// Runs every file of `dir/TARGET/` through its target; returns how many ran.
fn replay(dir: &str) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut count = 0;
    for target in ALL {
        let Ok(entries) = fs::read_dir(root.join(target.name)) else {
            continue;
        };
        let mut files: Vec<_> = entries.map(|e| e.unwrap().path()).collect();
        files.sort();
        for file in files {
            let data = fs::read(&file).unwrap();
            eprintln!("{} {}", target.name, file.display());
            let ((), peak) = with_bound((target.limit)(data.len()), || (target.run)(&data));
            assert!(peak <= (target.limit)(data.len()));
            count += 1;
        }
    }
    count
}

#[test]
fn every_seed_and_regression_input_runs_clean() {
    let seeds = replay("seeds");
    assert!(
        seeds >= ALL.len() * 4,
        "seeds of every target ({seeds} files)"
    );
    let regressions = replay("regressions");
    eprintln!("{seeds} seeds and {regressions} regression inputs ran clean");
}

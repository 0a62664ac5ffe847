//! The largest single allocation each target makes over its seeds and its local corpus,
//! next to its bound: how much room the bound leaves (figures for `REPORT.md`).
//!
//!     cargo run --release --manifest-path fuzz/Cargo.toml --example alloc_peaks

use std::fs;
use std::path::Path;

use rpcrdma_fuzz::alloc_bound::{with_bound, BoundedAlloc};
use rpcrdma_fuzz::targets::ALL;

#[global_allocator]
static ALLOC: BoundedAlloc = BoundedAlloc;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    println!("target: inputs, largest allocation (input length, its bound), smallest room left");
    for target in ALL {
        let mut inputs = 0;
        let mut largest = (0usize, 0usize);
        let mut tightest = f64::INFINITY;
        for dir in ["seeds", "corpus"] {
            let Ok(entries) = fs::read_dir(root.join(dir).join(target.name)) else {
                continue;
            };
            for entry in entries {
                let data = fs::read(entry.expect("a directory entry").path()).expect("an input");
                let limit = (target.limit)(data.len());
                let ((), peak) = with_bound(limit, || (target.run)(&data));
                inputs += 1;
                if peak > largest.0 {
                    largest = (peak, data.len());
                }
                tightest = tightest.min(limit as f64 / peak.max(1) as f64);
            }
        }
        println!(
            "{}: {inputs} inputs, {} bytes ({} bytes in, bound {}), bound / peak >= {tightest:.1}",
            target.name,
            largest.0,
            largest.1,
            (target.limit)(largest.1)
        );
    }
}

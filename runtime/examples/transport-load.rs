//! Load on the RPC-over-RDMA transport: many clients, each on its own connection, making mixed
//! calls (NULL, 1 KiB echoes, bulk reads into registered buffers, bulk writes) at once against
//! one server over the software iWARP provider on loopback. Every result is checked; the run
//! prints latency percentiles per kind of call and the heap (counted by this binary's
//! allocator) after the first thousand calls and before the last thousand.
//!
//! ```text
//! cargo run --release -p rpcrdma --example transport-load                 # 64 x 10,000 calls
//! cargo run --release -p rpcrdma --example transport-load -- --clients 8 --calls 1000
//! ```
//! Exits non-zero if any call failed or came back wrong, or if the heap grew by more than
//! 1 MiB between the first and the last thousand calls.

use std::alloc::{GlobalAlloc, Layout, System};
use std::process::ExitCode;
use std::sync::atomic::{AtomicI64, Ordering};

use clap::Parser;
use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::transport::conformance::load::{run_load, LoadConfig};

struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: forwards to the system allocator and only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Load on RPC-over-RDMA over the software provider.
#[derive(Parser, Debug)]
struct Args {
    /// Clients, each on its own connection.
    #[arg(long, default_value_t = 64)]
    clients: usize,
    /// Calls per client.
    #[arg(long, default_value_t = 10_000)]
    calls: usize,
    /// Size of the bulk reads and writes, in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    bulk: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let config = LoadConfig {
        clients: args.clients,
        calls_per_client: args.calls,
        bulk_size: args.bulk,
    };
    println!(
        "{} clients x {} calls (4 NULL, 4 ECHO 1 KiB, 1 READ and 1 WRITE of {} bytes in every 10)",
        config.clients, config.calls_per_client, config.bulk_size
    );
    let report = match rt.block_on(run_load(
        SoftProvider::default(),
        "127.0.0.1:0".parse().expect("an address"),
        config,
        || LIVE.load(Ordering::Relaxed),
    )) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("transport-load: {e}");
            return ExitCode::FAILURE;
        }
    };
    for line in report.lines() {
        println!("{line}");
    }
    let growth = report.heap.1 - report.heap.0;
    if report.failed > 0 {
        println!("FAILED: {} calls failed or came back wrong", report.failed);
        return ExitCode::FAILURE;
    }
    if growth > 1 << 20 {
        println!("FAILED: the heap grew by {growth} bytes");
        return ExitCode::FAILURE;
    }
    println!("every result checked, none lost; heap flat ({growth:+} bytes)");
    ExitCode::SUCCESS
}

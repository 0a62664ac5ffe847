//! rpc-demo: a real ONC RPC program (ECHO) over RPC-over-RDMA version 1 on the software
//! iWARP provider. The flow lives in `src/demo.rs`.
//!
//! ```text
//! cargo run -p rpcrdma-specs --example rpc-demo                       # both ends, one process
//! cargo run -p rpcrdma-specs --example rpc-demo -- --size 65536
//! cargo run -p rpcrdma-specs --example rpc-demo -- --listen 127.0.0.1:20049
//! cargo run -p rpcrdma-specs --example rpc-demo -- --connect 127.0.0.1:20049
//! ```

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use rpcrdma::rdma::soft::{SoftConfig, SoftProvider};
use rpcrdma::rdma::{Listener, Provider};

#[path = "../src/demo.rs"]
#[allow(dead_code)]
mod demo;
mod rpc_msg {
    pub use rpcrdma_specs::rpc_msg::*;
}
mod v1 {
    pub use rpcrdma_specs::v1::*;
}

/// ECHO over RPC-over-RDMA version 1 (software iWARP provider).
#[derive(Parser, Debug)]
#[command(name = "rpc-demo")]
struct Args {
    /// Run only the responder, listening on this address, for one connection.
    #[arg(long, conflicts_with = "connect")]
    listen: Option<SocketAddr>,
    /// Run only the requester, against the responder at this address.
    #[arg(long)]
    connect: Option<SocketAddr>,
    /// ECHO payload size in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    size: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.size > demo::MAX_ECHO_SIZE {
        eprintln!(
            "rpc-demo: --size is limited to {} bytes",
            demo::MAX_ECHO_SIZE
        );
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rpc-demo: tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rpc-demo: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: &Args) -> demo::Result<()> {
    let provider = SoftProvider::new(SoftConfig::default());
    if let Some(addr) = args.listen {
        let listener = provider.listen(addr).await?;
        println!("responder: listening on {}", listener.local_addr()?);
        demo::serve(&listener).await?;
        return Ok(());
    }
    let report = match args.connect {
        Some(addr) => demo::request(&provider, addr, args.size).await?,
        None => demo::run_in_process(args.size).await?,
    };
    println!(
        "--- NULL round trip {:.1} us; ECHO {} bytes round trip {:.1} us ({}); \
         ERR_VERS probe {}; ERR_CHUNK probe {}; PROC_UNAVAIL/GARBAGE_ARGS probe {}",
        report.null_rtt.as_secs_f64() * 1e6,
        report.size,
        report.echo_rtt.as_secs_f64() * 1e6,
        if report.used_chunks {
            "Read + Write chunks"
        } else {
            "inline"
        },
        ok(report.err_vers_ok),
        ok(report.err_chunk_ok),
        ok(report.rpc_refusals_ok),
    );
    if report.verified && report.err_vers_ok && report.err_chunk_ok && report.rpc_refusals_ok {
        println!("verification OK");
        Ok(())
    } else {
        Err(demo::DemoError(
            "verification failed (see the transcript above)".into(),
        ))
    }
}

fn ok(b: bool) -> &'static str {
    if b {
        "OK"
    } else {
        "FAILED"
    }
}

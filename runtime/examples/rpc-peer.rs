//! rpc-peer: the transport suite's program served or called over RPC-over-RDMA in its own
//! process, so that a process can be killed mid-transfer and the other end watched.
//!
//! ```text
//! rpc-peer serve --listen ADDR [--provider soft|verbs]
//!     serves; prints `connections=N registrations=M` whenever either changes
//! rpc-peer call --connect ADDR [--provider soft|verbs] [--calls N] [--bulk BYTES]
//!     NULL, then bulk WRITEs and READs (every result checked); prints `call N ok` as it goes
//! ```
//! `registrations` counts the provider's live registrations in the serving process (the verbs
//! provider's memory regions and windows, or the soft provider's), so a client killed
//! mid-transfer must leave the count where it was before it connected.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use rpcrdma::rdma::soft::{self, SoftProvider};
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::{CallOptions, Client};
use rpcrdma::transport::conformance::program::{
    self, pattern_of, testvers, word_sum, EchoArgs, TestversClient,
};
use rpcrdma::transport::{serve, RdmaConfig, RdmaTransport};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ProviderKind {
    Soft,
    Verbs,
}

/// The transport suite's program over RPC-over-RDMA, one end per process.
#[derive(Parser, Debug)]
struct Args {
    #[command(subcommand)]
    command: Command,
    /// The RDMA provider.
    #[arg(long, value_enum, default_value_t = ProviderKind::Soft, global = true)]
    provider: ProviderKind,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve until killed.
    Serve {
        /// Where to listen.
        #[arg(long)]
        listen: SocketAddr,
    },
    /// Call, checking every result.
    Call {
        /// The server.
        #[arg(long)]
        connect: SocketAddr,
        /// Bulk calls to make after the NULL.
        #[arg(long, default_value_t = 100)]
        calls: u32,
        /// Size of each bulk WRITE and READ.
        #[arg(long, default_value_t = 1 << 20)]
        bulk: usize,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let result = match args.provider {
        ProviderKind::Soft => rt.block_on(run(
            SoftProvider::default(),
            soft::live_registrations,
            args.command,
        )),
        ProviderKind::Verbs => run_verbs(&rt, args.command),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rpc-peer: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(feature = "verbs")]
fn run_verbs(rt: &tokio::runtime::Runtime, command: Command) -> Result<(), String> {
    use rpcrdma::rdma::verbs::{live_registrations, VerbsProvider};
    rt.block_on(run(VerbsProvider::new(), live_registrations, command))
}

#[cfg(not(feature = "verbs"))]
fn run_verbs(_: &tokio::runtime::Runtime, _: Command) -> Result<(), String> {
    Err("built without the verbs feature (cargo build --features verbs)".into())
}

async fn run<P: Provider + Clone>(
    provider: P,
    registrations: fn() -> usize,
    command: Command,
) -> Result<(), String> {
    match command {
        Command::Serve { listen } => {
            let listener = provider.listen(listen).await.map_err(|e| e.to_string())?;
            let at = listener.local_addr().map_err(|e| e.to_string())?;
            let listener = Arc::new(serve::<P>(
                listener,
                program::server(),
                RdmaConfig::default(),
            ));
            println!("listening on {at}");
            tokio::spawn({
                let l = listener.clone();
                async move { l.run().await }
            });
            let mut last = None;
            loop {
                let now = (listener.stats().len(), registrations());
                if last != Some(now) {
                    println!("connections={} registrations={}", now.0, now.1);
                    last = Some(now);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Command::Call {
            connect,
            calls,
            bulk,
        } => {
            let transport = RdmaTransport::connect(
                Arc::new(provider),
                connect,
                RdmaConfig::default().timeout(Some(Duration::from_secs(30))),
            )
            .await
            .map_err(|e| format!("connecting: {e}"))?;
            let client = TestversClient::new(Client::new(transport));
            client.test_null().await.map_err(|e| format!("NULL: {e}"))?;
            println!("call 0 ok");
            for i in 1..=calls {
                let data = pattern_of(bulk, (i % 8) as u8);
                let sum = client
                    .test_sum(EchoArgs {
                        tag: i,
                        data: data.clone(),
                    })
                    .await
                    .map_err(|e| format!("WRITE {i}: {e}"))?;
                if sum != word_sum(&data) {
                    return Err(format!("WRITE {i}: the server got other bytes"));
                }
                let buffer = client.rpc().buffer(bulk);
                let r = client
                    .rpc()
                    .call_with::<testvers::TestFill>(
                        &(bulk as u32),
                        CallOptions::new().reply_buffer(buffer),
                    )
                    .await
                    .map_err(|e| format!("READ {i}: {e}"))?;
                if r.data != pattern_of(bulk, 5) {
                    return Err(format!("READ {i}: other bytes came back"));
                }
                println!("call {i} ok");
            }
            println!("--- {calls} bulk WRITE and READ calls of {bulk} bytes, every result checked");
            Ok(())
        }
    }
}

//! nfs4-server: an NFSv4.1 server over an in-memory file system (`rpcrdma_nfs4::server`), over
//! RPC-over-RDMA and, if asked, TCP, for the Linux kernel's client and for pynfs:
//!
//! ```text
//! nfs4-server --listen 192.0.2.1 [--rdma-port 20049] [--tcp-port 2049]
//!             [--provider soft|verbs] [--capacity-mib 1024] [--lease-seconds 90]
//!             [--no-delegations] [--no-write-delegations] [--log] [--threads 2]
//! mount -t nfs -o vers=4.1,proto=rdma,port=20049 192.0.2.1:/ /mnt
//! ```
//!
//! NFSv4 needs no MOUNT protocol or port mapper: the client starts at the root filehandle
//! (PUTROOTFH). Over RPC-over-RDMA the server offers the backward direction (RFC 8166 section
//! 8), and over TCP calls back on the client's connection (RFC 5661 section 2.10.3.1): NFSv4.1
//! uses either as the session's backchannel for CB_RECALL of delegations. It prints one
//! `listening ...` line when it accepts calls, and serves until ctrl-C or SIGTERM.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::tcp::{TcpConfig, TcpServer};
use rpcrdma::transport::{serve, RdmaConfig};
use rpcrdma_nfs4::server::{Nfs4Config, Nfs4Server};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ProviderKind {
    /// The software iWARP provider (RDMA over TCP, in this process).
    Soft,
    /// libibverbs and librdmacm (a real RDMA device, Soft-RoCE included).
    Verbs,
}

/// An NFSv4.1 server, files in memory, over RPC-over-RDMA and TCP.
#[derive(Parser, Debug)]
#[command(name = "nfs4-server")]
struct Args {
    /// The address to serve on.
    #[arg(long)]
    listen: IpAddr,
    /// NFSv4.1 over RPC-over-RDMA listens here (20049 is the port RFC 5666 names for NFS).
    #[arg(long, default_value_t = 20049)]
    rdma_port: u16,
    /// Do not serve RPC-over-RDMA (TCP only: give --tcp-port).
    #[arg(long)]
    no_rdma: bool,
    /// Also serve NFSv4.1 over TCP here (pynfs speaks only TCP).
    #[arg(long)]
    tcp_port: Option<u16>,
    /// The RDMA provider.
    #[arg(long, value_enum, default_value_t = ProviderKind::Soft)]
    provider: ProviderKind,
    /// Bytes the file system holds, in MiB (NFS4ERR_NOSPC beyond).
    #[arg(long, default_value_t = 1024)]
    capacity_mib: u64,
    /// The lease, in seconds (and how long a recalled delegation may stay unreturned).
    #[arg(long, default_value_t = 90)]
    lease_seconds: u32,
    /// Grant no delegations.
    #[arg(long)]
    no_delegations: bool,
    /// Grant read delegations only, never write delegations (which a client gets only when it
    /// asks for one).
    #[arg(long)]
    no_write_delegations: bool,
    /// Print one line per COMPOUND on stderr: the caller, each operation's status.
    #[arg(long)]
    log: bool,
    /// The server's threads.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..))]
    threads: u16,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let mut builder = match args.threads {
        1 => tokio::runtime::Builder::new_current_thread(),
        n => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(n.into());
            b
        }
    };
    let rt = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("nfs4-server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match args.provider {
        ProviderKind::Soft => rt.block_on(run(
            rpcrdma::rdma::soft::SoftProvider::new(Default::default()),
            &args,
        )),
        ProviderKind::Verbs => run_verbs(&rt, &args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nfs4-server: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(feature = "verbs")]
fn run_verbs(rt: &tokio::runtime::Runtime, args: &Args) -> Result<(), String> {
    rt.block_on(run(rpcrdma::rdma::verbs::VerbsProvider::new(), args))
}

#[cfg(not(feature = "verbs"))]
fn run_verbs(_: &tokio::runtime::Runtime, _: &Args) -> Result<(), String> {
    Err("built without the verbs feature (cargo build -p rpcrdma-nfs4 --features verbs)".into())
}

async fn run<P: Provider>(provider: P, args: &Args) -> Result<(), String> {
    let server = Nfs4Server::new(Nfs4Config {
        capacity: args.capacity_mib.saturating_mul(1 << 20),
        lease_seconds: args.lease_seconds.max(1),
        delegations: !args.no_delegations,
        write_delegations: !args.no_write_delegations,
        log_calls: args.log,
        ..Nfs4Config::default()
    });
    let rpc = server.rpc_server();

    let rdma = if args.no_rdma {
        None
    } else {
        let addr = SocketAddr::new(args.listen, args.rdma_port);
        let listener = provider
            .listen(addr)
            .await
            .map_err(|e| format!("RDMA listen on {addr}: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        // One backward credit: the server sends one callback at a time (CB_RECALL).
        let config = RdmaConfig::default().backward_credits(1);
        let rdma = Arc::new(serve::<P>(listener, rpc.clone(), config));
        let task = tokio::spawn({
            let rdma = rdma.clone();
            async move { rdma.run().await }
        });
        Some((rdma, task, addr))
    };
    let tcp = match args.tcp_port {
        Some(port) => {
            let addr = SocketAddr::new(args.listen, port);
            Some(
                TcpServer::bind(addr, rpc.clone(), TcpConfig::new())
                    .await
                    .map_err(|e| format!("TCP listen on {addr}: {e}"))?,
            )
        }
        None => None,
    };
    if rdma.is_none() && tcp.is_none() {
        return Err("nothing to serve: --no-rdma without --tcp-port".into());
    }
    let mut line = String::from("listening nfs4.1");
    if let Some((_, _, addr)) = &rdma {
        line += &format!(" rdma {addr} provider {:?}", args.provider);
    }
    if let Some(tcp) = &tcp {
        line += &format!(" tcp {}", tcp.local_addr());
    }
    println!("{line} capacity {} MiB", args.capacity_mib);

    let stop = stopped()?;
    let result = match &rdma {
        Some((_, task, _)) => tokio::select! {
            signal = stop => signal,
            _ = wait_finished(task) => Err("the RDMA listener stopped".to_string()),
        },
        None => stop.await,
    };
    if let Some((rdma, task, _)) = rdma {
        let _ = tokio::time::timeout(Duration::from_secs(5), rdma.shutdown()).await;
        task.abort();
    }
    if let Some(tcp) = tcp {
        let _ = tokio::time::timeout(Duration::from_secs(5), tcp.shutdown()).await;
    }
    let (clients, sessions, stateids) = server.state_counts();
    println!(
        "stopped: {clients} client record(s), {sessions} session(s), {stateids} stateid(s) left"
    );
    result
}

/// Completes when the listener's task has ended.
async fn wait_finished<T>(task: &tokio::task::JoinHandle<T>) {
    while !task.is_finished() {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn stopped() -> Result<impl std::future::Future<Output = Result<(), String>>, String> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).map_err(|e| format!("SIGTERM: {e}"))?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(|e| format!("SIGINT: {e}"))?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => Ok(()),
            _ = term.recv() => Ok(()),
        }
    })
}

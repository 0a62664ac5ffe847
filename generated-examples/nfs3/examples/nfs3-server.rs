//! nfs3-server: an NFSv3 server over an in-memory file system (`rpcrdma_nfs3::memfs`), NFS over
//! RPC-over-RDMA and MOUNT version 3 over TCP, for the Linux kernel's client:
//!
//! ```text
//! nfs3-server --listen 192.0.2.1 [--rdma-port 20050] [--mount-port 20051] [--export /export]
//!             [--provider soft|verbs] [--capacity-mib 1024] [--log] [--register]
//!             [--tcp-port 2049] [--drop-every SECS]
//! mount -t nfs -o vers=3,proto=rdma,port=20050,mountproto=tcp,mountport=20051,nolock \
//!     192.0.2.1:/export /mnt
//! ```
//!
//! It prints one `listening ...` line when both programs accept calls, and serves until ctrl-C
//! or SIGTERM. `--register` also records MOUNT v3 over TCP with the port mapper on
//! 127.0.0.1:111 and removes it on the way out. NFS itself is not registered: the port mapper
//! version 2 knows only TCP and UDP, and a TCP mapping to a port that speaks RPC-over-RDMA
//! would send TCP clients astray. Nobody asks for it either: mount.nfs skips all port probing
//! for proto=rdma, and the kernel takes the NFS port from port= (20049 when absent) and asks
//! the port mapper only for MOUNT, and only when mountport= is absent.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use rpcrdma::rdma::{Connection, Listener, Provider};
use rpcrdma::rpc::tcp::{TcpConfig, TcpServer};
use rpcrdma::transport::{serve, RdmaConfig};
use rpcrdma_nfs3::memfs::{MemFs, MemFsConfig};
use rpcrdma_nfs3::mount3::mount_program::{self, mount_v3};
use rpcrdma_nfs3::pmap::pmap_prog::pmap_vers::PmapVersClient;
use rpcrdma_nfs3::pmap::{Mapping, IPPROTO_TCP, PMAP_PORT};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ProviderKind {
    /// The software iWARP provider (RDMA over TCP, in this process).
    Soft,
    /// libibverbs and librdmacm (a real RDMA device, Soft-RoCE included).
    Verbs,
}

/// An NFSv3 server over RPC-over-RDMA, files in memory, MOUNT over TCP.
#[derive(Parser, Debug)]
#[command(name = "nfs3-server")]
struct Args {
    /// The address to serve on (both programs).
    #[arg(long)]
    listen: IpAddr,
    /// NFS version 3 over RPC-over-RDMA listens here.
    #[arg(long, default_value_t = 20050)]
    rdma_port: u16,
    /// MOUNT version 3 over TCP listens here.
    #[arg(long, default_value_t = 20051)]
    mount_port: u16,
    /// Also serve NFS version 3 over TCP here (to tell a transport problem from an NFS one).
    #[arg(long)]
    tcp_port: Option<u16>,
    /// The export path MOUNT accepts.
    #[arg(long, default_value = "/export")]
    export: String,
    /// The RDMA provider.
    #[arg(long, value_enum, default_value_t = ProviderKind::Soft)]
    provider: ProviderKind,
    /// Bytes the file system holds, in MiB (NFS3ERR_NOSPC beyond).
    #[arg(long, default_value_t = 1024)]
    capacity_mib: u64,
    /// Print one line per call on stderr: the caller, the procedure and its status.
    #[arg(long)]
    log: bool,
    /// Register MOUNT with the port mapper on 127.0.0.1:111 (and unregister on exit).
    #[arg(long)]
    register: bool,
    /// With `--provider soft`: do not ask for MPA CRCs (the peer may still; TCP's checksum
    /// then guards the data alone). Linux 6.1 siw oopses computing the CRC of a Send on a
    /// connection reset under it (tests/vm/README.md).
    #[arg(long)]
    no_mpa_crc: bool,
    /// The server's threads: 1 runs every connection on one thread (tokio's current-thread
    /// runtime: no hand-off between threads, for a few clients with one call at a time each).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..))]
    threads: u16,
    /// A fault injected for tests: every this many seconds, disconnect every RPC-over-RDMA
    /// connection (the client reconnects and sends again what had no reply; the reply cache
    /// answers what already ran). Each drop prints a `dropped N connection(s)` line.
    #[arg(long)]
    drop_every: Option<u64>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    // Warnings by default; `RUST_LOG=rpcrdma::conn=debug` adds every connection's accept,
    // handshake and close (with its reason), `rpcrdma::call=debug` every call.
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
            eprintln!("nfs3-server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match args.provider {
        ProviderKind::Soft => {
            let mut config = rpcrdma::rdma::soft::SoftConfig::default();
            config.mpa.crc = !args.no_mpa_crc;
            rt.block_on(run(rpcrdma::rdma::soft::SoftProvider::new(config), &args))
        }
        ProviderKind::Verbs => run_verbs(&rt, &args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nfs3-server: {e}");
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
    Err("built without the verbs feature (cargo build -p rpcrdma-nfs3 --features verbs)".into())
}

async fn run<P: Provider>(provider: P, args: &Args) -> Result<(), String> {
    let config = MemFsConfig::new(args.export.clone())
        .capacity(args.capacity_mib.saturating_mul(1 << 20))
        .log_calls(args.log);
    let fs = Arc::new(MemFs::new(config));

    let rdma_addr = SocketAddr::new(args.listen, args.rdma_port);
    let listener = provider
        .listen(rdma_addr)
        .await
        .map_err(|e| format!("RDMA listen on {rdma_addr}: {e}"))?;
    let rdma_addr = listener.local_addr().map_err(|e| e.to_string())?;
    // The defaults fit the Linux client: a 4 KiB inline threshold both ways (what it
    // advertises and assumes), and 32 credits granted (it asks for up to 128 and takes what is
    // granted).
    let nfs = fs.nfs_server();
    let rdma = Arc::new(serve::<P>(listener, nfs.clone(), RdmaConfig::default()));
    let mut rdma_task = tokio::spawn({
        let rdma = rdma.clone();
        async move { rdma.run().await }
    });
    let dropper = args.drop_every.map(|secs| {
        let rdma = rdma.clone();
        tokio::spawn(async move {
            let every = Duration::from_secs(secs.max(1));
            loop {
                tokio::time::sleep(every).await;
                let connections = rdma.connections();
                for conn in &connections {
                    let _ = conn.disconnect().await;
                }
                let n = connections.len();
                println!("dropped {n} connection{}", if n == 1 { "" } else { "s" });
            }
        })
    });

    let mount_addr = SocketAddr::new(args.listen, args.mount_port);
    let mount = TcpServer::bind(mount_addr, fs.mount_server(), TcpConfig::new())
        .await
        .map_err(|e| format!("MOUNT listen on {mount_addr}: {e}"))?;
    let mount_addr = mount.local_addr();
    let nfs_tcp = match args.tcp_port {
        Some(port) => {
            let addr = SocketAddr::new(args.listen, port);
            let tcp = TcpServer::bind(addr, nfs.clone(), TcpConfig::new())
                .await
                .map_err(|e| format!("NFS over TCP listen on {addr}: {e}"))?;
            Some(tcp)
        }
        None => None,
    };
    let tcp_line = nfs_tcp
        .as_ref()
        .map_or_else(String::new, |t| format!(" nfs3 tcp {}", t.local_addr()));

    let registered = if args.register {
        register(mount_addr.port()).await
    } else {
        Vec::new()
    };

    // Handlers first, so that a signal right after the line below is not fatal.
    let stop = stopped()?;
    println!(
        "listening nfs3 rdma {rdma_addr}{tcp_line} mount tcp {mount_addr} export {} capacity \
         {} MiB provider {:?}",
        args.export, args.capacity_mib, args.provider
    );
    let result = tokio::select! {
        signal = stop => signal,
        ended = &mut rdma_task => Err(match ended {
            Ok(Ok(())) => "the RDMA listener stopped".to_string(),
            Ok(Err(e)) => format!("the RDMA listener failed: {e}"),
            Err(e) => format!("the RDMA listener task: {e}"),
        }),
    };
    if let Some(dropper) = dropper {
        dropper.abort();
    }
    unregister(&registered).await;
    // Every transport stops taking calls at once and answers the ones it is serving (bounded:
    // a client that never lets a reply complete does not hold the stop up).
    let _ = tokio::time::timeout(Duration::from_secs(5), rdma.shutdown()).await;
    rdma_task.abort();
    let _ = tokio::time::timeout(Duration::from_secs(5), mount.shutdown()).await;
    if let Some(tcp) = nfs_tcp {
        let _ = tokio::time::timeout(Duration::from_secs(5), tcp.shutdown()).await;
    }
    // What a reconnecting client cost: its connections, and the calls it sent again whose
    // replies the duplicate request cache gave back instead of running them twice.
    let connections = rdma.total_stats().connections;
    if let Some(cache) = nfs.reply_cache_stats() {
        println!(
            "rdma connections {connections}, reply cache: {} replayed, {} recorded, {} evicted",
            cache.hits, cache.misses, cache.evictions
        );
    }
    println!("stopped");
    result
}

/// A future that completes on ctrl-C (SIGINT) or SIGTERM, its handlers installed now.
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

/// The mappings `--register` makes: MOUNT v3 over TCP.
fn mappings(mount_port: u16) -> [Mapping; 1] {
    [Mapping {
        prog: mount_program::PROGRAM,
        vers: mount_v3::VERSION,
        prot: IPPROTO_TCP,
        port: u32::from(mount_port),
    }]
}

async fn pmap() -> Result<PmapVersClient, String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], PMAP_PORT as u16));
    rpcrdma::rpc::tcp::connect(addr)
        .await
        .map(PmapVersClient::new)
        .map_err(|e| format!("port mapper at {addr}: {e}"))
}

/// What to do when the port mapper will not register MOUNT.
const REFUSED: &str = "some rpcbind builds take SET over TCP only when started with -i or \
    -L; give mountport= (and port=) to mount instead";

/// PMAPPROC_SET of each mapping; the ones the port mapper took (Debian's rpcbind takes them
/// from 127.0.0.1). A refusal is reported, not fatal: some rpcbind builds take SET over TCP
/// only when started with -i or -L, and the mount command's ports make it unnecessary.
async fn register(mount_port: u16) -> Vec<Mapping> {
    let client = match pmap().await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("nfs3-server: not registered: {e}");
            return Vec::new();
        }
    };
    let mut done = Vec::new();
    for mapping in mappings(mount_port) {
        // Another MOUNT (knfsd's mountd) may be registered: leave it alone. One at our port
        // is an earlier run's, still ours.
        let asked = Mapping { port: 0, ..mapping };
        match client.pmapproc_getport(asked).await {
            Ok(0) => {}
            Ok(port) if port == mapping.port => {
                println!("program {} already registered at port {port}", mapping.prog);
                done.push(mapping);
                continue;
            }
            Ok(port) => {
                eprintln!(
                    "nfs3-server: program {} version {} is registered at port {port} by another \
                     server: not registered",
                    mapping.prog, mapping.vers
                );
                continue;
            }
            Err(e) => {
                eprintln!("nfs3-server: PMAPPROC_GETPORT {}: {e}", mapping.prog);
                continue;
            }
        }
        match client.pmapproc_set(mapping).await {
            Ok(true) => {
                println!(
                    "registered program {} version {} port {}",
                    mapping.prog, mapping.vers, mapping.port
                );
                done.push(mapping);
            }
            Ok(false) => eprintln!(
                "nfs3-server: the port mapper refused program {}: {REFUSED}",
                mapping.prog
            ),
            // Linux's rpcbind answers a refused SET with AUTH_TOOWEAK.
            Err(e) => eprintln!("nfs3-server: PMAPPROC_SET {}: {e}: {REFUSED}", mapping.prog),
        }
    }
    done
}

/// PMAPPROC_UNSET of what [`register`] registered.
async fn unregister(mappings: &[Mapping]) {
    if mappings.is_empty() {
        return;
    }
    match pmap().await {
        Ok(client) => {
            for mapping in mappings {
                if let Err(e) = client.pmapproc_unset(*mapping).await {
                    eprintln!("nfs3-server: PMAPPROC_UNSET {}: {e}", mapping.prog);
                }
            }
        }
        Err(e) => eprintln!("nfs3-server: not unregistered: {e}"),
    }
}

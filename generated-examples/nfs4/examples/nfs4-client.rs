//! nfs4-client: a small NFSv4.1 client on the session library (`rpcrdma_nfs4::client`), over
//! ONC RPC over TCP or RPC-over-RDMA, for scripts that need a second client next to a mount:
//!
//! ```text
//! nfs4-client --server 192.0.2.1:2049 [--tcp | --rdma [--provider verbs|soft]] COMMAND
//!   write PATH --offset N --data STR   open PATH for writing, WRITE STR at N (FILE_SYNC4), CLOSE
//!   read PATH [--offset N] [--count N] open PATH for reading, READ, print the bytes, CLOSE
//!   ls [PATH]                          READDIR of a directory (the root by default)
//! ```
//!
//! PATH is relative to the server's root (`/` separated). Every call is made as root
//! (AUTH_SYS uid 0, gid 0). Over RPC-over-RDMA the session asks for the connection as its
//! backchannel and returns a recalled delegation at once; over TCP it has none.
//!
//! An OPEN the server answers with `NFS4ERR_DELAY` (while it recalls another client's
//! delegation on the file, RFC 5661 section 10.4.1) is sent again, every retry printed, for
//! up to `--delay-for` seconds; the `OPEN` line then says how many times the server delayed
//! it and how long the open took. One line per operation on stdout; the exit status is
//! non-zero if any operation failed.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::{Parser, Subcommand, ValueEnum};
use rpcrdma::rdma::Provider;
use rpcrdma::rpc::{AuthSys, Client, Credentials};
use rpcrdma::transport::RdmaConfig;
use rpcrdma_nfs4::client::{
    CallbackService, ClientError, DelayPolicy, OpenOptions, Opened, RecallPolicy, Session,
    SessionConfig,
};
use rpcrdma_nfs4::nfs4::nfs4_program::nfs_v4::NfsV4Client;
use rpcrdma_nfs4::nfs4::{
    NfsArgop4, NfsFh4, NfsResop4, Nfsstat4, Putfh4args, Readdir4args, Readdir4res, StableHow4,
    Verifier4,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ProviderKind {
    /// The software iWARP provider (RDMA over TCP, in this process).
    Soft,
    /// libibverbs and librdmacm (a real RDMA device, Soft-RoCE included).
    Verbs,
}

/// A small NFSv4.1 client: write, read or list one thing, then end the session.
#[derive(Parser, Debug)]
#[command(name = "nfs4-client")]
struct Args {
    /// The server's address and port (2049 for TCP, 20049 for RPC-over-RDMA by convention).
    #[arg(long)]
    server: SocketAddr,
    /// ONC RPC over TCP (the default).
    #[arg(long, conflicts_with = "rdma")]
    tcp: bool,
    /// RPC-over-RDMA, with the connection as the session's backchannel.
    #[arg(long)]
    rdma: bool,
    /// The RDMA provider (with --rdma).
    #[arg(long, value_enum, default_value_t = ProviderKind::Verbs)]
    provider: ProviderKind,
    /// How long an OPEN answered NFS4ERR_DELAY is sent again, in seconds.
    #[arg(long, default_value_t = 120)]
    delay_for: u64,
    /// The client's owner ID (EXCHANGE_ID's `co_ownerid`).
    #[arg(long, default_value = "nfs4-client")]
    owner: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Open PATH for writing, write STR at the offset (FILE_SYNC4), close.
    Write {
        path: String,
        #[arg(long, default_value_t = 0)]
        offset: u64,
        #[arg(long)]
        data: String,
        /// Create the file (mode 0644) if it does not exist.
        #[arg(long)]
        create: bool,
    },
    /// Open PATH for reading, read, print the bytes (lossy UTF-8), close.
    Read {
        path: String,
        #[arg(long, default_value_t = 0)]
        offset: u64,
        #[arg(long, default_value_t = 4096)]
        count: u32,
    },
    /// List a directory (READDIR): one name a line, with type and size.
    Ls {
        #[arg(default_value = "")]
        path: String,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("nfs4-client: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = if !args.rdma {
        rt.block_on(run_tcp(&args))
    } else {
        match args.provider {
            ProviderKind::Soft => rt.block_on(run_rdma(
                rpcrdma::rdma::soft::SoftProvider::new(Default::default()),
                &args,
            )),
            ProviderKind::Verbs => run_verbs(&rt, &args),
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(feature = "verbs")]
fn run_verbs(rt: &tokio::runtime::Runtime, args: &Args) -> Result<(), String> {
    rt.block_on(run_rdma(rpcrdma::rdma::verbs::VerbsProvider::new(), args))
}

#[cfg(not(feature = "verbs"))]
fn run_verbs(_: &tokio::runtime::Runtime, _: &Args) -> Result<(), String> {
    Err("built without the verbs feature (cargo build -p rpcrdma-nfs4 --features verbs)".into())
}

/// The session's configuration: root's credentials, and no `NFS4ERR_DELAY` retries of the
/// library's own (this program retries, and prints each one).
fn config(args: &Args) -> SessionConfig {
    let verifier = std::process::id().to_be_bytes();
    let mut verifier8 = [0u8; 8];
    verifier8[4..].copy_from_slice(&verifier);
    SessionConfig::new(args.owner.clone().into_bytes(), verifier8)
        .credentials(Credentials::Sys(AuthSys::new("nfs4-client", 0, 0)))
        .delay(DelayPolicy::none())
}

async fn run_tcp(args: &Args) -> Result<(), String> {
    let rpc = rpcrdma::rpc::tcp::connect(args.server)
        .await
        .map_err(|e| format!("TCP connect to {}: {e}", args.server))?;
    println!("connected: tcp {}", args.server);
    session(rpc, config(args), args).await
}

async fn run_rdma<P: Provider>(provider: P, args: &Args) -> Result<(), String> {
    let callbacks = CallbackService::new();
    let config = config(args)
        .backchannel(callbacks.clone())
        .recall_policy(RecallPolicy::ReturnAutomatically);
    let rdma =
        RdmaConfig::default().backchannel(callbacks.server(), config.back_channel.max_requests);
    let rpc = rpcrdma::transport::connect(Arc::new(provider), args.server, rdma)
        .await
        .map_err(|e| format!("RPC-over-RDMA connect to {}: {e}", args.server))?;
    println!(
        "connected: rdma {} ({:?} provider)",
        args.server, args.provider
    );
    session(rpc, config, args).await
}

async fn session(rpc: Client, config: SessionConfig, args: &Args) -> Result<(), String> {
    let session = Session::establish(NfsV4Client::new(rpc), config)
        .await
        .map_err(|e| format!("session: {e}"))?;
    println!(
        "session: client ID {:#x}, {} slot(s), backchannel {}",
        session.clientid(),
        session.granted().fore.ca_maxrequests,
        if session.granted().backchannel() {
            "yes"
        } else {
            "no"
        }
    );
    let result = command(&session, args).await;
    // The session ends either way; its failure matters only when the command worked.
    let destroyed = session
        .destroy()
        .await
        .map_err(|e| format!("DESTROY_SESSION/CLIENTID: {e}"));
    result?;
    destroyed?;
    println!("session destroyed");
    Ok(())
}

async fn command(session: &Session, args: &Args) -> Result<(), String> {
    let root = session
        .root_fh()
        .await
        .map_err(|e| format!("PUTROOTFH: {e}"))?;
    match &args.command {
        Command::Write {
            path,
            offset,
            data,
            create,
        } => {
            let (dir, name) = parent(session, &root, path).await?;
            let options = match create {
                true => OpenOptions::create(0o644),
                false => OpenOptions::write(),
            };
            let file = open(session, &dir, name, path, options, args.delay_for).await?;
            let bytes = Bytes::copy_from_slice(data.as_bytes());
            let written = session
                .write(
                    &file.fh,
                    &file.stateid,
                    *offset,
                    bytes,
                    StableHow4::FileSync4,
                )
                .await;
            let closed = session.close(&file.fh, &file.stateid).await;
            let written = written.map_err(|e| format!("WRITE {path}: {e}"))?;
            if written.count as usize != data.len() {
                return Err(format!(
                    "WRITE {path}: {} of {} bytes written",
                    written.count,
                    data.len()
                ));
            }
            println!(
                "WRITE {path}: {} bytes at offset {offset}, {:?}",
                written.count, written.committed
            );
            closed.map_err(|e| format!("CLOSE {path}: {e}"))?;
            println!("CLOSE {path}: ok");
            give_back(session, &file, path).await?;
        }
        Command::Read {
            path,
            offset,
            count,
        } => {
            let (dir, name) = parent(session, &root, path).await?;
            let file = open(
                session,
                &dir,
                name,
                path,
                OpenOptions::read(),
                args.delay_for,
            )
            .await?;
            let read = session.read(&file.fh, &file.stateid, *offset, *count).await;
            let closed = session.close(&file.fh, &file.stateid).await;
            let (data, eof) = read.map_err(|e| format!("READ {path}: {e}"))?;
            println!(
                "READ {path}: {} bytes at offset {offset}{}",
                data.len(),
                if eof { ", end of file" } else { "" }
            );
            println!("DATA {}", String::from_utf8_lossy(&data));
            closed.map_err(|e| format!("CLOSE {path}: {e}"))?;
            println!("CLOSE {path}: ok");
            give_back(session, &file, path).await?;
        }
        Command::Ls { path } => {
            let names: Vec<&str> = components(path);
            let dir = if names.is_empty() {
                root
            } else {
                session
                    .lookup(&root, &names)
                    .await
                    .map_err(|e| format!("LOOKUP {path}: {e}"))?
                    .fh
            };
            let entries = readdir(session, &dir)
                .await
                .map_err(|e| format!("READDIR {path}: {e}"))?;
            println!("READDIR /{path}: {} entries", entries.len());
            for name in entries {
                let looked = session
                    .lookup(&dir, &[name.as_str()])
                    .await
                    .map_err(|e| format!("LOOKUP {name}: {e}"))?;
                println!("  {:?} {:>12} {name}", looked.attrs.kind, looked.attrs.size);
            }
        }
    }
    Ok(())
}

fn components(path: &str) -> Vec<&str> {
    path.split('/').filter(|c| !c.is_empty()).collect()
}

/// The handle of PATH's directory and PATH's last name.
async fn parent<'a>(
    session: &Session,
    root: &NfsFh4,
    path: &'a str,
) -> Result<(NfsFh4, &'a str), String> {
    let mut names = components(path);
    let name = names
        .pop()
        .ok_or_else(|| format!("{path:?} names no file"))?;
    if names.is_empty() {
        return Ok((root.clone(), name));
    }
    let dir = session
        .lookup(root, &names)
        .await
        .map_err(|e| format!("LOOKUP {}: {e}", names.join("/")))?;
    Ok((dir.fh, name))
}

/// OPEN, sent again while the server answers `NFS4ERR_DELAY` (each retry printed), for up to
/// `delay_for` seconds.
async fn open(
    session: &Session,
    dir: &NfsFh4,
    name: &str,
    path: &str,
    options: OpenOptions,
    delay_for: u64,
) -> Result<Opened, String> {
    let start = Instant::now();
    let deadline = start + Duration::from_secs(delay_for);
    let mut delays = 0u32;
    loop {
        match session.open(dir, name, options).await {
            Ok(file) => {
                println!(
                    "OPEN {path} ({}): ok after {delays} NFS4ERR_DELAY answer(s), {:.1} s{}",
                    access(options),
                    start.elapsed().as_secs_f64(),
                    match &file.delegation {
                        Some(d) => format!(", {:?} delegation granted", d.kind),
                        None => String::new(),
                    }
                );
                return Ok(file);
            }
            Err(e) if is_delay(&e) && Instant::now() < deadline => {
                delays += 1;
                println!(
                    "OPEN {path} ({}): NFS4ERR_DELAY #{delays} after {:.1} s ({e}); again",
                    access(options),
                    start.elapsed().as_secs_f64()
                );
                let wait = Duration::from_millis(100u64 << delays.min(4));
                tokio::time::sleep(wait).await;
            }
            Err(e) => {
                return Err(format!(
                    "OPEN {path} ({}) after {delays} NFS4ERR_DELAY answer(s), {:.1} s: {e}",
                    access(options),
                    start.elapsed().as_secs_f64()
                ))
            }
        }
    }
}

/// Returns the delegation the OPEN granted, if any (DELEGRETURN), so that the session ends
/// holding nothing.
async fn give_back(session: &Session, file: &Opened, path: &str) -> Result<(), String> {
    let Some(delegation) = &file.delegation else {
        return Ok(());
    };
    session
        .delegreturn(&file.fh, &delegation.stateid)
        .await
        .map_err(|e| format!("DELEGRETURN {path}: {e}"))?;
    println!("DELEGRETURN {path}: ok ({:?} delegation)", delegation.kind);
    Ok(())
}

fn access(options: OpenOptions) -> &'static str {
    match (options.read, options.write) {
        (true, true) => "read and write",
        (false, true) => "write",
        _ => "read",
    }
}

fn is_delay(e: &ClientError) -> bool {
    e.status() == Some(Nfsstat4::Nfs4errDelay)
}

/// The names in a directory (PUTFH + READDIR, no attributes, until `eof`).
async fn readdir(session: &Session, dir: &NfsFh4) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    let mut cookie = 0;
    let mut cookieverf = Verifier4(Bytes::from_static(&[0; 8]));
    loop {
        let ops = vec![
            NfsArgop4::OpPutfh(Putfh4args {
                object: dir.clone(),
            }),
            NfsArgop4::OpReaddir(Readdir4args {
                cookie,
                cookieverf: cookieverf.clone(),
                dircount: 8192,
                maxcount: 32768,
                attr_request: Vec::new(),
            }),
        ];
        let res = session.compound(ops).await.map_err(|e| e.to_string())?;
        if res.status != Nfsstat4::Nfs4Ok {
            return Err(format!("{:?}", res.status));
        }
        let Some(NfsResop4::OpReaddir(Readdir4res::Nfs4Ok(ok))) = res.resarray.get(1) else {
            return Err(format!("no READDIR result: {:?}", res.resarray.get(1)));
        };
        for entry in &ok.reply.entries {
            names.push(String::from_utf8_lossy(&entry.name).into_owned());
            cookie = entry.cookie;
        }
        if ok.reply.eof || ok.reply.entries.is_empty() {
            return Ok(names);
        }
        cookieverf = ok.cookieverf.clone();
    }
}

//! nfs4-delegation: the whole life of an NFSv4.1 session with a delegation, against any
//! NFSv4.1 server over RPC-over-RDMA (the Linux kernel's knfsd in tests/vm, or ours), each step
//! printed on its own line so that a script can check it:
//!
//! ```text
//! nfs4-delegation --server 192.0.2.1:20049 [--provider verbs|soft] --dir DIR
//!                 --read NAME --save PATH --write NAME --write-len BYTES
//!                 [--recall-timeout SECS]
//! ```
//!
//! EXCHANGE_ID, CREATE_SESSION with the connection as the backchannel, RECLAIM_COMPLETE
//! (`SESSION ...`); PUTROOTFH and LOOKUP of DIR; OPEN of DIR/NAME for reading with a read
//! delegation wanted (`DELEGATION read|none`), READ of the whole file in 1 MiB READs (Write
//! chunks) saved to PATH (`READ ...`, for the script's `cmp`); OPEN of DIR/WRITE with create,
//! WRITE of BYTES of a fixed pattern in 1 MiB WRITEs (Read chunks), CLOSE (`WROTE ...`); then
//! `HOLDING` and a wait for the server's CB_RECALL of the read delegation over the
//! backchannel (the script makes another client, or a local process on the server, write the
//! file). `RECALLED` when it comes, DELEGRETURN, `RETURNED`; CLOSE, DESTROY_SESSION and
//! DESTROY_CLIENTID (`DESTROYED`). Without a delegation it skips the wait (`HOLDING none`).
//! The exit status is non-zero if any step failed, or no recall came in time.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::{Parser, ValueEnum};
use rpcrdma::rdma::Provider;
use rpcrdma::rpc::{AuthSys, Client, Credentials};
use rpcrdma::transport::{RdmaConfig, RdmaTransport};
use rpcrdma_nfs4::client::{
    CallbackService, DelegationWant, OpenOptions, RecallPolicy, Session, SessionConfig,
};
use rpcrdma_nfs4::nfs4::nfs4_program::nfs_v4::NfsV4Client;
use rpcrdma_nfs4::nfs4::StableHow4;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ProviderKind {
    /// The software iWARP provider (RDMA over TCP, in this process).
    Soft,
    /// libibverbs and librdmacm (a real RDMA device, Soft-RoCE included).
    Verbs,
}

/// An NFSv4.1 session with a read delegation recalled over its backchannel.
#[derive(Parser, Debug)]
#[command(name = "nfs4-delegation")]
struct Args {
    /// The server's RPC-over-RDMA address and port.
    #[arg(long)]
    server: SocketAddr,
    /// The RDMA provider.
    #[arg(long, value_enum, default_value_t = ProviderKind::Soft)]
    provider: ProviderKind,
    /// The directory under the server's root holding the files (`/` separated).
    #[arg(long, default_value = "")]
    dir: String,
    /// The file to read (and hold a read delegation on).
    #[arg(long)]
    read: String,
    /// Where to save what was read.
    #[arg(long)]
    save: PathBuf,
    /// The file to create and write.
    #[arg(long)]
    write: String,
    /// Bytes to write.
    #[arg(long, default_value_t = 1 << 20)]
    write_len: usize,
    /// How long to wait for the recall.
    #[arg(long, default_value_t = 60)]
    recall_timeout: u64,
    /// First create the file to read with this many bytes of the pattern (`PREPARED`), for a
    /// server that does not have it yet (a test against an empty server).
    #[arg(long)]
    prepare_len: Option<usize>,
}

/// The bytes written: the same pattern every run, so a script can make them too
/// (`byte i = (i * 7 + i / 4096) mod 256`).
fn pattern(len: usize) -> Bytes {
    (0..len)
        .map(|i| (i.wrapping_mul(7).wrapping_add(i / 4096)) as u8)
        .collect::<Vec<u8>>()
        .into()
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
            eprintln!("nfs4-delegation: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match args.provider {
        ProviderKind::Soft => rt.block_on(run(
            Arc::new(rpcrdma::rdma::soft::SoftProvider::new(Default::default())),
            &args,
        )),
        ProviderKind::Verbs => run_verbs(&rt, &args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("FAILED {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(feature = "verbs")]
fn run_verbs(rt: &tokio::runtime::Runtime, args: &Args) -> Result<(), String> {
    rt.block_on(run(
        Arc::new(rpcrdma::rdma::verbs::VerbsProvider::new()),
        args,
    ))
}

#[cfg(not(feature = "verbs"))]
fn run_verbs(_: &tokio::runtime::Runtime, _: &Args) -> Result<(), String> {
    Err("built without the verbs feature (cargo build -p rpcrdma-nfs4 --features verbs)".into())
}

fn say(line: String) {
    println!("{line}");
    let _ = std::io::stdout().flush();
}

async fn run<P: Provider>(provider: Arc<P>, args: &Args) -> Result<(), String> {
    let callbacks = CallbackService::new();
    let config = SessionConfig::new("nfs4-delegation", *b"deleg001")
        .credentials(Credentials::Sys(AuthSys::new("nfs4-delegation", 0, 0)))
        .backchannel(callbacks.clone())
        .recall_policy(RecallPolicy::Notify);
    // Default settings: the session's helpers bound their replies, so a READ offers its
    // Write chunk alone, which is what the Linux kernel's server needs (it closes the
    // connection on a READ that also offers a smaller Reply chunk; seen on 6.1).
    let rdma = RdmaConfig::default()
        .timeout(Some(Duration::from_secs(30)))
        .backchannel(callbacks.server(), config.back_channel.max_requests);
    let transport = RdmaTransport::connect(provider, args.server, rdma)
        .await
        .map_err(|e| format!("connect to {}: {e}", args.server))?;
    let nfs = NfsV4Client::new(Client::new(transport));
    let session = Session::establish(nfs, config)
        .await
        .map_err(|e| format!("session: {e}"))?;
    let granted = session.granted();
    say(format!(
        "SESSION clientid {:#x} backchannel {} slots {} maxread {}",
        granted.clientid,
        granted.backchannel(),
        granted.fore.ca_maxrequests,
        session.max_read()
    ));
    let mut recalls = session.recalls().ok_or("no recall channel")?;

    let root = session
        .root_fh()
        .await
        .map_err(|e| format!("PUTROOTFH: {e}"))?;
    let dir = if args.dir.is_empty() {
        root
    } else {
        let names: Vec<&str> = args.dir.split('/').filter(|n| !n.is_empty()).collect();
        session
            .lookup(&root, &names)
            .await
            .map_err(|e| format!("LOOKUP {}: {e}", args.dir))?
            .fh
    };

    if let Some(len) = args.prepare_len {
        write_file(&session, &dir, &args.read, pattern(len)).await?;
        say(format!("PREPARED {} bytes in {}", len, args.read));
    }
    let reading = session
        .open(
            &dir,
            &args.read,
            OpenOptions::read().want(DelegationWant::Read),
        )
        .await
        .map_err(|e| format!("OPEN {} for reading: {e}", args.read))?;
    say(format!(
        "DELEGATION {}",
        if reading.delegation.is_some() {
            "read"
        } else {
            "none"
        }
    ));
    let chunk = session.max_read().min(1 << 20);
    let mut data = Vec::new();
    let started = Instant::now();
    loop {
        let (bytes, eof) = session
            .read(&reading.fh, &reading.stateid, data.len() as u64, chunk)
            .await
            .map_err(|e| format!("READ at {}: {e}", data.len()))?;
        data.extend_from_slice(&bytes);
        if eof || bytes.is_empty() {
            break;
        }
    }
    std::fs::write(&args.save, &data).map_err(|e| format!("{}: {e}", args.save.display()))?;
    say(format!(
        "READ {} bytes in {:.1} ms saved to {}",
        data.len(),
        started.elapsed().as_secs_f64() * 1e3,
        args.save.display()
    ));

    let payload = pattern(args.write_len);
    let started = Instant::now();
    write_file(&session, &dir, &args.write, payload.clone()).await?;
    say(format!(
        "WROTE {} bytes in {:.1} ms",
        payload.len(),
        started.elapsed().as_secs_f64() * 1e3
    ));

    match &reading.delegation {
        Some(delegation) => {
            say("HOLDING read delegation".into());
            let wait = Duration::from_secs(args.recall_timeout);
            let recall = tokio::time::timeout(wait, recalls.recv())
                .await
                .map_err(|_| format!("no CB_RECALL within {} s", args.recall_timeout))?
                .ok_or("the recall channel closed")?;
            if recall.stateid != delegation.stateid {
                return Err(format!(
                    "CB_RECALL of another stateid: {:?}, holding {:?}",
                    recall.stateid, delegation.stateid
                ));
            }
            say(format!("RECALLED truncate {}", recall.truncate));
            session
                .delegreturn(&recall.fh, &recall.stateid)
                .await
                .map_err(|e| format!("DELEGRETURN: {e}"))?;
            say("RETURNED".into());
        }
        None => say("HOLDING none".into()),
    }
    session
        .close(&reading.fh, &reading.stateid)
        .await
        .map_err(|e| format!("CLOSE {}: {e}", args.read))?;
    session
        .destroy()
        .await
        .map_err(|e| format!("DESTROY_SESSION / DESTROY_CLIENTID: {e}"))?;
    say("DESTROYED".into());
    Ok(())
}

/// OPEN with create (no delegation wanted), WRITE of `payload` in WRITEs of at most 1 MiB
/// (Read chunks), CLOSE, and DELEGRETURN of a delegation the server granted anyway (the Linux
/// kernel's server, 6.1, grants a read delegation on such an OPEN; one kept would make
/// DESTROY_CLIENTID fail with NFS4ERR_CLIENTID_BUSY).
async fn write_file(
    session: &Session,
    dir: &rpcrdma_nfs4::nfs4::NfsFh4,
    name: &str,
    payload: Bytes,
) -> Result<(), String> {
    let writing = session
        .open(
            dir,
            name,
            OpenOptions::create(0o644).want(DelegationWant::NoDelegation),
        )
        .await
        .map_err(|e| format!("OPEN {name} to create: {e}"))?;
    let step = session.max_write().min(1 << 20) as usize;
    let mut offset = 0;
    while offset < payload.len() {
        let end = (offset + step).min(payload.len());
        let written = session
            .write(
                &writing.fh,
                &writing.stateid,
                offset as u64,
                payload.slice(offset..end),
                StableHow4::FileSync4,
            )
            .await
            .map_err(|e| format!("WRITE {name} at {offset}: {e}"))?;
        if written.count == 0 {
            return Err(format!("WRITE {name} at {offset} wrote nothing"));
        }
        offset += written.count as usize;
    }
    session
        .close(&writing.fh, &writing.stateid)
        .await
        .map_err(|e| format!("CLOSE {name}: {e}"))?;
    if let Some(delegation) = &writing.delegation {
        session
            .delegreturn(&writing.fh, &delegation.stateid)
            .await
            .map_err(|e| format!("DELEGRETURN {name}: {e}"))?;
        say(format!(
            "UNWANTED delegation on {name} returned (the OPEN asked for none)"
        ));
    }
    Ok(())
}

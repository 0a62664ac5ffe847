//! nfs3-client: an NFSv3 client on the generated code and RPC-over-RDMA version 1, checked
//! against the files as the machine it runs on sees them.
//!
//! ```text
//! nfs3-client --server 192.0.2.1 --export /srv --local /srv [--provider verbs] [--offer-v2]
//! ```
//!
//! With `--offer-v2` the connection opens with an RPC-over-RDMA version 2 offer (an
//! RDMA2_CONNPROP); a version 1 server such as the Linux kernel's answers ERR_VERS and the
//! session goes on in version 1 (seed 003 section 7.2). The last line names the version the
//! session ran in.
//!
//! It asks the port mapper (TCP port 111) where MOUNT version 3 listens, mounts the export over
//! TCP with our ONC RPC to get its root file handle, then connects RPC-over-RDMA to the NFS
//! server (port 20049) and makes NULL, GETATTR, LOOKUP, a READ larger than the inline
//! threshold (Write chunk, received straight into a registered buffer), a 1 MiB WRITE (Read
//! chunk), a READDIRPLUS large enough to need a Reply chunk, a READ past the end of the file,
//! and a GETATTR of a file removed behind the server's back (NFS3ERR_STALE). `--local` is the
//! export's directory as this machine sees it: every result is checked against it. The export
//! must hold `big.bin` (larger than 1 MiB), `write.bin` (writable), `doomed.bin` and a
//! directory `many/` of a few hundred files; `tests/vm/guest.sh` makes them.
//!
//! One line per call: the operation, the bytes of payload, how the call and its reply moved
//! (read from the connection's counters, not guessed from sizes) and the result. Exits
//! non-zero if any check fails.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use rpcrdma::rdma::Provider;
use rpcrdma::rpc::{AuthSys, CallOptions, Client, Credentials};
use rpcrdma::transport::core::Stats;
use rpcrdma::transport::{RdmaConfig, RdmaTransport};
use rpcrdma::xdr::{Bytes, XdrString};
use rpcrdma_nfs3::mount3::mount_program::mount_v3::MountV3Client;
use rpcrdma_nfs3::mount3::{self, Dirpath, Mountres3};
use rpcrdma_nfs3::nfs3::nfs_program::nfs_v3::{NfsV3Client, Nfsproc3Read, Nfsproc3Readdirplus};
use rpcrdma_nfs3::nfs3::*;
use rpcrdma_nfs3::pmap::pmap_prog::pmap_vers::PmapVersClient;
use rpcrdma_nfs3::pmap::{Mapping, IPPROTO_TCP, PMAP_PORT};

mod transfer;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ProviderKind {
    Soft,
    Verbs,
}

/// An NFSv3 client over RPC-over-RDMA, checked against the exported directory.
#[derive(Parser, Debug)]
struct Args {
    /// The NFS server's address (the port mapper, MOUNT and NFS over RDMA all live there).
    #[arg(long)]
    server: IpAddr,
    /// The export to mount.
    #[arg(long, default_value = "/srv")]
    export: String,
    /// The export's directory as this machine sees it, to check results against.
    #[arg(long, default_value = "/srv")]
    local: PathBuf,
    /// The NFS server's RPC-over-RDMA port (RFC 8267 section 6: 20049).
    #[arg(long, default_value_t = 20049)]
    rdma_port: u16,
    /// MOUNT version 3's TCP port, instead of asking the port mapper.
    #[arg(long)]
    mount_port: Option<u16>,
    /// The RDMA provider.
    #[arg(long, value_enum, default_value_t = ProviderKind::Verbs)]
    provider: ProviderKind,
    /// Bytes per READ and per WRITE.
    #[arg(long, default_value_t = 1 << 20)]
    io_size: u32,
    /// Offer RPC-over-RDMA version 2 first (seed 003 section 7); a version 1 server's ERR_VERS
    /// makes the session go on in version 1.
    #[arg(long)]
    offer_v2: bool,
    /// Instead of the session: write this file of the export's root (created if missing) with
    /// `--transfer-mib` MiB in `--io-size` WRITEs, going on through failed calls (a device
    /// removed, a connection lost: each WRITE is sent again until it succeeds or
    /// `--retry-for` runs out), then read it all back and check every byte.
    #[arg(long)]
    transfer: Option<String>,
    /// The size of `--transfer`'s file, in MiB.
    #[arg(long, default_value_t = 256)]
    transfer_mib: u64,
    /// How long `--transfer` keeps sending a failed call again, in seconds.
    #[arg(long, default_value_t = 300)]
    retry_for: u64,
    /// With `--transfer`: fail unless some call failed during the transfer (it was meant to
    /// be interrupted).
    #[arg(long)]
    expect_interruption: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    // Warnings by default (a removed device, a connection lost); RUST_LOG adds more.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let result = match args.provider {
        ProviderKind::Soft => rt.block_on(run(rpcrdma::rdma::soft::SoftProvider::default(), &args)),
        ProviderKind::Verbs => run_verbs(&rt, &args),
    };
    match result {
        Ok(0) => ExitCode::SUCCESS,
        Ok(failed) => {
            eprintln!("nfs3-client: {failed} check(s) failed");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("nfs3-client: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(feature = "verbs")]
fn run_verbs(rt: &tokio::runtime::Runtime, args: &Args) -> Result<usize, String> {
    rt.block_on(run(rpcrdma::rdma::verbs::VerbsProvider::new(), args))
}

#[cfg(not(feature = "verbs"))]
fn run_verbs(_: &tokio::runtime::Runtime, _: &Args) -> Result<usize, String> {
    Err("built without the verbs feature (cargo build -p rpcrdma-nfs3 --features verbs)".into())
}

/// The credential of every call: root, which the export must not squash (its files are
/// checked and written as root sees them).
fn root() -> Credentials {
    Credentials::Sys(AuthSys::new("nfs3-client", 0, 0))
}

/// Gets the export's root file handle over TCP: the port mapper (unless `port` says where
/// MOUNT is), then MOUNT.
async fn mount(server: IpAddr, export: &str, port: Option<u16>) -> Result<NfsFh3, String> {
    let port = match port {
        Some(port) => port,
        None => mount_port(server).await?,
    };
    let rpc = rpcrdma::rpc::tcp::connect(SocketAddr::new(server, port))
        .await
        .map_err(|e| format!("MOUNT at {server}:{port}: {e}"))?
        .with_credentials(&root())
        .map_err(|e| e.to_string())?;
    let reply = MountV3Client::new(rpc)
        .mountproc3_mnt(Dirpath(XdrString::from(export.to_string())))
        .await
        .map_err(|e| format!("MOUNTPROC3_MNT {export}: {e}"))?;
    match reply {
        Mountres3::Mnt3Ok(ok) => {
            println!("mount: {export} from {server} (MOUNT v3 on TCP port {port}), root handle of {} bytes", ok.fhandle.0.len());
            Ok(NfsFh3 { data: ok.fhandle.0 })
        }
        Mountres3::Default { discriminant } => {
            Err(format!("MOUNTPROC3_MNT {export}: {discriminant:?}"))
        }
    }
}

/// Where MOUNT version 3 listens over TCP, by the port mapper (TCP port 111).
async fn mount_port(server: IpAddr) -> Result<u16, String> {
    let pmap = rpcrdma::rpc::tcp::connect(SocketAddr::new(server, PMAP_PORT as u16))
        .await
        .map_err(|e| format!("port mapper at {server}:{PMAP_PORT}: {e}"))?;
    let port = PmapVersClient::new(pmap)
        .pmapproc_getport(Mapping {
            prog: mount3::mount_program::PROGRAM,
            vers: mount3::mount_program::mount_v3::VERSION,
            prot: IPPROTO_TCP,
            port: 0,
        })
        .await
        .map_err(|e| format!("PMAPPROC_GETPORT: {e}"))?;
    u16::try_from(port)
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| format!("MOUNT v3 over TCP is not registered (port {port})"))
}

/// One call's line of the table, and whether its checks held.
struct Row {
    op: &'static str,
    bytes: usize,
    moved: String,
    result: Result<String, String>,
}

/// The calls, their checks and the table.
struct Session {
    nfs: NfsV3Client,
    transport: Arc<dyn TransportStats>,
    local: PathBuf,
    io_size: u32,
    rows: Vec<Row>,
}

/// The connection's counters, whatever the provider.
trait TransportStats: Send + Sync {
    fn stats(&self) -> Stats;
}

impl<P: Provider> TransportStats for RdmaTransport<P> {
    fn stats(&self) -> Stats {
        RdmaTransport::stats(self)
    }
}

/// How the calls between two counter snapshots moved, each way: `inline / write chunk` for one
/// call, `2 inline + 1 read chunk / ...` when a row made several.
fn movement(before: &Stats, after: &Stats) -> String {
    let calls = [
        (after.calls_inline - before.calls_inline, "inline"),
        (
            after.calls_read_chunks - before.calls_read_chunks,
            "read chunk",
        ),
        (
            after.calls_long - before.calls_long,
            "long (pos-0 read chunk)",
        ),
    ];
    let replies = [
        (
            after.replies_received_inline - before.replies_received_inline,
            "inline",
        ),
        (
            after.replies_received_write_chunks - before.replies_received_write_chunks,
            "write chunk",
        ),
        (
            after.replies_received_long - before.replies_received_long,
            "reply chunk",
        ),
    ];
    format!("{} / {}", kinds(&calls), kinds(&replies))
}

/// `inline` when one message of one kind moved; `2 inline + 1 reply chunk` otherwise.
fn kinds(counts: &[(u64, &str)]) -> String {
    let moved: Vec<_> = counts.iter().filter(|(n, _)| *n > 0).collect();
    match moved.as_slice() {
        [] => "none".into(),
        [(1, kind)] => kind.to_string(),
        _ => moved
            .iter()
            .map(|(n, kind)| format!("{n} {kind}"))
            .collect::<Vec<_>>()
            .join(" + "),
    }
}

async fn run<P: Provider + Clone>(provider: P, args: &Args) -> Result<usize, String> {
    let root_fh = mount(args.server, &args.export, args.mount_port).await?;
    let addr = SocketAddr::new(args.server, args.rdma_port);
    let transport = Arc::new(
        RdmaTransport::connect(
            Arc::new(provider),
            addr,
            RdmaConfig::default()
                .timeout(Some(Duration::from_secs(30)))
                .version_2(args.offer_v2),
        )
        .await
        .map_err(|e| format!("RPC-over-RDMA to {addr}: {e}"))?,
    );
    println!("rdma: connected to {addr}");
    let rpc = Client::from_arc(transport.clone())
        .with_credentials(&root())
        .map_err(|e| e.to_string())?;
    if let Some(name) = &args.transfer {
        let nfs = NfsV3Client::new(rpc);
        return transfer::run(&nfs, &root_fh, name, args).await;
    }
    let mut session = Session {
        nfs: NfsV3Client::new(rpc),
        transport: transport.clone(),
        local: args.local.clone(),
        io_size: args.io_size,
        rows: Vec::new(),
    };
    session.all(&root_fh).await;
    let failures = session.print();
    // The offer was answered before the first call went (seed 003 section 7): the version the
    // session ran in is settled by now.
    println!(
        "rdma: RPC-over-RDMA version {}{}",
        transport.version(),
        if args.offer_v2 {
            " (version 2 offered first)"
        } else {
            ""
        }
    );
    Ok(failures)
}

impl Session {
    /// Runs `call`, records how it moved and what its check said.
    async fn row<F>(&mut self, op: &'static str, bytes: usize, call: F)
    where
        F: std::future::Future<Output = Result<String, String>>,
    {
        let before = self.transport.stats();
        let result = call.await;
        let moved = movement(&before, &self.transport.stats());
        self.rows.push(Row {
            op,
            bytes,
            moved,
            result,
        });
    }

    async fn all(&mut self, root: &NfsFh3) {
        let nfs = self.nfs.clone();
        let local = self.local.clone();
        let io = self.io_size;

        self.row("NULL", 0, async {
            nfs.nfsproc3_null()
                .await
                .map(|()| "answered".into())
                .map_err(|e| e.to_string())
        })
        .await;

        self.row("GETATTR /", 0, async {
            let attrs = getattr(&nfs, root).await?;
            let meta = std::fs::metadata(&local).map_err(|e| e.to_string())?;
            check(attrs.r#type == Ftype3::Nf3dir, "the root is a directory")?;
            check(
                attrs.fileid == meta.ino(),
                "the root's fileid is its inode number",
            )?;
            Ok(format!("directory, fileid {}", attrs.fileid))
        })
        .await;

        let mut big = Err(String::new());
        self.row("LOOKUP big.bin", 0, async {
            big = lookup(&nfs, root, "big.bin").await;
            let (_, attrs) = big.clone()?;
            let meta = std::fs::metadata(local.join("big.bin")).map_err(|e| e.to_string())?;
            check(attrs.size == meta.len(), "the size is the file's")?;
            check(
                attrs.fileid == meta.ino(),
                "the fileid is the file's inode number",
            )?;
            Ok(format!("{} bytes", attrs.size))
        })
        .await;
        let big_fh = big.as_ref().map(|(fh, _)| fh.clone()).ok();

        if let Some(fh) = big_fh.clone() {
            let client = nfs.rpc().clone();
            self.row("READ big.bin", io as usize, async {
                // The result lands in a buffer of the connection's registered pool: the
                // server's RDMA Write puts it there, and the decoded data is a view of it.
                let options = CallOptions::new().reply_buffer(client.buffer(io as usize));
                let args = Read3args {
                    file: fh.clone(),
                    offset: 0,
                    count: io,
                };
                let res = client
                    .call_with::<Nfsproc3Read>(&args, options)
                    .await
                    .map_err(|e| e.to_string())?;
                let ok = match res {
                    Read3res::Nfs3Ok(ok) => ok,
                    Read3res::Default { discriminant, .. } => {
                        return Err(format!("{discriminant:?}"))
                    }
                };
                let want = read_local(&local.join("big.bin"), 0, io as usize)?;
                check(
                    ok.count as usize == want.len(),
                    "the count is what was asked",
                )?;
                check(ok.data[..] == want[..], "the bytes are the file's")?;
                Ok(format!("{} bytes match", ok.count))
            })
            .await;

            self.row("READ past EOF", 0, async {
                let size = std::fs::metadata(local.join("big.bin"))
                    .map_err(|e| e.to_string())?
                    .len();
                let res = nfs
                    .nfsproc3_read(Read3args {
                        file: fh.clone(),
                        offset: size + 4096,
                        count: 4096,
                    })
                    .await
                    .map_err(|e| e.to_string())?;
                match res {
                    Read3res::Nfs3Ok(ok) => {
                        check(ok.count == 0 && ok.data.is_empty(), "no bytes past the end")?;
                        check(ok.eof, "eof is set")?;
                        Ok("0 bytes, eof".into())
                    }
                    Read3res::Default { discriminant, .. } => Err(format!("{discriminant:?}")),
                }
            })
            .await;
        }

        let target = lookup(&nfs, root, "write.bin").await;
        if let Ok((fh, _)) = target {
            let data = Bytes::from(pattern(io as usize));
            self.row("WRITE write.bin", io as usize, async {
                let res = nfs
                    .nfsproc3_write(Write3args {
                        file: fh,
                        offset: 0,
                        count: io,
                        stable: StableHow::FileSync,
                        data: data.clone(),
                    })
                    .await
                    .map_err(|e| e.to_string())?;
                let ok = match res {
                    Write3res::Nfs3Ok(ok) => ok,
                    Write3res::Default { discriminant, .. } => {
                        return Err(format!("{discriminant:?}"))
                    }
                };
                check(ok.count == io, "every byte was written")?;
                check(ok.committed == StableHow::FileSync, "FILE_SYNC as asked")?;
                let on_disk = read_local(&local.join("write.bin"), 0, io as usize)?;
                check(on_disk[..] == data[..], "the file holds the bytes sent")?;
                Ok(format!("{} bytes on disk", ok.count))
            })
            .await;
        } else {
            self.rows.push(failed_row("WRITE write.bin", target.err()));
        }

        let many = lookup(&nfs, root, "many").await;
        if let Ok((fh, _)) = many {
            self.row("READDIRPLUS many/", 0, async {
                let names = readdirplus_all(&nfs, &fh).await?;
                let want = local_names(&local.join("many"))?;
                check(names == want, "the names are the directory's")?;
                Ok(format!("{} entries", names.len()))
            })
            .await;
        } else {
            self.rows.push(failed_row("READDIRPLUS many/", many.err()));
        }

        let doomed = lookup(&nfs, root, "doomed.bin").await;
        if let Ok((fh, _)) = doomed {
            self.row("GETATTR removed file", 0, async {
                std::fs::remove_file(local.join("doomed.bin")).map_err(|e| e.to_string())?;
                let res = nfs
                    .nfsproc3_getattr(Getattr3args { object: fh })
                    .await
                    .map_err(|e| e.to_string())?;
                match res {
                    Getattr3res::Default {
                        discriminant: Nfsstat3::Nfs3errStale,
                    } => Ok("NFS3ERR_STALE, as it must".into()),
                    Getattr3res::Default { discriminant } => {
                        Err(format!("{discriminant:?} where NFS3ERR_STALE was due"))
                    }
                    Getattr3res::Nfs3Ok(_) => Err("attributes of a removed file".into()),
                }
            })
            .await;
        } else {
            self.rows
                .push(failed_row("GETATTR removed file", doomed.err()));
        }
    }

    /// Prints the table; returns how many rows failed.
    fn print(&self) -> usize {
        println!(
            "{:<22} {:>9}  {:<32} result",
            "operation", "bytes", "moved (call / reply)"
        );
        let mut failed = 0;
        for row in &self.rows {
            let result = match &row.result {
                Ok(text) => format!("ok: {text}"),
                Err(text) => {
                    failed += 1;
                    format!("FAILED: {text}")
                }
            };
            println!(
                "{:<22} {:>9}  {:<32} {result}",
                row.op, row.bytes, row.moved
            );
        }
        failed
    }
}

fn failed_row(op: &'static str, why: Option<String>) -> Row {
    Row {
        op,
        bytes: 0,
        moved: "-".into(),
        result: Err(why.unwrap_or_else(|| "not reached".into())),
    }
}

fn check(ok: bool, what: &str) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(format!("check failed: {what}"))
    }
}

async fn getattr(nfs: &NfsV3Client, fh: &NfsFh3) -> Result<Fattr3, String> {
    match nfs
        .nfsproc3_getattr(Getattr3args { object: fh.clone() })
        .await
        .map_err(|e| e.to_string())?
    {
        Getattr3res::Nfs3Ok(ok) => Ok(ok.obj_attributes),
        Getattr3res::Default { discriminant } => Err(format!("GETATTR: {discriminant:?}")),
    }
}

async fn lookup(nfs: &NfsV3Client, dir: &NfsFh3, name: &str) -> Result<(NfsFh3, Fattr3), String> {
    let res = nfs
        .nfsproc3_lookup(Lookup3args {
            what: Diropargs3 {
                dir: dir.clone(),
                name: XdrString::from(name.to_string()),
            },
        })
        .await
        .map_err(|e| format!("LOOKUP {name}: {e}"))?;
    match res {
        Lookup3res::Nfs3Ok(ok) => match ok.obj_attributes {
            PostOpAttr::True(attrs) => Ok((ok.object, attrs)),
            PostOpAttr::False => Err(format!("LOOKUP {name}: no attributes")),
        },
        Lookup3res::Default { discriminant, .. } => Err(format!("LOOKUP {name}: {discriminant:?}")),
    }
}

/// Creates `name` in `dir` (UNCHECKED: an existing file is kept), with the server's default
/// attributes.
async fn create(nfs: &NfsV3Client, dir: &NfsFh3, name: &str) -> Result<NfsFh3, String> {
    let res = nfs
        .nfsproc3_create(Create3args {
            r#where: Diropargs3 {
                dir: dir.clone(),
                name: XdrString::from(name.to_string()),
            },
            how: Createhow3::Unchecked(Sattr3::unchanged()),
        })
        .await
        .map_err(|e| format!("CREATE {name}: {e}"))?;
    match res {
        Create3res::Nfs3Ok(Create3resok {
            obj: PostOpFh3::True(fh),
            ..
        }) => Ok(fh),
        Create3res::Nfs3Ok(_) => lookup(nfs, dir, name).await.map(|(fh, _)| fh),
        Create3res::Default { discriminant, .. } => Err(format!("CREATE {name}: {discriminant:?}")),
    }
}

/// Every name of a directory by READDIRPLUS, following cookies to the end. The first reply is
/// asked for with a `maxcount` well above the inline threshold, so it comes in a Reply chunk.
async fn readdirplus_all(nfs: &NfsV3Client, dir: &NfsFh3) -> Result<BTreeSet<String>, String> {
    const MAXCOUNT: u32 = 32 * 1024;
    let mut names = BTreeSet::new();
    let mut cookie = 0;
    let mut cookieverf = Cookieverf3(Bytes::from_static(&[0; 8]));
    for _ in 0..1000 {
        let args = Readdirplus3args {
            dir: dir.clone(),
            cookie,
            cookieverf: cookieverf.clone(),
            dircount: MAXCOUNT,
            maxcount: MAXCOUNT,
        };
        // The result type is unbounded: the largest reply sizes the Reply chunk.
        let options = CallOptions::new().max_reply(MAXCOUNT as usize + 1024);
        let res = nfs
            .rpc()
            .call_with::<Nfsproc3Readdirplus>(&args, options)
            .await
            .map_err(|e| e.to_string())?;
        let ok = match res {
            Readdirplus3res::Nfs3Ok(ok) => ok,
            Readdirplus3res::Default { discriminant, .. } => {
                return Err(format!("READDIRPLUS: {discriminant:?}"))
            }
        };
        for entry in &ok.reply.entries {
            let name = entry.name.to_str().map_err(|e| e.to_string())?;
            if name != "." && name != ".." {
                names.insert(name.to_string());
            }
            cookie = entry.cookie;
        }
        cookieverf = ok.cookieverf;
        if ok.reply.eof {
            return Ok(names);
        }
        if ok.reply.entries.is_empty() {
            return Err("READDIRPLUS: no entries and no eof".into());
        }
    }
    Err("READDIRPLUS: no eof after 1000 replies".into())
}

fn local_names(dir: &std::path::Path) -> Result<BTreeSet<String>, String> {
    std::fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .map(|e| {
            e.map_err(|e| e.to_string())
                .map(|e| e.file_name().to_string_lossy().into_owned())
        })
        .collect()
}

fn read_local(path: &std::path::Path, offset: u64, len: usize) -> Result<Vec<u8>, String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| e.to_string())?;
    let mut buf = Vec::with_capacity(len);
    file.take(len as u64)
        .read_to_end(&mut buf)
        .map_err(|e| e.to_string())?;
    Ok(buf)
}

/// Bytes that differ from whatever the file held before (not zeros, not a repeat of 4 KiB).
fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0] ^ (i >> 12) as u8)
        .collect()
}

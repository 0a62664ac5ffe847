//! The in-memory NFSv3 server over RPC-over-RDMA on the software iWARP provider, MOUNT over
//! TCP, in one process, called by the generated clients as the kernel's client would: MOUNT,
//! FSINFO, 4 MiB written in 1 MiB WRITEs (Read chunks) and read back into registered buffers
//! (Write chunks), READDIRPLUS of 300 entries in several Reply chunks, and the errors a
//! client meets (STALE, BADHANDLE, NOTEMPTY, NOSPC). The transport's counters show how each
//! call moved.

mod memfs_helpers;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use memfs_helpers::*;
use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::tcp::{TcpConfig, TcpServer};
use rpcrdma::rpc::{CallOptions, Client};
use rpcrdma::transport::core::Stats;
use rpcrdma::transport::pool::PoolStats;
use rpcrdma::transport::{serve, RdmaConfig, RdmaListener, RdmaTransport};
use rpcrdma::xdr::XdrString;
use rpcrdma_nfs3::memfs::{MemFs, MemFsConfig};
use rpcrdma_nfs3::mount3::mount_program::mount_v3::MountV3Client;
use rpcrdma_nfs3::mount3::{Dirpath, Mountres3, Mountstat3};
use rpcrdma_nfs3::nfs3::nfs_program::nfs_v3::{NfsV3Client, Nfsproc3Read, Nfsproc3Readdirplus};
use rpcrdma_nfs3::nfs3::*;

const MIB: usize = 1 << 20;

/// A server (NFS over RDMA, MOUNT over TCP) and a mounted client.
struct Mounted {
    fs: Arc<MemFs>,
    rdma: Arc<RdmaListener<SoftProvider>>,
    _mount: TcpServer,
    transport: Arc<RdmaTransport<SoftProvider>>,
    nfs: NfsV3Client,
    root: NfsFh3,
}

impl Mounted {
    fn stats(&self) -> Stats {
        self.transport.stats()
    }

    /// The server's pool counters, summed over its connections.
    fn server_pool(&self) -> PoolStats {
        self.rdma
            .stats()
            .iter()
            .fold(PoolStats::default(), |sum, (_, pool)| PoolStats {
                copied_bytes: sum.copied_bytes + pool.copied_bytes,
                zero_copy_bytes: sum.zero_copy_bytes + pool.zero_copy_bytes,
                ..sum
            })
    }
}

/// Starts a server holding at most `capacity` bytes and mounts /export from it.
async fn mounted(capacity: u64) -> Mounted {
    mounted_with(capacity, RdmaConfig::default()).await
}

/// [`mounted`], the client with `config` (and a 30 s call timeout).
async fn mounted_with(capacity: u64, config: RdmaConfig) -> Mounted {
    let fs = Arc::new(MemFs::new(MemFsConfig::new("/export").capacity(capacity)));
    let provider = Arc::new(SoftProvider::default());
    let listener = provider
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("RDMA listen");
    let rdma_addr = listener.local_addr().expect("RDMA address");
    let rdma = Arc::new(serve::<SoftProvider>(
        listener,
        fs.nfs_server(),
        RdmaConfig::default(),
    ));
    tokio::spawn({
        let rdma = rdma.clone();
        async move { rdma.run().await }
    });
    let mount = TcpServer::bind("127.0.0.1:0", fs.mount_server(), TcpConfig::new())
        .await
        .expect("MOUNT listen");

    let mount_client = MountV3Client::new(
        rpcrdma::rpc::tcp::connect(mount.local_addr())
            .await
            .expect("MOUNT connect")
            .with_credentials(&root())
            .expect("AUTH_SYS"),
    );
    let other = mount_client
        .mountproc3_mnt(Dirpath(XdrString::from("/elsewhere")))
        .await
        .expect("MNT call");
    assert!(
        matches!(
            other,
            Mountres3::Default {
                discriminant: Mountstat3::Mnt3errNoent
            }
        ),
        "{other:?}"
    );
    let root = match mount_client
        .mountproc3_mnt(Dirpath(XdrString::from("/export")))
        .await
        .expect("MNT call")
    {
        Mountres3::Mnt3Ok(ok) => {
            // AUTH_SYS first, then AUTH_NONE (RFC 5531 flavor numbers 1 and 0).
            assert_eq!(ok.auth_flavors, vec![1, 0]);
            NfsFh3 { data: ok.fhandle.0 }
        }
        other => panic!("MNT /export: {other:?}"),
    };
    let dump = mount_client.mountproc3_dump().await.expect("DUMP call");
    assert_eq!(dump.0.len(), 1, "{dump:?}");
    assert_eq!(dump.0[0].ml_directory.0.as_bytes(), b"/export");

    let transport = Arc::new(
        RdmaTransport::connect(
            provider,
            rdma_addr,
            config.timeout(Some(Duration::from_secs(30))),
        )
        .await
        .expect("RDMA connect"),
    );
    let nfs = as_root(Client::from_arc(transport.clone()));
    Mounted {
        fs,
        rdma,
        _mount: mount,
        transport,
        nfs,
        root,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_mib_written_by_read_chunks_and_read_back_by_write_chunks() {
    let m = mounted(1 << 30).await;
    let nfs = &m.nfs;
    nfs.nfsproc3_null().await.expect("NULL");

    let info = match nfs
        .nfsproc3_fsinfo(Fsinfo3args {
            fsroot: m.root.clone(),
        })
        .await
        .expect("FSINFO call")
    {
        Fsinfo3res::Nfs3Ok(ok) => ok,
        other => panic!("FSINFO: {other:?}"),
    };
    assert_eq!((info.rtmax, info.wtmax), (MIB as u32, MIB as u32));
    assert_eq!((info.rtpref, info.wtpref), (MIB as u32, MIB as u32));
    assert_eq!(
        info.properties,
        FSF3_LINK | FSF3_SYMLINK | FSF3_HOMOGENEOUS | FSF3_CANSETTIME
    );
    assert_eq!(info.time_delta.nseconds, 1);

    let file = create(nfs, &m.root, "big.bin").await;
    let content = pattern(0, 4 * MIB);
    let before = m.stats();
    let mut verifiers = Vec::new();
    for k in 0..4 {
        let chunk = Bytes::copy_from_slice(&content[k * MIB..(k + 1) * MIB]);
        match write(nfs, &file, (k * MIB) as u64, chunk).await {
            Write3res::Nfs3Ok(ok) => {
                assert_eq!(ok.count, MIB as u32);
                assert_eq!(ok.committed, StableHow::FileSync);
                let PostOpAttr::True(now) = &ok.file_wcc.after else {
                    panic!("WRITE {k}: no post-op attributes");
                };
                assert_eq!(now.size, ((k + 1) * MIB) as u64);
                verifiers.push(ok.verf);
            }
            other => panic!("WRITE {k}: {other:?}"),
        }
    }
    let after = m.stats();
    assert_eq!(
        after.calls_read_chunks - before.calls_read_chunks,
        4,
        "each 1 MiB WRITE moves its data in a Read chunk"
    );
    assert!(
        verifiers.windows(2).all(|w| w[0] == w[1]),
        "one write verifier"
    );
    assert_eq!(
        getattr(nfs, &file).await.map(|a| a.size),
        Ok(4 * MIB as u64)
    );
    assert_eq!(m.fs.used_bytes(), 4 * MIB as u64);

    let before = m.stats();
    let pool_before = m.server_pool();
    let mut read_back = Vec::with_capacity(4 * MIB);
    for k in 0..4 {
        let client = nfs.rpc();
        let options = CallOptions::new().reply_buffer(client.buffer(MIB));
        let args = Read3args {
            file: file.clone(),
            offset: (k * MIB) as u64,
            count: MIB as u32,
        };
        match client
            .call_with::<Nfsproc3Read>(&args, options)
            .await
            .expect("READ call")
        {
            Read3res::Nfs3Ok(ok) => {
                assert_eq!(ok.count, MIB as u32);
                assert_eq!(ok.eof, k == 3, "eof only on the last MiB");
                read_back.extend_from_slice(&ok.data);
            }
            other => panic!("READ {k}: {other:?}"),
        }
    }
    let after = m.stats();
    assert_eq!(
        after.replies_received_write_chunks - before.replies_received_write_chunks,
        4,
        "each 1 MiB READ result comes in the Write chunk"
    );
    assert!(read_back == content, "the bytes read are the bytes written");
    // The server read each MiB into its connection's registered memory (ctx.buffer): the
    // RDMA Writes took it from there, and nothing of the data was copied again.
    let pool_after = m.server_pool();
    assert!(
        pool_after.zero_copy_bytes - pool_before.zero_copy_bytes >= 4 * MIB as u64,
        "{pool_before:?} -> {pool_after:?}"
    );
    assert!(
        pool_after.copied_bytes - pool_before.copied_bytes < 64 * 1024,
        "only headers copied: {pool_before:?} -> {pool_after:?}"
    );

    // A READ at the end: nothing, and eof.
    match nfs
        .nfsproc3_read(Read3args {
            file: file.clone(),
            offset: 4 * MIB as u64,
            count: 4096,
        })
        .await
        .expect("READ call")
    {
        Read3res::Nfs3Ok(ok) => assert_eq!((ok.count, ok.eof, ok.data.len()), (0, true, 0)),
        other => panic!("READ at end: {other:?}"),
    }

    let commit = nfs
        .nfsproc3_commit(Commit3args {
            file,
            offset: 0,
            count: 0,
        })
        .await
        .expect("COMMIT call");
    match commit {
        Commit3res::Nfs3Ok(ok) => assert_eq!(ok.verf, verifiers[0]),
        other => panic!("COMMIT: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readdirplus_of_300_entries_over_several_reply_chunks_with_stable_cookies() {
    let m = mounted(1 << 30).await;
    let nfs = &m.nfs;
    let dir = mkdir(nfs, &m.root, "many").await;
    let mut want = std::collections::BTreeSet::new();
    for i in 0..300 {
        let name = format!("entry-{i:03}");
        create(nfs, &dir, &name).await;
        want.insert(name);
    }

    const MAXCOUNT: u32 = 8 * 1024;
    let before = m.stats();
    let mut seen = std::collections::BTreeSet::new();
    let mut cookie = 0;
    let mut verf = Cookieverf3(Bytes::from_static(&[0; 8]));
    let mut calls = 0;
    let mut removed_ahead = false;
    loop {
        calls += 1;
        assert!(calls < 100, "no eof after 100 calls");
        let args = Readdirplus3args {
            dir: dir.clone(),
            cookie,
            cookieverf: verf.clone(),
            dircount: MAXCOUNT,
            maxcount: MAXCOUNT,
        };
        let options = CallOptions::new().max_reply(MAXCOUNT as usize + 1024);
        let ok = match nfs
            .rpc()
            .call_with::<Nfsproc3Readdirplus>(&args, options)
            .await
            .expect("READDIRPLUS call")
        {
            Readdirplus3res::Nfs3Ok(ok) => ok,
            other => panic!("READDIRPLUS: {other:?}"),
        };
        assert!(!ok.reply.entries.is_empty() || ok.reply.eof);
        for entry in &ok.reply.entries {
            assert!(entry.cookie > cookie, "cookies grow");
            cookie = entry.cookie;
            let name = entry.name.to_str().expect("UTF-8").to_string();
            let PostOpAttr::True(attrs) = &entry.name_attributes else {
                panic!("{name}: no attributes");
            };
            assert_eq!(attrs.fileid, entry.fileid);
            let PostOpFh3::True(fh) = &entry.name_handle else {
                panic!("{name}: no handle");
            };
            assert_eq!(getattr(nfs, fh).await.map(|a| a.fileid), Ok(entry.fileid));
            if name != "." && name != ".." {
                assert!(seen.insert(name.clone()), "{name} twice");
            }
        }
        verf = ok.cookieverf;
        if ok.reply.eof {
            break;
        }
        if !removed_ahead {
            // An entry not yet listed goes away between calls: the next call goes on from
            // the cookie as if it never was.
            let res = nfs
                .nfsproc3_remove(Remove3args {
                    object: at(&dir, "entry-299"),
                })
                .await
                .expect("REMOVE call");
            assert_eq!(res.status(), Nfsstat3::Nfs3Ok);
            want.remove("entry-299");
            removed_ahead = true;
        }
    }
    assert!(
        calls >= 3,
        "300 entries in {MAXCOUNT}-byte replies take several calls ({calls})"
    );
    assert_eq!(seen, want);
    let after = m.stats();
    assert!(
        after.replies_received_long - before.replies_received_long >= calls - 1,
        "the replies above the inline threshold came in Reply chunks"
    );

    // Too small for one entry: NFS3ERR_TOOSMALL.
    let res = nfs
        .nfsproc3_readdirplus(Readdirplus3args {
            dir: dir.clone(),
            cookie: 0,
            cookieverf: Cookieverf3(Bytes::from_static(&[0; 8])),
            dircount: 100,
            maxcount: 150,
        })
        .await
        .expect("READDIRPLUS call");
    assert_eq!(res.status(), Nfsstat3::Nfs3errToosmall);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncate_rename_remove_and_the_handles_that_no_longer_work() {
    let m = mounted(1 << 30).await;
    let nfs = &m.nfs;
    let file = create(nfs, &m.root, "a.txt").await;
    assert_eq!(
        write(nfs, &file, 0, Bytes::from_static(b"hello"))
            .await
            .status(),
        Nfsstat3::Nfs3Ok
    );

    let res = nfs
        .nfsproc3_setattr(Setattr3args {
            object: file.clone(),
            new_attributes: Sattr3 {
                size: SetSize3::True(0),
                ..mode(0o600)
            },
            guard: Sattrguard3::False,
        })
        .await
        .expect("SETATTR call");
    assert_eq!(res.status(), Nfsstat3::Nfs3Ok);
    let attrs = getattr(nfs, &file).await.expect("GETATTR");
    assert_eq!((attrs.size, attrs.mode), (0, 0o600));
    assert_eq!(m.fs.used_bytes(), 0);

    let res = nfs
        .nfsproc3_rename(Rename3args {
            from: at(&m.root, "a.txt"),
            to: at(&m.root, "b.txt"),
        })
        .await
        .expect("RENAME call");
    assert_eq!(res.status(), Nfsstat3::Nfs3Ok);
    assert_eq!(
        lookup(nfs, &m.root, "a.txt").await,
        Err(Nfsstat3::Nfs3errNoent)
    );
    assert_eq!(lookup(nfs, &m.root, "b.txt").await, Ok(file.clone()));

    let res = nfs
        .nfsproc3_remove(Remove3args {
            object: at(&m.root, "b.txt"),
        })
        .await
        .expect("REMOVE call");
    assert_eq!(res.status(), Nfsstat3::Nfs3Ok);
    assert_eq!(getattr(nfs, &file).await, Err(Nfsstat3::Nfs3errStale));

    let mut short = file.data.to_vec();
    short.pop();
    let short = NfsFh3 {
        data: Bytes::from(short),
    };
    assert_eq!(getattr(nfs, &short).await, Err(Nfsstat3::Nfs3errBadhandle));

    let dir = mkdir(nfs, &m.root, "d").await;
    create(nfs, &dir, "inside").await;
    let res = nfs
        .nfsproc3_rmdir(Rmdir3args {
            object: at(&m.root, "d"),
        })
        .await
        .expect("RMDIR call");
    assert_eq!(res.status(), Nfsstat3::Nfs3errNotempty);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_beyond_the_size_bound_is_nospc() {
    let m = mounted(2 * MIB as u64).await;
    let nfs = &m.nfs;
    let file = create(nfs, &m.root, "fill").await;
    let mib = Bytes::from(pattern(0, MIB));
    assert_eq!(
        write(nfs, &file, 0, mib.clone()).await.status(),
        Nfsstat3::Nfs3Ok
    );
    assert_eq!(
        write(nfs, &file, MIB as u64, mib.clone()).await.status(),
        Nfsstat3::Nfs3Ok
    );
    let res = write(nfs, &file, 2 * MIB as u64, mib).await;
    assert_eq!(res.status(), Nfsstat3::Nfs3errNospc);
    assert_eq!(
        getattr(nfs, &file).await.map(|a| a.size),
        Ok(2 * MIB as u64)
    );
    match nfs
        .nfsproc3_fsstat(Fsstat3args {
            fsroot: m.root.clone(),
        })
        .await
        .expect("FSSTAT call")
    {
        Fsstat3res::Nfs3Ok(ok) => assert_eq!((ok.tbytes, ok.fbytes), (2 * MIB as u64, 0)),
        other => panic!("FSSTAT: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_mib_both_ways_with_calls_in_flight_as_the_kernel_sends_them() {
    const SIZE: usize = 64 * MIB;
    const IN_FLIGHT: usize = 32;
    let m = mounted(1 << 30).await;
    let file = create(&m.nfs, &m.root, "big").await;
    let content = Arc::new(pattern(0, SIZE));

    // Several 1 MiB WRITEs at once, UNSTABLE as the kernel sends them, finishing out of order;
    // then a COMMIT.
    let mut tasks = tokio::task::JoinSet::new();
    for lane in 0..IN_FLIGHT {
        let (nfs, file, content) = (m.nfs.clone(), file.clone(), content.clone());
        tasks.spawn(async move {
            for k in (lane..SIZE / MIB).step_by(IN_FLIGHT) {
                let data = Bytes::copy_from_slice(&content[k * MIB..(k + 1) * MIB]);
                match write(&nfs, &file, (k * MIB) as u64, data).await {
                    Write3res::Nfs3Ok(ok) => assert_eq!(ok.count, MIB as u32, "WRITE {k}"),
                    other => panic!("WRITE {k}: {other:?}"),
                }
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("a WRITE lane");
    }
    let commit = m
        .nfs
        .nfsproc3_commit(Commit3args {
            file: file.clone(),
            offset: 0,
            count: 0,
        })
        .await
        .expect("COMMIT call");
    assert_eq!(commit.status(), Nfsstat3::Nfs3Ok);
    assert_eq!(
        getattr(&m.nfs, &file).await.map(|a| a.size),
        Ok(SIZE as u64)
    );

    // Read back the same way, each MiB into a registered buffer, compared where it lands.
    for lane in 0..IN_FLIGHT {
        let (nfs, file, content) = (m.nfs.clone(), file.clone(), content.clone());
        tasks.spawn(async move {
            for k in (lane..SIZE / MIB).step_by(IN_FLIGHT) {
                let client = nfs.rpc();
                let options = CallOptions::new().reply_buffer(client.buffer(MIB));
                let args = Read3args {
                    file: file.clone(),
                    offset: (k * MIB) as u64,
                    count: MIB as u32,
                };
                match client.call_with::<Nfsproc3Read>(&args, options).await {
                    Ok(Read3res::Nfs3Ok(ok)) => {
                        assert_eq!(ok.eof, k == SIZE / MIB - 1, "READ {k}");
                        assert!(ok.data[..] == content[k * MIB..(k + 1) * MIB], "READ {k}");
                    }
                    other => panic!("READ {k}: {other:?}"),
                }
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("a READ lane");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symlink_targets_move_as_chunks_and_come_back_by_readlink() {
    // A client that moves DDP-eligible arguments of 1 KiB and more (the default keeps what
    // fits the receive buffer inline): the 3000-byte target goes in a Read chunk.
    let m = mounted_with(1 << 30, RdmaConfig::default().min_ddp_size(1024)).await;
    let target = "t/".repeat(1500);
    let before = m.stats();
    let res = m
        .nfs
        .nfsproc3_symlink(Symlink3args {
            r#where: at(&m.root, "long"),
            symlink: Symlinkdata3 {
                symlink_attributes: no_sattr(),
                symlink_data: XdrString::from(target.clone()),
            },
        })
        .await
        .expect("SYMLINK call");
    let Symlink3res::Nfs3Ok(Symlink3resok {
        obj: PostOpFh3::True(link),
        ..
    }) = res
    else {
        panic!("SYMLINK: {res:?}");
    };
    assert_eq!(m.stats().calls_read_chunks - before.calls_read_chunks, 1);
    match m
        .nfs
        .nfsproc3_readlink(Readlink3args { symlink: link })
        .await
        .expect("READLINK call")
    {
        Readlink3res::Nfs3Ok(ok) => assert_eq!(ok.data.as_bytes(), target.as_bytes()),
        other => panic!("READLINK: {other:?}"),
    }
    // Over PATH_MAX: NAMETOOLONG, nothing made.
    let res = m
        .nfs
        .nfsproc3_symlink(Symlink3args {
            r#where: at(&m.root, "too-long"),
            symlink: Symlinkdata3 {
                symlink_attributes: no_sattr(),
                symlink_data: XdrString::from("x".repeat(4097)),
            },
        })
        .await
        .expect("SYMLINK call");
    assert_eq!(res.status(), Nfsstat3::Nfs3errNametoolong);
    assert_eq!(
        lookup(&m.nfs, &m.root, "too-long").await,
        Err(Nfsstat3::Nfs3errNoent)
    );
}

//! The in-memory NFSv3 and MOUNT server over `LocalTransport` (the same encode, dispatch and
//! decode steps as a network, no sockets): the procedures' rules one by one, each answer
//! checked against RFC 1813.

mod memfs_helpers;

use std::sync::Arc;

use bytes::Bytes;
use memfs_helpers::*;
use rpcrdma::rpc::{AuthSys, Client, Credentials, LocalTransport};
use rpcrdma::xdr::XdrString;
use rpcrdma_nfs3::memfs::tree::{MAX_FILE_SIZE, PAGE_SIZE};
use rpcrdma_nfs3::memfs::{MemFs, MemFsConfig};
use rpcrdma_nfs3::mount3::mount_program::mount_v3::MountV3Client;
use rpcrdma_nfs3::mount3::{Dirpath, Mountres3, Mountstat3};
use rpcrdma_nfs3::nfs3::nfs_program::nfs_v3::NfsV3Client;
use rpcrdma_nfs3::nfs3::*;

struct Local {
    fs: Arc<MemFs>,
    nfs: NfsV3Client,
    root: NfsFh3,
}

fn local() -> Local {
    local_with(MemFsConfig::new("/export"))
}

fn local_with(config: MemFsConfig) -> Local {
    let fs = Arc::new(MemFs::new(config));
    let nfs = as_root(Client::new(LocalTransport::new(fs.nfs_server())));
    let root = fs.root_handle();
    Local { fs, nfs, root }
}

/// A client of the same server calling as `uid`/`gid`.
fn as_user(l: &Local, uid: u32, gid: u32) -> NfsV3Client {
    let client = Client::new(LocalTransport::new(l.fs.nfs_server()))
        .with_credentials(&Credentials::Sys(AuthSys::new("memfs-test", uid, gid)))
        .expect("AUTH_SYS");
    NfsV3Client::new(client)
}

async fn create_how(l: &Local, name: &str, how: Createhow3) -> Create3res {
    l.nfs
        .nfsproc3_create(Create3args {
            r#where: at(&l.root, name),
            how,
        })
        .await
        .expect("CREATE call")
}

fn created(res: &Create3res) -> NfsFh3 {
    match res {
        Create3res::Nfs3Ok(Create3resok {
            obj: PostOpFh3::True(fh),
            ..
        }) => fh.clone(),
        other => panic!("CREATE: {other:?}"),
    }
}

#[tokio::test]
async fn create_unchecked_guarded_and_exclusive() {
    let l = local();
    let verf = Createverf3(Bytes::from_static(b"verifier"));
    let first = created(&create_how(&l, "x", Createhow3::Exclusive(verf.clone())).await);
    // Section 3.3.8: the retransmission of an EXCLUSIVE CREATE succeeds with the same file...
    let again = created(&create_how(&l, "x", Createhow3::Exclusive(verf)).await);
    assert_eq!(first, again);
    // ... another verifier does not.
    let other = create_how(
        &l,
        "x",
        Createhow3::Exclusive(Createverf3(Bytes::from_static(b"other..."))),
    );
    assert_eq!(other.await.status(), Nfsstat3::Nfs3errExist);
    assert_eq!(
        create_how(&l, "x", Createhow3::Guarded(mode(0o600)))
            .await
            .status(),
        Nfsstat3::Nfs3errExist
    );

    // UNCHECKED on an existing file keeps it, applying only a size: O_TRUNC.
    assert_eq!(
        write(&l.nfs, &first, 0, Bytes::from_static(b"data"))
            .await
            .status(),
        Nfsstat3::Nfs3Ok
    );
    let kept = created(&create_how(&l, "x", Createhow3::Unchecked(size(0))).await);
    assert_eq!(kept, first);
    assert_eq!(getattr(&l.nfs, &first).await.map(|a| a.size), Ok(0));

    // A new file takes the mode asked and the caller's ids.
    let user = as_user(&l, 1000, 100);
    let res = user
        .nfsproc3_create(Create3args {
            r#where: at(&l.root, "mine"),
            how: Createhow3::Guarded(mode(0o640)),
        })
        .await
        .expect("CREATE call");
    let attrs = getattr(&l.nfs, &created(&res)).await.expect("GETATTR");
    assert_eq!(
        (attrs.mode, attrs.uid, attrs.gid, attrs.nlink),
        (0o640, 1000, 100, 1)
    );
    assert_eq!(attrs.r#type, Ftype3::Nf3reg);

    // UNCHECKED over a directory is EXIST.
    mkdir(&l.nfs, &l.root, "d").await;
    assert_eq!(
        create_how(&l, "d", Createhow3::Unchecked(no_sattr()))
            .await
            .status(),
        Nfsstat3::Nfs3errExist
    );
}

#[tokio::test]
async fn lookup_dot_dotdot_and_bad_names() {
    let l = local();
    let d = mkdir(&l.nfs, &l.root, "d").await;
    assert_eq!(lookup(&l.nfs, &d, ".").await, Ok(d.clone()));
    assert_eq!(lookup(&l.nfs, &d, "..").await, Ok(l.root.clone()));
    assert_eq!(lookup(&l.nfs, &l.root, "..").await, Ok(l.root.clone()));
    assert_eq!(
        lookup(&l.nfs, &d, "missing").await,
        Err(Nfsstat3::Nfs3errNoent)
    );
    let long = "n".repeat(256);
    assert_eq!(
        lookup(&l.nfs, &d, &long).await,
        Err(Nfsstat3::Nfs3errNametoolong)
    );
    let f = create(&l.nfs, &d, "f").await;
    assert_eq!(lookup(&l.nfs, &f, "x").await, Err(Nfsstat3::Nfs3errNotdir));
    for (name, status) in [
        ("a/b", Nfsstat3::Nfs3errInval),
        ("", Nfsstat3::Nfs3errInval),
        (".", Nfsstat3::Nfs3errExist),
        (long.as_str(), Nfsstat3::Nfs3errNametoolong),
    ] {
        let res = create_how(&l, name, Createhow3::Unchecked(no_sattr())).await;
        assert_eq!(res.status(), status, "{name:?}");
    }
    // Directory nlink: ".", the parent's entry, one ".." per subdirectory.
    mkdir(&l.nfs, &d, "sub").await;
    assert_eq!(getattr(&l.nfs, &d).await.map(|a| a.nlink), Ok(3));
    assert_eq!(getattr(&l.nfs, &l.root).await.map(|a| a.nlink), Ok(3));
}

#[tokio::test]
async fn handles_of_other_instances_and_other_shapes() {
    let l = local();
    let other = MemFs::new(MemFsConfig::new("/export"));
    assert_eq!(
        getattr(&l.nfs, &other.root_handle()).await,
        Err(Nfsstat3::Nfs3errStale)
    );
    for len in [0, 8, 15, 17, 64] {
        let fh = NfsFh3 {
            data: Bytes::from(vec![0xa5; len]),
        };
        assert_eq!(
            getattr(&l.nfs, &fh).await,
            Err(Nfsstat3::Nfs3errBadhandle),
            "{len}"
        );
        let res = l
            .nfs
            .nfsproc3_read(Read3args {
                file: fh.clone(),
                offset: 0,
                count: 10,
            })
            .await
            .expect("READ call");
        assert_eq!(res.status(), Nfsstat3::Nfs3errBadhandle);
        let res = l
            .nfs
            .nfsproc3_readdirplus(Readdirplus3args {
                dir: fh,
                cookie: 0,
                cookieverf: Cookieverf3(Bytes::from_static(&[0; 8])),
                dircount: 4096,
                maxcount: 4096,
            })
            .await
            .expect("READDIRPLUS call");
        assert_eq!(res.status(), Nfsstat3::Nfs3errBadhandle);
    }
}

#[tokio::test]
async fn read_and_write_check_kinds_counts_and_ends() {
    let l = local();
    let f = create(&l.nfs, &l.root, "f").await;
    assert_eq!(
        write(&l.nfs, &f, 2, Bytes::from_static(b"abc"))
            .await
            .status(),
        Nfsstat3::Nfs3Ok
    );
    let read = |offset, count| {
        l.nfs.nfsproc3_read(Read3args {
            file: f.clone(),
            offset,
            count,
        })
    };
    match read(0, 100).await.expect("READ") {
        Read3res::Nfs3Ok(ok) => {
            assert_eq!(&ok.data[..], b"\0\0abc");
            assert!(ok.eof);
        }
        other => panic!("{other:?}"),
    }
    // READ moves atime (set back to 1970 first), not ctime.
    let res = l
        .nfs
        .nfsproc3_setattr(Setattr3args {
            object: f.clone(),
            new_attributes: Sattr3 {
                atime: SetAtime::SetToClientTime(Nfstime3 {
                    seconds: 1,
                    nseconds: 0,
                }),
                ..no_sattr()
            },
            guard: Sattrguard3::False,
        })
        .await
        .expect("SETATTR");
    assert_eq!(res.status(), Nfsstat3::Nfs3Ok);
    let before = getattr(&l.nfs, &f).await.expect("GETATTR");
    match read(1, 2).await.expect("READ") {
        Read3res::Nfs3Ok(ok) => assert_eq!((&ok.data[..], ok.eof), (&b"\0a"[..], false)),
        other => panic!("{other:?}"),
    }
    let after = getattr(&l.nfs, &f).await.expect("GETATTR");
    assert!(after.atime.seconds > 1, "{after:?}");
    assert_eq!(after.ctime, before.ctime);
    match read(u64::MAX, 2).await.expect("READ") {
        Read3res::Nfs3Ok(ok) => assert_eq!((ok.count, ok.eof), (0, true)),
        other => panic!("{other:?}"),
    }
    let dir_read = l
        .nfs
        .nfsproc3_read(Read3args {
            file: l.root.clone(),
            offset: 0,
            count: 1,
        })
        .await
        .expect("READ");
    assert_eq!(dir_read.status(), Nfsstat3::Nfs3errIsdir);
    // count says more than data holds: INVAL, nothing written.
    let res = l
        .nfs
        .nfsproc3_write(Write3args {
            file: f.clone(),
            offset: 0,
            count: 10,
            stable: StableHow::FileSync,
            data: Bytes::from_static(b"short"),
        })
        .await
        .expect("WRITE");
    assert_eq!(res.status(), Nfsstat3::Nfs3errInval);
    assert_eq!(getattr(&l.nfs, &f).await.map(|a| a.size), Ok(5));
    let res = write(&l.nfs, &l.root, 0, Bytes::from_static(b"x")).await;
    assert_eq!(res.status(), Nfsstat3::Nfs3errIsdir);
    // More than wtmax (1 MiB): a short write of wtmax bytes.
    let res = write(&l.nfs, &f, 0, Bytes::from(vec![1; (1 << 20) + 1])).await;
    match res {
        Write3res::Nfs3Ok(ok) => assert_eq!(ok.count, 1 << 20),
        other => panic!("{other:?}"),
    }
    assert_eq!(getattr(&l.nfs, &f).await.map(|a| a.size), Ok(1 << 20));
}

#[tokio::test]
async fn setattr_sets_times_ids_and_honours_the_guard() {
    let l = local();
    let f = create(&l.nfs, &l.root, "f").await;
    let before = getattr(&l.nfs, &f).await.expect("GETATTR");
    let when = Nfstime3 {
        seconds: 1_000_000,
        nseconds: 7,
    };
    let res = l
        .nfs
        .nfsproc3_setattr(Setattr3args {
            object: f.clone(),
            new_attributes: Sattr3 {
                uid: SetUid3::True(42),
                gid: SetGid3::True(43),
                mtime: SetMtime::SetToClientTime(when),
                ..size(10)
            },
            guard: Sattrguard3::True(before.ctime),
        })
        .await
        .expect("SETATTR");
    let Setattr3res::Nfs3Ok(ok) = res else {
        panic!("{res:?}");
    };
    let PostOpAttr::True(after) = ok.obj_wcc.after else {
        panic!("no post-op attributes");
    };
    assert_eq!(
        (after.uid, after.gid, after.size, after.mtime),
        (42, 43, 10, when)
    );
    // The guard now holds the old ctime: NOT_SYNC, nothing changed.
    let res = l
        .nfs
        .nfsproc3_setattr(Setattr3args {
            object: f.clone(),
            new_attributes: size(0),
            guard: Sattrguard3::True(Nfstime3 {
                seconds: 1,
                nseconds: 0,
            }),
        })
        .await
        .expect("SETATTR");
    assert_eq!(res.status(), Nfsstat3::Nfs3errNotSync);
    assert_eq!(getattr(&l.nfs, &f).await.map(|a| a.size), Ok(10));
    // A size on a directory: ISDIR.
    let res = l
        .nfs
        .nfsproc3_setattr(Setattr3args {
            object: l.root.clone(),
            new_attributes: size(0),
            guard: Sattrguard3::False,
        })
        .await
        .expect("SETATTR");
    assert_eq!(res.status(), Nfsstat3::Nfs3errIsdir);
}

#[tokio::test]
async fn readdir_pages_by_count_and_checks_cookies() {
    let l = local();
    let d = mkdir(&l.nfs, &l.root, "d").await;
    for i in 0..50 {
        create(&l.nfs, &d, &format!("file-{i:02}")).await;
    }
    let readdir = |cookie, cookieverf: Cookieverf3, count| {
        l.nfs.nfsproc3_readdir(Readdir3args {
            dir: d.clone(),
            cookie,
            cookieverf,
            count,
        })
    };
    let zero = Cookieverf3(Bytes::from_static(&[0; 8]));
    let mut names = Vec::new();
    let (mut cookie, mut verf) = (0, zero.clone());
    loop {
        let ok = match readdir(cookie, verf.clone(), 512).await.expect("READDIR") {
            Readdir3res::Nfs3Ok(ok) => ok,
            other => panic!("{other:?}"),
        };
        // The reply fits the count: entries of 24 bytes and their names, 108 fixed.
        let encoded: usize = 108
            + ok.reply
                .entries
                .iter()
                .map(|e| 24 + e.name.len().div_ceil(4) * 4)
                .sum::<usize>();
        assert!(encoded <= 512, "{encoded}");
        for e in &ok.reply.entries {
            names.push(e.name.to_str().expect("UTF-8").to_string());
            cookie = e.cookie;
        }
        verf = ok.cookieverf;
        if ok.reply.eof {
            break;
        }
    }
    assert_eq!(names.len(), 52, "50 files, '.' and '..'");
    assert_eq!(&names[..2], [".", ".."]);

    let foreign = Cookieverf3(Bytes::from_static(b"foreign!"));
    assert_eq!(
        readdir(3, foreign, 4096).await.expect("READDIR").status(),
        Nfsstat3::Nfs3errBadCookie,
        "a cookie with a verifier not ours"
    );
    assert_eq!(
        readdir(3, zero.clone(), 4096)
            .await
            .expect("READDIR")
            .status(),
        Nfsstat3::Nfs3Ok,
        "a cookie with a zero verifier: cookies stay valid, the client may have lost ours"
    );
    assert_eq!(
        readdir(1 << 40, verf.clone(), 4096)
            .await
            .expect("READDIR")
            .status(),
        Nfsstat3::Nfs3errBadCookie,
        "a cookie never handed out"
    );
    assert_eq!(
        readdir(0, zero, 100).await.expect("READDIR").status(),
        Nfsstat3::Nfs3errToosmall
    );
    // Past the last entry: nothing left, eof.
    match readdir(cookie, verf, 4096).await.expect("READDIR") {
        Readdir3res::Nfs3Ok(ok) => assert!(ok.reply.entries.is_empty() && ok.reply.eof),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn symlink_readlink_and_link() {
    let l = local();
    let res = l
        .nfs
        .nfsproc3_symlink(Symlink3args {
            r#where: at(&l.root, "s"),
            symlink: Symlinkdata3 {
                symlink_attributes: no_sattr(),
                symlink_data: XdrString::from("target/path"),
            },
        })
        .await
        .expect("SYMLINK");
    let Symlink3res::Nfs3Ok(Symlink3resok {
        obj: PostOpFh3::True(link),
        ..
    }) = res
    else {
        panic!("{res:?}");
    };
    match l
        .nfs
        .nfsproc3_readlink(Readlink3args {
            symlink: link.clone(),
        })
        .await
        .expect("READLINK")
    {
        Readlink3res::Nfs3Ok(ok) => assert_eq!(ok.data.as_bytes(), b"target/path"),
        other => panic!("{other:?}"),
    }
    let attrs = getattr(&l.nfs, &link).await.expect("GETATTR");
    assert_eq!((attrs.r#type, attrs.size), (Ftype3::Nf3lnk, 11));

    let f = create(&l.nfs, &l.root, "f").await;
    let res = l
        .nfs
        .nfsproc3_link(Link3args {
            file: f.clone(),
            link: at(&l.root, "g"),
        })
        .await
        .expect("LINK");
    assert_eq!(res.status(), Nfsstat3::Nfs3Ok);
    assert_eq!(getattr(&l.nfs, &f).await.map(|a| a.nlink), Ok(2));
    let res = l
        .nfs
        .nfsproc3_link(Link3args {
            file: l.root.clone(),
            link: at(&l.root, "h"),
        })
        .await
        .expect("LINK");
    assert_eq!(res.status(), Nfsstat3::Nfs3errIsdir);
    for name in ["f", "g"] {
        let res = l
            .nfs
            .nfsproc3_remove(Remove3args {
                object: at(&l.root, name),
            })
            .await
            .expect("REMOVE");
        assert_eq!(res.status(), Nfsstat3::Nfs3Ok);
    }
    assert_eq!(getattr(&l.nfs, &f).await, Err(Nfsstat3::Nfs3errStale));
}

/// READ of `count` bytes at `offset`: (data, eof), or the status.
async fn read_at(
    nfs: &NfsV3Client,
    fh: &NfsFh3,
    offset: u64,
    count: u32,
) -> Result<(Bytes, bool), Nfsstat3> {
    match nfs
        .nfsproc3_read(Read3args {
            file: fh.clone(),
            offset,
            count,
        })
        .await
        .expect("READ call")
    {
        Read3res::Nfs3Ok(ok) => {
            assert_eq!(ok.count as usize, ok.data.len());
            Ok((ok.data, ok.eof))
        }
        Read3res::Default { discriminant, .. } => Err(discriminant),
    }
}

/// SETATTR of `sattr` on `fh` without a guard: the status.
async fn setattr(nfs: &NfsV3Client, fh: &NfsFh3, sattr: Sattr3) -> Nfsstat3 {
    nfs.nfsproc3_setattr(Setattr3args {
        object: fh.clone(),
        new_attributes: sattr,
        guard: Sattrguard3::False,
    })
    .await
    .expect("SETATTR call")
    .status()
}

#[tokio::test]
async fn sparse_files_reach_past_the_capacity_like_cthon04_bigfile2() {
    // 1 MiB of capacity, and a file of 32 GiB: its hole stores nothing.
    let l = local_with(MemFsConfig::new("/export").capacity(1 << 20));
    match l
        .nfs
        .nfsproc3_fsinfo(Fsinfo3args {
            fsroot: l.root.clone(),
        })
        .await
        .expect("FSINFO")
    {
        Fsinfo3res::Nfs3Ok(ok) => {
            assert_eq!(ok.maxfilesize, MAX_FILE_SIZE);
            assert_eq!(ok.maxfilesize, 0x7fff_ffff_ffff_ffff, "knfsd's s_maxbytes");
        }
        other => panic!("{other:?}"),
    }
    let f = create(&l.nfs, &l.root, "big").await;
    // cthon04 special/bigfile2 seeks to 0x7_ffff_fffe and writes there.
    let offset = 0x7_ffff_fffe_u64;
    match write(&l.nfs, &f, offset, Bytes::from_static(b"bigfile2")).await {
        Write3res::Nfs3Ok(ok) => assert_eq!(ok.count, 8),
        other => panic!("{other:?}"),
    }
    let attrs = getattr(&l.nfs, &f).await.expect("GETATTR");
    assert_eq!(attrs.size, offset + 8);
    // used: the bytes stored, a page's worth at most on each side of the page boundary at
    // 0x8_0000_0000, not the size.
    assert!(
        attrs.used >= 8 && attrs.used <= 2 * PAGE_SIZE as u64,
        "{attrs:?}"
    );
    assert_eq!(attrs.used, l.fs.used_bytes());
    // Across the hole into the data: zeros, then the bytes written, then eof.
    let (data, eof) = read_at(&l.nfs, &f, offset - 6, 100).await.expect("READ");
    assert_eq!(&data[..], b"\0\0\0\0\0\0bigfile2");
    assert!(eof);
    let (data, eof) = read_at(&l.nfs, &f, 1 << 30, 1 << 20).await.expect("READ");
    assert_eq!(data.len(), 1 << 20);
    assert!(data.iter().all(|b| *b == 0) && !eof);

    // Past the largest file size: FBIG for a write and for a size, and nothing changes.
    for (at, len) in [(MAX_FILE_SIZE, 1), (MAX_FILE_SIZE - 2, 4), (u64::MAX, 1)] {
        let res = write(&l.nfs, &f, at, Bytes::from(vec![1; len])).await;
        assert_eq!(res.status(), Nfsstat3::Nfs3errFbig, "{at:#x}+{len}");
    }
    assert_eq!(
        setattr(&l.nfs, &f, size(MAX_FILE_SIZE + 1)).await,
        Nfsstat3::Nfs3errFbig
    );
    assert_eq!(getattr(&l.nfs, &f).await.map(|a| a.size), Ok(offset + 8));
    // Up to it is fine, and costs nothing.
    assert_eq!(
        setattr(&l.nfs, &f, size(MAX_FILE_SIZE)).await,
        Nfsstat3::Nfs3Ok
    );
    let (data, eof) = read_at(&l.nfs, &f, MAX_FILE_SIZE - 3, 10)
        .await
        .expect("READ");
    assert_eq!((&data[..], eof), (&[0u8; 3][..], true));
    assert_eq!(getattr(&l.nfs, &f).await.map(|a| a.used), Ok(attrs.used));
    // Truncation gives the bytes back.
    assert_eq!(setattr(&l.nfs, &f, size(4)).await, Nfsstat3::Nfs3Ok);
    assert_eq!(l.fs.used_bytes(), 0);
}

/// MKNOD of `name` in the root as `nfs`'s caller: the handle and attributes, or the status.
async fn mknod(
    nfs: &NfsV3Client,
    dir: &NfsFh3,
    name: &str,
    what: Mknoddata3,
) -> Result<(NfsFh3, Fattr3), Nfsstat3> {
    match nfs
        .nfsproc3_mknod(Mknod3args {
            r#where: at(dir, name),
            what,
        })
        .await
        .expect("MKNOD call")
    {
        Mknod3res::Nfs3Ok(Mknod3resok {
            obj: PostOpFh3::True(fh),
            obj_attributes: PostOpAttr::True(attrs),
            dir_wcc,
        }) => {
            assert!(
                matches!(
                    (dir_wcc.before, dir_wcc.after),
                    (PreOpAttr::True(_), PostOpAttr::True(_))
                ),
                "the directory's wcc data"
            );
            Ok((fh, attrs))
        }
        Mknod3res::Nfs3Ok(ok) => panic!("MKNOD {name}: no handle or attributes: {ok:?}"),
        Mknod3res::Default { discriminant, .. } => Err(discriminant),
    }
}

fn device(sattr: Sattr3, major: u32, minor: u32) -> Devicedata3 {
    Devicedata3 {
        dev_attributes: sattr,
        spec: Specdata3 {
            specdata1: major,
            specdata2: minor,
        },
    }
}

#[tokio::test]
async fn mknod_makes_fifos_sockets_and_devices() {
    let l = local();
    let kinds = [
        (
            "fifo",
            Mknoddata3::Nf3fifo(mode(0o640)),
            Ftype3::Nf3fifo,
            (0, 0),
        ),
        (
            "sock",
            Mknoddata3::Nf3sock(mode(0o640)),
            Ftype3::Nf3sock,
            (0, 0),
        ),
        (
            "null",
            Mknoddata3::Nf3chr(device(mode(0o640), 1, 3)),
            Ftype3::Nf3chr,
            (1, 3),
        ),
        (
            "sda1",
            Mknoddata3::Nf3blk(device(mode(0o640), 8, 1)),
            Ftype3::Nf3blk,
            (8, 1),
        ),
    ];
    let mut handles = Vec::new();
    for (name, what, ftype, (major, minor)) in kinds {
        let (fh, made) = mknod(&l.nfs, &l.root, name, what).await.expect(name);
        let attrs = getattr(&l.nfs, &fh).await.expect("GETATTR");
        assert_eq!(attrs, made, "{name}: MKNOD's attributes are GETATTR's");
        assert_eq!(attrs.r#type, ftype, "{name}");
        assert_eq!(
            (attrs.rdev.specdata1, attrs.rdev.specdata2),
            (major, minor),
            "{name}"
        );
        assert_eq!(
            (attrs.size, attrs.used, attrs.mode, attrs.nlink, attrs.uid),
            (0, 0, 0o640, 1, 0),
            "{name}"
        );
        assert_eq!(lookup(&l.nfs, &l.root, name).await, Ok(fh.clone()));
        // No bytes go through a special file here, as through knfsd.
        assert_eq!(
            read_at(&l.nfs, &fh, 0, 10).await,
            Err(Nfsstat3::Nfs3errInval),
            "{name}"
        );
        let res = write(&l.nfs, &fh, 0, Bytes::from_static(b"x")).await;
        assert_eq!(res.status(), Nfsstat3::Nfs3errInval, "{name}");
        assert_eq!(setattr(&l.nfs, &fh, size(0)).await, Nfsstat3::Nfs3errInval);
        // chmod and chown.
        let res = setattr(
            &l.nfs,
            &fh,
            Sattr3 {
                uid: SetUid3::True(1000),
                gid: SetGid3::True(100),
                ..mode(0o600)
            },
        )
        .await;
        assert_eq!(res, Nfsstat3::Nfs3Ok, "{name}");
        let attrs = getattr(&l.nfs, &fh).await.expect("GETATTR");
        assert_eq!((attrs.mode, attrs.uid, attrs.gid), (0o600, 1000, 100));
        handles.push(fh);
    }
    // ACCESS judges them by the file bits: the owner reads and writes, others nothing.
    let res = as_user(&l, 1000, 100)
        .nfsproc3_access(Access3args {
            object: handles[0].clone(),
            access: ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXECUTE,
        })
        .await
        .expect("ACCESS");
    match res {
        Access3res::Nfs3Ok(ok) => assert_eq!(ok.access, ACCESS3_READ | ACCESS3_MODIFY),
        other => panic!("{other:?}"),
    }

    // A hard link, a rename and a removal, as for any file.
    let res = l
        .nfs
        .nfsproc3_link(Link3args {
            file: handles[2].clone(),
            link: at(&l.root, "null2"),
        })
        .await
        .expect("LINK");
    assert_eq!(res.status(), Nfsstat3::Nfs3Ok);
    assert_eq!(getattr(&l.nfs, &handles[2]).await.map(|a| a.nlink), Ok(2));
    let res = l
        .nfs
        .nfsproc3_rename(Rename3args {
            from: at(&l.root, "fifo"),
            to: at(&l.root, "pipe"),
        })
        .await
        .expect("RENAME");
    assert_eq!(res.status(), Nfsstat3::Nfs3Ok);
    assert_eq!(
        lookup(&l.nfs, &l.root, "fifo").await,
        Err(Nfsstat3::Nfs3errNoent)
    );
    assert_eq!(
        lookup(&l.nfs, &l.root, "pipe").await,
        Ok(handles[0].clone())
    );
    for name in ["pipe", "sock", "null", "null2", "sda1"] {
        let res = l
            .nfs
            .nfsproc3_remove(Remove3args {
                object: at(&l.root, name),
            })
            .await
            .expect("REMOVE");
        assert_eq!(res.status(), Nfsstat3::Nfs3Ok, "{name}");
    }
    for fh in &handles {
        assert_eq!(getattr(&l.nfs, fh).await, Err(Nfsstat3::Nfs3errStale));
    }
}

#[tokio::test]
async fn mknod_refuses_other_types_existing_names_and_devices_by_non_root() {
    let l = local();
    // Section 3.3.11: NF3REG, NF3DIR and NF3LNK are illegal types for MKNOD.
    for ftype in [Ftype3::Nf3reg, Ftype3::Nf3dir, Ftype3::Nf3lnk] {
        let what = Mknoddata3::Default {
            discriminant: ftype,
        };
        assert_eq!(
            mknod(&l.nfs, &l.root, "x", what).await.map(drop),
            Err(Nfsstat3::Nfs3errBadtype),
            "{ftype:?}"
        );
    }
    assert_eq!(
        lookup(&l.nfs, &l.root, "x").await,
        Err(Nfsstat3::Nfs3errNoent)
    );

    create(&l.nfs, &l.root, "taken").await;
    let res = mknod(&l.nfs, &l.root, "taken", Mknoddata3::Nf3fifo(no_sattr())).await;
    assert_eq!(res.map(drop), Err(Nfsstat3::Nfs3errExist));

    // A user makes FIFOs and sockets, owned by the user; a device is root's (Linux wants
    // CAP_MKNOD, which knfsd keeps for root callers only).
    let user = as_user(&l, 1000, 100);
    let (_, attrs) = mknod(&user, &l.root, "mine", Mknoddata3::Nf3fifo(mode(0o600)))
        .await
        .expect("a user's FIFO");
    assert_eq!(
        (attrs.uid, attrs.gid, attrs.r#type),
        (1000, 100, Ftype3::Nf3fifo)
    );
    mknod(&user, &l.root, "sock", Mknoddata3::Nf3sock(mode(0o600)))
        .await
        .expect("a user's socket");
    for what in [
        Mknoddata3::Nf3chr(device(mode(0o600), 1, 3)),
        Mknoddata3::Nf3blk(device(mode(0o600), 8, 0)),
    ] {
        assert_eq!(
            mknod(&user, &l.root, "dev", what).await.map(drop),
            Err(Nfsstat3::Nfs3errPerm)
        );
        // An existing name is EXIST first, as from Linux's server.
        assert_eq!(
            mknod(&user, &l.root, "taken", what).await.map(drop),
            Err(Nfsstat3::Nfs3errExist)
        );
    }
    assert_eq!(
        lookup(&l.nfs, &l.root, "dev").await,
        Err(Nfsstat3::Nfs3errNoent)
    );
}

/// A name is made, removed or moved only by a caller with write and search permission on its
/// directory, as from Linux's server (the kernel's client once sent a MKNOD into a directory
/// just made read-only, on a stale access cache: pjdfstest mknod/06.t); root passes.
#[tokio::test]
async fn names_change_only_with_write_and_search_permission_on_the_directory() {
    let l = local();
    let user = as_user(&l, 1000, 100);
    let dir = mkdir(&l.nfs, &l.root, "d").await;
    let other = mkdir(&l.nfs, &l.root, "other").await;
    assert_eq!(setattr(&l.nfs, &other, mode(0o777)).await, Nfsstat3::Nfs3Ok);
    let f = create(&l.nfs, &dir, "f").await;
    for bits in [0o555, 0o666, 0o755] {
        // Read-only, search-less, and root's own (others: r-x).
        assert_eq!(setattr(&l.nfs, &dir, mode(bits)).await, Nfsstat3::Nfs3Ok);
        let acces = Err(Nfsstat3::Nfs3errAcces);
        let fifo = Mknoddata3::Nf3fifo(mode(0o644));
        assert_eq!(
            mknod(&user, &dir, "p", fifo).await.map(drop),
            acces,
            "{bits:o}"
        );
        let res = user
            .nfsproc3_create(Create3args {
                r#where: at(&dir, "c"),
                how: Createhow3::Unchecked(no_sattr()),
            })
            .await
            .expect("CREATE call");
        assert_eq!(res.status(), Nfsstat3::Nfs3errAcces, "CREATE {bits:o}");
        let res = user
            .nfsproc3_mkdir(Mkdir3args {
                r#where: at(&dir, "m"),
                attributes: no_sattr(),
            })
            .await
            .expect("MKDIR call");
        assert_eq!(res.status(), Nfsstat3::Nfs3errAcces, "MKDIR {bits:o}");
        let res = user
            .nfsproc3_symlink(Symlink3args {
                r#where: at(&dir, "s"),
                symlink: Symlinkdata3 {
                    symlink_attributes: no_sattr(),
                    symlink_data: XdrString::from("t"),
                },
            })
            .await
            .expect("SYMLINK call");
        assert_eq!(res.status(), Nfsstat3::Nfs3errAcces, "SYMLINK {bits:o}");
        let res = user
            .nfsproc3_remove(Remove3args {
                object: at(&dir, "f"),
            })
            .await
            .expect("REMOVE call");
        assert_eq!(res.status(), Nfsstat3::Nfs3errAcces, "REMOVE {bits:o}");
        let res = user
            .nfsproc3_rename(Rename3args {
                from: at(&dir, "f"),
                to: at(&other, "f"),
            })
            .await
            .expect("RENAME call");
        assert_eq!(res.status(), Nfsstat3::Nfs3errAcces, "RENAME {bits:o}");
        let res = user
            .nfsproc3_link(Link3args {
                file: f.clone(),
                link: at(&dir, "g"),
            })
            .await
            .expect("LINK call");
        assert_eq!(res.status(), Nfsstat3::Nfs3errAcces, "LINK {bits:o}");
    }
    // A non-directory is still NOTDIR, and root passes.
    assert_eq!(
        mknod(&user, &f, "p", Mknoddata3::Nf3fifo(no_sattr()))
            .await
            .map(drop),
        Err(Nfsstat3::Nfs3errNotdir)
    );
    assert_eq!(setattr(&l.nfs, &dir, mode(0o555)).await, Nfsstat3::Nfs3Ok);
    mknod(&l.nfs, &dir, "p", Mknoddata3::Nf3fifo(no_sattr()))
        .await
        .expect("root's FIFO");
    // Write and search permission is enough.
    assert_eq!(setattr(&l.nfs, &dir, mode(0o777)).await, Nfsstat3::Nfs3Ok);
    mknod(&user, &dir, "q", Mknoddata3::Nf3fifo(no_sattr()))
        .await
        .expect("a user's FIFO");
    let res = user
        .nfsproc3_rename(Rename3args {
            from: at(&dir, "f"),
            to: at(&other, "f"),
        })
        .await
        .expect("RENAME call");
    assert_eq!(res.status(), Nfsstat3::Nfs3Ok);
}

/// Only root and the owner change a file's mode; only root gives it away; the owner gives it
/// only a group of its own (NFS3ERR_PERM otherwise, as from Linux's server: pjdfstest chmod/00.t
/// and chmod/07.t found a non-owner's chmod accepted).
#[tokio::test]
async fn setattr_of_mode_owner_and_group_is_the_owners_or_roots() {
    let l = local();
    let owner = as_user(&l, 1000, 100);
    let other = as_user(&l, 2000, 200);
    let f = create(&owner, &l.root, "f").await;
    let ids = |uid: Option<u32>, gid: Option<u32>| Sattr3 {
        uid: uid.map_or(
            SetUid3::Default {
                discriminant: false,
            },
            SetUid3::True,
        ),
        gid: gid.map_or(
            SetGid3::Default {
                discriminant: false,
            },
            SetGid3::True,
        ),
        ..no_sattr()
    };
    let perm = Nfsstat3::Nfs3errPerm;
    assert_eq!(setattr(&other, &f, mode(0o111)).await, perm);
    assert_eq!(setattr(&other, &f, ids(Some(2000), None)).await, perm);
    assert_eq!(setattr(&other, &f, ids(None, Some(200))).await, perm);
    assert_eq!(setattr(&owner, &f, ids(Some(2000), None)).await, perm);
    assert_eq!(setattr(&owner, &f, ids(None, Some(200))).await, perm);
    let attrs = getattr(&l.nfs, &f).await.expect("GETATTR");
    assert_eq!((attrs.mode, attrs.uid, attrs.gid), (0o644, 1000, 100));

    assert_eq!(setattr(&owner, &f, mode(0o600)).await, Nfsstat3::Nfs3Ok);
    assert_eq!(
        setattr(&owner, &f, ids(Some(1000), Some(100))).await,
        Nfsstat3::Nfs3Ok
    );
    assert_eq!(
        setattr(&l.nfs, &f, ids(Some(2000), Some(200))).await,
        Nfsstat3::Nfs3Ok
    );
    let attrs = getattr(&l.nfs, &f).await.expect("GETATTR");
    assert_eq!((attrs.mode, attrs.uid, attrs.gid), (0o600, 2000, 200));
}

/// A WRITE by anyone but root clears set-user-ID, and set-group-ID with group execute (as
/// Linux's server: pjdfstest chmod/12.t); root's keeps them.
#[tokio::test]
async fn a_users_write_clears_set_id_bits() {
    let l = local();
    let user = as_user(&l, 1000, 100);
    for (bits, after_root, after_user) in [
        (0o4777, 0o4777, 0o777),
        (0o2777, 0o2777, 0o777),
        (0o6777, 0o6777, 0o777),
        (0o2767, 0o2767, 0o2767),
    ] {
        let f = create(&l.nfs, &l.root, "f").await;
        assert_eq!(setattr(&l.nfs, &f, mode(bits)).await, Nfsstat3::Nfs3Ok);
        for (nfs, want) in [(&l.nfs, after_root), (&user, after_user)] {
            let res = nfs
                .nfsproc3_write(Write3args {
                    file: f.clone(),
                    offset: 0,
                    count: 1,
                    stable: StableHow::FileSync,
                    data: Bytes::from_static(b"x"),
                })
                .await
                .expect("WRITE call");
            assert_eq!(res.status(), Nfsstat3::Nfs3Ok);
            let attrs = getattr(&l.nfs, &f).await.expect("GETATTR");
            assert_eq!(attrs.mode, want, "{bits:o}");
        }
        let res = l
            .nfs
            .nfsproc3_remove(Remove3args {
                object: at(&l.root, "f"),
            })
            .await
            .expect("REMOVE");
        assert_eq!(res.status(), Nfsstat3::Nfs3Ok);
    }
}

#[tokio::test]
async fn access_follows_the_mode_bits() {
    let l = local();
    let res = l
        .nfs
        .nfsproc3_create(Create3args {
            r#where: at(&l.root, "private"),
            how: Createhow3::Guarded(Sattr3 {
                uid: SetUid3::True(1000),
                gid: SetGid3::True(100),
                ..mode(0o640)
            }),
        })
        .await
        .expect("CREATE");
    let f = created(&res);
    let all = ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_EXECUTE;
    for (uid, gid, want) in [
        (1000, 1, ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXTEND),
        (2000, 100, ACCESS3_READ),
        (2000, 1, 0),
        (0, 0, ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXTEND),
    ] {
        let res = as_user(&l, uid, gid)
            .nfsproc3_access(Access3args {
                object: f.clone(),
                access: all,
            })
            .await
            .expect("ACCESS");
        match res {
            Access3res::Nfs3Ok(ok) => assert_eq!(ok.access, want, "uid {uid} gid {gid}"),
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn rename_refuses_a_directory_into_itself_and_replaces_files() {
    let l = local();
    let a = mkdir(&l.nfs, &l.root, "a").await;
    mkdir(&l.nfs, &a, "b").await;
    let b = lookup(&l.nfs, &a, "b").await.expect("LOOKUP");
    let res = l
        .nfs
        .nfsproc3_rename(Rename3args {
            from: at(&l.root, "a"),
            to: at(&b, "a"),
        })
        .await
        .expect("RENAME");
    assert_eq!(res.status(), Nfsstat3::Nfs3errInval);
    let x = create(&l.nfs, &l.root, "x").await;
    let y = create(&l.nfs, &l.root, "y").await;
    let res = l
        .nfs
        .nfsproc3_rename(Rename3args {
            from: at(&l.root, "x"),
            to: at(&a, "y"),
        })
        .await
        .expect("RENAME");
    assert_eq!(res.status(), Nfsstat3::Nfs3Ok);
    let res = l
        .nfs
        .nfsproc3_rename(Rename3args {
            from: at(&a, "y"),
            to: at(&l.root, "y"),
        })
        .await
        .expect("RENAME");
    assert_eq!(res.status(), Nfsstat3::Nfs3Ok);
    assert_eq!(lookup(&l.nfs, &l.root, "y").await, Ok(x));
    assert_eq!(getattr(&l.nfs, &y).await, Err(Nfsstat3::Nfs3errStale));
    let res = l
        .nfs
        .nfsproc3_rename(Rename3args {
            from: at(&l.root, "y"),
            to: at(&l.root, "a"),
        })
        .await
        .expect("RENAME");
    assert_eq!(res.status(), Nfsstat3::Nfs3errIsdir);
}

#[tokio::test]
async fn fsstat_pathconf_and_the_file_bound() {
    let l = local_with(MemFsConfig::new("/export").capacity(100).max_files(3));
    create(&l.nfs, &l.root, "one").await;
    create(&l.nfs, &l.root, "two").await;
    let res = create_how(&l, "three", Createhow3::Unchecked(no_sattr())).await;
    assert_eq!(res.status(), Nfsstat3::Nfs3errNospc);
    match l
        .nfs
        .nfsproc3_fsstat(Fsstat3args {
            fsroot: l.root.clone(),
        })
        .await
        .expect("FSSTAT")
    {
        Fsstat3res::Nfs3Ok(ok) => {
            assert_eq!((ok.tbytes, ok.fbytes, ok.abytes), (100, 100, 100));
            assert_eq!((ok.tfiles, ok.ffiles), (3, 0));
        }
        other => panic!("{other:?}"),
    }
    match l
        .nfs
        .nfsproc3_pathconf(Pathconf3args {
            object: l.root.clone(),
        })
        .await
        .expect("PATHCONF")
    {
        Pathconf3res::Nfs3Ok(ok) => {
            assert_eq!(ok.name_max, 255);
            assert!(ok.no_trunc && ok.case_preserving && !ok.case_insensitive);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn mount_export_dump_umnt_and_umntall() {
    let fs = Arc::new(MemFs::new(MemFsConfig::new("/export")));
    let mount = MountV3Client::new(Client::new(LocalTransport::new(fs.mount_server())));
    mount.mountproc3_null().await.expect("NULL");
    for path in ["/export", "/export/"] {
        match mount
            .mountproc3_mnt(Dirpath(XdrString::from(path)))
            .await
            .expect("MNT")
        {
            Mountres3::Mnt3Ok(ok) => assert_eq!(ok.fhandle.0, fs.root_handle().data),
            other => panic!("{path}: {other:?}"),
        }
    }
    for path in ["/", "/exp", "/export/sub", "export"] {
        let res = mount
            .mountproc3_mnt(Dirpath(XdrString::from(path)))
            .await
            .expect("MNT");
        assert!(
            matches!(
                res,
                Mountres3::Default {
                    discriminant: Mountstat3::Mnt3errNoent
                }
            ),
            "{path}: {res:?}"
        );
    }
    let exports = mount.mountproc3_export().await.expect("EXPORT");
    assert_eq!(exports.0.len(), 1);
    assert_eq!(exports.0[0].ex_dir.0.as_bytes(), b"/export");
    assert_eq!(mount.mountproc3_dump().await.expect("DUMP").0.len(), 2);
    mount
        .mountproc3_umnt(Dirpath(XdrString::from("/export")))
        .await
        .expect("UMNT");
    assert_eq!(mount.mountproc3_dump().await.expect("DUMP").0.len(), 1);
    mount.mountproc3_umntall().await.expect("UMNTALL");
    assert!(mount.mountproc3_dump().await.expect("DUMP").0.is_empty());
}

#[tokio::test]
async fn directory_replies_encode_within_the_counts_asked() {
    let l = local();
    let d = mkdir(&l.nfs, &l.root, "d").await;
    for i in 0..40 {
        // Names of 1 to 40 bytes: every padding case.
        create(&l.nfs, &d, &"x".repeat(i + 1)).await;
    }
    let zero = || Cookieverf3(Bytes::from_static(&[0; 8]));
    for maxcount in [260, 300, 511, 1000, 4096] {
        let res = l
            .nfs
            .nfsproc3_readdirplus(Readdirplus3args {
                dir: d.clone(),
                cookie: 0,
                cookieverf: zero(),
                dircount: maxcount,
                maxcount,
            })
            .await
            .expect("READDIRPLUS");
        let encoded = rpcrdma::xdr::to_bytes(&res).expect("encodes").len();
        let Readdirplus3res::Nfs3Ok(ok) = &res else {
            panic!("{maxcount}: {res:?}");
        };
        assert!(encoded <= maxcount as usize, "{encoded} > {maxcount}");
        // Not stopped early: one more entry (at most 136 + 40 bytes) would not have fitted.
        assert!(
            !ok.reply.eof && encoded + 176 > maxcount as usize,
            "{encoded} of {maxcount}"
        );

        let res = l
            .nfs
            .nfsproc3_readdir(Readdir3args {
                dir: d.clone(),
                cookie: 0,
                cookieverf: zero(),
                count: maxcount / 4,
            })
            .await
            .expect("READDIR");
        let encoded = rpcrdma::xdr::to_bytes(&res).expect("encodes").len();
        match res.status() {
            Nfsstat3::Nfs3Ok => {
                assert!(
                    encoded <= (maxcount / 4) as usize,
                    "{encoded} > {}",
                    maxcount / 4
                )
            }
            // Fewer than the fixed part (108 bytes) and the first entry ("." in 28 bytes).
            status => assert_eq!(
                (status, maxcount / 4 < 136),
                (Nfsstat3::Nfs3errToosmall, true)
            ),
        }
    }
}

/// The server keeps the replies of the procedures that change the file system (a REMOVE
/// retransmitted after a reconnect gets its first reply) and of no other: a GETATTR or a
/// LOOKUP is not recorded.
#[tokio::test]
async fn the_reply_cache_covers_the_procedures_that_change_the_file_system() {
    let fs = Arc::new(MemFs::new(MemFsConfig::new("/export")));
    let server = fs.nfs_server();
    let nfs = as_root(Client::new(LocalTransport::new(server.clone())));
    let root = fs.root_handle();
    let recorded = || server.reply_cache_stats().expect("the cache is on").misses;
    let file = create(&nfs, &root, "kept").await;
    assert_eq!(recorded(), 1, "CREATE is recorded");
    write(&nfs, &file, 0, Bytes::from_static(b"data")).await;
    mkdir(&nfs, &root, "dir").await;
    assert_eq!(recorded(), 3, "WRITE and MKDIR are recorded");
    getattr(&nfs, &file).await.unwrap();
    lookup(&nfs, &root, "kept").await.unwrap();
    assert_eq!(recorded(), 3, "GETATTR and LOOKUP are not");
    let removed = nfs
        .nfsproc3_remove(Remove3args {
            object: at(&root, "kept"),
        })
        .await
        .unwrap();
    assert!(matches!(removed, Remove3res::Nfs3Ok(_)), "{removed:?}");
    assert_eq!(recorded(), 4, "REMOVE is recorded");
}

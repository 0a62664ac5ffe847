//! The in-memory NFSv3 and MOUNT server over `LocalTransport` (the same encode, dispatch and
//! decode steps as a network, no sockets): the procedures' rules one by one, each answer
//! checked against RFC 1813.

mod memfs_helpers;

use std::sync::Arc;

use bytes::Bytes;
use memfs_helpers::*;
use rpcrdma::rpc::{AuthSys, Client, Credentials, LocalTransport};
use rpcrdma::xdr::XdrString;
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
async fn symlink_readlink_link_and_mknod() {
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

    let res = l
        .nfs
        .nfsproc3_mknod(Mknod3args {
            r#where: at(&l.root, "fifo"),
            what: Mknoddata3::Nf3fifo(no_sattr()),
        })
        .await
        .expect("MKNOD");
    assert_eq!(res.status(), Nfsstat3::Nfs3errNotsupp);
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

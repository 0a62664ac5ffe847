//! Hostile arguments to every NFSv3 procedure of the in-memory server, through the generated
//! client and dispatcher over `LocalTransport`: handles of any length and contents (stale,
//! foreign, of a file where a directory belongs), names of every bad shape, offsets and
//! counts at the ends of their ranges, attributes that set anything. Each call must come back
//! with an NFSv3 result (an NFS3ERR_* status at worst), never an RPC error: a handler that
//! panicked would be a SYSTEM_ERR.

mod memfs_helpers;

use std::sync::Arc;

use bytes::Bytes;
use memfs_helpers::*;
use proptest::prelude::*;
use rpcrdma::rpc::{Client, LocalTransport};
use rpcrdma::xdr::XdrString;
use rpcrdma_nfs3::memfs::{MemFs, MemFsConfig};
use rpcrdma_nfs3::nfs3::nfs_program::nfs_v3::NfsV3Client;
use rpcrdma_nfs3::nfs3::*;

/// The handles a call may carry: the root's, a file's, a directory's, or any bytes.
#[derive(Debug, Clone)]
enum Handle {
    Root,
    File,
    Dir,
    Bytes(Vec<u8>),
}

fn handle() -> impl Strategy<Value = Handle> {
    prop_oneof![
        Just(Handle::Root),
        Just(Handle::File),
        Just(Handle::Dir),
        proptest::collection::vec(any::<u8>(), 0..=64).prop_map(Handle::Bytes),
        proptest::collection::vec(any::<u8>(), 16..=16).prop_map(Handle::Bytes),
    ]
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just(".".to_string()),
        Just("..".to_string()),
        Just("a/b".to_string()),
        Just("f".to_string()),
        Just("d".to_string()),
        Just("x".repeat(256)),
        "[a-z]{1,8}",
    ]
}

fn edge_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0),
        Just(u64::MAX),
        Just(u64::MAX - 1),
        Just(1 << 32),
        // Around the largest file size and cthon04 bigfile2's seek point.
        Just(i64::MAX as u64),
        Just(i64::MAX as u64 - 1),
        Just((i64::MAX as u64) + 1),
        Just(0x7_ffff_fffe),
        0..100u64
    ]
}

fn edge_u32() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(0),
        Just(u32::MAX),
        Just(1 << 20),
        Just((1 << 20) + 1),
        0..300u32
    ]
}

fn sattr() -> impl Strategy<Value = Sattr3> {
    (
        proptest::option::of(any::<u32>()),
        proptest::option::of(any::<u32>()),
        proptest::option::of(edge_u64()),
        any::<bool>(),
    )
        .prop_map(|(mode_bits, uid, size_to, server_time)| Sattr3 {
            mode: mode_bits.map_or(
                SetMode3::Default {
                    discriminant: false,
                },
                SetMode3::True,
            ),
            uid: uid.map_or(
                SetUid3::Default {
                    discriminant: false,
                },
                SetUid3::True,
            ),
            size: size_to.map_or(
                SetSize3::Default {
                    discriminant: false,
                },
                SetSize3::True,
            ),
            mtime: if server_time {
                SetMtime::Default {
                    discriminant: TimeHow::SetToServerTime,
                }
            } else {
                SetMtime::SetToClientTime(Nfstime3 {
                    seconds: u32::MAX,
                    nseconds: u32::MAX,
                })
            },
            ..no_sattr()
        })
}

#[derive(Debug, Clone)]
enum Call {
    Getattr(Handle),
    Setattr(Handle, Sattr3, bool),
    Lookup(Handle, String),
    Access(Handle, u32),
    Readlink(Handle),
    Read(Handle, u64, u32),
    Write(Handle, u64, u32, usize),
    Create(Handle, String, u8, Sattr3),
    Mkdir(Handle, String, Sattr3),
    Symlink(Handle, String, usize),
    Mknod(Handle, String, u8, Sattr3, u32),
    Remove(Handle, String),
    Rmdir(Handle, String),
    Rename(Handle, String, Handle, String),
    Link(Handle, Handle, String),
    Readdir(Handle, u64, u32),
    Readdirplus(Handle, u64, u32, u32),
    Fsstat(Handle),
    Commit(Handle, u64, u32),
}

fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        handle().prop_map(Call::Getattr),
        (handle(), sattr(), any::<bool>()).prop_map(|(h, s, g)| Call::Setattr(h, s, g)),
        (handle(), name()).prop_map(|(h, n)| Call::Lookup(h, n)),
        (handle(), any::<u32>()).prop_map(|(h, a)| Call::Access(h, a)),
        handle().prop_map(Call::Readlink),
        (handle(), edge_u64(), edge_u32()).prop_map(|(h, o, c)| Call::Read(h, o, c)),
        (handle(), edge_u64(), edge_u32(), 0..64usize)
            .prop_map(|(h, o, c, l)| Call::Write(h, o, c, l)),
        (handle(), name(), 0..3u8, sattr()).prop_map(|(h, n, m, s)| Call::Create(h, n, m, s)),
        (handle(), name(), sattr()).prop_map(|(h, n, s)| Call::Mkdir(h, n, s)),
        (handle(), name(), 0..5000usize).prop_map(|(h, n, l)| Call::Symlink(h, n, l)),
        (handle(), name(), 0..8u8, sattr(), any::<u32>())
            .prop_map(|(h, n, t, s, d)| Call::Mknod(h, n, t, s, d)),
        (handle(), name()).prop_map(|(h, n)| Call::Remove(h, n)),
        (handle(), name()).prop_map(|(h, n)| Call::Rmdir(h, n)),
        (handle(), name(), handle(), name()).prop_map(|(a, b, c, d)| Call::Rename(a, b, c, d)),
        (handle(), handle(), name()).prop_map(|(a, b, n)| Call::Link(a, b, n)),
        (handle(), edge_u64(), edge_u32()).prop_map(|(h, c, n)| Call::Readdir(h, c, n)),
        (handle(), edge_u64(), edge_u32(), edge_u32())
            .prop_map(|(h, c, d, m)| Call::Readdirplus(h, c, d, m)),
        handle().prop_map(Call::Fsstat),
        (handle(), edge_u64(), edge_u32()).prop_map(|(h, o, c)| Call::Commit(h, o, c)),
    ]
}

struct Target {
    nfs: NfsV3Client,
    root: NfsFh3,
    file: NfsFh3,
    dir: NfsFh3,
}

impl Target {
    fn fh(&self, h: &Handle) -> NfsFh3 {
        match h {
            Handle::Root => self.root.clone(),
            Handle::File => self.file.clone(),
            Handle::Dir => self.dir.clone(),
            Handle::Bytes(b) => NfsFh3 {
                data: Bytes::from(b.clone()),
            },
        }
    }

    fn at(&self, h: &Handle, n: &str) -> Diropargs3 {
        at(&self.fh(h), n)
    }

    /// Makes the call; the status it got, or the RPC error.
    async fn run(&self, call: &Call) -> Result<Nfsstat3, rpcrdma::rpc::Error> {
        let nfs = &self.nfs;
        let zero = || Cookieverf3(Bytes::from_static(&[0; 8]));
        Ok(match call.clone() {
            Call::Getattr(h) => nfs
                .nfsproc3_getattr(Getattr3args {
                    object: self.fh(&h),
                })
                .await?
                .status(),
            Call::Setattr(h, s, guarded) => nfs
                .nfsproc3_setattr(Setattr3args {
                    object: self.fh(&h),
                    new_attributes: s,
                    guard: if guarded {
                        Sattrguard3::True(Nfstime3 {
                            seconds: 0,
                            nseconds: 0,
                        })
                    } else {
                        Sattrguard3::False
                    },
                })
                .await?
                .status(),
            Call::Lookup(h, n) => nfs
                .nfsproc3_lookup(Lookup3args {
                    what: self.at(&h, &n),
                })
                .await?
                .status(),
            Call::Access(h, a) => nfs
                .nfsproc3_access(Access3args {
                    object: self.fh(&h),
                    access: a,
                })
                .await?
                .status(),
            Call::Readlink(h) => nfs
                .nfsproc3_readlink(Readlink3args {
                    symlink: self.fh(&h),
                })
                .await?
                .status(),
            Call::Read(h, offset, count) => nfs
                .nfsproc3_read(Read3args {
                    file: self.fh(&h),
                    offset,
                    count,
                })
                .await?
                .status(),
            Call::Write(h, offset, count, len) => nfs
                .nfsproc3_write(Write3args {
                    file: self.fh(&h),
                    offset,
                    count,
                    stable: StableHow::DataSync,
                    data: Bytes::from(vec![9; len]),
                })
                .await?
                .status(),
            Call::Create(h, n, how, s) => nfs
                .nfsproc3_create(Create3args {
                    r#where: self.at(&h, &n),
                    how: match how {
                        0 => Createhow3::Unchecked(s),
                        1 => Createhow3::Guarded(s),
                        _ => Createhow3::Exclusive(Createverf3(Bytes::from_static(b"12345678"))),
                    },
                })
                .await?
                .status(),
            Call::Mkdir(h, n, s) => nfs
                .nfsproc3_mkdir(Mkdir3args {
                    r#where: self.at(&h, &n),
                    attributes: s,
                })
                .await?
                .status(),
            Call::Symlink(h, n, len) => nfs
                .nfsproc3_symlink(Symlink3args {
                    r#where: self.at(&h, &n),
                    symlink: Symlinkdata3 {
                        symlink_attributes: no_sattr(),
                        symlink_data: XdrString::from("l".repeat(len)),
                    },
                })
                .await?
                .status(),
            Call::Mknod(h, n, t, s, d) => {
                let device = || Devicedata3 {
                    dev_attributes: s,
                    spec: Specdata3 {
                        specdata1: d,
                        specdata2: d.rotate_left(16),
                    },
                };
                let what = match t {
                    0 => Mknoddata3::Nf3chr(device()),
                    1 => Mknoddata3::Nf3blk(device()),
                    2 => Mknoddata3::Nf3sock(s),
                    3 => Mknoddata3::Nf3fifo(s),
                    4 => Mknoddata3::Default {
                        discriminant: Ftype3::Nf3reg,
                    },
                    5 => Mknoddata3::Default {
                        discriminant: Ftype3::Nf3dir,
                    },
                    _ => Mknoddata3::Default {
                        discriminant: Ftype3::Nf3lnk,
                    },
                };
                nfs.nfsproc3_mknod(Mknod3args {
                    r#where: self.at(&h, &n),
                    what,
                })
                .await?
                .status()
            }
            Call::Remove(h, n) => nfs
                .nfsproc3_remove(Remove3args {
                    object: self.at(&h, &n),
                })
                .await?
                .status(),
            Call::Rmdir(h, n) => nfs
                .nfsproc3_rmdir(Rmdir3args {
                    object: self.at(&h, &n),
                })
                .await?
                .status(),
            Call::Rename(a, b, c, d) => nfs
                .nfsproc3_rename(Rename3args {
                    from: self.at(&a, &b),
                    to: self.at(&c, &d),
                })
                .await?
                .status(),
            Call::Link(a, b, n) => nfs
                .nfsproc3_link(Link3args {
                    file: self.fh(&a),
                    link: self.at(&b, &n),
                })
                .await?
                .status(),
            Call::Readdir(h, cookie, count) => nfs
                .nfsproc3_readdir(Readdir3args {
                    dir: self.fh(&h),
                    cookie,
                    cookieverf: zero(),
                    count,
                })
                .await?
                .status(),
            Call::Readdirplus(h, cookie, dircount, maxcount) => nfs
                .nfsproc3_readdirplus(Readdirplus3args {
                    dir: self.fh(&h),
                    cookie,
                    cookieverf: zero(),
                    dircount,
                    maxcount,
                })
                .await?
                .status(),
            Call::Fsstat(h) => nfs
                .nfsproc3_fsstat(Fsstat3args {
                    fsroot: self.fh(&h),
                })
                .await?
                .status(),
            Call::Commit(h, offset, count) => nfs
                .nfsproc3_commit(Commit3args {
                    file: self.fh(&h),
                    offset,
                    count,
                })
                .await?
                .status(),
        })
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every call of a random sequence gets an NFSv3 result, and the server still answers
    /// GETATTR of its root afterwards.
    #[test]
    fn every_call_gets_an_nfs_answer(calls in proptest::collection::vec(call(), 1..40)) {
        let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        rt.block_on(async {
            let fs = Arc::new(MemFs::new(MemFsConfig::new("/export").capacity(1 << 20).max_files(50)));
            let nfs = as_root(Client::new(LocalTransport::new(fs.nfs_server())));
            let root = fs.root_handle();
            let file = create(&nfs, &root, "f").await;
            let dir = mkdir(&nfs, &root, "d").await;
            let target = Target { nfs, root, file, dir };
            for call in &calls {
                let answer = target.run(call).await;
                prop_assert!(answer.is_ok(), "{call:?}: {answer:?}");
            }
            prop_assert!(getattr(&target.nfs, &target.root).await.is_ok());
            prop_assert!(fs.used_bytes() <= 1 << 20);
            Ok(())
        })?;
    }
}

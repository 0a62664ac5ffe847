//! The generated NFSv3 client and server, end to end: an in-memory file server implements the
//! generated `NfsV3Server` trait with `async fn`s, `nfs_v3::register_arc` hosts it, and the
//! generated `NfsV3Client` calls it through `rpcrdma::rpc::LocalTransport` (the same encode,
//! dispatch and decode steps as a network transport). Calls the generated dispatcher cannot
//! take get PROC_UNAVAIL and GARBAGE_ARGS.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use rpcrdma::rpc::{self, CallContext, Client, LocalTransport, ReplyError, Server};
use rpcrdma::xdr::Procedure;
use rpcrdma_nfs3::nfs3::nfs_program::{self, nfs_v3};
use rpcrdma_nfs3::nfs3::*;

use nfs_v3::{NfsV3Client, NfsV3Server};

/// Files by handle: what WRITE stores and READ and GETATTR see.
#[derive(Default)]
struct MemFs {
    files: Mutex<HashMap<Bytes, Vec<u8>>>,
}

fn attributes(len: usize) -> Fattr3 {
    let time = Nfstime3 {
        seconds: 1,
        nseconds: 0,
    };
    Fattr3 {
        r#type: Ftype3::Nf3reg,
        mode: 0o644,
        nlink: 1,
        uid: 1000,
        gid: 100,
        size: len as u64,
        used: len as u64,
        rdev: Specdata3 {
            specdata1: 0,
            specdata2: 0,
        },
        fsid: 7,
        fileid: 42,
        atime: time,
        mtime: time,
        ctime: time,
    }
}

/// The procedures this server does not offer: PROC_UNAVAIL, as RFC 5531 section 9 says.
macro_rules! unoffered {
    ($($method:ident($args:ty) -> $res:ty;)*) => {$(
        async fn $method(&self, _ctx: CallContext, _args: $args) -> Result<$res, ReplyError> {
            Err(ReplyError::ProcUnavail)
        }
    )*};
}

impl NfsV3Server for MemFs {
    async fn nfsproc3_null(&self, _ctx: CallContext) -> Result<(), ReplyError> {
        Ok(())
    }

    async fn nfsproc3_getattr(
        &self,
        ctx: CallContext,
        args: Getattr3args,
    ) -> Result<Getattr3res, ReplyError> {
        assert_eq!(ctx.procedure(), 1);
        let len = self
            .files
            .lock()
            .unwrap()
            .get(&args.object.data)
            .map(Vec::len);
        Ok(match len {
            Some(len) => Getattr3res::Nfs3Ok(Getattr3resok {
                obj_attributes: attributes(len),
            }),
            None => Getattr3res::Default {
                discriminant: Nfsstat3::Nfs3errStale,
            },
        })
    }

    async fn nfsproc3_read(
        &self,
        _ctx: CallContext,
        args: Read3args,
    ) -> Result<Read3res, ReplyError> {
        let files = self.files.lock().unwrap();
        let Some(file) = files.get(&args.file.data) else {
            return Ok(Read3res::Default {
                discriminant: Nfsstat3::Nfs3errStale,
                value: Read3resfail {
                    file_attributes: PostOpAttr::False,
                },
            });
        };
        let start = (args.offset as usize).min(file.len());
        let end = start.saturating_add(args.count as usize).min(file.len());
        Ok(Read3res::Nfs3Ok(Read3resok {
            file_attributes: PostOpAttr::True(attributes(file.len())),
            count: (end - start) as u32,
            eof: end == file.len(),
            data: Bytes::copy_from_slice(&file[start..end]),
        }))
    }

    async fn nfsproc3_write(
        &self,
        _ctx: CallContext,
        args: Write3args,
    ) -> Result<Write3res, ReplyError> {
        // An await point inside a handler: the future stays Send (no lock held across it).
        tokio::task::yield_now().await;
        let mut files = self.files.lock().unwrap();
        let file = files.entry(args.file.data.clone()).or_default();
        let at = args.offset as usize;
        if file.len() < at + args.data.len() {
            file.resize(at + args.data.len(), 0);
        }
        file[at..at + args.data.len()].copy_from_slice(&args.data);
        Ok(Write3res::Nfs3Ok(Write3resok {
            file_wcc: WccData {
                before: PreOpAttr::False,
                after: PostOpAttr::True(attributes(file.len())),
            },
            count: args.data.len() as u32,
            committed: StableHow::FileSync,
            verf: Writeverf3(Bytes::from_static(b"verifier")),
        }))
    }

    unoffered! {
        nfsproc3_setattr(Setattr3args) -> Setattr3res;
        nfsproc3_lookup(Lookup3args) -> Lookup3res;
        nfsproc3_access(Access3args) -> Access3res;
        nfsproc3_readlink(Readlink3args) -> Readlink3res;
        nfsproc3_create(Create3args) -> Create3res;
        nfsproc3_mkdir(Mkdir3args) -> Mkdir3res;
        nfsproc3_symlink(Symlink3args) -> Symlink3res;
        nfsproc3_mknod(Mknod3args) -> Mknod3res;
        nfsproc3_remove(Remove3args) -> Remove3res;
        nfsproc3_rmdir(Rmdir3args) -> Rmdir3res;
        nfsproc3_rename(Rename3args) -> Rename3res;
        nfsproc3_link(Link3args) -> Link3res;
        nfsproc3_readdir(Readdir3args) -> Readdir3res;
        nfsproc3_readdirplus(Readdirplus3args) -> Readdirplus3res;
        nfsproc3_fsstat(Fsstat3args) -> Fsstat3res;
        nfsproc3_fsinfo(Fsinfo3args) -> Fsinfo3res;
        nfsproc3_pathconf(Pathconf3args) -> Pathconf3res;
        nfsproc3_commit(Commit3args) -> Commit3res;
    }
}

fn setup() -> (Arc<MemFs>, NfsV3Client) {
    let fs = Arc::new(MemFs::default());
    let mut builder = Server::builder();
    nfs_v3::register_arc(&mut builder, Arc::clone(&fs));
    let server = builder.build();
    assert_eq!(
        server.programs().collect::<Vec<_>>(),
        vec![(nfs_program::PROGRAM, nfs_v3::VERSION)]
    );
    let client = NfsV3Client::new(Client::new(LocalTransport::new(server)));
    (fs, client)
}

fn handle(name: &'static [u8]) -> NfsFh3 {
    NfsFh3 {
        data: Bytes::from_static(name),
    }
}

#[tokio::test]
async fn null_getattr_write_and_read_through_the_generated_client_and_server() {
    let (fs, client) = setup();
    client.nfsproc3_null().await.unwrap();

    let missing = client
        .nfsproc3_getattr(Getattr3args {
            object: handle(b"f1"),
        })
        .await
        .unwrap();
    assert_eq!(missing.discriminant(), Nfsstat3::Nfs3errStale);

    let written = client
        .nfsproc3_write(Write3args {
            file: handle(b"f1"),
            offset: 4,
            count: 11,
            stable: StableHow::FileSync,
            data: Bytes::from_static(b"hello world"),
        })
        .await
        .unwrap();
    let Write3res::Nfs3Ok(ok) = written else {
        panic!("{written:?}");
    };
    assert_eq!(ok.count, 11);
    assert_eq!(ok.committed, StableHow::FileSync);
    assert_eq!(ok.verf, Writeverf3(Bytes::from_static(b"verifier")));
    // The implementation's state is the test's: register_arc shares it.
    assert_eq!(fs.files.lock().unwrap()[&b"f1"[..]], b"\0\0\0\0hello world");

    let attrs = client
        .nfsproc3_getattr(Getattr3args {
            object: handle(b"f1"),
        })
        .await
        .unwrap();
    let Getattr3res::Nfs3Ok(ok) = attrs else {
        panic!("{attrs:?}");
    };
    assert_eq!(ok.obj_attributes.size, 15);

    let read = client
        .nfsproc3_read(Read3args {
            file: handle(b"f1"),
            offset: 10,
            count: 100,
        })
        .await
        .unwrap();
    let Read3res::Nfs3Ok(ok) = read else {
        panic!("{read:?}");
    };
    assert_eq!(ok.data, Bytes::from_static(b"world"));
    assert_eq!(ok.count, 5);
    assert!(ok.eof);
}

#[tokio::test]
async fn a_procedure_the_server_does_not_offer_is_proc_unavail() {
    let (_, client) = setup();
    let err = client
        .nfsproc3_commit(Commit3args {
            file: handle(b"f1"),
            offset: 0,
            count: 0,
        })
        .await
        .unwrap_err();
    assert!(matches!(err, rpc::Error::ProcUnavail), "{err}");
}

/// Procedure 22 of NFS version 3, which does not exist.
struct Nfsproc3Bogus;

impl Procedure for Nfsproc3Bogus {
    const PROGRAM: u32 = nfs_program::PROGRAM;
    const VERSION: u32 = nfs_v3::VERSION;
    const PROCEDURE: u32 = 22;
    const NAME: &'static str = "NFSPROC3_BOGUS";
    type Args = ();
    type Result = ();
}

/// GETATTR with a file handle that claims 5 bytes and carries none.
struct Nfsproc3GetattrTruncated;

impl Procedure for Nfsproc3GetattrTruncated {
    const PROGRAM: u32 = nfs_program::PROGRAM;
    const VERSION: u32 = nfs_v3::VERSION;
    const PROCEDURE: u32 = <nfs_v3::Nfsproc3Getattr as Procedure>::PROCEDURE;
    const NAME: &'static str = "NFSPROC3_GETATTR";
    type Args = u32;
    type Result = Getattr3res;
}

#[tokio::test]
async fn the_generated_dispatcher_answers_proc_unavail_and_garbage_args() {
    let (_, client) = setup();
    let err = client.rpc().call::<Nfsproc3Bogus>(&()).await.unwrap_err();
    assert!(matches!(err, rpc::Error::ProcUnavail), "{err}");
    let err = client
        .rpc()
        .call::<Nfsproc3GetattrTruncated>(&5)
        .await
        .unwrap_err();
    assert!(matches!(err, rpc::Error::GarbageArgs), "{err}");
    // The connection carries on.
    client.nfsproc3_null().await.unwrap();
}

#[tokio::test]
async fn client_calls_are_send_and_run_as_tasks() {
    let (_, client) = setup();
    let tasks: Vec<_> = (0..4u8)
        .map(|k| {
            let client = client.clone();
            tokio::spawn(async move {
                let name = Bytes::from(vec![b'f', k]);
                client
                    .nfsproc3_write(Write3args {
                        file: NfsFh3 { data: name.clone() },
                        offset: 0,
                        count: 1,
                        stable: StableHow::Unstable,
                        data: Bytes::from(vec![k]),
                    })
                    .await
                    .unwrap();
                client
                    .nfsproc3_read(Read3args {
                        file: NfsFh3 { data: name },
                        offset: 0,
                        count: 1,
                    })
                    .await
                    .unwrap()
            })
        })
        .collect();
    for (k, task) in tasks.into_iter().enumerate() {
        let Read3res::Nfs3Ok(ok) = task.await.unwrap() else {
            panic!("read {k} failed");
        };
        assert_eq!(ok.data, Bytes::from(vec![k as u8]));
    }
}

#[test]
fn read_and_readlink_results_carry_one_ddp_item_and_the_others_none() {
    use nfs_v3::*;
    assert_eq!(Nfsproc3Read::RESULT_DDP_ITEMS, 1);
    assert_eq!(Nfsproc3Readlink::RESULT_DDP_ITEMS, 1);
    // WRITE and SYMLINK carry theirs in the arguments, not the result.
    assert_eq!(Nfsproc3Write::RESULT_DDP_ITEMS, 0);
    assert_eq!(Nfsproc3Symlink::RESULT_DDP_ITEMS, 0);
    assert_eq!(Nfsproc3Getattr::RESULT_DDP_ITEMS, 0);
    assert_eq!(Nfsproc3Readdirplus::RESULT_DDP_ITEMS, 0);
    assert_eq!(Nfsproc3Null::RESULT_DDP_ITEMS, 0);
}

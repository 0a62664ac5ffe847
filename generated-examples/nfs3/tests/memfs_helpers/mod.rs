//! Helpers for the tests of the in-memory server: argument builders and result unwrappers that
//! name the status they found.

#![allow(dead_code)] // each test file uses a subset

use bytes::Bytes;
use rpcrdma::rpc::{AuthSys, Client, Credentials};
use rpcrdma::xdr::XdrString;
use rpcrdma_nfs3::nfs3::nfs_program::nfs_v3::NfsV3Client;
use rpcrdma_nfs3::nfs3::*;

/// Root's AUTH_SYS credentials, as the kernel sends them for `root`.
pub fn root() -> Credentials {
    Credentials::Sys(AuthSys::new("memfs-test", 0, 0))
}

/// An NFS client calling as root.
pub fn as_root(client: Client) -> NfsV3Client {
    NfsV3Client::new(client.with_credentials(&root()).expect("AUTH_SYS encodes"))
}

/// Attributes that set nothing.
pub fn no_sattr() -> Sattr3 {
    Sattr3::unchanged()
}

/// Attributes that set the mode.
pub fn mode(mode: u32) -> Sattr3 {
    Sattr3 {
        mode: SetMode3::True(mode),
        ..no_sattr()
    }
}

/// Attributes that set the size.
pub fn size(size: u64) -> Sattr3 {
    Sattr3 {
        size: SetSize3::True(size),
        ..no_sattr()
    }
}

/// `name` in directory `dir`.
pub fn at(dir: &NfsFh3, name: &str) -> Diropargs3 {
    Diropargs3 {
        dir: dir.clone(),
        name: XdrString::from(name.to_string()),
    }
}

/// The status of a result that failed, or NFS3_OK: the server's own call-log trait.
pub use rpcrdma_nfs3::memfs::nfs::status::ResultStatus as Status;

/// CREATE (UNCHECKED, mode 0644) of `name` in `dir`: its handle.
pub async fn create(nfs: &NfsV3Client, dir: &NfsFh3, name: &str) -> NfsFh3 {
    let res = nfs
        .nfsproc3_create(Create3args {
            r#where: at(dir, name),
            how: Createhow3::Unchecked(mode(0o644)),
        })
        .await
        .expect("CREATE call");
    match res {
        Create3res::Nfs3Ok(Create3resok {
            obj: PostOpFh3::True(fh),
            ..
        }) => fh,
        other => panic!("CREATE {name}: {other:?}"),
    }
}

/// MKDIR of `name` in `dir`: its handle.
pub async fn mkdir(nfs: &NfsV3Client, dir: &NfsFh3, name: &str) -> NfsFh3 {
    let res = nfs
        .nfsproc3_mkdir(Mkdir3args {
            r#where: at(dir, name),
            attributes: mode(0o755),
        })
        .await
        .expect("MKDIR call");
    match res {
        Mkdir3res::Nfs3Ok(Mkdir3resok {
            obj: PostOpFh3::True(fh),
            ..
        }) => fh,
        other => panic!("MKDIR {name}: {other:?}"),
    }
}

/// GETATTR of `fh`: the attributes, or the status.
pub async fn getattr(nfs: &NfsV3Client, fh: &NfsFh3) -> Result<Fattr3, Nfsstat3> {
    match nfs
        .nfsproc3_getattr(Getattr3args { object: fh.clone() })
        .await
        .expect("GETATTR call")
    {
        Getattr3res::Nfs3Ok(ok) => Ok(ok.obj_attributes),
        Getattr3res::Default { discriminant } => Err(discriminant),
    }
}

/// LOOKUP of `name` in `dir`: the handle, or the status.
pub async fn lookup(nfs: &NfsV3Client, dir: &NfsFh3, name: &str) -> Result<NfsFh3, Nfsstat3> {
    match nfs
        .nfsproc3_lookup(Lookup3args {
            what: at(dir, name),
        })
        .await
        .expect("LOOKUP call")
    {
        Lookup3res::Nfs3Ok(ok) => Ok(ok.object),
        Lookup3res::Default { discriminant, .. } => Err(discriminant),
    }
}

/// WRITE of `data` at `offset` (FILE_SYNC asked), the result.
pub async fn write(nfs: &NfsV3Client, fh: &NfsFh3, offset: u64, data: Bytes) -> Write3res {
    nfs.nfsproc3_write(Write3args {
        file: fh.clone(),
        offset,
        count: data.len() as u32,
        stable: StableHow::Unstable,
        data,
    })
    .await
    .expect("WRITE call")
}

/// A recognisable byte pattern: byte `i` of the file is a function of `i` that is not periodic
/// in any power of two below 2^24.
pub fn pattern(offset: usize, len: usize) -> Vec<u8> {
    (offset..offset + len)
        .map(|i| (i ^ (i >> 8) ^ (i >> 16).wrapping_mul(7)) as u8)
        .collect()
}

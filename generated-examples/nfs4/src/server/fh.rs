//! File handles, names and statuses: how the NFSv4.1 server maps its wire values to the
//! NFSv3 server's in-memory tree (`rpcrdma_nfs3::memfs::tree`) and back.

use bytes::Bytes;
use rpcrdma_nfs3::nfs3::{Nfsstat3, Nfstime3};

use crate::nfs4::{NfsFh4, Nfsstat4, Nfstime4};

/// Bytes of a file handle: the server instance's generation, then the fileid.
pub const HANDLE_LEN: usize = 16;

/// The handle of `fileid` in the instance `generation`. Handles are persistent for the life of
/// the instance (fh_expire_type FH4_PERSISTENT, RFC 5661 section 4.2.3): a handle of a removed
/// file or of another instance is NFS4ERR_STALE.
pub fn encode(fileid: u64, generation: u64) -> NfsFh4 {
    let mut fh = Vec::with_capacity(HANDLE_LEN);
    fh.extend_from_slice(&generation.to_be_bytes());
    fh.extend_from_slice(&fileid.to_be_bytes());
    NfsFh4(Bytes::from(fh))
}

/// The fileid a handle names: NFS4ERR_BADHANDLE if it is not one of ours by its form,
/// NFS4ERR_STALE if it is from another instance (RFC 5661 section 15.1.2).
pub fn decode(fh: &NfsFh4, generation: u64) -> Result<u64, Nfsstat4> {
    let bytes: &[u8] = &fh.0;
    if bytes.len() != HANDLE_LEN {
        return Err(Nfsstat4::Nfs4errBadhandle);
    }
    let (gen, id) = bytes.split_at(8);
    if gen != generation.to_be_bytes() {
        return Err(Nfsstat4::Nfs4errStale);
    }
    Ok(u64::from_be_bytes(id.try_into().expect("8 bytes")))
}

/// The longest name the server takes (fattr4_maxname).
pub const NAME_MAX: usize = 255;

/// Checks a component4 the client names an existing object with (LOOKUP, REMOVE, RENAME's
/// source, OPEN CLAIM_NULL): RFC 5661 section 14.2 (UTF-8) and 18.13.3 ("." and ".." are not
/// names in NFSv4: NFS4ERR_BADNAME).
pub fn check_name(name: &[u8]) -> Result<(), Nfsstat4> {
    if name.is_empty() {
        return Err(Nfsstat4::Nfs4errInval);
    }
    if name.len() > NAME_MAX {
        return Err(Nfsstat4::Nfs4errNametoolong);
    }
    if std::str::from_utf8(name).is_err() {
        return Err(Nfsstat4::Nfs4errInval);
    }
    if name == b"." || name == b".." || name.contains(&b'/') || name.contains(&0) {
        return Err(Nfsstat4::Nfs4errBadname);
    }
    Ok(())
}

/// The NFSv4 status of a failure the tree reports in NFSv3 terms. The POSIX errors have the
/// same numbers in both versions (RFC 5661 section 15.1); the rest map to their NFSv4 names.
pub fn status(s: Nfsstat3) -> Nfsstat4 {
    use Nfsstat3 as V3;
    use Nfsstat4 as V4;
    match s {
        V3::Nfs3Ok => V4::Nfs4Ok,
        V3::Nfs3errPerm => V4::Nfs4errPerm,
        V3::Nfs3errNoent => V4::Nfs4errNoent,
        V3::Nfs3errIo => V4::Nfs4errIo,
        V3::Nfs3errNxio => V4::Nfs4errNxio,
        V3::Nfs3errAcces => V4::Nfs4errAccess,
        V3::Nfs3errExist => V4::Nfs4errExist,
        V3::Nfs3errXdev => V4::Nfs4errXdev,
        V3::Nfs3errNotdir => V4::Nfs4errNotdir,
        V3::Nfs3errIsdir => V4::Nfs4errIsdir,
        V3::Nfs3errInval => V4::Nfs4errInval,
        V3::Nfs3errFbig => V4::Nfs4errFbig,
        V3::Nfs3errNospc => V4::Nfs4errNospc,
        V3::Nfs3errRofs => V4::Nfs4errRofs,
        V3::Nfs3errMlink => V4::Nfs4errMlink,
        V3::Nfs3errNametoolong => V4::Nfs4errNametoolong,
        V3::Nfs3errNotempty => V4::Nfs4errNotempty,
        V3::Nfs3errDquot => V4::Nfs4errDquot,
        V3::Nfs3errStale => V4::Nfs4errStale,
        V3::Nfs3errBadhandle => V4::Nfs4errBadhandle,
        V3::Nfs3errBadCookie => V4::Nfs4errBadCookie,
        V3::Nfs3errNotsupp => V4::Nfs4errNotsupp,
        V3::Nfs3errToosmall => V4::Nfs4errToosmall,
        V3::Nfs3errBadtype => V4::Nfs4errBadtype,
        V3::Nfs3errJukebox => V4::Nfs4errDelay,
        _ => V4::Nfs4errServerfault,
    }
}

/// An NFSv3 time as NFSv4 writes it.
pub fn time4(t: Nfstime3) -> Nfstime4 {
    Nfstime4 {
        seconds: i64::from(t.seconds),
        nseconds: t.nseconds,
    }
}

/// An NFSv4 time the tree can hold: NFS4ERR_INVAL for a time before 1970 or past 2106, or with
/// a nanosecond count of a second or more (RFC 5661 section 3.3.1).
pub fn time3(t: Nfstime4) -> Result<Nfstime3, Nfsstat4> {
    let seconds = u32::try_from(t.seconds).map_err(|_| Nfsstat4::Nfs4errInval)?;
    if t.nseconds >= 1_000_000_000 {
        return Err(Nfsstat4::Nfs4errInval);
    }
    Ok(Nfstime3 {
        seconds,
        nseconds: t.nseconds,
    })
}

//! The operations on files and directories (RFC 5661 section 18): filehandles, LOOKUP,
//! GETATTR, SETATTR, VERIFY, ACCESS, CREATE, REMOVE, RENAME, LINK, READLINK, READDIR, READ,
//! WRITE, COMMIT, SECINFO.

use bytes::Bytes;
use rpcrdma_nfs3::memfs::access;
use rpcrdma_nfs3::memfs::attr::FSID;
use rpcrdma_nfs3::memfs::tree::{Dir, Kind, Node, Special, LINK_MAX, MAX_FILE_SIZE, ROOT};

use crate::nfs4::*;

use super::attrs::{self, AttrSet, FsAttrs, ObjectAttrs, SetAttrs, SetTime};
use super::compound::Compound;
use super::fh::{self, check_name, status, time3, time4, NAME_MAX};
use super::{delegations, open, session, MAX_IO};

/// The ACCESS4_* bits the server judges (RFC 5661 section 18.1).
const ACCESS_ALL: u32 = ACCESS4_READ
    | ACCESS4_LOOKUP
    | ACCESS4_MODIFY
    | ACCESS4_EXTEND
    | ACCESS4_DELETE
    | ACCESS4_EXECUTE;

/// A filehandle's fileid, its node present: NFS4ERR_BADHANDLE or NFS4ERR_STALE otherwise.
pub fn resolve(c: &Compound<'_>, handle: &NfsFh4) -> Result<u64, Nfsstat4> {
    let fileid = fh::decode(handle, c.shared.generation)?;
    c.inner.tree.get(fileid).map_err(status)?;
    Ok(fileid)
}

fn node<'a>(c: &'a Compound<'_>, fileid: u64) -> Result<&'a Node, Nfsstat4> {
    c.inner.tree.get(fileid).map_err(status)
}

/// The current filehandle, which must be a directory (a symbolic link: NFS4ERR_SYMLINK, RFC
/// 5661 section 18.13.3; anything else NFS4ERR_NOTDIR).
fn current_dir(c: &Compound<'_>) -> Result<u64, Nfsstat4> {
    let id = c.current()?;
    match &node(c, id)?.kind {
        Kind::Dir(_) => Ok(id),
        Kind::Symlink(_) => Err(Nfsstat4::Nfs4errSymlink),
        _ => Err(Nfsstat4::Nfs4errNotdir),
    }
}

fn ftype(kind: &Kind) -> NfsFtype4 {
    match kind {
        Kind::File { .. } => NfsFtype4::Nf4reg,
        Kind::Dir(_) => NfsFtype4::Nf4dir,
        Kind::Symlink(_) => NfsFtype4::Nf4lnk,
        Kind::Special(Special::Char { .. }) => NfsFtype4::Nf4chr,
        Kind::Special(Special::Block { .. }) => NfsFtype4::Nf4blk,
        Kind::Special(Special::Socket) => NfsFtype4::Nf4sock,
        Kind::Special(Special::Fifo) => NfsFtype4::Nf4fifo,
    }
}

/// The change attribute (RFC 5661 section 5.8.1.4): the ctime in nanoseconds, which moves on
/// every change of the object's data or attributes.
fn change(node: &Node) -> u64 {
    u64::from(node.meta.ctime.seconds) * 1_000_000_000 + u64::from(node.meta.ctime.nseconds)
}

/// What the server knows of `fileid`.
pub fn object_attrs(c: &Compound<'_>, fileid: u64) -> Result<ObjectAttrs, Nfsstat4> {
    let n = node(c, fileid)?;
    let rdev = match &n.kind {
        Kind::Special(s) => s.rdev(),
        _ => (0, 0),
    };
    Ok(ObjectAttrs {
        kind: ftype(&n.kind),
        mode: n.meta.mode,
        nlink: n.nlink(),
        uid: n.meta.uid,
        gid: n.meta.gid,
        size: n.size(),
        space_used: n.kind.stored(),
        rdev,
        fileid,
        mounted_on_fileid: fileid,
        atime: time4(n.meta.atime),
        mtime: time4(n.meta.mtime),
        ctime: time4(n.meta.ctime),
        change: change(n),
        filehandle: fh::encode(fileid, c.shared.generation),
    })
}

/// What the server knows of its file system.
pub fn fs_attrs(c: &Compound<'_>) -> FsAttrs {
    let tree = &c.inner.tree;
    let bounds = tree.bounds();
    let files_free = bounds.files.saturating_sub(tree.files());
    let space_free = bounds.bytes.saturating_sub(tree.used_bytes());
    FsAttrs {
        fsid: Fsid4 {
            major: FSID,
            minor: 0,
        },
        lease_time: c.shared.config.lease_seconds,
        maxread: u64::from(MAX_IO),
        maxwrite: u64::from(MAX_IO),
        maxname: NAME_MAX as u32,
        maxlink: LINK_MAX,
        maxfilesize: MAX_FILE_SIZE,
        files_avail: files_free,
        files_free,
        files_total: bounds.files,
        space_avail: space_free,
        space_free,
        space_total: bounds.bytes,
        // The coarse clock the tree stamps times with moves by a kernel tick or less.
        time_delta: Nfstime4 {
            seconds: 0,
            nseconds: 4_000_000,
        },
    }
}

/// GETFH (section 18.8).
pub fn getfh(c: &mut Compound<'_>) -> Result<NfsResop4, Nfsstat4> {
    let id = c.current()?;
    Ok(NfsResop4::OpGetfh(Getfh4res::Nfs4Ok(Getfh4resok {
        object: fh::encode(id, c.shared.generation),
    })))
}

/// LOOKUP (section 18.13).
pub fn lookup(c: &mut Compound<'_>, a: Lookup4args) -> Result<NfsResop4, Nfsstat4> {
    let dir = current_dir(c)?;
    check_name(&a.objname)?;
    let id = c.inner.tree.lookup(dir, &a.objname).map_err(status)?;
    c.current = Some(id);
    Ok(NfsResop4::OpLookup(Lookup4res {
        status: Nfsstat4::Nfs4Ok,
    }))
}

/// LOOKUPP (section 18.14): the root has no parent (NFS4ERR_NOENT).
pub fn lookupp(c: &mut Compound<'_>) -> Result<NfsResop4, Nfsstat4> {
    let dir = current_dir(c)?;
    if dir == ROOT {
        return Err(Nfsstat4::Nfs4errNoent);
    }
    let parent = node(c, dir)?.dir().map_err(status)?.parent;
    c.current = Some(parent);
    Ok(NfsResop4::OpLookupp(Lookupp4res {
        status: Nfsstat4::Nfs4Ok,
    }))
}

/// The attributes a client writing under a write delegation changes without telling the
/// server until it flushes (section 10.4.3).
const DELEGATED_ATTRS: [u32; 5] = [
    FATTR4_SIZE,
    FATTR4_CHANGE,
    FATTR4_TIME_MODIFY,
    FATTR4_TIME_METADATA,
    FATTR4_SPACE_USED,
];

/// Recalls another client's write delegation on `id` before its attributes in `requested` are
/// answered, when they include one the holder may have changed (section 10.4.3; this server
/// recalls rather than asking the holder with CB_GETATTR).
fn recall_for_attrs(c: &mut Compound<'_>, id: u64, requested: &AttrSet) -> Result<(), Nfsstat4> {
    if DELEGATED_ATTRS.iter().any(|&attr| requested.contains(attr)) {
        delegations::break_write_delegations(c, id)?;
    }
    Ok(())
}

/// GETATTR (section 18.7).
pub fn getattr(c: &mut Compound<'_>, a: Getattr4args) -> Result<NfsResop4, Nfsstat4> {
    let id = c.current()?;
    let requested = AttrSet::from_bitmap(&a.attr_request);
    attrs::check_readable(&requested)?;
    recall_for_attrs(c, id, &requested)?;
    let obj = object_attrs(c, id)?;
    let obj_attributes = attrs::encode(&requested, &obj, &fs_attrs(c));
    Ok(NfsResop4::OpGetattr(Getattr4res::Nfs4Ok(Getattr4resok {
        obj_attributes,
    })))
}

/// VERIFY (section 18.31, `same`) and NVERIFY (section 18.15).
pub fn verify(c: &mut Compound<'_>, given: Fattr4, same: bool) -> Result<NfsResop4, Nfsstat4> {
    let id = c.current()?;
    recall_for_attrs(c, id, &AttrSet::from_bitmap(&given.attrmask))?;
    let obj = object_attrs(c, id)?;
    let equal = attrs::matches(&given, &obj, &fs_attrs(c))?;
    match (same, equal) {
        (true, true) => Ok(NfsResop4::OpVerify(Verify4res {
            status: Nfsstat4::Nfs4Ok,
        })),
        (true, false) => Err(Nfsstat4::Nfs4errNotSame),
        (false, false) => Ok(NfsResop4::OpNverify(Nverify4res {
            status: Nfsstat4::Nfs4Ok,
        })),
        (false, true) => Err(Nfsstat4::Nfs4errSame),
    }
}

/// Whether the caller may set what `set` sets on `node`: the mode, owner and group only by
/// root or the owner, the owner to itself and the group to one of its own (as Linux's server).
fn may_set(c: &Compound<'_>, node: &Node, set: &SetAttrs) -> bool {
    let caller = &c.caller;
    if caller.uid == 0 {
        return true;
    }
    let owner = caller.uid == node.meta.uid;
    let mode_ok = set.mode.is_none() || owner;
    let uid_ok = set.uid.map_or(true, |uid| owner && uid == node.meta.uid);
    let gid_ok = set.gid.map_or(true, |gid| {
        owner && (gid == node.meta.gid || caller.in_group(gid))
    });
    let times_ok = (set.atime.is_none() && set.mtime.is_none())
        || owner
        || access::allowed(node, caller, ACCESS4_MODIFY) != 0;
    mode_ok && uid_ok && gid_ok && times_ok
}

/// Applies `set` to `fileid`: the size first (it can fail), then the rest; ctime moves when
/// anything is set.
pub fn apply(c: &mut Compound<'_>, fileid: u64, set: &SetAttrs) -> Result<(), Nfsstat4> {
    if !may_set(c, node(c, fileid)?, set) {
        return Err(Nfsstat4::Nfs4errPerm);
    }
    let now = c.now;
    let tree = &mut c.inner.tree;
    if let Some(size) = set.size {
        match &tree.get(fileid).map_err(status)?.kind {
            Kind::File { .. } => {}
            Kind::Dir(_) => return Err(Nfsstat4::Nfs4errIsdir),
            _ => return Err(Nfsstat4::Nfs4errInval),
        }
        tree.set_len(fileid, size, now).map_err(status)?;
    }
    let time = |t: Option<SetTime>| -> Result<Option<_>, Nfsstat4> {
        match t {
            None => Ok(None),
            Some(SetTime::ServerTime) => Ok(Some(now)),
            Some(SetTime::ClientTime(t)) => time3(t).map(Some),
        }
    };
    let (atime, mtime) = (time(set.atime)?, time(set.mtime)?);
    let meta = &mut tree.get_mut(fileid).map_err(status)?.meta;
    let mut changed = set.size.is_some();
    for (field, value) in [
        (&mut meta.mode, set.mode.map(|m| m & 0o7777)),
        (&mut meta.uid, set.uid),
        (&mut meta.gid, set.gid),
    ] {
        if let Some(value) = value {
            *field = value;
            changed = true;
        }
    }
    for (field, value) in [(&mut meta.atime, atime), (&mut meta.mtime, mtime)] {
        if let Some(value) = value {
            *field = value;
            changed = true;
        }
    }
    if changed {
        meta.ctime = now;
    }
    Ok(())
}

/// SETATTR (section 18.30): a size change needs a stateid that may write (or a special one).
pub fn setattr(c: &mut Compound<'_>, a: Setattr4args) -> Result<NfsResop4, Nfsstat4> {
    let fail = |status| {
        Ok(NfsResop4::OpSetattr(Setattr4res {
            status,
            attrsset: Vec::new(),
        }))
    };
    let id = match c.current() {
        Ok(id) => id,
        Err(s) => return fail(s),
    };
    let (set, which) = match attrs::decode_settable(&a.obj_attributes) {
        Ok(decoded) => decoded,
        Err(s) => return fail(s),
    };
    if set.size.is_some() {
        if let Err(s) = open::check_stateid(c, &a.stateid, id, OPEN4_SHARE_ACCESS_WRITE) {
            return fail(s);
        }
        if let Err(s) = delegations::break_delegations(c, id) {
            return fail(s);
        }
    }
    match apply(c, id, &set) {
        Ok(()) => Ok(NfsResop4::OpSetattr(Setattr4res {
            status: Nfsstat4::Nfs4Ok,
            attrsset: which.to_bitmap(),
        })),
        Err(s) => fail(s),
    }
}

/// ACCESS (section 18.1), by the mode bits and the caller's AUTH_SYS identity.
pub fn access(c: &mut Compound<'_>, a: Access4args) -> Result<NfsResop4, Nfsstat4> {
    let id = c.current()?;
    let asked = a.access & ACCESS_ALL;
    let granted = access::allowed(node(c, id)?, &c.caller, asked) & asked;
    Ok(NfsResop4::OpAccess(Access4res::Nfs4Ok(Access4resok {
        supported: asked,
        access: granted,
    })))
}

/// A directory's change_info4 around a change (section 3.3): atomic, since the COMPOUND
/// holds the lock.
fn cinfo(before: u64, after: u64) -> ChangeInfo4 {
    ChangeInfo4 {
        atomic: true,
        before,
        after,
    }
}

fn dir_change(c: &Compound<'_>, dir: u64) -> Result<u64, Nfsstat4> {
    Ok(change(node(c, dir)?))
}

/// The caller may add or remove names in `dir` (write and search permission), as Linux's
/// server checks it.
fn may_modify_dir(c: &Compound<'_>, dir: u64) -> Result<(), Nfsstat4> {
    let want = ACCESS4_MODIFY | ACCESS4_LOOKUP;
    if access::allowed(node(c, dir)?, &c.caller, want) == want {
        Ok(())
    } else {
        Err(Nfsstat4::Nfs4errAccess)
    }
}

/// The name of a new object: as [`check_name`], with "." and ".." NFS4ERR_BADNAME too.
fn check_new_name(name: &[u8]) -> Result<(), Nfsstat4> {
    check_name(name)
}

/// CREATE (section 18.4): directories, symbolic links and special files; a regular file is
/// made by OPEN (NFS4ERR_BADTYPE here).
pub fn create(c: &mut Compound<'_>, a: Create4args) -> Result<NfsResop4, Nfsstat4> {
    let dir = current_dir(c)?;
    check_new_name(&a.objname)?;
    let (set, which) = attrs::decode_settable(&a.createattrs)?;
    let (kind, default_mode) = match a.objtype {
        Createtype4::Nf4dir => (Kind::Dir(Dir::default()), 0o755),
        Createtype4::Nf4lnk(target) => {
            if target.is_empty() {
                return Err(Nfsstat4::Nfs4errInval);
            }
            (Kind::Symlink(target), 0o777)
        }
        Createtype4::Nf4blk(d) => (
            Kind::Special(Special::Block {
                major: d.specdata1,
                minor: d.specdata2,
            }),
            0o644,
        ),
        Createtype4::Nf4chr(d) => (
            Kind::Special(Special::Char {
                major: d.specdata1,
                minor: d.specdata2,
            }),
            0o644,
        ),
        Createtype4::Nf4sock => (Kind::Special(Special::Socket), 0o644),
        Createtype4::Nf4fifo => (Kind::Special(Special::Fifo), 0o644),
        Createtype4::Default { .. } => return Err(Nfsstat4::Nfs4errBadtype),
    };
    if let Kind::Special(s) = &kind {
        if s.is_device() && c.caller.uid != 0 {
            return Err(Nfsstat4::Nfs4errPerm);
        }
    }
    if set.size.is_some() {
        return Err(Nfsstat4::Nfs4errInval);
    }
    may_modify_dir(c, dir)?;
    let before = dir_change(c, dir)?;
    let id = make(c, dir, &a.objname, kind, &set, default_mode)?;
    let after = dir_change(c, dir)?;
    c.current = Some(id);
    Ok(NfsResop4::OpCreate(Create4res::Nfs4Ok(Create4resok {
        cinfo: cinfo(before, after),
        attrset: which.to_bitmap(),
    })))
}

/// Makes a node named `name` in `dir` owned by the caller, with the mode and times of `set`.
pub fn make(
    c: &mut Compound<'_>,
    dir: u64,
    name: &[u8],
    kind: Kind,
    set: &SetAttrs,
    default_mode: u32,
) -> Result<u64, Nfsstat4> {
    use rpcrdma_nfs3::memfs::tree::Meta;
    let gid = node(c, dir)?.meta.gid;
    let gid = if node(c, dir)?.meta.mode & 0o2000 != 0 {
        gid
    } else {
        c.caller.gid
    };
    let meta = Meta::new(set.mode.unwrap_or(default_mode), c.caller.uid, gid, c.now);
    let now = c.now;
    let id = c
        .inner
        .tree
        .create(dir, name, kind, meta, now)
        .map_err(status)?;
    let rest = SetAttrs {
        mode: None,
        ..set.clone()
    };
    if rest != SetAttrs::default() {
        apply(c, id, &rest)?;
    }
    Ok(id)
}

/// REMOVE (section 18.25): a file or an empty directory.
pub fn remove(c: &mut Compound<'_>, a: Remove4args) -> Result<NfsResop4, Nfsstat4> {
    let dir = current_dir(c)?;
    check_name(&a.target)?;
    let target = c.inner.tree.lookup(dir, &a.target).map_err(status)?;
    may_modify_dir(c, dir)?;
    delegations::break_delegations(c, target)?;
    let want_dir = matches!(node(c, target)?.kind, Kind::Dir(_));
    let before = dir_change(c, dir)?;
    let now = c.now;
    c.inner
        .tree
        .unlink(dir, &a.target, want_dir, now)
        .map_err(status)?;
    let after = dir_change(c, dir)?;
    Ok(NfsResop4::OpRemove(Remove4res::Nfs4Ok(Remove4resok {
        cinfo: cinfo(before, after),
    })))
}

/// RENAME (section 18.26): from the saved filehandle's directory to the current one's.
pub fn rename(c: &mut Compound<'_>, a: Rename4args) -> Result<NfsResop4, Nfsstat4> {
    let to = current_dir(c)?;
    let from = c.saved()?;
    if !matches!(node(c, from)?.kind, Kind::Dir(_)) {
        return Err(Nfsstat4::Nfs4errNotdir);
    }
    check_name(&a.oldname)?;
    check_new_name(&a.newname)?;
    let source = c.inner.tree.lookup(from, &a.oldname).map_err(status)?;
    may_modify_dir(c, from)?;
    may_modify_dir(c, to)?;
    delegations::break_delegations(c, source)?;
    if let Ok(target) = c.inner.tree.lookup(to, &a.newname) {
        delegations::break_delegations(c, target)?;
    }
    let (from_before, to_before) = (dir_change(c, from)?, dir_change(c, to)?);
    let now = c.now;
    c.inner
        .tree
        .rename(from, &a.oldname, to, &a.newname, now)
        .map_err(status)?;
    Ok(NfsResop4::OpRename(Rename4res::Nfs4Ok(Rename4resok {
        source_cinfo: cinfo(from_before, dir_change(c, from)?),
        target_cinfo: cinfo(to_before, dir_change(c, to)?),
    })))
}

/// LINK (section 18.9): the saved filehandle's object gets a name in the current directory.
pub fn link(c: &mut Compound<'_>, a: Link4args) -> Result<NfsResop4, Nfsstat4> {
    let dir = current_dir(c)?;
    let source = c.saved()?;
    check_new_name(&a.newname)?;
    may_modify_dir(c, dir)?;
    let before = dir_change(c, dir)?;
    let now = c.now;
    c.inner
        .tree
        .link(source, dir, &a.newname, now)
        .map_err(status)?;
    Ok(NfsResop4::OpLink(Link4res::Nfs4Ok(Link4resok {
        cinfo: cinfo(before, dir_change(c, dir)?),
    })))
}

/// READLINK (section 18.24).
pub fn readlink(c: &mut Compound<'_>) -> Result<NfsResop4, Nfsstat4> {
    let id = c.current()?;
    match &node(c, id)?.kind {
        Kind::Symlink(target) => Ok(NfsResop4::OpReadlink(Readlink4res::Nfs4Ok(
            Readlink4resok {
                link: target.clone(),
            },
        ))),
        _ => Err(Nfsstat4::Nfs4errInval),
    }
}

/// The cookie verifier of every directory: the instance's generation, so that a cookie of an
/// earlier instance is refused (cookies stay valid for the life of a directory here).
fn cookieverf(c: &Compound<'_>) -> Verifier4 {
    Verifier4(Bytes::copy_from_slice(&c.shared.generation.to_be_bytes()))
}

/// XDR bytes of `n` bytes of opaque data with its length.
fn opaque_len(n: usize) -> usize {
    4 + n.div_ceil(4) * 4
}

/// READDIR (section 18.23): entries after the cookie, with the attributes asked for, as many
/// as fit in maxcount (the whole READDIR4resok's size).
pub fn readdir(c: &mut Compound<'_>, a: Readdir4args) -> Result<NfsResop4, Nfsstat4> {
    let dir = current_dir(c)?;
    // Section 18.23.3: cookies 1 and 2 are reserved.
    if a.cookie == 1 || a.cookie == 2 {
        return Err(Nfsstat4::Nfs4errBadCookie);
    }
    let verf = cookieverf(c);
    if a.cookie != 0 && a.cookieverf.0 != verf.0 {
        return Err(Nfsstat4::Nfs4errNotSame);
    }
    let requested = AttrSet::from_bitmap(&a.attr_request);
    attrs::check_readable(&requested)?;
    let fs = fs_attrs(c);
    let limit = (a.maxcount as usize).min(session::max_read(c) as usize);
    // status, verifier, no-more-entries and eof words.
    let mut used = 4 + 8 + 4 + 4;
    let entries_of = node(c, dir)?.dir().map_err(status)?;
    let listed: Vec<(u64, Bytes, u64)> = entries_of
        .after(a.cookie)
        .map(|(cookie, e)| (cookie, e.name.clone(), e.fileid))
        .collect();
    let mut entries = Vec::new();
    let mut eof = true;
    for (cookie, name, fileid) in listed {
        let attrs = match object_attrs(c, fileid) {
            Ok(obj) => attrs::encode(&requested, &obj, &fs),
            Err(error) => attrs::encode_error(&requested, error, None)?,
        };
        let size = 4
            + 8
            + opaque_len(name.len())
            + 4 * (1 + attrs.attrmask.len())
            + opaque_len(attrs.attr_vals.len());
        if used + size > limit {
            eof = false;
            break;
        }
        used += size;
        entries.push(Entry4 {
            cookie,
            name,
            attrs,
        });
    }
    if entries.is_empty() && !eof {
        return Err(Nfsstat4::Nfs4errToosmall);
    }
    Ok(NfsResop4::OpReaddir(Readdir4res::Nfs4Ok(Readdir4resok {
        cookieverf: verf,
        reply: Dirlist4 { entries, eof },
    })))
}

/// The current filehandle as a regular file (a directory: NFS4ERR_ISDIR; a symbolic link:
/// NFS4ERR_SYMLINK; anything else NFS4ERR_INVAL; section 18.22.3).
fn current_file(c: &Compound<'_>) -> Result<u64, Nfsstat4> {
    let id = c.current()?;
    match &node(c, id)?.kind {
        Kind::File { .. } => Ok(id),
        Kind::Dir(_) => Err(Nfsstat4::Nfs4errIsdir),
        Kind::Symlink(_) => Err(Nfsstat4::Nfs4errSymlink),
        Kind::Special(_) => Err(Nfsstat4::Nfs4errInval),
    }
}

/// READ (section 18.22): the data goes in a buffer from the connection's registered pool, so
/// over RPC-over-RDMA it leaves in the Write chunk without a copy.
pub fn read(c: &mut Compound<'_>, a: Read4args) -> Result<NfsResop4, Nfsstat4> {
    let id = current_file(c)?;
    open::check_stateid(c, &a.stateid, id, OPEN4_SHARE_ACCESS_READ)?;
    let data = node(c, id)?.kind.data().map_err(status)?;
    let len = data.len();
    let start = a.offset.min(len);
    let wanted = u64::from(a.count.min(session::max_read(c))).min(len - start) as usize;
    let mut n = 0;
    let bytes = if wanted == 0 {
        Bytes::new()
    } else {
        let mut buffer = c.ctx.buffer(wanted);
        let room = wanted.min(buffer.len());
        n = data.read(start, &mut buffer.as_mut_slice()[..room]);
        buffer.freeze(n)
    };
    let eof = start + n as u64 >= len;
    if n > 0 {
        let now = c.now;
        if let Ok(node) = c.inner.tree.get_mut(id) {
            node.meta.atime = now;
        }
    }
    Ok(NfsResop4::OpRead(Read4res::Nfs4Ok(Read4resok {
        eof,
        data: bytes,
    })))
}

fn write_verifier(c: &Compound<'_>) -> Verifier4 {
    Verifier4(Bytes::copy_from_slice(&c.shared.generation.to_be_bytes()))
}

/// WRITE (section 18.32): memory is stable storage for this server's life, so every write is
/// FILE_SYNC4 and the verifier is the instance's generation.
pub fn write(c: &mut Compound<'_>, a: Write4args) -> Result<NfsResop4, Nfsstat4> {
    let id = current_file(c)?;
    open::check_stateid(c, &a.stateid, id, OPEN4_SHARE_ACCESS_WRITE)?;
    let bytes = &a.data[..a.data.len().min(MAX_IO as usize)];
    let now = c.now;
    c.inner
        .tree
        .write(id, a.offset, bytes, now)
        .map_err(status)?;
    if c.caller.uid != 0 {
        // As Linux's server: a write by anyone but root clears set-user-ID, and set-group-ID
        // when the group may execute.
        let meta = &mut c.inner.tree.get_mut(id).map_err(status)?.meta;
        let mut kill = meta.mode & 0o4000;
        if meta.mode & 0o2010 == 0o2010 {
            kill |= 0o2000;
        }
        meta.mode &= !kill;
    }
    Ok(NfsResop4::OpWrite(Write4res::Nfs4Ok(Write4resok {
        count: bytes.len() as u32,
        committed: StableHow4::FileSync4,
        writeverf: write_verifier(c),
    })))
}

/// COMMIT (section 18.3): nothing to do; the verifier WRITE gave.
pub fn commit(c: &mut Compound<'_>, _a: Commit4args) -> Result<NfsResop4, Nfsstat4> {
    current_file(c)?;
    Ok(NfsResop4::OpCommit(Commit4res::Nfs4Ok(Commit4resok {
        writeverf: write_verifier(c),
    })))
}

/// SECINFO_NO_NAME (section 18.45): of the current filehandle's object, or of its parent
/// directory (the root has none: NFS4ERR_NOENT).
pub fn secinfo_no_name(
    c: &mut Compound<'_>,
    style: SecinfoNoName4args,
) -> Result<NfsResop4, Nfsstat4> {
    let id = c.current()?;
    if style == SecinfoStyle4::SecinfoStyle4Parent {
        if id == ROOT {
            return Err(Nfsstat4::Nfs4errNoent);
        }
        node(c, id)?.dir().map_err(|_| Nfsstat4::Nfs4errNotdir)?;
    }
    secinfo(c, None)
}

/// SECINFO (section 18.29, with the name) and SECINFO_NO_NAME (section 18.45): AUTH_SYS and
/// AUTH_NONE; both consume the current filehandle.
pub fn secinfo(c: &mut Compound<'_>, name: Option<Component4>) -> Result<NfsResop4, Nfsstat4> {
    let dir = match &name {
        Some(name) => {
            let dir = current_dir(c)?;
            check_name(name)?;
            c.inner.tree.lookup(dir, name).map_err(status)?;
            dir
        }
        None => c.current()?,
    };
    let _ = dir;
    c.current = None;
    let flavors = vec![
        Secinfo4::Default {
            discriminant: AUTH_SYS,
        },
        Secinfo4::Default {
            discriminant: AUTH_NONE,
        },
    ];
    let res = Secinfo4res::Nfs4Ok(flavors);
    Ok(match name {
        Some(_) => NfsResop4::OpSecinfo(res),
        None => NfsResop4::OpSecinfoNoName(res),
    })
}

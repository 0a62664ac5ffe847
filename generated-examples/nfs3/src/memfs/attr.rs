//! Attributes: GETATTR's `fattr3` of a node, the weak cache consistency data around a change,
//! and SETATTR's `sattr3` applied to a node.

use std::time::Duration;
#[cfg(not(target_os = "linux"))]
use std::time::{SystemTime, UNIX_EPOCH};

use crate::nfs3::{
    Fattr3, Fileid3, Ftype3, Nfsstat3, Nfstime3, PostOpAttr, PreOpAttr, Sattr3, SetAtime, SetGid3,
    SetMode3, SetMtime, SetSize3, SetUid3, Specdata3, TimeHow, WccAttr, WccData,
};

use super::tree::{Kind, Node, Special, Tree};

/// The permission bits a mode keeps: set-user-id, set-group-id, sticky and rwx for all three.
pub const MODE_MASK: u32 = 0o7777;

/// The size GETATTR reports for a directory.
pub const DIR_SIZE: u64 = 4096;

/// The file system id of every node (one export, one file system).
pub const FSID: u64 = 0x6d65_6d66_7333;

/// The system clock as an NFS time (0 if the clock is before 1970; seconds wrap in 2106 as
/// the protocol's do). On Linux the coarse clock, to a kernel tick, as the kernel's own file
/// systems stamp their files: it never leaves the vDSO, where the precise clock is a system
/// call on hosts whose clock source the vDSO cannot read (a virtual machine on HPET), once
/// for every call this server answers.
pub fn now() -> Nfstime3 {
    let since = wall_clock();
    Nfstime3 {
        seconds: since.as_secs() as u32,
        nseconds: since.subsec_nanos(),
    }
}

#[cfg(target_os = "linux")]
fn wall_clock() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write; the clock exists on every Linux since 2.6.32.
    match unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut t) } {
        0 if t.tv_sec >= 0 => Duration::new(t.tv_sec as u64, t.tv_nsec as u32),
        _ => Duration::ZERO,
    }
}

#[cfg(not(target_os = "linux"))]
fn wall_clock() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// The attributes of node `fileid`.
pub fn fattr(fileid: Fileid3, node: &Node) -> Fattr3 {
    let (major, minor) = match &node.kind {
        Kind::Special(special) => special.rdev(),
        _ => (0, 0),
    };
    Fattr3 {
        r#type: match &node.kind {
            Kind::File { .. } => Ftype3::Nf3reg,
            Kind::Dir(_) => Ftype3::Nf3dir,
            Kind::Symlink(_) => Ftype3::Nf3lnk,
            Kind::Special(Special::Char { .. }) => Ftype3::Nf3chr,
            Kind::Special(Special::Block { .. }) => Ftype3::Nf3blk,
            Kind::Special(Special::Socket) => Ftype3::Nf3sock,
            Kind::Special(Special::Fifo) => Ftype3::Nf3fifo,
        },
        mode: node.meta.mode,
        nlink: node.nlink(),
        uid: node.meta.uid,
        gid: node.meta.gid,
        size: node.size(),
        // Section 2.5 (fattr3 used): "the number of bytes of disk space that the file
        // actually uses": the bytes stored, so a sparse file's holes are not counted. A
        // directory reports its fixed size.
        used: match &node.kind {
            Kind::Dir(_) => DIR_SIZE,
            kind => kind.stored(),
        },
        // Section 2.5 (specdata3): a device's major number in specdata1, its minor in
        // specdata2.
        rdev: Specdata3 {
            specdata1: major,
            specdata2: minor,
        },
        fsid: FSID,
        fileid,
        atime: node.meta.atime,
        mtime: node.meta.mtime,
        ctime: node.meta.ctime,
    }
}

/// Post-operation attributes of `fileid`, or none if it is gone.
pub fn post_op(tree: &Tree, fileid: Fileid3) -> PostOpAttr {
    match tree.get(fileid) {
        Ok(node) => PostOpAttr::True(fattr(fileid, node)),
        Err(_) => PostOpAttr::False,
    }
}

/// Pre-operation attributes of `fileid` (size and times), or none if it is gone.
pub fn pre_op(tree: &Tree, fileid: Fileid3) -> PreOpAttr {
    match tree.get(fileid) {
        Ok(node) => PreOpAttr::True(WccAttr {
            size: node.size(),
            mtime: node.meta.mtime,
            ctime: node.meta.ctime,
        }),
        Err(_) => PreOpAttr::False,
    }
}

/// Weak cache consistency data: `before`, and the attributes of `fileid` now.
pub fn wcc(before: PreOpAttr, tree: &Tree, fileid: Fileid3) -> WccData {
    WccData {
        before,
        after: post_op(tree, fileid),
    }
}

/// No wcc data at all (a handle that could not be used).
pub fn no_wcc() -> WccData {
    WccData {
        before: PreOpAttr::False,
        after: PostOpAttr::False,
    }
}

/// The mode `sattr` sets, if any.
pub fn set_mode(sattr: &Sattr3) -> Option<u32> {
    match sattr.mode {
        SetMode3::True(mode) => Some(mode & MODE_MASK),
        SetMode3::Default { .. } => None,
    }
}

/// The uid `sattr` sets, if any.
pub fn set_uid(sattr: &Sattr3) -> Option<u32> {
    match sattr.uid {
        SetUid3::True(uid) => Some(uid),
        SetUid3::Default { .. } => None,
    }
}

/// The gid `sattr` sets, if any.
pub fn set_gid(sattr: &Sattr3) -> Option<u32> {
    match sattr.gid {
        SetGid3::True(gid) => Some(gid),
        SetGid3::Default { .. } => None,
    }
}

/// The time a `set_atime`/`set_mtime` arm asks for, if any.
fn set_time(client: Option<&Nfstime3>, how: TimeHow, now: &Nfstime3) -> Option<Nfstime3> {
    match (client, how) {
        (Some(time), _) => Some(*time),
        (None, TimeHow::SetToServerTime) => Some(*now),
        (None, _) => None,
    }
}

/// Applies `sattr` to node `fileid` (RFC 1813 section 3.3.2): the size first, since it can
/// fail (not a file, no space), then the rest. ctime moves whenever anything is set.
pub fn apply(
    tree: &mut Tree,
    fileid: Fileid3,
    sattr: &Sattr3,
    now: &Nfstime3,
) -> Result<(), Nfsstat3> {
    if let SetSize3::True(size) = sattr.size {
        tree.set_len(fileid, size, *now)?;
    }
    let atime = match &sattr.atime {
        SetAtime::SetToClientTime(t) => set_time(Some(t), TimeHow::SetToClientTime, now),
        SetAtime::Default { discriminant } => set_time(None, *discriminant, now),
    };
    let mtime = match &sattr.mtime {
        SetMtime::SetToClientTime(t) => set_time(Some(t), TimeHow::SetToClientTime, now),
        SetMtime::Default { discriminant } => set_time(None, *discriminant, now),
    };
    let (mode, uid, gid) = (set_mode(sattr), set_uid(sattr), set_gid(sattr));
    let node = tree.get_mut(fileid)?;
    let meta = &mut node.meta;
    let mut changed = false;
    for (field, value) in [
        (&mut meta.mode, mode),
        (&mut meta.uid, uid),
        (&mut meta.gid, gid),
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
        meta.ctime = *now;
    }
    Ok(())
}

/// The size `sattr` sets, if any.
pub fn set_size(sattr: &Sattr3) -> Option<u64> {
    match sattr.size {
        SetSize3::True(size) => Some(size),
        SetSize3::Default { .. } => None,
    }
}

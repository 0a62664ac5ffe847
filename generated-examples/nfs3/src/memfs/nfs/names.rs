//! The procedures on directory entries: LOOKUP, CREATE, MKDIR, SYMLINK, MKNOD, REMOVE, RMDIR,
//! RENAME, LINK.

use bytes::Bytes;

use crate::memfs::access;
use crate::memfs::attr::{self, no_wcc, post_op, pre_op, wcc};
use crate::memfs::tree::{check_new_name, Dir, FileData, Kind, Meta, Special};
use crate::memfs::Op;
use crate::nfs3::*;

/// The longest symbolic link target SYMLINK takes (Linux's PATH_MAX).
pub const PATH_MAX: usize = 4096;

/// NFS3ERR_ACCES unless the caller may add or remove names in directory `dir`: write and
/// search permission on it, which Linux's server asks before anything else of a call that
/// makes, removes or moves a name (`fh_verify` with NFSD_MAY_CREATE or NFSD_MAY_REMOVE). The
/// kernel's client checks the same against ACCESS first, but a stale access cache let it send
/// a MKNOD into a directory just made read-only (pjdfstest mknod/06.t): the server is the one
/// to enforce it. Root passes (no root squashing here). NFS3ERR_NOTDIR first for a non-directory.
fn may_change(op: &Op<'_>, dir: Fileid3) -> Result<(), Nfsstat3> {
    let node = op.tree.get(dir)?;
    node.dir()?;
    let want = ACCESS3_MODIFY | ACCESS3_LOOKUP;
    if access::allowed(node, &op.caller, want) == want {
        Ok(())
    } else {
        Err(Nfsstat3::Nfs3errAcces)
    }
}

/// LOOKUP (RFC 1813 section 3.3.3), "." and ".." included.
pub fn lookup(op: &mut Op<'_>, args: Lookup3args) -> Lookup3res {
    let dir = match op.resolve(&args.what.dir) {
        Ok(dir) => dir,
        Err(discriminant) => {
            return Lookup3res::Default {
                discriminant,
                value: Lookup3resfail {
                    dir_attributes: PostOpAttr::False,
                },
            }
        }
    };
    match op.tree.lookup(dir, args.what.name.as_bytes()) {
        Ok(id) => Lookup3res::Nfs3Ok(Lookup3resok {
            object: op.handle(id),
            obj_attributes: post_op(op.tree, id),
            dir_attributes: post_op(op.tree, dir),
        }),
        Err(discriminant) => Lookup3res::Default {
            discriminant,
            value: Lookup3resfail {
                dir_attributes: post_op(op.tree, dir),
            },
        },
    }
}

/// What a procedure that makes a node answers: the new handle and attributes and the
/// directory's wcc data, or the status and the directory's wcc data.
struct Made {
    result: Result<(NfsFh3, PostOpAttr), Nfsstat3>,
    dir_wcc: WccData,
}

/// Makes `name` in the directory `where_.dir` with `make` (given the directory's fileid).
fn make(
    op: &mut Op<'_>,
    where_: &Diropargs3,
    make: impl FnOnce(&mut Op<'_>, Fileid3) -> Result<Fileid3, Nfsstat3>,
) -> Made {
    let dir = match op.resolve(&where_.dir) {
        Ok(dir) => dir,
        Err(status) => {
            return Made {
                result: Err(status),
                dir_wcc: no_wcc(),
            }
        }
    };
    let before = pre_op(op.tree, dir);
    let result = make(op, dir).map(|id| (op.handle(id), post_op(op.tree, id)));
    Made {
        result,
        dir_wcc: wcc(before, op.tree, dir),
    }
}

/// New node metadata: the caller's ids and `default_mode` unless `sattr` says otherwise.
fn new_meta(op: &Op<'_>, sattr: Option<&Sattr3>, default_mode: u32) -> Meta {
    let mut meta = Meta::new(default_mode, op.caller.uid, op.caller.gid, op.now);
    if let Some(sattr) = sattr {
        meta.mode = attr::set_mode(sattr).unwrap_or(meta.mode);
        meta.uid = attr::set_uid(sattr).unwrap_or(meta.uid);
        meta.gid = attr::set_gid(sattr).unwrap_or(meta.gid);
    }
    meta
}

fn new_file(create_verf: Option<Bytes>) -> Kind {
    Kind::File {
        data: FileData::new(),
        create_verf,
    }
}

/// CREATE (section 3.3.8): UNCHECKED, GUARDED and EXCLUSIVE.
pub fn create(op: &mut Op<'_>, args: Create3args) -> Create3res {
    let name = args.r#where.name.as_bytes_ref().clone();
    let made = make(op, &args.r#where, |op, dir| {
        let existing = op.tree.get(dir)?.dir()?.get(&name);
        if existing.is_none() {
            may_change(op, dir)?;
        }
        match (&args.how, existing) {
            (Createhow3::Unchecked(sattr), Some(id)) => {
                // An existing regular file is kept; only a size in the attributes applies
                // (the truncation of an open with O_TRUNC).
                match op.tree.get(id)?.kind {
                    Kind::File { .. } => {}
                    _ => return Err(Nfsstat3::Nfs3errExist),
                }
                if let Some(size) = attr::set_size(sattr) {
                    op.tree.set_len(id, size, op.now)?;
                }
                Ok(id)
            }
            (Createhow3::Guarded(_), Some(_)) => Err(Nfsstat3::Nfs3errExist),
            (Createhow3::Exclusive(verf), Some(id)) => match &op.tree.get(id)?.kind {
                // Section 3.3.8: a retransmitted EXCLUSIVE CREATE finds its own verifier.
                Kind::File {
                    create_verf: Some(stored),
                    ..
                } if *stored == verf.0 => Ok(id),
                _ => Err(Nfsstat3::Nfs3errExist),
            },
            (Createhow3::Unchecked(sattr) | Createhow3::Guarded(sattr), None) => {
                let meta = new_meta(op, Some(sattr), 0o644);
                let id = op.tree.create(dir, &name, new_file(None), meta, op.now)?;
                if let Some(size) = attr::set_size(sattr).filter(|s| *s > 0) {
                    if let Err(status) = op.tree.set_len(id, size, op.now) {
                        let _ = op.tree.unlink(dir, &name, false, op.now);
                        return Err(status);
                    }
                }
                Ok(id)
            }
            (Createhow3::Exclusive(verf), None) => {
                let meta = new_meta(op, None, 0o644);
                let kind = new_file(Some(verf.0.clone()));
                op.tree.create(dir, &name, kind, meta, op.now)
            }
        }
    });
    match made.result {
        Ok((fh, obj_attributes)) => Create3res::Nfs3Ok(Create3resok {
            obj: PostOpFh3::True(fh),
            obj_attributes,
            dir_wcc: made.dir_wcc,
        }),
        Err(discriminant) => Create3res::Default {
            discriminant,
            value: Create3resfail {
                dir_wcc: made.dir_wcc,
            },
        },
    }
}

/// MKDIR (section 3.3.9).
pub fn mkdir(op: &mut Op<'_>, args: Mkdir3args) -> Mkdir3res {
    let name = args.r#where.name.as_bytes_ref().clone();
    let made = make(op, &args.r#where, |op, dir| {
        may_change(op, dir)?;
        let meta = new_meta(op, Some(&args.attributes), 0o755);
        op.tree
            .create(dir, &name, Kind::Dir(Dir::default()), meta, op.now)
    });
    match made.result {
        Ok((fh, obj_attributes)) => Mkdir3res::Nfs3Ok(Mkdir3resok {
            obj: PostOpFh3::True(fh),
            obj_attributes,
            dir_wcc: made.dir_wcc,
        }),
        Err(discriminant) => Mkdir3res::Default {
            discriminant,
            value: Mkdir3resfail {
                dir_wcc: made.dir_wcc,
            },
        },
    }
}

/// SYMLINK (section 3.3.10): targets up to [`PATH_MAX`] bytes.
pub fn symlink(op: &mut Op<'_>, args: Symlink3args) -> Symlink3res {
    let name = args.r#where.name.as_bytes_ref().clone();
    let target = args.symlink.symlink_data.as_bytes_ref().clone();
    let made = make(op, &args.r#where, |op, dir| {
        may_change(op, dir)?;
        if target.len() > PATH_MAX {
            return Err(Nfsstat3::Nfs3errNametoolong);
        }
        if target.is_empty() {
            return Err(Nfsstat3::Nfs3errInval);
        }
        let meta = new_meta(op, Some(&args.symlink.symlink_attributes), 0o777);
        op.tree
            .create(dir, &name, Kind::Symlink(target), meta, op.now)
    });
    match made.result {
        Ok((fh, obj_attributes)) => Symlink3res::Nfs3Ok(Symlink3resok {
            obj: PostOpFh3::True(fh),
            obj_attributes,
            dir_wcc: made.dir_wcc,
        }),
        Err(discriminant) => Symlink3res::Default {
            discriminant,
            value: Symlink3resfail {
                dir_wcc: made.dir_wcc,
            },
        },
    }
}

/// The special file `what` asks for and its initial attributes, or NFS3ERR_BADTYPE.
fn special(what: &Mknoddata3) -> Result<(Special, &Sattr3), Nfsstat3> {
    match what {
        // Section 3.3.11: "The major number stored in device.spec.specdata1 and the minor
        // number stored in device.spec.specdata2."
        Mknoddata3::Nf3chr(device) => Ok((
            Special::Char {
                major: device.spec.specdata1,
                minor: device.spec.specdata2,
            },
            &device.dev_attributes,
        )),
        Mknoddata3::Nf3blk(device) => Ok((
            Special::Block {
                major: device.spec.specdata1,
                minor: device.spec.specdata2,
            },
            &device.dev_attributes,
        )),
        Mknoddata3::Nf3sock(sattr) => Ok((Special::Socket, sattr)),
        Mknoddata3::Nf3fifo(sattr) => Ok((Special::Fifo, sattr)),
        // Section 3.3.11: "if the server does not support the target type or the target
        // type is illegal, the error, NFS3ERR_BADTYPE, should be returned. Note that NF3REG,
        // NF3DIR, and NF3LNK are illegal types for MKNOD."
        Mknoddata3::Default { .. } => Err(Nfsstat3::Nfs3errBadtype),
    }
}

/// MKNOD (section 3.3.11): character and block devices, sockets and FIFOs, each a name with
/// attributes (size 0; READ and WRITE answer NFS3ERR_INVAL). Only root (uid 0) makes a
/// device, anyone a socket or FIFO: Linux's mknod(2) wants CAP_MKNOD for a device, and its
/// server keeps that capability for root callers only, so a device asked by anyone else is
/// NFS3ERR_PERM (section 2.6: "the caller is either not a privileged user (root) or not the
/// owner").
pub fn mknod(op: &mut Op<'_>, args: Mknod3args) -> Mknod3res {
    let name = args.r#where.name.as_bytes_ref().clone();
    let made = make(op, &args.r#where, |op, dir| {
        may_change(op, dir)?;
        let (special, sattr) = special(&args.what)?;
        if special.is_device() && op.caller.uid != 0 {
            // As Linux's server: a bad or existing name is found before the privilege.
            check_new_name(&name)?;
            if op.tree.get(dir)?.dir()?.get(&name).is_some() {
                return Err(Nfsstat3::Nfs3errExist);
            }
            return Err(Nfsstat3::Nfs3errPerm);
        }
        let meta = new_meta(op, Some(sattr), 0o644);
        op.tree
            .create(dir, &name, Kind::Special(special), meta, op.now)
    });
    match made.result {
        Ok((fh, obj_attributes)) => Mknod3res::Nfs3Ok(Mknod3resok {
            obj: PostOpFh3::True(fh),
            obj_attributes,
            dir_wcc: made.dir_wcc,
        }),
        Err(discriminant) => Mknod3res::Default {
            discriminant,
            value: Mknod3resfail {
                dir_wcc: made.dir_wcc,
            },
        },
    }
}

/// The status and directory wcc data of REMOVE or RMDIR.
fn unlink(op: &mut Op<'_>, object: &Diropargs3, want_dir: bool) -> (Result<(), Nfsstat3>, WccData) {
    let dir = match op.resolve(&object.dir) {
        Ok(dir) => dir,
        Err(status) => return (Err(status), no_wcc()),
    };
    let before = pre_op(op.tree, dir);
    let result = may_change(op, dir).and_then(|()| {
        op.tree
            .unlink(dir, object.name.as_bytes(), want_dir, op.now)
    });
    (result, wcc(before, op.tree, dir))
}

/// REMOVE (section 3.3.12): the file goes with its last name, and its handles go stale.
pub fn remove(op: &mut Op<'_>, args: Remove3args) -> Remove3res {
    match unlink(op, &args.object, false) {
        (Ok(()), dir_wcc) => Remove3res::Nfs3Ok(Remove3resok { dir_wcc }),
        (Err(discriminant), dir_wcc) => Remove3res::Default {
            discriminant,
            value: Remove3resfail { dir_wcc },
        },
    }
}

/// RMDIR (section 3.3.13): only an empty directory (NFS3ERR_NOTEMPTY otherwise).
pub fn rmdir(op: &mut Op<'_>, args: Rmdir3args) -> Rmdir3res {
    match unlink(op, &args.object, true) {
        (Ok(()), dir_wcc) => Rmdir3res::Nfs3Ok(Rmdir3resok { dir_wcc }),
        (Err(discriminant), dir_wcc) => Rmdir3res::Default {
            discriminant,
            value: Rmdir3resfail { dir_wcc },
        },
    }
}

/// RENAME (section 3.3.14).
pub fn rename(op: &mut Op<'_>, args: Rename3args) -> Rename3res {
    let dirs = op
        .resolve(&args.from.dir)
        .and_then(|from| Ok((from, op.resolve(&args.to.dir)?)));
    let (from, to) = match dirs {
        Ok(dirs) => dirs,
        Err(discriminant) => {
            return Rename3res::Default {
                discriminant,
                value: Rename3resfail {
                    fromdir_wcc: no_wcc(),
                    todir_wcc: no_wcc(),
                },
            }
        }
    };
    let (from_before, to_before) = (pre_op(op.tree, from), pre_op(op.tree, to));
    let result = may_change(op, from)
        .and_then(|()| may_change(op, to))
        .and_then(|()| {
            op.tree.rename(
                from,
                args.from.name.as_bytes(),
                to,
                args.to.name.as_bytes(),
                op.now,
            )
        });
    let fromdir_wcc = wcc(from_before, op.tree, from);
    let todir_wcc = wcc(to_before, op.tree, to);
    match result {
        Ok(()) => Rename3res::Nfs3Ok(Rename3resok {
            fromdir_wcc,
            todir_wcc,
        }),
        Err(discriminant) => Rename3res::Default {
            discriminant,
            value: Rename3resfail {
                fromdir_wcc,
                todir_wcc,
            },
        },
    }
}

/// LINK (section 3.3.15): hard links to non-directories.
pub fn link(op: &mut Op<'_>, args: Link3args) -> Link3res {
    let ids = op
        .resolve(&args.file)
        .and_then(|file| Ok((file, op.resolve(&args.link.dir)?)));
    let (file, dir) = match ids {
        Ok(ids) => ids,
        Err(discriminant) => {
            return Link3res::Default {
                discriminant,
                value: Link3resfail {
                    file_attributes: PostOpAttr::False,
                    linkdir_wcc: no_wcc(),
                },
            }
        }
    };
    let before = pre_op(op.tree, dir);
    let result = may_change(op, dir)
        .and_then(|()| op.tree.link(file, dir, args.link.name.as_bytes(), op.now));
    let file_attributes = post_op(op.tree, file);
    let linkdir_wcc = wcc(before, op.tree, dir);
    match result {
        Ok(()) => Link3res::Nfs3Ok(Link3resok {
            file_attributes,
            linkdir_wcc,
        }),
        Err(discriminant) => Link3res::Default {
            discriminant,
            value: Link3resfail {
                file_attributes,
                linkdir_wcc,
            },
        },
    }
}

//! The procedures on one file: GETATTR, SETATTR, ACCESS, READLINK, READ, WRITE, COMMIT.

use bytes::Bytes;
use rpcrdma::rpc::CallContext;
use rpcrdma::xdr::XdrString;

use crate::memfs::attr::{self, fattr, no_wcc, post_op, pre_op, wcc};
use crate::memfs::tree::{Kind, Node};
use crate::memfs::{access, handle, Op};
use crate::nfs3::*;

/// The most READ returns and WRITE takes at once (FSINFO rtmax and wtmax).
pub const IO_MAX: u32 = 1 << 20;

/// GETATTR (RFC 1813 section 3.3.1).
pub fn getattr(op: &mut Op<'_>, args: Getattr3args) -> Getattr3res {
    match op.resolve(&args.object) {
        Ok(id) => match op.tree.get(id) {
            Ok(node) => Getattr3res::Nfs3Ok(Getattr3resok {
                obj_attributes: fattr(id, node),
            }),
            Err(discriminant) => Getattr3res::Default { discriminant },
        },
        Err(discriminant) => Getattr3res::Default { discriminant },
    }
}

/// SETATTR (section 3.3.2), with the ctime guard.
pub fn setattr(op: &mut Op<'_>, args: Setattr3args) -> Setattr3res {
    let id = match op.resolve(&args.object) {
        Ok(id) => id,
        Err(discriminant) => {
            return Setattr3res::Default {
                discriminant,
                value: Setattr3resfail { obj_wcc: no_wcc() },
            }
        }
    };
    let before = pre_op(op.tree, id);
    let result = match (&args.guard, op.tree.get(id)) {
        // Section 3.3.2: "If guard.check is TRUE, the server must compare the value of
        // guard.obj_ctime to the current ctime ... If the values are different, the server
        // must preserve the object attributes and must return a status of NFS3ERR_NOT_SYNC."
        (Sattrguard3::True(ctime), Ok(node)) if node.meta.ctime != *ctime => {
            Err(Nfsstat3::Nfs3errNotSync)
        }
        (_, Ok(node)) if !may_change_ids(node, &op.caller, &args.new_attributes) => {
            Err(Nfsstat3::Nfs3errPerm)
        }
        _ => attr::apply(op.tree, id, &args.new_attributes, &op.now),
    };
    let obj_wcc = wcc(before, op.tree, id);
    match result {
        Ok(()) => Setattr3res::Nfs3Ok(Setattr3resok { obj_wcc }),
        Err(discriminant) => Setattr3res::Default {
            discriminant,
            value: Setattr3resfail { obj_wcc },
        },
    }
}

/// Whether `caller` may set the mode, owner and group `sattr` asks for, as Linux allows it
/// (`chown_ok`, `chgrp_ok`, `inode_owner_or_capable`): root anything; the owner the mode, its
/// own uid again, and a group it belongs to; anyone else none of them (NFS3ERR_PERM, section
/// 2.6: "not a privileged user (root) or not the owner"). The kernel's client leaves these
/// checks to the server: pjdfstest chmod/00.t and chmod/07.t found a non-owner's chmod accepted.
fn may_change_ids(node: &Node, caller: &access::Caller, sattr: &Sattr3) -> bool {
    if caller.uid == 0 {
        return true;
    }
    let owner = caller.uid == node.meta.uid;
    let mode_ok = attr::set_mode(sattr).is_none() || owner;
    let uid_ok = attr::set_uid(sattr).map_or(true, |uid| owner && uid == node.meta.uid);
    let gid_ok = attr::set_gid(sattr).map_or(true, |gid| {
        owner && (gid == node.meta.gid || caller.in_group(gid))
    });
    mode_ok && uid_ok && gid_ok
}

/// ACCESS (section 3.3.4).
pub fn access(op: &mut Op<'_>, args: Access3args) -> Access3res {
    let id = match op.resolve(&args.object) {
        Ok(id) => id,
        Err(discriminant) => {
            return Access3res::Default {
                discriminant,
                value: Access3resfail {
                    obj_attributes: PostOpAttr::False,
                },
            }
        }
    };
    let granted = match op.tree.get(id) {
        Ok(node) => access::allowed(node, &op.caller, args.access),
        Err(_) => 0,
    };
    Access3res::Nfs3Ok(Access3resok {
        obj_attributes: post_op(op.tree, id),
        access: granted,
    })
}

/// READLINK (section 3.3.5).
pub fn readlink(op: &mut Op<'_>, args: Readlink3args) -> Readlink3res {
    let fail = |discriminant, symlink_attributes| Readlink3res::Default {
        discriminant,
        value: Readlink3resfail { symlink_attributes },
    };
    let id = match op.resolve(&args.symlink) {
        Ok(id) => id,
        Err(status) => return fail(status, PostOpAttr::False),
    };
    match op.tree.get(id).map(|n| &n.kind) {
        Ok(Kind::Symlink(target)) => Readlink3res::Nfs3Ok(Readlink3resok {
            symlink_attributes: post_op(op.tree, id),
            data: XdrString::from(target.clone()),
        }),
        Ok(_) => fail(Nfsstat3::Nfs3errInval, post_op(op.tree, id)),
        Err(status) => fail(status, PostOpAttr::False),
    }
}

fn read_fail(discriminant: Nfsstat3, file_attributes: PostOpAttr) -> Read3res {
    Read3res::Default {
        discriminant,
        value: Read3resfail { file_attributes },
    }
}

/// READ (section 3.3.6): at most [`IO_MAX`] bytes, into a buffer from the call's transport
/// (registered memory over RPC-over-RDMA, so the Write chunk carries it without a copy),
/// holes as zeros. The file's atime moves; its ctime does not. A directory is NFS3ERR_ISDIR;
/// a link or special file NFS3ERR_INVAL (as Linux's server answers a READ of a file that is
/// not regular).
pub fn read(op: &mut Op<'_>, ctx: &CallContext, args: Read3args) -> Read3res {
    let id = match op.resolve(&args.file) {
        Ok(id) => id,
        Err(status) => return read_fail(status, PostOpAttr::False),
    };
    let data = match op.tree.get(id).map(|n| n.kind.data()) {
        Ok(Ok(data)) => data,
        Ok(Err(status)) => return read_fail(status, post_op(op.tree, id)),
        Err(status) => return read_fail(status, PostOpAttr::False),
    };
    let len = data.len();
    let start = args.offset.min(len);
    // At most IO_MAX (1 MiB), so the count fits a usize on every target.
    let wanted = u64::from(args.count.min(IO_MAX)).min(len - start) as usize;
    let mut n = 0;
    let bytes = if wanted == 0 {
        Bytes::new()
    } else {
        let mut buffer = ctx.buffer(wanted);
        // A transport lending less than asked makes this a short read, never a panic.
        let room = wanted.min(buffer.len());
        n = data.read(start, &mut buffer.as_mut_slice()[..room]);
        buffer.freeze(n)
    };
    let end = start + n as u64;
    if n > 0 {
        // Section 2.5 (fattr3 atime): "the time of last access"; a READ of nothing is none.
        if let Ok(node) = op.tree.get_mut(id) {
            node.meta.atime = op.now;
        }
    }
    Read3res::Nfs3Ok(Read3resok {
        file_attributes: post_op(op.tree, id),
        count: n as u32,
        eof: end == len,
        data: bytes,
    })
}

fn write_fail(discriminant: Nfsstat3, file_wcc: WccData) -> Write3res {
    Write3res::Default {
        discriminant,
        value: Write3resfail { file_wcc },
    }
}

/// WRITE (section 3.3.7): stored at once, so answered FILE_SYNC whatever was asked. Only the
/// pages written are stored (a write far past the end leaves a hole); NFS3ERR_FBIG past
/// [`MAX_FILE_SIZE`](crate::memfs::tree::MAX_FILE_SIZE), NFS3ERR_NOSPC when the bytes newly
/// stored would pass the capacity (the file is then unchanged).
pub fn write(op: &mut Op<'_>, args: Write3args) -> Write3res {
    let id = match op.resolve(&args.file) {
        Ok(id) => id,
        Err(status) => return write_fail(status, no_wcc()),
    };
    let before = pre_op(op.tree, id);
    // Section 3.3.7: count is "the number of bytes of data to be written"; data must hold it.
    let Some(bytes) = args.data.get(..args.count as usize) else {
        return write_fail(Nfsstat3::Nfs3errInval, wcc(before, op.tree, id));
    };
    // More than wtmax: a short write, which the client continues (section 3.3.19, wtmax).
    let bytes = &bytes[..bytes.len().min(IO_MAX as usize)];
    let written = op
        .tree
        .write(id, args.offset, bytes, op.now)
        .and_then(|()| {
            // As Linux's server (`file_remove_privs` without CAP_FSETID, which it keeps for root
            // callers only): a write by anyone but root clears set-user-ID, and set-group-ID when
            // the group may execute (pjdfstest chmod/12.t).
            if op.caller.uid != 0 {
                let meta = &mut op.tree.get_mut(id)?.meta;
                let mut kill = meta.mode & 0o4000;
                if meta.mode & 0o2010 == 0o2010 {
                    kill |= 0o2000;
                }
                meta.mode &= !kill;
            }
            Ok(())
        });
    match written {
        Ok(()) => Write3res::Nfs3Ok(Write3resok {
            file_wcc: wcc(before, op.tree, id),
            count: bytes.len() as u32,
            committed: StableHow::FileSync,
            verf: Writeverf3(handle::verifier(op.generation)),
        }),
        Err(status) => write_fail(status, wcc(before, op.tree, id)),
    }
}

/// COMMIT (section 3.3.21): nothing is ever uncommitted; the verifier is the instance's.
pub fn commit(op: &mut Op<'_>, args: Commit3args) -> Commit3res {
    match op.resolve(&args.file) {
        Ok(id) => Commit3res::Nfs3Ok(Commit3resok {
            file_wcc: wcc(pre_op(op.tree, id), op.tree, id),
            verf: Writeverf3(handle::verifier(op.generation)),
        }),
        Err(discriminant) => Commit3res::Default {
            discriminant,
            value: Commit3resfail { file_wcc: no_wcc() },
        },
    }
}

//! The procedures about the file system: FSSTAT, FSINFO, PATHCONF.

use crate::memfs::attr::post_op;
use crate::memfs::tree::{LINK_MAX, MAX_FILE_SIZE, NAME_MAX};
use crate::memfs::Op;
use crate::nfs3::*;

use super::file::IO_MAX;

/// The preferred READDIR size (FSINFO dtpref).
pub const DTPREF: u32 = 64 << 10;

/// FSSTAT (RFC 1813 section 3.3.18): the bounds as totals, what is left as free.
pub fn fsstat(op: &mut Op<'_>, args: Fsstat3args) -> Fsstat3res {
    match op.resolve(&args.fsroot) {
        Ok(id) => {
            let bounds = op.tree.bounds();
            let free_bytes = bounds.bytes.saturating_sub(op.tree.used_bytes());
            let free_files = bounds.files.saturating_sub(op.tree.files());
            Fsstat3res::Nfs3Ok(Fsstat3resok {
                obj_attributes: post_op(op.tree, id),
                tbytes: bounds.bytes,
                fbytes: free_bytes,
                abytes: free_bytes,
                tfiles: bounds.files,
                ffiles: free_files,
                afiles: free_files,
                // Memory changes at any moment.
                invarsec: 0,
            })
        }
        Err(discriminant) => Fsstat3res::Default {
            discriminant,
            value: Fsstat3resfail {
                obj_attributes: PostOpAttr::False,
            },
        },
    }
}

/// FSINFO (section 3.3.19): 1 MiB reads and writes, nanosecond times, links and symlinks,
/// and files up to [`MAX_FILE_SIZE`] whatever the capacity (files are sparse: a hole stores
/// nothing, so a client may seek far past the capacity).
pub fn fsinfo(op: &mut Op<'_>, args: Fsinfo3args) -> Fsinfo3res {
    match op.resolve(&args.fsroot) {
        Ok(id) => Fsinfo3res::Nfs3Ok(Fsinfo3resok {
            obj_attributes: post_op(op.tree, id),
            rtmax: IO_MAX,
            rtpref: IO_MAX,
            rtmult: 4096,
            wtmax: IO_MAX,
            wtpref: IO_MAX,
            wtmult: 4096,
            dtpref: DTPREF,
            maxfilesize: MAX_FILE_SIZE,
            time_delta: Nfstime3 {
                seconds: 0,
                nseconds: 1,
            },
            properties: FSF3_LINK | FSF3_SYMLINK | FSF3_HOMOGENEOUS | FSF3_CANSETTIME,
        }),
        Err(discriminant) => Fsinfo3res::Default {
            discriminant,
            value: Fsinfo3resfail {
                obj_attributes: PostOpAttr::False,
            },
        },
    }
}

/// PATHCONF (section 3.3.20).
pub fn pathconf(op: &mut Op<'_>, args: Pathconf3args) -> Pathconf3res {
    match op.resolve(&args.object) {
        Ok(id) => Pathconf3res::Nfs3Ok(Pathconf3resok {
            obj_attributes: post_op(op.tree, id),
            linkmax: LINK_MAX,
            name_max: NAME_MAX as u32,
            no_trunc: true,
            chown_restricted: true,
            case_insensitive: false,
            case_preserving: true,
        }),
        Err(discriminant) => Pathconf3res::Default {
            discriminant,
            value: Pathconf3resfail {
                obj_attributes: PostOpAttr::False,
            },
        },
    }
}

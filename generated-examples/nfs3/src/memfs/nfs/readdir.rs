//! READDIR and READDIRPLUS (RFC 1813 sections 3.3.16 and 3.3.17): entries in cookie order,
//! "." and ".." first, as many as the caller's byte counts allow, counted in encoded XDR bytes.

use rpcrdma::xdr::XdrString;

use crate::memfs::attr::{fattr, post_op};
use crate::memfs::tree::{Entry, FIRST_ENTRY_COOKIE};
use crate::memfs::{handle, Op};
use crate::nfs3::*;

/// The largest reply built, whatever the caller allows: a bound on the work one call does.
pub const REPLY_MAX: u32 = 1 << 20;

/// The cookies of "." and "..".
const DOT_COOKIE: u64 = 1;
const DOTDOT_COOKIE: u64 = 2;

/// Encoded sizes, from the XDR of `specs/nfs3.x`.
const FATTR3_LEN: u32 = 84;
const POST_OP_ATTR_LEN: u32 = 4 + FATTR3_LEN;
const POST_OP_FH_LEN: u32 = 4 + 4 + handle::HANDLE_LEN as u32;
/// The status, the directory's attributes, the cookie verifier, the list's end and eof.
const RESOK_FIXED_LEN: u32 = 4 + POST_OP_ATTR_LEN + NFS3_COOKIEVERFSIZE + 4 + 4;

/// An XDR opaque's encoded length: its length word and its bytes padded to 4.
fn opaque_len(len: usize) -> u32 {
    4 + (len as u32).div_ceil(4) * 4
}

/// An entry's fileid, name and cookie: what READDIRPLUS's dircount counts.
fn dir_info_len(name: &[u8]) -> u32 {
    8 + opaque_len(name.len()) + 8
}

/// The entries from `cookie` on: (cookie, fileid, name).
fn entries_after<'a>(
    op: &'a Op<'_>,
    dir: Fileid3,
    cookie: u64,
) -> Result<impl Iterator<Item = (u64, Fileid3, &'a [u8])> + 'a, Nfsstat3> {
    let entries = op.tree.get(dir)?.dir()?;
    let dots = [
        (DOT_COOKIE, dir, &b"."[..]),
        (DOTDOT_COOKIE, entries.parent, &b".."[..]),
    ];
    let dots = dots.into_iter().filter(move |(c, _, _)| *c > cookie);
    let rest = entries
        .after(cookie.max(FIRST_ENTRY_COOKIE - 1))
        .map(|(c, Entry { name, fileid })| (c, *fileid, &name[..]));
    Ok(dots.chain(rest))
}

/// Checks the cookie and its verifier against this directory (section 3.3.16: a cookie that
/// is no longer valid is NFS3ERR_BAD_COOKIE). Cookies here stay valid for the instance's
/// life, so the verifier only has to be ours or zero: a client that lost ours (the Linux
/// client resuming a directory whose inode it re-read) still goes on from its cookie.
fn check_cookie(
    op: &Op<'_>,
    dir: Fileid3,
    cookie: u64,
    verf: &Cookieverf3,
) -> Result<(), Nfsstat3> {
    if cookie == 0 {
        return Ok(());
    }
    let zero = verf.0.iter().all(|b| *b == 0);
    if !zero && verf.0 != handle::verifier(op.generation) {
        return Err(Nfsstat3::Nfs3errBadCookie);
    }
    if !op.tree.get(dir)?.dir()?.issued(cookie) {
        return Err(Nfsstat3::Nfs3errBadCookie);
    }
    Ok(())
}

/// READDIR (section 3.3.16): count bounds the whole READDIR3resok.
pub fn readdir(op: &mut Op<'_>, args: Readdir3args) -> Readdir3res {
    let fail = |discriminant, dir_attributes| Readdir3res::Default {
        discriminant,
        value: Readdir3resfail { dir_attributes },
    };
    let dir = match op.resolve(&args.dir) {
        Ok(dir) => dir,
        Err(status) => return fail(status, PostOpAttr::False),
    };
    if let Err(status) = check_cookie(op, dir, args.cookie, &args.cookieverf) {
        return fail(status, post_op(op.tree, dir));
    }
    let budget = args.count.min(REPLY_MAX);
    let mut used = RESOK_FIXED_LEN;
    let mut list = Vec::new();
    let mut eof = true;
    let iter = match entries_after(op, dir, args.cookie) {
        Ok(iter) => iter,
        Err(status) => return fail(status, post_op(op.tree, dir)),
    };
    for (cookie, fileid, name) in iter {
        let len = 4 + dir_info_len(name);
        if used + len > budget {
            eof = false;
            break;
        }
        used += len;
        list.push(Entry3 {
            fileid,
            name: XdrString::from(bytes::Bytes::copy_from_slice(name)),
            cookie,
        });
    }
    if list.is_empty() && !eof {
        return fail(Nfsstat3::Nfs3errToosmall, post_op(op.tree, dir));
    }
    Readdir3res::Nfs3Ok(Readdir3resok {
        dir_attributes: post_op(op.tree, dir),
        cookieverf: Cookieverf3(handle::verifier(op.generation)),
        reply: Dirlist3 { entries: list, eof },
    })
}

/// READDIRPLUS (section 3.3.17): maxcount bounds the whole READDIRPLUS3resok, dircount the
/// entries' fileids, names and cookies; each entry carries its attributes and handle.
pub fn readdirplus(op: &mut Op<'_>, args: Readdirplus3args) -> Readdirplus3res {
    let fail = |discriminant, dir_attributes| Readdirplus3res::Default {
        discriminant,
        value: Readdirplus3resfail { dir_attributes },
    };
    let dir = match op.resolve(&args.dir) {
        Ok(dir) => dir,
        Err(status) => return fail(status, PostOpAttr::False),
    };
    if let Err(status) = check_cookie(op, dir, args.cookie, &args.cookieverf) {
        return fail(status, post_op(op.tree, dir));
    }
    let budget = args.maxcount.min(REPLY_MAX);
    let dir_budget = args.dircount;
    let mut used = RESOK_FIXED_LEN;
    let mut dir_used = 0u32;
    let mut list = Vec::new();
    let mut eof = true;
    let iter = match entries_after(op, dir, args.cookie) {
        Ok(iter) => iter,
        Err(status) => return fail(status, post_op(op.tree, dir)),
    };
    for (cookie, fileid, name) in iter {
        let info = dir_info_len(name);
        let len = 4 + info + POST_OP_ATTR_LEN + POST_OP_FH_LEN;
        // dircount stops the list too, but never before the first entry: only maxcount
        // makes a reply too small.
        let over_dircount = !list.is_empty() && dir_used + info > dir_budget;
        if used + len > budget || over_dircount {
            eof = false;
            break;
        }
        used += len;
        dir_used += info;
        let (name_attributes, name_handle) = match op.tree.get(fileid) {
            Ok(node) => (
                PostOpAttr::True(fattr(fileid, node)),
                PostOpFh3::True(op.handle(fileid)),
            ),
            Err(_) => (PostOpAttr::False, PostOpFh3::False),
        };
        list.push(Entryplus3 {
            fileid,
            name: XdrString::from(bytes::Bytes::copy_from_slice(name)),
            cookie,
            name_attributes,
            name_handle,
        });
    }
    if list.is_empty() && !eof {
        return fail(Nfsstat3::Nfs3errToosmall, post_op(op.tree, dir));
    }
    Readdirplus3res::Nfs3Ok(Readdirplus3resok {
        dir_attributes: post_op(op.tree, dir),
        cookieverf: Cookieverf3(handle::verifier(op.generation)),
        reply: Dirlistplus3 { entries: list, eof },
    })
}

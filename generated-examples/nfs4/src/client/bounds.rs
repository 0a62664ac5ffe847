//! How large a COMPOUND's reply can be once READ's data is in a Write chunk, from the
//! operations it carries, so that over RPC-over-RDMA a call whose reply fits the inline
//! threshold offers no Reply chunk (seed 002 section 4.3).
//!
//! `COMPOUND4res` has no bound in its XDR (its result array and several results are
//! unbounded), so without this every call would offer a Reply chunk: every reply would cost
//! an RDMA Write, and a READ would offer a Reply chunk beside its Write chunk, which Linux's
//! server (svcrdma, seen on 6.1) answers by closing the connection. Like the Linux client's
//! per-operation `decode_*_maxsz`, the bounds below take the XDR's own limits where it has
//! them and, for strings it leaves unbounded (owner names, an ACE's `who`), the protocol's
//! opaque limit, `NFS4_OPAQUE_LIMIT` (1,024 bytes). An operation without a useful bound
//! (READDIR, READLINK, GETATTR of an attribute of variable size, ...) makes the whole
//! COMPOUND unbounded: such a call offers a Reply chunk as before.

use crate::nfs4::{
    Bitmap4, Compound4args, Createhow4, NfsArgop4, Openflag4, FATTR4_ACLSUPPORT, FATTR4_CANSETTIME,
    FATTR4_CASE_INSENSITIVE, FATTR4_CASE_PRESERVING, FATTR4_CHANGE, FATTR4_CHOWN_RESTRICTED,
    FATTR4_FH_EXPIRE_TYPE, FATTR4_FILEHANDLE, FATTR4_FILEID, FATTR4_FILES_AVAIL, FATTR4_FILES_FREE,
    FATTR4_FILES_TOTAL, FATTR4_FSID, FATTR4_HOMOGENEOUS, FATTR4_LEASE_TIME, FATTR4_LINK_SUPPORT,
    FATTR4_MAXFILESIZE, FATTR4_MAXLINK, FATTR4_MAXNAME, FATTR4_MAXREAD, FATTR4_MAXWRITE,
    FATTR4_MODE, FATTR4_MOUNTED_ON_FILEID, FATTR4_NAMED_ATTR, FATTR4_NO_TRUNC, FATTR4_NUMLINKS,
    FATTR4_OWNER, FATTR4_OWNER_GROUP, FATTR4_RAWDEV, FATTR4_RDATTR_ERROR, FATTR4_SIZE,
    FATTR4_SPACE_AVAIL, FATTR4_SPACE_FREE, FATTR4_SPACE_TOTAL, FATTR4_SPACE_USED,
    FATTR4_SYMLINK_SUPPORT, FATTR4_SYSTEM, FATTR4_TIME_ACCESS, FATTR4_TIME_BACKUP,
    FATTR4_TIME_CREATE, FATTR4_TIME_DELTA, FATTR4_TIME_METADATA, FATTR4_TIME_MODIFY, FATTR4_TYPE,
    FATTR4_UNIQUE_HANDLES, NFS4_FHSIZE, NFS4_OPAQUE_LIMIT,
};

/// A string the XDR leaves unbounded (`utf8str_mixed`), at the protocol's opaque limit.
const NAME: usize = 4 + NFS4_OPAQUE_LIMIT as usize;
/// `stateid4`.
const STATEID: usize = 16;
/// `change_info4`.
const CHANGE_INFO: usize = 4 + 8 + 8;
/// `nfsace4` with its `who` at the opaque limit.
const ACE: usize = 4 + 4 + 4 + NAME;
/// The words of an attribute bitmap the server sets beside one we sent: RFC 5661's
/// attributes fit in three.
const ATTR_WORDS: usize = 3;

/// The largest `COMPOUND4res` answering `args`, with READ's data in its Write chunk (its
/// length stays inline), or `None` when one of the operations has no bound.
pub(crate) fn inline_results(args: &Compound4args) -> Option<usize> {
    // status, the tag (echoed), the result array's count.
    let mut total = 4 + opaque(args.tag.len()) + 4;
    for op in &args.argarray {
        // Each result is its operation number, then its result.
        total = total.checked_add(4 + result(op)?)?;
    }
    Some(total)
}

/// The largest result of `op` (RFC 5661 section 18; its status included), success or error.
fn result(op: &NfsArgop4) -> Option<usize> {
    use NfsArgop4::*;
    Some(match op {
        OpPutfh(_) | OpPutrootfh | OpPutpubfh | OpSavefh | OpRestorefh | OpLookup(_)
        | OpLookupp | OpDelegreturn(_) | OpReclaimComplete(_) | OpFreeStateid(_)
        | OpDestroySession(_) | OpDestroyClientid(_) | OpDelegpurge(_) => 4,
        // sessionid, sequenceid, slotid, highest slotid, target highest slotid, status flags.
        OpSequence(_) => 4 + 16 + 4 * 5,
        OpGetfh => 4 + opaque(NFS4_FHSIZE as usize),
        // eof and the data's length; the data is in the Write chunk.
        OpRead(_) => 4 + 4 + 4,
        // count, committed, verifier.
        OpWrite(_) => 4 + 4 + 4 + 8,
        OpCommit(_) => 4 + 8,
        // supported, access.
        OpAccess(_) => 4 + 4 + 4,
        OpClose(_) | OpOpenDowngrade(_) | OpLocku(_) => 4 + STATEID,
        // LOCK4denied: offset, length, type, and the owner (clientid and opaque<1024>).
        OpLock(_) | OpLockt(_) => 4 + 8 + 8 + 4 + 8 + NAME,
        OpRemove(_) | OpLink(_) => 4 + CHANGE_INFO,
        OpRename(_) => 4 + 2 * CHANGE_INFO,
        OpCreate(args) => 4 + CHANGE_INFO + bitmap(args.createattrs.attrmask.len()),
        OpSetattr(args) => 4 + bitmap(args.obj_attributes.attrmask.len()),
        OpOpen(args) => {
            let asked = match &args.openhow {
                Openflag4::Open4Create(
                    Createhow4::Unchecked4(attrs) | Createhow4::Guarded4(attrs),
                ) => attrs.attrmask.len(),
                Openflag4::Open4Create(Createhow4::Exclusive41(verf)) => {
                    verf.cva_attrs.attrmask.len()
                }
                _ => 0,
            };
            // The largest open_delegation4 is a write delegation: its type, stateid, recall
            // flag, space limit (a discriminant and 8 bytes) and ACE.
            let delegation = 4 + STATEID + 4 + (4 + 8) + ACE;
            4 + STATEID + CHANGE_INFO + 4 + bitmap(asked.max(ATTR_WORDS)) + delegation
        }
        OpGetattr(args) => 4 + fattr(&args.attr_request)?,
        _ => return None,
    })
}

/// A `bitmap4` of `words` words.
fn bitmap(words: usize) -> usize {
    4 + 4 * words
}

/// An `opaque<>` of `len` bytes.
fn opaque(len: usize) -> usize {
    4 + len.next_multiple_of(4)
}

/// The largest `fattr4` holding the attributes in `request`, or `None` when one of them has
/// no bound here (`supported_attrs`, `acl`, `fs_locations`, ...).
fn fattr(request: &Bitmap4) -> Option<usize> {
    let mut values = 0usize;
    for (i, &word) in request.iter().enumerate() {
        for bit in (0..32).filter(|bit| word & (1 << bit) != 0) {
            values = values.checked_add(attr_size(i as u32 * 32 + bit)?)?;
        }
    }
    // The server returns at most the attributes asked for (RFC 5661 section 18.7.3).
    Some(bitmap(request.len()) + 4 + values)
}

/// The encoded size of attribute `attr` (RFC 5661 section 5.8), when it has one.
fn attr_size(attr: u32) -> Option<usize> {
    Some(match attr {
        FATTR4_TYPE
        | FATTR4_FH_EXPIRE_TYPE
        | FATTR4_LINK_SUPPORT
        | FATTR4_SYMLINK_SUPPORT
        | FATTR4_NAMED_ATTR
        | FATTR4_UNIQUE_HANDLES
        | FATTR4_LEASE_TIME
        | FATTR4_RDATTR_ERROR
        | FATTR4_ACLSUPPORT
        | FATTR4_CANSETTIME
        | FATTR4_CASE_INSENSITIVE
        | FATTR4_CASE_PRESERVING
        | FATTR4_CHOWN_RESTRICTED
        | FATTR4_HOMOGENEOUS
        | FATTR4_MAXLINK
        | FATTR4_MAXNAME
        | FATTR4_MODE
        | FATTR4_NO_TRUNC
        | FATTR4_NUMLINKS
        | FATTR4_SYSTEM => 4,
        FATTR4_CHANGE
        | FATTR4_SIZE
        | FATTR4_FILEID
        | FATTR4_FILES_AVAIL
        | FATTR4_FILES_FREE
        | FATTR4_FILES_TOTAL
        | FATTR4_MAXFILESIZE
        | FATTR4_MAXREAD
        | FATTR4_MAXWRITE
        | FATTR4_RAWDEV
        | FATTR4_SPACE_AVAIL
        | FATTR4_SPACE_FREE
        | FATTR4_SPACE_TOTAL
        | FATTR4_SPACE_USED
        | FATTR4_MOUNTED_ON_FILEID => 8,
        FATTR4_TIME_ACCESS | FATTR4_TIME_BACKUP | FATTR4_TIME_CREATE | FATTR4_TIME_DELTA
        | FATTR4_TIME_METADATA | FATTR4_TIME_MODIFY => 12,
        FATTR4_FSID => 16,
        FATTR4_FILEHANDLE => opaque(NFS4_FHSIZE as usize),
        FATTR4_OWNER | FATTR4_OWNER_GROUP => NAME,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use rpcrdma::xdr::{Encode, Encoder};

    use super::*;
    use crate::client::attrs::basic_request;
    use crate::nfs4::*;

    fn args(ops: Vec<NfsArgop4>) -> Compound4args {
        Compound4args {
            tag: Bytes::from_static(b"tag!!"),
            minorversion: 1,
            argarray: ops,
        }
    }

    fn encoded_len(res: &Compound4res) -> usize {
        let mut enc = Encoder::new();
        res.encode(&mut enc).unwrap();
        enc.finish().len()
    }

    #[test]
    fn the_bound_holds_the_largest_results_of_a_read_compound() {
        let call = args(vec![
            NfsArgop4::OpSequence(Sequence4args::default()),
            NfsArgop4::OpPutfh(Putfh4args::default()),
            NfsArgop4::OpRead(Read4args::default()),
            NfsArgop4::OpGetattr(Getattr4args {
                attr_request: basic_request(),
            }),
        ]);
        let bound = inline_results(&call).expect("bounded");
        // The largest replies these operations can give, READ's data left out (empty).
        let values = vec![0u8; 4 + 8 + 8];
        let res = Compound4res {
            status: Nfsstat4::Nfs4Ok,
            tag: call.tag.clone(),
            resarray: vec![
                NfsResop4::OpSequence(Sequence4res::Nfs4Ok(Sequence4resok::default())),
                NfsResop4::OpPutfh(Putfh4res {
                    status: Nfsstat4::Nfs4Ok,
                }),
                NfsResop4::OpRead(Read4res::Nfs4Ok(Read4resok::default())),
                NfsResop4::OpGetattr(Getattr4res::Nfs4Ok(Getattr4resok {
                    obj_attributes: Fattr4 {
                        attrmask: basic_request(),
                        attr_vals: Bytes::from(values),
                    },
                })),
            ],
        };
        assert_eq!(encoded_len(&res), bound);
        // Far under the default inline threshold of 4 KiB: no Reply chunk.
        assert!(bound < 300, "{bound}");
    }

    #[test]
    fn an_open_with_a_delegation_fits_its_bound() {
        let open = Open4args {
            openhow: Openflag4::Open4Create(Createhow4::Unchecked4(Fattr4 {
                attrmask: bitmap_words(2),
                attr_vals: Default::default(),
            })),
            ..Default::default()
        };
        let call = args(vec![NfsArgop4::OpOpen(open)]);
        let bound = inline_results(&call).unwrap();
        let who = Bytes::from(vec![b'x'; NFS4_OPAQUE_LIMIT as usize]);
        let ok = Open4resok {
            attrset: vec![u32::MAX; ATTR_WORDS],
            delegation: OpenDelegation4::OpenDelegateWrite(OpenWriteDelegation4 {
                stateid: Stateid4::default(),
                recall: false,
                space_limit: NfsSpaceLimit4::NfsLimitSize(u64::MAX),
                permissions: Nfsace4 {
                    who,
                    ..Default::default()
                },
            }),
            ..Default::default()
        };
        let res = Compound4res {
            status: Nfsstat4::Nfs4Ok,
            tag: call.tag.clone(),
            resarray: vec![NfsResop4::OpOpen(Open4res::Nfs4Ok(ok))],
        };
        assert_eq!(encoded_len(&res), bound);
    }

    fn bitmap_words(n: usize) -> Bitmap4 {
        vec![0; n]
    }

    #[test]
    fn an_operation_without_a_bound_leaves_the_compound_unbounded() {
        let readdir = args(vec![
            NfsArgop4::OpPutrootfh,
            NfsArgop4::OpReaddir(Readdir4args::default()),
        ]);
        assert_eq!(inline_results(&readdir), None);
        let acl = args(vec![NfsArgop4::OpGetattr(Getattr4args {
            attr_request: crate::client::bitmap(&[FATTR4_ACL]),
        })]);
        assert_eq!(inline_results(&acl), None);
    }
}

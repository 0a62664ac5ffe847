//! Typed helpers: one COMPOUND each, after the session's SEQUENCE, returning what the caller
//! wants or [`ClientError::Status`] naming the operation that failed.
//!
//! READ's data and WRITE's data are DDP-eligible (RFC 8267 section 5.1): over RPC-over-RDMA
//! the generated codec moves them in a Write chunk and a Read chunk, without a copy.

use bytes::Bytes;
use rpcrdma::rpc::CallOptions;

use super::attrs::{self, BasicAttrs};
use super::config::COMPOUND_HEADROOM;
use super::error::ClientError;
use super::establish::unexpected;
use super::reply::into_result;
use super::session::Session;
use crate::nfs4::{
    Bitmap4, Close4args, Close4res, Commit4args, Commit4res, Compound4res, Createhow4,
    Delegreturn4args, Fattr4, Getattr4args, Getattr4res, Getfh4res, Lookup4args, NfsArgop4, NfsFh4,
    NfsOpnum4, NfsResop4, Open4args, Open4res, OpenClaim4, OpenDelegation4, Openflag4, Opentype4,
    Putfh4args, Read4args, Read4res, StableHow4, StateOwner4, Stateid4, Verifier4, Write4args,
    Write4res, OPEN4_SHARE_ACCESS_READ, OPEN4_SHARE_ACCESS_WANT_NO_DELEG,
    OPEN4_SHARE_ACCESS_WANT_NO_PREFERENCE, OPEN4_SHARE_ACCESS_WANT_READ_DELEG,
    OPEN4_SHARE_ACCESS_WANT_WRITE_DELEG, OPEN4_SHARE_ACCESS_WRITE, OPEN4_SHARE_DENY_NONE,
};

/// The delegation an OPEN asks for (the `OPEN4_SHARE_ACCESS_WANT_*` bits, RFC 5661 section
/// 18.16.3).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DelegationWant {
    /// No preference: the server decides.
    #[default]
    NoPreference,
    /// A read delegation.
    Read,
    /// A write delegation.
    Write,
    /// No delegation.
    NoDelegation,
}

/// How to open a file (OPEN with `CLAIM_NULL`, RFC 5661 section 18.16).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// Share access READ.
    pub read: bool,
    /// Share access WRITE.
    pub write: bool,
    /// Create the file if it does not exist (`UNCHECKED4`) with this mode.
    pub create: Option<u32>,
    /// The delegation wanted.
    pub want_delegation: DelegationWant,
}

impl OpenOptions {
    /// Open an existing file for reading.
    pub fn read() -> OpenOptions {
        OpenOptions {
            read: true,
            ..OpenOptions::default()
        }
    }

    /// Open an existing file for writing.
    pub fn write() -> OpenOptions {
        OpenOptions {
            write: true,
            ..OpenOptions::default()
        }
    }

    /// Open for reading and writing, creating the file with `mode` if it does not exist.
    pub fn create(mode: u32) -> OpenOptions {
        OpenOptions {
            read: true,
            write: true,
            create: Some(mode),
            ..OpenOptions::default()
        }
    }

    /// Asks for `want` delegation.
    pub fn want(mut self, want: DelegationWant) -> OpenOptions {
        self.want_delegation = want;
        self
    }

    /// `share_access` on the wire: the access bits and the delegation wanted.
    pub fn share_access(&self) -> u32 {
        let mut access = 0;
        if self.read {
            access |= OPEN4_SHARE_ACCESS_READ;
        }
        if self.write {
            access |= OPEN4_SHARE_ACCESS_WRITE;
        }
        access
            | match self.want_delegation {
                DelegationWant::NoPreference => OPEN4_SHARE_ACCESS_WANT_NO_PREFERENCE,
                DelegationWant::Read => OPEN4_SHARE_ACCESS_WANT_READ_DELEG,
                DelegationWant::Write => OPEN4_SHARE_ACCESS_WANT_WRITE_DELEG,
                DelegationWant::NoDelegation => OPEN4_SHARE_ACCESS_WANT_NO_DELEG,
            }
    }
}

/// The kind of a delegation granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DelegationKind {
    /// `OPEN_DELEGATE_READ`.
    Read,
    /// `OPEN_DELEGATE_WRITE`.
    Write,
}

/// A delegation an OPEN granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delegation {
    /// Read or write.
    pub kind: DelegationKind,
    /// Its stateid (for DELEGRETURN).
    pub stateid: Stateid4,
}

/// An open file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    /// The file's handle.
    pub fh: NfsFh4,
    /// The open stateid (for READ, WRITE, CLOSE).
    pub stateid: Stateid4,
    /// The delegation granted with it, if any.
    pub delegation: Option<Delegation>,
}

/// A file looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Looked {
    /// Its handle.
    pub fh: NfsFh4,
    /// Its type, size and file ID.
    pub attrs: BasicAttrs,
}

/// What a WRITE did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// Bytes written (at most those sent).
    pub count: u32,
    /// How stable they are.
    pub committed: StableHow4,
    /// The write verifier, to compare with COMMIT's.
    pub verifier: Verifier4,
}

/// The Reply chunk offered for the helpers' replies, all of a few hundred bytes besides
/// READ's data (which has its own Write chunk): a COMPOUND4res is unbounded, so over
/// RPC-over-RDMA every call offers a Reply chunk, by default of 1 MiB.
const SMALL_REPLY: usize = COMPOUND_HEADROOM as usize;

/// Call options for a COMPOUND whose reply is small.
pub(crate) fn small_reply() -> CallOptions {
    CallOptions::new().max_reply(SMALL_REPLY)
}

fn putfh(fh: &NfsFh4) -> NfsArgop4 {
    NfsArgop4::OpPutfh(Putfh4args { object: fh.clone() })
}

/// PUTFH + DELEGRETURN.
pub(crate) fn delegreturn_ops(fh: &NfsFh4, stateid: &Stateid4) -> Vec<NfsArgop4> {
    vec![
        putfh(fh),
        NfsArgop4::OpDelegreturn(Delegreturn4args {
            deleg_stateid: stateid.clone(),
        }),
    ]
}

/// The results of a COMPOUND every operation of which succeeded (the reply's shape checked:
/// one result per operation).
fn succeeded(res: Compound4res, ops: usize) -> Result<Vec<NfsResop4>, ClientError> {
    let res = into_result(res, NfsOpnum4::OpSequence)?;
    if res.resarray.len() != ops {
        return Err(ClientError::protocol(format!(
            "{} results for {ops} operations",
            res.resarray.len()
        )));
    }
    Ok(res.resarray)
}

fn getfh(result: &NfsResop4) -> Result<NfsFh4, ClientError> {
    match result {
        NfsResop4::OpGetfh(Getfh4res::Nfs4Ok(ok)) => Ok(ok.object.clone()),
        other => Err(unexpected("GETFH", Some(other))),
    }
}

fn getattr(result: &NfsResop4) -> Result<Fattr4, ClientError> {
    match result {
        NfsResop4::OpGetattr(Getattr4res::Nfs4Ok(ok)) => Ok(ok.obj_attributes.clone()),
        other => Err(unexpected("GETATTR", Some(other))),
    }
}

impl Session {
    /// The root's handle (PUTROOTFH + GETFH).
    pub async fn root_fh(&self) -> Result<NfsFh4, ClientError> {
        let ops = vec![NfsArgop4::OpPutrootfh, NfsArgop4::OpGetfh];
        let results = succeeded(self.shared.compound(ops, small_reply).await?, 2)?;
        getfh(&results[1])
    }

    /// Looks up the path `names` from `dir` (PUTFH + LOOKUP per name + GETFH + GETATTR of
    /// type, size and file ID).
    pub async fn lookup(&self, dir: &NfsFh4, names: &[&str]) -> Result<Looked, ClientError> {
        let mut ops = vec![putfh(dir)];
        ops.extend(names.iter().map(|name| {
            NfsArgop4::OpLookup(Lookup4args {
                objname: Bytes::copy_from_slice(name.as_bytes()),
            })
        }));
        ops.push(NfsArgop4::OpGetfh);
        ops.push(NfsArgop4::OpGetattr(Getattr4args {
            attr_request: attrs::basic_request(),
        }));
        let n = ops.len();
        let results = succeeded(self.shared.compound(ops, small_reply).await?, n)?;
        Ok(Looked {
            fh: getfh(&results[n - 2])?,
            attrs: attrs::decode_basic(&getattr(&results[n - 1])?)?,
        })
    }

    /// The attributes of `fh` in `request` (PUTFH + GETATTR), as the server encoded them.
    pub async fn getattr(&self, fh: &NfsFh4, request: Bitmap4) -> Result<Fattr4, ClientError> {
        let ops = vec![
            putfh(fh),
            NfsArgop4::OpGetattr(Getattr4args {
                attr_request: request,
            }),
        ];
        let results = succeeded(self.shared.compound(ops, CallOptions::new).await?, 2)?;
        getattr(&results[1])
    }

    /// Opens `name` in `dir` (PUTFH + OPEN with `CLAIM_NULL` as the session's open owner +
    /// GETFH).
    pub async fn open(
        &self,
        dir: &NfsFh4,
        name: &str,
        options: OpenOptions,
    ) -> Result<Opened, ClientError> {
        let openhow = match options.create {
            Some(mode) => Openflag4::Open4Create(Createhow4::Unchecked4(attrs::mode(mode))),
            None => Openflag4::Default {
                discriminant: Opentype4::Open4Nocreate,
            },
        };
        let open = Open4args {
            // RFC 5661 section 18.16.3: the seqid is ignored in minor version 1.
            seqid: 0,
            share_access: options.share_access(),
            share_deny: OPEN4_SHARE_DENY_NONE,
            owner: StateOwner4 {
                clientid: self.clientid(),
                owner: self.shared.open_owner.clone(),
            },
            openhow,
            claim: OpenClaim4::ClaimNull(Bytes::copy_from_slice(name.as_bytes())),
        };
        let ops = vec![putfh(dir), NfsArgop4::OpOpen(open), NfsArgop4::OpGetfh];
        let results = succeeded(self.shared.compound(ops, small_reply).await?, 3)?;
        let NfsResop4::OpOpen(Open4res::Nfs4Ok(ok)) = &results[1] else {
            return Err(unexpected("OPEN", Some(&results[1])));
        };
        let delegation = match &ok.delegation {
            OpenDelegation4::OpenDelegateRead(d) => Some(Delegation {
                kind: DelegationKind::Read,
                stateid: d.stateid.clone(),
            }),
            OpenDelegation4::OpenDelegateWrite(d) => Some(Delegation {
                kind: DelegationKind::Write,
                stateid: d.stateid.clone(),
            }),
            OpenDelegation4::OpenDelegateNone | OpenDelegation4::OpenDelegateNoneExt(_) => None,
        };
        Ok(Opened {
            fh: getfh(&results[2])?,
            stateid: ok.stateid.clone(),
            delegation,
        })
    }

    /// Reads `count` bytes at `offset` (PUTFH + READ): the data (at most `count` bytes) and
    /// whether it ends the file. Over RPC-over-RDMA the data comes in a Write chunk of `count`
    /// bytes.
    pub async fn read(
        &self,
        fh: &NfsFh4,
        stateid: &Stateid4,
        offset: u64,
        count: u32,
    ) -> Result<(Bytes, bool), ClientError> {
        let max = self.max_read();
        if count > max {
            return Err(ClientError::TooLarge {
                what: "READ",
                len: count.into(),
                max: max.into(),
            });
        }
        let ops = vec![
            putfh(fh),
            NfsArgop4::OpRead(Read4args {
                stateid: stateid.clone(),
                offset,
                count,
            }),
        ];
        let options = || small_reply().reply_size(count as usize);
        let results = succeeded(self.shared.compound(ops, options).await?, 2)?;
        let NfsResop4::OpRead(Read4res::Nfs4Ok(ok)) = &results[1] else {
            return Err(unexpected("READ", Some(&results[1])));
        };
        if ok.data.len() > count as usize {
            return Err(ClientError::protocol(format!(
                "READ of {count} bytes returned {}",
                ok.data.len()
            )));
        }
        Ok((ok.data.clone(), ok.eof))
    }

    /// Writes `data` at `offset` (PUTFH + WRITE). Over RPC-over-RDMA the data goes in a Read
    /// chunk.
    pub async fn write(
        &self,
        fh: &NfsFh4,
        stateid: &Stateid4,
        offset: u64,
        data: Bytes,
        stable: StableHow4,
    ) -> Result<Written, ClientError> {
        let len = data.len();
        let max = self.max_write();
        if len > max as usize {
            return Err(ClientError::TooLarge {
                what: "WRITE",
                len: len as u64,
                max: max.into(),
            });
        }
        let ops = vec![
            putfh(fh),
            NfsArgop4::OpWrite(Write4args {
                stateid: stateid.clone(),
                offset,
                stable,
                data,
            }),
        ];
        let results = succeeded(self.shared.compound(ops, small_reply).await?, 2)?;
        let NfsResop4::OpWrite(Write4res::Nfs4Ok(ok)) = &results[1] else {
            return Err(unexpected("WRITE", Some(&results[1])));
        };
        if ok.count as usize > len {
            return Err(ClientError::protocol(format!(
                "WRITE of {len} bytes says it wrote {}",
                ok.count
            )));
        }
        Ok(Written {
            count: ok.count,
            committed: ok.committed,
            verifier: ok.writeverf.clone(),
        })
    }

    /// Commits `count` bytes at `offset` (0 and 0: the whole file) to stable storage (PUTFH +
    /// COMMIT): the write verifier.
    pub async fn commit(
        &self,
        fh: &NfsFh4,
        offset: u64,
        count: u32,
    ) -> Result<Verifier4, ClientError> {
        let ops = vec![
            putfh(fh),
            NfsArgop4::OpCommit(Commit4args { offset, count }),
        ];
        let results = succeeded(self.shared.compound(ops, small_reply).await?, 2)?;
        match &results[1] {
            NfsResop4::OpCommit(Commit4res::Nfs4Ok(ok)) => Ok(ok.writeverf.clone()),
            other => Err(unexpected("COMMIT", Some(other))),
        }
    }

    /// Closes an open (PUTFH + CLOSE).
    pub async fn close(&self, fh: &NfsFh4, stateid: &Stateid4) -> Result<(), ClientError> {
        let close = Close4args {
            // RFC 5661 section 18.2.3: the seqid is ignored in minor version 1.
            seqid: 0,
            open_stateid: stateid.clone(),
        };
        let ops = vec![putfh(fh), NfsArgop4::OpClose(close)];
        let results = succeeded(self.shared.compound(ops, small_reply).await?, 2)?;
        match &results[1] {
            NfsResop4::OpClose(Close4res::Nfs4Ok(_)) => Ok(()),
            other => Err(unexpected("CLOSE", Some(other))),
        }
    }

    /// Returns a delegation (PUTFH + DELEGRETURN, RFC 5661 section 18.6).
    pub async fn delegreturn(&self, fh: &NfsFh4, stateid: &Stateid4) -> Result<(), ClientError> {
        let res = self
            .shared
            .compound(delegreturn_ops(fh, stateid), small_reply)
            .await?;
        succeeded(res, 2).map(drop)
    }
}

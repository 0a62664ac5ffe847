//! One COMPOUND (RFC 5661 section 16.2.3): the operations in order, each on the current and
//! saved filehandles the earlier ones left, stopping at the first that fails; SEQUENCE first,
//! with the slot's reply cache deciding whether the rest runs at all (section 2.10.6).

use std::time::Instant;

use rpcrdma::rpc::CallContext;
use rpcrdma_nfs3::memfs::access::Caller;
use rpcrdma_nfs3::memfs::attr as attr3;
use rpcrdma_nfs3::nfs3::Nfstime3;

use crate::nfs4::*;

use super::delegations::{self, Recall};
use super::state::{ClientId, SessionId};
use super::{files, locks, open, results, session, Inner, Shared, MAX_MESSAGE};

/// Everything an operation of the COMPOUND may read or change.
pub struct Compound<'a> {
    pub shared: &'a Shared,
    pub inner: &'a mut Inner,
    pub ctx: &'a CallContext,
    pub caller: Caller,
    pub now: Nfstime3,
    /// The current filehandle, as a fileid (section 16.2.3.1.1).
    pub current: Option<u64>,
    /// The saved filehandle.
    pub saved: Option<u64>,
    /// The current stateid (section 16.2.3.1.2).
    pub current_stateid: Option<Stateid4>,
    /// The stateid SAVEFH saved with the filehandle.
    pub saved_stateid: Option<Stateid4>,
    /// The session and client SEQUENCE named.
    pub session: Option<(SessionId, ClientId)>,
    /// Delegations to recall once the COMPOUND is done and the lock released.
    pub recalls: Vec<Recall>,
}

impl Compound<'_> {
    /// The current filehandle's fileid, or NFS4ERR_NOFILEHANDLE.
    pub fn current(&self) -> Result<u64, Nfsstat4> {
        self.current.ok_or(Nfsstat4::Nfs4errNofilehandle)
    }

    /// The saved filehandle's fileid, or NFS4ERR_NOFILEHANDLE.
    pub fn saved(&self) -> Result<u64, Nfsstat4> {
        self.saved.ok_or(Nfsstat4::Nfs4errNofilehandle)
    }

    /// The client of the COMPOUND's session.
    pub fn client(&self) -> Result<ClientId, Nfsstat4> {
        self.session
            .map(|(_, c)| c)
            .ok_or(Nfsstat4::Nfs4errOpNotInSession)
    }
}

/// Operations that may come without a SEQUENCE before them, alone in their COMPOUND (RFC 5661
/// section 2.6.3.1.1.1 and the operations' sections: EXCHANGE_ID 18.35.3, CREATE_SESSION
/// 18.36.3, BIND_CONN_TO_SESSION 18.34.3, DESTROY_SESSION 18.37.3, DESTROY_CLIENTID 18.50.3).
fn sessionless(op: NfsOpnum4) -> bool {
    matches!(
        op,
        NfsOpnum4::OpExchangeId
            | NfsOpnum4::OpCreateSession
            | NfsOpnum4::OpBindConnToSession
            | NfsOpnum4::OpDestroySession
            | NfsOpnum4::OpDestroyClientid
    )
}

/// Runs a COMPOUND with the lock held; returns the reply and the recalls to start.
pub fn run(
    shared: &Shared,
    inner: &mut Inner,
    ctx: &CallContext,
    args: Compound4args,
) -> (Compound4res, Vec<Recall>) {
    let tag = args.tag.clone();
    let reply = |status, resarray| Compound4res {
        status,
        tag: tag.clone(),
        resarray,
    };
    // Section 16.2.3: a minor version the server does not do gets
    // NFS4ERR_MINOR_VERS_MISMATCH and no results.
    if args.minorversion != 1 {
        return (reply(Nfsstat4::Nfs4errMinorVersMismatch, vec![]), vec![]);
    }
    let caller = match ctx.auth().sys() {
        Some(sys) => Caller {
            uid: sys.uid,
            gid: sys.gid,
            gids: sys.gids.clone(),
        },
        None => Caller::nobody(),
    };
    let mut c = Compound {
        shared,
        inner,
        ctx,
        caller,
        now: attr3::now(),
        current: None,
        saved: None,
        current_stateid: None,
        saved_stateid: None,
        session: None,
        recalls: Vec::new(),
    };
    let ops = args.argarray;
    let Some(first) = ops.first() else {
        return (reply(Nfsstat4::Nfs4Ok, vec![]), vec![]);
    };

    let mut resarray = Vec::with_capacity(ops.len());
    let mut slot = None;
    match first {
        NfsArgop4::OpSequence(seq) => {
            match session::sequence(&mut c, seq, ops.len(), reply_header_len(&tag)) {
                session::Sequenced::New { res, slot: s } => {
                    resarray.push(NfsResop4::OpSequence(res));
                    slot = Some((s, seq.sa_cachethis));
                }
                session::Sequenced::Replay(cached) => {
                    let mut cached = cached;
                    cached.tag = tag.clone();
                    return (cached, vec![]);
                }
                session::Sequenced::Failed(status) => {
                    let res = results::failed(NfsOpnum4::OpSequence, status);
                    return (reply(status, vec![res]), vec![]);
                }
            }
        }
        // Section 18.52.3: ILLEGAL is answered as such wherever it is.
        NfsArgop4::OpIllegal => {
            let status = Nfsstat4::Nfs4errOpIllegal;
            let res = results::failed(NfsOpnum4::OpIllegal, status);
            return (reply(status, vec![res]), vec![]);
        }
        op if sessionless(op.discriminant()) => {
            if ops.len() > 1 {
                // Section 18.35.3 and the others: without a SEQUENCE, the only operation.
                let res = results::failed(op.discriminant(), Nfsstat4::Nfs4errNotOnlyOp);
                return (reply(Nfsstat4::Nfs4errNotOnlyOp, vec![res]), vec![]);
            }
        }
        op => {
            let status = Nfsstat4::Nfs4errOpNotInSession;
            let res = results::failed(op.discriminant(), status);
            return (reply(status, vec![res]), vec![]);
        }
    }

    let limits = slot.and(c.session).map(|(sid, _)| {
        let fore = &c.inner.state.sessions[&sid].fore;
        (
            fore.ca_maxrequestsize,
            fore.ca_maxresponsesize,
            fore.ca_maxresponsesize_cached,
        )
    });
    if let Some((max_request, _, _)) = limits {
        // Section 2.10.6.4 (18.46.3): a request larger than the session's
        // ca_maxrequestsize is refused by SEQUENCE. Measured only for sessions that asked for
        // less than the transports already bound a message to.
        let request = size_of(&ops).map_or(usize::MAX, |n| n + tag.len() + 12);
        if max_request < MAX_MESSAGE && request > max_request as usize {
            let status = Nfsstat4::Nfs4errReqTooBig;
            let res = results::failed(NfsOpnum4::OpSequence, status);
            return (reply(status, vec![res]), vec![]);
        }
    }
    let cache = slot.is_some_and(|(_, cache)| cache);
    let reply_limit = limits.map(|(_, max_reply, max_cached)| {
        // Section 2.10.6.1.3: a reply to be cached must fit ca_maxresponsesize_cached.
        if cache && max_cached < max_reply {
            (max_cached as usize, Nfsstat4::Nfs4errRepTooBigToCache)
        } else {
            (max_reply as usize, Nfsstat4::Nfs4errRepTooBig)
        }
    });
    let mut reply_len = reply_header_len(&tag) + session::SEQUENCE_REPLY_LEN;
    let skip = usize::from(slot.is_some());
    let mut status = Nfsstat4::Nfs4Ok;
    for op in ops.into_iter().skip(skip) {
        let opnum = op.discriminant();
        let res = if opnum == NfsOpnum4::OpSequence {
            // Section 18.46.3: SEQUENCE anywhere but first.
            results::failed(opnum, Nfsstat4::Nfs4errSequencePos)
        } else {
            match dispatch(&mut c, op) {
                Ok(res) => res,
                Err(status) => results::failed(opnum, status),
            }
        };
        if let Some((limit, too_big)) = reply_limit {
            let Some(len) = size_of(std::slice::from_ref(&res)) else {
                // A result that does not encode is the server's fault, whatever it was.
                status = Nfsstat4::Nfs4errServerfault;
                resarray.push(results::failed(opnum, status));
                break;
            };
            reply_len += len;
            if reply_len > limit {
                // The operation whose result passes the limit fails with it (section
                // 15.1.11.4); what it did stays done, as section 18.46.3 allows.
                resarray.push(results::failed(opnum, too_big));
                status = too_big;
                break;
            }
        }
        status = results::status(&res);
        resarray.push(res);
        if status != Nfsstat4::Nfs4Ok {
            break;
        }
    }
    for fileid in std::mem::take(&mut c.inner.state.released) {
        c.inner.tree.unpin(fileid);
    }
    let recalls = std::mem::take(&mut c.recalls);
    let compound = reply(status, resarray);
    if let (Some((slot, cache)), Some((sid, _))) = (slot, c.session) {
        session::keep_reply(&mut c, &sid, slot, cache, &compound);
    }
    if shared.config.log_calls {
        log(ctx, &compound);
    }
    (compound, recalls)
}

/// Bytes of a COMPOUND reply before its results: status, tag and the results' count.
fn reply_header_len(tag: &[u8]) -> usize {
    4 + 4 + tag.len().div_ceil(4) * 4 + 4
}

/// Bytes of the XDR encoding of `values` (without an array's count). Bulk data is gathered,
/// not copied, so measuring a WRITE costs no copy of its data.
fn size_of<T: rpcrdma::xdr::Encode>(values: &[T]) -> Option<usize> {
    let mut enc = rpcrdma::xdr::Encoder::new();
    for v in values {
        v.encode(&mut enc).ok()?;
    }
    Some(enc.len())
}

fn log(ctx: &CallContext, reply: &Compound4res) {
    let peer = ctx
        .peer()
        .map_or_else(|| "local".to_string(), |p| p.to_string());
    let ops: Vec<String> = reply
        .resarray
        .iter()
        .map(|r| format!("{:?} {:?}", r.discriminant(), results::status(r)))
        .collect();
    eprintln!(
        "{peer} xid {:#010x} COMPOUND {:?} [{}]",
        ctx.xid(),
        reply.status,
        ops.join(", ")
    );
}

/// One operation after SEQUENCE (or alone without it).
fn dispatch(c: &mut Compound<'_>, op: NfsArgop4) -> Result<NfsResop4, Nfsstat4> {
    use NfsArgop4 as A;
    let ok = |opnum| Ok(results::ok(opnum).expect("a status-only result"));
    match op {
        // Sessions and clients (section 18.33 - 18.37, 18.50, 18.51).
        A::OpExchangeId(a) => session::exchange_id(c, a),
        A::OpCreateSession(a) => session::create_session(c, a),
        A::OpDestroySession(a) => session::destroy_session(c, a),
        A::OpDestroyClientid(a) => session::destroy_clientid(c, a),
        A::OpBindConnToSession(a) => session::bind_conn_to_session(c, a),
        A::OpBackchannelCtl(a) => session::backchannel_ctl(c, a),
        A::OpReclaimComplete(a) => session::reclaim_complete(c, a),
        A::OpSequence(_) => Err(Nfsstat4::Nfs4errSequencePos),

        // Filehandles (sections 18.8, 18.19 - 18.21, 18.27, 18.28).
        // Section 16.2.3.1.2: an operation that sets the current filehandle without a stateid
        // leaves no current stateid; SAVEFH and RESTOREFH carry it along.
        A::OpPutrootfh => {
            c.current = Some(rpcrdma_nfs3::memfs::tree::ROOT);
            c.current_stateid = None;
            ok(NfsOpnum4::OpPutrootfh)
        }
        A::OpPutpubfh => {
            c.current = Some(rpcrdma_nfs3::memfs::tree::ROOT);
            c.current_stateid = None;
            ok(NfsOpnum4::OpPutpubfh)
        }
        A::OpPutfh(a) => {
            c.current = Some(files::resolve(c, &a.object)?);
            c.current_stateid = None;
            ok(NfsOpnum4::OpPutfh)
        }
        A::OpGetfh => files::getfh(c),
        A::OpSavefh => {
            c.saved = Some(c.current()?);
            c.saved_stateid = c.current_stateid.clone();
            ok(NfsOpnum4::OpSavefh)
        }
        A::OpRestorefh => {
            c.current = Some(c.saved.ok_or(Nfsstat4::Nfs4errRestorefh)?);
            c.current_stateid = c.saved_stateid.clone();
            ok(NfsOpnum4::OpRestorefh)
        }

        // Files and directories.
        A::OpLookup(a) => {
            c.current_stateid = None;
            files::lookup(c, a)
        }
        A::OpLookupp => {
            c.current_stateid = None;
            files::lookupp(c)
        }
        A::OpGetattr(a) => files::getattr(c, a),
        A::OpSetattr(a) => files::setattr(c, a),
        A::OpVerify(a) => files::verify(c, a.obj_attributes, true),
        A::OpNverify(a) => files::verify(c, a.obj_attributes, false),
        A::OpAccess(a) => files::access(c, a),
        A::OpCreate(a) => {
            c.current_stateid = None;
            files::create(c, a)
        }
        A::OpRemove(a) => files::remove(c, a),
        A::OpRename(a) => files::rename(c, a),
        A::OpLink(a) => files::link(c, a),
        A::OpReadlink => files::readlink(c),
        A::OpReaddir(a) => files::readdir(c, a),
        A::OpRead(a) => files::read(c, a),
        A::OpWrite(a) => files::write(c, a),
        A::OpCommit(a) => files::commit(c, a),
        A::OpSecinfo(a) => files::secinfo(c, Some(a.name)),
        A::OpSecinfoNoName(style) => files::secinfo_no_name(c, style),

        // Opens and delegations (sections 18.2, 18.6, 18.16, 18.18, 18.38, 18.48).
        A::OpOpen(a) => open::open(c, a),
        A::OpClose(a) => open::close(c, a),
        A::OpOpenDowngrade(a) => open::open_downgrade(c, a),
        A::OpDelegreturn(a) => delegations::delegreturn(c, a),
        A::OpTestStateid(a) => open::test_stateid(c, a),
        A::OpFreeStateid(a) => open::free_stateid(c, a),

        // Not offered: named attributes, pNFS, directory delegations,
        // WANT_DELEGATION, SSV, CLAIM_DELEGATE_PREV's DELEGPURGE.
        // Byte-range locks (sections 18.10 - 18.12).
        A::OpLock(a) => locks::lock(c, a),
        A::OpLockt(a) => locks::lockt(c, a),
        A::OpLocku(a) => locks::locku(c, a),
        A::OpOpenattr(_) => Err(Nfsstat4::Nfs4errNotsupp),
        A::OpGetDirDelegation(_)
        | A::OpGetdeviceinfo(_)
        | A::OpGetdevicelist(_)
        | A::OpLayoutcommit(_)
        | A::OpLayoutget(_)
        | A::OpLayoutreturn(_)
        | A::OpWantDelegation(_)
        | A::OpSetSsv(_)
        | A::OpDelegpurge(_) => Err(Nfsstat4::Nfs4errNotsupp),

        // Section 17: NFSv4.0's operations that NFSv4.1 servers MUST NOT implement.
        A::OpOpenConfirm(_)
        | A::OpRenew(_)
        | A::OpSetclientid(_)
        | A::OpSetclientidConfirm(_)
        | A::OpReleaseLockowner(_) => Err(Nfsstat4::Nfs4errNotsupp),

        // Section 18.52.
        A::OpIllegal => Err(Nfsstat4::Nfs4errOpIllegal),
    }
}

/// Renews the lease of the COMPOUND's client (section 8.3: any SEQUENCE renews it).
pub fn renew(c: &mut Compound<'_>, client: ClientId) {
    if let Some(record) = c.inner.state.clients.get_mut(&client) {
        record.renewed = Instant::now();
    }
}

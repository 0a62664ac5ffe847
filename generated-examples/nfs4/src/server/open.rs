//! Opens and share reservations (RFC 5661 section 9): OPEN, CLOSE, OPEN_DOWNGRADE,
//! TEST_STATEID, FREE_STATEID and the stateid checks of READ, WRITE and SETATTR (section 8.2).
//! The delegations an OPEN grants and a conflicting change recalls are in `delegations`.

use bytes::Bytes;
use rpcrdma_nfs3::memfs::access;
use rpcrdma_nfs3::memfs::tree::Kind;

use crate::nfs4::*;

use super::attrs::{self, AttrSet, SetAttrs};
use super::compound::Compound;
use super::delegations::{
    break_delegations, break_write_delegations, delegate, delegation_of, expire_courtesy_clients,
};
use super::fh::{check_name, status};
use super::files;
use super::state::{ClientId, Other, StateEntry, StateKind};

pub(super) fn other_of(stateid: &Stateid4) -> Result<Other, Nfsstat4> {
    stateid
        .other
        .as_ref()
        .try_into()
        .map_err(|_| Nfsstat4::Nfs4errBadStateid)
}

/// What a stateid in an argument names (section 8.2.3's special stateids first).
pub(super) enum Named {
    /// All zeros: no state (READ, WRITE, SETATTR as anonymous).
    Anonymous,
    /// All ones: READ bypassing share reservations.
    Bypass,
    /// A stateid the server handed out.
    State(Other),
}

/// Resolves the special stateids: the current stateid (seqid 1, other zeros) becomes the
/// COMPOUND's (section 16.2.3.1.2).
pub(super) fn name_stateid(c: &Compound<'_>, stateid: &Stateid4) -> Result<(Named, u32), Nfsstat4> {
    let other = other_of(stateid)?;
    if other == [0; 12] {
        return match stateid.seqid {
            0 => Ok((Named::Anonymous, 0)),
            1 => {
                let current = c
                    .current_stateid
                    .as_ref()
                    .ok_or(Nfsstat4::Nfs4errBadStateid)?;
                Ok((Named::State(other_of(current)?), current.seqid))
            }
            _ => Err(Nfsstat4::Nfs4errBadStateid),
        };
    }
    if other == [0xff; 12] {
        return if stateid.seqid == u32::MAX {
            Ok((Named::Bypass, 0))
        } else {
            Err(Nfsstat4::Nfs4errBadStateid)
        };
    }
    Ok((Named::State(other), stateid.seqid))
}

/// The state a stateid names, checked: the client's own (section 8.2.4), of `fileid`, and not
/// older than the current seqid (0 means the current one, section 8.2.2).
pub(super) fn entry<'a>(
    c: &'a Compound<'_>,
    other: &Other,
    seqid: u32,
    fileid: Option<u64>,
) -> Result<&'a StateEntry, Nfsstat4> {
    let e = c
        .inner
        .state
        .stateids
        .get(other)
        .ok_or(Nfsstat4::Nfs4errBadStateid)?;
    if c.session.is_some_and(|(_, client)| client != e.client) {
        return Err(Nfsstat4::Nfs4errBadStateid);
    }
    if fileid.is_some_and(|f| f != e.fileid) {
        return Err(Nfsstat4::Nfs4errBadStateid);
    }
    if e.kind == StateKind::RevokedDelegation {
        return Err(Nfsstat4::Nfs4errDelegRevoked);
    }
    if seqid != 0 && seqid < e.seqid {
        return Err(Nfsstat4::Nfs4errOldStateid);
    }
    if seqid > e.seqid {
        return Err(Nfsstat4::Nfs4errBadStateid);
    }
    Ok(e)
}

/// Checks the stateid of a READ (`want` = READ), WRITE or size-changing SETATTR (`want` =
/// WRITE) on `fileid`: an open or delegation of this client on this file that allows it, or a
/// special stateid; another client's share reservation denying it is NFS4ERR_LOCKED (section
/// 9.7 for I/O under a deny), and a write under another client's delegation recalls it.
pub fn check_stateid(
    c: &mut Compound<'_>,
    stateid: &Stateid4,
    fileid: u64,
    want: u32,
) -> Result<(), Nfsstat4> {
    let (named, seqid) = name_stateid(c, stateid)?;
    match named {
        // Section 8.2.3: the bypass stateid skips share and lock checks, not what another
        // client may have written under a write delegation.
        Named::Bypass if want == OPEN4_SHARE_ACCESS_READ => break_write_delegations(c, fileid),
        Named::Bypass => Err(Nfsstat4::Nfs4errBadStateid),
        Named::Anonymous => {
            let denied =
                c.inner.state.stateids.on_file(fileid).any(
                    |(_, e)| matches!(e.kind, StateKind::Open { deny, .. } if deny & want != 0),
                );
            if denied {
                return Err(Nfsstat4::Nfs4errLocked);
            }
            recall_for(c, fileid, want)
        }
        Named::State(other) => {
            let e = entry(c, &other, seqid, Some(fileid))?;
            match &e.kind {
                StateKind::Open { access, .. } => {
                    if want == OPEN4_SHARE_ACCESS_WRITE && access & OPEN4_SHARE_ACCESS_WRITE == 0 {
                        return Err(Nfsstat4::Nfs4errOpenmode);
                    }
                }
                StateKind::Delegation { write, .. } => {
                    if want == OPEN4_SHARE_ACCESS_WRITE && !write {
                        return Err(Nfsstat4::Nfs4errOpenmode);
                    }
                }
                // entry() refused it already.
                StateKind::RevokedDelegation => return Err(Nfsstat4::Nfs4errDelegRevoked),
                // A lock stateid reads and writes as the open it was taken under.
                StateKind::Lock { open, .. } => {
                    let access = match c.inner.state.stateids.get(open).map(|e| &e.kind) {
                        Some(StateKind::Open { access, .. }) => *access,
                        _ => return Err(Nfsstat4::Nfs4errBadStateid),
                    };
                    if want == OPEN4_SHARE_ACCESS_WRITE && access & OPEN4_SHARE_ACCESS_WRITE == 0 {
                        return Err(Nfsstat4::Nfs4errOpenmode);
                    }
                }
            }
            recall_for(c, fileid, want)
        }
    }
}

/// Recalls other clients' delegations in the way of access `want` (READ or WRITE) to
/// `fileid`: all of them for a write, write delegations for a read.
fn recall_for(c: &mut Compound<'_>, fileid: u64, want: u32) -> Result<(), Nfsstat4> {
    if want & OPEN4_SHARE_ACCESS_WRITE != 0 {
        break_delegations(c, fileid)
    } else {
        break_write_delegations(c, fileid)
    }
}

/// What the OPEN opens: an existing file or one it makes, and the directory's change info.
struct Target {
    fileid: u64,
    created: bool,
    attrset: AttrSet,
    cinfo: ChangeInfo4,
}

fn dir_change(c: &Compound<'_>, dir: u64) -> Result<u64, Nfsstat4> {
    let n = c.inner.tree.get(dir).map_err(status)?;
    Ok(u64::from(n.meta.ctime.seconds) * 1_000_000_000 + u64::from(n.meta.ctime.nseconds))
}

/// OPEN by name in the current directory (CLAIM_NULL), creating the file when asked (section
/// 18.16.3's create modes).
fn open_by_name(c: &mut Compound<'_>, name: &[u8], how: &Openflag4) -> Result<Target, Nfsstat4> {
    let dir = c.current()?;
    match &c.inner.tree.get(dir).map_err(status)?.kind {
        Kind::Dir(_) => {}
        Kind::Symlink(_) => return Err(Nfsstat4::Nfs4errSymlink),
        _ => return Err(Nfsstat4::Nfs4errNotdir),
    }
    check_name(name)?;
    let before = dir_change(c, dir)?;
    let existing = c.inner.tree.lookup(dir, name).ok();
    let cinfo = |c: &Compound<'_>| -> Result<ChangeInfo4, Nfsstat4> {
        Ok(ChangeInfo4 {
            atomic: true,
            before,
            after: dir_change(c, dir)?,
        })
    };
    let Openflag4::Open4Create(how) = how else {
        let fileid = existing.ok_or(Nfsstat4::Nfs4errNoent)?;
        return Ok(Target {
            fileid,
            created: false,
            attrset: AttrSet::default(),
            cinfo: cinfo(c)?,
        });
    };
    let (attrs, verifier, guarded) = match how {
        Createhow4::Unchecked4(a) => (Some(a), None, false),
        Createhow4::Guarded4(a) => (Some(a), None, true),
        Createhow4::Exclusive4(v) => (None, Some(v.0.clone()), true),
        Createhow4::Exclusive41(cva) => (Some(&cva.cva_attrs), Some(cva.cva_verf.0.clone()), true),
    };
    let (set, which) = match attrs {
        Some(a) => attrs::decode_settable(a)?,
        None => (SetAttrs::default(), AttrSet::default()),
    };
    if matches!(how, Createhow4::Exclusive41(_)) && !which.is_subset(&attrs::exclcreat()) {
        // Section 18.16.3: EXCLUSIVE4_1 sets only what suppattr_exclcreat lists.
        return Err(Nfsstat4::Nfs4errInval);
    }
    if let Some(fileid) = existing {
        if let Some(verifier) = &verifier {
            // Section 18.16.3: an exclusive create that finds the file its own earlier create
            // made (same verifier) succeeds; anything else exists.
            return match &c.inner.tree.get(fileid).map_err(status)?.kind {
                Kind::File {
                    create_verf: Some(v),
                    ..
                } if v == verifier => Ok(Target {
                    fileid,
                    created: false,
                    attrset: AttrSet::default(),
                    cinfo: cinfo(c)?,
                }),
                _ => Err(Nfsstat4::Nfs4errExist),
            };
        }
        if guarded {
            return Err(Nfsstat4::Nfs4errExist);
        }
        // UNCHECKED4 on an existing file: only a size of zero applies (section 18.16.3).
        let mut applied = AttrSet::default();
        let is_file = matches!(
            c.inner.tree.get(fileid).map_err(status)?.kind,
            Kind::File { .. }
        );
        if set.size == Some(0) && is_file {
            let node = c.inner.tree.get(fileid).map_err(status)?;
            if access::allowed(node, &c.caller, ACCESS4_MODIFY) == 0 {
                return Err(Nfsstat4::Nfs4errAccess);
            }
            break_delegations(c, fileid)?;
            let truncate = SetAttrs {
                size: Some(0),
                ..SetAttrs::default()
            };
            files::apply(c, fileid, &truncate)?;
            applied.insert(FATTR4_SIZE);
        }
        return Ok(Target {
            fileid,
            created: false,
            attrset: applied,
            cinfo: cinfo(c)?,
        });
    }
    let want = ACCESS4_MODIFY | ACCESS4_LOOKUP;
    if access::allowed(c.inner.tree.get(dir).map_err(status)?, &c.caller, want) != want {
        return Err(Nfsstat4::Nfs4errAccess);
    }
    let kind = Kind::File {
        data: rpcrdma_nfs3::memfs::tree::FileData::new(),
        create_verf: verifier,
    };
    let fileid = files::make(c, dir, name, kind, &set, 0o644)?;
    Ok(Target {
        fileid,
        created: true,
        attrset: which,
        cinfo: cinfo(c)?,
    })
}

/// OPEN (section 18.16).
pub fn open(c: &mut Compound<'_>, a: Open4args) -> Result<NfsResop4, Nfsstat4> {
    let client = c.client()?;
    let reclaim = matches!(
        a.claim,
        OpenClaim4::ClaimPrevious(_)
            | OpenClaim4::ClaimDelegatePrev(_)
            | OpenClaim4::ClaimDelegPrevFh
    );
    let reclaimed = c
        .inner
        .state
        .clients
        .get(&client)
        .is_some_and(|r| r.reclaim_complete);
    if !reclaim && !reclaimed {
        // Section 18.51.3: a client sends RECLAIM_COMPLETE before its first OPEN that is not
        // a reclaim; until then the server treats it as in its grace period (as Linux's).
        return Err(Nfsstat4::Nfs4errGrace);
    }
    let access_bits = a.share_access & OPEN4_SHARE_ACCESS_BOTH;
    let want = a.share_access & OPEN4_SHARE_ACCESS_WANT_DELEG_MASK;
    if access_bits == 0 || a.share_deny > OPEN4_SHARE_DENY_BOTH {
        return Err(Nfsstat4::Nfs4errInval);
    }
    let creating = matches!(a.openhow, Openflag4::Open4Create(_));
    let target = match &a.claim {
        OpenClaim4::ClaimNull(name) => open_by_name(c, name, &a.openhow)?,
        OpenClaim4::ClaimFh | OpenClaim4::ClaimDelegCurFh(_) if creating => {
            return Err(Nfsstat4::Nfs4errInval)
        }
        OpenClaim4::ClaimFh => Target {
            fileid: c.current()?,
            created: false,
            attrset: AttrSet::default(),
            cinfo: ChangeInfo4::default(),
        },
        OpenClaim4::ClaimDelegCurFh(deleg) => {
            let fileid = c.current()?;
            delegation_of(c, deleg, fileid)?;
            Target {
                fileid,
                created: false,
                attrset: AttrSet::default(),
                cinfo: ChangeInfo4::default(),
            }
        }
        OpenClaim4::ClaimDelegateCur(cur) => {
            let dir = c.current()?;
            check_name(&cur.file)?;
            let fileid = c.inner.tree.lookup(dir, &cur.file).map_err(status)?;
            delegation_of(c, &cur.delegate_stateid, fileid)?;
            Target {
                fileid,
                created: false,
                attrset: AttrSet::default(),
                cinfo: ChangeInfo4::default(),
            }
        }
        // Reclaims after a restart: this server keeps no state across one and is never in a
        // grace period (section 8.4.2.1).
        OpenClaim4::ClaimPrevious(_)
        | OpenClaim4::ClaimDelegatePrev(_)
        | OpenClaim4::ClaimDelegPrevFh => return Err(Nfsstat4::Nfs4errNoGrace),
    };
    let fileid = target.fileid;
    match &c.inner.tree.get(fileid).map_err(status)?.kind {
        Kind::File { .. } => {}
        Kind::Dir(_) => return Err(Nfsstat4::Nfs4errIsdir),
        Kind::Symlink(_) => return Err(Nfsstat4::Nfs4errSymlink),
        Kind::Special(_) => return Err(Nfsstat4::Nfs4errInval),
    }
    if !target.created {
        let node = c.inner.tree.get(fileid).map_err(status)?;
        let mut need = 0;
        if access_bits & OPEN4_SHARE_ACCESS_READ != 0 {
            need |= ACCESS4_READ;
        }
        if access_bits & OPEN4_SHARE_ACCESS_WRITE != 0 {
            need |= ACCESS4_MODIFY;
        }
        if access::allowed(node, &c.caller, need) != need {
            return Err(Nfsstat4::Nfs4errAccess);
        }
    }
    let owner = (client, a.owner.owner.clone());
    // Share reservations (section 9.7): another owner's deny against our access, or our deny
    // against another's access.
    let conflicts = |c: &Compound<'_>| -> Vec<ClientId> {
        c.inner
            .state
            .stateids
            .on_file(fileid)
            .filter(|(_, e)| {
                matches!(&e.kind, StateKind::Open { owner: o, access, deny }
                    if *o != owner && (deny & access_bits != 0 || a.share_deny & access != 0))
            })
            .map(|(_, e)| e.client)
            .collect()
    };
    if !conflicts(c).is_empty() {
        expire_courtesy_clients(c, conflicts(c));
        if !conflicts(c).is_empty() {
            return Err(Nfsstat4::Nfs4errShareDenied);
        }
    }
    recall_for(c, fileid, access_bits)?;
    let max_stateids = c.shared.config.max_stateids_per_client;
    let state = &mut c.inner.state;
    let other = match open_of_owner(state, &owner, fileid) {
        Some(other) => {
            let e = state.stateids.get_mut(&other).expect("found");
            if let StateKind::Open { access, deny, .. } = &mut e.kind {
                *access |= access_bits;
                *deny |= a.share_deny;
            }
            e.seqid = e.seqid.wrapping_add(1);
            other
        }
        None => {
            if state.stateids_of(client) >= max_stateids {
                return Err(Nfsstat4::Nfs4errServerfault);
            }
            // The file outlives its last name while open (RFC 5661 section 18.25.4 leaves
            // removing an open file to the server: this one keeps it, as Unix does).
            c.inner.tree.pin(fileid);
            let state = &mut c.inner.state;
            let other = state.new_other();
            state.stateids.insert(
                other,
                StateEntry {
                    client,
                    fileid,
                    seqid: 1,
                    kind: StateKind::Open {
                        owner,
                        access: access_bits,
                        deny: a.share_deny,
                    },
                },
            );
            other
        }
    };
    let stateid = c.inner.state.stateids[&other].stateid(&other);
    let delegation = delegate(c, client, fileid, access_bits, want);
    c.current = Some(fileid);
    c.current_stateid = Some(stateid.clone());
    Ok(NfsResop4::OpOpen(Open4res::Nfs4Ok(Open4resok {
        stateid,
        cinfo: target.cinfo,
        rflags: OPEN4_RESULT_LOCKTYPE_POSIX,
        attrset: target.attrset.to_bitmap(),
        delegation,
    })))
}

fn open_of_owner(
    state: &super::state::State,
    owner: &(ClientId, Bytes),
    fileid: u64,
) -> Option<Other> {
    state.stateids.on_file(fileid).find_map(|(o, e)| {
        matches!(&e.kind, StateKind::Open { owner: w, .. } if w == owner).then_some(*o)
    })
}

/// An open stateid of this client on the current file, checked.
fn open_stateid(c: &Compound<'_>, stateid: &Stateid4) -> Result<Other, Nfsstat4> {
    let fileid = c.current()?;
    let (named, seqid) = name_stateid(c, stateid)?;
    let Named::State(other) = named else {
        return Err(Nfsstat4::Nfs4errBadStateid);
    };
    let e = entry(c, &other, seqid, Some(fileid))?;
    match e.kind {
        StateKind::Open { .. } => Ok(other),
        _ => Err(Nfsstat4::Nfs4errBadStateid),
    }
}

/// CLOSE (section 18.2).
pub fn close(c: &mut Compound<'_>, a: Close4args) -> Result<NfsResop4, Nfsstat4> {
    let other = open_stateid(c, &a.open_stateid)?;
    // Section 18.2.3: an open with byte-range locks under it is not closed; its lock
    // stateids without locks go with it.
    let fileid = c.inner.state.stateids[&other].fileid;
    let locks: Vec<(Other, bool)> = c
        .inner
        .state
        .stateids
        .on_file(fileid)
        .filter_map(|(o, e)| match &e.kind {
            StateKind::Lock { open, ranges, .. } if *open == other => {
                Some((*o, !ranges.is_empty()))
            }
            _ => None,
        })
        .collect();
    if locks.iter().any(|(_, held)| *held) {
        return Err(Nfsstat4::Nfs4errLocksHeld);
    }
    for (lock, _) in locks {
        c.inner.state.stateids.remove(&lock);
    }
    let e = c.inner.state.stateids.remove(&other).expect("checked");
    c.inner.tree.unpin(e.fileid);
    let closed = Stateid4 {
        seqid: e.seqid.wrapping_add(1),
        other: Bytes::copy_from_slice(&other),
    };
    c.current_stateid = Some(closed.clone());
    Ok(NfsResop4::OpClose(Close4res::Nfs4Ok(closed)))
}

/// OPEN_DOWNGRADE (section 18.18): to a subset of the access and deny the open has.
pub fn open_downgrade(c: &mut Compound<'_>, a: OpenDowngrade4args) -> Result<NfsResop4, Nfsstat4> {
    let other = open_stateid(c, &a.open_stateid)?;
    let access_bits = a.share_access & OPEN4_SHARE_ACCESS_BOTH;
    let e = c.inner.state.stateids.get_mut(&other).expect("checked");
    let StateKind::Open { access, deny, .. } = &mut e.kind else {
        return Err(Nfsstat4::Nfs4errBadStateid);
    };
    if access_bits == 0 || access_bits & !*access != 0 || a.share_deny & !*deny != 0 {
        return Err(Nfsstat4::Nfs4errInval);
    }
    *access = access_bits;
    *deny = a.share_deny;
    e.seqid = e.seqid.wrapping_add(1);
    let stateid = e.stateid(&other);
    c.current_stateid = Some(stateid.clone());
    Ok(NfsResop4::OpOpenDowngrade(OpenDowngrade4res::Nfs4Ok(
        OpenDowngrade4resok {
            open_stateid: stateid,
        },
    )))
}

/// TEST_STATEID (section 18.48): the status each stateid would get.
pub fn test_stateid(c: &mut Compound<'_>, a: TestStateid4args) -> Result<NfsResop4, Nfsstat4> {
    let codes = a
        .ts_stateids
        .iter()
        .map(|s| match other_of(s) {
            Ok(other) => match entry(c, &other, s.seqid, None) {
                Ok(_) => Nfsstat4::Nfs4Ok,
                Err(status) => status,
            },
            Err(status) => status,
        })
        .collect();
    Ok(NfsResop4::OpTestStateid(TestStateid4res::Nfs4Ok(
        TestStateid4resok {
            tsr_status_codes: codes,
        },
    )))
}

/// FREE_STATEID (section 18.38): an open or a delegation still in force is NFS4ERR_LOCKS_HELD
/// (CLOSE or DELEGRETURN frees those); a stateid the server no longer has is
/// NFS4ERR_BAD_STATEID.
pub fn free_stateid(c: &mut Compound<'_>, a: FreeStateid4args) -> Result<NfsResop4, Nfsstat4> {
    let (named, seqid) = name_stateid(c, &a.fsa_stateid)?;
    let Named::State(other) = named else {
        return Err(Nfsstat4::Nfs4errBadStateid);
    };
    let revoked = c
        .inner
        .state
        .stateids
        .get(&other)
        .filter(|e| Some(e.client) == c.session.map(|(_, me)| me))
        .is_some_and(|e| e.kind == StateKind::RevokedDelegation);
    if revoked {
        // Section 18.38.3: freeing a revoked delegation acknowledges the revocation.
        c.inner.state.stateids.remove(&other);
        let client = c.client()?;
        if let Some(record) = c.inner.state.clients.get_mut(&client) {
            record.revoked = record.revoked.saturating_sub(1);
        }
        return Ok(NfsResop4::OpFreeStateid(FreeStateid4res {
            fsr_status: Nfsstat4::Nfs4Ok,
        }));
    }
    match &entry(c, &other, seqid, None)?.kind {
        StateKind::Lock { ranges, .. } if ranges.is_empty() => {
            c.inner.state.stateids.remove(&other);
            Ok(NfsResop4::OpFreeStateid(FreeStateid4res {
                fsr_status: Nfsstat4::Nfs4Ok,
            }))
        }
        _ => Err(Nfsstat4::Nfs4errLocksHeld),
    }
}

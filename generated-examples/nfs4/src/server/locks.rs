//! Byte-range locks (RFC 5661 sections 9.1 - 9.5, operations LOCK 18.10, LOCKT 18.11 and LOCKU
//! 18.12): advisory, POSIX-style (a lock-owner's new lock replaces its own over the same bytes),
//! one lock stateid per lock-owner and file, taken under an open of the same client.

use bytes::Bytes;

use crate::nfs4::*;

use super::compound::Compound;
use super::delegations::expire_courtesy_clients;
use super::open::{entry, name_stateid, Named};
use super::state::{ClientId, LockRange, Other, StateEntry, StateKind};

/// A range's end (exclusive), from the protocol's offset and length: a length of all ones
/// means to the end of the file; a length of zero, or a range past 2^64, is NFS4ERR_INVAL
/// (section 18.10.3).
fn range(offset: u64, length: u64, write: bool) -> Result<LockRange, Nfsstat4> {
    if length == 0 {
        return Err(Nfsstat4::Nfs4errInval);
    }
    let end = if length == u64::MAX {
        u64::MAX
    } else {
        offset.checked_add(length).ok_or(Nfsstat4::Nfs4errInval)?
    };
    Ok(LockRange {
        start: offset,
        end,
        write,
    })
}

fn is_write(t: NfsLockType4) -> bool {
    matches!(t, NfsLockType4::WriteLt | NfsLockType4::WritewLt)
}

/// The first lock of another lock-owner on `fileid` that conflicts with `want` (two ranges
/// that overlap, one of them a write lock), as LOCK4denied.
fn conflict(
    c: &Compound<'_>,
    fileid: u64,
    owner: &(ClientId, Bytes),
    want: LockRange,
) -> Option<Lock4denied> {
    c.inner
        .state
        .stateids
        .on_file(fileid)
        .find_map(|(_, e)| match &e.kind {
            StateKind::Lock {
                owner: o, ranges, ..
            } if o != owner => ranges
                .iter()
                .find(|r| r.start < want.end && want.start < r.end && (r.write || want.write))
                .map(|r| Lock4denied {
                    offset: r.start,
                    length: if r.end == u64::MAX {
                        u64::MAX
                    } else {
                        r.end - r.start
                    },
                    locktype: if r.write {
                        NfsLockType4::WriteLt
                    } else {
                        NfsLockType4::ReadLt
                    },
                    owner: StateOwner4 {
                        clientid: o.0,
                        owner: o.1.clone(),
                    },
                }),
            _ => None,
        })
}

/// `ranges` without the bytes of `cut`.
fn subtract(ranges: &[LockRange], cut: LockRange) -> Vec<LockRange> {
    let mut out = Vec::with_capacity(ranges.len() + 1);
    for r in ranges {
        if r.end <= cut.start || cut.end <= r.start {
            out.push(*r);
            continue;
        }
        if r.start < cut.start {
            out.push(LockRange {
                end: cut.start,
                ..*r
            });
        }
        if cut.end < r.end {
            out.push(LockRange {
                start: cut.end,
                ..*r
            });
        }
    }
    out
}

/// The open and lock-owner a LOCK names: a new lock-owner under an open stateid, or an
/// existing lock stateid.
fn lock_state(c: &mut Compound<'_>, locker: &Locker4, fileid: u64) -> Result<Other, Nfsstat4> {
    let client = c.client()?;
    match locker {
        Locker4::True(new) => {
            let (named, seqid) = name_stateid(c, &new.open_stateid)?;
            let Named::State(open) = named else {
                return Err(Nfsstat4::Nfs4errBadStateid);
            };
            if !matches!(
                entry(c, &open, seqid, Some(fileid))?.kind,
                StateKind::Open { .. }
            ) {
                return Err(Nfsstat4::Nfs4errBadStateid);
            }
            let owner = (client, new.lock_owner.owner.clone());
            let existing =
                c.inner
                    .state
                    .stateids
                    .on_file(fileid)
                    .find_map(|(o, e)| match &e.kind {
                        StateKind::Lock { owner: w, .. } if *w == owner => Some(*o),
                        _ => None,
                    });
            if let Some(other) = existing {
                return Ok(other);
            }
            if c.inner.state.stateids_of(client) >= c.shared.config.max_stateids_per_client {
                return Err(Nfsstat4::Nfs4errServerfault);
            }
            let other = c.inner.state.new_other();
            c.inner.state.stateids.insert(
                other,
                StateEntry {
                    client,
                    fileid,
                    seqid: 0,
                    kind: StateKind::Lock {
                        owner,
                        open,
                        ranges: Vec::new(),
                    },
                },
            );
            Ok(other)
        }
        Locker4::False(exist) => {
            let (named, seqid) = name_stateid(c, &exist.lock_stateid)?;
            let Named::State(other) = named else {
                return Err(Nfsstat4::Nfs4errBadStateid);
            };
            match entry(c, &other, seqid, Some(fileid))?.kind {
                StateKind::Lock { .. } => Ok(other),
                _ => Err(Nfsstat4::Nfs4errBadStateid),
            }
        }
    }
}

/// LOCK (section 18.10): a conflicting lock of another owner is NFS4ERR_DENIED with it; a
/// write lock under an open without write access is NFS4ERR_OPENMODE.
pub fn lock(c: &mut Compound<'_>, a: Lock4args) -> Result<NfsResop4, Nfsstat4> {
    let fileid = c.current()?;
    if a.reclaim {
        return Err(Nfsstat4::Nfs4errNoGrace);
    }
    let want = range(a.offset, a.length, is_write(a.locktype))?;
    let other = lock_state(c, &a.locker, fileid)?;
    let (owner, open) = match &c.inner.state.stateids[&other].kind {
        StateKind::Lock { owner, open, .. } => (owner.clone(), *open),
        _ => return Err(Nfsstat4::Nfs4errBadStateid),
    };
    if let Some(StateKind::Open { access, .. }) = c.inner.state.stateids.get(&open).map(|e| &e.kind)
    {
        if want.write && access & OPEN4_SHARE_ACCESS_WRITE == 0 {
            return Err(Nfsstat4::Nfs4errOpenmode);
        }
    }
    if let Some(denied) = conflict(c, fileid, &owner, want) {
        // A lock held by a client whose lease ran out gives way (section 8.3, as OPEN's).
        let holder = denied.owner.clientid;
        expire_courtesy_clients(c, vec![holder]);
        if let Some(denied) = conflict(c, fileid, &owner, want) {
            return Ok(NfsResop4::OpLock(Lock4res::Nfs4errDenied(denied)));
        }
    }
    let e = c.inner.state.stateids.get_mut(&other).expect("found above");
    if let StateKind::Lock { ranges, .. } = &mut e.kind {
        let mut kept = subtract(ranges, want);
        kept.push(want);
        *ranges = kept;
    }
    e.seqid = e.seqid.wrapping_add(1);
    let stateid = e.stateid(&other);
    c.current_stateid = Some(stateid.clone());
    Ok(NfsResop4::OpLock(Lock4res::Nfs4Ok(Lock4resok {
        lock_stateid: stateid,
    })))
}

/// LOCKT (section 18.11): whether the lock could be taken, without taking it.
pub fn lockt(c: &mut Compound<'_>, a: Lockt4args) -> Result<NfsResop4, Nfsstat4> {
    let fileid = c.current()?;
    let client = c.client()?;
    let want = range(a.offset, a.length, is_write(a.locktype))?;
    let owner = (client, a.owner.owner.clone());
    Ok(NfsResop4::OpLockt(
        match conflict(c, fileid, &owner, want) {
            Some(denied) => Lockt4res::Nfs4errDenied(denied),
            None => Lockt4res::Nfs4Ok,
        },
    ))
}

/// LOCKU (section 18.12): the range unlocked (what was not locked stays unlocked).
pub fn locku(c: &mut Compound<'_>, a: Locku4args) -> Result<NfsResop4, Nfsstat4> {
    let fileid = c.current()?;
    let cut = range(a.offset, a.length, false)?;
    let (named, seqid) = name_stateid(c, &a.lock_stateid)?;
    let Named::State(other) = named else {
        return Err(Nfsstat4::Nfs4errBadStateid);
    };
    if !matches!(
        entry(c, &other, seqid, Some(fileid))?.kind,
        StateKind::Lock { .. }
    ) {
        return Err(Nfsstat4::Nfs4errBadStateid);
    }
    let e = c.inner.state.stateids.get_mut(&other).expect("checked");
    if let StateKind::Lock { ranges, .. } = &mut e.kind {
        *ranges = subtract(ranges, cut);
    }
    e.seqid = e.seqid.wrapping_add(1);
    let stateid = e.stateid(&other);
    c.current_stateid = Some(stateid.clone());
    Ok(NfsResop4::OpLocku(Locku4res::Nfs4Ok(stateid)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: u64, end: u64) -> LockRange {
        LockRange {
            start,
            end,
            write: true,
        }
    }

    #[test]
    fn subtracting_splits_trims_and_removes() {
        assert_eq!(
            subtract(&[r(0, 100)], r(40, 60)),
            vec![r(0, 40), r(60, 100)]
        );
        assert_eq!(subtract(&[r(0, 100)], r(50, 200)), vec![r(0, 50)]);
        assert_eq!(subtract(&[r(10, 20)], r(0, 100)), vec![]);
        assert_eq!(subtract(&[r(10, 20)], r(20, 30)), vec![r(10, 20)]);
    }

    #[test]
    fn ranges_from_offset_and_length() {
        assert_eq!(range(5, u64::MAX, true), Ok(r(5, u64::MAX)));
        assert_eq!(range(5, 0, true), Err(Nfsstat4::Nfs4errInval));
        assert_eq!(range(u64::MAX, 2, true), Err(Nfsstat4::Nfs4errInval));
        assert_eq!(range(1, 2, true), Ok(r(1, 3)));
    }
}

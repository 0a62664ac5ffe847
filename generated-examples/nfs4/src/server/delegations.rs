//! Read delegations (RFC 5661 section 10): granting one on OPEN (section 10.4), recalling it
//! over the holder's backchannel (CB_RECALL, section 20.2) when another client's change
//! conflicts with it (section 10.4.1), revoking what is not returned within a lease (section
//! 10.2.1), expiring courtesy clients in the way (section 8.3), and DELEGRETURN (section 18.6).

use std::time::Duration;

use bytes::Bytes;

use crate::nfs4::nfs4_callback::nfs_cb::NfsCbClient;
use crate::nfs4::*;

use super::compound::Compound;
use super::fh;
use super::open::{entry, name_stateid, other_of, Named};
use super::state::{ClientId, Other, SessionId, StateEntry, StateKind};
use super::Nfs4Server;

/// A delegation to recall once the COMPOUND that conflicted with it has answered.
pub struct Recall {
    backchannel: NfsCbClient,
    session: SessionId,
    cb_seq: u32,
    other: Other,
    stateid: Stateid4,
    fh: NfsFh4,
    lease: Duration,
}

/// Drops the clients among `holders` whose lease ran out (RFC 5661 section 8.3: a server may
/// keep an expired client's state until it conflicts with another client's request, and then
/// release it, as Linux's courteous server does).
pub(super) fn expire_courtesy_clients(c: &mut Compound<'_>, holders: Vec<ClientId>) {
    let lease = Duration::from_secs(u64::from(c.shared.config.lease_seconds));
    for holder in holders {
        if Some(holder) != c.session.map(|(_, me)| me) && c.inner.state.expired(holder, lease) {
            c.inner.state.expunge_client(holder);
        }
    }
}

/// Recalls the delegations other clients hold on `fileid` (section 10.4.1: a change by one
/// client to a file another holds a delegation for); NFS4ERR_DELAY while any is held, so that
/// the client retries once the holder has returned it.
pub fn break_delegations(c: &mut Compound<'_>, fileid: u64) -> Result<(), Nfsstat4> {
    recall_conflicting(c, fileid, false)
}

/// Recalls the write delegations other clients hold on `fileid`, for a client that reads the
/// file or its attributes (section 10.4.3: the holder may have written what the server has
/// not seen; this server recalls rather than asking with CB_GETATTR); NFS4ERR_DELAY while any
/// is held.
pub fn break_write_delegations(c: &mut Compound<'_>, fileid: u64) -> Result<(), Nfsstat4> {
    recall_conflicting(c, fileid, true)
}

/// Recalls other clients' delegations on `fileid`: write delegations only, or all.
fn recall_conflicting(
    c: &mut Compound<'_>,
    fileid: u64,
    writes_only: bool,
) -> Result<(), Nfsstat4> {
    let me = c.session.map(|(_, client)| client);
    let conflicts = |e: &StateEntry| {
        Some(e.client) != me
            && matches!(e.kind, StateKind::Delegation { write, .. } if write || !writes_only)
    };
    let held: Vec<(Other, ClientId, bool)> = c
        .inner
        .state
        .stateids
        .on_file(fileid)
        .filter(|(_, e)| conflicts(e))
        .filter_map(|(o, e)| match e.kind {
            StateKind::Delegation { recalled, .. } => Some((*o, e.client, recalled)),
            _ => None,
        })
        .collect();
    if held.is_empty() {
        return Ok(());
    }
    expire_courtesy_clients(c, held.iter().map(|(_, holder, _)| *holder).collect());
    let held: Vec<_> = held
        .into_iter()
        .filter(|(other, _, _)| c.inner.state.stateids.contains_key(other))
        .collect();
    let lease = Duration::from_secs(u64::from(c.shared.config.lease_seconds));
    let fh = fh::encode(fileid, c.shared.generation);
    for (other, holder, recalled) in held {
        if recalled {
            continue;
        }
        let state = &mut c.inner.state;
        let session = state
            .sessions
            .iter_mut()
            .find(|(_, s)| s.client == holder && s.backchannel.is_some());
        let Some((sid, session)) = session else {
            // No way to reach the holder: the delegation goes now (section 10.4.6: a server
            // may revoke what it cannot recall).
            state.revoke(&other);
            continue;
        };
        session.cb_seq = session.cb_seq.wrapping_add(1);
        let recall = Recall {
            backchannel: session.backchannel.clone().expect("filtered above"),
            session: *sid,
            cb_seq: session.cb_seq,
            other,
            stateid: Stateid4::default(),
            fh: fh.clone(),
            lease,
        };
        let e = state.stateids.get_mut(&other).expect("listed above");
        if let StateKind::Delegation { recalled, .. } = &mut e.kind {
            *recalled = true;
        }
        let stateid = e.stateid(&other);
        c.recalls.push(Recall { stateid, ..recall });
    }
    let still_held = c
        .inner
        .state
        .stateids
        .on_file(fileid)
        .any(|(_, e)| conflicts(e));
    if still_held {
        Err(Nfsstat4::Nfs4errDelay)
    } else {
        Ok(())
    }
}

/// Sends a CB_RECALL (with its CB_SEQUENCE, section 20.9) and revokes the delegation if it is
/// not returned within a lease (section 10.2.1), or at once if the callback fails.
pub fn spawn_recall(server: Nfs4Server, recall: Recall) {
    tokio::spawn(async move {
        let log = server.config().log_calls;
        let args = CbCompound4args {
            tag: Bytes::from_static(b"recall"),
            minorversion: 1,
            callback_ident: 0,
            argarray: vec![
                NfsCbArgop4::OpCbSequence(CbSequence4args {
                    csa_sessionid: Sessionid4(Bytes::copy_from_slice(&recall.session)),
                    csa_sequenceid: recall.cb_seq,
                    csa_slotid: 0,
                    csa_highest_slotid: 0,
                    csa_cachethis: false,
                    csa_referring_call_lists: Vec::new(),
                }),
                NfsCbArgop4::OpCbRecall(CbRecall4args {
                    stateid: recall.stateid.clone(),
                    truncate: false,
                    fh: recall.fh.clone(),
                }),
            ],
        };
        if log {
            eprintln!(
                "CB_RECALL of delegation {:02x?} seqid {}: sent",
                &recall.other, recall.stateid.seqid
            );
        }
        let outcome =
            tokio::time::timeout(recall.lease, recall.backchannel.cb_compound(args)).await;
        let answered = match &outcome {
            Ok(Ok(res)) if res.status == Nfsstat4::Nfs4Ok => true,
            Ok(Ok(res)) => {
                if log {
                    eprintln!(
                        "CB_RECALL of {:02x?}: answered {:?}",
                        &recall.other, res.status
                    );
                }
                false
            }
            Ok(Err(e)) => {
                if log {
                    eprintln!("CB_RECALL of {:02x?}: failed: {e}", &recall.other);
                }
                false
            }
            Err(_) => {
                if log {
                    eprintln!(
                        "CB_RECALL of {:02x?}: no answer within a lease",
                        &recall.other
                    );
                }
                false
            }
        };
        if answered {
            if log {
                eprintln!("CB_RECALL of {:02x?}: answered NFS4_OK", &recall.other);
            }
            // Section 10.2.1: the holder has a lease to return it.
            tokio::time::sleep(recall.lease).await;
        }
        let mut inner = server.lock();
        let held = inner
            .state
            .stateids
            .get(&recall.other)
            .is_some_and(|e| matches!(e.kind, StateKind::Delegation { .. }));
        if held {
            inner.state.revoke(&recall.other);
            if log {
                eprintln!("delegation {:02x?}: revoked", &recall.other);
            }
        }
    });
}

/// A delegation stateid of this client on `fileid` (CLAIM_DELEG_CUR*).
pub(super) fn delegation_of(
    c: &Compound<'_>,
    stateid: &Stateid4,
    fileid: u64,
) -> Result<(), Nfsstat4> {
    let other = other_of(stateid)?;
    let e = entry(c, &other, stateid.seqid, Some(fileid))?;
    match e.kind {
        StateKind::Delegation { .. } => Ok(()),
        _ => Err(Nfsstat4::Nfs4errBadStateid),
    }
}

/// The delegation an OPEN gets (section 10.4): a read delegation for a read-only open, or a
/// write delegation for an open that writes when the client asked for one
/// (OPEN4_SHARE_ACCESS_WANT_WRITE_DELEG, or WANT_ANY_DELEG), by a client the server can call
/// back, when no other client's state on the file is in the way (a read delegation: no other
/// client has the file open for writing; a write delegation: no other client has it open at
/// all or holds a delegation) and no recall of it is under way; otherwise none, with the reason
/// when the client said what it wanted (section 18.16.3, OPEN_DELEGATE_NONE_EXT). A client
/// that already holds a delegation on the file gets that one again.
pub(super) fn delegate(
    c: &mut Compound<'_>,
    client: ClientId,
    fileid: u64,
    access_bits: u32,
    want: u32,
) -> OpenDelegation4 {
    let none = |why: WhyNoDelegation4| {
        if want == OPEN4_SHARE_ACCESS_WANT_NO_PREFERENCE {
            OpenDelegation4::OpenDelegateNone
        } else {
            OpenDelegation4::OpenDelegateNoneExt(match why {
                WhyNoDelegation4::Wnd4Contention => OpenNoneDelegation4::Wnd4Contention(false),
                WhyNoDelegation4::Wnd4Resource => OpenNoneDelegation4::Wnd4Resource(false),
                why => OpenNoneDelegation4::Default { discriminant: why },
            })
        }
    };
    let writes = access_bits & OPEN4_SHARE_ACCESS_WRITE != 0;
    let write = match want {
        OPEN4_SHARE_ACCESS_WANT_NO_DELEG => return none(WhyNoDelegation4::Wnd4NotWanted),
        OPEN4_SHARE_ACCESS_WANT_CANCEL => return none(WhyNoDelegation4::Wnd4Cancelled),
        OPEN4_SHARE_ACCESS_WANT_WRITE_DELEG | OPEN4_SHARE_ACCESS_WANT_ANY_DELEG if writes => true,
        // A read delegation covers no writing open (section 10.4.1).
        _ if writes => return none(WhyNoDelegation4::Wnd4NotSuppUpgrade),
        OPEN4_SHARE_ACCESS_WANT_WRITE_DELEG => {
            // Only an open that writes gets a write delegation here (section 18.16.3 leaves
            // the choice to the server).
            return none(WhyNoDelegation4::Wnd4NotSuppUpgrade);
        }
        _ => false,
    };
    let has_backchannel = c
        .session
        .and_then(|(sid, _)| c.inner.state.sessions.get(&sid))
        .is_some_and(|s| s.backchannel.is_some());
    let enabled = c.shared.config.delegations && (!write || c.shared.config.write_delegations);
    if !enabled || !has_backchannel {
        return none(WhyNoDelegation4::Wnd4Resource);
    }
    let state = &mut c.inner.state;
    let mut mine = None;
    for (o, e) in state.stateids.on_file(fileid) {
        let contention = match &e.kind {
            StateKind::Delegation { recalled: true, .. } => true,
            StateKind::Delegation { write: held, .. } if e.client == client => {
                mine = Some((*o, *held));
                false
            }
            StateKind::Delegation { write: held, .. } => write || *held,
            StateKind::Open { access, .. } if e.client != client => {
                write || access & OPEN4_SHARE_ACCESS_WRITE != 0
            }
            _ => false,
        };
        if contention {
            return OpenDelegation4::OpenDelegateNoneExt(OpenNoneDelegation4::Wnd4Contention(
                false,
            ));
        }
    }
    let (other, write) = match mine {
        // A read delegation does not become a write one (no upgrade, section 10.4.1).
        Some((_, false)) if write => return none(WhyNoDelegation4::Wnd4NotSuppUpgrade),
        Some(held) => held,
        None => {
            if state.stateids_of(client) >= c.shared.config.max_stateids_per_client {
                return none(WhyNoDelegation4::Wnd4Resource);
            }
            let other = state.new_other();
            state.stateids.insert(
                other,
                StateEntry {
                    client,
                    fileid,
                    seqid: 1,
                    kind: StateKind::Delegation {
                        write,
                        recalled: false,
                    },
                },
            );
            (other, write)
        }
    };
    let stateid = state.stateids[&other].stateid(&other);
    // Section 10.4: an ACE with no access says nothing; the client checks with ACCESS.
    let permissions = Nfsace4 {
        r#type: ACE4_ACCESS_ALLOWED_ACE_TYPE,
        flag: 0,
        access_mask: 0,
        who: Bytes::from_static(b"EVERYONE@"),
    };
    if !write {
        return OpenDelegation4::OpenDelegateRead(OpenReadDelegation4 {
            stateid,
            recall: false,
            permissions,
        });
    }
    // Section 10.4.1: how much the client may write before flushing; the space the server
    // has left.
    let room = c
        .shared
        .config
        .capacity
        .saturating_sub(c.inner.tree.used_bytes());
    OpenDelegation4::OpenDelegateWrite(OpenWriteDelegation4 {
        stateid,
        recall: false,
        space_limit: NfsSpaceLimit4::NfsLimitSize(room),
        permissions,
    })
}

/// DELEGRETURN (section 18.6).
pub fn delegreturn(c: &mut Compound<'_>, a: Delegreturn4args) -> Result<NfsResop4, Nfsstat4> {
    let fileid = c.current()?;
    let (named, seqid) = name_stateid(c, &a.deleg_stateid)?;
    let Named::State(other) = named else {
        return Err(Nfsstat4::Nfs4errBadStateid);
    };
    match entry(c, &other, seqid, Some(fileid))?.kind {
        StateKind::Delegation { .. } => {}
        _ => return Err(Nfsstat4::Nfs4errBadStateid),
    }
    c.inner.state.stateids.remove(&other);
    Ok(NfsResop4::OpDelegreturn(Delegreturn4res {
        status: Nfsstat4::Nfs4Ok,
    }))
}

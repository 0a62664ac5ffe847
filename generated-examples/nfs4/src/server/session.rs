//! Client records and sessions: EXCHANGE_ID, CREATE_SESSION, SEQUENCE and the slot table's
//! reply cache, DESTROY_SESSION, DESTROY_CLIENTID, BIND_CONN_TO_SESSION, BACKCHANNEL_CTL,
//! RECLAIM_COMPLETE (RFC 5661 sections 2.4, 2.10, 18.33 - 18.37, 18.46, 18.50, 18.51).

use std::time::Instant;

use bytes::Bytes;

use crate::nfs4::nfs4_callback::nfs_cb::NfsCbClient;
use crate::nfs4::*;

use super::compound::{renew, Compound};
use super::state::{ClientRecord, Session, SessionId, Slot, SlotReply};
use super::{MAX_IO, MAX_MESSAGE};

/// The server's identity in EXCHANGE_ID (section 2.5): one server, one scope.
const SERVER_MAJOR_ID: &[u8] = b"rpcrdma-nfs4";

/// Operations a COMPOUND may carry at most (ca_maxoperations). The Linux client asks for 8 to
/// 16; pynfs up to a few dozen.
const MAX_OPERATIONS: u32 = 64;

/// Back-channel slots granted at most: one callback at a time is all the server sends.
const MAX_BACK_SLOTS: u32 = 1;

/// The smallest request or reply a channel may be limited to: an RPC header with AUTH_SYS
/// credentials and a COMPOUND of SEQUENCE alone are about this large.
const MIN_MESSAGE: u32 = 128;

/// The principal of a call: the AUTH_SYS uid, or `None` (RFC 5661 section 2.4's principal,
/// as far as a server without RPCSEC_GSS can tell one caller from another).
pub fn principal(c: &Compound<'_>) -> Option<u32> {
    c.ctx.auth().sys().map(|sys| sys.uid)
}

/// EXCHANGE_ID (section 18.35), by the cases of section 18.35.5 (numbers as there): a new owner
/// gets a new unconfirmed record (case 1); the same owner, verifier and principal as a
/// confirmed record gets it again (case 2, or with UPD_CONFIRMED_REC_A its update, case 6); a
/// confirmed record of another principal is replaced when it holds nothing or its lease ran
/// out, else NFS4ERR_CLID_INUSE (case 3); an unconfirmed record is always replaced (case 4); a
/// confirmed record of a restarted client (another verifier) stays until CREATE_SESSION
/// confirms its successor (case 5). An update of a record that is not confirmed is
/// NFS4ERR_NOENT (case 7), of another verifier NFS4ERR_NOT_SAME (case 8), from another
/// principal NFS4ERR_PERM (case 9).
pub fn exchange_id(c: &mut Compound<'_>, a: ExchangeId4args) -> Result<NfsResop4, Nfsstat4> {
    match a.eia_state_protect {
        StateProtect4A::Sp4None | StateProtect4A::Sp4MachCred(_) => {}
        // SSV needs the algorithms of section 2.10.9; the server offers none.
        StateProtect4A::Sp4Ssv(_) => return Err(Nfsstat4::Nfs4errEncrAlgUnsupp),
    }
    if a.eia_flags
        & !(EXCHGID4_FLAG_SUPP_MOVED_REFER
            | EXCHGID4_FLAG_SUPP_MOVED_MIGR
            | EXCHGID4_FLAG_BIND_PRINC_STATEID
            | EXCHGID4_FLAG_MASK_PNFS
            | EXCHGID4_FLAG_UPD_CONFIRMED_REC_A)
        != 0
    {
        // Section 18.35.3: a flag only a server sets.
        return Err(Nfsstat4::Nfs4errInval);
    }
    let owner = a.eia_clientowner.co_ownerid.clone();
    let verifier = a.eia_clientowner.co_verifier.0.clone();
    let principal = principal(c);
    let lease = lease(c);
    let update = a.eia_flags & EXCHGID4_FLAG_UPD_CONFIRMED_REC_A != 0;
    let max_clients = c.shared.config.max_clients;
    let state = &mut c.inner.state;
    let records = state.records_of(&owner);
    let confirmed = records
        .iter()
        .copied()
        .find(|id| state.clients[id].confirmed);
    let reuse = match (update, confirmed) {
        (true, None) => return Err(Nfsstat4::Nfs4errNoent),
        (true, Some(id)) => {
            let r = &state.clients[&id];
            if r.verifier != verifier {
                return Err(Nfsstat4::Nfs4errNotSame);
            }
            if r.principal != principal {
                return Err(Nfsstat4::Nfs4errPerm);
            }
            Some(id)
        }
        (false, Some(id)) => {
            let r = &state.clients[&id];
            if r.principal != principal {
                if state.has_state(id) && !state.expired(id, lease) {
                    return Err(Nfsstat4::Nfs4errClidInuse);
                }
                state.expunge_client(id);
                None
            } else if r.verifier == verifier {
                Some(id)
            } else {
                None
            }
        }
        (false, None) => None,
    };
    let clientid = match reuse {
        Some(id) => id,
        None => {
            for id in state.records_of(&owner) {
                if !state.clients[&id].confirmed {
                    state.expunge_client(id);
                }
            }
            if state.clients.len() >= max_clients {
                // A bound on what peers can make the server hold: records of clients gone
                // for ten leases go first; a server still full asks the client to wait.
                state.forget_departed(lease * 10);
                if state.clients.len() >= max_clients {
                    return Err(Nfsstat4::Nfs4errDelay);
                }
            }
            let id = state.new_client_id();
            state.clients.insert(
                id,
                ClientRecord {
                    owner,
                    verifier,
                    principal,
                    confirmed: false,
                    next_create_seq: 1,
                    create_cache: None,
                    reclaim_complete: false,
                    revoked: 0,
                    renewed: Instant::now(),
                },
            );
            id
        }
    };
    let record = &state.clients[&clientid];
    let mut flags = EXCHGID4_FLAG_USE_NON_PNFS;
    if record.confirmed {
        flags |= EXCHGID4_FLAG_CONFIRMED_R;
    }
    // Section 18.35.4: the server answers SP4_NONE or what was asked; machine credentials are
    // not enforced by a server that takes AUTH_SYS from anyone, so it answers SP4_NONE.
    Ok(NfsResop4::OpExchangeId(ExchangeId4res::Nfs4Ok(
        ExchangeId4resok {
            eir_clientid: clientid,
            eir_sequenceid: record.next_create_seq,
            eir_flags: flags,
            eir_state_protect: StateProtect4R::Sp4None,
            eir_server_owner: ServerOwner4 {
                so_minor_id: 0,
                so_major_id: Bytes::from_static(SERVER_MAJOR_ID),
            },
            eir_server_scope: Bytes::from_static(SERVER_MAJOR_ID),
            eir_server_impl_id: vec![NfsImplId4 {
                nii_domain: Bytes::from_static(b"rpcrdma"),
                nii_name: Bytes::from_static(b"rpcrdma-nfs4 (in-memory NFSv4.1 server)"),
                nii_date: Nfstime4::default(),
            }],
        },
    )))
}

/// The client for callbacks on `connection`, to the program number the client serves them on
/// (csa_cb_program, section 18.36.3: the client picks it) with the credential it asked
/// callbacks to carry (csa_sec_parms): AUTH_SYS when offered (Linux's callback service takes
/// AUTH_NONE for CB_NULL only), else AUTH_NONE.
fn callback_client(
    connection: rpcrdma::rpc::Client,
    program: u32,
    sec: &[CallbackSecParms4],
) -> NfsCbClient {
    let connection = connection.with_program_number(nfs4_callback::PROGRAM, program);
    let sys = sec.iter().find_map(|p| match p {
        CallbackSecParms4::AuthSys(s) => {
            Some(rpcrdma::rpc::Credentials::Sys(rpcrdma::rpc::AuthSys {
                stamp: s.stamp,
                machine_name: s.machinename.clone(),
                uid: s.uid,
                gid: s.gid,
                gids: s.gids.clone(),
            }))
        }
        _ => None,
    });
    let connection = match sys {
        Some(cred) => connection.with_credentials(&cred).unwrap_or(connection),
        None => connection,
    };
    NfsCbClient::new(connection)
}

/// The lease as a duration.
pub fn lease(c: &Compound<'_>) -> std::time::Duration {
    std::time::Duration::from_secs(u64::from(c.shared.config.lease_seconds))
}

/// The fore channel the server grants for what the client asked (section 18.36.3: never
/// more than asked).
fn fore_channel(asked: &ChannelAttrs4, max_slots: u32) -> ChannelAttrs4 {
    ChannelAttrs4 {
        ca_headerpadsize: 0,
        ca_maxrequestsize: asked.ca_maxrequestsize.min(MAX_MESSAGE),
        ca_maxresponsesize: asked.ca_maxresponsesize.min(MAX_MESSAGE),
        ca_maxresponsesize_cached: asked.ca_maxresponsesize_cached.min(64 * 1024),
        ca_maxoperations: asked.ca_maxoperations.min(MAX_OPERATIONS),
        ca_maxrequests: asked.ca_maxrequests.clamp(1, max_slots.max(1)),
        ca_rdma_ird: Vec::new(),
    }
}

/// CREATE_SESSION (section 18.36): confirms the client record and makes a session; the
/// connection it came on is the backchannel when the client asks (CONN_BACK_CHAN) and the
/// transport carries calls the other way (RFC 8166 section 8 on RPC-over-RDMA).
pub fn create_session(c: &mut Compound<'_>, a: CreateSession4args) -> Result<NfsResop4, Nfsstat4> {
    let clientid = a.csa_clientid;
    let max_slots = c.shared.config.max_slots;
    let max_sessions = c.shared.config.max_sessions_per_client;
    let backchannel = c.ctx.backchannel().cloned();
    let principal = principal(c);
    let lease = lease(c);
    let state = &mut c.inner.state;
    let record = state
        .clients
        .get(&clientid)
        .ok_or(Nfsstat4::Nfs4errStaleClientid)?;
    if !record.confirmed && record.renewed.elapsed() > lease {
        // An unconfirmed record lives one lease (section 18.35.4).
        state.expunge_client(clientid);
        return Err(Nfsstat4::Nfs4errStaleClientid);
    }
    if a.csa_flags
        & !(CREATE_SESSION4_FLAG_PERSIST
            | CREATE_SESSION4_FLAG_CONN_BACK_CHAN
            | CREATE_SESSION4_FLAG_CONN_RDMA)
        != 0
    {
        return Err(Nfsstat4::Nfs4errInval);
    }
    // Section 18.36.4: the sequence decides a new request, a replay or a misordered one.
    if a.csa_sequence != record.next_create_seq {
        return match &record.create_cache {
            Some((seq, reply)) if *seq == a.csa_sequence => {
                Ok(NfsResop4::OpCreateSession(reply.clone()))
            }
            _ => Err(Nfsstat4::Nfs4errSeqMisordered),
        };
    }
    let too_small = |ch: &ChannelAttrs4| {
        ch.ca_maxrequestsize < MIN_MESSAGE
            || ch.ca_maxresponsesize < MIN_MESSAGE
            || ch.ca_maxoperations == 0
            || ch.ca_maxrequests == 0
    };
    if too_small(&a.csa_fore_chan_attrs) || too_small(&a.csa_back_chan_attrs) {
        // Section 18.36.3: a channel that could never carry a request or its reply.
        return Err(Nfsstat4::Nfs4errToosmall);
    }
    if !record.confirmed && record.principal != principal {
        // Section 18.36.4: only the principal that made an unconfirmed client id confirms it.
        return Err(Nfsstat4::Nfs4errClidInuse);
    }
    let owner = record.owner.clone();
    let was_confirmed = record.confirmed;
    if !was_confirmed {
        // Confirming replaces any confirmed record of the same owner (a restarted client).
        for id in state.records_of(&owner) {
            if id != clientid {
                state.expunge_client(id);
            }
        }
    }
    let fore = fore_channel(&a.csa_fore_chan_attrs, max_slots);
    let back = ChannelAttrs4 {
        ca_headerpadsize: 0,
        ca_maxrequests: a
            .csa_back_chan_attrs
            .ca_maxrequests
            .clamp(1, MAX_BACK_SLOTS),
        ca_rdma_ird: Vec::new(),
        ..a.csa_back_chan_attrs.clone()
    };
    let wants_back = a.csa_flags & CREATE_SESSION4_FLAG_CONN_BACK_CHAN != 0;
    let usable_sec = a.csa_sec_parms.iter().any(|p| {
        matches!(
            p,
            CallbackSecParms4::AuthNone | CallbackSecParms4::AuthSys(_)
        )
    });
    let backchannel = match (wants_back && usable_sec, backchannel) {
        (true, Some(client)) => Some(callback_client(client, a.csa_cb_program, &a.csa_sec_parms)),
        _ => None,
    };
    let mut flags = 0;
    if backchannel.is_some() {
        flags |= CREATE_SESSION4_FLAG_CONN_BACK_CHAN;
    }
    if state.sessions_of(clientid) >= max_sessions {
        return Err(Nfsstat4::Nfs4errDelay);
    }
    let sessionid = state.new_session_id(clientid);
    let slots = vec![
        Slot {
            seq: 0,
            reply: SlotReply::Unused,
        };
        fore.ca_maxrequests as usize
    ];
    state.sessions.insert(
        sessionid,
        Session {
            client: clientid,
            slots,
            fore: fore.clone(),
            back: back.clone(),
            backchannel,
            cb_program: a.csa_cb_program,
            cb_sec: a.csa_sec_parms.clone(),
            cb_seq: 0,
        },
    );
    let reply = CreateSession4res::Nfs4Ok(CreateSession4resok {
        csr_sessionid: Sessionid4(Bytes::copy_from_slice(&sessionid)),
        csr_sequence: a.csa_sequence,
        csr_flags: flags,
        csr_fore_chan_attrs: fore,
        csr_back_chan_attrs: back,
    });
    let record = state.clients.get_mut(&clientid).expect("checked above");
    record.confirmed = true;
    record.next_create_seq = a.csa_sequence.wrapping_add(1);
    record.create_cache = Some((a.csa_sequence, reply.clone()));
    record.renewed = Instant::now();
    Ok(NfsResop4::OpCreateSession(reply))
}

/// What SEQUENCE decided.
pub enum Sequenced {
    /// A new request on `slot`: run the rest of the COMPOUND.
    New { res: Sequence4res, slot: usize },
    /// A retransmission: the cached reply, as it was.
    Replay(Compound4res),
    /// SEQUENCE failed with this status.
    Failed(Nfsstat4),
}

fn session_id(id: &Sessionid4) -> Result<SessionId, Nfsstat4> {
    id.0.as_ref()
        .try_into()
        .map_err(|_| Nfsstat4::Nfs4errBadsession)
}

/// Bytes of SEQUENCE's successful result in a reply: the operation number, the status and
/// SEQUENCE4resok.
pub const SEQUENCE_REPLY_LEN: usize = 4 + 4 + 16 + 5 * 4;

/// SEQUENCE (section 18.46) and the slot rules of section 2.10.6.1: the sequence id one past
/// the slot's is a new request; equal to it, a retry answered from the cache; anything else
/// NFS4ERR_SEQ_MISORDERED. A new request whose reply could not even hold SEQUENCE's result
/// within the session's limits (`header` bytes before the results) fails without using the
/// slot.
pub fn sequence(c: &mut Compound<'_>, a: &Sequence4args, ops: usize, header: usize) -> Sequenced {
    let sid = match session_id(&a.sa_sessionid) {
        Ok(sid) => sid,
        Err(status) => return Sequenced::Failed(status),
    };
    let Some(session) = c.inner.state.sessions.get_mut(&sid) else {
        return Sequenced::Failed(Nfsstat4::Nfs4errBadsession);
    };
    let slot_count = session.slots.len();
    let Some(slot) = session.slots.get_mut(a.sa_slotid as usize) else {
        return Sequenced::Failed(Nfsstat4::Nfs4errBadslot);
    };
    if a.sa_sequenceid == slot.seq && slot.seq != 0 {
        return match &slot.reply {
            SlotReply::Cached(reply) => Sequenced::Replay(reply.clone()),
            SlotReply::Uncached | SlotReply::Unused => {
                Sequenced::Failed(Nfsstat4::Nfs4errRetryUncachedRep)
            }
        };
    }
    if a.sa_sequenceid != slot.seq.wrapping_add(1) {
        return Sequenced::Failed(Nfsstat4::Nfs4errSeqMisordered);
    }
    if ops > session.fore.ca_maxoperations as usize {
        // Section 15.1.11.7 / 18.46.3: counted before anything runs; the slot is not used.
        return Sequenced::Failed(Nfsstat4::Nfs4errTooManyOps);
    }
    let least = header + SEQUENCE_REPLY_LEN;
    if least > session.fore.ca_maxresponsesize as usize {
        return Sequenced::Failed(Nfsstat4::Nfs4errRepTooBig);
    }
    if a.sa_cachethis && least > session.fore.ca_maxresponsesize_cached as usize {
        return Sequenced::Failed(Nfsstat4::Nfs4errRepTooBigToCache);
    }
    slot.seq = a.sa_sequenceid;
    slot.reply = SlotReply::Uncached;
    let client = session.client;
    let highest = (slot_count - 1) as u32;
    let revoked = c
        .inner
        .state
        .clients
        .get(&client)
        .is_some_and(|r| r.revoked > 0);
    let status_flags = if revoked {
        SEQ4_STATUS_RECALLABLE_STATE_REVOKED
    } else {
        0
    };
    c.session = Some((sid, client));
    renew(c, client);
    Sequenced::New {
        res: Sequence4res::Nfs4Ok(Sequence4resok {
            sr_sessionid: a.sa_sessionid.clone(),
            sr_sequenceid: a.sa_sequenceid,
            sr_slotid: a.sa_slotid,
            sr_highest_slotid: highest,
            sr_target_highest_slotid: highest,
            sr_status_flags: status_flags,
        }),
        slot: a.sa_slotid as usize,
    }
}

/// Keeps the reply of the request on `slot` for its retransmission, when the client asked
/// (sa_cachethis; section 2.10.6.1.3: a reply not kept is answered
/// NFS4ERR_RETRY_UNCACHED_REP on a retry).
pub fn keep_reply(
    c: &mut Compound<'_>,
    sid: &SessionId,
    slot: usize,
    cache: bool,
    reply: &Compound4res,
) {
    if let Some(slot) = c
        .inner
        .state
        .sessions
        .get_mut(sid)
        .and_then(|s| s.slots.get_mut(slot))
    {
        slot.reply = if cache {
            SlotReply::Cached(reply.clone())
        } else {
            SlotReply::Uncached
        };
    }
}

/// DESTROY_SESSION (section 18.37).
pub fn destroy_session(
    c: &mut Compound<'_>,
    a: DestroySession4args,
) -> Result<NfsResop4, Nfsstat4> {
    let sid = session_id(&a.dsa_sessionid)?;
    let session = c
        .inner
        .state
        .sessions
        .get(&sid)
        .ok_or(Nfsstat4::Nfs4errBadsession)?;
    if let Some((_, client)) = c.session {
        // Section 18.37.3: only the session's own client destroys it.
        if client != session.client {
            return Err(Nfsstat4::Nfs4errBadsession);
        }
    }
    c.inner.state.sessions.remove(&sid);
    Ok(NfsResop4::OpDestroySession(DestroySession4res {
        dsr_status: Nfsstat4::Nfs4Ok,
    }))
}

/// DESTROY_CLIENTID (section 18.50): only a client without sessions; its state goes with it.
pub fn destroy_clientid(
    c: &mut Compound<'_>,
    a: DestroyClientid4args,
) -> Result<NfsResop4, Nfsstat4> {
    let state = &mut c.inner.state;
    if !state.clients.contains_key(&a.dca_clientid) {
        return Err(Nfsstat4::Nfs4errStaleClientid);
    }
    if state.has_sessions(a.dca_clientid) {
        return Err(Nfsstat4::Nfs4errClientidBusy);
    }
    state.expunge_client(a.dca_clientid);
    Ok(NfsResop4::OpDestroyClientid(DestroyClientid4res {
        dcr_status: Nfsstat4::Nfs4Ok,
    }))
}

/// BIND_CONN_TO_SESSION (section 18.34): every connection already serves every session of its
/// client here; the backchannel moves to this connection when asked for and possible.
pub fn bind_conn_to_session(
    c: &mut Compound<'_>,
    a: BindConnToSession4args,
) -> Result<NfsResop4, Nfsstat4> {
    let sid = session_id(&a.bctsa_sessid)?;
    let backchannel = c.ctx.backchannel().cloned();
    let session = c
        .inner
        .state
        .sessions
        .get_mut(&sid)
        .ok_or(Nfsstat4::Nfs4errBadsession)?;
    let wants_back = matches!(
        a.bctsa_dir,
        ChannelDirFromClient4::Cdfc4Back
            | ChannelDirFromClient4::Cdfc4BackOrBoth
            | ChannelDirFromClient4::Cdfc4ForeOrBoth
    );
    let dir = match (wants_back, backchannel) {
        (true, Some(client)) => {
            session.backchannel =
                Some(callback_client(client, session.cb_program, &session.cb_sec));
            if a.bctsa_dir == ChannelDirFromClient4::Cdfc4Back {
                ChannelDirFromServer4::Cdfs4Back
            } else {
                ChannelDirFromServer4::Cdfs4Both
            }
        }
        (_, _) if a.bctsa_dir == ChannelDirFromClient4::Cdfc4Back => {
            return Err(Nfsstat4::Nfs4errInval)
        }
        _ => ChannelDirFromServer4::Cdfs4Fore,
    };
    Ok(NfsResop4::OpBindConnToSession(
        BindConnToSession4res::Nfs4Ok(BindConnToSession4resok {
            bctsr_sessid: a.bctsa_sessid,
            bctsr_dir: dir,
            bctsr_use_conn_in_rdma_mode: false,
        }),
    ))
}

/// BACKCHANNEL_CTL (section 18.33): a new callback program number for the session.
pub fn backchannel_ctl(
    c: &mut Compound<'_>,
    a: BackchannelCtl4args,
) -> Result<NfsResop4, Nfsstat4> {
    let (sid, _) = c.session.ok_or(Nfsstat4::Nfs4errOpNotInSession)?;
    let usable = a.bca_sec_parms.iter().any(|p| {
        matches!(
            p,
            CallbackSecParms4::AuthNone | CallbackSecParms4::AuthSys(_)
        )
    });
    if !usable {
        return Err(Nfsstat4::Nfs4errInval);
    }
    if let Some(session) = c.inner.state.sessions.get_mut(&sid) {
        session.cb_program = a.bca_cb_program;
        session.cb_sec = a.bca_sec_parms.clone();
        if let Some(cb) = session.backchannel.take() {
            session.backchannel = Some(callback_client(
                cb.rpc().clone(),
                session.cb_program,
                &session.cb_sec,
            ));
        }
    }
    Ok(NfsResop4::OpBackchannelCtl(BackchannelCtl4res {
        bcr_status: Nfsstat4::Nfs4Ok,
    }))
}

/// RECLAIM_COMPLETE (section 18.51): the server keeps no state across restarts, so there is
/// nothing to reclaim; a second one for the whole client is NFS4ERR_COMPLETE_ALREADY.
pub fn reclaim_complete(
    c: &mut Compound<'_>,
    a: ReclaimComplete4args,
) -> Result<NfsResop4, Nfsstat4> {
    let client = c.client()?;
    if a.rca_one_fs {
        c.current()?;
    } else {
        let record = c
            .inner
            .state
            .clients
            .get_mut(&client)
            .ok_or(Nfsstat4::Nfs4errStaleClientid)?;
        if record.reclaim_complete {
            return Err(Nfsstat4::Nfs4errCompleteAlready);
        }
        record.reclaim_complete = true;
    }
    Ok(NfsResop4::OpReclaimComplete(ReclaimComplete4res {
        rcr_status: Nfsstat4::Nfs4Ok,
    }))
}

/// The largest READ a session's fore channel carries in its reply.
pub fn max_read(c: &Compound<'_>) -> u32 {
    c.session
        .and_then(|(sid, _)| c.inner.state.sessions.get(&sid))
        .map_or(MAX_IO, |s| {
            s.fore.ca_maxresponsesize.saturating_sub(512).min(MAX_IO)
        })
}

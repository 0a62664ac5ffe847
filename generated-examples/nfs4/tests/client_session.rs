//! The NFSv4.1 client session (`rpcrdma_nfs4::client`) against a small scripted fake server,
//! over RPC-over-RDMA on the software iWARP provider with both ends in one process (and once
//! over ONC RPC over TCP): session establishment, a 1 MiB WRITE and READ moved by chunks,
//! concurrent COMPOUNDs on the granted slots, a delegation recalled over the first session's
//! backchannel when a second session opens the file for writing, the backchannel's CB_SEQUENCE
//! rules, and replies from a misbehaving server that must give errors, not panics.
//!
//! The fake is not an NFS server: it keeps one directory of in-memory files and answers just
//! what the client sends, checking the slot and sequence ID of every SEQUENCE.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::tcp::{TcpConfig, TcpServer};
use rpcrdma::rpc::{AuthSys, CallContext, Client, Credentials, ReplyError, Server};
use rpcrdma::transport::{serve, RdmaConfig, RdmaListener, RdmaTransport};
use rpcrdma::xdr::{self, Decode, Decoder, Encode, Encoder, Procedure};
use rpcrdma_nfs4::client::{
    CallbackService, ClientError, DelayPolicy, DelegationKind, DelegationWant, OpenOptions,
    RecallPolicy, Session, SessionConfig,
};
use rpcrdma_nfs4::nfs4::nfs4_callback::{self, nfs_cb::NfsCbClient};
use rpcrdma_nfs4::nfs4::nfs4_program::nfs_v4::{self, NfsV4Client, NfsV4Server};
use rpcrdma_nfs4::nfs4::*;

const MIB: usize = 1 << 20;
/// Fore channel slots the fake grants unless a test says otherwise.
const FAKE_SLOTS: u32 = 4;
const ROOT_FH: &[u8] = b"root";

// ---------------------------------------------------------------------------------------
// The fake server
// ---------------------------------------------------------------------------------------

/// A wrong reply the fake sends once, to the next COMPOUND that starts with SEQUENCE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Misbehave {
    No,
    /// The SEQUENCE result names another session.
    WrongSessionid,
    /// The SEQUENCE result names another slot.
    WrongSlot,
    /// One result more than operations.
    ExtraResult,
    /// The last result is for another operation.
    ForeignResult,
    /// READ returns more bytes than asked for.
    LongRead,
}

/// What the fake does with an OPEN for writing that conflicts with another session's read
/// delegation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Conflict {
    /// Recall the delegation and wait (up to 5 s) for DELEGRETURN before answering.
    WaitForReturn,
    /// Recall the delegation once and answer `NFS4ERR_DELAY` until it is returned.
    AnswerDelay,
}

#[derive(Debug, Default)]
struct FakeSlot {
    seq: u32,
    busy: bool,
}

struct FakeSession {
    clientid: u64,
    slots: Vec<FakeSlot>,
    /// The backchannel remembered from CREATE_SESSION's call context.
    back: Option<Client>,
    cb_program: u32,
    /// The last CB_SEQUENCE sequence ID the fake sent on back channel slot 0.
    cb_seq: u32,
}

struct Deleg {
    holder: Bytes,
    stateid: Stateid4,
    recalled: bool,
}

struct FakeFile {
    fh: Bytes,
    fileid: u64,
    data: Vec<u8>,
    deleg: Option<Deleg>,
}

#[derive(Default)]
struct Log {
    eia_flags: Vec<u32>,
    cb_sec: Vec<CallbackSecParms4>,
    uids: Vec<u32>,
    slot_overlaps: u32,
    highest_slot_used: u32,
    delays_answered: u32,
    delegreturns: u32,
    reclaim_completes: u32,
}

struct FakeState {
    next_id: u64,
    clients: HashMap<Bytes, u64>,
    reclaimed: Vec<u64>,
    sessions: HashMap<Bytes, FakeSession>,
    files: HashMap<Bytes, FakeFile>,
    misbehave: Misbehave,
    log: Log,
}

/// The CB_COMPOUND statuses of the fake's recalls (or why the call failed).
type RecallLog = Arc<Mutex<Vec<Result<Nfsstat4, String>>>>;

struct Fake {
    state: Mutex<FakeState>,
    recalls: RecallLog,
    returned: tokio::sync::Notify,
    conflict: Conflict,
    /// Fore channel slots granted, whatever was asked.
    fore_slots: u32,
    /// `sr_target_highest_slotid` answered, if not the highest slot.
    target: Option<u32>,
}

/// A stateid whose `other` field carries `n`.
fn stateid(kind: u8, n: u64) -> Stateid4 {
    let mut other = vec![kind; 4];
    other.extend_from_slice(&n.to_be_bytes());
    Stateid4 {
        seqid: 1,
        other: Bytes::from(other),
    }
}

/// `op`'s result with `status`, for the operations the fake answers.
fn fail(op: &NfsArgop4, status: Nfsstat4) -> NfsResop4 {
    let d = status;
    match op {
        NfsArgop4::OpSequence(_) => {
            NfsResop4::OpSequence(Sequence4res::Default { discriminant: d })
        }
        NfsArgop4::OpPutfh(_) => NfsResop4::OpPutfh(Putfh4res { status }),
        NfsArgop4::OpPutrootfh => NfsResop4::OpPutrootfh(Putrootfh4res { status }),
        NfsArgop4::OpGetfh => NfsResop4::OpGetfh(Getfh4res::Default { discriminant: d }),
        NfsArgop4::OpLookup(_) => NfsResop4::OpLookup(Lookup4res { status }),
        NfsArgop4::OpGetattr(_) => NfsResop4::OpGetattr(Getattr4res::Default { discriminant: d }),
        NfsArgop4::OpOpen(_) => NfsResop4::OpOpen(Open4res::Default { discriminant: d }),
        NfsArgop4::OpRead(_) => NfsResop4::OpRead(Read4res::Default { discriminant: d }),
        NfsArgop4::OpWrite(_) => NfsResop4::OpWrite(Write4res::Default { discriminant: d }),
        NfsArgop4::OpCommit(_) => NfsResop4::OpCommit(Commit4res::Default { discriminant: d }),
        NfsArgop4::OpClose(_) => NfsResop4::OpClose(Close4res::Default { discriminant: d }),
        NfsArgop4::OpDelegreturn(_) => NfsResop4::OpDelegreturn(Delegreturn4res { status }),
        NfsArgop4::OpExchangeId(_) => {
            NfsResop4::OpExchangeId(ExchangeId4res::Default { discriminant: d })
        }
        NfsArgop4::OpCreateSession(_) => {
            NfsResop4::OpCreateSession(CreateSession4res::Default { discriminant: d })
        }
        NfsArgop4::OpDestroySession(_) => {
            NfsResop4::OpDestroySession(DestroySession4res { dsr_status: status })
        }
        NfsArgop4::OpDestroyClientid(_) => {
            NfsResop4::OpDestroyClientid(DestroyClientid4res { dcr_status: status })
        }
        NfsArgop4::OpReclaimComplete(_) => {
            NfsResop4::OpReclaimComplete(ReclaimComplete4res { rcr_status: status })
        }
        _ => NfsResop4::OpIllegal(Illegal4res {
            status: Nfsstat4::Nfs4errOpIllegal,
        }),
    }
}

fn status_of(res: &NfsResop4) -> Nfsstat4 {
    rpcrdma_nfs4::client::resop_status(res)
}

/// Who holds a delegation the fake must recall, and how to reach it.
struct RecallTarget {
    back: Client,
    cb_program: u32,
    sessionid: Bytes,
    seq: u32,
    stateid: Stateid4,
    fh: Bytes,
}

/// The state one COMPOUND carries from operation to operation.
struct Current {
    session: Option<Bytes>,
    slot: Option<u32>,
    fh: Option<Bytes>,
}

impl Fake {
    fn new(conflict: Conflict) -> Arc<Fake> {
        Fake::with(conflict, FAKE_SLOTS, None)
    }

    fn with(conflict: Conflict, fore_slots: u32, target: Option<u32>) -> Arc<Fake> {
        Arc::new(Fake {
            state: Mutex::new(FakeState {
                next_id: 1,
                clients: HashMap::new(),
                reclaimed: Vec::new(),
                sessions: HashMap::new(),
                files: HashMap::new(),
                misbehave: Misbehave::No,
                log: Log::default(),
            }),
            recalls: RecallLog::default(),
            returned: tokio::sync::Notify::new(),
            conflict,
            fore_slots,
            target,
        })
    }

    fn lock(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap()
    }

    /// The recalls' outcomes, once there is one (a recall in the background may end after
    /// the delegation was returned).
    async fn recalls_seen(&self) -> Vec<Result<Nfsstat4, String>> {
        for _ in 0..200 {
            let seen = self.recalls.lock().unwrap().clone();
            if !seen.is_empty() {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Vec::new()
    }

    fn misbehave_once(&self, how: Misbehave) {
        self.lock().misbehave = how;
    }

    /// The backchannel remembered for `session`.
    fn backchannel_of(&self, session: &Sessionid4) -> NfsCbClient {
        let st = self.lock();
        let s = &st.sessions[&session.0];
        let back = s.back.clone().expect("the session has a backchannel");
        NfsCbClient::new(back.with_program_number(nfs4_callback::PROGRAM, s.cb_program))
    }

    async fn compound(&self, ctx: &CallContext, args: Compound4args) -> Compound4res {
        if let Some(sys) = ctx.auth().sys() {
            self.lock().log.uids.push(sys.uid);
        }
        let mut cur = Current {
            session: None,
            slot: None,
            fh: None,
        };
        let sequenced = matches!(args.argarray.first(), Some(NfsArgop4::OpSequence(_)));
        let mut resarray = Vec::new();
        let mut status = Nfsstat4::Nfs4Ok;
        for (i, op) in args.argarray.iter().enumerate() {
            let res = match op {
                NfsArgop4::OpSequence(_) if i > 0 => fail(op, Nfsstat4::Nfs4errSequencePos),
                NfsArgop4::OpOpen(open) => self.open(&mut cur, op, open).await,
                _ => self.op(ctx, &mut cur, op),
            };
            status = status_of(&res);
            resarray.push(res);
            if status != Nfsstat4::Nfs4Ok {
                break;
            }
        }
        let mut st = self.lock();
        if let (Some(sid), Some(slot)) = (&cur.session, cur.slot) {
            if let Some(s) = st.sessions.get_mut(sid) {
                s.slots[slot as usize].busy = false;
            }
        }
        let mut res = Compound4res {
            status,
            tag: args.tag,
            resarray,
        };
        if sequenced {
            let how = std::mem::replace(&mut st.misbehave, Misbehave::No);
            misbehave(how, &mut res);
        }
        res
    }

    /// Every operation but OPEN (which may wait for a recall).
    fn op(&self, ctx: &CallContext, cur: &mut Current, op: &NfsArgop4) -> NfsResop4 {
        let mut st = self.lock();
        let st = &mut *st;
        let needs_fh = matches!(
            op,
            NfsArgop4::OpGetfh
                | NfsArgop4::OpGetattr(_)
                | NfsArgop4::OpLookup(_)
                | NfsArgop4::OpRead(_)
                | NfsArgop4::OpWrite(_)
                | NfsArgop4::OpCommit(_)
                | NfsArgop4::OpClose(_)
                | NfsArgop4::OpDelegreturn(_)
        );
        if needs_fh && cur.fh.is_none() {
            return fail(op, Nfsstat4::Nfs4errNofilehandle);
        }
        let file = |st: &FakeState, fh: &Bytes| {
            st.files
                .iter()
                .find(|(_, f)| f.fh == fh)
                .map(|(name, _)| name.clone())
        };
        match op {
            NfsArgop4::OpExchangeId(args) => {
                st.log.eia_flags.push(args.eia_flags);
                let owner = args.eia_clientowner.co_ownerid.clone();
                let known = st.clients.contains_key(&owner);
                let next = st.next_id;
                let clientid = *st.clients.entry(owner).or_insert(next);
                st.next_id += 1;
                NfsResop4::OpExchangeId(ExchangeId4res::Nfs4Ok(ExchangeId4resok {
                    eir_clientid: clientid,
                    eir_sequenceid: 1,
                    eir_flags: EXCHGID4_FLAG_USE_NON_PNFS
                        | if known { EXCHGID4_FLAG_CONFIRMED_R } else { 0 },
                    eir_state_protect: StateProtect4R::Sp4None,
                    eir_server_owner: ServerOwner4 {
                        so_minor_id: 0,
                        so_major_id: Bytes::from_static(b"fake"),
                    },
                    eir_server_scope: Bytes::from_static(b"fake"),
                    eir_server_impl_id: Vec::new(),
                }))
            }
            NfsArgop4::OpCreateSession(args) => {
                if !st.clients.values().any(|&c| c == args.csa_clientid) {
                    return fail(op, Nfsstat4::Nfs4errStaleClientid);
                }
                if args.csa_sequence != 1 {
                    return fail(op, Nfsstat4::Nfs4errSeqMisordered);
                }
                st.log.cb_sec.extend(args.csa_sec_parms.iter().cloned());
                let n = st.next_id;
                st.next_id += 1;
                let mut id = args.csa_clientid.to_be_bytes().to_vec();
                id.extend_from_slice(&n.to_be_bytes());
                let sessionid = Bytes::from(id);
                let back = (args.csa_flags & CREATE_SESSION4_FLAG_CONN_BACK_CHAN != 0)
                    .then(|| ctx.backchannel().cloned())
                    .flatten();
                let flags = if back.is_some() {
                    CREATE_SESSION4_FLAG_CONN_BACK_CHAN
                } else {
                    0
                };
                st.sessions.insert(
                    sessionid.clone(),
                    FakeSession {
                        clientid: args.csa_clientid,
                        slots: (0..self.fore_slots).map(|_| FakeSlot::default()).collect(),
                        back,
                        cb_program: args.csa_cb_program,
                        cb_seq: 0,
                    },
                );
                NfsResop4::OpCreateSession(CreateSession4res::Nfs4Ok(CreateSession4resok {
                    csr_sessionid: Sessionid4(sessionid),
                    csr_sequence: args.csa_sequence,
                    csr_flags: flags,
                    csr_fore_chan_attrs: ChannelAttrs4 {
                        ca_maxrequests: self.fore_slots,
                        ..args.csa_fore_chan_attrs.clone()
                    },
                    csr_back_chan_attrs: args.csa_back_chan_attrs.clone(),
                }))
            }
            NfsArgop4::OpSequence(seq) => {
                let Some(session) = st.sessions.get_mut(&seq.sa_sessionid.0) else {
                    return fail(op, Nfsstat4::Nfs4errBadsession);
                };
                let highest = session.slots.len() as u32 - 1;
                let Some(slot) = session.slots.get_mut(seq.sa_slotid as usize) else {
                    return fail(op, Nfsstat4::Nfs4errBadslot);
                };
                if slot.busy {
                    st.log.slot_overlaps += 1;
                    return fail(op, Nfsstat4::Nfs4errDelay);
                }
                if seq.sa_sequenceid != slot.seq.wrapping_add(1) {
                    return fail(op, Nfsstat4::Nfs4errSeqMisordered);
                }
                slot.seq = seq.sa_sequenceid;
                slot.busy = true;
                let flags = if session.back.is_none() {
                    SEQ4_STATUS_CB_PATH_DOWN
                } else {
                    0
                };
                st.log.highest_slot_used = st.log.highest_slot_used.max(seq.sa_slotid);
                cur.session = Some(seq.sa_sessionid.0.clone());
                cur.slot = Some(seq.sa_slotid);
                NfsResop4::OpSequence(Sequence4res::Nfs4Ok(Sequence4resok {
                    sr_sessionid: seq.sa_sessionid.clone(),
                    sr_sequenceid: seq.sa_sequenceid,
                    sr_slotid: seq.sa_slotid,
                    sr_highest_slotid: highest,
                    sr_target_highest_slotid: self.target.unwrap_or(highest),
                    sr_status_flags: flags,
                }))
            }
            _ if cur.session.is_none()
                && !matches!(
                    op,
                    NfsArgop4::OpDestroySession(_) | NfsArgop4::OpDestroyClientid(_)
                ) =>
            {
                fail(op, Nfsstat4::Nfs4errOpNotInSession)
            }
            NfsArgop4::OpReclaimComplete(_) => {
                let clientid = st.sessions[cur.session.as_ref().unwrap()].clientid;
                st.log.reclaim_completes += 1;
                if st.reclaimed.contains(&clientid) {
                    return fail(op, Nfsstat4::Nfs4errCompleteAlready);
                }
                st.reclaimed.push(clientid);
                NfsResop4::OpReclaimComplete(ReclaimComplete4res {
                    rcr_status: Nfsstat4::Nfs4Ok,
                })
            }
            NfsArgop4::OpPutrootfh => {
                cur.fh = Some(Bytes::from_static(ROOT_FH));
                NfsResop4::OpPutrootfh(Putrootfh4res {
                    status: Nfsstat4::Nfs4Ok,
                })
            }
            NfsArgop4::OpPutfh(args) => {
                let known = args.object.0 == ROOT_FH || file(st, &args.object.0).is_some();
                if !known {
                    return fail(op, Nfsstat4::Nfs4errStale);
                }
                cur.fh = Some(args.object.0.clone());
                NfsResop4::OpPutfh(Putfh4res {
                    status: Nfsstat4::Nfs4Ok,
                })
            }
            NfsArgop4::OpGetfh => NfsResop4::OpGetfh(Getfh4res::Nfs4Ok(Getfh4resok {
                object: NfsFh4(cur.fh.clone().unwrap()),
            })),
            NfsArgop4::OpLookup(args) => {
                if cur.fh.as_deref() != Some(ROOT_FH) {
                    return fail(op, Nfsstat4::Nfs4errNotdir);
                }
                match st.files.get(&args.objname) {
                    Some(f) => {
                        cur.fh = Some(f.fh.clone());
                        NfsResop4::OpLookup(Lookup4res {
                            status: Nfsstat4::Nfs4Ok,
                        })
                    }
                    None => fail(op, Nfsstat4::Nfs4errNoent),
                }
            }
            NfsArgop4::OpGetattr(args) => {
                let fh = cur.fh.clone().unwrap();
                let (kind, size, fileid) = match file(st, &fh) {
                    Some(name) => {
                        let f = &st.files[&name];
                        (NfsFtype4::Nf4reg, f.data.len() as u64, f.fileid)
                    }
                    None => (NfsFtype4::Nf4dir, 0, 1),
                };
                let wanted = |a: u32| {
                    args.attr_request
                        .get((a / 32) as usize)
                        .is_some_and(|w| w & (1 << (a % 32)) != 0)
                };
                let mut present = Vec::new();
                let mut vals = Vec::new();
                if wanted(FATTR4_TYPE) {
                    present.push(FATTR4_TYPE);
                    vals.extend_from_slice(&(kind.value() as u32).to_be_bytes());
                }
                if wanted(FATTR4_SIZE) {
                    present.push(FATTR4_SIZE);
                    vals.extend_from_slice(&size.to_be_bytes());
                }
                if wanted(FATTR4_FILEID) {
                    present.push(FATTR4_FILEID);
                    vals.extend_from_slice(&fileid.to_be_bytes());
                }
                NfsResop4::OpGetattr(Getattr4res::Nfs4Ok(Getattr4resok {
                    obj_attributes: Fattr4 {
                        attrmask: rpcrdma_nfs4::client::bitmap(&present),
                        attr_vals: Bytes::from(vals),
                    },
                }))
            }
            NfsArgop4::OpWrite(args) => {
                let Some(name) = file(st, cur.fh.as_ref().unwrap()) else {
                    return fail(op, Nfsstat4::Nfs4errIsdir);
                };
                let f = st.files.get_mut(&name).unwrap();
                let start = args.offset as usize;
                let end = start + args.data.len();
                if f.data.len() < end {
                    f.data.resize(end, 0);
                }
                f.data[start..end].copy_from_slice(&args.data);
                NfsResop4::OpWrite(Write4res::Nfs4Ok(Write4resok {
                    count: args.data.len() as u32,
                    committed: StableHow4::FileSync4,
                    writeverf: Verifier4(Bytes::from_static(b"verifier")),
                }))
            }
            NfsArgop4::OpRead(args) => {
                let Some(name) = file(st, cur.fh.as_ref().unwrap()) else {
                    return fail(op, Nfsstat4::Nfs4errIsdir);
                };
                let f = &st.files[&name];
                let start = (args.offset as usize).min(f.data.len());
                let end = (start + args.count as usize).min(f.data.len());
                let mut data = f.data[start..end].to_vec();
                if st.misbehave == Misbehave::LongRead {
                    data.extend_from_slice(&[0xee; 8]);
                }
                let data = ctx_buffer(ctx, &data);
                NfsResop4::OpRead(Read4res::Nfs4Ok(Read4resok {
                    eof: end == f.data.len(),
                    data,
                }))
            }
            NfsArgop4::OpCommit(_) => NfsResop4::OpCommit(Commit4res::Nfs4Ok(Commit4resok {
                writeverf: Verifier4(Bytes::from_static(b"verifier")),
            })),
            NfsArgop4::OpClose(args) => {
                NfsResop4::OpClose(Close4res::Nfs4Ok(args.open_stateid.clone()))
            }
            NfsArgop4::OpDelegreturn(args) => {
                let held = st.files.values_mut().find(|f| {
                    f.deleg
                        .as_ref()
                        .is_some_and(|d| d.stateid == args.deleg_stateid)
                });
                match held {
                    Some(f) => {
                        f.deleg = None;
                        st.log.delegreturns += 1;
                        self.returned.notify_waiters();
                        NfsResop4::OpDelegreturn(Delegreturn4res {
                            status: Nfsstat4::Nfs4Ok,
                        })
                    }
                    None => fail(op, Nfsstat4::Nfs4errBadStateid),
                }
            }
            NfsArgop4::OpDestroySession(args) => match st.sessions.remove(&args.dsa_sessionid.0) {
                Some(_) => NfsResop4::OpDestroySession(DestroySession4res {
                    dsr_status: Nfsstat4::Nfs4Ok,
                }),
                None => fail(op, Nfsstat4::Nfs4errBadsession),
            },
            NfsArgop4::OpDestroyClientid(args) => {
                if st
                    .sessions
                    .values()
                    .any(|s| s.clientid == args.dca_clientid)
                {
                    return fail(op, Nfsstat4::Nfs4errClientidBusy);
                }
                st.clients.retain(|_, &mut c| c != args.dca_clientid);
                NfsResop4::OpDestroyClientid(DestroyClientid4res {
                    dcr_status: Nfsstat4::Nfs4Ok,
                })
            }
            other => fail(other, Nfsstat4::Nfs4errNotsupp),
        }
    }

    /// OPEN with CLAIM_NULL in the root: a read delegation for a reader that wants one and
    /// has no conflict; a writer conflicting with another session's delegation has it
    /// recalled first.
    async fn open(&self, cur: &mut Current, op: &NfsArgop4, args: &Open4args) -> NfsResop4 {
        let OpenClaim4::ClaimNull(name) = &args.claim else {
            return fail(op, Nfsstat4::Nfs4errNotsupp);
        };
        if cur.fh.as_deref() != Some(ROOT_FH) {
            return fail(op, Nfsstat4::Nfs4errNotdir);
        }
        let Some(me) = cur.session.clone() else {
            return fail(op, Nfsstat4::Nfs4errOpNotInSession);
        };
        let write = args.share_access & OPEN4_SHARE_ACCESS_WRITE != 0;
        let want_read = args.share_access & OPEN4_SHARE_ACCESS_WANT_DELEG_MASK
            == OPEN4_SHARE_ACCESS_WANT_READ_DELEG;
        loop {
            let target = {
                let mut st = self.lock();
                let st = &mut *st;
                let n = st.next_id;
                st.next_id += 1;
                let create = matches!(args.openhow, Openflag4::Open4Create(_));
                if !st.files.contains_key(name) {
                    if !create {
                        return fail(op, Nfsstat4::Nfs4errNoent);
                    }
                    let mut fh = b"file:".to_vec();
                    fh.extend_from_slice(name);
                    st.files.insert(
                        name.clone(),
                        FakeFile {
                            fh: Bytes::from(fh),
                            fileid: n + 100,
                            data: Vec::new(),
                            deleg: None,
                        },
                    );
                }
                let file = st.files.get_mut(name).unwrap();
                let conflict = match &mut file.deleg {
                    Some(d) if write && d.holder != me => Some(d),
                    _ => None,
                };
                match conflict {
                    None => {
                        let delegation = if want_read && !write && file.deleg.is_none() {
                            let deleg = stateid(b'd', n);
                            file.deleg = Some(Deleg {
                                holder: me.clone(),
                                stateid: deleg.clone(),
                                recalled: false,
                            });
                            OpenDelegation4::OpenDelegateRead(OpenReadDelegation4 {
                                stateid: deleg,
                                recall: false,
                                permissions: Nfsace4::default(),
                            })
                        } else {
                            OpenDelegation4::OpenDelegateNone
                        };
                        cur.fh = Some(file.fh.clone());
                        return NfsResop4::OpOpen(Open4res::Nfs4Ok(Open4resok {
                            stateid: stateid(b'o', n),
                            cinfo: ChangeInfo4::default(),
                            rflags: 0,
                            attrset: Vec::new(),
                            delegation,
                        }));
                    }
                    Some(deleg) => {
                        let first_recall = !deleg.recalled;
                        deleg.recalled = true;
                        let (holder, stateid) = (deleg.holder.clone(), deleg.stateid.clone());
                        let fh = file.fh.clone();
                        let target = if first_recall || self.conflict == Conflict::WaitForReturn {
                            let session = st.sessions.get_mut(&holder).unwrap();
                            session.cb_seq += 1;
                            session.back.clone().map(|back| RecallTarget {
                                back,
                                cb_program: session.cb_program,
                                sessionid: holder.clone(),
                                seq: session.cb_seq,
                                stateid,
                                fh: fh.clone(),
                            })
                        } else {
                            None
                        };
                        (target, fh)
                    }
                }
            };
            let (target, fh) = target;
            let returned = self.returned.notified();
            tokio::pin!(returned);
            returned.as_mut().enable();
            if self.conflict == Conflict::AnswerDelay {
                // As a server does: recall in the background, answer at once.
                if let Some(target) = target {
                    let log = self.recalls.clone();
                    tokio::spawn(async move {
                        let reply = recall(target).await;
                        log.lock().unwrap().push(reply);
                    });
                }
                if self.delegation_on(&fh) {
                    self.lock().log.delays_answered += 1;
                    return fail(op, Nfsstat4::Nfs4errDelay);
                }
                continue;
            }
            if let Some(target) = target {
                let reply = recall(target).await;
                self.recalls.lock().unwrap().push(reply);
            }
            let waited = tokio::time::timeout(Duration::from_secs(5), async {
                let mut returned = returned;
                while self.delegation_on(&fh) {
                    returned.as_mut().await;
                    returned.set(self.returned.notified());
                    returned.as_mut().enable();
                }
            })
            .await;
            if waited.is_err() {
                return fail(op, Nfsstat4::Nfs4errDelay);
            }
        }
    }

    fn delegation_on(&self, fh: &Bytes) -> bool {
        self.lock()
            .files
            .values()
            .any(|f| f.fh == fh && f.deleg.is_some())
    }
}

/// READ's data as the server hands it to the transport: in the connection's registered
/// memory, as a file read into it would be.
fn ctx_buffer(ctx: &CallContext, data: &[u8]) -> Bytes {
    let mut buf = ctx.buffer(data.len());
    buf.as_mut_slice().copy_from_slice(data);
    buf.freeze(data.len())
}

/// CB_COMPOUND(CB_SEQUENCE, CB_RECALL) on the holder's backchannel: the CB_COMPOUND status.
async fn recall(target: RecallTarget) -> Result<Nfsstat4, String> {
    let cb = NfsCbClient::new(
        target
            .back
            .with_program_number(nfs4_callback::PROGRAM, target.cb_program),
    );
    let args = CbCompound4args {
        tag: Bytes::from_static(b"recall"),
        minorversion: 1,
        callback_ident: 0,
        argarray: vec![
            cb_sequence(&target.sessionid, 0, target.seq),
            NfsCbArgop4::OpCbRecall(CbRecall4args {
                stateid: target.stateid,
                truncate: false,
                fh: NfsFh4(target.fh),
            }),
        ],
    };
    let res = cb.cb_compound(args).await.map_err(|e| e.to_string())?;
    Ok(res.status)
}

fn cb_sequence(session: &Bytes, slot: u32, seq: u32) -> NfsCbArgop4 {
    NfsCbArgop4::OpCbSequence(CbSequence4args {
        csa_sessionid: Sessionid4(session.clone()),
        csa_sequenceid: seq,
        csa_slotid: slot,
        csa_highest_slotid: 0,
        csa_cachethis: false,
        csa_referring_call_lists: Vec::new(),
    })
}

/// Spoils a reply as `how` says.
fn misbehave(how: Misbehave, res: &mut Compound4res) {
    match how {
        Misbehave::No | Misbehave::LongRead => {}
        Misbehave::WrongSessionid | Misbehave::WrongSlot => {
            if let Some(NfsResop4::OpSequence(Sequence4res::Nfs4Ok(ok))) = res.resarray.first_mut()
            {
                if how == Misbehave::WrongSessionid {
                    ok.sr_sessionid = Sessionid4(Bytes::from_static(&[0x55; 16]));
                } else {
                    ok.sr_slotid += 1;
                }
            }
        }
        Misbehave::ExtraResult => res.resarray.push(NfsResop4::OpPutrootfh(Putrootfh4res {
            status: Nfsstat4::Nfs4Ok,
        })),
        Misbehave::ForeignResult => {
            if let Some(last) = res.resarray.last_mut() {
                *last = NfsResop4::OpReclaimComplete(ReclaimComplete4res {
                    rcr_status: Nfsstat4::Nfs4Ok,
                });
            }
        }
    }
}

impl NfsV4Server for Fake {
    async fn nfsproc4_null(&self, _ctx: CallContext) -> Result<(), ReplyError> {
        Ok(())
    }

    async fn nfsproc4_compound(
        &self,
        ctx: CallContext,
        args: Compound4args,
    ) -> Result<Compound4res, ReplyError> {
        Ok(self.compound(&ctx, args).await)
    }
}

// ---------------------------------------------------------------------------------------
// Serving the fake and connecting sessions
// ---------------------------------------------------------------------------------------

/// The fake served over RPC-over-RDMA on the software provider, asking for backward credits.
struct Served {
    fake: Arc<Fake>,
    provider: Arc<SoftProvider>,
    addr: SocketAddr,
    rdma: Arc<RdmaListener<SoftProvider>>,
}

fn fake_server(fake: &Arc<Fake>) -> Server {
    let mut builder = Server::builder();
    nfs_v4::register_arc(&mut builder, fake.clone());
    builder.build()
}

async fn serve_fake(fake: Arc<Fake>) -> Served {
    let provider = Arc::new(SoftProvider::default());
    let listener = provider
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("RDMA listen");
    let addr = listener.local_addr().expect("RDMA address");
    let rdma = Arc::new(serve::<SoftProvider>(
        listener,
        fake_server(&fake),
        RdmaConfig::default().backward_credits(2),
    ));
    tokio::spawn({
        let rdma = rdma.clone();
        async move { rdma.run().await }
    });
    Served {
        fake,
        provider,
        addr,
        rdma,
    }
}

impl Served {
    /// Replies the server sent with data in Write chunks, over its open connections.
    fn write_chunk_replies(&self) -> u64 {
        self.rdma
            .stats()
            .iter()
            .map(|(stats, _)| stats.replies_write_chunks)
            .sum()
    }

    /// A client on a new connection, serving `callbacks` in the backward direction.
    async fn connect(
        &self,
        callbacks: Option<&CallbackService>,
    ) -> (NfsV4Client, Arc<RdmaTransport<SoftProvider>>) {
        let mut config = RdmaConfig::default().timeout(Some(Duration::from_secs(10)));
        if let Some(callbacks) = callbacks {
            config = config.backchannel(callbacks.server(), 2);
        }
        let transport = Arc::new(
            RdmaTransport::connect(self.provider.clone(), self.addr, config)
                .await
                .expect("RDMA connect"),
        );
        (
            NfsV4Client::new(Client::from_arc(transport.clone())),
            transport,
        )
    }

    /// A session without a backchannel.
    async fn session(&self, owner: &str) -> Session {
        let (client, _) = self.connect(None).await;
        Session::establish(client, config(owner))
            .await
            .expect("session established")
    }

    /// A session whose connection is its back channel.
    async fn session_with_backchannel(
        &self,
        owner: &str,
        policy: RecallPolicy,
    ) -> (Session, CallbackService) {
        let callbacks = CallbackService::new();
        let (client, _) = self.connect(Some(&callbacks)).await;
        let config = config(owner)
            .backchannel(callbacks.clone())
            .recall_policy(policy);
        let session = Session::establish(client, config)
            .await
            .expect("session established");
        (session, callbacks)
    }
}

fn config(owner: &str) -> SessionConfig {
    SessionConfig::new(owner.to_string(), *b"boot0001")
}

fn pattern(len: usize) -> Bytes {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add((i >> 8) as u8))
        .collect::<Vec<u8>>()
        .into()
}

fn assert_protocol<T: std::fmt::Debug>(result: Result<T, ClientError>, what: &str) {
    match result {
        Err(ClientError::Protocol(message)) => eprintln!("{what}: {message}"),
        other => panic!("{what}: expected a protocol error, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn establishes_a_session_and_moves_a_mib_each_way_in_chunks() {
    let served = serve_fake(Fake::new(Conflict::WaitForReturn)).await;
    let (client, transport) = served.connect(None).await;
    let credentials = Credentials::Sys(AuthSys::new("client-a", 1000, 100));
    let session = Session::establish(client, config("client-a").credentials(credentials))
        .await
        .expect("session established");

    let granted = session.granted();
    assert_eq!(granted.fore.ca_maxrequests, FAKE_SLOTS, "the slots granted");
    assert_eq!(granted.fore.ca_maxoperations, 16);
    assert!(!granted.backchannel() && !granted.persistent());
    assert_eq!(session.max_write() as usize, MIB);
    assert_eq!(session.max_read() as usize, MIB);
    {
        let st = served.fake.lock();
        assert_eq!(st.log.eia_flags, vec![0], "a client claims no server role");
        assert_eq!(st.log.reclaim_completes, 1);
        match st.log.cb_sec.as_slice() {
            [CallbackSecParms4::AuthSys(sys)] => assert_eq!((sys.uid, sys.gid), (1000, 100)),
            other => panic!("csa_sec_parms {other:?}"),
        }
        assert!(st.log.uids.iter().all(|&uid| uid == 1000));
    }

    let root = session.root_fh().await.expect("root");
    assert_eq!(root.0, ROOT_FH);
    assert!(
        session.status_flags().callback_path_down(),
        "no backchannel: the fake says SEQ4_STATUS_CB_PATH_DOWN"
    );
    let file = session
        .open(
            &root,
            "data.bin",
            OpenOptions::create(0o644).want(DelegationWant::NoDelegation),
        )
        .await
        .expect("OPEN");
    assert!(file.delegation.is_none());

    let content = pattern(MIB);
    let before = transport.stats();
    let written = session
        .write(
            &file.fh,
            &file.stateid,
            0,
            content.clone(),
            StableHow4::FileSync4,
        )
        .await
        .expect("WRITE");
    assert_eq!(written.count as usize, MIB);
    assert_eq!(written.committed, StableHow4::FileSync4);
    let (data, eof) = session
        .read(&file.fh, &file.stateid, 0, MIB as u32)
        .await
        .expect("READ");
    assert!(eof);
    assert!(data == content, "the bytes read are the bytes written");
    let after = transport.stats();
    assert_eq!(
        after.calls_read_chunks - before.calls_read_chunks,
        1,
        "WRITE's data went in a Read chunk"
    );
    // A COMPOUND4res has no bound of its own, but these operations' results do: neither call
    // offered a Reply chunk (none came back long), WRITE's reply came inline and READ's
    // with its data in the Write chunk, the Write chunk alone (what Linux's server needs).
    assert_eq!(
        after.replies_received_long - before.replies_received_long,
        0
    );
    assert_eq!(
        after.replies_received_inline - before.replies_received_inline,
        1
    );
    assert_eq!(
        after.replies_received_write_chunks - before.replies_received_write_chunks,
        1
    );
    assert_eq!(
        served.write_chunk_replies(),
        1,
        "READ's data went in a Write chunk"
    );
    let too_big = session
        .write(
            &file.fh,
            &file.stateid,
            0,
            pattern(MIB + 1),
            StableHow4::Unstable4,
        )
        .await;
    assert!(matches!(
        too_big,
        Err(ClientError::TooLarge { what: "WRITE", .. })
    ));

    let looked = session.lookup(&root, &["data.bin"]).await.expect("LOOKUP");
    assert_eq!(looked.fh, file.fh);
    assert_eq!(looked.attrs.kind, NfsFtype4::Nf4reg);
    assert_eq!(looked.attrs.size, MIB as u64);
    assert!(looked.attrs.fileid.is_some());
    let missing = session.lookup(&root, &["nothing"]).await;
    assert!(
        matches!(
            missing,
            Err(ClientError::Status {
                op: NfsOpnum4::OpLookup,
                status: Nfsstat4::Nfs4errNoent
            })
        ),
        "{missing:?}"
    );
    let verifier = session.commit(&file.fh, 0, 0).await.expect("COMMIT");
    assert_eq!(verifier, written.verifier);
    session.close(&file.fh, &file.stateid).await.expect("CLOSE");
    let clientid = session.clientid();
    session
        .destroy()
        .await
        .expect("DESTROY_SESSION, DESTROY_CLIENTID");
    let st = served.fake.lock();
    assert!(st.sessions.is_empty());
    assert!(!st.clients.values().any(|&c| c == clientid));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_compounds_take_one_slot_each_and_follow_the_target() {
    let served = serve_fake(Fake::new(Conflict::WaitForReturn)).await;
    let session = Arc::new(served.session("client-c").await);
    let root = session.root_fh().await.expect("root");
    let file = session
        .open(&root, "f", OpenOptions::create(0o600))
        .await
        .expect("OPEN");
    session
        .write(
            &file.fh,
            &file.stateid,
            0,
            pattern(64 * 1024),
            StableHow4::FileSync4,
        )
        .await
        .expect("WRITE");
    let mut tasks = tokio::task::JoinSet::new();
    for k in 0..32u64 {
        let (session, file) = (session.clone(), file.clone());
        tasks.spawn(async move {
            let (data, _) = session
                .read(&file.fh, &file.stateid, k * 1024, 1024)
                .await
                .expect("READ");
            assert!(data[..] == pattern(64 * 1024)[k as usize * 1024..][..1024]);
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("a READ task");
    }
    {
        let st = served.fake.lock();
        assert_eq!(st.log.slot_overlaps, 0, "never two requests on one slot");
        assert!(st.log.highest_slot_used < FAKE_SLOTS);
    }
    assert_eq!(session.slots_usable(), FAKE_SLOTS);

    // A server granting more slots than asked, and lowering its target: the client keeps to
    // what it asked for, then to the target.
    let served = serve_fake(Fake::with(Conflict::WaitForReturn, 1000, Some(1))).await;
    let session = served.session("client-d").await;
    assert_eq!(
        session.granted().fore.ca_maxrequests,
        16,
        "bounded by the ask"
    );
    session.root_fh().await.expect("root");
    assert_eq!(session.slots_usable(), 2, "sr_target_highest_slotid 1");
    let session = Arc::new(session);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..16 {
        let session = session.clone();
        tasks.spawn(async move { session.root_fh().await.expect("root") });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("a task");
    }
    let st = served.fake.lock();
    assert!(
        st.log.highest_slot_used <= 1,
        "{}",
        st.log.highest_slot_used
    );
    assert_eq!(st.log.slot_overlaps, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_recalls_the_read_delegation_over_the_holders_backchannel() {
    let served = serve_fake(Fake::new(Conflict::WaitForReturn)).await;
    let (a, callbacks) = served
        .session_with_backchannel("client-a", RecallPolicy::Notify)
        .await;
    assert!(a.granted().backchannel(), "the fake took the connection");
    assert_eq!(a.granted().back.ca_maxrequests, 1);
    let b = served.session("client-b").await;
    let root = b.root_fh().await.expect("root");
    let created = b
        .open(&root, "shared", OpenOptions::create(0o644))
        .await
        .expect("create");
    b.close(&created.fh, &created.stateid).await.expect("CLOSE");

    let reader = a
        .open(
            &root,
            "shared",
            OpenOptions::read().want(DelegationWant::Read),
        )
        .await
        .expect("OPEN for reading");
    let delegation = reader.delegation.clone().expect("a read delegation");
    assert_eq!(delegation.kind, DelegationKind::Read);
    assert!(!a.status_flags().callback_path_down());

    let mut recalls = a.recalls().expect("the recalls");
    assert!(a.recalls().is_none(), "taken once");
    let a = Arc::new(a);
    let holder = tokio::spawn({
        let a = a.clone();
        async move {
            let recall = recalls.recv().await.expect("a recall");
            a.return_recalled(&recall).await.expect("DELEGRETURN");
            recall
        }
    });
    let writer = tokio::time::timeout(
        Duration::from_secs(10),
        b.open(&root, "shared", OpenOptions::write()),
    )
    .await
    .expect("the writer's OPEN in time")
    .expect("OPEN for writing");
    assert!(writer.delegation.is_none());
    let recall = holder.await.expect("the holder");
    assert_eq!(recall.stateid, delegation.stateid);
    assert_eq!(recall.fh, reader.fh);
    assert!(!recall.truncate);
    {
        let st = served.fake.lock();
        assert_eq!(st.log.delegreturns, 1);
    }
    assert_eq!(served.fake.recalls_seen().await, vec![Ok(Nfsstat4::Nfs4Ok)]);
    assert_eq!(callbacks.recalls_accepted(), 1);

    b.close(&writer.fh, &writer.stateid).await.expect("CLOSE");
    a.close(&reader.fh, &reader.stateid).await.expect("CLOSE");
    let a = Arc::try_unwrap(a).expect("the only handle");
    a.destroy().await.expect("destroy a");
    b.destroy().await.expect("destroy b");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_told_to_wait_retries_while_the_session_returns_the_delegation_itself() {
    let served = serve_fake(Fake::new(Conflict::AnswerDelay)).await;
    let (a, _callbacks) = served
        .session_with_backchannel("client-a", RecallPolicy::ReturnAutomatically)
        .await;
    assert!(a.recalls().is_none(), "the session's own task takes them");
    let b = served.session("client-b").await;
    let root = b.root_fh().await.expect("root");
    let created = b
        .open(&root, "shared", OpenOptions::create(0o644))
        .await
        .expect("create");
    b.close(&created.fh, &created.stateid).await.expect("CLOSE");
    let reader = a
        .open(
            &root,
            "shared",
            OpenOptions::read().want(DelegationWant::Read),
        )
        .await
        .expect("OPEN for reading");
    assert!(reader.delegation.is_some());

    let writer = b
        .open(&root, "shared", OpenOptions::write())
        .await
        .expect("OPEN for writing, after NFS4ERR_DELAY");
    assert!(writer.delegation.is_none());
    {
        let st = served.fake.lock();
        assert!(st.log.delays_answered >= 1, "the fake said NFS4ERR_DELAY");
        assert_eq!(st.log.delegreturns, 1);
    }
    assert_eq!(served.fake.recalls_seen().await, vec![Ok(Nfsstat4::Nfs4Ok)]);

    // Without retries the same conflict comes back as the OPEN's NFS4ERR_DELAY.
    let (c, _) = served
        .session_with_backchannel("client-c", RecallPolicy::Notify)
        .await;
    let held = c
        .open(
            &root,
            "shared",
            OpenOptions::read().want(DelegationWant::Read),
        )
        .await
        .expect("OPEN for reading");
    assert!(held.delegation.is_some());
    let (client, _) = served.connect(None).await;
    let d = Session::establish(client, config("client-d").delay(DelayPolicy::none()))
        .await
        .expect("session");
    let refused = d.open(&root, "shared", OpenOptions::write()).await;
    assert!(
        matches!(
            refused,
            Err(ClientError::Status {
                op: NfsOpnum4::OpOpen,
                status: Nfsstat4::Nfs4errDelay
            })
        ),
        "{refused:?}"
    );
}

/// CB_COMPOUND with raw bytes after its header: an operation number outside the protocol.
#[derive(Debug, Clone)]
struct RawCbArgs(Bytes);

impl Encode for RawCbArgs {
    fn encode(&self, enc: &mut Encoder) -> xdr::Result<()> {
        enc.put_fixed_opaque(&self.0, self.0.len())
    }
}

impl Decode for RawCbArgs {
    fn decode(dec: &mut Decoder) -> xdr::Result<Self> {
        let rest = dec.rest();
        dec.skip(rest.len())?;
        Ok(RawCbArgs(rest))
    }
}

struct RawCbCompound;

impl Procedure for RawCbCompound {
    const PROGRAM: u32 = nfs4_callback::PROGRAM;
    const VERSION: u32 = nfs4_callback::nfs_cb::VERSION;
    const PROCEDURE: u32 = 1;
    const NAME: &'static str = "CB_COMPOUND";
    type Args = RawCbArgs;
    type Result = CbCompound4res;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backchannel_judges_cb_sequence_and_answers_each_operation() {
    let served = serve_fake(Fake::new(Conflict::WaitForReturn)).await;
    let (a, callbacks) = served
        .session_with_backchannel("client-a", RecallPolicy::Notify)
        .await;
    let sid = a.sessionid().0.clone();
    let cb = served.fake.backchannel_of(a.sessionid());
    cb.cb_null().await.expect("CB_NULL");
    let compound = |minorversion, argarray| CbCompound4args {
        tag: Bytes::from_static(b"t"),
        minorversion,
        callback_ident: 0,
        argarray,
    };
    let call = |args: CbCompound4args| {
        let cb = cb.clone();
        async move { cb.cb_compound(args).await.expect("CB_COMPOUND") }
    };
    let getattr = || {
        NfsCbArgop4::OpCbGetattr(CbGetattr4args {
            fh: NfsFh4(Bytes::from_static(b"f")),
            attr_request: vec![1 << FATTR4_SIZE],
        })
    };

    let res = call(compound(0, vec![cb_sequence(&sid, 0, 1)])).await;
    assert_eq!(res.status, Nfsstat4::Nfs4errMinorVersMismatch);
    assert!(res.resarray.is_empty());

    let res = call(compound(1, vec![getattr()])).await;
    assert_eq!(res.status, Nfsstat4::Nfs4errOpNotInSession);
    assert_eq!(res.resarray.len(), 1);

    let other = Bytes::from_static(&[7; 16]);
    let res = call(compound(1, vec![cb_sequence(&other, 0, 1)])).await;
    assert_eq!(res.status, Nfsstat4::Nfs4errBadsession);

    let res = call(compound(1, vec![cb_sequence(&sid, 1, 1)])).await;
    assert_eq!(
        res.status,
        Nfsstat4::Nfs4errBadslot,
        "one back channel slot"
    );

    let first = call(compound(1, vec![cb_sequence(&sid, 0, 1), getattr()])).await;
    assert_eq!(first.status, Nfsstat4::Nfs4errBadhandle);
    match first.resarray.as_slice() {
        [NfsCbResop4::OpCbSequence(CbSequence4res::Nfs4Ok(ok)), NfsCbResop4::OpCbGetattr(_)] => {
            assert_eq!(ok.csr_sessionid.0, sid);
            assert_eq!((ok.csr_slotid, ok.csr_sequenceid), (0, 1));
            assert_eq!(
                (ok.csr_highest_slotid, ok.csr_target_highest_slotid),
                (0, 0)
            );
        }
        other => panic!("{other:?}"),
    }
    let replay = call(compound(1, vec![cb_sequence(&sid, 0, 1), getattr()])).await;
    assert_eq!(replay, first, "a retry gets the kept reply");
    let res = call(compound(1, vec![cb_sequence(&sid, 0, 3)])).await;
    assert_eq!(res.status, Nfsstat4::Nfs4errSeqMisordered);

    let layoutrecall = NfsCbArgop4::OpCbLayoutrecall(CbLayoutrecall4args {
        clora_type: Layouttype4::Layout4Nfsv41Files,
        clora_iomode: Layoutiomode4::Layoutiomode4Any,
        clora_changed: false,
        clora_recall: Layoutrecall4::Layoutrecall4All,
    });
    let res = call(compound(1, vec![cb_sequence(&sid, 0, 2), layoutrecall])).await;
    assert_eq!(res.status, Nfsstat4::Nfs4errNotsupp);
    let res = call(compound(
        1,
        vec![cb_sequence(&sid, 0, 3), NfsCbArgop4::OpCbIllegal],
    ))
    .await;
    assert_eq!(res.status, Nfsstat4::Nfs4errOpIllegal);
    let res = call(compound(
        1,
        vec![cb_sequence(&sid, 0, 4), cb_sequence(&sid, 0, 4)],
    ))
    .await;
    assert_eq!(res.status, Nfsstat4::Nfs4errSequencePos);
    let res = call(compound(
        1,
        vec![
            cb_sequence(&sid, 0, 5),
            getattr(),
            getattr(),
            getattr(),
            getattr(),
        ],
    ))
    .await;
    assert_eq!(
        res.status,
        Nfsstat4::Nfs4errTooManyOps,
        "4 operations granted"
    );

    // An operation number outside nfs_cb_opnum4 after CB_SEQUENCE.
    let mut enc = Encoder::new();
    enc.put_opaque_slice(b"raw", None).unwrap();
    enc.put_u32(1);
    enc.put_u32(0);
    enc.put_u32(2);
    cb_sequence(&sid, 0, 5).encode(&mut enc).unwrap();
    enc.put_u32(99);
    enc.put_u32(0xdead_beef);
    let raw = RawCbArgs(enc.finish().into_bytes());
    let res = cb
        .rpc()
        .with_program_number(nfs4_callback::PROGRAM, callbacks.program())
        .call::<RawCbCompound>(&raw)
        .await
        .expect("CB_COMPOUND with an unknown operation");
    assert_eq!(res.status, Nfsstat4::Nfs4errOpIllegal);
    assert!(matches!(
        res.resarray.as_slice(),
        [
            NfsCbResop4::OpCbSequence(CbSequence4res::Nfs4Ok(_)),
            NfsCbResop4::OpCbIllegal(_)
        ]
    ));

    // CB_RECALL_SLOT: the fore channel keeps to slot 0 from then on.
    let recall_slot = NfsCbArgop4::OpCbRecallSlot(CbRecallSlot4args {
        rsa_target_highest_slotid: 0,
    });
    let res = call(compound(1, vec![cb_sequence(&sid, 0, 6), recall_slot])).await;
    assert_eq!(res.status, Nfsstat4::Nfs4Ok);
    assert_eq!(a.slots_usable(), 1);
    assert!(callbacks.compounds_answered() >= 12);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_that_break_the_protocol_are_errors_and_the_session_carries_on() {
    let served = serve_fake(Fake::new(Conflict::WaitForReturn)).await;
    let session = served.session("client-h").await;
    let root = session.root_fh().await.expect("root");
    for how in [
        Misbehave::WrongSessionid,
        Misbehave::WrongSlot,
        Misbehave::ExtraResult,
        Misbehave::ForeignResult,
    ] {
        served.fake.misbehave_once(how);
        assert_protocol(session.root_fh().await, &format!("{how:?}"));
        assert_eq!(
            session.root_fh().await.expect("the next call"),
            root,
            "after {how:?}"
        );
    }
    let file = session
        .open(&root, "f", OpenOptions::create(0o600))
        .await
        .expect("OPEN");
    session
        .write(
            &file.fh,
            &file.stateid,
            0,
            pattern(100),
            StableHow4::FileSync4,
        )
        .await
        .expect("WRITE");
    served.fake.misbehave_once(Misbehave::LongRead);
    assert_protocol(
        session.read(&file.fh, &file.stateid, 0, 50).await,
        "READ longer than asked",
    );
    let (data, eof) = session
        .read(&file.fh, &file.stateid, 0, 200)
        .await
        .expect("READ");
    assert_eq!((data.len(), eof), (100, true));

    // A COMPOUND beyond the granted operations is not sent.
    let many = vec![NfsArgop4::OpPutrootfh; 16];
    assert!(matches!(
        session.compound(many).await,
        Err(ClientError::TooManyOps { ops: 17, max: 16 })
    ));
    // CREATE_SESSION granting no slot.
    let served = serve_fake(Fake::with(Conflict::WaitForReturn, 0, None)).await;
    let (client, _) = served.connect(None).await;
    assert_protocol(
        Session::establish(client, config("client-z")).await,
        "no slots",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_over_tcp_works_without_a_backchannel_and_refuses_one() {
    let fake = Fake::new(Conflict::WaitForReturn);
    let server = TcpServer::bind("127.0.0.1:0", fake_server(&fake), TcpConfig::new())
        .await
        .expect("TCP listen");
    let client = rpcrdma::rpc::tcp::connect(server.local_addr())
        .await
        .expect("TCP connect");
    let session = Session::establish(NfsV4Client::new(client.clone()), config("client-t"))
        .await
        .expect("session over TCP");
    let root = session.root_fh().await.expect("root");
    let file = session
        .open(&root, "t", OpenOptions::create(0o600))
        .await
        .expect("OPEN");
    session
        .write(
            &file.fh,
            &file.stateid,
            0,
            pattern(4096),
            StableHow4::FileSync4,
        )
        .await
        .expect("WRITE");
    let (data, _) = session
        .read(&file.fh, &file.stateid, 0, 4096)
        .await
        .expect("READ");
    assert!(data == pattern(4096));
    assert!(session.status_flags().callback_path_down());
    session.close(&file.fh, &file.stateid).await.expect("CLOSE");
    session.destroy().await.expect("destroy");

    let refused = Session::establish(
        NfsV4Client::new(client),
        config("client-u").backchannel(CallbackService::new()),
    )
    .await;
    assert!(
        matches!(refused, Err(ClientError::Config(_))),
        "{refused:?}"
    );
}

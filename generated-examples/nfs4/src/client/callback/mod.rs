//! The client's side of the backchannel (RFC 5661 section 20; the connection as back channel,
//! section 2.10.3.1; over RPC-over-RDMA, bi-directional RPC, RFC 8166 section 8): the
//! server's CB_NULL and CB_COMPOUND, answered on the connection the session was created on,
//! against the client's back channel slot table and reply cache (section 2.10.6.1, [`slots`]).
//! [`CallbackService`] says what each operation gets.

mod program;
mod results;
mod slots;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use rpcrdma::rpc::{CallContext, ReplyError, Server, ServerBuilder};
use tokio::sync::mpsc;

use super::config::DEFAULT_CB_PROGRAM;
use super::slots::SlotTable;
use crate::nfs4::nfs4_callback::nfs_cb::NfsCbServer;
use crate::nfs4::{
    CbCompound4args, CbCompound4res, CbGetattr4res, CbRecall4res, CbRecallSlot4res,
    CbSequence4args, CbSequence4res, CbSequence4resok, NfsCbArgop4, NfsCbResop4, NfsFh4, Nfsstat4,
    Sessionid4, Stateid4,
};
use slots::{Begin, CbSlots};

/// The most recalls that wait for the application to read them; a CB_RECALL beyond is
/// answered `NFS4ERR_DELAY` (the server sends it again later).
pub const RECALL_QUEUE: usize = 64;

/// A delegation the server recalled (CB_RECALL, RFC 5661 section 20.2): return it with
/// DELEGRETURN once what was cached under it is written back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recall {
    /// The delegation's stateid.
    pub stateid: Stateid4,
    /// The file's handle.
    pub fh: NfsFh4,
    /// The file is about to be truncated to zero: cached modified data need not be written.
    pub truncate: bool,
}

/// The session a service answers for, once established.
#[derive(Debug)]
struct Binding {
    sessionid: Sessionid4,
    slots: CbSlots,
    /// The granted back channel `ca_maxoperations`.
    max_ops: u32,
    /// The fore channel's slots, for CB_RECALL_SLOT.
    fore: Weak<SlotTable>,
}

struct Inner {
    program: u32,
    binding: Mutex<Option<Binding>>,
    recalls: mpsc::Sender<Recall>,
    receiver: Mutex<Option<mpsc::Receiver<Recall>>>,
    compounds: AtomicU64,
    recalls_taken: AtomicU64,
}

/// The client's backchannel service: answers the server's CB_NULL and CB_COMPOUND for one
/// session. Cheap to clone; clones share the service.
///
/// A CB_COMPOUND must open with CB_SEQUENCE (RFC 5661 section 20.9), whose session ID, slot
/// and sequence ID are judged as section 2.10.6.1 says, against this client's own back
/// channel slots with their reply cache: the next sequence ID runs, the last one gets the kept
/// reply, others `NFS4ERR_SEQ_MISORDERED`; a foreign session `NFS4ERR_BADSESSION`, a slot
/// beyond those granted `NFS4ERR_BADSLOT`, more operations than granted
/// `NFS4ERR_TOO_MANY_OPS`. Then:
///
/// - CB_RECALL (section 20.2): answered `NFS4_OK` and handed on as a [`Recall`] to the
///   application ([`Session::recalls`](super::Session::recalls)) or to the session's own task
///   ([`RecallPolicy`](super::RecallPolicy)), which sends DELEGRETURN; `NFS4ERR_DELAY` while
///   [`RECALL_QUEUE`] recalls wait unread.
/// - CB_RECALL_SLOT (section 20.8, REQUIRED of every client): the fore channel stops using
///   the slots above the target.
/// - CB_GETATTR (section 20.1): `NFS4ERR_BADHANDLE`, since this client keeps no attributes
///   under its delegations.
/// - Any other operation of the protocol: `NFS4ERR_NOTSUPP`. An operation number outside it:
///   `OP_CB_ILLEGAL` with `NFS4ERR_OP_ILLEGAL` (section 20.13), the operations after it
///   unread (their arguments cannot be told apart). A minor version other than 1:
///   `NFS4ERR_MINOR_VERS_MISMATCH` with no results. A first operation other than CB_SEQUENCE:
///   `NFS4ERR_OP_NOT_IN_SESSION`; CB_SEQUENCE elsewhere: `NFS4ERR_SEQUENCE_POS`.
///
/// [`CallbackService::server`] builds the `rpc::Server` that the transport's
/// `backchannel(server, credits)` (RPC-over-RDMA) or `backchannel(server)` (TCP) takes. The service exists before the connection and is
/// bound to its session by [`Session::establish`](super::Session::establish); a CB_COMPOUND
/// that comes before that (the server may call as soon as CREATE_SESSION is answered) is
/// answered `NFS4ERR_DELAY`, so that the server sends it again. A recall may also come before
/// the OPEN reply that granted the delegation is read (section 2.10.6.3): the [`Recall`]
/// carries the stateid and handle, so returning it needs nothing from that reply.
///
/// It implements the generated [`NfsCbServer`], so `nfs_cb::register` can host it too; the
/// server of [`CallbackService::server`] decodes CB_COMPOUND more leniently than the
/// generated code, to answer an unknown operation as RFC 5661 section 20.13 asks rather than
/// with GARBAGE_ARGS.
#[derive(Clone)]
pub struct CallbackService {
    inner: Arc<Inner>,
}

impl fmt::Debug for CallbackService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallbackService")
            .field("program", &self.inner.program)
            .field(
                "session",
                &self.binding().as_ref().map(|b| b.sessionid.clone()),
            )
            .finish()
    }
}

impl Default for CallbackService {
    fn default() -> Self {
        CallbackService::new()
    }
}

impl CallbackService {
    /// A service for callback program [`DEFAULT_CB_PROGRAM`].
    pub fn new() -> CallbackService {
        CallbackService::with_program(DEFAULT_CB_PROGRAM)
    }

    /// A service for callback program `program` (announced as `csa_cb_program`).
    pub fn with_program(program: u32) -> CallbackService {
        let (recalls, receiver) = mpsc::channel(RECALL_QUEUE);
        CallbackService {
            inner: Arc::new(Inner {
                program,
                binding: Mutex::new(None),
                recalls,
                receiver: Mutex::new(Some(receiver)),
                compounds: AtomicU64::new(0),
                recalls_taken: AtomicU64::new(0),
            }),
        }
    }

    /// The callback program number.
    pub fn program(&self) -> u32 {
        self.inner.program
    }

    /// An `rpc::Server` hosting this service, for the transport's backward direction
    /// (`RdmaConfig::backchannel(server, credits)`, with as many credits as back channel
    /// slots; over TCP `TcpConfig::backchannel(server)`).
    pub fn server(&self) -> Server {
        let mut builder = Server::builder();
        self.add_to(&mut builder);
        builder.build()
    }

    /// Hosts this service on `builder` (as [`server`](Self::server) does).
    pub fn add_to(&self, builder: &mut ServerBuilder) {
        builder.add(program::CallbackProgram(self.clone()));
    }

    /// CB_COMPOUNDs answered so far (replays included).
    pub fn compounds_answered(&self) -> u64 {
        self.inner.compounds.load(Ordering::Relaxed)
    }

    /// CB_RECALLs accepted so far.
    pub fn recalls_accepted(&self) -> u64 {
        self.inner.recalls_taken.load(Ordering::Relaxed)
    }

    fn binding(&self) -> MutexGuard<'_, Option<Binding>> {
        self.inner.binding.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Answers for session `sessionid` from now on, with `slots` back channel slots and
    /// `max_ops` operations per CB_COMPOUND (what CREATE_SESSION granted, bounded by what was
    /// asked); `fore` is the session's fore channel, for CB_RECALL_SLOT.
    pub(crate) fn bind(
        &self,
        sessionid: Sessionid4,
        slots: u32,
        max_ops: u32,
        fore: Weak<SlotTable>,
    ) {
        *self.binding() = Some(Binding {
            sessionid,
            slots: CbSlots::new(slots),
            max_ops,
            fore,
        });
    }

    /// Stops answering for any session (CB_SEQUENCE then gets `NFS4ERR_BADSESSION`).
    pub(crate) fn unbind(&self) {
        *self.binding() = None;
    }

    /// The receiving end of the recalls, the first time it is asked for.
    pub(crate) fn take_recalls(&self) -> Option<mpsc::Receiver<Recall>> {
        self.inner
            .receiver
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// Answers a decoded CB_COMPOUND (the rules are on [`CallbackService`]).
    pub fn answer(&self, args: CbCompound4args) -> CbCompound4res {
        self.answer_decoded(args, None)
    }

    /// Answers a CB_COMPOUND whose operation after `args.argarray` had the number `unknown`,
    /// outside the protocol (its arguments and those after it unread).
    pub(crate) fn answer_decoded(
        &self,
        args: CbCompound4args,
        unknown: Option<u32>,
    ) -> CbCompound4res {
        self.inner.compounds.fetch_add(1, Ordering::Relaxed);
        let tag = args.tag.clone();
        let reply = |status, resarray| CbCompound4res {
            status,
            tag: tag.clone(),
            resarray,
        };
        // RFC 5661 section 20: this client speaks minor version 1 on its back channel.
        if args.minorversion != 1 {
            return reply(Nfsstat4::Nfs4errMinorVersMismatch, Vec::new());
        }
        let ops = args.argarray;
        let Some(first) = ops.first() else {
            return match unknown {
                Some(_) => reply(Nfsstat4::Nfs4errOpIllegal, vec![results::illegal()]),
                None => reply(Nfsstat4::Nfs4Ok, Vec::new()),
            };
        };
        let NfsCbArgop4::OpCbSequence(sequence) = first else {
            // RFC 5661 section 20.9.3: every CB_COMPOUND of a session opens with CB_SEQUENCE;
            // without it, NFS4ERR_OP_NOT_IN_SESSION (section 15.1.3, compound structure errors).
            let status = Nfsstat4::Nfs4errOpNotInSession;
            return reply(status, vec![results::failed(first, status)]);
        };
        let refuse = |status| {
            let res = NfsCbResop4::OpCbSequence(CbSequence4res::Default {
                discriminant: status,
            });
            reply(status, vec![res])
        };
        let total = ops.len() + usize::from(unknown.is_some());
        let mut guard = self.binding();
        let Some(binding) = guard.as_mut() else {
            return refuse(Nfsstat4::Nfs4errDelay);
        };
        let resok = match binding.judge(sequence, total) {
            Err(status) => return refuse(status),
            Ok(Judged::Replay(cached)) => return cached,
            Ok(Judged::New(resok)) => resok,
        };
        let mut resarray = vec![NfsCbResop4::OpCbSequence(CbSequence4res::Nfs4Ok(resok))];
        let mut status = Nfsstat4::Nfs4Ok;
        for op in &ops[1..] {
            let result = self.run(op, binding);
            status = results::status(&result);
            resarray.push(result);
            if status != Nfsstat4::Nfs4Ok {
                break;
            }
        }
        if status == Nfsstat4::Nfs4Ok && unknown.is_some() {
            status = Nfsstat4::Nfs4errOpIllegal;
            resarray.push(results::illegal());
        }
        let answer = reply(status, resarray);
        binding.slots.finish(sequence.csa_slotid, &answer);
        answer
    }

    /// Runs one operation after CB_SEQUENCE.
    fn run(&self, op: &NfsCbArgop4, binding: &Binding) -> NfsCbResop4 {
        match op {
            NfsCbArgop4::OpCbSequence(_) => results::failed(op, Nfsstat4::Nfs4errSequencePos),
            NfsCbArgop4::OpCbRecall(recall) => {
                let status = self.deliver(Recall {
                    stateid: recall.stateid.clone(),
                    fh: recall.fh.clone(),
                    truncate: recall.truncate,
                });
                NfsCbResop4::OpCbRecall(CbRecall4res { status })
            }
            NfsCbArgop4::OpCbRecallSlot(slot) => {
                if let Some(fore) = binding.fore.upgrade() {
                    fore.lower_limit(slot.rsa_target_highest_slotid);
                }
                NfsCbResop4::OpCbRecallSlot(CbRecallSlot4res {
                    rsr_status: Nfsstat4::Nfs4Ok,
                })
            }
            NfsCbArgop4::OpCbGetattr(_) => NfsCbResop4::OpCbGetattr(CbGetattr4res::Default {
                discriminant: Nfsstat4::Nfs4errBadhandle,
            }),
            NfsCbArgop4::OpCbIllegal => results::illegal(),
            other => results::failed(other, Nfsstat4::Nfs4errNotsupp),
        }
    }

    /// Queues a recall for whoever returns delegations.
    fn deliver(&self, recall: Recall) -> Nfsstat4 {
        match self.inner.recalls.try_send(recall) {
            Ok(()) => {
                self.inner.recalls_taken.fetch_add(1, Ordering::Relaxed);
                Nfsstat4::Nfs4Ok
            }
            Err(mpsc::error::TrySendError::Full(_)) => Nfsstat4::Nfs4errDelay,
            // Nobody will return it: the server revokes the delegation when the recall times
            // out (RFC 5661 section 10.4.6); the client acknowledges the recall all the same.
            Err(mpsc::error::TrySendError::Closed(_)) => Nfsstat4::Nfs4Ok,
        }
    }
}

/// A CB_SEQUENCE accepted: a new request (with its result) or a retry (with its reply).
enum Judged {
    New(CbSequence4resok),
    Replay(CbCompound4res),
}

impl Binding {
    /// Judges a CB_SEQUENCE of a CB_COMPOUND of `total` operations (RFC 5661 section 20.9.3).
    fn judge(&mut self, seq: &CbSequence4args, total: usize) -> Result<Judged, Nfsstat4> {
        if seq.csa_sessionid != self.sessionid {
            return Err(Nfsstat4::Nfs4errBadsession);
        }
        if total > self.max_ops as usize {
            return Err(Nfsstat4::Nfs4errTooManyOps);
        }
        match self.slots.begin(seq.csa_slotid, seq.csa_sequenceid) {
            Begin::Refuse(status) => Err(status),
            Begin::Replay(reply) => Ok(Judged::Replay(reply)),
            Begin::New => Ok(Judged::New(CbSequence4resok {
                csr_sessionid: self.sessionid.clone(),
                csr_sequenceid: seq.csa_sequenceid,
                csr_slotid: seq.csa_slotid,
                csr_highest_slotid: self.slots.highest(),
                csr_target_highest_slotid: self.slots.highest(),
            })),
        }
    }
}

impl NfsCbServer for CallbackService {
    async fn cb_null(&self, _ctx: CallContext) -> Result<(), ReplyError> {
        Ok(())
    }

    async fn cb_compound(
        &self,
        _ctx: CallContext,
        args: CbCompound4args,
    ) -> Result<CbCompound4res, ReplyError> {
        Ok(self.answer(args))
    }
}

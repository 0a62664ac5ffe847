//! The session and its COMPOUNDs (RFC 5661 section 2.10): every COMPOUND opens with SEQUENCE
//! (section 18.46) on a slot of the fore channel, and its reply is checked before use.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use rpcrdma::rpc::CallOptions;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::bounds;
use super::callback::{CallbackService, Recall};
use super::config::{DelayPolicy, SessionConfig, COMPOUND_HEADROOM};
use super::error::ClientError;
use super::ops::small_reply;
use super::reply::{check_shape, into_result};
use super::slots::{Lease, Outcome, SlotTable};
use crate::nfs4::nfs4_program::nfs_v4::{NfsV4Client, Nfsproc4Compound};
use crate::nfs4::{
    ChannelAttrs4, Clientid4, Compound4args, Compound4res, DestroyClientid4args,
    DestroySession4args, NfsArgop4, NfsOpnum4, NfsResop4, Nfsstat4, Sequence4args, Sequence4res,
    Sequence4resok, ServerOwner4, Sessionid4, CREATE_SESSION4_FLAG_CONN_BACK_CHAN,
    CREATE_SESSION4_FLAG_PERSIST, SEQ4_STATUS_ADMIN_STATE_REVOKED, SEQ4_STATUS_CB_PATH_DOWN,
    SEQ4_STATUS_CB_PATH_DOWN_SESSION, SEQ4_STATUS_EXPIRED_ALL_STATE_REVOKED,
    SEQ4_STATUS_EXPIRED_SOME_STATE_REVOKED, SEQ4_STATUS_RECALLABLE_STATE_REVOKED,
};

/// What the server granted when the session was established (EXCHANGE_ID, RFC 5661 section
/// 18.35; CREATE_SESSION, section 18.36), every count bounded by what the client asked for.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Granted {
    /// `eir_clientid`.
    pub clientid: Clientid4,
    /// `csr_sessionid`.
    pub sessionid: Sessionid4,
    /// `eir_flags` (`EXCHGID4_FLAG_CONFIRMED_R`: the server knew this client already).
    pub exchange_flags: u32,
    /// `eir_server_owner`: two servers with the same major ID share client state.
    pub server_owner: ServerOwner4,
    /// `eir_server_scope`.
    pub server_scope: Bytes,
    /// `csr_flags`, only the bits the client asked for.
    pub flags: u32,
    /// `csr_fore_chan_attrs`, bounded by the client's.
    pub fore: ChannelAttrs4,
    /// `csr_back_chan_attrs`, bounded by the client's.
    pub back: ChannelAttrs4,
}

impl Granted {
    /// The server took this connection as the session's back channel
    /// (`CREATE_SESSION4_FLAG_CONN_BACK_CHAN`).
    pub fn backchannel(&self) -> bool {
        self.flags & CREATE_SESSION4_FLAG_CONN_BACK_CHAN != 0
    }

    /// The session's reply cache survives a server restart (`CREATE_SESSION4_FLAG_PERSIST`).
    pub fn persistent(&self) -> bool {
        self.flags & CREATE_SESSION4_FLAG_PERSIST != 0
    }
}

/// `sr_status_flags` of the latest SEQUENCE reply (RFC 5661 section 18.46.3): conditions the
/// server wants the client to know about.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SequenceStatus(pub u32);

impl SequenceStatus {
    /// `flag` (a `SEQ4_STATUS_*` constant) is set.
    pub fn contains(self, flag: u32) -> bool {
        self.0 & flag != 0
    }

    /// The server has no working back channel to this client
    /// (`SEQ4_STATUS_CB_PATH_DOWN` or `SEQ4_STATUS_CB_PATH_DOWN_SESSION`): no delegations or
    /// layouts will be recalled, so the server grants none.
    pub fn callback_path_down(self) -> bool {
        self.contains(SEQ4_STATUS_CB_PATH_DOWN | SEQ4_STATUS_CB_PATH_DOWN_SESSION)
    }

    /// Some of the client's state was revoked (expired, by an administrator, or recallable
    /// state not returned in time): TEST_STATEID and FREE_STATEID sort it out.
    pub fn state_revoked(self) -> bool {
        self.contains(
            SEQ4_STATUS_EXPIRED_ALL_STATE_REVOKED
                | SEQ4_STATUS_EXPIRED_SOME_STATE_REVOKED
                | SEQ4_STATUS_ADMIN_STATE_REVOKED
                | SEQ4_STATUS_RECALLABLE_STATE_REVOKED,
        )
    }
}

/// The part of a session its own tasks share (returning recalled delegations, renewing the
/// lease).
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) client: NfsV4Client,
    pub(crate) granted: Granted,
    pub(crate) slots: Arc<SlotTable>,
    pub(crate) open_owner: Bytes,
    status_flags: AtomicU32,
    delay: DelayPolicy,
    tag: Bytes,
}

/// What a SEQUENCE result says about its request.
enum Sequenced {
    /// SEQUENCE succeeded.
    Done(Sequence4resok),
    /// SEQUENCE failed (or the COMPOUND was refused before it) with this status.
    Failed(Nfsstat4),
}

impl Shared {
    pub(crate) fn new(client: NfsV4Client, granted: Granted, config: &SessionConfig) -> Shared {
        let slots = Arc::new(SlotTable::new(granted.fore.ca_maxrequests));
        Shared {
            client,
            granted,
            slots,
            open_owner: config.open_owner.clone(),
            status_flags: AtomicU32::new(0),
            delay: config.delay,
            tag: config.tag.clone(),
        }
    }

    /// Sends `ops` after a SEQUENCE, retrying `NFS4ERR_DELAY` as the [`DelayPolicy`] says;
    /// the reply with the SEQUENCE result taken out (`resarray[i]` answers `ops[i]`).
    pub(crate) async fn compound(
        &self,
        ops: Vec<NfsArgop4>,
        options: impl Fn() -> CallOptions,
    ) -> Result<Compound4res, ClientError> {
        let max = self.granted.fore.ca_maxoperations;
        if ops.len() + 1 > max as usize {
            return Err(ClientError::TooManyOps {
                ops: ops.len() + 1,
                max,
            });
        }
        // RFC 5661 section 18.46.3: ask the server to keep the whole reply of a request that
        // changes state, so that a retry does not run it twice.
        let cachethis =
            self.granted.fore.ca_maxresponsesize_cached > 0 && ops.iter().any(changes_state);
        let mut argarray = Vec::with_capacity(ops.len() + 1);
        argarray.push(NfsArgop4::OpSequence(Sequence4args::default()));
        argarray.extend(ops);
        let mut args = Compound4args {
            tag: self.tag.clone(),
            minorversion: 1,
            argarray,
        };
        // Over RPC-over-RDMA a reply known to fit inline needs no Reply chunk.
        let inline = bounds::inline_results(&args);
        let options = || match inline {
            Some(len) => options().max_inline_results(len),
            None => options(),
        };
        let mut delays = 0;
        let mut rewound = false;
        loop {
            let lease = self.slots.acquire().await;
            args.argarray[0] = NfsArgop4::OpSequence(Sequence4args {
                sa_sessionid: self.granted.sessionid.clone(),
                sa_sequenceid: lease.seq,
                sa_slotid: lease.slot,
                sa_highest_slotid: lease.highest_in_use,
                sa_cachethis: cachethis,
            });
            let call = self
                .client
                .rpc()
                .call_with::<Nfsproc4Compound>(&args, options());
            let mut res = match call.await {
                Ok(res) => res,
                Err(e) => {
                    lease.complete(Outcome::Uncertain);
                    return Err(e.into());
                }
            };
            let sequenced = match self.sequenced(&args.argarray, &lease, &res) {
                Ok(s) => s,
                Err(e) => {
                    lease.complete(Outcome::Uncertain);
                    return Err(e);
                }
            };
            let retry_delay = delays < self.delay.retries;
            match sequenced {
                Sequenced::Failed(Nfsstat4::Nfs4errSeqMisordered)
                    if lease.uncertain && !rewound =>
                {
                    lease.complete(Outcome::Rewind);
                    rewound = true;
                }
                Sequenced::Failed(Nfsstat4::Nfs4errDelay) if retry_delay => {
                    lease.complete(Outcome::NotAdvanced);
                    tokio::time::sleep(self.delay.wait(delays)).await;
                    delays += 1;
                }
                Sequenced::Failed(status) => {
                    lease.complete(Outcome::NotAdvanced);
                    return Err(ClientError::Status {
                        op: NfsOpnum4::OpSequence,
                        status,
                    });
                }
                Sequenced::Done(ok) => {
                    lease.complete(Outcome::Advanced {
                        highest: ok.sr_highest_slotid,
                        target: ok.sr_target_highest_slotid,
                    });
                    self.status_flags
                        .store(ok.sr_status_flags, Ordering::Relaxed);
                    // Sent again only when nothing before the delayed operation changed
                    // state: running that again could fail where it succeeded (a REMOVE) or
                    // do it twice.
                    let failed_at = res.resarray.len().saturating_sub(1);
                    let done_before = &args.argarray[1..failed_at.max(1)];
                    if res.status == Nfsstat4::Nfs4errDelay
                        && retry_delay
                        && !done_before.iter().any(changes_state)
                    {
                        tokio::time::sleep(self.delay.wait(delays)).await;
                        delays += 1;
                        continue;
                    }
                    res.resarray.remove(0);
                    return Ok(res);
                }
            }
        }
    }

    /// Checks a reply to `args` sent on `lease` and reads its SEQUENCE result: it must be for
    /// this session, slot and sequence ID (RFC 5661 section 18.46.3).
    fn sequenced(
        &self,
        args: &[NfsArgop4],
        lease: &Lease<'_>,
        res: &Compound4res,
    ) -> Result<Sequenced, ClientError> {
        check_shape(args, res)?;
        let ok = match res.resarray.first() {
            // Refused before SEQUENCE ran (NFS4ERR_MINOR_VERS_MISMATCH, say).
            None => return Ok(Sequenced::Failed(res.status)),
            Some(NfsResop4::OpSequence(Sequence4res::Nfs4Ok(ok))) => ok,
            Some(NfsResop4::OpSequence(Sequence4res::Default { discriminant })) => {
                return Ok(Sequenced::Failed(*discriminant))
            }
            Some(other) => {
                return Err(ClientError::protocol(format!(
                    "the first result is {:?}, not SEQUENCE",
                    other.discriminant()
                )))
            }
        };
        if ok.sr_sessionid != self.granted.sessionid {
            return Err(ClientError::protocol(format!(
                "SEQUENCE answered for session {:02x?}, not {:02x?}",
                &ok.sr_sessionid.0[..],
                &self.granted.sessionid.0[..]
            )));
        }
        if (ok.sr_slotid, ok.sr_sequenceid) != (lease.slot, lease.seq) {
            return Err(ClientError::protocol(format!(
                "SEQUENCE answered slot {} sequence {}, the request was slot {} sequence {}",
                ok.sr_slotid, ok.sr_sequenceid, lease.slot, lease.seq
            )));
        }
        Ok(Sequenced::Done(ok.clone()))
    }

    /// `sr_status_flags` of the latest SEQUENCE reply.
    pub(crate) fn status_flags(&self) -> SequenceStatus {
        SequenceStatus(self.status_flags.load(Ordering::Relaxed))
    }

    /// Sends `ops` without SEQUENCE (EXCHANGE_ID, CREATE_SESSION, DESTROY_SESSION or
    /// DESTROY_CLIENTID as the COMPOUND's only operation: RFC 5661 sections 18.35.3, 18.36.3,
    /// 18.37.3 and 18.50.3), retrying `NFS4ERR_DELAY`; a failed operation is an error.
    pub(crate) async fn sessionless(
        client: &NfsV4Client,
        tag: &Bytes,
        delay: &DelayPolicy,
        ops: Vec<NfsArgop4>,
    ) -> Result<Compound4res, ClientError> {
        let first = ops
            .first()
            .map(NfsArgop4::discriminant)
            .unwrap_or(NfsOpnum4::OpIllegal);
        let args = Compound4args {
            tag: tag.clone(),
            minorversion: 1,
            argarray: ops,
        };
        let mut delays = 0;
        loop {
            let res = client
                .rpc()
                .call_with::<Nfsproc4Compound>(&args, small_reply())
                .await?;
            check_shape(&args.argarray, &res)?;
            if res.status == Nfsstat4::Nfs4errDelay && delays < delay.retries {
                tokio::time::sleep(delay.wait(delays)).await;
                delays += 1;
                continue;
            }
            return into_result(res, first);
        }
    }
}

/// Operations whose retry must not run again: the server keeps their COMPOUND's whole reply
/// when asked (`sa_cachethis`).
fn changes_state(op: &NfsArgop4) -> bool {
    matches!(
        op,
        NfsArgop4::OpOpen(_)
            | NfsArgop4::OpClose(_)
            | NfsArgop4::OpOpenDowngrade(_)
            | NfsArgop4::OpWrite(_)
            | NfsArgop4::OpCommit(_)
            | NfsArgop4::OpCreate(_)
            | NfsArgop4::OpRemove(_)
            | NfsArgop4::OpRename(_)
            | NfsArgop4::OpLink(_)
            | NfsArgop4::OpSetattr(_)
            | NfsArgop4::OpLock(_)
            | NfsArgop4::OpLocku(_)
            | NfsArgop4::OpDelegreturn(_)
            | NfsArgop4::OpDelegpurge(_)
            | NfsArgop4::OpFreeStateid(_)
            | NfsArgop4::OpReclaimComplete(_)
            | NfsArgop4::OpLayoutget(_)
            | NfsArgop4::OpLayoutcommit(_)
            | NfsArgop4::OpLayoutreturn(_)
    )
}

/// An NFSv4.1 session: a client ID, the session the server created for it, the fore channel's
/// slots, and, when asked for and granted, the back channel on the same connection.
///
/// Methods take `&self`: concurrent callers each get a slot (as many at once as the server
/// granted) and wait for one when all are busy.
#[derive(Debug)]
pub struct Session {
    pub(crate) shared: Arc<Shared>,
    pub(crate) callbacks: Option<CallbackService>,
    pub(crate) recalls: Mutex<Option<mpsc::Receiver<Recall>>>,
    pub(crate) tasks: Vec<JoinHandle<()>>,
}

impl Session {
    /// Establishes a session over `client` (see [`establish`](super::establish)): EXCHANGE_ID,
    /// CREATE_SESSION and RECLAIM_COMPLETE.
    pub async fn establish(
        client: NfsV4Client,
        config: SessionConfig,
    ) -> Result<Session, ClientError> {
        super::establish::establish(client, config).await
    }

    /// What the server granted.
    pub fn granted(&self) -> &Granted {
        &self.shared.granted
    }

    /// The session ID.
    pub fn sessionid(&self) -> &Sessionid4 {
        &self.shared.granted.sessionid
    }

    /// The client ID.
    pub fn clientid(&self) -> Clientid4 {
        self.shared.granted.clientid
    }

    /// `sr_status_flags` of the latest SEQUENCE reply.
    pub fn status_flags(&self) -> SequenceStatus {
        self.shared.status_flags()
    }

    /// The fore channel's slots in use at most now (the server's `sr_highest_slotid` and
    /// `sr_target_highest_slotid`, within the slots granted), plus one.
    pub fn slots_usable(&self) -> u32 {
        self.shared.slots.limit() + 1
    }

    /// The largest WRITE this session sends: the granted `ca_maxrequestsize` less
    /// [`COMPOUND_HEADROOM`].
    pub fn max_write(&self) -> u32 {
        self.shared
            .granted
            .fore
            .ca_maxrequestsize
            .saturating_sub(COMPOUND_HEADROOM)
    }

    /// The largest READ this session asks for: the granted `ca_maxresponsesize` less
    /// [`COMPOUND_HEADROOM`].
    pub fn max_read(&self) -> u32 {
        self.shared
            .granted
            .fore
            .ca_maxresponsesize
            .saturating_sub(COMPOUND_HEADROOM)
    }

    /// The RPC client the session calls through.
    pub fn client(&self) -> &NfsV4Client {
        &self.shared.client
    }

    /// The backchannel service answering for this session, if the configuration had one.
    pub fn callbacks(&self) -> Option<&CallbackService> {
        self.callbacks.as_ref()
    }

    /// The delegations the server recalls, in order (with [`RecallPolicy::Notify`]; the first
    /// call takes the receiver, later ones get `None`, as does a session without a
    /// backchannel or whose recalls its own task returns).
    ///
    /// [`RecallPolicy::Notify`]: super::RecallPolicy::Notify
    pub fn recalls(&self) -> Option<mpsc::Receiver<Recall>> {
        self.recalls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// Sends `ops` in one COMPOUND after a SEQUENCE (RFC 5661 section 18.46) on a free slot.
    ///
    /// The reply is checked first: the SEQUENCE result must be for this session, slot and
    /// sequence ID, and there must be one result per operation evaluated, each for its
    /// operation; anything else is [`ClientError::Protocol`]. The SEQUENCE result updates the
    /// slot table and [`status_flags`](Self::status_flags), and is taken out of the reply:
    /// `resarray[i]` answers `ops[i]`. A COMPOUND answered `NFS4ERR_DELAY` is sent again as the
    /// configuration's [`DelayPolicy`] says, unless an operation before the delayed one
    /// changed state (it would run twice). An operation's failure is in the reply's status
    /// (the typed helpers turn it into [`ClientError::Status`]); a SEQUENCE failure is
    /// [`ClientError::Status`] with `op` `OP_SEQUENCE`.
    ///
    /// Over RPC-over-RDMA the reply may take the whole granted `ca_maxresponsesize`: the call
    /// offers a Reply chunk that large.
    pub async fn compound(&self, ops: Vec<NfsArgop4>) -> Result<Compound4res, ClientError> {
        let max = self.shared.granted.fore.ca_maxresponsesize as usize;
        self.shared
            .compound(ops, || CallOptions::new().max_reply(max))
            .await
    }

    /// A COMPOUND of SEQUENCE alone: renews the lease (RFC 5661 section 8.3) and refreshes
    /// [`status_flags`](Self::status_flags).
    pub async fn renew(&self) -> Result<(), ClientError> {
        let res = self.shared.compound(Vec::new(), small_reply).await?;
        into_result(res, NfsOpnum4::OpSequence).map(drop)
    }

    /// Returns a recalled delegation (PUTFH + DELEGRETURN, RFC 5661 section 18.6).
    pub async fn return_recalled(&self, recall: &Recall) -> Result<(), ClientError> {
        self.delegreturn(&recall.fh, &recall.stateid).await
    }

    /// Ends the session and the client ID: DESTROY_SESSION (RFC 5661 section 18.37), then
    /// DESTROY_CLIENTID (section 18.50), each alone in its COMPOUND. The client's opens and
    /// delegations should be closed and returned first (otherwise `NFS4ERR_CLIENTID_BUSY`).
    pub async fn destroy(mut self) -> Result<(), ClientError> {
        self.stop_tasks();
        let shared = &self.shared;
        let destroy_session = NfsArgop4::OpDestroySession(DestroySession4args {
            dsa_sessionid: shared.granted.sessionid.clone(),
        });
        Shared::sessionless(
            &shared.client,
            &shared.tag,
            &shared.delay,
            vec![destroy_session],
        )
        .await?;
        if let Some(callbacks) = &self.callbacks {
            callbacks.unbind();
        }
        let destroy_clientid = NfsArgop4::OpDestroyClientid(DestroyClientid4args {
            dca_clientid: shared.granted.clientid,
        });
        Shared::sessionless(
            &shared.client,
            &shared.tag,
            &shared.delay,
            vec![destroy_clientid],
        )
        .await?;
        Ok(())
    }

    fn stop_tasks(&mut self) {
        for task in self.tasks.drain(..) {
            task.abort();
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.stop_tasks();
    }
}

//! Establishing a session: EXCHANGE_ID (RFC 5661 section 18.35), CREATE_SESSION (section
//! 18.36), then RECLAIM_COMPLETE (section 18.51) in the session's first SEQUENCE COMPOUND.

use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;
use rpcrdma::rpc::{Credentials, TransportKind};
use tokio::sync::mpsc;

use super::callback::Recall;
use super::config::{RecallPolicy, SessionConfig, CLIENT_EXCHANGE_FLAGS, DEFAULT_CB_PROGRAM};
use super::error::ClientError;
use super::ops::{delegreturn_ops, small_reply};
use super::reply::into_result;
use super::session::{Granted, Session, Shared};
use crate::nfs4::nfs4_program::nfs_v4::NfsV4Client;
use crate::nfs4::{
    AuthsysParms, CallbackSecParms4, ChannelAttrs4, ClientOwner4, CreateSession4args,
    CreateSession4res, CreateSession4resok, ExchangeId4args, ExchangeId4res, ExchangeId4resok,
    NfsArgop4, NfsOpnum4, NfsResop4, Nfsstat4, ReclaimComplete4args, StateProtect4A,
    StateProtect4R, Verifier4, CREATE_SESSION4_FLAG_CONN_BACK_CHAN, CREATE_SESSION4_FLAG_PERSIST,
};

/// Establishes a session over `client` as `config` says:
///
/// 1. EXCHANGE_ID with `config`'s client owner, `eia_flags` and no state protection
///    (`SP4_NONE`);
/// 2. CREATE_SESSION with `csa_sequence` = `eir_sequenceid`, the configured channels, the
///    persistence and back channel flags asked for, `csa_cb_program` and `csa_sec_parms` from
///    the callback service and the credentials;
/// 3. RECLAIM_COMPLETE (`rca_one_fs` false) after SEQUENCE, unless turned off
///    (`NFS4ERR_COMPLETE_ALREADY` is taken as done).
///
/// The calls use `config.credentials`. A backchannel asked for over ONC RPC over TCP needs
/// the connection's `TcpConfig::backchannel(callbacks.server())` (RFC 5661 section 2.10.3.1:
/// the callbacks come on this connection); without it, [`ClientError::Config`].
pub async fn establish(client: NfsV4Client, config: SessionConfig) -> Result<Session, ClientError> {
    let transport = client.rpc().transport();
    if config.callbacks.is_some()
        && transport.kind() == TransportKind::Tcp
        && !transport.serves_backward()
    {
        return Err(ClientError::Config(
            "a backchannel over TCP needs TcpConfig::backchannel(callbacks.server()) on the connection".into(),
        ));
    }
    let client = NfsV4Client::new(client.rpc().with_credentials(&config.credentials)?);
    let exchanged = exchange_id(&client, &config).await?;
    let created = create_session(&client, &config, &exchanged).await?;
    let granted = grant(&config, exchanged, created)?;
    let shared = Arc::new(Shared::new(client, granted, &config));
    let callbacks = config.callbacks.clone();
    if let Some(callbacks) = &callbacks {
        if shared.granted.backchannel() {
            callbacks.bind(
                shared.granted.sessionid.clone(),
                shared.granted.back.ca_maxrequests,
                shared.granted.back.ca_maxoperations,
                Arc::downgrade(&shared.slots),
            );
        }
    }
    let mut session = Session {
        shared: shared.clone(),
        callbacks: callbacks.clone(),
        recalls: Mutex::new(None),
        tasks: Vec::new(),
    };
    if config.reclaim_complete {
        reclaim_complete(&shared).await?;
    }
    let receiver = callbacks.as_ref().and_then(|c| c.take_recalls());
    match (config.recall_policy, receiver) {
        (RecallPolicy::ReturnAutomatically, Some(receiver)) => {
            let weak = Arc::downgrade(&shared);
            session
                .tasks
                .push(tokio::spawn(return_recalls(weak, receiver)));
        }
        (_, receiver) => session.recalls = Mutex::new(receiver),
    }
    if let Some(every) = config.renew_every {
        let weak = Arc::downgrade(&shared);
        session.tasks.push(tokio::spawn(renew(weak, every)));
    }
    Ok(session)
}

/// EXCHANGE_ID (RFC 5661 section 18.35): the client ID and the sequence ID its first
/// CREATE_SESSION uses.
async fn exchange_id(
    client: &NfsV4Client,
    config: &SessionConfig,
) -> Result<ExchangeId4resok, ClientError> {
    let args = ExchangeId4args {
        eia_clientowner: ClientOwner4 {
            co_verifier: Verifier4(Bytes::copy_from_slice(&config.verifier)),
            co_ownerid: config.owner_id.clone(),
        },
        eia_flags: config.exchange_flags & CLIENT_EXCHANGE_FLAGS,
        eia_state_protect: StateProtect4A::Sp4None,
        eia_client_impl_id: Vec::new(),
    };
    let res = Shared::sessionless(
        client,
        &config.tag,
        &config.delay,
        vec![NfsArgop4::OpExchangeId(args)],
    )
    .await?;
    let ok = match res.resarray.into_iter().next() {
        Some(NfsResop4::OpExchangeId(ExchangeId4res::Nfs4Ok(ok))) => ok,
        other => return Err(unexpected("EXCHANGE_ID", other.as_ref())),
    };
    // Section 18.35.3: the server answers SP4_NONE to SP4_NONE.
    if !matches!(ok.eir_state_protect, StateProtect4R::Sp4None) {
        return Err(ClientError::protocol(
            "EXCHANGE_ID asked for SP4_NONE, the server answered another state protection",
        ));
    }
    Ok(ok)
}

/// CREATE_SESSION (RFC 5661 section 18.36).
async fn create_session(
    client: &NfsV4Client,
    config: &SessionConfig,
    exchanged: &ExchangeId4resok,
) -> Result<CreateSession4resok, ClientError> {
    let args = CreateSession4args {
        csa_clientid: exchanged.eir_clientid,
        csa_sequence: exchanged.eir_sequenceid,
        csa_flags: asked_flags(config),
        csa_fore_chan_attrs: config.fore_channel.to_attrs(),
        csa_back_chan_attrs: config.back_channel.to_attrs(),
        csa_cb_program: config
            .callbacks
            .as_ref()
            .map_or(DEFAULT_CB_PROGRAM, |c| c.program()),
        csa_sec_parms: vec![callback_security(&config.credentials)],
    };
    let res = Shared::sessionless(
        client,
        &config.tag,
        &config.delay,
        vec![NfsArgop4::OpCreateSession(args)],
    )
    .await?;
    let ok = match res.resarray.into_iter().next() {
        Some(NfsResop4::OpCreateSession(CreateSession4res::Nfs4Ok(ok))) => ok,
        other => return Err(unexpected("CREATE_SESSION", other.as_ref())),
    };
    if ok.csr_sequence != exchanged.eir_sequenceid {
        return Err(ClientError::protocol(format!(
            "CREATE_SESSION sent csa_sequence {}, the reply has {}",
            exchanged.eir_sequenceid, ok.csr_sequence
        )));
    }
    Ok(ok)
}

/// The CREATE_SESSION flags `config` asks for.
fn asked_flags(config: &SessionConfig) -> u32 {
    let mut flags = 0;
    if config.persist {
        flags |= CREATE_SESSION4_FLAG_PERSIST;
    }
    if config.callbacks.is_some() {
        flags |= CREATE_SESSION4_FLAG_CONN_BACK_CHAN;
    }
    flags
}

/// The security the server is to use on the back channel: AUTH_SYS as the client calls, or
/// AUTH_NONE.
fn callback_security(credentials: &Credentials) -> CallbackSecParms4 {
    match credentials {
        Credentials::None => CallbackSecParms4::AuthNone,
        Credentials::Sys(sys) => CallbackSecParms4::AuthSys(AuthsysParms {
            stamp: sys.stamp,
            machinename: sys.machine_name.clone(),
            uid: sys.uid,
            gid: sys.gid,
            gids: sys.gids.clone(),
        }),
    }
}

/// What the server granted, every count bounded by what was asked (RFC 5661 section 18.36.3:
/// the server may lower the attributes, never raise them).
fn grant(
    config: &SessionConfig,
    exchanged: ExchangeId4resok,
    created: CreateSession4resok,
) -> Result<Granted, ClientError> {
    let fore = bound_channel(
        "fore",
        &config.fore_channel.to_attrs(),
        created.csr_fore_chan_attrs,
    )?;
    let back = bound_channel(
        "back",
        &config.back_channel.to_attrs(),
        created.csr_back_chan_attrs,
    )?;
    Ok(Granted {
        clientid: exchanged.eir_clientid,
        sessionid: created.csr_sessionid,
        exchange_flags: exchanged.eir_flags,
        server_owner: exchanged.eir_server_owner,
        server_scope: exchanged.eir_server_scope,
        flags: created.csr_flags & asked_flags(config),
        fore,
        back,
    })
}

/// One channel's granted attributes within `asked`; a channel without a slot, or a fore
/// channel without room for SEQUENCE and one operation, cannot be used.
fn bound_channel(
    which: &str,
    asked: &ChannelAttrs4,
    granted: ChannelAttrs4,
) -> Result<ChannelAttrs4, ClientError> {
    if granted.ca_maxrequests == 0 || granted.ca_maxoperations < 2 {
        return Err(ClientError::protocol(format!(
            "CREATE_SESSION granted the {which} channel {} slots and {} operations",
            granted.ca_maxrequests, granted.ca_maxoperations
        )));
    }
    Ok(ChannelAttrs4 {
        ca_headerpadsize: granted.ca_headerpadsize.min(asked.ca_headerpadsize),
        ca_maxrequestsize: granted.ca_maxrequestsize.min(asked.ca_maxrequestsize),
        ca_maxresponsesize: granted.ca_maxresponsesize.min(asked.ca_maxresponsesize),
        ca_maxresponsesize_cached: granted
            .ca_maxresponsesize_cached
            .min(asked.ca_maxresponsesize_cached),
        ca_maxoperations: granted.ca_maxoperations.min(asked.ca_maxoperations),
        ca_maxrequests: granted.ca_maxrequests.min(asked.ca_maxrequests),
        ca_rdma_ird: granted.ca_rdma_ird,
    })
}

/// RECLAIM_COMPLETE for the whole client (RFC 5661 section 18.51).
async fn reclaim_complete(shared: &Shared) -> Result<(), ClientError> {
    let op = NfsArgop4::OpReclaimComplete(ReclaimComplete4args { rca_one_fs: false });
    let res = shared.compound(vec![op], small_reply).await?;
    match into_result(res, NfsOpnum4::OpReclaimComplete) {
        Ok(_) => Ok(()),
        // Section 18.51.3: a client ID that already said so (a session re-established).
        Err(e) if e.status() == Some(Nfsstat4::Nfs4errCompleteAlready) => Ok(()),
        Err(e) => Err(e),
    }
}

/// A result that is not the operation's success although the COMPOUND succeeded.
pub(crate) fn unexpected(op: &str, result: Option<&NfsResop4>) -> ClientError {
    ClientError::protocol(format!(
        "{op} succeeded without its result ({:?})",
        result.map(NfsResop4::discriminant)
    ))
}

/// Returns each recalled delegation as it comes ([`RecallPolicy::ReturnAutomatically`]),
/// while the session lives.
async fn return_recalls(session: Weak<Shared>, mut recalls: mpsc::Receiver<Recall>) {
    while let Some(recall) = recalls.recv().await {
        let Some(shared) = session.upgrade() else {
            break;
        };
        // A return that fails leaves the delegation to be revoked when the recall times out
        // (RFC 5661 section 10.4.6); there is nobody to tell here.
        let ops = delegreturn_ops(&recall.fh, &recall.stateid);
        let _ = shared.compound(ops, small_reply).await;
    }
}

/// Sends SEQUENCE every `every` while the session lives (RFC 5661 section 8.3).
async fn renew(session: Weak<Shared>, every: std::time::Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        let Some(shared) = session.upgrade() else {
            break;
        };
        let _ = shared.compound(Vec::new(), small_reply).await;
    }
}

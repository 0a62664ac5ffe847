//! What a client asks for when it establishes a session: its identity (EXCHANGE_ID, RFC 5661
//! section 18.35), the channels' attributes and flags (CREATE_SESSION, section 18.36), the
//! callback program and its security, and how the session behaves afterwards.

use std::time::Duration;

use bytes::Bytes;
use rpcrdma::rpc::Credentials;

use super::callback::CallbackService;
use crate::nfs4::{
    ChannelAttrs4, EXCHGID4_FLAG_BIND_PRINC_STATEID, EXCHGID4_FLAG_MASK_PNFS,
    EXCHGID4_FLAG_SUPP_MOVED_MIGR, EXCHGID4_FLAG_SUPP_MOVED_REFER,
    EXCHGID4_FLAG_UPD_CONFIRMED_REC_A, NFS4_OPAQUE_LIMIT,
};

/// One MiB: the READ and WRITE size the default fore channel is sized for.
pub const DEFAULT_IO_SIZE: u32 = 1 << 20;

/// What a COMPOUND carries besides a READ's or WRITE's data: the RPC header and credential
/// (up to 400 bytes each way, RFC 5531 section 8.2), SEQUENCE, PUTFH with a handle of up to
/// `NFS4_FHSIZE` bytes, the READ or WRITE arguments and a GETATTR's results, with room to spare.
pub const COMPOUND_HEADROOM: u32 = 8 * 1024;

/// The `eia_flags` bits a client may set (RFC 5661 section 18.35.3): the moved-file-system
/// support bits, `EXCHGID4_FLAG_BIND_PRINC_STATEID`, the pNFS roles it is interested in and
/// `EXCHGID4_FLAG_UPD_CONFIRMED_REC_A`. `EXCHGID4_FLAG_CONFIRMED_R` is the server's alone.
pub const CLIENT_EXCHANGE_FLAGS: u32 = EXCHGID4_FLAG_SUPP_MOVED_REFER
    | EXCHGID4_FLAG_SUPP_MOVED_MIGR
    | EXCHGID4_FLAG_BIND_PRINC_STATEID
    | EXCHGID4_FLAG_MASK_PNFS
    | EXCHGID4_FLAG_UPD_CONFIRMED_REC_A;

/// The callback program number this client announces by default (`csa_cb_program`): the
/// first of the transient range, RFC 5531 section 7.3, as the generated
/// `nfs4_callback::PROGRAM`.
pub const DEFAULT_CB_PROGRAM: u32 = crate::nfs4::nfs4_callback::PROGRAM;

/// One channel's attributes as the client asks for them (`channel_attrs4`, RFC 5661 section
/// 18.36.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChannelConfig {
    /// `ca_maxrequestsize`: the largest request, RPC header included.
    pub max_request_size: u32,
    /// `ca_maxresponsesize`: the largest reply.
    pub max_response_size: u32,
    /// `ca_maxresponsesize_cached`: the largest reply kept in the replier's reply cache.
    pub max_response_size_cached: u32,
    /// `ca_maxoperations`: operations in one COMPOUND, SEQUENCE included.
    pub max_operations: u32,
    /// `ca_maxrequests`: requests at once, that is slots.
    pub max_requests: u32,
}

impl ChannelConfig {
    /// The fore channel's defaults: 1 MiB READs and WRITEs with [`COMPOUND_HEADROOM`], replies
    /// of up to 16 KiB cached, 16 operations, 16 slots.
    pub fn fore() -> ChannelConfig {
        ChannelConfig {
            max_request_size: DEFAULT_IO_SIZE + COMPOUND_HEADROOM,
            max_response_size: DEFAULT_IO_SIZE + COMPOUND_HEADROOM,
            max_response_size_cached: 16 * 1024,
            max_operations: 16,
            max_requests: 16,
        }
    }

    /// The back channel's defaults: a CB_COMPOUND of up to 4 KiB (it travels inline, in one
    /// of the client's receive buffers), 4 operations, one slot.
    pub fn back() -> ChannelConfig {
        ChannelConfig {
            max_request_size: 4096,
            max_response_size: 4096,
            max_response_size_cached: 4096,
            max_operations: 4,
            max_requests: 1,
        }
    }

    /// Sets the number of slots (`ca_maxrequests`, at least 1).
    pub fn slots(mut self, slots: u32) -> ChannelConfig {
        self.max_requests = slots.max(1);
        self
    }

    /// Sets the most operations in one COMPOUND (at least 2: SEQUENCE and one more).
    pub fn max_operations(mut self, ops: u32) -> ChannelConfig {
        self.max_operations = ops.max(2);
        self
    }

    /// Sizes requests and replies for READs and WRITEs of `bytes` (plus
    /// [`COMPOUND_HEADROOM`]).
    pub fn io_size(mut self, bytes: u32) -> ChannelConfig {
        let size = bytes.saturating_add(COMPOUND_HEADROOM);
        self.max_request_size = size;
        self.max_response_size = size;
        self
    }

    /// As `channel_attrs4` on the wire (no header padding, no RDMA IRD).
    pub fn to_attrs(self) -> ChannelAttrs4 {
        ChannelAttrs4 {
            ca_headerpadsize: 0,
            ca_maxrequestsize: self.max_request_size,
            ca_maxresponsesize: self.max_response_size,
            ca_maxresponsesize_cached: self.max_response_size_cached,
            ca_maxoperations: self.max_operations,
            ca_maxrequests: self.max_requests,
            ca_rdma_ird: Vec::new(),
        }
    }
}

/// How the session retries COMPOUNDs the server answers `NFS4ERR_DELAY` (RFC 5661 section
/// 15.1: the server cannot answer now, the client is to try again later): waits `first`, then
/// twice as long each time up to `max`, at most `retries` times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DelayPolicy {
    /// Retries before the error is returned.
    pub retries: u32,
    /// The first wait.
    pub first: Duration,
    /// The longest wait.
    pub max: Duration,
}

impl Default for DelayPolicy {
    /// 8 retries from 20 ms, doubling up to 1 s: about 3.3 s in all.
    fn default() -> Self {
        DelayPolicy {
            retries: 8,
            first: Duration::from_millis(20),
            max: Duration::from_secs(1),
        }
    }
}

impl DelayPolicy {
    /// No retries: `NFS4ERR_DELAY` comes back at once.
    pub fn none() -> DelayPolicy {
        DelayPolicy {
            retries: 0,
            ..DelayPolicy::default()
        }
    }

    /// The wait before retry `attempt` (0-based).
    pub fn wait(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.first.saturating_mul(factor).min(self.max)
    }
}

/// What the session does with the delegations the server recalls (CB_RECALL, RFC 5661
/// section 20.2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecallPolicy {
    /// Hand each recall to the application ([`Session::recalls`](super::Session::recalls)),
    /// which returns the delegation when it has written back what it cached
    /// ([`Session::return_recalled`](super::Session::return_recalled)).
    #[default]
    Notify,
    /// A task of the session's returns each recalled delegation at once (PUTFH + DELEGRETURN):
    /// for an application that caches nothing under its delegations.
    ReturnAutomatically,
}

/// Everything [`Session::establish`](super::Session::establish) needs besides the RPC client.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SessionConfig {
    /// `co_ownerid`: the client's identity, the same across its restarts (RFC 5661 section
    /// 2.4: unique to this client, at most `NFS4_OPAQUE_LIMIT` bytes).
    pub owner_id: Bytes,
    /// `co_verifier`: changes each time the client restarts, so that the server drops the
    /// state of its previous incarnation.
    pub verifier: [u8; 8],
    /// `eia_flags`. 0 by default: this client follows neither referrals nor migrations, so
    /// it does not claim `EXCHGID4_FLAG_SUPP_MOVED_*`. Only [`CLIENT_EXCHANGE_FLAGS`] are sent.
    pub exchange_flags: u32,
    /// The fore channel's attributes.
    pub fore_channel: ChannelConfig,
    /// The back channel's attributes.
    pub back_channel: ChannelConfig,
    /// Ask for a persistent session (`CREATE_SESSION4_FLAG_PERSIST`).
    pub persist: bool,
    /// The credentials of the session's calls, and the security the server is to use on
    /// callbacks (`csa_sec_parms`: AUTH_SYS with the same uid and gid, or AUTH_NONE).
    /// AUTH_NONE by default.
    pub credentials: Credentials,
    /// The backchannel service hosted on the transport (its `rpc::Server` given to
    /// `RdmaConfig::backchannel` or `TcpConfig::backchannel`): when set, CREATE_SESSION asks for the connection as the
    /// session's back channel (`CREATE_SESSION4_FLAG_CONN_BACK_CHAN`) with the service's
    /// program number as `csa_cb_program`.
    pub callbacks: Option<CallbackService>,
    /// What to do with recalled delegations.
    pub recall_policy: RecallPolicy,
    /// The open owner's `owner` bytes (with the session's client ID, RFC 5661 section 18.16).
    pub open_owner: Bytes,
    /// Retries of `NFS4ERR_DELAY`.
    pub delay: DelayPolicy,
    /// Send RECLAIM_COMPLETE (`rca_one_fs` false) once the session exists (RFC 5661 section
    /// 18.51: before any non-reclaim OPEN). On by default.
    pub reclaim_complete: bool,
    /// Keep the lease alive with a SEQUENCE this often while the session has nothing else to
    /// send (RFC 5661 section 8.3). `None` (the default): the application's calls do.
    pub renew_every: Option<Duration>,
    /// The tag of every COMPOUND (empty by default).
    pub tag: Bytes,
}

impl SessionConfig {
    /// A client known as `owner_id` in its incarnation `verifier`, with the defaults: no
    /// backchannel, AUTH_NONE, the [`ChannelConfig::fore`] and [`ChannelConfig::back`]
    /// channels. An `owner_id` over `NFS4_OPAQUE_LIMIT` bytes is cut to it.
    pub fn new(owner_id: impl Into<Bytes>, verifier: [u8; 8]) -> SessionConfig {
        let mut owner_id: Bytes = owner_id.into();
        owner_id.truncate(NFS4_OPAQUE_LIMIT as usize);
        SessionConfig {
            owner_id,
            verifier,
            exchange_flags: 0,
            fore_channel: ChannelConfig::fore(),
            back_channel: ChannelConfig::back(),
            persist: false,
            credentials: Credentials::None,
            callbacks: None,
            recall_policy: RecallPolicy::Notify,
            open_owner: Bytes::from_static(b"rpcrdma-nfs4 open owner"),
            delay: DelayPolicy::default(),
            reclaim_complete: true,
            renew_every: None,
            tag: Bytes::new(),
        }
    }

    /// Serves callbacks with `callbacks` and asks for the connection as the back channel.
    pub fn backchannel(mut self, callbacks: CallbackService) -> SessionConfig {
        self.callbacks = Some(callbacks);
        self
    }

    /// Sets the credentials of the session's calls and of the server's callbacks.
    pub fn credentials(mut self, credentials: Credentials) -> SessionConfig {
        self.credentials = credentials;
        self
    }

    /// Sets the fore channel's attributes.
    pub fn fore_channel(mut self, channel: ChannelConfig) -> SessionConfig {
        self.fore_channel = channel;
        self
    }

    /// Sets the back channel's attributes.
    pub fn back_channel(mut self, channel: ChannelConfig) -> SessionConfig {
        self.back_channel = channel;
        self
    }

    /// Sets `eia_flags` (bits outside [`CLIENT_EXCHANGE_FLAGS`] are dropped).
    pub fn exchange_flags(mut self, flags: u32) -> SessionConfig {
        self.exchange_flags = flags & CLIENT_EXCHANGE_FLAGS;
        self
    }

    /// Asks for a persistent session, or not.
    pub fn persist(mut self, on: bool) -> SessionConfig {
        self.persist = on;
        self
    }

    /// Sets what happens to recalled delegations.
    pub fn recall_policy(mut self, policy: RecallPolicy) -> SessionConfig {
        self.recall_policy = policy;
        self
    }

    /// Sets the open owner's bytes.
    pub fn open_owner(mut self, owner: impl Into<Bytes>) -> SessionConfig {
        let mut owner: Bytes = owner.into();
        owner.truncate(NFS4_OPAQUE_LIMIT as usize);
        self.open_owner = owner;
        self
    }

    /// Sets the `NFS4ERR_DELAY` retries.
    pub fn delay(mut self, delay: DelayPolicy) -> SessionConfig {
        self.delay = delay;
        self
    }

    /// Sends RECLAIM_COMPLETE after CREATE_SESSION, or not (a client reclaiming state after a
    /// server restart sends it itself once done).
    pub fn reclaim_complete(mut self, on: bool) -> SessionConfig {
        self.reclaim_complete = on;
        self
    }

    /// Renews the lease with a SEQUENCE every `every`.
    pub fn renew_every(mut self, every: Duration) -> SessionConfig {
        self.renew_every = Some(every);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nfs4::EXCHGID4_FLAG_CONFIRMED_R;

    #[test]
    fn the_server_only_exchange_flag_is_never_sent() {
        let config = SessionConfig::new("c", [0; 8])
            .exchange_flags(EXCHGID4_FLAG_CONFIRMED_R | EXCHGID4_FLAG_SUPP_MOVED_REFER);
        assert_eq!(config.exchange_flags, EXCHGID4_FLAG_SUPP_MOVED_REFER);
    }

    #[test]
    fn delay_doubles_up_to_its_bound() {
        let d = DelayPolicy::default();
        assert_eq!(d.wait(0), Duration::from_millis(20));
        assert_eq!(d.wait(2), Duration::from_millis(80));
        assert_eq!(d.wait(40), Duration::from_secs(1));
    }
}

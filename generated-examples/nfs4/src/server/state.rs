//! What the server remembers between COMPOUNDs: client records (RFC 5661 section 2.4), their
//! sessions with slot tables and reply caches (section 2.10), and the stateids of opens and
//! delegations (sections 8.2, 9, 10.2).

use std::collections::HashMap;
use std::time::Instant;

use bytes::Bytes;

pub use super::stateids::Stateids;

use crate::nfs4::nfs4_callback::nfs_cb::NfsCbClient;
use crate::nfs4::{ChannelAttrs4, Compound4res, CreateSession4res, Stateid4};

/// A client id (RFC 5661 section 2.4.1).
pub type ClientId = u64;

/// A session id (RFC 5661 section 2.10.3): 16 bytes.
pub type SessionId = [u8; 16];

/// The "other" part of a stateid (RFC 5661 section 8.2.2): 12 bytes.
pub type Other = [u8; 12];

/// One client record (RFC 5661 section 18.35.4's "record").
#[derive(Debug)]
pub struct ClientRecord {
    /// The co_ownerid the client chose.
    pub owner: Bytes,
    /// The co_verifier of the instance of the client that made the record.
    pub verifier: Bytes,
    /// Who made it (RFC 5661 section 2.4: the principal of the EXCHANGE_ID): with AUTH_SYS,
    /// the uid; `None` for AUTH_NONE.
    pub principal: Option<u32>,
    /// Confirmed by a CREATE_SESSION.
    pub confirmed: bool,
    /// The csa_sequence CREATE_SESSION must carry next (section 18.36.4).
    pub next_create_seq: u32,
    /// The last CREATE_SESSION's sequence and reply, for its replay.
    pub create_cache: Option<(u32, CreateSession4res)>,
    /// RECLAIM_COMPLETE done (section 18.51).
    pub reclaim_complete: bool,
    /// Delegations of this client the server revoked and the client has not freed yet: while
    /// any is left, SEQUENCE says SEQ4_STATUS_RECALLABLE_STATE_REVOKED (section 18.46.3).
    pub revoked: u32,
    /// When the client last renewed its lease (any SEQUENCE).
    pub renewed: Instant,
}

/// What a slot of a session's fore channel holds (RFC 5661 section 2.10.6.1).
#[derive(Debug, Clone)]
pub enum SlotReply {
    /// No request has used the slot yet.
    Unused,
    /// The reply of the last request, kept because the client asked (sa_cachethis).
    Cached(Compound4res),
    /// The last request's reply was not kept.
    Uncached,
}

/// One slot: the sequence id of its last request and what was kept of the reply.
#[derive(Debug, Clone)]
pub struct Slot {
    /// The sequence id of the last request on this slot (0 before the first).
    pub seq: u32,
    /// Its reply.
    pub reply: SlotReply,
}

/// One session.
pub struct Session {
    /// The client record it belongs to.
    pub client: ClientId,
    /// The fore channel's slots.
    pub slots: Vec<Slot>,
    /// The fore channel's attributes as granted.
    pub fore: ChannelAttrs4,
    /// The back channel's attributes as granted.
    pub back: ChannelAttrs4,
    /// The client for calls on the backchannel, when the session has one.
    pub backchannel: Option<NfsCbClient>,
    /// The program number the client serves callbacks on (csa_cb_program).
    pub cb_program: u32,
    /// The security the client asked callbacks to carry (csa_sec_parms, BACKCHANNEL_CTL).
    pub cb_sec: Vec<crate::nfs4::CallbackSecParms4>,
    /// The sequence id of the last callback on back-channel slot 0.
    pub cb_seq: u32,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("client", &self.client)
            .field("slots", &self.slots.len())
            .field("backchannel", &self.backchannel.is_some())
            .finish()
    }
}

/// An open-owner (RFC 5661 section 9.1.1): a client and the owner bytes it names.
pub type OpenOwner = (ClientId, Bytes);

/// What a stateid stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateKind {
    /// An open of a file by an open-owner (RFC 5661 section 9.1.2): the share access and deny
    /// bits of all its OPENs together.
    Open {
        /// The open-owner.
        owner: OpenOwner,
        /// OPEN4_SHARE_ACCESS_* bits.
        access: u32,
        /// OPEN4_SHARE_DENY_* bits.
        deny: u32,
    },
    /// A delegation (RFC 5661 section 10.2): read, or write (section 10.4.3: the holder may
    /// open, read and write the file without asking, and no other client may even look).
    Delegation {
        /// A write delegation.
        write: bool,
        /// A CB_RECALL has been sent (or is being sent).
        recalled: bool,
    },
    /// A delegation the server revoked (its recall failed or was not answered in a lease):
    /// kept until the client frees it, so that using its stateid is NFS4ERR_DELEG_REVOKED
    /// (section 8.2.4) rather than unknown.
    RevokedDelegation,
    /// The byte-range locks of a lock-owner on a file (RFC 5661 section 9.1.4), under an open.
    Lock {
        /// The lock-owner.
        owner: OpenOwner,
        /// The open stateid they were taken under.
        open: Other,
        /// The locked ranges: (offset, end exclusive, write).
        ranges: Vec<LockRange>,
    },
}

/// One locked byte range; `end` is exclusive and saturates at `u64::MAX` (to end of file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockRange {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// A write (exclusive) lock; otherwise read (shared).
    pub write: bool,
}

/// One stateid's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateEntry {
    /// The client that holds it.
    pub client: ClientId,
    /// The file.
    pub fileid: u64,
    /// The current seqid (RFC 5661 section 8.2.2), incremented on each change.
    pub seqid: u32,
    /// What it is.
    pub kind: StateKind,
}

impl StateEntry {
    /// The stateid as the protocol writes it.
    pub fn stateid(&self, other: &Other) -> Stateid4 {
        Stateid4 {
            seqid: self.seqid,
            other: Bytes::copy_from_slice(other),
        }
    }
}

/// Every client, session and stateid.
#[derive(Debug, Default)]
pub struct State {
    /// Client records by client id.
    pub clients: HashMap<ClientId, ClientRecord>,
    /// Sessions by id.
    pub sessions: HashMap<SessionId, Session>,
    /// Opens, delegations and locks by the stateid's other field, by file and by client.
    pub stateids: Stateids,
    /// Files whose opens went with an expunged client: the COMPOUND unpins them in the tree
    /// (an open keeps its file after the last name goes, `Tree::pin`).
    pub released: Vec<u64>,
    next_client: u64,
    next_session: u32,
    next_stateid: u64,
    boot: u32,
}

impl State {
    /// An empty state for the server instance `boot` (part of every id it hands out, so that an
    /// id from an earlier instance is never mistaken for one of this instance).
    pub fn new(boot: u32) -> State {
        State {
            boot,
            next_client: 1,
            next_session: 1,
            next_stateid: 1,
            ..State::default()
        }
    }

    /// A client id not handed out before by this instance.
    pub fn new_client_id(&mut self) -> ClientId {
        let id = (u64::from(self.boot) << 32) | self.next_client;
        self.next_client += 1;
        id
    }

    /// A session id not handed out before: the client id, a counter and the instance.
    pub fn new_session_id(&mut self, client: ClientId) -> SessionId {
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&client.to_be_bytes());
        id[8..12].copy_from_slice(&self.next_session.to_be_bytes());
        id[12..].copy_from_slice(&self.boot.to_be_bytes());
        self.next_session = self.next_session.wrapping_add(1);
        id
    }

    /// A stateid "other" not handed out before; never all zeros or all ones (the special
    /// stateids of RFC 5661 section 8.2.3).
    pub fn new_other(&mut self) -> Other {
        let mut other = [0u8; 12];
        other[..4].copy_from_slice(&self.boot.to_be_bytes());
        other[4..].copy_from_slice(&self.next_stateid.to_be_bytes());
        self.next_stateid += 1;
        other
    }

    /// Drops a client record and everything it holds: sessions and stateids.
    pub fn expunge_client(&mut self, client: ClientId) {
        self.clients.remove(&client);
        self.sessions.retain(|_, s| s.client != client);
        for gone in self.stateids.remove_client(client) {
            if matches!(gone.kind, StateKind::Open { .. }) {
                self.released.push(gone.fileid);
            }
        }
    }

    /// Whether `client` has a session.
    pub fn has_sessions(&self, client: ClientId) -> bool {
        self.sessions.values().any(|s| s.client == client)
    }

    /// Sessions `client` holds.
    pub fn sessions_of(&self, client: ClientId) -> usize {
        self.sessions
            .values()
            .filter(|s| s.client == client)
            .count()
    }

    /// Stateids `client` holds.
    pub fn stateids_of(&self, client: ClientId) -> usize {
        self.stateids.count_of(client)
    }

    /// Drops every client whose lease ran out more than `forget` ago: a client that went
    /// away without DESTROY_CLIENTID. (One whose lease ran out more recently stays, as a
    /// courtesy, until it renews or another client's request conflicts with its state.)
    pub fn forget_departed(&mut self, forget: std::time::Duration) {
        let gone: Vec<ClientId> = self
            .clients
            .iter()
            .filter(|(_, c)| c.renewed.elapsed() > forget)
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            self.expunge_client(id);
        }
    }

    /// Revokes delegation `other` (sections 10.2.1, 8.2.4): the client is told by SEQUENCE's
    /// flags and frees it with FREE_STATEID.
    pub fn revoke(&mut self, other: &Other) {
        let Some(e) = self.stateids.get_mut(other) else {
            return;
        };
        if !matches!(e.kind, StateKind::Delegation { .. }) {
            return;
        }
        e.kind = StateKind::RevokedDelegation;
        if let Some(client) = self.clients.get_mut(&e.client) {
            client.revoked += 1;
        }
    }

    /// Whether `client` holds anything: a session, an open or a delegation.
    pub fn has_state(&self, client: ClientId) -> bool {
        self.has_sessions(client) || self.stateids.count_of(client) > 0
    }

    /// Whether `client`'s lease has run out (RFC 5661 section 8.3): no SEQUENCE for `lease`.
    pub fn expired(&self, client: ClientId, lease: std::time::Duration) -> bool {
        self.clients
            .get(&client)
            .map_or(true, |c| c.renewed.elapsed() > lease)
    }

    /// The confirmed and unconfirmed records of owner `owner`.
    pub fn records_of(&self, owner: &[u8]) -> Vec<ClientId> {
        let mut ids: Vec<ClientId> = self
            .clients
            .iter()
            .filter(|(_, c)| c.owner == owner)
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        ids
    }
}

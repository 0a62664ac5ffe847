//! A duplicate request cache: replies of procedures that are not idempotent, kept so that a
//! call retransmitted after a reconnect gets the first reply instead of running again.
//!
//! RFC 5531 gives ONC RPC at-most-once semantics only through the server: "the xid field is
//! only used for clients matching reply messages with call messages or for servers detecting
//! retransmissions" (section 9). Both of this crate's clients retransmit a call whose
//! connection dropped before its reply, once, on a new connection, with the same XID and
//! credential ([`TcpConfig::retransmits`](crate::rpc::tcp::TcpConfig::retransmits); over
//! RPC-over-RDMA `RdmaConfig::retransmit`, seed 004 section 8.3.2). Without this cache a
//! REMOVE whose reply was lost runs twice, and the second answers "no such file".
//!
//! Turned on with [`ServerBuilder::reply_cache`](crate::rpc::ServerBuilder::reply_cache); it
//! works the same for every transport, because it lives in
//! [`Server::dispatch`](crate::rpc::Server::dispatch):
//!
//! * **Which calls.** Per program version, the procedures the user lists with
//!   [`ServerBuilder::non_idempotent`](crate::rpc::ServerBuilder::non_idempotent). A version
//!   without a list (what generated `register` functions leave: an `.x` file cannot say which
//!   procedures change state) has every procedure but NULL (procedure 0, by RFC 5531's
//!   convention) cached: at most once for every procedure unless told otherwise, at the cost
//!   of recording every reply, bounded by the byte bound below. Listing the procedures that
//!   change state (NFS's CREATE, REMOVE, RENAME, ...; not READ, whose large results would
//!   only push the others out) is what a real service should do.
//! * **The key**: the client's IP address without the port (a reconnect changes the
//!   port; always over RPC-over-RDMA) and a digest of its credential; the XID, program,
//!   version and procedure; and the length and a checksum of the first
//!   [`checksum_len`](ReplyCacheConfig::checksum_len) bytes of the arguments, as Linux's nfsd
//!   keys on (xid, proc, prot, vers, address, length, checksum of the first 256 bytes). Unlike
//!   nfsd, not the transport: the reply kept is transport-independent (below), so a client
//!   that retransmits over another transport still gets it. The arguments are taken as the
//!   call carried them inline: a retransmission that moves a DDP-eligible argument into a Read
//!   chunk where the first call had it inline (a client whose policy changed between the two)
//!   is a miss.
//! * **What is kept**: the results encoded once with every item inline, copied
//!   into memory of the cache's own, with where each DDP-eligible item and each counted opaque
//!   item lies; a replay encodes them again through the transport's encoder, so the
//!   retransmission's own Write chunks (or none, over TCP) get the DDP-eligible items. A
//!   result built in a connection's registered buffer is therefore copied once, and the
//!   cache never pins registered memory; the byte bound counts what an entry really holds.
//!   An error reply (a handler's `Err(ReplyError)`, a panic's SYSTEM_ERR) is kept too.
//! * **A duplicate of a running call** waits for the first execution's reply and then sends
//!   it; its own handler never runs. Linux drops such a duplicate (RC_DROPIT) and counts on
//!   the client sending it again; ours retransmit once, so a dropped one would go unanswered
//!   until its timeout.
//! * **A call whose caller went away** (its connection closed while the handler ran) runs on
//!   to the end, and its reply is kept: the client retransmits on its next connection and
//!   gets that reply, where dropping the handler halfway would leave a half-done change that
//!   the retransmission runs again. Calls the cache does not cover are dropped instead. At
//!   most [`max_orphans`](ReplyCacheConfig::max_orphans) run on so; past that (and when the
//!   server's runtime is shutting down) the execution is dropped, and a duplicate runs the
//!   call itself.
//! * **Bounds**: answered entries are bounded by [`max_entries`](ReplyCacheConfig::max_entries)
//!   and [`max_bytes`](ReplyCacheConfig::max_bytes) (least recently used go first) and expire
//!   [`max_age`](ReplyCacheConfig::max_age) after their last use. Running calls are not
//!   counted: each is a handler running, bounded by the transports' own limits (slots per TCP
//!   connection, credits per RPC-over-RDMA connection) and, once their caller went away, by
//!   [`max_orphans`](ReplyCacheConfig::max_orphans).
//! * **Counters** ([`ReplyCacheStats`], from
//!   [`Server::reply_cache_stats`](crate::rpc::Server::reply_cache_stats)).
//!
//! A [`Service`](crate::rpc::Service) must not act on a call before its handler future is
//! polled (generated services only decode the arguments): a hit drops the future unpolled.

mod key;
mod pending;
mod replay;
mod run;
mod table;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::rpc::deadlines::CoarseInstant;

pub(crate) use key::CallKey;
pub use key::DEFAULT_CHECKSUM_LEN;
use key::{ArgsDigest, ClientId};
use pending::CachedReply;
use table::{Admission, Table};

use super::auth::Auth;
use super::server::HandlerFuture;

/// The default bound on answered entries.
pub const DEFAULT_MAX_ENTRIES: usize = 4096;

/// The default bound on the bytes answered entries hold, their bookkeeping included: 8 MiB.
pub const DEFAULT_MAX_BYTES: usize = 8 << 20;

/// The default time an answered entry is kept after its last use: 120 seconds, as Linux's
/// nfsd (`RC_EXPIRE`), longer than a client's timeout and retransmission take.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(120);

/// [`ReplyCacheConfig::max_orphans`] by default: as many calls as 32 connections' full credit
/// windows.
pub const DEFAULT_MAX_ORPHANS: usize = 1024;

/// The procedure number of NULL in every program (RFC 5531's convention): never cached.
const NULL_PROCEDURE: u32 = 0;

/// The bounds of a server's duplicate request cache (see the [module](self)).
///
/// ```
/// use std::time::Duration;
/// use rpcrdma::rpc::{ReplyCacheConfig, Server};
///
/// let mut builder = Server::builder();
/// builder
///     .reply_cache(ReplyCacheConfig::new().max_bytes(1 << 20).max_age(Duration::from_secs(60)))
///     // NFS version 3: CREATE, MKDIR, SYMLINK, MKNOD, REMOVE, RMDIR, RENAME, LINK.
///     .non_idempotent(100_003, 3, &[8, 9, 10, 11, 12, 13, 14, 15]);
/// let server = builder.build();
/// assert_eq!(server.reply_cache_stats().map(|s| s.entries), Some(0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplyCacheConfig {
    /// Answered entries kept at most ([`DEFAULT_MAX_ENTRIES`]); 0 keeps none (duplicates of
    /// running calls still wait for them).
    pub max_entries: usize,
    /// Bytes answered entries hold at most, each counted as its recorded reply plus a fixed
    /// bookkeeping size ([`DEFAULT_MAX_BYTES`]). A reply larger than this alone is not kept.
    pub max_bytes: usize,
    /// How long an answered entry is kept after it was answered or last replayed
    /// ([`DEFAULT_MAX_AGE`]).
    pub max_age: Duration,
    /// How many leading bytes of the arguments the checksum covers
    /// ([`DEFAULT_CHECKSUM_LEN`]); their whole length is compared anyway.
    pub checksum_len: usize,
    /// Covered calls whose caller went away (its connection closed) that run on to the end at
    /// most ([`DEFAULT_MAX_ORPHANS`]): a retransmission on the next connection then gets their
    /// reply instead of running a half-done change again. Past the bound such a call is
    /// dropped, and its retransmission runs it.
    pub max_orphans: usize,
}

impl Default for ReplyCacheConfig {
    fn default() -> Self {
        ReplyCacheConfig {
            max_entries: DEFAULT_MAX_ENTRIES,
            max_bytes: DEFAULT_MAX_BYTES,
            max_age: DEFAULT_MAX_AGE,
            checksum_len: DEFAULT_CHECKSUM_LEN,
            max_orphans: DEFAULT_MAX_ORPHANS,
        }
    }
}

impl ReplyCacheConfig {
    /// The defaults: [`DEFAULT_MAX_ENTRIES`], [`DEFAULT_MAX_BYTES`], [`DEFAULT_MAX_AGE`],
    /// [`DEFAULT_CHECKSUM_LEN`], [`DEFAULT_MAX_ORPHANS`].
    pub fn new() -> ReplyCacheConfig {
        ReplyCacheConfig::default()
    }

    /// Sets [`max_entries`](Self::max_entries).
    pub fn max_entries(mut self, entries: usize) -> ReplyCacheConfig {
        self.max_entries = entries;
        self
    }

    /// Sets [`max_bytes`](Self::max_bytes).
    pub fn max_bytes(mut self, bytes: usize) -> ReplyCacheConfig {
        self.max_bytes = bytes;
        self
    }

    /// Sets [`max_age`](Self::max_age).
    pub fn max_age(mut self, age: Duration) -> ReplyCacheConfig {
        self.max_age = age;
        self
    }

    /// Sets [`checksum_len`](Self::checksum_len).
    pub fn checksum_len(mut self, bytes: usize) -> ReplyCacheConfig {
        self.checksum_len = bytes;
        self
    }

    /// Sets [`max_orphans`](Self::max_orphans).
    pub fn max_orphans(mut self, calls: usize) -> ReplyCacheConfig {
        self.max_orphans = calls;
        self
    }
}

/// What a server's duplicate request cache did since it was built, and holds now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplyCacheStats {
    /// Retransmissions answered with a kept reply.
    pub hits: u64,
    /// Covered calls that ran: nothing was kept for them.
    pub misses: u64,
    /// Retransmissions that arrived while the first execution ran and waited for its reply
    /// instead of running (where Linux's nfsd drops them).
    pub in_progress: u64,
    /// Answered entries pushed out by the entry or byte bound, least recently used first.
    pub evictions: u64,
    /// Answered entries dropped [`max_age`](ReplyCacheConfig::max_age) after their last use.
    pub expired: u64,
    /// Replies not kept because one alone exceeds the byte bound.
    pub oversized: u64,
    /// Answered entries held now.
    pub entries: usize,
    /// Covered calls running now.
    pub running: usize,
    /// Covered calls running now whose caller went away
    /// ([`max_orphans`](ReplyCacheConfig::max_orphans)).
    pub orphans: usize,
    /// Bytes the answered entries hold now.
    pub bytes: usize,
}

/// Which procedures a server caches: per program version, the listed ones, or every one but
/// NULL when none were listed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Procedures(BTreeMap<(u32, u32), BTreeSet<u32>>);

impl Procedures {
    /// Adds `procedures` of `program` version `version` to the list.
    pub(crate) fn add(&mut self, program: u32, version: u32, procedures: &[u32]) {
        self.0
            .entry((program, version))
            .or_default()
            .extend(procedures);
    }

    /// Moves the lists of `program` to `number` ([`ServerBuilder::renumber`]).
    ///
    /// [`ServerBuilder::renumber`]: crate::rpc::ServerBuilder::renumber
    pub(crate) fn renumber(&mut self, program: u32, number: u32) {
        let moved: Vec<_> = self
            .0
            .keys()
            .filter(|(p, _)| *p == program)
            .copied()
            .collect();
        for (p, v) in moved {
            if let Some(list) = self.0.remove(&(p, v)) {
                self.0.insert((number, v), list);
            }
        }
    }

    fn covers(&self, program: u32, version: u32, procedure: u32) -> bool {
        match self.0.get(&(program, version)) {
            Some(list) => list.contains(&procedure),
            None => procedure != NULL_PROCEDURE,
        }
    }
}

/// A server's duplicate request cache.
#[derive(Debug)]
pub(crate) struct ReplyCache {
    table: Mutex<Table>,
    procedures: Procedures,
    checksum_len: usize,
    /// Calls running on after their caller went away.
    orphans: run::Orphans,
}

/// What the server tells the cache about a call.
pub(crate) struct CallInfo<'a> {
    /// The caller's address.
    pub(crate) peer: Option<SocketAddr>,
    /// The caller's credential.
    pub(crate) auth: &'a Auth,
    /// The transaction id.
    pub(crate) xid: u32,
    /// The program number.
    pub(crate) program: u32,
    /// The version number.
    pub(crate) version: u32,
    /// The procedure number.
    pub(crate) procedure: u32,
    /// The arguments as the call carried them inline.
    pub(crate) args: &'a [u8],
}

impl ReplyCache {
    /// A cache with `config`'s bounds for `procedures`.
    pub(crate) fn new(config: ReplyCacheConfig, procedures: Procedures) -> ReplyCache {
        ReplyCache {
            table: Mutex::new(Table::new(config)),
            procedures,
            checksum_len: config.checksum_len,
            orphans: run::Orphans::new(config.max_orphans),
        }
    }

    /// Whether calls of this procedure go through the cache.
    pub(crate) fn covers(&self, program: u32, version: u32, procedure: u32) -> bool {
        self.procedures.covers(program, version, procedure)
    }

    /// The key of a covered call.
    pub(crate) fn key(&self, call: CallInfo<'_>) -> CallKey {
        CallKey {
            client: ClientId::new(call.peer, call.auth),
            xid: call.xid,
            program: call.program,
            version: call.version,
            procedure: call.procedure,
            args: ArgsDigest::new(call.args, self.checksum_len),
        }
    }

    /// The handler to run for the covered call `key` whose own handler is `future`: the
    /// call's first execution, its kept reply, or a wait for the execution running.
    pub(crate) fn handle(self: &Arc<Self>, key: CallKey, future: HandlerFuture) -> HandlerFuture {
        match self.admit(&key) {
            Admission::Run { id, pending } => {
                Box::pin(run::FirstRun::new(self.clone(), key, id, pending, future))
            }
            Admission::Replay(reply) => {
                tracing::debug!(xid = key.xid, "a retransmission: its reply replayed");
                Box::pin(std::future::ready(run::replayed(reply)))
            }
            Admission::Wait(pending) => {
                tracing::debug!(
                    xid = key.xid,
                    "a retransmission of a running call: waiting for its reply"
                );
                Box::pin(run::duplicate(self.clone(), key, pending, future))
            }
        }
    }

    fn admit(&self, key: &CallKey) -> Admission {
        self.table.lock().admit(key, CoarseInstant::now())
    }

    fn complete(&self, key: &CallKey, id: u64, reply: CachedReply) {
        self.table
            .lock()
            .complete(key, id, reply, CoarseInstant::now());
    }

    fn abandon(&self, key: &CallKey, id: u64) {
        self.table.lock().abandon(key, id);
    }

    /// The counters.
    pub(crate) fn stats(&self) -> ReplyCacheStats {
        let mut stats = self.table.lock().stats();
        stats.orphans = self.orphans.count();
        stats
    }
}

#[cfg(test)]
mod tests;

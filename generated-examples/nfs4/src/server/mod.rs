//! An NFSv4.1 server (RFC 5661) over an in-memory file system, on the generated
//! `NfsV4Server` trait: what the Linux kernel's client needs to mount it (`mount -o vers=4.1`),
//! over RPC-over-RDMA or TCP.
//!
//! The files live in the NFSv3 server's tree (`rpcrdma_nfs3::memfs::tree`, sparse pages of
//! memory); this module adds NFSv4.1's state: client records and sessions with their slot
//! tables and reply caches ([`state`], `session`), opens with share reservations (`open`), read
//! and write delegations, which it recalls over the session's backchannel (`delegations`),
//! advisory byte-range locks (`locks`), and the file operations (`files`) with attributes
//! ([`attrs`]).
//!
//! What it does not do, and answers NFS4ERR_NOTSUPP for: pNFS (layouts, devices), directory
//! delegations, named attributes, SSV state protection, CB_GETATTR (another client's look at a
//! file under a write delegation recalls it instead), reclaim after a restart (it has no stable storage: CLAIM_PREVIOUS gets NFS4ERR_NO_GRACE).
//! The NFSv4.0-only operations get NFS4ERR_NOTSUPP (RFC 5661 section 17).
//!
//! ```no_run
//! # fn example() {
//! use rpcrdma_nfs4::server::{Nfs4Config, Nfs4Server};
//!
//! let server = Nfs4Server::new(Nfs4Config::default());
//! let rpc = server.rpc_server(); // serve it over RPC-over-RDMA or TCP
//! # let _ = rpc; }
//! ```

pub mod attrs;
mod compound;
mod delegations;
mod fh;
mod files;
mod locks;
mod open;
mod program;
mod results;
mod session;
pub mod state;
mod stateids;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use rpcrdma::rpc::{CallContext, ReplyError, Server};
use rpcrdma_nfs3::memfs::attr as attr3;
use rpcrdma_nfs3::memfs::tree::{Bounds, Meta, Tree};

use crate::nfs4::nfs4_program::nfs_v4;
use crate::nfs4::{Compound4args, Compound4res};

use state::State;

/// What the server serves and how much it may hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nfs4Config {
    /// Bytes of file contents held, all files together (holes excluded): NFS4ERR_NOSPC beyond.
    pub capacity: u64,
    /// Files, directories and links held: NFS4ERR_NOSPC beyond.
    pub max_files: u64,
    /// The lease, in seconds (fattr4_lease_time, RFC 5661 section 8.3): how long a client may
    /// go without a SEQUENCE before its state may go, and how long a recalled delegation may
    /// stay unreturned before it is revoked.
    pub lease_seconds: u32,
    /// Slots granted to a session's fore channel at most (ca_maxrequests).
    pub max_slots: u32,
    /// Client records held at most, confirmed or not: a new client beyond it gets
    /// NFS4ERR_DELAY once records whose lease ran out long ago have been dropped.
    pub max_clients: usize,
    /// Sessions one client may hold at once: CREATE_SESSION beyond it gets NFS4ERR_DELAY.
    pub max_sessions_per_client: usize,
    /// Opens, delegations and lock stateids one client may hold at once: beyond it OPEN and
    /// LOCK get NFS4ERR_SERVERFAULT (NFSv4.1 has no resource error of its own).
    pub max_stateids_per_client: usize,
    /// Grant delegations to clients with a backchannel.
    pub delegations: bool,
    /// Grant write delegations too, to clients that ask for one (OPEN4_SHARE_ACCESS_WANT_WRITE_DELEG
    /// or WANT_ANY_DELEG on an open that writes); with [`delegations`](Self::delegations) only.
    pub write_delegations: bool,
    /// Print one line per COMPOUND (operations and status) to stderr.
    pub log_calls: bool,
}

impl Default for Nfs4Config {
    fn default() -> Nfs4Config {
        Nfs4Config {
            capacity: 1 << 30,
            max_files: 1 << 20,
            lease_seconds: 90,
            max_slots: 64,
            max_clients: 4096,
            max_sessions_per_client: 16,
            max_stateids_per_client: 1 << 16,
            delegations: true,
            write_delegations: true,
            log_calls: false,
        }
    }
}

/// The largest READ or WRITE the server takes (fattr4_maxread, fattr4_maxwrite): 1 MiB, the
/// Linux client's default rsize and wsize.
pub const MAX_IO: u32 = 1 << 20;

/// The largest request and reply of the fore channel: MAX_IO and room for the rest of the
/// COMPOUND.
pub const MAX_MESSAGE: u32 = MAX_IO + 64 * 1024;

/// An NFSv4.1 server over an in-memory file system; clones share it.
#[derive(Clone)]
pub struct Nfs4Server {
    shared: Arc<Shared>,
}

/// What every COMPOUND sees.
struct Shared {
    config: Nfs4Config,
    /// This instance's generation: in every file handle, and the write verifier.
    generation: u64,
    inner: Mutex<Inner>,
}

/// The files and the protocol state, behind one lock: a COMPOUND runs with it held (nothing in
/// a COMPOUND waits), so its operations see one another's effects and nobody else's between.
struct Inner {
    tree: Tree,
    state: State,
}

impl Nfs4Server {
    /// A server with an empty root directory (mode 0777, owned by root).
    pub fn new(config: Nfs4Config) -> Nfs4Server {
        let generation = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
            | 1;
        let bounds = Bounds {
            bytes: config.capacity,
            files: config.max_files,
        };
        let tree = Tree::new(bounds, Meta::new(0o777, 0, 0, attr3::now()));
        Nfs4Server {
            shared: Arc::new(Shared {
                config,
                generation,
                inner: Mutex::new(Inner {
                    tree,
                    state: State::new((generation >> 8) as u32),
                }),
            }),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Nfs4Config {
        &self.shared.config
    }

    /// An RPC server hosting NFSv4 (program 100003 version 4), for any transport.
    pub fn rpc_server(&self) -> Server {
        let mut builder = Server::builder();
        builder.add(program::Nfs4Program(self.clone()));
        builder.build()
    }

    /// Bytes of file contents held.
    pub fn used_bytes(&self) -> u64 {
        self.lock().tree.used_bytes()
    }

    /// Client records, sessions and stateids held now.
    pub fn state_counts(&self) -> (usize, usize, usize) {
        let inner = self.lock();
        (
            inner.state.clients.len(),
            inner.state.sessions.len(),
            inner.state.stateids.len(),
        )
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.shared
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl nfs_v4::NfsV4Server for Nfs4Server {
    async fn nfsproc4_null(&self, _ctx: CallContext) -> Result<(), ReplyError> {
        Ok(())
    }

    async fn nfsproc4_compound(
        &self,
        ctx: CallContext,
        args: Compound4args,
    ) -> Result<Compound4res, ReplyError> {
        let (reply, recalls) = {
            let mut inner = self.lock();
            compound::run(&self.shared, &mut inner, &ctx, args)
        };
        for recall in recalls {
            delegations::spawn_recall(self.clone(), recall);
        }
        Ok(reply)
    }
}

//! An NFSv3 server over an in-memory file system, for the Linux kernel's NFS client and our
//! own: [`MemFs`] implements the generated `NfsV3Server` (RFC 1813 section 3) and
//! `MountV3Server` (RFC 1813 Appendix I) traits.
//!
//! Files are sparse pages of bytes in a table of nodes ([`tree`]): a hole costs nothing and
//! reads as zeros, so a file may be as large as [`tree::MAX_FILE_SIZE`] (FSINFO maxfilesize)
//! whatever the capacity. A file handle is the node's fileid and the server instance's
//! generation ([`handle`]), so a handle of a removed file or from an earlier instance is
//! NFS3ERR_STALE. The store is memory, so every WRITE is answered FILE_SYNC and COMMIT has
//! nothing to do; the write verifier is the generation. A bound on the bytes stored (holes
//! excluded) and the files ([`MemFsConfig`]) gives NFS3ERR_NOSPC beyond it.
//!
//! Every procedure is implemented. MKNOD makes sockets, FIFOs and, for root only, character
//! and block devices: names with attributes and device numbers, which nothing reads or writes
//! through here. Permissions are reported by ACCESS from the mode bits. The server itself
//! refuses (NFS3ERR_ACCES) a name made, removed or moved in a directory without write and
//! search permission there, as Linux's server does (the kernel's client, checking ACCESS first,
//! once let a MKNOD through on a stale access cache), and a SETATTR of the mode, owner or group
//! by anyone but root or the owner (NFS3ERR_PERM; the owner gives only its own groups). READ,
//! WRITE and SETATTR's size and times still trust the client's check of ACCESS, and a sticky
//! directory's restriction on removal is not enforced. A WRITE by anyone but root clears the
//! set-user-ID bit, and set-group-ID when the group may execute, as Linux's server does.
//!
//! ```no_run
//! # async fn example() -> std::io::Result<()> {
//! use std::sync::Arc;
//! use rpcrdma_nfs3::memfs::{MemFs, MemFsConfig};
//!
//! let fs = Arc::new(MemFs::new(MemFsConfig::new("/export")));
//! let nfs = fs.nfs_server(); // serve over RPC-over-RDMA (or TCP)
//! let mount = fs.mount_server(); // serve over TCP
//! # let _ = (nfs, mount); Ok(()) }
//! ```

pub mod access;
pub mod attr;
pub mod handle;
pub mod mount;
pub mod nfs;
pub mod tree;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use rpcrdma::rpc::{CallContext, ReplyCacheConfig, Server};

use crate::mount3::mount_program::mount_v3;
use crate::mount3::Mountbody;
use crate::nfs3::nfs_program::nfs_v3;
use crate::nfs3::{Fileid3, NfsFh3, Nfsstat3, Nfstime3};

use access::Caller;
use tree::{Bounds, Meta, Tree, ROOT};

/// What the server serves and how much it may hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemFsConfig {
    /// The one export path MOUNT accepts.
    pub export: String,
    /// Bytes of file contents the file system holds, all files together: the bytes stored,
    /// so the holes of sparse files do not count.
    pub capacity: u64,
    /// Files, directories, links and special files the file system holds, the root
    /// included.
    pub max_files: u64,
    /// The root directory's permission bits.
    pub root_mode: u32,
    /// Print one line per call on stderr: the caller, the procedure and its status.
    pub log_calls: bool,
}

impl MemFsConfig {
    /// Exports `export`: 1 GiB, 1,000,000 files, a root directory of mode 0777 owned by root.
    pub fn new(export: impl Into<String>) -> MemFsConfig {
        MemFsConfig {
            export: export.into(),
            capacity: 1 << 30,
            max_files: 1_000_000,
            root_mode: 0o777,
            log_calls: false,
        }
    }

    /// Sets the bytes the file system holds.
    pub fn capacity(mut self, bytes: u64) -> MemFsConfig {
        self.capacity = bytes;
        self
    }

    /// Prints one line per call on stderr (for watching a client mount and use the export).
    pub fn log_calls(mut self, on: bool) -> MemFsConfig {
        self.log_calls = on;
        self
    }

    /// Sets the number of nodes the file system holds.
    pub fn max_files(mut self, files: u64) -> MemFsConfig {
        self.max_files = files;
        self
    }
}

/// The in-memory NFSv3 and MOUNT v3 server. Share it in an `Arc` between the two programs.
#[derive(Debug)]
pub struct MemFs {
    config: MemFsConfig,
    generation: u64,
    tree: Mutex<Tree>,
    mounts: Mutex<Vec<Mountbody>>,
}

/// A fresh generation for a server instance: the clock's nanoseconds mixed with the process
/// id, never 0.
fn new_generation() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or_default();
    let mixed = nanos ^ (u64::from(std::process::id()) << 40) ^ 0x9e37_79b9_7f4a_7c15;
    mixed.max(1)
}

impl MemFs {
    /// An empty file system with a new generation.
    pub fn new(config: MemFsConfig) -> MemFs {
        let bounds = Bounds {
            bytes: config.capacity,
            files: config.max_files.max(1),
        };
        let root = Meta::new(config.root_mode, 0, 0, attr::now());
        MemFs {
            generation: new_generation(),
            tree: Mutex::new(Tree::new(bounds, root)),
            mounts: Mutex::new(Vec::new()),
            config,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &MemFsConfig {
        &self.config
    }

    /// This instance's generation: in every handle, and the write and cookie verifier.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The export's root file handle, as MOUNT hands it out.
    pub fn root_handle(&self) -> NfsFh3 {
        handle::encode(ROOT, self.generation)
    }

    /// Bytes of file contents and link targets stored now (holes excluded).
    pub fn used_bytes(&self) -> u64 {
        self.lock().used_bytes()
    }

    /// An RPC server with this file system as NFS version 3 (program 100003).
    ///
    /// With a duplicate request cache (default bounds) over the procedures that change the
    /// file system: SETATTR, WRITE, CREATE, MKDIR, SYMLINK, MKNOD, REMOVE, RMDIR, RENAME and
    /// LINK, the set Linux's nfsd keeps replies for. A client retransmits a call whose reply
    /// was lost with its connection on its next connection; run twice, a REMOVE or an
    /// exclusive CREATE would fail the second time.
    pub fn nfs_server(self: &Arc<Self>) -> Server {
        let mut builder = Server::builder();
        nfs_v3::register_arc(&mut builder, Arc::clone(self));
        builder
            .reply_cache(ReplyCacheConfig::new())
            .non_idempotent_procedure::<nfs_v3::Nfsproc3Setattr>()
            .non_idempotent_procedure::<nfs_v3::Nfsproc3Write>()
            .non_idempotent_procedure::<nfs_v3::Nfsproc3Create>()
            .non_idempotent_procedure::<nfs_v3::Nfsproc3Mkdir>()
            .non_idempotent_procedure::<nfs_v3::Nfsproc3Symlink>()
            .non_idempotent_procedure::<nfs_v3::Nfsproc3Mknod>()
            .non_idempotent_procedure::<nfs_v3::Nfsproc3Remove>()
            .non_idempotent_procedure::<nfs_v3::Nfsproc3Rmdir>()
            .non_idempotent_procedure::<nfs_v3::Nfsproc3Rename>()
            .non_idempotent_procedure::<nfs_v3::Nfsproc3Link>();
        builder.build()
    }

    /// An RPC server with this file system's MOUNT version 3 (program 100005).
    pub fn mount_server(self: &Arc<Self>) -> Server {
        let mut builder = Server::builder();
        mount_v3::register_arc(&mut builder, Arc::clone(self));
        builder.build()
    }

    /// The node table. A handler that panicked while holding it left it as it was at the
    /// panic; the next call carries on with it.
    fn lock(&self) -> MutexGuard<'_, Tree> {
        self.tree
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Prints the call's line when the configuration asks for it.
    fn log_call(&self, ctx: &CallContext, procedure: &str, status: impl std::fmt::Debug) {
        if self.config.log_calls {
            let peer = ctx
                .peer()
                .map_or_else(|| "local".to_string(), |p| p.to_string());
            eprintln!("{peer} xid {:#010x} {procedure}: {status:?}", ctx.xid());
        }
    }

    /// Runs one procedure on the node table with the call's caller and the time now.
    fn op<R>(&self, ctx: &CallContext, f: impl FnOnce(&mut Op<'_>) -> R) -> R {
        let caller = match ctx.auth().sys() {
            Some(sys) => Caller {
                uid: sys.uid,
                gid: sys.gid,
                gids: sys.gids.clone(),
            },
            None => Caller::nobody(),
        };
        let mut tree = self.lock();
        let mut op = Op {
            tree: &mut tree,
            generation: self.generation,
            now: attr::now(),
            caller,
        };
        f(&mut op)
    }
}

/// One procedure's view: the node table (locked), the instance, the caller and the time.
pub struct Op<'a> {
    /// The node table.
    pub tree: &'a mut Tree,
    /// The instance's generation.
    pub generation: u64,
    /// The time of the call, for every time it sets.
    pub now: Nfstime3,
    /// Who calls.
    pub caller: Caller,
}

impl Op<'_> {
    /// The node a handle names: NFS3ERR_BADHANDLE if it is not one of ours, NFS3ERR_STALE if
    /// its file is gone or it is from another instance.
    pub fn resolve(&self, fh: &NfsFh3) -> Result<Fileid3, Nfsstat3> {
        let fileid = handle::decode(fh, self.generation)?;
        self.tree.get(fileid)?;
        Ok(fileid)
    }

    /// The handle of `fileid`.
    pub fn handle(&self, fileid: Fileid3) -> NfsFh3 {
        handle::encode(fileid, self.generation)
    }
}

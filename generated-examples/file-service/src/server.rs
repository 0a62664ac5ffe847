//! The server: [`FilesV1Server`] over one directory of regular files.
//!
//! Every procedure checks its input before it touches the file system and answers a bad one
//! with a status, never a panic: names must be plain (no `/`, not `.` or `..`), handles must
//! be ones this server issued, READ counts are capped at `FILES_MAXIO` and files at
//! [`MAX_FILE_SIZE`]. File system calls run on tokio's blocking pool.
//!
//! CREATE and REMOVE are not idempotent (run again, they answer FILES_ERR_EXIST and
//! FILES_ERR_NOENT): the ONC RPC server keeps their replies in its duplicate request cache,
//! so a call retransmitted after its connection dropped gets the first answer.

use std::collections::HashMap;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::UNIX_EPOCH;

use rpcrdma::rpc::{CallContext, ReplyCacheConfig, ReplyError, Server, ServerBuilder};

use crate::proto::*;
use crate::{files_v1, FilesV1Server};

/// The largest file a WRITE may make (4 GiB).
pub const MAX_FILE_SIZE: u64 = 1 << 32;

/// Serves the regular files of one directory (not its subdirectories, nor symbolic links).
#[derive(Debug)]
pub struct FileServer {
    root: PathBuf,
    handles: Mutex<Handles>,
    /// Files removed by REMOVE calls.
    removed: AtomicU64,
}

/// The handles issued: one per name, forgotten when the file is removed.
#[derive(Debug, Default)]
struct Handles {
    last: u64,
    names: HashMap<Fhandle, String>,
    by_name: HashMap<String, Fhandle>,
}

type Res<T> = Result<T, FilesStatus>;

impl FileServer {
    /// A server for the files in `root`.
    pub fn new(root: impl Into<PathBuf>) -> FileServer {
        // Handles start at a point of the clock, so another server's handles are unknown here.
        let last = std::time::SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1 << 32, |d| d.as_secs() << 32);
        FileServer {
            root: root.into(),
            handles: Mutex::new(Handles {
                last,
                ..Handles::default()
            }),
            removed: AtomicU64::new(0),
        }
    }

    /// An ONC RPC server hosting this file server (FILES_PROG version 1), with a duplicate
    /// request cache (default bounds) for CREATE and REMOVE.
    pub fn into_rpc_server(self) -> Server {
        Arc::new(self).rpc_server()
    }

    /// [`into_rpc_server`](Self::into_rpc_server) for a file server kept shared, so that its
    /// counters can be read while it serves.
    pub fn rpc_server(self: &Arc<Self>) -> Server {
        self.rpc_server_builder().build()
    }

    /// The builder [`rpc_server`](Self::rpc_server) builds, for more settings first (the
    /// middleware of `examples/tower-layers.rs`).
    pub fn rpc_server_builder(self: &Arc<Self>) -> ServerBuilder {
        let mut builder = Server::builder();
        files_v1::register_arc(&mut builder, self.clone());
        builder
            .reply_cache(ReplyCacheConfig::new())
            .non_idempotent_procedure::<files_v1::FilesCreate>()
            .non_idempotent_procedure::<files_v1::FilesRemove>();
        builder
    }

    /// Files removed by REMOVE calls so far.
    pub fn removed(&self) -> u64 {
        self.removed.load(Ordering::Relaxed)
    }

    fn handles(&self) -> std::sync::MutexGuard<'_, Handles> {
        self.handles.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The handle for `name`: the one issued before, or a new one.
    fn handle(&self, name: &str) -> Fhandle {
        let mut h = self.handles();
        if let Some(&handle) = h.by_name.get(name) {
            return handle;
        }
        h.last += 1;
        let handle = h.last;
        h.names.insert(handle, name.to_owned());
        h.by_name.insert(name.to_owned(), handle);
        handle
    }

    fn path_of(&self, handle: Fhandle) -> Res<PathBuf> {
        let h = self.handles();
        let name = h.names.get(&handle).ok_or(FilesStatus::FilesErrBadhandle)?;
        Ok(self.root.join(name))
    }

    /// `root/name` for a plain name.
    fn path(&self, name: &Filename) -> Res<(String, PathBuf)> {
        let name = name.as_str().ok_or(FilesStatus::FilesErrInval)?;
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
            return Err(FilesStatus::FilesErrInval);
        }
        Ok((name.to_owned(), self.root.join(name)))
    }

    async fn lookup(&self, args: LookupArgs, create: bool) -> Res<LookupOk> {
        let (name, path) = self.path(&args.name)?;
        let attr = blocking(move || {
            if create {
                OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&path)?;
            }
            regular(&path)
        })
        .await?;
        let handle = self.handle(&name);
        Ok(LookupOk { handle, attr })
    }

    async fn read(&self, ctx: CallContext, args: ReadArgs) -> Res<ReadOk> {
        if args.count > FILES_MAXIO {
            return Err(FilesStatus::FilesErrFbig);
        }
        let path = self.path_of(args.handle)?;
        let (data, eof) = blocking(move || {
            let file = open(&path, false)?;
            let size = file.metadata()?.len();
            let n = size.saturating_sub(args.offset).min(args.count.into()) as usize;
            // The connection's registered memory: the file is read straight into it, and RDMA
            // Write sends it from there (no copy between the file and the wire).
            let mut buf = ctx.buffer(n);
            file.read_exact_at(buf.as_mut_slice(), args.offset)?;
            Ok((buf.freeze(n), args.offset.saturating_add(n as u64) >= size))
        })
        .await?;
        Ok(ReadOk { eof, data })
    }

    async fn write(&self, args: WriteArgs) -> Res<WriteOk> {
        match args.offset.checked_add(args.data.len() as u64) {
            Some(end) if end <= MAX_FILE_SIZE => {}
            _ => return Err(FilesStatus::FilesErrFbig),
        }
        let path = self.path_of(args.handle)?;
        // `data` is a view of the registered buffer the transport fetched it into.
        let count = args.data.len() as u32;
        let attr = blocking(move || {
            let file = open(&path, true)?;
            file.write_all_at(&args.data, args.offset)?;
            Ok(attr(&file.metadata()?))
        })
        .await?;
        Ok(WriteOk { count, attr })
    }

    async fn list(&self, args: ListArgs) -> Res<ListOk> {
        let root = self.root.clone();
        let mut entries = blocking(move || {
            let mut entries = Vec::new();
            for entry in fs::read_dir(&root)? {
                let entry = entry?;
                let (Ok(name), Ok(meta)) = (entry.file_name().into_string(), entry.metadata())
                else {
                    continue;
                };
                if meta.is_file() && name.len() <= FILES_MAXNAMELEN as usize {
                    entries.push((name, meta.len()));
                }
            }
            Ok(entries)
        })
        .await?;
        entries.sort();
        let start = usize::try_from(args.cookie).unwrap_or(usize::MAX);
        let count = args.count.min(FILES_MAXLIST) as usize;
        let eof = start.saturating_add(count) >= entries.len();
        let entries = entries.into_iter().skip(start).take(count);
        Ok(ListOk {
            entries: entries
                .map(|(name, size)| Entry {
                    name: Filename(name.into()),
                    size,
                })
                .collect(),
            eof,
        })
    }

    async fn remove(&self, args: RemoveArgs) -> RemoveRes {
        // The names up to the first bad one, checked before anything is removed; then one trip
        // to the blocking pool for all of them (a trip per file made 300 names take 25 ms,
        // almost all of it handing each removal to a pool thread and back).
        let mut paths = Vec::with_capacity(args.names.len());
        let mut bad_name = None;
        for name in &args.names {
            match self.path(name) {
                Ok(path) => paths.push(path),
                Err(status) => {
                    bad_name = Some(status);
                    break;
                }
            }
        }
        let (removed, failed) =
            match tokio::task::spawn_blocking(move || remove_in_order(paths)).await {
                Ok(outcome) => outcome,
                Err(_) => (Vec::new(), Some(FilesStatus::FilesErrIo)),
            };
        self.removed
            .fetch_add(removed.len() as u64, Ordering::Relaxed);
        let mut h = self.handles();
        for name in &removed {
            if let Some(handle) = h.by_name.remove(name) {
                h.names.remove(&handle);
            }
        }
        RemoveRes {
            status: failed.or(bad_name).unwrap_or(FilesStatus::FilesOk),
            removed: removed.len() as u32,
        }
    }
}

/// Removes the files in order, stopping at the first that cannot be removed: the names of
/// those removed, and why the next one was not.
fn remove_in_order(paths: Vec<(String, PathBuf)>) -> (Vec<String>, Option<FilesStatus>) {
    let mut removed = Vec::with_capacity(paths.len());
    for (name, path) in paths {
        if let Err(e) = fs::remove_file(path) {
            return (removed, Some(status_of(&e)));
        }
        removed.push(name);
    }
    (removed, None)
}

impl FilesV1Server for FileServer {
    async fn files_null(&self, _ctx: CallContext) -> Result<(), ReplyError> {
        Ok(())
    }

    async fn files_lookup(
        &self,
        _: CallContext,
        args: LookupArgs,
    ) -> Result<LookupRes, ReplyError> {
        Ok(self.lookup(args, false).await.into())
    }

    async fn files_create(
        &self,
        _: CallContext,
        args: LookupArgs,
    ) -> Result<LookupRes, ReplyError> {
        Ok(self.lookup(args, true).await.into())
    }

    async fn files_getattr(
        &self,
        _: CallContext,
        handle: Fhandle,
    ) -> Result<GetattrRes, ReplyError> {
        let attr = match self.path_of(handle) {
            Ok(path) => blocking(move || regular(&path)).await,
            Err(status) => Err(status),
        };
        Ok(attr.into())
    }

    async fn files_read(&self, ctx: CallContext, args: ReadArgs) -> Result<ReadRes, ReplyError> {
        Ok(self.read(ctx, args).await.into())
    }

    async fn files_write(&self, _: CallContext, args: WriteArgs) -> Result<WriteRes, ReplyError> {
        Ok(self.write(args).await.into())
    }

    async fn files_list(&self, _: CallContext, args: ListArgs) -> Result<ListRes, ReplyError> {
        Ok(self.list(args).await.into())
    }

    async fn files_remove(
        &self,
        _: CallContext,
        args: RemoveArgs,
    ) -> Result<RemoveRes, ReplyError> {
        Ok(self.remove(args).await)
    }
}

/// Runs file system work on the blocking pool; I/O errors become statuses.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> Res<T> {
    match tokio::task::spawn_blocking(work).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(status_of(&e)),
        Err(_) => Err(FilesStatus::FilesErrIo),
    }
}

/// The status that answers a failed file system call.
fn status_of(e: &io::Error) -> FilesStatus {
    match e.kind() {
        io::ErrorKind::NotFound => FilesStatus::FilesErrNoent,
        io::ErrorKind::AlreadyExists => FilesStatus::FilesErrExist,
        io::ErrorKind::InvalidInput => FilesStatus::FilesErrInval,
        _ => FilesStatus::FilesErrIo,
    }
}

/// The attributes of `path` if it is a regular file (a symbolic link is not followed).
fn regular(path: &Path) -> io::Result<Fattr> {
    let meta = fs::symlink_metadata(path)?;
    if !meta.is_file() {
        return Err(io::ErrorKind::InvalidInput.into());
    }
    Ok(attr(&meta))
}

/// Opens a regular file (checked first, so a symbolic link put in its place is refused).
fn open(path: &Path, write: bool) -> io::Result<File> {
    regular(path)?;
    OpenOptions::new().read(!write).write(write).open(path)
}

fn attr(meta: &Metadata) -> Fattr {
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as u64);
    Fattr {
        size: meta.len(),
        mtime,
    }
}

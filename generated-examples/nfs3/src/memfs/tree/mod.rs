//! The in-memory file system: a table of nodes by fileid (the inode number), directories as
//! name tables with stable cookies, files as sparse pages ([`FileData`]), and the bounds on
//! bytes and files stored.
//!
//! Every operation checks its input and answers with the NFSv3 status it maps to; nothing here
//! knows about handles or the wire.

use std::collections::HashMap;

use bytes::Bytes;

use crate::nfs3::{Fileid3, Nfsstat3, Nfstime3};

use super::attr;

mod data;
mod dir;

pub use data::{FileData, MAX_FILE_SIZE, PAGE_SIZE};
pub use dir::{Dir, Entry, FIRST_ENTRY_COOKIE};

/// The root directory's fileid.
pub const ROOT: Fileid3 = 1;

/// The longest name a directory takes (RFC 1813 section 3.3.20, PATHCONF name_max).
pub const NAME_MAX: usize = 255;

/// The most links one file may have (PATHCONF linkmax).
pub const LINK_MAX: u32 = 32_000;

/// Ownership and permissions of a node, and its times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// Permission bits (the low 12 bits of a Unix mode).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Last access.
    pub atime: Nfstime3,
    /// Last change of the contents.
    pub mtime: Nfstime3,
    /// Last change of the attributes or contents.
    pub ctime: Nfstime3,
}

impl Meta {
    /// New metadata with all three times `now`.
    pub fn new(mode: u32, uid: u32, gid: u32, now: Nfstime3) -> Meta {
        Meta {
            mode: mode & attr::MODE_MASK,
            uid,
            gid,
            atime: now,
            mtime: now,
            ctime: now,
        }
    }
}

/// A special file MKNOD makes (RFC 1813 section 3.3.11): a name with attributes; nothing
/// reads or writes through it here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    /// A character device (NF3CHR).
    Char {
        /// The major number (fattr3 rdev.specdata1).
        major: u32,
        /// The minor number (fattr3 rdev.specdata2).
        minor: u32,
    },
    /// A block device (NF3BLK).
    Block {
        /// The major number (fattr3 rdev.specdata1).
        major: u32,
        /// The minor number (fattr3 rdev.specdata2).
        minor: u32,
    },
    /// A socket (NF3SOCK).
    Socket,
    /// A named pipe (NF3FIFO).
    Fifo,
}

impl Special {
    /// True for a character or block device (which only root may make).
    pub fn is_device(&self) -> bool {
        matches!(self, Special::Char { .. } | Special::Block { .. })
    }

    /// The device's (major, minor) numbers; (0, 0) for a socket or FIFO.
    pub fn rdev(&self) -> (u32, u32) {
        match *self {
            Special::Char { major, minor } | Special::Block { major, minor } => (major, minor),
            Special::Socket | Special::Fifo => (0, 0),
        }
    }
}

/// What a node is.
#[derive(Debug, Clone)]
pub enum Kind {
    /// A regular file and its bytes.
    File {
        /// The contents.
        data: FileData,
        /// The verifier of the EXCLUSIVE CREATE that made it (RFC 1813 section 3.3.8).
        create_verf: Option<Bytes>,
    },
    /// A directory.
    Dir(Dir),
    /// A symbolic link and its target.
    Symlink(Bytes),
    /// A device, socket or FIFO.
    Special(Special),
}

impl Kind {
    /// A regular file's contents: NFS3ERR_ISDIR for a directory, NFS3ERR_INVAL for anything
    /// else (what READ, WRITE and a SETATTR of the size answer on a node with no bytes).
    pub fn data(&self) -> Result<&FileData, Nfsstat3> {
        match self {
            Kind::File { data, .. } => Ok(data),
            Kind::Dir(_) => Err(Nfsstat3::Nfs3errIsdir),
            Kind::Symlink(_) | Kind::Special(_) => Err(Nfsstat3::Nfs3errInval),
        }
    }

    /// A regular file's contents to change, with the errors of [`Kind::data`].
    pub fn data_mut(&mut self) -> Result<&mut FileData, Nfsstat3> {
        match self {
            Kind::File { data, .. } => Ok(data),
            Kind::Dir(_) => Err(Nfsstat3::Nfs3errIsdir),
            Kind::Symlink(_) | Kind::Special(_) => Err(Nfsstat3::Nfs3errInval),
        }
    }

    /// Bytes held in memory, as they count against the capacity: a file's stored pages (not
    /// its holes), a link's target; nothing for a directory or special file.
    pub fn stored(&self) -> u64 {
        match self {
            Kind::File { data, .. } => data.stored(),
            Kind::Symlink(target) => target.len() as u64,
            Kind::Dir(_) | Kind::Special(_) => 0,
        }
    }
}

/// A file, directory, symbolic link or special file.
#[derive(Debug, Clone)]
pub struct Node {
    /// What it is, with its contents.
    pub kind: Kind,
    /// Ownership, permissions and times.
    pub meta: Meta,
    /// Directory entries naming a non-directory (hard links); directories count theirs.
    links: u32,
}

impl Node {
    /// The node's link count as GETATTR reports it.
    pub fn nlink(&self) -> u32 {
        match &self.kind {
            Kind::Dir(dir) => dir.nlink(),
            _ => self.links,
        }
    }

    /// The size as GETATTR reports it: a file's length (holes included) or a link target's;
    /// a fixed size for a directory; 0 for a special file.
    pub fn size(&self) -> u64 {
        match &self.kind {
            Kind::File { data, .. } => data.len(),
            Kind::Symlink(target) => target.len() as u64,
            Kind::Dir(_) => attr::DIR_SIZE,
            Kind::Special(_) => 0,
        }
    }

    /// The directory, or NFS3ERR_NOTDIR.
    pub fn dir(&self) -> Result<&Dir, Nfsstat3> {
        match &self.kind {
            Kind::Dir(dir) => Ok(dir),
            _ => Err(Nfsstat3::Nfs3errNotdir),
        }
    }
}

/// How much the file system may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Bytes of file contents and link targets stored, all files together (holes of sparse
    /// files are not stored).
    pub bytes: u64,
    /// Nodes (files, directories, links, special files), the root included.
    pub files: u64,
}

/// The node table.
#[derive(Debug)]
pub struct Tree {
    nodes: HashMap<Fileid3, Node>,
    next_fileid: Fileid3,
    used_bytes: u64,
    bounds: Bounds,
    /// Files kept while their last name is gone, and by how many holders ([`Tree::pin`]).
    pinned: HashMap<Fileid3, u32>,
}

/// Checks a name for a new entry: not empty, not "." or "..", no '/', at most [`NAME_MAX`].
pub fn check_new_name(name: &[u8]) -> Result<(), Nfsstat3> {
    if name.len() > NAME_MAX {
        return Err(Nfsstat3::Nfs3errNametoolong);
    }
    match name {
        b"." | b".." => Err(Nfsstat3::Nfs3errExist),
        _ if name.is_empty() || name.contains(&b'/') || name.contains(&0) => {
            Err(Nfsstat3::Nfs3errInval)
        }
        _ => Ok(()),
    }
}

impl Tree {
    /// An empty file system: a root directory with `root_meta`.
    pub fn new(bounds: Bounds, root_meta: Meta) -> Tree {
        let root = Node {
            kind: Kind::Dir(Dir::new(ROOT)),
            meta: root_meta,
            links: 1,
        };
        Tree {
            nodes: HashMap::from([(ROOT, root)]),
            next_fileid: ROOT + 1,
            used_bytes: 0,
            bounds,
            pinned: HashMap::new(),
        }
    }

    /// The bounds.
    pub fn bounds(&self) -> Bounds {
        self.bounds
    }

    /// Bytes of contents stored (pages written and link targets, not holes).
    pub fn used_bytes(&self) -> u64 {
        self.used_bytes
    }

    /// Nodes stored.
    pub fn files(&self) -> u64 {
        self.nodes.len() as u64
    }

    /// The node `fileid`, or NFS3ERR_STALE when it is gone (or never was).
    pub fn get(&self, fileid: Fileid3) -> Result<&Node, Nfsstat3> {
        self.nodes.get(&fileid).ok_or(Nfsstat3::Nfs3errStale)
    }

    /// The node `fileid` to change, or NFS3ERR_STALE.
    pub fn get_mut(&mut self, fileid: Fileid3) -> Result<&mut Node, Nfsstat3> {
        self.nodes.get_mut(&fileid).ok_or(Nfsstat3::Nfs3errStale)
    }

    fn dir_mut(&mut self, fileid: Fileid3) -> Result<&mut Dir, Nfsstat3> {
        match &mut self.get_mut(fileid)?.kind {
            Kind::Dir(dir) => Ok(dir),
            _ => Err(Nfsstat3::Nfs3errNotdir),
        }
    }

    /// What `name` names in directory `dir`, "." and ".." included.
    pub fn lookup(&self, dir: Fileid3, name: &[u8]) -> Result<Fileid3, Nfsstat3> {
        let entries = self.get(dir)?.dir()?;
        if name.len() > NAME_MAX {
            return Err(Nfsstat3::Nfs3errNametoolong);
        }
        match name {
            b"." => Ok(dir),
            b".." => Ok(entries.parent),
            _ => entries.get(name).ok_or(Nfsstat3::Nfs3errNoent),
        }
    }

    /// Adds a node named `name` to directory `parent`; its fileid.
    pub fn create(
        &mut self,
        parent: Fileid3,
        name: &[u8],
        kind: Kind,
        meta: Meta,
        now: Nfstime3,
    ) -> Result<Fileid3, Nfsstat3> {
        check_new_name(name)?;
        if self.get(parent)?.dir()?.get(name).is_some() {
            return Err(Nfsstat3::Nfs3errExist);
        }
        if self.files() >= self.bounds.files {
            return Err(Nfsstat3::Nfs3errNospc);
        }
        let bytes = kind.stored();
        self.reserve(bytes)?;
        let fileid = self.next_fileid;
        self.next_fileid += 1;
        let is_dir = matches!(kind, Kind::Dir(_));
        let kind = match kind {
            Kind::Dir(_) => Kind::Dir(Dir::new(parent)),
            other => other,
        };
        self.nodes.insert(
            fileid,
            Node {
                kind,
                meta,
                links: 1,
            },
        );
        self.used_bytes += bytes;
        let dir = self.dir_mut(parent)?;
        dir.insert(Bytes::copy_from_slice(name), fileid);
        if is_dir {
            dir.subdirs += 1;
        }
        self.touch_dir(parent, now);
        Ok(fileid)
    }

    /// Adds a name for the existing non-directory `fileid` in `dir` (a hard link).
    pub fn link(
        &mut self,
        fileid: Fileid3,
        dir: Fileid3,
        name: &[u8],
        now: Nfstime3,
    ) -> Result<(), Nfsstat3> {
        check_new_name(name)?;
        let node = self.get(fileid)?;
        if matches!(node.kind, Kind::Dir(_)) {
            // RFC 1813 section 3.3.15: links to directories are not allowed here.
            return Err(Nfsstat3::Nfs3errIsdir);
        }
        if node.links >= LINK_MAX {
            return Err(Nfsstat3::Nfs3errMlink);
        }
        if self.get(dir)?.dir()?.get(name).is_some() {
            return Err(Nfsstat3::Nfs3errExist);
        }
        self.dir_mut(dir)?
            .insert(Bytes::copy_from_slice(name), fileid);
        let node = self.get_mut(fileid)?;
        node.links += 1;
        node.meta.ctime = now;
        self.touch_dir(dir, now);
        Ok(())
    }

    /// Removes the entry `name` of `dir`: a non-directory when `want_dir` is false (REMOVE),
    /// an empty directory when true (RMDIR). The node goes when its last name does.
    pub fn unlink(
        &mut self,
        dir: Fileid3,
        name: &[u8],
        want_dir: bool,
        now: Nfstime3,
    ) -> Result<(), Nfsstat3> {
        if name == b"." || name == b".." {
            // RFC 1813 section 3.3.13: removing "." or ".." is not allowed.
            return Err(if want_dir {
                Nfsstat3::Nfs3errInval
            } else {
                Nfsstat3::Nfs3errAcces
            });
        }
        let fileid = self.lookup(dir, name)?;
        match (&self.get(fileid)?.kind, want_dir) {
            (Kind::Dir(d), true) if !d.is_empty() => return Err(Nfsstat3::Nfs3errNotempty),
            (Kind::Dir(_), true) => {}
            (Kind::Dir(_), false) => return Err(Nfsstat3::Nfs3errIsdir),
            (_, true) => return Err(Nfsstat3::Nfs3errNotdir),
            (_, false) => {}
        }
        let entries = self.dir_mut(dir)?;
        entries.remove(name);
        if want_dir {
            entries.subdirs = entries.subdirs.saturating_sub(1);
        }
        self.touch_dir(dir, now);
        self.drop_link(fileid, now);
        Ok(())
    }

    /// One name fewer for `fileid`; the node and its bytes go with the last.
    fn drop_link(&mut self, fileid: Fileid3, now: Nfstime3) {
        let Some(node) = self.nodes.get_mut(&fileid) else {
            return;
        };
        node.links = node.links.saturating_sub(1);
        node.meta.ctime = now;
        let is_dir = matches!(node.kind, Kind::Dir(_));
        if (node.links == 0 && !self.pinned.contains_key(&fileid)) || is_dir {
            if let Some(node) = self.nodes.remove(&fileid) {
                self.used_bytes = self.used_bytes.saturating_sub(node.kind.stored());
            }
        }
    }

    /// Keeps file `fileid` when its last name goes, until as many [`Tree::unpin`]s: an open
    /// file outlives its names (NFSv4's opens; NFSv3 has no such state). Nothing for a node
    /// that does not exist.
    pub fn pin(&mut self, fileid: Fileid3) {
        if self.nodes.contains_key(&fileid) {
            *self.pinned.entry(fileid).or_insert(0) += 1;
        }
    }

    /// Undoes one [`Tree::pin`]: the file goes when no pin and no name is left.
    pub fn unpin(&mut self, fileid: Fileid3) {
        let Some(count) = self.pinned.get_mut(&fileid) else {
            return;
        };
        *count -= 1;
        if *count > 0 {
            return;
        }
        self.pinned.remove(&fileid);
        if self.nodes.get(&fileid).is_some_and(|n| n.links == 0) {
            if let Some(node) = self.nodes.remove(&fileid) {
                self.used_bytes = self.used_bytes.saturating_sub(node.kind.stored());
            }
        }
    }

    /// True when directory `ancestor` is `fileid` or contains it at any depth.
    fn contains(&self, ancestor: Fileid3, mut fileid: Fileid3) -> bool {
        // Bounded by the number of nodes: a walk up ends at the root.
        for _ in 0..=self.nodes.len() {
            if fileid == ancestor {
                return true;
            }
            match self.nodes.get(&fileid).map(|n| &n.kind) {
                Some(Kind::Dir(dir)) if fileid != ROOT => fileid = dir.parent,
                _ => return false,
            }
        }
        false
    }

    /// Moves `from_dir/from_name` to `to_dir/to_name`, replacing a compatible target (RFC 1813
    /// section 3.3.14).
    pub fn rename(
        &mut self,
        from_dir: Fileid3,
        from_name: &[u8],
        to_dir: Fileid3,
        to_name: &[u8],
        now: Nfstime3,
    ) -> Result<(), Nfsstat3> {
        self.get(to_dir)?.dir()?;
        if matches!(from_name, b"." | b"..") {
            return Err(Nfsstat3::Nfs3errInval);
        }
        let fileid = self.lookup(from_dir, from_name)?;
        check_new_name(to_name).map_err(|e| match e {
            Nfsstat3::Nfs3errExist => Nfsstat3::Nfs3errInval,
            other => other,
        })?;
        let moving_dir = matches!(self.get(fileid)?.kind, Kind::Dir(_));
        if moving_dir && self.contains(fileid, to_dir) {
            // A directory into itself or below it.
            return Err(Nfsstat3::Nfs3errInval);
        }
        if let Some(target) = self.get(to_dir)?.dir()?.get(to_name) {
            if target == fileid {
                // Two names of one file: nothing to do.
                return Ok(());
            }
            match (&self.get(target)?.kind, moving_dir) {
                (Kind::Dir(d), true) if !d.is_empty() => return Err(Nfsstat3::Nfs3errNotempty),
                (Kind::Dir(_), true) => self.unlink(to_dir, to_name, true, now)?,
                (Kind::Dir(_), false) => return Err(Nfsstat3::Nfs3errIsdir),
                (_, true) => return Err(Nfsstat3::Nfs3errNotdir),
                (_, false) => self.unlink(to_dir, to_name, false, now)?,
            }
        }
        let source = self.dir_mut(from_dir)?;
        source.remove(from_name);
        if moving_dir {
            source.subdirs = source.subdirs.saturating_sub(1);
        }
        let target = self.dir_mut(to_dir)?;
        target.insert(Bytes::copy_from_slice(to_name), fileid);
        if moving_dir {
            target.subdirs += 1;
        }
        let node = self.get_mut(fileid)?;
        node.meta.ctime = now;
        if let Kind::Dir(dir) = &mut node.kind {
            dir.parent = to_dir;
        }
        self.touch_dir(from_dir, now);
        self.touch_dir(to_dir, now);
        Ok(())
    }

    /// Checks that `more` bytes fit in the bound.
    fn reserve(&self, more: u64) -> Result<(), Nfsstat3> {
        match self.used_bytes.checked_add(more) {
            Some(total) if total <= self.bounds.bytes => Ok(()),
            _ => Err(Nfsstat3::Nfs3errNospc),
        }
    }

    /// Sets a file's length (SETATTR size, CREATE with a size). Growing allocates nothing:
    /// the new part is a hole that reads as zeros. NFS3ERR_FBIG past [`MAX_FILE_SIZE`],
    /// NFS3ERR_ISDIR for a directory, NFS3ERR_INVAL for a link or special file.
    pub fn set_len(&mut self, fileid: Fileid3, len: u64, now: Nfstime3) -> Result<(), Nfsstat3> {
        let node = self.get_mut(fileid)?;
        let data = node.kind.data_mut()?;
        let old = data.len();
        let freed = data.set_len(len)?;
        if len != old {
            node.meta.mtime = now;
        }
        node.meta.ctime = now;
        self.used_bytes = self.used_bytes.saturating_sub(freed);
        Ok(())
    }

    /// Writes `bytes` at `offset` of a file, growing it as needed; only the pages written
    /// are stored. Checked before anything changes: NFS3ERR_FBIG past [`MAX_FILE_SIZE`],
    /// NFS3ERR_NOSPC when the bytes newly stored would pass the bound (the file is then as
    /// it was). A write of no bytes changes nothing.
    pub fn write(
        &mut self,
        fileid: Fileid3,
        offset: u64,
        bytes: &[u8],
        now: Nfstime3,
    ) -> Result<(), Nfsstat3> {
        let room = self.bounds.bytes.saturating_sub(self.used_bytes);
        let node = self.get_mut(fileid)?;
        let added = node.kind.data_mut()?.write(offset, bytes, room)?;
        if !bytes.is_empty() {
            node.meta.mtime = now;
            node.meta.ctime = now;
        }
        self.used_bytes = self.used_bytes.saturating_add(added);
        Ok(())
    }

    /// A directory's contents changed: its mtime and ctime move.
    fn touch_dir(&mut self, dir: Fileid3, now: Nfstime3) {
        if let Some(node) = self.nodes.get_mut(&dir) {
            node.meta.mtime = now;
            node.meta.ctime = now;
        }
    }
}

#[cfg(test)]
mod check;

/// A node outside any tree, for other modules' tests.
#[cfg(test)]
pub fn test_node(kind: Kind, meta: Meta) -> Node {
    Node {
        kind,
        meta,
        links: 1,
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod data_tests;

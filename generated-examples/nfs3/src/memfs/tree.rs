//! The in-memory file system: a table of nodes by fileid (the inode number), directories as
//! name tables with stable cookies, and the bounds on bytes and files stored.
//!
//! Every operation checks its input and answers with the NFSv3 status it maps to; nothing here
//! knows about handles or the wire.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;

use crate::nfs3::{Fileid3, Nfsstat3, Nfstime3};

use super::attr;

/// The root directory's fileid.
pub const ROOT: Fileid3 = 1;

/// The longest name a directory takes (RFC 1813 section 3.3.20, PATHCONF name_max).
pub const NAME_MAX: usize = 255;

/// The most links one file may have (PATHCONF linkmax).
pub const LINK_MAX: u32 = 32_000;

/// The first cookie of a real entry: 1 and 2 are "." and "..", 0 means "from the start"
/// (RFC 1813 section 3.3.16).
pub const FIRST_ENTRY_COOKIE: u64 = 3;

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

/// One entry of a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The entry's name.
    pub name: Bytes,
    /// The node it names.
    pub fileid: Fileid3,
}

/// A directory: its entries by name and by cookie. A cookie is given once and never reused,
/// so a client's position survives entries added and removed in between.
#[derive(Debug, Clone, Default)]
pub struct Dir {
    /// The parent directory (the root is its own parent).
    pub parent: Fileid3,
    by_name: HashMap<Bytes, u64>,
    by_cookie: BTreeMap<u64, Entry>,
    next_cookie: u64,
    /// Subdirectories, for nlink.
    subdirs: u32,
}

impl Dir {
    fn new(parent: Fileid3) -> Dir {
        Dir {
            parent,
            next_cookie: FIRST_ENTRY_COOKIE,
            ..Dir::default()
        }
    }

    /// The fileid `name` names here.
    pub fn get(&self, name: &[u8]) -> Option<Fileid3> {
        let cookie = self.by_name.get(name)?;
        self.by_cookie.get(cookie).map(|e| e.fileid)
    }

    /// Number of entries (without "." and "..").
    pub fn len(&self) -> usize {
        self.by_cookie.len()
    }

    /// True when the directory has no entries but "." and "..".
    pub fn is_empty(&self) -> bool {
        self.by_cookie.is_empty()
    }

    /// The entries after `cookie`, in cookie order, with their cookies.
    pub fn after(&self, cookie: u64) -> impl Iterator<Item = (u64, &Entry)> {
        self.by_cookie
            .range(cookie.saturating_add(1)..)
            .map(|(c, e)| (*c, e))
    }

    /// True when `cookie` is one this directory handed out (or a fixed one).
    pub fn issued(&self, cookie: u64) -> bool {
        cookie < self.next_cookie
    }

    /// nlink of a directory: ".", its entry in the parent, and each subdirectory's "..".
    pub fn nlink(&self) -> u32 {
        self.subdirs.saturating_add(2)
    }

    fn insert(&mut self, name: Bytes, fileid: Fileid3) {
        let cookie = self.next_cookie;
        self.next_cookie += 1;
        self.by_name.insert(name.clone(), cookie);
        self.by_cookie.insert(cookie, Entry { name, fileid });
    }

    fn remove(&mut self, name: &[u8]) -> Option<Fileid3> {
        let cookie = self.by_name.remove(name)?;
        self.by_cookie.remove(&cookie).map(|e| e.fileid)
    }
}

/// What a node is.
#[derive(Debug, Clone)]
pub enum Kind {
    /// A regular file and its bytes.
    File {
        /// The contents.
        data: Vec<u8>,
        /// The verifier of the EXCLUSIVE CREATE that made it (RFC 1813 section 3.3.8).
        create_verf: Option<Bytes>,
    },
    /// A directory.
    Dir(Dir),
    /// A symbolic link and its target.
    Symlink(Bytes),
}

/// A file, directory or symbolic link.
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

    /// The size as GETATTR reports it: bytes of a file or link target; a fixed size for a
    /// directory.
    pub fn size(&self) -> u64 {
        match &self.kind {
            Kind::File { data, .. } => data.len() as u64,
            Kind::Symlink(target) => target.len() as u64,
            Kind::Dir(_) => attr::DIR_SIZE,
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
    /// Bytes of file contents and link targets, all files together.
    pub bytes: u64,
    /// Nodes (files, directories, links), the root included.
    pub files: u64,
}

/// The node table.
#[derive(Debug)]
pub struct Tree {
    nodes: HashMap<Fileid3, Node>,
    next_fileid: Fileid3,
    used_bytes: u64,
    bounds: Bounds,
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
        }
    }

    /// The bounds.
    pub fn bounds(&self) -> Bounds {
        self.bounds
    }

    /// Bytes of contents stored.
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
        let bytes = match &kind {
            Kind::File { data, .. } => data.len() as u64,
            Kind::Symlink(target) => target.len() as u64,
            Kind::Dir(_) => 0,
        };
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
        if node.links == 0 || matches!(node.kind, Kind::Dir(_)) {
            if let Some(node) = self.nodes.remove(&fileid) {
                self.used_bytes = self.used_bytes.saturating_sub(match node.kind {
                    Kind::File { data, .. } => data.len() as u64,
                    Kind::Symlink(target) => target.len() as u64,
                    Kind::Dir(_) => 0,
                });
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

    /// Sets a file's length, zero-filling when it grows; NFS3ERR_NOSPC past the bound.
    pub fn set_len(&mut self, fileid: Fileid3, len: u64, now: Nfstime3) -> Result<(), Nfsstat3> {
        let old = match &self.get(fileid)?.kind {
            Kind::File { data, .. } => data.len() as u64,
            Kind::Dir(_) => return Err(Nfsstat3::Nfs3errIsdir),
            Kind::Symlink(_) => return Err(Nfsstat3::Nfs3errInval),
        };
        if len > old {
            self.reserve(len - old)?;
        }
        let new_len = usize::try_from(len).map_err(|_| Nfsstat3::Nfs3errFbig)?;
        let node = self.get_mut(fileid)?;
        if let Kind::File { data, .. } = &mut node.kind {
            data.resize(new_len, 0);
            if len < old {
                // Give memory back: a truncated 64 MiB file should not keep its buffer.
                data.shrink_to_fit();
            }
        }
        if len != old {
            node.meta.mtime = now;
        }
        node.meta.ctime = now;
        self.used_bytes = self.used_bytes - old + len;
        Ok(())
    }

    /// Writes `bytes` at `offset` of a file, growing it as needed.
    pub fn write(
        &mut self,
        fileid: Fileid3,
        offset: u64,
        bytes: &[u8],
        now: Nfstime3,
    ) -> Result<(), Nfsstat3> {
        let end = offset
            .checked_add(bytes.len() as u64)
            .ok_or(Nfsstat3::Nfs3errFbig)?;
        let old = self.get(fileid)?.size();
        if end > old {
            self.set_len(fileid, end, now)?;
        }
        let node = self.get_mut(fileid)?;
        let Kind::File { data, .. } = &mut node.kind else {
            return Err(match node.kind {
                Kind::Dir(_) => Nfsstat3::Nfs3errIsdir,
                _ => Nfsstat3::Nfs3errInval,
            });
        };
        // In range: `end` <= the length after set_len, and offset <= end.
        let start = offset as usize;
        data[start..start + bytes.len()].copy_from_slice(bytes);
        node.meta.mtime = now;
        node.meta.ctime = now;
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

impl Tree {
    /// Checks the table's invariants: every entry names a node, a directory's nlink and
    /// parent agree with its entries, a file's links with the names it has, the byte count
    /// with the contents, and both bounds hold.
    #[cfg(test)]
    pub fn check(&self) -> Result<(), String> {
        let mut names: HashMap<Fileid3, u32> = HashMap::new();
        for (id, node) in &self.nodes {
            let Kind::Dir(dir) = &node.kind else { continue };
            let mut subdirs = 0;
            for (_, entry) in dir.after(0) {
                let child = self
                    .nodes
                    .get(&entry.fileid)
                    .ok_or(format!("{id}: dangling entry"))?;
                *names.entry(entry.fileid).or_default() += 1;
                if let Kind::Dir(sub) = &child.kind {
                    subdirs += 1;
                    if sub.parent != *id {
                        return Err(format!("{}: parent {} not {id}", entry.fileid, sub.parent));
                    }
                }
                if !dir.by_name.contains_key(&entry.name) {
                    return Err(format!("{id}: entry without a name index"));
                }
            }
            if subdirs != dir.subdirs || dir.by_name.len() != dir.by_cookie.len() {
                return Err(format!(
                    "{id}: {subdirs} subdirectories, {} counted",
                    dir.subdirs
                ));
            }
        }
        let mut bytes = 0;
        for (id, node) in &self.nodes {
            let named = names.get(id).copied().unwrap_or(0);
            match &node.kind {
                Kind::Dir(_) if *id != ROOT && named != 1 => {
                    return Err(format!("directory {id} has {named} names"))
                }
                Kind::Dir(_) => {}
                _ if named != node.links || named == 0 => {
                    return Err(format!("{id}: {named} names, {} links", node.links))
                }
                _ => bytes += node.size(),
            }
        }
        if bytes != self.used_bytes || bytes > self.bounds.bytes {
            return Err(format!("{bytes} bytes stored, {} counted", self.used_bytes));
        }
        if self.files() > self.bounds.files {
            return Err(format!("{} files", self.files()));
        }
        Ok(())
    }
}

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
mod tests {
    use super::*;

    const T: Nfstime3 = Nfstime3 {
        seconds: 1,
        nseconds: 0,
    };

    fn tree(bytes: u64, files: u64) -> Tree {
        Tree::new(Bounds { bytes, files }, Meta::new(0o755, 0, 0, T))
    }

    fn file() -> Kind {
        Kind::File {
            data: Vec::new(),
            create_verf: None,
        }
    }

    fn meta() -> Meta {
        Meta::new(0o644, 0, 0, T)
    }

    #[test]
    fn lookup_finds_dot_dotdot_and_entries() {
        let mut t = tree(100, 10);
        let d = t
            .create(ROOT, b"d", Kind::Dir(Dir::default()), meta(), T)
            .unwrap();
        let f = t.create(d, b"f", file(), meta(), T).unwrap();
        assert_eq!(t.lookup(d, b"."), Ok(d));
        assert_eq!(t.lookup(d, b".."), Ok(ROOT));
        assert_eq!(t.lookup(ROOT, b".."), Ok(ROOT));
        assert_eq!(t.lookup(d, b"f"), Ok(f));
        assert_eq!(t.lookup(d, b"g"), Err(Nfsstat3::Nfs3errNoent));
        assert_eq!(t.lookup(f, b"x"), Err(Nfsstat3::Nfs3errNotdir));
        assert_eq!(t.get(ROOT).unwrap().nlink(), 3);
    }

    #[test]
    fn rejects_bad_names() {
        let mut t = tree(100, 10);
        for (name, status) in [
            (&b""[..], Nfsstat3::Nfs3errInval),
            (b".", Nfsstat3::Nfs3errExist),
            (b"..", Nfsstat3::Nfs3errExist),
            (b"a/b", Nfsstat3::Nfs3errInval),
            (&[b'x'; 256][..], Nfsstat3::Nfs3errNametoolong),
        ] {
            assert_eq!(t.create(ROOT, name, file(), meta(), T), Err(status));
        }
        t.create(ROOT, b"a", file(), meta(), T).unwrap();
        assert_eq!(
            t.create(ROOT, b"a", file(), meta(), T),
            Err(Nfsstat3::Nfs3errExist)
        );
    }

    #[test]
    fn bounds_give_nospc() {
        let mut t = tree(10, 3);
        let f = t.create(ROOT, b"f", file(), meta(), T).unwrap();
        t.write(f, 0, &[1; 10], T).unwrap();
        assert_eq!(t.write(f, 10, &[1], T), Err(Nfsstat3::Nfs3errNospc));
        assert_eq!(t.set_len(f, 11, T), Err(Nfsstat3::Nfs3errNospc));
        t.set_len(f, 0, T).unwrap();
        assert_eq!(t.used_bytes(), 0);
        t.create(ROOT, b"g", file(), meta(), T).unwrap();
        assert_eq!(
            t.create(ROOT, b"h", file(), meta(), T),
            Err(Nfsstat3::Nfs3errNospc)
        );
        assert_eq!(t.write(f, u64::MAX, &[1], T), Err(Nfsstat3::Nfs3errFbig));
    }

    #[test]
    fn unlink_checks_kinds_and_frees_bytes() {
        let mut t = tree(100, 10);
        let d = t
            .create(ROOT, b"d", Kind::Dir(Dir::default()), meta(), T)
            .unwrap();
        let f = t.create(d, b"f", file(), meta(), T).unwrap();
        t.write(f, 0, b"hello", T).unwrap();
        assert_eq!(
            t.unlink(ROOT, b"d", true, T),
            Err(Nfsstat3::Nfs3errNotempty)
        );
        assert_eq!(t.unlink(ROOT, b"d", false, T), Err(Nfsstat3::Nfs3errIsdir));
        assert_eq!(t.unlink(d, b"f", true, T), Err(Nfsstat3::Nfs3errNotdir));
        t.link(f, ROOT, b"g", T).unwrap();
        assert_eq!(t.get(f).unwrap().nlink(), 2);
        t.unlink(d, b"f", false, T).unwrap();
        assert_eq!(t.used_bytes(), 5, "one name is left");
        t.unlink(ROOT, b"g", false, T).unwrap();
        assert_eq!(t.used_bytes(), 0);
        assert_eq!(t.get(f).err(), Some(Nfsstat3::Nfs3errStale));
        t.unlink(ROOT, b"d", true, T).unwrap();
        assert_eq!(t.get(ROOT).unwrap().nlink(), 2);
    }

    #[test]
    fn rename_moves_replaces_and_refuses_cycles() {
        let mut t = tree(100, 10);
        let a = t
            .create(ROOT, b"a", Kind::Dir(Dir::default()), meta(), T)
            .unwrap();
        let b = t
            .create(a, b"b", Kind::Dir(Dir::default()), meta(), T)
            .unwrap();
        assert_eq!(
            t.rename(ROOT, b"a", b, b"a", T),
            Err(Nfsstat3::Nfs3errInval)
        );
        let f = t.create(ROOT, b"f", file(), meta(), T).unwrap();
        let g = t.create(ROOT, b"g", file(), meta(), T).unwrap();
        assert_eq!(
            t.rename(ROOT, b"f", a, b"b", T),
            Err(Nfsstat3::Nfs3errIsdir)
        );
        t.rename(ROOT, b"f", ROOT, b"g", T).unwrap();
        assert_eq!(t.lookup(ROOT, b"g"), Ok(f));
        assert_eq!(t.get(g).err(), Some(Nfsstat3::Nfs3errStale));
        t.rename(a, b"b", ROOT, b"b", T).unwrap();
        assert_eq!(t.lookup(b, b".."), Ok(ROOT));
        assert_eq!(t.get(a).unwrap().nlink(), 2);
        assert_eq!(t.get(ROOT).unwrap().nlink(), 4);
    }

    #[test]
    fn cookies_stay_stable_across_removals() {
        let mut t = tree(100, 10);
        for name in [b"a", b"b", b"c"] {
            t.create(ROOT, name, file(), meta(), T).unwrap();
        }
        let before: Vec<u64> = t
            .get(ROOT)
            .unwrap()
            .dir()
            .unwrap()
            .after(0)
            .map(|(c, _)| c)
            .collect();
        t.unlink(ROOT, b"b", false, T).unwrap();
        let dir = t.get(ROOT).unwrap().dir().unwrap();
        let after: Vec<(u64, &[u8])> = dir
            .after(before[0])
            .map(|(c, e)| (c, &e.name[..]))
            .collect();
        assert_eq!(after, vec![(before[2], &b"c"[..])]);
    }

    mod random_operations {
        use super::*;
        use proptest::prelude::*;

        #[derive(Debug, Clone)]
        enum Operation {
            Create(usize, usize, u8),
            Write(usize, u64, usize),
            SetLen(usize, u64),
            Unlink(usize, usize, bool),
            Rename(usize, usize, usize, usize),
            Link(usize, usize, usize),
        }

        const NAMES: [&[u8]; 4] = [b"a", b"b", b"..", b"c"];

        fn operation() -> impl Strategy<Value = Operation> {
            prop_oneof![
                (0..8usize, 0..4usize, 0..3u8).prop_map(|(d, n, k)| Operation::Create(d, n, k)),
                (0..8usize, 0..200u64, 0..64usize).prop_map(|(f, o, l)| Operation::Write(f, o, l)),
                (0..8usize, 0..300u64).prop_map(|(f, l)| Operation::SetLen(f, l)),
                (0..8usize, 0..4usize, any::<bool>())
                    .prop_map(|(d, n, w)| Operation::Unlink(d, n, w)),
                (0..8usize, 0..4usize, 0..8usize, 0..4usize)
                    .prop_map(|(a, b, c, d)| Operation::Rename(a, b, c, d)),
                (0..8usize, 0..8usize, 0..4usize).prop_map(|(f, d, n)| Operation::Link(f, d, n)),
            ]
        }

        /// The `k`th fileid in the table (modulo its size), or one that never was.
        fn pick(t: &Tree, k: usize) -> Fileid3 {
            let mut ids: Vec<Fileid3> = t.nodes.keys().copied().collect();
            ids.sort_unstable();
            ids.push(999);
            ids[k % ids.len()]
        }

        proptest! {
            /// Whatever the sequence, each operation answers (no panic) and the invariants hold.
            #[test]
            fn keep_the_invariants(ops in proptest::collection::vec(operation(), 1..60)) {
                let mut t = tree(256, 12);
                for op in ops {
                    let _ = match op {
                        Operation::Create(d, n, kind) => {
                            let kind = match kind {
                                0 => file(),
                                1 => Kind::Dir(Dir::default()),
                                _ => Kind::Symlink(Bytes::from_static(b"target")),
                            };
                            t.create(pick(&t, d), NAMES[n], kind, meta(), T).map(drop)
                        }
                        Operation::Write(f, offset, len) => t.write(pick(&t, f), offset, &vec![7; len], T),
                        Operation::SetLen(f, len) => t.set_len(pick(&t, f), len, T),
                        Operation::Unlink(d, n, want_dir) => t.unlink(pick(&t, d), NAMES[n], want_dir, T),
                        Operation::Rename(a, b, c, d) => {
                            t.rename(pick(&t, a), NAMES[b], pick(&t, c), NAMES[d], T)
                        }
                        Operation::Link(f, d, n) => t.link(pick(&t, f), pick(&t, d), NAMES[n], T),
                    };
                    prop_assert_eq!(t.check(), Ok(()));
                }
            }
        }
    }
}

//! A directory's entries: by name for LOOKUP, by cookie for READDIR, where a cookie is given
//! once and never reused.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;

use crate::nfs3::Fileid3;

/// The first cookie of a real entry: 1 and 2 are "." and "..", 0 means "from the start"
/// (RFC 1813 section 3.3.16).
pub const FIRST_ENTRY_COOKIE: u64 = 3;

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
    /// Cookies by name.
    pub(super) by_name: HashMap<Bytes, u64>,
    /// Entries by cookie.
    pub(super) by_cookie: BTreeMap<u64, Entry>,
    next_cookie: u64,
    /// Subdirectories, for nlink.
    pub(super) subdirs: u32,
}

impl Dir {
    /// An empty directory in `parent`.
    pub(super) fn new(parent: Fileid3) -> Dir {
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

    /// Adds `name` with the next cookie.
    pub(super) fn insert(&mut self, name: Bytes, fileid: Fileid3) {
        let cookie = self.next_cookie;
        self.next_cookie += 1;
        self.by_name.insert(name.clone(), cookie);
        self.by_cookie.insert(cookie, Entry { name, fileid });
    }

    /// Removes `name`; its cookie is never given again.
    pub(super) fn remove(&mut self, name: &[u8]) -> Option<Fileid3> {
        let cookie = self.by_name.remove(name)?;
        self.by_cookie.remove(&cookie).map(|e| e.fileid)
    }
}

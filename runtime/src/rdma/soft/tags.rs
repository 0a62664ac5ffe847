//! The steering-tag table of a connection: STag -> registration, with invalidation.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::id_map::IdMap;
use crate::rdma::{Access, MemoryRegion, RegionKeys, RegionMemory, Result, WeakRegion};

/// The registration handle stored in every region of the soft provider; dropping it (with the
/// last clone of the region) removes the tag.
pub(crate) struct SoftRegistration {
    table: Arc<TagTable>,
    /// The region's current tag (rekeying replaces it).
    stag: AtomicU32,
}

/// Registrations of the soft provider alive in this process.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// The number of soft-provider registrations alive in this process, for leak checks.
pub fn live_registrations() -> usize {
    LIVE.load(Ordering::SeqCst)
}

impl Drop for SoftRegistration {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::SeqCst);
        let stag = self.stag.load(Ordering::Acquire);
        self.table.remove(&mut self.table.lock(), stag);
    }
}

struct Entry {
    region: WeakRegion,
    /// False once invalidated (locally or by a Send with Invalidate).
    valid: bool,
    /// An RDMA Write into it is expected and none has come yet ([`TagTable::expect_write`]).
    awaits_write: bool,
}

impl Entry {
    fn new(region: WeakRegion) -> Entry {
        Entry {
            region,
            valid: true,
            awaits_write: false,
        }
    }
}

/// Why a tag did not resolve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TagError {
    /// Unknown, dropped, or invalidated tag.
    Invalid,
}

/// STag -> region for one connection (its protection domain).
#[derive(Default)]
pub struct TagTable {
    inner: Mutex<Inner>,
    /// Entries whose `awaits_write` is set; changed only under the lock of `inner`, read
    /// without it.
    writes_awaited: AtomicUsize,
}

#[derive(Default)]
struct Inner {
    /// Keyed by STags this side hands out (`fresh_stag`); a peer's message only looks one up.
    map: IdMap<u32, Entry>,
    next_index: u32,
}

impl Inner {
    /// A tag not in use: an index in the upper 24 bits, a key byte below; never 0.
    fn fresh_stag(&mut self) -> u32 {
        loop {
            self.next_index = self.next_index.wrapping_add(1) & 0x00ff_ffff;
            let index = self.next_index;
            let key = (index.wrapping_mul(0x9e) as u8) | 1;
            let stag = (index << 8) | key as u32;
            if index != 0 && !self.map.contains_key(&stag) {
                return stag;
            }
        }
    }
}

impl TagTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers `buf`: a new STag (index in the upper 24 bits, a key byte below; never 0)
    /// with a tagged-offset base derived from it so that offsets are not addresses.
    pub fn register(self: &Arc<TagTable>, buf: Vec<u8>, access: Access) -> Result<MemoryRegion> {
        self.register_memory(buf.into(), access)
    }

    /// Registers `buf` as [`TagTable::register`] does a vector.
    pub fn register_memory(
        self: &Arc<TagTable>,
        buf: RegionMemory,
        access: Access,
    ) -> Result<MemoryRegion> {
        let stag = self.lock().fresh_stag();
        let table = self.clone();
        let mr = MemoryRegion::register_with(buf, access, |_, _| {
            Ok((
                RegionKeys {
                    lkey: stag,
                    rkey: stag,
                    addr: (stag as u64) << 20,
                },
                {
                    LIVE.fetch_add(1, Ordering::SeqCst);
                    SoftRegistration {
                        table,
                        stag: AtomicU32::new(stag),
                    }
                },
            ))
        })?;
        self.lock().map.insert(stag, Entry::new(mr.downgrade()));
        Ok(mr)
    }

    /// Gives `mr` (registered through this table) a new tag granting the remote rights of
    /// `remote`; its old tag stops resolving. The local key and the tagged-offset base stay.
    /// Rights the region was not registered with are refused, as by every provider
    /// ([`MemoryRegion::check_remote_rights`]).
    pub fn rekey(self: &Arc<TagTable>, mr: &MemoryRegion, remote: Access) -> Result<()> {
        let Some(reg) = mr.handle::<SoftRegistration>() else {
            return Err(crate::rdma::Error::InvalidWorkRequest(
                "the region was not registered by the soft provider".into(),
            ));
        };
        if !Arc::ptr_eq(&reg.table, self) {
            return Err(crate::rdma::Error::InvalidWorkRequest(
                "the region was registered on another connection".into(),
            ));
        }
        mr.check_remote_rights(remote)?;
        let mut inner = self.lock();
        let stag = inner.fresh_stag();
        let old = reg.stag.swap(stag, Ordering::AcqRel);
        self.remove(&mut inner, old);
        inner.map.insert(stag, Entry::new(mr.downgrade()));
        mr.set_remote_key(stag, remote);
        Ok(())
    }

    /// Notes that the peer is expected to write into `mr` under its current tag (a Write chunk
    /// just advertised), until a tagged segment names that tag or the tag goes: see
    /// [`TagTable::writes_awaited`]. Nothing is noted for a region the peer cannot write, or
    /// one smaller than `min` bytes.
    pub fn expect_write(&self, mr: &MemoryRegion, min: usize) {
        if mr.len() < min || !mr.access().contains(Access::REMOTE_WRITE) {
            return;
        }
        let mut inner = self.lock();
        if let Some(e) = inner.map.get_mut(&mr.rkey()) {
            if e.valid && !e.awaits_write {
                e.awaits_write = true;
                self.writes_awaited.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// True while a tag noted by [`TagTable::expect_write`] has had no tagged segment yet and
    /// is still valid: an RDMA Write is most likely what the peer sends next.
    pub fn writes_awaited(&self) -> bool {
        self.writes_awaited.load(Ordering::Relaxed) != 0
    }

    /// The live, valid region behind `stag`. The tag no longer awaits a write
    /// ([`TagTable::expect_write`]): one is arriving.
    pub fn lookup(&self, stag: u32) -> std::result::Result<MemoryRegion, TagError> {
        let mut inner = self.lock();
        let entry = inner.map.get_mut(&stag).ok_or(TagError::Invalid)?;
        if !entry.valid {
            return Err(TagError::Invalid);
        }
        self.stop_awaiting(entry);
        entry.region.upgrade().ok_or(TagError::Invalid)
    }

    /// Invalidates `stag`; false when it is unknown or already invalid.
    pub fn invalidate(&self, stag: u32) -> bool {
        match self.lock().map.get_mut(&stag) {
            Some(e) if e.valid => {
                e.valid = false;
                self.stop_awaiting(e);
                true
            }
            _ => false,
        }
    }

    /// Removes `stag`'s entry (`inner` is this table's, locked).
    fn remove(&self, inner: &mut Inner, stag: u32) {
        if let Some(mut e) = inner.map.remove(&stag) {
            self.stop_awaiting(&mut e);
        }
    }

    /// Clears `e`'s expectation of a write (its entry is this table's, locked).
    fn stop_awaiting(&self, e: &mut Entry) {
        if std::mem::take(&mut e.awaits_write) {
            self.writes_awaited.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// True when `mr` was registered through this table.
    pub fn owns(self: &Arc<TagTable>, mr: &MemoryRegion) -> bool {
        mr.handle::<SoftRegistration>()
            .is_some_and(|h| Arc::ptr_eq(&h.table, self))
    }
}

//! The steering-tag table of a connection: STag -> registration, with invalidation.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::rdma::{Access, MemoryRegion, RegionKeys, Result, WeakRegion};

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
        self.table.lock().map.remove(&stag);
    }
}

struct Entry {
    region: WeakRegion,
    /// False once invalidated (locally or by a Send with Invalidate).
    valid: bool,
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
}

#[derive(Default)]
struct Inner {
    map: HashMap<u32, Entry>,
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
        self.lock().map.insert(
            stag,
            Entry {
                region: mr.downgrade(),
                valid: true,
            },
        );
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
        inner.map.remove(&old);
        inner.map.insert(
            stag,
            Entry {
                region: mr.downgrade(),
                valid: true,
            },
        );
        mr.set_remote_key(stag, remote);
        Ok(())
    }

    /// The live, valid region behind `stag`.
    pub fn lookup(&self, stag: u32) -> std::result::Result<MemoryRegion, TagError> {
        let inner = self.lock();
        let entry = inner.map.get(&stag).ok_or(TagError::Invalid)?;
        if !entry.valid {
            return Err(TagError::Invalid);
        }
        entry.region.upgrade().ok_or(TagError::Invalid)
    }

    /// Invalidates `stag`; false when it is unknown or already invalid.
    pub fn invalidate(&self, stag: u32) -> bool {
        match self.lock().map.get_mut(&stag) {
            Some(e) if e.valid => {
                e.valid = false;
                true
            }
            _ => false,
        }
    }

    /// True when `mr` was registered through this table.
    pub fn owns(self: &Arc<TagTable>, mr: &MemoryRegion) -> bool {
        mr.handle::<SoftRegistration>()
            .is_some_and(|h| Arc::ptr_eq(&h.table, self))
    }
}

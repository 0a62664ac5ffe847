//! The steering-tag table of a connection: STag -> registration, with invalidation.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::rdma::{Access, MemoryRegion, RegionKeys, Result, WeakRegion};

/// The registration handle stored in every region of the soft provider; dropping it (with the
/// last clone of the region) removes the tag.
pub(crate) struct SoftRegistration {
    table: Arc<TagTable>,
    stag: u32,
}

impl Drop for SoftRegistration {
    fn drop(&mut self) {
        self.table.lock().map.remove(&self.stag);
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

impl TagTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers `buf`: a new STag (index in the upper 24 bits, a key byte below; never 0)
    /// with a tagged-offset base derived from it so that offsets are not addresses.
    pub fn register(self: &Arc<TagTable>, buf: Vec<u8>, access: Access) -> Result<MemoryRegion> {
        let stag = {
            let mut inner = self.lock();
            loop {
                inner.next_index = inner.next_index.wrapping_add(1) & 0x00ff_ffff;
                let index = inner.next_index;
                let key = (index.wrapping_mul(0x9e) as u8) | 1;
                let stag = (index << 8) | key as u32;
                if index != 0 && !inner.map.contains_key(&stag) {
                    break stag;
                }
            }
        };
        let table = self.clone();
        let mr = MemoryRegion::register_with(buf, access, |_, _| {
            Ok((
                RegionKeys {
                    lkey: stag,
                    rkey: stag,
                    addr: (stag as u64) << 20,
                },
                SoftRegistration { table, stag },
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

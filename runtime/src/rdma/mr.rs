//! Registered memory: a buffer with a local key, a remote steering tag and access rights.
//!
//! A [`MemoryRegion`] is a cheap, cloneable handle (an `Arc`). Every work request that names a
//! region holds a clone until its completion is delivered, and a provider that places remote
//! data into a region upgrades its weak reference for the duration of the placement, so the
//! memory stays valid for as long as anything may touch it, even when the future that posted the
//! work is dropped. The buffer is freed (and the registration released, e.g. `ibv_dereg_mr`)
//! only when the last clone goes away.
//!
//! # Concurrent access
//! The buffer may be written by the provider (a receive, an RDMA Read response, a remote peer's
//! RDMA Write) while the application holds the handle, exactly as an RNIC may DMA into registered
//! memory at any time. All *safe* accessors ([`MemoryRegion::read`], [`MemoryRegion::write`],
//! [`MemoryRegion::with_slice`], ...) take an internal lock, and the software provider takes the
//! same lock while it places data, so safe code never races. [`MemoryRegion::as_mut_ptr`] is the
//! escape hatch for providers that hand the memory to hardware.

use std::any::Any;
use std::cell::UnsafeCell;
use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::{RwLock, RwLockReadGuard};

use super::access::Access;
use super::error::{Error, Result};
use super::region_memory::RegionMemory;

/// The keys a provider assigns to a registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RegionKeys {
    /// The local key, used in scatter/gather elements of local work requests.
    pub lkey: u32,
    /// The remote steering tag (iWARP STag, InfiniBand rkey) a peer names in tagged operations.
    pub rkey: u32,
    /// The address (tagged offset) of the first byte; a peer targets `addr + offset`.
    pub addr: u64,
}

struct Inner {
    // Field order matters: the provider's registration handle is dropped (deregistered) before
    // the buffer it points into is freed.
    registration: Box<dyn Any + Send + Sync>,
    lkey: u32,
    addr: u64,
    /// The current remote steering tag: [`Connection::rekey`](super::Connection::rekey)
    /// replaces it.
    rkey: AtomicU32,
    /// The rights registered (the most any steering tag of the region may grant).
    registered: Access,
    /// The rights in force: the local ones registered, the remote ones of the current tag.
    access: AtomicU8,
    lock: RwLock<()>,
    data: UnsafeCell<RegionMemory>,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the buffer behind `data`/`ptr` is only touched through `lock` by safe code (see the
// module documentation); the raw pointer is never reallocated while `Inner` lives.
unsafe impl Send for Inner {}
// SAFETY: as above.
unsafe impl Sync for Inner {}

/// A registered buffer. Clones share the same memory and registration.
#[derive(Clone)]
pub struct MemoryRegion {
    inner: Arc<Inner>,
}

/// A weak reference to a [`MemoryRegion`], held by a provider's steering-tag table so that a
/// dropped region's tag stops resolving.
#[derive(Clone)]
pub struct WeakRegion {
    inner: Weak<Inner>,
}

impl WeakRegion {
    /// The region, if any clone of it is still alive.
    pub fn upgrade(&self) -> Option<MemoryRegion> {
        self.inner.upgrade().map(|inner| MemoryRegion { inner })
    }
}

impl fmt::Debug for WeakRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WeakRegion")
    }
}

impl MemoryRegion {
    /// Builds a region over `buf`, letting the provider register the buffer's memory first.
    ///
    /// `register` receives the stable address and length of the buffer (it never moves while
    /// the region lives) and returns the keys plus a provider handle that is dropped, after all
    /// clones are gone and before the buffer is freed. Providers call this from
    /// [`Connection::register`](super::Connection::register).
    pub fn register_with<H, F>(
        buf: impl Into<RegionMemory>,
        access: Access,
        register: F,
    ) -> Result<MemoryRegion>
    where
        H: Any + Send + Sync,
        F: FnOnce(*mut u8, usize) -> Result<(RegionKeys, H)>,
    {
        let mut data: RegionMemory = buf.into();
        let ptr = data.as_mut_ptr();
        let len = data.len();
        let (keys, handle) = register(ptr, len)?;
        Ok(MemoryRegion {
            inner: Arc::new(Inner {
                registration: Box::new(handle),
                lkey: keys.lkey,
                addr: keys.addr,
                rkey: AtomicU32::new(keys.rkey),
                registered: access,
                access: AtomicU8::new(access.bits()),
                lock: RwLock::new(()),
                data: UnsafeCell::new(data),
                ptr,
                len,
            }),
        })
    }

    /// The local key.
    pub fn lkey(&self) -> u32 {
        self.inner.lkey
    }

    /// The remote steering tag (STag / rkey) to advertise to a peer: the current one, after
    /// any [`Connection::rekey`](super::Connection::rekey).
    pub fn rkey(&self) -> u32 {
        self.inner.rkey.load(Ordering::Acquire)
    }

    /// The address a peer uses for the first byte (tagged offset base).
    pub fn addr(&self) -> u64 {
        self.inner.addr
    }

    /// All keys at once.
    pub fn keys(&self) -> RegionKeys {
        RegionKeys {
            lkey: self.lkey(),
            rkey: self.rkey(),
            addr: self.addr(),
        }
    }

    /// The length of the registration in bytes.
    pub fn len(&self) -> usize {
        self.inner.len
    }

    /// True for a zero-length registration.
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// The access rights in force: the local rights granted at registration and the remote
    /// rights of the current steering tag.
    pub fn access(&self) -> Access {
        Access::from_bits_truncate(self.inner.access.load(Ordering::Acquire))
    }

    /// The access rights granted at registration: the most any steering tag of the region may
    /// grant.
    pub fn registered_access(&self) -> Access {
        self.inner.registered
    }

    /// The check every provider's [`Connection::rekey`](super::Connection::rekey) makes before
    /// anything else: `remote` names remote rights only (`REMOTE_READ`, `REMOTE_WRITE`), and
    /// only ones the region was registered with. Anything else is
    /// [`Error::InvalidWorkRequest`], and the region keeps its tag and rights.
    pub fn check_remote_rights(&self, remote: Access) -> Result<()> {
        let remote_only = Access::REMOTE_READ | Access::REMOTE_WRITE;
        if !remote_only.contains(remote) {
            return Err(Error::InvalidWorkRequest(format!(
                "a steering tag grants remote rights only, not {remote:?}"
            )));
        }
        if !self.inner.registered.contains(remote) {
            return Err(Error::InvalidWorkRequest(format!(
                "{remote:?} goes beyond the rights the region was registered with ({:?})",
                self.inner.registered
            )));
        }
        Ok(())
    }

    /// Records that the region's remote steering tag is now `rkey`, granting the remote rights
    /// of `remote` (a provider calls this from
    /// [`Connection::rekey`](super::Connection::rekey), after the provider made the new tag
    /// and revoked the old one). Rights the region was not registered with are dropped (a
    /// provider refuses them first, see [`MemoryRegion::check_remote_rights`]).
    pub fn set_remote_key(&self, rkey: u32, remote: Access) {
        let local = self.inner.registered.bits() & Access::LOCAL_WRITE.bits();
        let remote = remote.bits()
            & self.inner.registered.bits()
            & (Access::REMOTE_READ.bits() | Access::REMOTE_WRITE.bits());
        self.inner.rkey.store(rkey, Ordering::Release);
        self.inner.access.store(local | remote, Ordering::Release);
    }

    /// The provider's registration handle, if it is of type `H`.
    pub fn handle<H: Any>(&self) -> Option<&H> {
        self.inner.registration.downcast_ref::<H>()
    }

    /// A weak reference that does not keep the memory alive.
    pub fn downgrade(&self) -> WeakRegion {
        WeakRegion {
            inner: Arc::downgrade(&self.inner),
        }
    }

    /// True when both handles name the same registration.
    pub fn ptr_eq(&self, other: &MemoryRegion) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The byte range `offset..offset + len` if it lies inside the registration.
    pub fn checked_range(&self, offset: usize, len: usize) -> Result<Range<usize>> {
        match offset.checked_add(len) {
            Some(end) if end <= self.inner.len => Ok(offset..end),
            _ => Err(Error::OutOfBounds {
                offset: offset as u64,
                len: len as u64,
                region_len: self.inner.len as u64,
            }),
        }
    }

    /// Copies `dst.len()` bytes starting at `offset` out of the region.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        let range = self.checked_range(offset, dst.len())?;
        self.with_slice(|s| dst.copy_from_slice(&s[range]));
        Ok(())
    }

    /// Copies `src` into the region starting at `offset`.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<()> {
        let range = self.checked_range(offset, src.len())?;
        self.with_mut_slice(|s| s[range].copy_from_slice(src));
        Ok(())
    }

    /// A copy of `range` of the region.
    pub fn to_vec(&self, range: Range<usize>) -> Result<Vec<u8>> {
        let len = range.end.saturating_sub(range.start);
        let mut out = vec![0; len];
        self.read(range.start, &mut out)?;
        Ok(out)
    }

    /// Runs `f` on the whole buffer under the region's read lock.
    pub fn with_slice<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(&self.read_guard())
    }

    /// The whole buffer under the region's read lock, held until the guard is dropped.
    ///
    /// For a provider that hands several regions to one system call (a vectored socket write).
    /// The guard is `!Send`, so it cannot be held across an `.await` of a spawned task. Never
    /// take a second guard of the same region on one thread (a waiting writer would deadlock
    /// it); take guards of several regions in increasing [`MemoryRegion::lock_order`].
    pub(crate) fn read_guard(&self) -> RegionReadGuard<'_> {
        let guard = self.inner.lock.read();
        // SAFETY: writers through safe code hold the write lock, which the read lock held by the
        // returned guard excludes for the lifetime of the slice; see the module documentation.
        let data = unsafe { (*self.inner.data.get()).as_slice() };
        RegionReadGuard {
            _guard: guard,
            data,
        }
    }

    /// The order in which guards of several regions are taken (see
    /// [`MemoryRegion::read_guard`]); equal for clones of one region.
    #[cfg_attr(not(feature = "soft"), allow(dead_code))]
    pub(crate) fn lock_order(&self) -> usize {
        Arc::as_ptr(&self.inner) as usize
    }

    /// Runs `f` on the whole buffer under the region's write lock.
    pub fn with_mut_slice<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let _guard = self.inner.lock.write();
        // SAFETY: the write lock excludes every other safe accessor.
        let data = unsafe { (*self.inner.data.get()).as_mut_slice() };
        f(data)
    }

    /// The stable address of the buffer, for providers that hand it to hardware.
    ///
    /// Reading or writing through this pointer bypasses the region's lock: the caller must make
    /// sure no safe accessor runs at the same time (a verbs provider gives the pointer to the
    /// adapter, which is outside Rust's memory model).
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.inner.ptr
    }

    /// Takes the buffer back when this is the last handle (the registration is released first).
    pub fn try_into_vec(self) -> std::result::Result<Vec<u8>, MemoryRegion> {
        match Arc::try_unwrap(self.inner) {
            Ok(inner) => {
                let Inner {
                    registration, data, ..
                } = inner;
                drop(registration);
                Ok(data.into_inner().into_vec())
            }
            Err(inner) => Err(MemoryRegion { inner }),
        }
    }
}

/// Read access to a region's buffer, holding its read lock (see [`MemoryRegion::read_guard`]).
pub(crate) struct RegionReadGuard<'a> {
    _guard: RwLockReadGuard<'a, ()>,
    data: &'a [u8],
}

impl std::ops::Deref for RegionReadGuard<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.data
    }
}

impl fmt::Debug for MemoryRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryRegion")
            .field("lkey", &format_args!("{:#x}", self.lkey()))
            .field("rkey", &format_args!("{:#x}", self.rkey()))
            .field("addr", &format_args!("{:#x}", self.addr()))
            .field("len", &self.len())
            .field("access", &self.access())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(len: usize) -> MemoryRegion {
        MemoryRegion::register_with(vec![0; len], Access::LOCAL_WRITE, |_, _| {
            Ok((
                RegionKeys {
                    lkey: 1,
                    rkey: 2,
                    addr: 0x1000,
                },
                (),
            ))
        })
        .unwrap()
    }

    #[test]
    fn rejects_out_of_bounds_access() {
        let mr = region(8);
        assert!(mr.write(6, &[1, 2, 3]).is_err());
        assert!(mr.read(usize::MAX, &mut [0]).is_err());
        mr.write(5, &[1, 2, 3]).unwrap();
        assert_eq!(mr.to_vec(4..8).unwrap(), vec![0, 1, 2, 3]);
    }

    #[test]
    fn returns_the_buffer_to_the_last_owner() {
        let mr = region(4);
        let clone = mr.clone();
        let mr = mr.try_into_vec().unwrap_err();
        drop(clone);
        assert_eq!(mr.try_into_vec().unwrap(), vec![0; 4]);
    }

    #[test]
    fn remote_rights_of_a_rekey_stay_within_the_registration() {
        let mr = MemoryRegion::register_with(
            vec![0; 4],
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            |_, _| {
                Ok((
                    RegionKeys {
                        lkey: 1,
                        rkey: 2,
                        addr: 0,
                    },
                    (),
                ))
            },
        )
        .unwrap();
        mr.check_remote_rights(Access::REMOTE_WRITE).unwrap();
        mr.check_remote_rights(Access::NONE).unwrap();
        for refused in [
            Access::REMOTE_READ,
            Access::REMOTE_READ | Access::REMOTE_WRITE,
            Access::LOCAL_WRITE,
        ] {
            assert!(
                matches!(
                    mr.check_remote_rights(refused),
                    Err(Error::InvalidWorkRequest(_))
                ),
                "{refused:?}"
            );
        }
        mr.set_remote_key(3, Access::NONE);
        assert_eq!((mr.rkey(), mr.access()), (3, Access::LOCAL_WRITE));
        mr.set_remote_key(4, Access::REMOTE_WRITE);
        assert_eq!(mr.access(), Access::LOCAL_WRITE | Access::REMOTE_WRITE);
    }

    #[test]
    fn weak_reference_dies_with_the_region() {
        let mr = region(4);
        let weak = mr.downgrade();
        assert!(weak.upgrade().is_some());
        drop(mr);
        assert!(weak.upgrade().is_none());
    }
}

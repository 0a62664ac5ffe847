//! Registered buffers for one connection, reused rather than registered per call (seed 004
//! section 5.4: "allocating chunk list data and RPC headers in a reusable way from
//! pre-registered pools").
//!
//! * Buffers come in power-of-four size classes from 4 KiB to [`PoolConfig::max_buffer`];
//!   a larger request is served by several buffers (several segments of one chunk).
//! * Each buffer is its own registration, so advertising one exposes nothing else. A buffer is
//!   advertised by giving it a fresh steering tag with exactly the rights a chunk needs
//!   ([`Connection::rekey`]); the core invalidates that tag before the call completes, and a
//!   buffer whose tag is still live when it comes back (an abandoned call) is revoked before
//!   it is lent again.
//! * A buffer is lent as a [`PoolBuf`]; it returns to its free list when the last clone (and
//!   the last [`Bytes`] frozen from it) is dropped. Free buffers beyond
//!   [`PoolConfig::max_free_bytes`] are deregistered.
//! * Data that already lies in a lent buffer (a handler filled it, or a reply landed in it)
//!   moves without a copy: [`Memory::source`] finds the buffer by address. Anything else is
//!   copied once into a pool buffer. Registering an application's own memory on demand would
//!   need the region to pin memory the application owns; the contract's regions own theirs, so
//!   copying into the pool is the safe form, and [`PoolStats::copied_bytes`] counts it.
//!
//! On a provider that cannot rekey (Linux siw has no memory windows) buffers that must be
//! reachable by the peer are registered for that one use and deregistered after it.
//!
//! # Who owns what, and how much of it
//!
//! Every lent buffer is charged to the connection's [`MemoryBudget`] (a child of its server's,
//! see [`budget`](super::budget)) until the last handle to it is dropped. A handler that keeps
//! an argument's [`Bytes`] keeps the buffer the argument arrived in, and with it the charge:
//! on the verbs provider that is pinned memory. So received chunk data stays in its
//! registered buffer only while the memory lent out is below half of every budget
//! ([`Memory::keep_received`]); past that it is copied once to ordinary memory as it is handed
//! over (counted in [`PoolStats::copied_out_bytes`]) and the registered buffer goes back at
//! once. A handler may therefore keep argument `Bytes` for as long as it likes: what it keeps
//! never grows registered memory past half the budget, and the calls to come always find the
//! other half for their Read chunks. Buffers this side fills (a handler's
//! [`CallContext::buffer`](crate::rpc::CallContext::buffer), a caller's
//! [`Client::buffer`](crate::rpc::Client::buffer)) are the application's: they count while
//! held, and are never refused (the application, not the peer, decides how many it takes).

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use bytes::Bytes;

use super::budget::{Charge, MemoryBudget};
#[cfg(doc)]
use super::core::Memory;
use super::core::{Buf, MemoryError, MemoryErrorKind};
use crate::rdma::{Access, Connection, Error as RdmaError, MemoryRegion};
use crate::rpc::{BufferSource, RegisteredBuffer, RegisteredMemory};

/// The smallest buffer.
pub const MIN_BUFFER: usize = 4096;

/// Settings of a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolConfig {
    /// The largest single buffer; larger requests take several. A power of four times 4 KiB.
    pub max_buffer: usize,
    /// Free buffers kept registered for reuse, in bytes; beyond it they are deregistered.
    pub max_free_bytes: usize,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            max_buffer: 4 << 20,
            max_free_bytes: 64 << 20,
        }
    }
}

/// What a pool has done: for tests that show registrations and copies stay flat, and for
/// operators.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Registrations made, in all.
    pub registrations: u64,
    /// Registrations alive now (lent or free).
    pub live: u64,
    /// Steering tags made by rekeying.
    pub rekeys: u64,
    /// Buffers lent, in all.
    pub checkouts: u64,
    /// Bytes copied into pool buffers because they were not in one.
    pub copied_bytes: u64,
    /// Bytes handed to RDMA operations straight from the buffer they were in.
    pub zero_copy_bytes: u64,
    /// Bytes of buffers lent now (charged to the connection's [`MemoryBudget`]).
    pub lent_bytes: u64,
    /// Bytes of received chunk data copied out of pool buffers into ordinary memory because
    /// the memory lent out was near its budget ([`Memory::keep_received`]).
    pub copied_out_bytes: u64,
}

#[derive(Default)]
struct Counters {
    registrations: AtomicU64,
    deregistrations: AtomicU64,
    rekeys: AtomicU64,
    checkouts: AtomicU64,
    copied_bytes: AtomicU64,
    zero_copy_bytes: AtomicU64,
    copied_out_bytes: AtomicU64,
}

/// Deregisters on drop and counts it.
struct Registration {
    mr: MemoryRegion,
    counters: Arc<Counters>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.counters
            .deregistrations
            .fetch_add(1, Ordering::Relaxed);
    }
}

struct FreeLists {
    /// Free buffers per size class.
    free: Vec<Vec<Registration>>,
    free_bytes: usize,
    /// Lent buffers by the address of their first byte, for finding the buffer some bytes
    /// lie in.
    lent: BTreeMap<usize, (usize, Weak<Checkout>)>,
}

struct Shared<C: Connection> {
    conn: Arc<C>,
    config: PoolConfig,
    /// What lent buffers are charged to.
    budget: MemoryBudget,
    counters: Arc<Counters>,
    lists: Mutex<FreeLists>,
    /// False once the provider said it cannot rekey.
    rekeys: AtomicBool,
}

/// The connection's registered buffers. Cheap to clone.
pub struct Pool<C: Connection> {
    shared: Arc<Shared<C>>,
}

impl<C: Connection> Clone for Pool<C> {
    fn clone(&self) -> Self {
        Pool {
            shared: self.shared.clone(),
        }
    }
}

impl<C: Connection> fmt::Debug for Pool<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("stats", &self.stats())
            .finish()
    }
}

/// One lent buffer. Returns itself to the pool when dropped.
struct Checkout {
    reg: Option<Registration>,
    class: usize,
    /// Reusable: registered for the pool (false: a one-use registration on a provider that
    /// cannot rekey).
    pooled: bool,
    /// A steering tag with remote rights was made for the buffer.
    exposed: AtomicBool,
    /// That tag was invalidated since.
    invalidated: AtomicBool,
    home: Weak<dyn Return>,
    /// The budget charge for the buffer, given back with it.
    _charge: Charge,
}

/// What a checkout needs from its pool when it comes back, without naming the connection type.
trait Return: Send + Sync {
    fn put_back(&self, reg: Registration, class: usize, revoke: bool);
    fn forget(&self, addr: usize);
}

impl Drop for Checkout {
    fn drop(&mut self) {
        let Some(reg) = self.reg.take() else {
            return;
        };
        let Some(home) = self.home.upgrade() else {
            return;
        };
        home.forget(reg.mr.as_mut_ptr() as usize);
        if self.pooled {
            let revoke =
                self.exposed.load(Ordering::Acquire) && !self.invalidated.load(Ordering::Acquire);
            home.put_back(reg, self.class, revoke);
        }
    }
}

impl<C: Connection> Return for Shared<C> {
    fn put_back(&self, reg: Registration, class: usize, revoke: bool) {
        // A tag the core did not invalidate (an abandoned call) must not stay reachable.
        if revoke && self.conn.revoke(&reg.mr).is_err() {
            return;
        }
        let mut lists = self.lists.lock();
        let size = reg.mr.len();
        if lists.free_bytes + size <= self.config.max_free_bytes {
            lists.free_bytes += size;
            lists.free[class].push(reg);
        }
    }

    fn forget(&self, addr: usize) {
        let mut lists = self.lists.lock();
        lists.lent.remove(&addr);
    }
}

/// A lent buffer, as the core and the driver see it. Clones share it.
pub struct PoolBuf(Arc<Checkout>);

impl Clone for PoolBuf {
    fn clone(&self) -> Self {
        PoolBuf(self.0.clone())
    }
}

impl fmt::Debug for PoolBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolBuf")
            .field("len", &self.len())
            .field("handle", &format_args!("{:#x}", self.handle()))
            .finish()
    }
}

impl PoolBuf {
    fn reg(&self) -> &Registration {
        self.0
            .reg
            .as_ref()
            .expect("a lent buffer has its registration")
    }

    /// The registration, for building work requests.
    pub fn region(&self) -> &MemoryRegion {
        &self.reg().mr
    }

    /// The buffer's bytes.
    ///
    /// # Safety
    /// Nothing may write the range meanwhile: no work request placing data into it is
    /// outstanding, and no steering tag the peer could write through is live.
    unsafe fn bytes(&self, range: Range<usize>) -> &[u8] {
        let mr = self.region();
        debug_assert!(range.end <= mr.len());
        // SAFETY: the region's memory stays allocated while `self` holds it, and the caller
        // guarantees nothing writes the range.
        unsafe { std::slice::from_raw_parts(mr.as_mut_ptr().add(range.start), range.len()) }
    }
}

impl Buf for PoolBuf {
    fn len(&self) -> usize {
        self.region().len()
    }

    fn handle(&self) -> u32 {
        self.region().rkey()
    }

    fn addr(&self) -> u64 {
        self.region().addr()
    }

    fn freeze(&self, range: Range<usize>) -> Bytes {
        let range = range.start.min(self.len())..range.end.min(self.len());
        Bytes::from_owner(Frozen {
            buf: self.clone(),
            range,
        })
    }

    fn mark_invalidated(&self) {
        self.0.invalidated.store(true, Ordering::Release);
    }
}

/// The owner behind [`Bytes`] frozen from a pool buffer: keeps the buffer lent.
struct Frozen {
    buf: PoolBuf,
    range: Range<usize>,
}

impl AsRef<[u8]> for Frozen {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `Buf::freeze` is only called once nothing remote can write the buffer (see
        // the trait), and nothing local posts into a buffer that is frozen.
        unsafe { self.buf.bytes(self.range.clone()) }
    }
}

/// A pool buffer lent to the application (a handler's result, a caller's receive buffer).
pub struct PoolLease {
    buf: PoolBuf,
    len: usize,
}

impl PoolLease {
    /// The buffer and the length the application asked for.
    pub fn into_parts(self) -> (PoolBuf, usize) {
        (self.buf, self.len)
    }
}

impl RegisteredMemory for PoolLease {
    fn as_slice(&self) -> &[u8] {
        // SAFETY: a lease is a fresh checkout: no tag of it is live and no work request names
        // it until the application gives it back.
        unsafe { self.buf.bytes(0..self.len) }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        let mr = self.buf.region();
        // SAFETY: as above; `&mut self` makes this the only access.
        unsafe { std::slice::from_raw_parts_mut(mr.as_mut_ptr(), self.len) }
    }

    fn freeze(self: Box<Self>, len: usize) -> Bytes {
        self.buf.freeze(0..len.min(self.len))
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
        self
    }
}

fn class_of(len: usize, max: usize) -> (usize, usize) {
    let mut size = MIN_BUFFER;
    let mut class = 0;
    while size < len && size < max {
        size *= 4;
        class += 1;
    }
    (class, size)
}

fn memory_error(e: RdmaError) -> MemoryError {
    MemoryError::failed(e.to_string())
}

/// The size of each buffer [`Memory::alloc`] lends for `len` bytes: as many of the largest as
/// it takes, then one of the class the rest needs.
fn buffer_sizes(len: usize, max: usize) -> impl Iterator<Item = usize> {
    let mut left = len.max(1);
    std::iter::from_fn(move || {
        (left > 0).then(|| {
            let n = left.min(max);
            left -= n;
            n
        })
    })
}

impl<C: Connection> Pool<C> {
    /// An empty pool for `conn`, charging what it lends to `budget`.
    pub fn new(conn: Arc<C>, config: PoolConfig, budget: MemoryBudget) -> Pool<C> {
        let (classes, _) = class_of(config.max_buffer, config.max_buffer);
        Pool {
            shared: Arc::new(Shared {
                conn,
                config,
                budget,
                counters: Arc::default(),
                lists: Mutex::new(FreeLists {
                    free: (0..=classes).map(|_| Vec::new()).collect(),
                    free_bytes: 0,
                    lent: BTreeMap::new(),
                }),
                rekeys: AtomicBool::new(true),
            }),
        }
    }

    /// Deregisters every free buffer (lent ones come back as usual): for a connection that
    /// has gone idle, whose buffers would otherwise stay registered (pinned, on a device) for
    /// as long as it is open. Returns the bytes released.
    pub(crate) fn release_free(&self) -> usize {
        let released: Vec<Registration> = {
            let mut lists = self.shared.lists.lock();
            lists.free_bytes = 0;
            lists.free.iter_mut().flat_map(std::mem::take).collect()
        };
        // Deregistered as they drop, outside the lock.
        released.iter().map(|r| r.mr.len()).sum()
    }

    /// What the pool has done so far.
    pub fn stats(&self) -> PoolStats {
        let c = &self.shared.counters;
        let registrations = c.registrations.load(Ordering::Relaxed);
        PoolStats {
            registrations,
            live: registrations - c.deregistrations.load(Ordering::Relaxed),
            rekeys: c.rekeys.load(Ordering::Relaxed),
            checkouts: c.checkouts.load(Ordering::Relaxed),
            copied_bytes: c.copied_bytes.load(Ordering::Relaxed),
            zero_copy_bytes: c.zero_copy_bytes.load(Ordering::Relaxed),
            lent_bytes: self.shared.budget.used() as u64,
            copied_out_bytes: c.copied_out_bytes.load(Ordering::Relaxed),
        }
    }

    /// The budget lent buffers are charged to.
    pub fn budget(&self) -> &MemoryBudget {
        &self.shared.budget
    }

    fn register(&self, size: usize, access: Access) -> Result<Registration, MemoryError> {
        let mr = self
            .shared
            .conn
            .register_zeroed(size, access)
            .map_err(memory_error)?;
        self.shared
            .counters
            .registrations
            .fetch_add(1, Ordering::Relaxed);
        Ok(Registration {
            mr,
            counters: self.shared.counters.clone(),
        })
    }

    fn can_rekey(&self) -> bool {
        self.shared.rekeys.load(Ordering::Relaxed)
    }

    /// Lends one buffer of at least `len` bytes (at most the largest class), reachable by the
    /// peer with `remote`, charged to the budget whatever it holds.
    fn checkout(&self, len: usize, remote: Access) -> Result<PoolBuf, MemoryError> {
        let (_, size) = class_of(len, self.shared.config.max_buffer);
        self.checkout_charged(len, remote, self.shared.budget.charge(size))
    }

    /// [`Pool::checkout`] paid with `charge` (the buffer's class size).
    fn checkout_charged(
        &self,
        len: usize,
        remote: Access,
        charge: Charge,
    ) -> Result<PoolBuf, MemoryError> {
        let (class, size) = class_of(len, self.shared.config.max_buffer);
        let all = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
        if !self.can_rekey() {
            return self.checkout_without_rekey(len, remote, charge);
        }
        let reused = self.take_free(class);
        let reg = match reused {
            Some(reg) => reg,
            None => {
                let reg = self.register(size, all)?;
                // The tag a registration starts with was never advertised: revoke it, so the
                // buffer is reachable only while a chunk names it.
                match self.shared.conn.rekey(&reg.mr, Access::NONE) {
                    Ok(()) => {}
                    Err(RdmaError::Unsupported(_)) => {
                        self.shared.rekeys.store(false, Ordering::Relaxed);
                        drop(reg);
                        return self.checkout_charged(len, remote, charge);
                    }
                    Err(e) => return Err(memory_error(e)),
                }
                reg
            }
        };
        let buf = self.lend(reg, class, true, false, charge);
        if remote.is_remote() {
            self.rekey(&buf, remote)?;
        }
        Ok(buf)
    }

    /// [`Pool::checkout_charged`] on a provider that cannot rekey: a buffer the peer must
    /// reach is a registration for this one use with exactly the rights needed (revoked by
    /// [`Connection::revoke`] when the core invalidates it); any other is a pooled
    /// registration without remote rights, which no steering tag ever reaches.
    fn checkout_without_rekey(
        &self,
        len: usize,
        remote: Access,
        charge: Charge,
    ) -> Result<PoolBuf, MemoryError> {
        let (class, size) = class_of(len, self.shared.config.max_buffer);
        if remote.is_remote() {
            let reg = self.register(size, Access::LOCAL_WRITE | remote)?;
            return Ok(self.lend(reg, class, false, true, charge));
        }
        // Once rekeying is known to be unsupported every pooled registration is local: the
        // first registration made found out, and was not pooled.
        let reused = self.take_free(class);
        let reg = match reused {
            Some(reg) => reg,
            None => self.register(size, Access::LOCAL_WRITE)?,
        };
        Ok(self.lend(reg, class, true, false, charge))
    }

    /// A free registration of `class`, if the pool keeps one.
    fn take_free(&self, class: usize) -> Option<Registration> {
        let mut lists = self.shared.lists.lock();
        let reg = lists.free[class].pop();
        if let Some(r) = &reg {
            lists.free_bytes -= r.mr.len();
        }
        reg
    }

    fn lend(
        &self,
        reg: Registration,
        class: usize,
        pooled: bool,
        exposed: bool,
        charge: Charge,
    ) -> PoolBuf {
        self.shared
            .counters
            .checkouts
            .fetch_add(1, Ordering::Relaxed);
        let addr = reg.mr.as_mut_ptr() as usize;
        let len = reg.mr.len();
        let home: Arc<dyn Return> = self.shared.clone();
        let checkout = Arc::new(Checkout {
            reg: Some(reg),
            class,
            pooled,
            exposed: AtomicBool::new(exposed),
            invalidated: AtomicBool::new(false),
            home: Arc::downgrade(&home),
            _charge: charge,
        });
        let mut lists = self.shared.lists.lock();
        lists.lent.insert(addr, (len, Arc::downgrade(&checkout)));
        PoolBuf(checkout)
    }

    fn rekey(&self, buf: &PoolBuf, remote: Access) -> Result<(), MemoryError> {
        self.shared
            .conn
            .rekey(buf.region(), remote)
            .map_err(memory_error)?;
        self.shared.counters.rekeys.fetch_add(1, Ordering::Relaxed);
        buf.0.exposed.store(true, Ordering::Release);
        buf.0.invalidated.store(false, Ordering::Release);
        Ok(())
    }

    /// Revokes `buf`'s steering tag now: no tag reaches it any more.
    pub fn revoke(&self, buf: &PoolBuf) -> Result<(), MemoryError> {
        self.shared
            .conn
            .revoke(buf.region())
            .map_err(memory_error)?;
        buf.0.exposed.store(false, Ordering::Release);
        Ok(())
    }

    /// The lent buffer `data` lies in, and where.
    fn find(&self, data: &[u8]) -> Option<(PoolBuf, usize)> {
        let ptr = data.as_ptr() as usize;
        let lists = self.shared.lists.lock();
        let (&base, (len, weak)) = lists.lent.range(..=ptr).next_back()?;
        let offset = ptr - base;
        if offset + data.len() > *len {
            return None;
        }
        Some((PoolBuf(weak.upgrade()?), offset))
    }

    /// A buffer of `len` bytes for the application to fill (not reachable by the peer).
    pub fn lease(&self, len: usize) -> Result<PoolLease, MemoryError> {
        if len > self.shared.config.max_buffer {
            return Err(MemoryError::new(
                MemoryErrorKind::TooLarge,
                format!(
                    "{len} bytes is more than the largest buffer ({})",
                    self.shared.config.max_buffer
                ),
            ));
        }
        let buf = self.checkout(len, Access::NONE)?;
        if self.can_rekey() {
            return Ok(PoolLease { buf, len });
        }
        // Without rekeying, a buffer reaches the peer only with the rights it was registered
        // with: the application's is registered with them, unadvertised, for one exposure
        // (see `Pool::expose_once`). The first lease on such a provider finds that out.
        drop(buf);
        let (class, size) = class_of(len, self.shared.config.max_buffer);
        let charge = self.shared.budget.charge(size);
        let all = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
        let reg = self.register(size, all)?;
        Ok(PoolLease {
            buf: self.lend(reg, class, false, false, charge),
            len,
        })
    }

    /// On a provider that cannot rekey: makes `buf` reachable with `remote` under the key it
    /// was registered with, if that is allowed: an application's buffer registered with those
    /// rights and never advertised. Its exposure ends with the call (the core invalidates the
    /// key, which on such a provider revokes the registration), so this happens once.
    fn expose_once(&self, buf: &PoolBuf, remote: Access) -> bool {
        let once = !buf.0.pooled
            && buf.region().registered_access().contains(remote)
            && !buf.0.exposed.swap(true, Ordering::AcqRel);
        if once {
            buf.0.invalidated.store(false, Ordering::Release);
        }
        once
    }

    /// The lease inside `buffer`, if it came from this pool.
    pub fn take_lease(&self, buffer: RegisteredBuffer) -> Option<PoolLease> {
        let lease = buffer
            .into_registered()
            .ok()?
            .into_any()
            .downcast::<PoolLease>()
            .ok()?;
        let mine = self.find(lease.buf.reg_slice())?.0;
        Arc::ptr_eq(&mine.0, &lease.buf.0).then_some(*lease)
    }

    /// The connection's buffers as the application asks for them.
    pub fn buffer_source(&self) -> Arc<dyn BufferSource> {
        Arc::new(PoolBuffers(self.clone()))
    }
}

impl PoolBuf {
    /// An empty slice at the buffer's first byte, to look the buffer up by address.
    fn reg_slice(&self) -> &[u8] {
        // SAFETY: zero bytes are read.
        unsafe { self.bytes(0..0) }
    }
}

/// [`BufferSource`] over a pool: buffers from it move to the wire without a copy.
struct PoolBuffers<C: Connection>(Pool<C>);

impl<C: Connection> BufferSource for PoolBuffers<C> {
    fn buffer(&self, len: usize) -> RegisteredBuffer {
        match self.0.lease(len) {
            Ok(lease) => RegisteredBuffer::registered(Box::new(lease)),
            Err(e) => {
                tracing::debug!(len, error = %e, "no pool buffer: ordinary memory");
                RegisteredBuffer::heap(len)
            }
        }
    }
}

mod memory;
#[cfg(test)]
mod tests;

pub(crate) use memory::HintsLater;

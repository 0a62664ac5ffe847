//! The verbs object tree below an rdma_cm identifier: protection domain, completion channel and
//! queue, queue pair, memory registrations and memory windows.
//!
//! Ownership mirrors the tree: every object holds an `Arc` of its parent and destroys itself in
//! `Drop`, so children always go first (a registration outliving its connection keeps the
//! protection domain and the device context alive, not the queue pair). The one exception is
//! a memory window bound on a queue pair: the device holds the queue pair for it, so a
//! connection deallocates the windows still bound on it before its queue pair goes (see
//! [`BoundWindows::revoke_all`]).

use std::collections::HashMap;
use std::io;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use rdma_sys::*;

use super::cm::{CmId, Readiness};

/// Live memory registrations and memory windows of this process (see [`super::live_registrations`]).
pub(super) static LIVE_REGISTRATIONS: AtomicUsize = AtomicUsize::new(0);

/// Live rdma_cm and verbs objects other than registrations (event channels, identifiers,
/// protection domains, completion queues, queue pairs); see [`super::live_objects`].
pub(super) static LIVE_OBJECTS: [AtomicUsize; 5] = [
    AtomicUsize::new(0),
    AtomicUsize::new(0),
    AtomicUsize::new(0),
    AtomicUsize::new(0),
    AtomicUsize::new(0),
];

/// The kinds of object counted in [`LIVE_OBJECTS`].
#[derive(Clone, Copy, Debug)]
pub(super) enum Object {
    EventChannel,
    CmId,
    ProtectionDomain,
    CompletionQueue,
    QueuePair,
}

/// Counts one more live object.
pub(super) fn track(kind: Object) {
    LIVE_OBJECTS[kind as usize].fetch_add(1, Ordering::SeqCst);
}

/// Counts one object fewer.
pub(super) fn untrack(kind: Object) {
    LIVE_OBJECTS[kind as usize].fetch_sub(1, Ordering::SeqCst);
}

fn check(rc: i32) -> io::Result<()> {
    // libibverbs returns the errno (positive) or -1 with errno set.
    match rc {
        0 => Ok(()),
        rc if rc > 0 => Err(io::Error::from_raw_os_error(rc)),
        _ => Err(io::Error::last_os_error()),
    }
}

/// What the device allows, clamped to what this provider asks for.
#[derive(Clone, Copy, Debug)]
pub(super) struct DeviceLimits {
    pub(super) max_qp_wr: u32,
    pub(super) max_sge: u32,
    pub(super) max_cqe: u32,
    pub(super) max_qp_rd_atom: u32,
    pub(super) max_qp_init_rd_atom: u32,
    /// The device has type-2 memory windows (rxe and most RNICs; not siw).
    pub(super) windows: bool,
}

impl DeviceLimits {
    pub(super) fn query(id: &CmId) -> io::Result<DeviceLimits> {
        // SAFETY: all-zero is a valid ibv_device_attr to be filled in.
        let mut attr: ibv_device_attr = unsafe { std::mem::zeroed() };
        // SAFETY: the identifier is bound to a device (address resolved or request received).
        check(unsafe { ibv_query_device(id.context(), &mut attr) })?;
        let pos = |v: i32| v.max(0) as u32;
        Ok(DeviceLimits {
            max_qp_wr: pos(attr.max_qp_wr),
            max_sge: pos(attr.max_sge),
            max_cqe: pos(attr.max_cqe),
            max_qp_rd_atom: pos(attr.max_qp_rd_atom),
            max_qp_init_rd_atom: pos(attr.max_qp_init_rd_atom),
            windows: attr.device_cap_flags
                & (ibv_device_cap_flags::IBV_DEVICE_MEM_WINDOW_TYPE_2A.0
                    | ibv_device_cap_flags::IBV_DEVICE_MEM_WINDOW_TYPE_2B.0)
                != 0,
        })
    }
}

/// A protection domain (`ibv_alloc_pd`) on the identifier's device. Its connection deallocates
/// it when it goes ([`ProtectionDomain::release`]), once it has released every registration in
/// it, even those the application still holds; those keep only this husk.
pub(super) struct ProtectionDomain {
    /// Null once released.
    raw: AtomicPtr<ibv_pd>,
    _id: Arc<CmId>,
}

// SAFETY: verbs objects are thread-safe in libibverbs.
unsafe impl Send for ProtectionDomain {}
// SAFETY: as above.
unsafe impl Sync for ProtectionDomain {}

impl ProtectionDomain {
    pub(super) fn new(id: &Arc<CmId>) -> io::Result<Arc<ProtectionDomain>> {
        // SAFETY: the identifier's context is live while the identifier is.
        let raw = unsafe { ibv_alloc_pd(id.context()) };
        if raw.is_null() {
            return Err(io::Error::last_os_error());
        }
        track(Object::ProtectionDomain);
        Ok(Arc::new(ProtectionDomain {
            raw: AtomicPtr::new(raw),
            _id: id.clone(),
        }))
    }

    /// The domain, or null once released.
    pub(super) fn raw(&self) -> *mut ibv_pd {
        self.raw.load(Ordering::Acquire)
    }

    /// The domain, or an error once it was released with its connection.
    fn live(&self) -> io::Result<*mut ibv_pd> {
        let raw = self.raw();
        if raw.is_null() {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the connection this memory was registered on is gone",
            ));
        }
        Ok(raw)
    }

    /// Deallocates the domain now. The caller has destroyed its queue pair and released every
    /// registration and window in it ([`Registered::release_all`]); if the device still finds
    /// something in it, the domain stays and `false` is returned.
    pub(super) fn release(&self) -> bool {
        let raw = self.raw.swap(ptr::null_mut(), Ordering::AcqRel);
        if raw.is_null() {
            return true;
        }
        // SAFETY: the domain is live and no longer named by this object.
        if unsafe { ibv_dealloc_pd(raw) } != 0 {
            self.raw.store(raw, Ordering::Release);
            return false;
        }
        untrack(Object::ProtectionDomain);
        true
    }
}

impl Drop for ProtectionDomain {
    fn drop(&mut self) {
        // Every registration, window and queue pair in the domain holds an Arc of it.
        self.release();
    }
}

/// A completion queue with its own completion channel, whose descriptor is driven by tokio.
/// It can be destroyed before it is dropped ([`CompletionQueue::close`]), when its device goes
/// away; polling and arming are then no-ops.
pub(super) struct CompletionQueue {
    /// Both null once destroyed.
    channel: AtomicPtr<ibv_comp_channel>,
    raw: AtomicPtr<ibv_cq>,
    readiness: Readiness,
    /// Waiters are being sent away ([`CompletionQueue::stop_waiters`]): none may start.
    stopping: AtomicBool,
    _id: Arc<CmId>,
}

// SAFETY: verbs objects are thread-safe in libibverbs.
unsafe impl Send for CompletionQueue {}
// SAFETY: as above.
unsafe impl Sync for CompletionQueue {}

impl CompletionQueue {
    pub(super) fn new(id: &Arc<CmId>, entries: u32) -> io::Result<Arc<CompletionQueue>> {
        // SAFETY: the identifier's context is live.
        let channel = unsafe { ibv_create_comp_channel(id.context()) };
        if channel.is_null() {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: context and channel are live.
        let raw =
            unsafe { ibv_create_cq(id.context(), entries as i32, ptr::null_mut(), channel, 0) };
        if raw.is_null() {
            let e = io::Error::last_os_error();
            // SAFETY: no queue uses the channel.
            unsafe { ibv_destroy_comp_channel(channel) };
            return Err(e);
        }
        // SAFETY: channel is live.
        let readiness = match Readiness::new(unsafe { (*channel).fd }) {
            Ok(r) => r,
            Err(e) => {
                // SAFETY: both were just created and are unused.
                unsafe {
                    ibv_destroy_cq(raw);
                    ibv_destroy_comp_channel(channel);
                }
                return Err(e);
            }
        };
        track(Object::CompletionQueue);
        Ok(Arc::new(CompletionQueue {
            channel: AtomicPtr::new(channel),
            raw: AtomicPtr::new(raw),
            readiness,
            stopping: AtomicBool::new(false),
            _id: id.clone(),
        }))
    }

    pub(super) fn raw(&self) -> *mut ibv_cq {
        self.raw.load(Ordering::Acquire)
    }

    /// Whether the queue was destroyed, or is about to be: no new wait on its channel may
    /// start.
    pub(super) fn is_going(&self) -> bool {
        self.stopping.load(Ordering::Acquire) || self.raw().is_null()
    }

    /// Whether the queue was destroyed.
    pub(super) fn is_destroyed(&self) -> bool {
        self.raw().is_null()
    }

    /// Marks the queue as going: [`CompletionQueue::is_going`] from now on, so that no new
    /// wait on its channel starts. The caller then wakes the waiters that started before,
    /// which see the mark, and calls [`CompletionQueue::stop_waiters`].
    pub(super) fn begin_stop(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    /// Asks for an event on the next completion (`ibv_req_notify_cq`). The caller holds the
    /// connection's queue lock (destruction happens under it).
    pub(super) fn arm(&self) -> io::Result<()> {
        let raw = self.raw();
        if raw.is_null() {
            return Ok(());
        }
        // SAFETY: the queue is live (not destroyed: the caller's lock keeps it so).
        check(unsafe { ibv_req_notify_cq(raw, 0) })
    }

    /// Polls up to `wcs.len()` completions; returns how many were written (none once
    /// destroyed). The caller holds the connection's queue lock.
    pub(super) fn poll(&self, wcs: &mut [ibv_wc]) -> io::Result<usize> {
        let raw = self.raw();
        if raw.is_null() {
            return Ok(0);
        }
        // SAFETY: `wcs` has room for the requested number of entries; the queue is live.
        let n = unsafe { ibv_poll_cq(raw, wcs.len() as i32, wcs.as_mut_ptr()) };
        if n < 0 {
            return Err(io::Error::other(format!("ibv_poll_cq failed ({n})")));
        }
        Ok(n as usize)
    }

    /// Waits until the channel reports at least one event, then consumes (and acknowledges)
    /// every pending event until `EAGAIN`. Fails once the queue's waiters were sent away
    /// ([`CompletionQueue::stop_waiters`]).
    pub(super) async fn wait_event(&self) -> io::Result<()> {
        self.readiness
            .drain_with(|| {
                let channel = self.channel.load(Ordering::Acquire);
                let mut got = 0u32;
                loop {
                    let mut cq = ptr::null_mut();
                    let mut ctx = ptr::null_mut();
                    // SAFETY: the channel is live (it is destroyed only after the readiness
                    // was given up, which waits for this) and non-blocking.
                    if unsafe { ibv_get_cq_event(channel, &mut cq, &mut ctx) } != 0 {
                        let e = io::Error::last_os_error();
                        if e.kind() == io::ErrorKind::WouldBlock {
                            return Ok(got);
                        }
                        return Err(e);
                    }
                    // SAFETY: the event belongs to our queue (the only one on this channel).
                    unsafe { ibv_ack_cq_events(cq, 1) };
                    got += 1;
                }
            })
            .await
    }

    /// Gives up the channel's readiness once every [`CompletionQueue::wait_event`] running
    /// has returned (after [`CompletionQueue::begin_stop`], the caller wakes their tasks);
    /// later ones fail.
    pub(super) async fn stop_waiters(&self) {
        self.readiness.stop().await;
    }

    /// Destroys the queue and its channel now, if nobody waits on the channel; returns
    /// whether they are gone. The queue pair using it is gone, and the caller holds the
    /// connection's queue lock.
    pub(super) fn close(&self) -> bool {
        if self.is_destroyed() {
            return true;
        }
        if !self.readiness.try_stop() {
            return false;
        }
        self.destroy();
        true
    }

    fn destroy(&self) {
        let raw = self.raw.swap(ptr::null_mut(), Ordering::AcqRel);
        let channel = self.channel.swap(ptr::null_mut(), Ordering::AcqRel);
        if raw.is_null() {
            return;
        }
        // SAFETY: the queue pair using this queue is gone, every event was acknowledged in
        // wait_event, and the reactor no longer watches the channel.
        unsafe {
            ibv_destroy_cq(raw);
            ibv_destroy_comp_channel(channel);
        }
        untrack(Object::CompletionQueue);
    }
}

impl Drop for CompletionQueue {
    fn drop(&mut self) {
        self.readiness.release();
        self.destroy();
    }
}

/// A reliable-connected queue pair created through rdma_cm (`rdma_create_qp`). It can be
/// destroyed before it is dropped ([`QueuePair::destroy`]), when its device goes away.
pub(super) struct QueuePair {
    /// Null once destroyed.
    raw: AtomicPtr<ibv_qp>,
    /// The inline data the queue pair accepts per request (what the device granted).
    pub(super) max_inline: u32,
    id: Arc<CmId>,
    _pd: Arc<ProtectionDomain>,
    _cq: Arc<CompletionQueue>,
}

// SAFETY: verbs objects are thread-safe in libibverbs.
unsafe impl Send for QueuePair {}
// SAFETY: as above.
unsafe impl Sync for QueuePair {}

/// What a queue pair is created with, beside its domain and completion queue.
pub(super) struct QueuePairCaps {
    pub(super) send_wr: u32,
    /// Ignored with a shared receive queue.
    pub(super) recv_wr: u32,
    pub(super) send_sge: u32,
    pub(super) max_inline: u32,
    /// The shared receive queue the receives come from, or null for the pair's own.
    pub(super) srq: *mut ibv_srq,
}

impl QueuePair {
    pub(super) fn new(
        id: &Arc<CmId>,
        pd: &Arc<ProtectionDomain>,
        cq: &Arc<CompletionQueue>,
        caps: QueuePairCaps,
    ) -> io::Result<QueuePair> {
        let QueuePairCaps {
            send_wr,
            recv_wr,
            send_sge,
            max_inline,
            srq,
        } = caps;
        // SAFETY: all-zero is a valid starting point for the attributes.
        let mut attr: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        attr.send_cq = cq.raw();
        attr.recv_cq = cq.raw();
        attr.srq = srq;
        attr.qp_type = ibv_qp_type::IBV_QPT_RC;
        // Every request this provider posts is signaled; the flag is set per request.
        attr.sq_sig_all = 0;
        attr.cap.max_send_wr = send_wr;
        attr.cap.max_recv_wr = if srq.is_null() { recv_wr } else { 0 };
        attr.cap.max_send_sge = send_sge;
        attr.cap.max_recv_sge = if srq.is_null() { 1 } else { 0 };
        attr.cap.max_inline_data = max_inline;
        // SAFETY: identifier, domain and queue are live and on the same device.
        if let Err(e) = check(unsafe { rdma_create_qp(id.raw(), pd.raw(), &mut attr) }) {
            if max_inline == 0 {
                return Err(e);
            }
            // Some devices take no inline data at all: try again without.
            attr.cap.max_inline_data = 0;
            // SAFETY: as above.
            check(unsafe { rdma_create_qp(id.raw(), pd.raw(), &mut attr) })?;
        }
        // SAFETY: rdma_create_qp stored the queue pair in the identifier.
        let raw = unsafe { (*id.raw()).qp };
        track(Object::QueuePair);
        Ok(QueuePair {
            raw: AtomicPtr::new(raw),
            max_inline: attr.cap.max_inline_data,
            id: id.clone(),
            _pd: pd.clone(),
            _cq: cq.clone(),
        })
    }

    /// The queue pair (null once destroyed: the connection is down by then, and nothing
    /// posts).
    pub(super) fn raw(&self) -> *mut ibv_qp {
        self.raw.load(Ordering::Acquire)
    }

    /// Moves the queue pair to the error state through rdma_cm (`rdma_disconnect`), which
    /// flushes every outstanding request.
    pub(super) fn disconnect(&self) -> io::Result<()> {
        if self.raw().is_null() {
            return Ok(());
        }
        // SAFETY: the identifier is live.
        check(unsafe { rdma_disconnect(self.id.raw()) })
    }

    /// Destroys the queue pair now (idempotent). The caller holds the connection's queue lock
    /// and the connection is down, so nothing posts on it any more.
    pub(super) fn destroy(&self) {
        if self.raw.swap(ptr::null_mut(), Ordering::AcqRel).is_null() {
            return;
        }
        // SAFETY: the identifier outlives this (we hold an Arc); nothing posts any more.
        unsafe { rdma_destroy_qp(self.id.raw()) };
        untrack(Object::QueuePair);
    }
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        self.destroy();
    }
}

/// The keys of one connection's memory windows that may be bound (valid), in send-queue
/// order: a key goes in when its bind is posted and out when an invalidation of it is posted
/// (a local invalidate), seen (a receive that invalidated it) or its window is deallocated.
/// A window whose key is not here is known to be free, and can be bound again at once.
///
/// The set may hold a key whose window is free already (a peer's Send with Invalidate that
/// was executed but whose completion has not been polled yet); it never lacks the key of a
/// bound window. That is the safe way round: binding a bound type-2 window fails and breaks
/// the connection (o10-37.2.30), and invalidating a free one must not happen either (on
/// Linux 6.1 rxe, `rxe_do_invalidate_mw` then puts the window's NULL queue pair: a kernel
/// oops), so a window that may be bound is replaced rather than invalidated (see
/// `VerbsConnection::rekey`).
///
/// Each key names its registration's window slot (weakly: the set keeps no registration
/// alive), so that a connection going away can deallocate the windows still bound on it.
#[derive(Default)]
pub(super) struct BoundWindows {
    keys: Mutex<HashMap<u32, Weak<Mutex<Window>>>>,
}

impl BoundWindows {
    fn keys(&self) -> MutexGuard<'_, HashMap<u32, Weak<Mutex<Window>>>> {
        self.keys.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that `reg`'s window is being bound with `rkey`.
    pub(super) fn insert(&self, rkey: u32, reg: &Registration) {
        self.keys().insert(rkey, Arc::downgrade(&reg.window));
    }

    pub(super) fn remove(&self, rkey: u32) {
        self.keys().remove(&rkey);
    }

    pub(super) fn contains(&self, rkey: u32) -> bool {
        self.keys().contains_key(&rkey)
    }

    /// Deallocates every window that may still be bound, which revokes its key at once; the
    /// registrations live on without a window. The connection calls this when it goes, before
    /// destroying its queue pair: a type-2 window bound on a queue pair holds it in the device
    /// (rxe takes a reference on the queue pair per bound window), and on Linux 6.1 rxe
    /// `ibv_destroy_qp` then blocks the calling thread ~51 s before it gives up waiting
    /// (measured in the Soft-RoCE guest: a registration the peer was given outliving its
    /// connection).
    pub(super) fn revoke_all(&self) {
        // Taken out first: a registration being dropped meanwhile takes this lock with its
        // window's held (dealloc_mw), so the window locks below are taken without it.
        let keys = std::mem::take(&mut *self.keys());
        for (rkey, slot) in keys {
            let Some(slot) = slot.upgrade() else {
                continue;
            };
            let mut window = slot.lock().unwrap_or_else(|e| e.into_inner());
            if window.key() == Some(rkey) {
                let mw = std::mem::replace(&mut window.raw, ptr::null_mut());
                // SAFETY: the window is live (its slot named it) and the slot no longer
                // does; the connection posts nothing more (a bind still queued for the
                // window fails in the device, which looks the window up when it executes).
                unsafe { dealloc_mw(mw, None) };
            }
        }
    }
}

/// A type-2 memory window (`ibv_alloc_mw`), or none.
pub(super) struct Window {
    raw: *mut ibv_mw,
}

// SAFETY: verbs objects may be used from any thread; the slot's mutex serialises access.
unsafe impl Send for Window {}

impl Window {
    /// The window, or null.
    pub(super) fn raw(&self) -> *mut ibv_mw {
        self.raw
    }

    /// The window's current key: the one it is bound with, or was last bound with, or was
    /// allocated with. libibverbs passes it to the device as the key of the window to bind,
    /// so it is kept equal to the device's ([`Window::set_key`] after each bind).
    pub(super) fn key(&self) -> Option<u32> {
        // SAFETY: a non-null window is live while its registration is.
        (!self.raw.is_null()).then(|| unsafe { (*self.raw).rkey })
    }

    /// Records that the window's key is now `rkey` (a bind with it was posted).
    pub(super) fn set_key(&mut self, rkey: u32) {
        if !self.raw.is_null() {
            // SAFETY: as above; the guard of the registration's window makes this the only
            // access (type-2 bind work requests read it when posted).
            unsafe { (*self.raw).rkey = rkey };
        }
    }
}

/// The `ibv_mr` of a [`Registration`], which may be deregistered before the registration is
/// dropped: on a device without memory windows a local invalidate of a region's key is done by
/// deregistering it ([`PlainKeys`]), while the consumer may still hold the region.
pub(super) struct MrSlot {
    /// Null once deregistered.
    raw: Mutex<*mut ibv_mr>,
    lkey: u32,
    rkey: u32,
}

// SAFETY: verbs objects are thread-safe in libibverbs; the mutex serialises deregistration.
unsafe impl Send for MrSlot {}
// SAFETY: as above.
unsafe impl Sync for MrSlot {}

impl MrSlot {
    /// Deregisters the memory region now, if it still is registered: its keys stop working,
    /// locally and remotely. Returns whether it was.
    fn deregister(&self) -> bool {
        let mut raw = self.raw.lock().unwrap_or_else(|e| e.into_inner());
        let mr = std::mem::replace(&mut *raw, ptr::null_mut());
        if mr.is_null() {
            return false;
        }
        // SAFETY: the region is live (non-null) and no longer named by the slot; work
        // requests naming it fail from here on, as after an invalidation.
        unsafe { ibv_dereg_mr(mr) };
        LIVE_REGISTRATIONS.fetch_sub(1, Ordering::SeqCst);
        true
    }

    fn is_registered(&self) -> bool {
        !self.raw.lock().unwrap_or_else(|e| e.into_inner()).is_null()
    }
}

/// The remotely accessible registrations of one connection on a device without memory
/// windows, by their key (the memory region's own): what a local invalidate of that key
/// revokes. Weak: the set keeps no registration alive.
#[derive(Default)]
pub(super) struct PlainKeys {
    keys: Mutex<HashMap<u32, Weak<MrSlot>>>,
}

impl PlainKeys {
    fn keys(&self) -> MutexGuard<'_, HashMap<u32, Weak<MrSlot>>> {
        self.keys.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets `rkey` if it still names `slot` (a key may be reused once its region is gone).
    fn forget(&self, rkey: u32, slot: &Arc<MrSlot>) {
        let mut keys = self.keys();
        if keys
            .get(&rkey)
            .is_some_and(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(slot)))
        {
            keys.remove(&rkey);
        }
    }

    /// Deregisters the registration whose key is `rkey`: the local invalidate of a device
    /// without memory windows. False if no registration of this connection has that key any
    /// more (an invalid key, or one invalidated already).
    pub(super) fn revoke(&self, rkey: u32) -> bool {
        let slot = self.keys().remove(&rkey).and_then(|w| w.upgrade());
        slot.is_some_and(|slot| slot.deregister())
    }
}

/// A registration's region and window, weakly.
type RegisteredEntry = (Weak<MrSlot>, Weak<Mutex<Window>>);

/// Every registration made on one connection (weakly: the set keeps none alive), so that the
/// connection can release them all when it goes, the ones the application still holds
/// included: their memory stays readable, but nothing of it stays registered (pinned), and the
/// protection domain, the identifier and with them the device context can go. That is what
/// lets a removed device finish going away (`rdma link delete` waits for every user context
/// of a device without `disassociate_ucontext`, such as rxe), and what bounds pinned memory
/// by the connections that are open, whatever the application keeps.
#[derive(Default)]
pub(super) struct Registered {
    entries: Mutex<Vec<RegisteredEntry>>,
    /// The count after the last pruning of dead entries: the next one comes at twice that.
    pruned_at: AtomicUsize,
    /// The connection went ([`Registered::release_all`]).
    closed: AtomicBool,
}

impl Registered {
    fn entries(&self) -> MutexGuard<'_, Vec<RegisteredEntry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds `reg` to the set.
    pub(super) fn track(&self, reg: &Registration) {
        let mut entries = self.entries();
        if entries.len() >= 2 * self.pruned_at.load(Ordering::Relaxed).max(32) {
            entries.retain(|(mr, _)| mr.strong_count() > 0);
            self.pruned_at.store(entries.len(), Ordering::Relaxed);
        }
        entries.push((Arc::downgrade(&reg.mr), Arc::downgrade(&reg.window)));
    }

    /// Whether the connection went.
    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Whether a registration of the set still exists (registered or a husk).
    pub(super) fn any_alive(&self) -> bool {
        self.entries().iter().any(|(mr, _)| mr.strong_count() > 0)
    }

    /// Registrations and windows of the set still registered or allocated.
    pub(super) fn live(&self) -> usize {
        let entries = self.entries().clone();
        entries
            .iter()
            .map(|(mr, window)| {
                let mr = mr.upgrade().is_some_and(|mr| mr.is_registered());
                let window = window
                    .upgrade()
                    .is_some_and(|w| !w.lock().unwrap_or_else(|e| e.into_inner()).raw.is_null());
                usize::from(mr) + usize::from(window)
            })
            .sum()
    }

    /// Deallocates every window and deregisters every region of the set. The registrations
    /// live on as husks: their memory is the application's, work requests naming them fail.
    /// The connection calls this when it goes, after [`BoundWindows::revoke_all`].
    pub(super) fn release_all(&self) {
        self.closed.store(true, Ordering::Release);
        // Copied out first: a registration being dropped meanwhile takes its window's lock,
        // never this one, so the locks below are taken without it.
        let entries = self.entries().clone();
        for (mr, window) in entries {
            if let Some(slot) = window.upgrade() {
                let mut window = slot.lock().unwrap_or_else(|e| e.into_inner());
                let mw = std::mem::replace(&mut window.raw, ptr::null_mut());
                if !mw.is_null() {
                    // SAFETY: the window is live and the slot no longer names it; the
                    // connection posts nothing more.
                    unsafe { dealloc_mw(mw, None) };
                }
            }
            if let Some(mr) = mr.upgrade() {
                mr.deregister();
            }
        }
    }
}

/// One memory registration (`ibv_reg_mr`) and, for remotely accessible memory, the type-2
/// memory window bound over it whose rkey is advertised (so that the peer's Send with
/// Invalidate, or a local invalidate, can revoke it). Rekeying replaces the window at times,
/// hence the lock, which also serialises rekeys of one region.
pub(super) struct Registration {
    mr: Arc<MrSlot>,
    /// Shared with the connection's [`BoundWindows`] (weakly) while the window may be bound.
    window: Arc<Mutex<Window>>,
    /// The connection's bound windows, once this registration has a window.
    bound: Option<Arc<BoundWindows>>,
    /// The connection's remotely accessible keys without windows, if this is one of them.
    plain: Option<Arc<PlainKeys>>,
    pd: Arc<ProtectionDomain>,
}

// SAFETY: verbs objects are thread-safe in libibverbs.
unsafe impl Send for Registration {}
// SAFETY: as above.
unsafe impl Sync for Registration {}

/// Allocates a type-2 memory window in `pd`.
fn alloc_mw(pd: &ProtectionDomain) -> io::Result<*mut ibv_mw> {
    // SAFETY: the domain is live.
    let mw = unsafe { ibv_alloc_mw(pd.live()?, ibv_mw_type::IBV_MW_TYPE_2) };
    match mw {
        Some(mw) if !mw.is_null() => {
            LIVE_REGISTRATIONS.fetch_add(1, Ordering::SeqCst);
            Ok(mw)
        }
        _ => Err(io::Error::last_os_error()),
    }
}

/// Deallocates `mw` (non-null), which revokes its key at once if it is bound, and forgets its
/// key in `bound`.
///
/// # Safety
/// `mw` is live and no longer used.
unsafe fn dealloc_mw(mw: *mut ibv_mw, bound: Option<&BoundWindows>) {
    if let Some(bound) = bound {
        // SAFETY: the caller guarantees the window.
        bound.remove(unsafe { (*mw).rkey });
    }
    // SAFETY: as above; a bound window is unbound by deallocation.
    unsafe { ibv_dealloc_mw(mw) };
    LIVE_REGISTRATIONS.fetch_sub(1, Ordering::SeqCst);
}

impl Registration {
    /// Registers `len` bytes at `addr` with `access` (`IBV_ACCESS_*` bits).
    ///
    /// # Safety
    /// `addr..addr + len` must stay allocated and in place until the registration is dropped.
    pub(super) unsafe fn new(
        pd: &Arc<ProtectionDomain>,
        addr: *mut u8,
        len: usize,
        access: u32,
    ) -> io::Result<Registration> {
        // SAFETY: the caller guarantees the range; the domain is live.
        let mr = unsafe { ibv_reg_mr(pd.live()?, addr.cast(), len, access as i32) };
        if mr.is_null() {
            return Err(io::Error::last_os_error());
        }
        LIVE_REGISTRATIONS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: the region is live.
        let (lkey, rkey) = unsafe { ((*mr).lkey, (*mr).rkey) };
        Ok(Registration {
            mr: Arc::new(MrSlot {
                raw: Mutex::new(mr),
                lkey,
                rkey,
            }),
            window: Arc::new(Mutex::new(Window {
                raw: ptr::null_mut(),
            })),
            bound: None,
            plain: None,
            pd: pd.clone(),
        })
    }

    /// Lists this registration's own key in `plain` (a device without memory windows): a
    /// local invalidate of the key deregisters it.
    pub(super) fn track_plain(&mut self, plain: &Arc<PlainKeys>) {
        plain.keys().insert(self.mr.rkey, Arc::downgrade(&self.mr));
        self.plain = Some(plain.clone());
    }

    /// Deregisters the memory region now (a device without memory windows revoking the key
    /// it gave); the registration lives on, unusable in work requests. Returns whether it was
    /// still registered.
    pub(super) fn deregister(&self) -> bool {
        if let Some(plain) = &self.plain {
            plain.forget(self.mr.rkey, &self.mr);
        }
        self.mr.deregister()
    }

    /// Whether the memory region is still registered (not revoked by a local invalidate on a
    /// device without memory windows).
    pub(super) fn is_registered(&self) -> bool {
        self.mr.is_registered()
    }

    /// Allocates the type-2 memory window to bind over this registration; its bound keys are
    /// tracked in `bound` (the connection's).
    pub(super) fn alloc_window(&mut self, bound: &Arc<BoundWindows>) -> io::Result<*mut ibv_mw> {
        let mw = alloc_mw(&self.pd)?;
        self.window().raw = mw;
        self.bound = Some(bound.clone());
        Ok(mw)
    }

    /// The window, locked (its pointer is null for a region without remote rights, or after
    /// a failed replacement).
    pub(super) fn window(&self) -> MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces the window in `slot` (this registration's, locked) by a newly allocated one,
    /// which is free; the old one is deallocated, so its key stops resolving at once. The new
    /// window is allocated while the old one still exists, so their keys differ. When the
    /// allocation fails the old window goes all the same and `slot` is left empty.
    pub(super) fn replace_window(&self, slot: &mut Window) -> io::Result<()> {
        let fresh = alloc_mw(&self.pd);
        let old = std::mem::replace(&mut slot.raw, ptr::null_mut());
        if !old.is_null() {
            // SAFETY: the window is ours and live; the slot no longer names it.
            unsafe { dealloc_mw(old, self.bound.as_deref()) };
        }
        slot.raw = fresh?;
        Ok(())
    }

    /// Allocates a window into the empty `slot` (after a failed replacement).
    pub(super) fn refill_window(&self, slot: &mut Window) -> io::Result<()> {
        if slot.raw.is_null() {
            slot.raw = alloc_mw(&self.pd)?;
        }
        Ok(())
    }

    /// The memory region (null once revoked; a bind over it then fails in the device).
    pub(super) fn mr(&self) -> *mut ibv_mr {
        *self.mr.raw.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn lkey(&self) -> u32 {
        self.mr.lkey
    }

    pub(super) fn rkey(&self) -> u32 {
        self.mr.rkey
    }

    /// The protection domain the registration belongs to.
    pub(super) fn pd(&self) -> *mut ibv_pd {
        self.pd.raw()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // Locked, not taken: a connection going away may be deallocating the window.
        let mut window = self.window();
        let mw = std::mem::replace(&mut window.raw, ptr::null_mut());
        // The window (bound over the region) goes first, then the region.
        if !mw.is_null() {
            // SAFETY: the window is live and the slot no longer names it; no work request
            // names it any more (requests hold the MemoryRegion until completion).
            unsafe { dealloc_mw(mw, self.bound.as_deref()) };
        }
        self.deregister();
        drop(window);
    }
}

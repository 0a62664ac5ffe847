//! A connected RC queue pair: registration, posting, and completions. The queues (posting
//! with them locked, completions in posting order) are in `queue`, send-queue requests turned
//! into `ibv_send_wr` lists in `send`, registrations and rekeying in `memory`, the rdma_cm
//! event task in `events`, statuses and access bits in `access`.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rdma_sys::*;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::cm::CmId;
use super::removal;
use super::resources::{
    BoundWindows, CompletionQueue, PlainKeys, ProtectionDomain, QueuePair, Registered,
    Registration, Window,
};
use super::shared_receive::DeviceQueue;
use crate::rdma::{
    Access, Completion, Connection, Error, MemoryRegion, RecvWr, RegionKeys, RegionMemory, Result,
    SendOp, SendWr, Sge, WcOpcode, WcStatus, WrId,
};
use shared::SharedRecv;

/// The `wr_id` bit that marks receive-queue requests; the low bits are a sequence number.
const RECV_BIT: u64 = 1 << 63;
/// Completions fetched per `ibv_poll_cq` call.
const POLL_BATCH: usize = 32;
/// Gather elements per send-queue request, at most.
pub(super) const MAX_SGE: usize = 8;
/// How long `register` and `rekey` wait for the window bind they posted.
const BIND_TIMEOUT: Duration = Duration::from_secs(10);
/// Send-queue slots kept free for the provider's own requests (window binds).
pub(super) const SPARE_SEND_SLOTS: u32 = 16;

/// What an outstanding request is, for its completion.
enum Kind {
    /// A consumer request; an unsignaled one's success is not delivered
    /// ([`SendWr::unsignaled`]).
    User {
        wr_id: WrId,
        opcode: WcOpcode,
        signaled: bool,
    },
    /// The provider's window bind for `register` or `rekey`.
    Bind,
}

/// The request itself, kept (with the region handles it holds) until its completion.
// Held only for what dropping it releases (the regions), never read.
#[allow(dead_code)]
enum Keep {
    Send(SendWr),
    Recv(RecvWr),
    Nothing,
}

/// Where a send-queue request stands. Its completion is delivered only once every request
/// posted before it has completed: the contract's (and the verbs specifications') send-queue
/// order, which Linux siw does not keep (it completes a Send as soon as it is on the wire,
/// before an RDMA Read posted earlier whose response has not arrived).
enum Progress {
    /// Posted to the device, which will report its completion; not completed yet.
    Posted,
    /// Posted to the device unsignaled: it has no completion of its own, and has succeeded
    /// once a request posted after it completes. Never an RDMA Read (see `post_run`).
    PostedUnsignaled,
    /// Completed with this status.
    Completed(WcStatus),
    /// A local invalidate of this key on a device without memory windows, never posted to
    /// the device (Linux siw takes no local invalidate from user space): carried out, by
    /// deregistering the region with that key, when every request before it has completed.
    Revoke(u32),
}

/// One outstanding request; `keep` holds the regions it names until its completion.
struct Outstanding {
    seq: u64,
    kind: Kind,
    keep: Keep,
    /// For RDMA Read: the sink length, reported as the completion's byte count.
    len: u32,
    progress: Progress,
}

struct Queues {
    /// Reused `ibv_poll_cq` buffer.
    wcs: Vec<ibv_wc>,
    next_seq: u64,
    send: VecDeque<Outstanding>,
    recv: VecDeque<Outstanding>,
    user_send: usize,
    ready: VecDeque<Completion>,
    binds: HashMap<u64, WcStatus>,
    /// Registrations made while establishing, whose windows are bound at establishment with
    /// the region's key then and these remote rights.
    pending_binds: Vec<(MemoryRegion, Access)>,
}

impl Queues {
    fn new() -> Queues {
        Queues {
            wcs: (0..POLL_BATCH)
                // SAFETY: ibv_wc is plain old data; all-zero is valid.
                .map(|_| unsafe { std::mem::zeroed() })
                .collect(),
            next_seq: 0,
            send: VecDeque::new(),
            recv: VecDeque::new(),
            user_send: 0,
            ready: VecDeque::new(),
            binds: HashMap::new(),
            pending_binds: Vec::new(),
        }
    }
}

/// The connection state shared with the rdma_cm event task.
pub(super) struct State {
    pub(super) connected: AtomicBool,
    /// The queue pair still exists. The rdma_cm event task answers a peer's disconnect with
    /// `rdma_disconnect`, which modifies the queue pair, while the connection may be dropped on
    /// another thread: both hold this lock around their `rdma_disconnect`, and the connection
    /// clears the flag before the queue pair goes (a race seen as SIGSEGV in `ibv_modify_qp`
    /// under Linux siw, tests/vm/README.md).
    pub(super) qp_alive: Mutex<bool>,
    /// The queue pair exists but the connection is not established yet: receives may be
    /// posted, remotely accessible registrations bind their windows at establishment.
    pub(super) establishing: AtomicBool,
    /// rdma_cm reported the device gone (`RDMA_CM_EVENT_DEVICE_REMOVAL`).
    pub(super) device_removed: AtomicBool,
}

/// Parameters fixed when the queue pair was created.
pub(super) struct Shape {
    pub(super) send_depth: usize,
    pub(super) recv_depth: usize,
    pub(super) max_send_sge: usize,
    /// Sends and RDMA Writes up to this length are posted inline.
    pub(super) max_inline: usize,
    /// The device is Soft-RoCE (rxe), whose completions need the fix-ups in [`rxe_quirks`].
    pub(super) rxe: bool,
    /// Remotely accessible regions get a type-2 memory window each; without windows (siw)
    /// the region's own rkey carries the remote rights (see [`mr_access`]).
    pub(super) windows: bool,
    /// The device is iWARP (Linux siw): a Send or RDMA Write completes once it is on the
    /// stream, not when the responder has taken it.
    pub(super) iwarp: bool,
}

/// Fix-ups for Soft-RoCE (Linux `rdma_rxe`, checked on 6.1), applied only on rxe devices:
///
/// * rxe writes receive completions for user space with the *kernel's* flag value
///   `IB_WC_WITH_INVALIDATE` (`1 << 2`), not the user-space `IBV_WC_WITH_INV` (`1 << 3`), so a
///   Send with Invalidate is recognised by either bit (rxe never sets `IBV_WC_IP_CSUM_OK`).
/// * rxe reports a Send longer than the posted receive buffer as `IBV_WC_LOC_QP_OP_ERR`
///   (its `copy_data` returns `-EINVAL`, not the `-ENOSPC` that `send_data_in` maps to a length
///   error). This provider checks every receive element before posting (lkey of this
///   connection's domain, range inside the registration), so on a receive that status can
///   only mean the overrun; it is reported as [`WcStatus::LocalLengthError`].
pub(super) mod rxe_quirks {
    /// The kernel's `IB_WC_WITH_INVALIDATE`.
    pub(crate) const KERNEL_WITH_INVALIDATE: u32 = 1 << 2;
}

/// The verbs objects of one connection, built before it is established.
pub(super) struct Parts {
    pub(super) id: Arc<CmId>,
    pub(super) pd: Arc<ProtectionDomain>,
    pub(super) cq: Arc<CompletionQueue>,
    pub(super) qp: QueuePair,
    pub(super) shape: Shape,
    /// The device's shared receive queue the connection takes its receives from, if any.
    pub(super) shared: Option<Arc<DeviceQueue>>,
}

/// A connection of the verbs provider: an RC queue pair with its completion queue and
/// protection domain, created through rdma_cm.
pub struct VerbsConnection {
    /// The rdma_cm event task (the peer's disconnect, the device's removal).
    events: Option<JoinHandle<()>>,
    inner: Arc<Inner>,
    peer_private_data: Vec<u8>,
    local: SocketAddr,
    peer: SocketAddr,
}

/// What a connection shares with its rdma_cm event task, which releases the device's objects
/// itself when the device goes away, whoever still holds the connection.
pub(super) struct Inner {
    qp: QueuePair,
    queues: Mutex<Queues>,
    cq: Arc<CompletionQueue>,
    pd: Arc<ProtectionDomain>,
    id: Arc<CmId>,
    state: Arc<State>,
    /// Every registration made here, released when the connection goes.
    registered: Arc<Registered>,
    /// The device's name, for events and per-device counts.
    device: String,
    /// The keys of this connection's windows that may be bound (shared with the
    /// registrations, which forget theirs when dropped).
    bound: Arc<BoundWindows>,
    /// On a device without memory windows: the keys a local invalidate revokes.
    plain: Arc<PlainKeys>,
    notify: Notify,
    shape: Shape,
    /// Receives from a shared queue instead of the queue pair's own.
    shared: Option<SharedRecv>,
}

impl std::fmt::Debug for VerbsConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsConnection")
            .field("local", &self.local)
            .field("peer", &self.peer)
            .field("connected", &self.is_connected())
            .finish()
    }
}

mod access;
mod events;
mod memory;
mod queue;
mod send;
mod shared;

pub(in crate::rdma::verbs) use access::{map_status, mr_access, mw_access};
use events::watch_events;
#[cfg(test)]
pub(in crate::rdma::verbs) use memory::WINDOW_REPLACEMENTS;
pub(in crate::rdma::verbs) use queue::post_error;

impl VerbsConnection {
    /// Assembles a connection that is still being established (see [`Self::established`]):
    /// receives can be posted and memory registered, nothing can be sent yet.
    pub(super) fn new(parts: Parts, local: SocketAddr, peer: SocketAddr) -> VerbsConnection {
        let Parts {
            id,
            pd,
            cq,
            qp,
            shape,
            shared,
        } = parts;
        let state = Arc::new(State {
            connected: AtomicBool::new(false),
            qp_alive: Mutex::new(true),
            establishing: AtomicBool::new(true),
            device_removed: AtomicBool::new(false),
        });
        let device = device_name_of(&id);
        let registered = Arc::new(Registered::default());
        removal::track(&device, &registered);
        let inner = Inner {
            qp,
            queues: Mutex::new(Queues::new()),
            cq,
            pd,
            id,
            state,
            registered,
            device,
            bound: Arc::new(BoundWindows::default()),
            plain: Arc::new(PlainKeys::default()),
            notify: Notify::new(),
            shape,
            shared: shared.map(SharedRecv::new),
        };
        VerbsConnection {
            events: None,
            inner: Arc::new(inner),
            peer_private_data: Vec::new(),
            local,
            peer,
        }
    }

    /// Marks the connection established: binds the windows of registrations made while
    /// establishing, then starts watching rdma_cm events (the peer's disconnect).
    pub(super) fn established(
        &mut self,
        peer_private_data: Vec<u8>,
        local: SocketAddr,
        peer: SocketAddr,
    ) -> Result<()> {
        self.peer_private_data = peer_private_data;
        self.local = local;
        self.peer = peer;
        self.inner.state.connected.store(true, Ordering::SeqCst);
        self.inner.state.establishing.store(false, Ordering::SeqCst);
        let pending = std::mem::take(&mut self.inner.lock().pending_binds);
        for (region, access) in pending {
            let reg = region
                .handle::<Registration>()
                .ok_or_else(|| Error::InvalidWorkRequest("foreign registration".into()))?;
            let mut slot = reg.window();
            let seq = self.inner.post_bind_locked(
                &mut self.inner.lock(),
                reg,
                &mut slot,
                region.as_mut_ptr(),
                region.len(),
                access,
                region.rkey(),
            )?;
            self.inner.wait_bind(seq)?;
        }
        self.events = Some(tokio::spawn(watch_events(self.inner.clone(), self.peer)));
        Ok(())
    }

    /// The name of the device the connection runs on (`rxe0`, `siw0`, a NIC's name).
    pub fn device_name(&self) -> String {
        self.inner.device.clone()
    }

    /// Whether rdma_cm reported the connection's device removed: the connection is down, and
    /// everything it registered is released when it is dropped.
    pub fn device_removed(&self) -> bool {
        self.inner.state.device_removed.load(Ordering::SeqCst)
    }

    /// Whether the device is iWARP (Linux siw, iWARP adapters) rather than InfiniBand or RoCE.
    pub fn is_iwarp(&self) -> bool {
        self.inner.shape.iwarp
    }

    /// Whether the device has type-2 memory windows: [`Connection::rekey`] works only then
    /// (siw has none: it answers [`Error::Unsupported`]).
    pub fn has_memory_windows(&self) -> bool {
        self.inner.shape.windows
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The scatter/gather element for `sge`, checking that its region is ours.
    fn sge(&self, sge: &Sge) -> Result<ibv_sge> {
        let reg = sge.mr.handle::<Registration>().ok_or_else(|| {
            Error::InvalidWorkRequest("the region was not registered by the verbs provider".into())
        })?;
        if reg.pd() != self.pd.raw() {
            return Err(Error::InvalidWorkRequest(
                "the region belongs to another connection's protection domain".into(),
            ));
        }
        if !reg.is_registered() {
            return Err(Error::InvalidWorkRequest(
                "the region's key was invalidated, which on a device without memory windows \
                 deregisters it"
                    .into(),
            ));
        }
        sge.mr.checked_range(sge.offset, sge.len)?;
        let length = u32::try_from(sge.len)
            .map_err(|_| Error::InvalidWorkRequest("an element longer than 4 GiB".into()))?;
        Ok(ibv_sge {
            addr: sge.mr.as_mut_ptr() as u64 + sge.offset as u64,
            length,
            lkey: reg.lkey(),
        })
    }
}

impl Connection for VerbsConnection {
    fn register(&self, buf: Vec<u8>, access: Access) -> Result<MemoryRegion> {
        self.inner.register_memory(buf.into(), access)
    }

    fn register_zeroed(&self, len: usize, access: Access) -> Result<MemoryRegion> {
        self.inner
            .register_memory(RegionMemory::zeroed(len), access)
    }

    /// On devices with memory windows (rxe): the region's type-2 window is bound again with a
    /// new key (`ibv_inc_rkey` of its current one) and the rights of `remote`, and `rekey`
    /// waits for the bind (as `register` does). The window must be free for that: one known
    /// to be free (invalidated by a local invalidate posted before, by a peer's Send with
    /// Invalidate already polled, or rekeyed to `Access::NONE`) is bound at once; one that
    /// may still be bound is replaced by a new window first (`ibv_alloc_mw`, then
    /// `ibv_dealloc_mw` of the old one, which revokes its key at once), never invalidated
    /// here (see `BoundWindows`). `Access::NONE` binds nothing: the window is left free.
    /// While establishing (in `connect_with`/`accept_with` setup) the rekey changes the key
    /// and rights of the bind made at establishment.
    ///
    /// On devices without memory windows (Linux siw) a region's remote rights are its memory
    /// region's own, which cannot be given a new key here (`ibv_rereg_mr` is not implemented
    /// by siw, nor rxe), so this answers [`Error::Unsupported`].
    fn rekey(&self, mr: &MemoryRegion, remote: Access) -> Result<()> {
        let reg = self.inner.registration_of(mr)?;
        mr.check_remote_rights(remote)?;
        if !self.inner.shape.windows {
            return Err(Error::Unsupported(
                "rekeying needs memory windows, which this device does not have (register anew)"
                    .into(),
            ));
        }
        if !mr.registered_access().is_remote() {
            // No window: the region's own key grants nothing remote, and `remote` is NONE.
            mr.set_remote_key(mr.rkey(), Access::NONE);
            return Ok(());
        }
        let mut slot = reg.window();
        if self.inner.state.establishing.load(Ordering::SeqCst) {
            return self.inner.rekey_pending(mr, remote);
        }
        let posted = {
            let mut q = self.inner.lock();
            if self.is_connected() {
                // Invalidations already completed (a peer's Send with Invalidate) free windows.
                self.inner.drain(&mut q);
                self.inner.rekey_locked(&mut q, reg, &mut slot, mr, remote)
            } else {
                Err(Error::Closed)
            }
        };
        let outcome = match posted {
            Ok(None) => return Ok(()),
            Ok(Some((seq, rkey))) => self.inner.wait_bind(seq).map(|()| rkey),
            Err(e) => Err(e),
        };
        match outcome {
            Ok(rkey) => {
                mr.set_remote_key(rkey, remote);
                Ok(())
            }
            Err(e) => {
                // The old key resolves no more (the window was free or replaced, or the
                // connection is down); whether the new one will is unknown: advertise none.
                mr.set_remote_key(slot.key().unwrap_or(mr.rkey()), Access::NONE);
                Err(e)
            }
        }
    }

    /// With memory windows, a rekey to `Access::NONE`. Without (siw), a remotely accessible
    /// region is deregistered: its own key was all the peer was given.
    fn revoke(&self, mr: &MemoryRegion) -> Result<()> {
        if self.inner.shape.windows {
            return self.rekey(mr, Access::NONE);
        }
        let reg = self.inner.registration_of(mr)?;
        if mr.registered_access().is_remote() {
            reg.deregister();
        }
        mr.set_remote_key(mr.rkey(), Access::NONE);
        Ok(())
    }

    fn takes_remote_invalidation(&self) -> bool {
        self.inner.shape.windows
    }

    fn post_recv(&self, wr: RecvWr) -> Result<()> {
        if self.inner.shared.is_some() {
            return Err(Error::InvalidWorkRequest(
                "the connection takes its receives from a shared queue".into(),
            ));
        }
        let mut sge = self.inner.sge(&wr.sge)?;
        if !wr.sge.mr.access().contains(Access::LOCAL_WRITE) {
            return Err(Error::InvalidWorkRequest(
                "a receive buffer needs local write access".into(),
            ));
        }
        let mut q = self.inner.lock();
        if !self.is_connected() && !self.inner.state.establishing.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        if q.recv.len() >= self.inner.shape.recv_depth {
            return Err(Error::QueueFull {
                queue: "receive",
                depth: self.inner.shape.recv_depth,
            });
        }
        let seq = q.next_seq;
        q.next_seq += 1;
        // SAFETY: all-zero is a valid starting point.
        let mut rwr: ibv_recv_wr = unsafe { std::mem::zeroed() };
        rwr.wr_id = seq | RECV_BIT;
        rwr.sg_list = &mut sge;
        rwr.num_sge = 1;
        let mut bad = std::ptr::null_mut();
        // SAFETY: the element points into a live registration of this domain, which the ring
        // entry keeps alive until the receive completes.
        let rc = unsafe { ibv_post_recv(self.inner.qp.raw(), &mut rwr, &mut bad) };
        if rc != 0 {
            return Err(post_error(rc, "receive", self.inner.shape.recv_depth));
        }
        q.recv.push_back(Outstanding {
            seq,
            kind: Kind::User {
                wr_id: wr.wr_id,
                opcode: WcOpcode::Recv,
                signaled: true,
            },
            keep: Keep::Recv(wr),
            len: 0,
            progress: Progress::Posted,
        });
        Ok(())
    }

    fn take_shared<R>(&self, c: &Completion, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        self.inner.take_shared(c, f)
    }

    fn post_send(&self, wr: SendWr) -> Result<()> {
        self.post_one(wr)
    }

    /// One `ibv_post_send` for the whole list (see `send`).
    fn post_sends(&self, wrs: Vec<SendWr>) -> Result<()> {
        self.post_list(wrs)
    }

    async fn poll_completion(&self) -> Completion {
        loop {
            let notified = self.inner.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(c) = self.try_completion() {
                return c;
            }
            // Arm, then look again: a completion that arrived before arming raises no event.
            // Under the lock, as every use of the completion queue (the device's removal
            // destroys it under the lock).
            {
                let mut q = self.inner.lock();
                let _ = self.inner.cq.arm();
                if let Some(c) = q.ready.pop_front() {
                    return c;
                }
                self.inner.drain(&mut q);
                if let Some(c) = q.ready.pop_front() {
                    return c;
                }
            }
            self.inner.wait(notified).await;
        }
    }

    fn try_completion(&self) -> Option<Completion> {
        let mut q = self.inner.lock();
        if let Some(c) = q.ready.pop_front() {
            return Some(c);
        }
        self.inner.drain(&mut q);
        q.ready.pop_front()
    }

    fn peer_private_data(&self) -> &[u8] {
        &self.peer_private_data
    }

    fn local_addr(&self) -> SocketAddr {
        self.local
    }

    fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    fn is_connected(&self) -> bool {
        self.inner.state.connected.load(Ordering::SeqCst)
    }

    fn device_removed(&self) -> bool {
        VerbsConnection::device_removed(self)
    }

    async fn disconnect(&self) -> Result<()> {
        // Hold the queue lock so no post races with the transition.
        let _q = self.inner.lock();
        let _alive = self
            .inner
            .state
            .qp_alive
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if self.inner.state.connected.swap(false, Ordering::SeqCst) {
            self.inner.qp.disconnect()?;
        }
        Ok(())
    }
}

impl Drop for VerbsConnection {
    fn drop(&mut self) {
        if let Some(events) = &self.events {
            // Stops future polls only: a poll running on another worker finishes first (the
            // teardown below and its removal path are each other's no-ops).
            events.abort();
        }
        self.inner.teardown();
    }
}

impl Inner {
    /// Releases every object of the connection on its device, in the order verbs asks for:
    /// windows and registrations (the application's husks keep their memory), queue pair,
    /// completion queue, domain, identifier. Outstanding requests end flushed. Idempotent;
    /// the device's removal calls it from the event task (with the completion queue's
    /// waiters sent away first), the connection's drop otherwise.
    fn teardown(&self) {
        let mut q = self.lock();
        {
            let mut alive = self
                .state
                .qp_alive
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if self.state.connected.swap(false, Ordering::SeqCst) && *alive {
                // Flush outstanding work and tell the peer; errors only mean it already went.
                let _ = self.qp.disconnect();
            }
            // The queue pair is destroyed below: the event task must not touch it any more.
            *alive = false;
        }
        // Completions already in the queue are delivered; the rest end flushed, as the
        // contract says of a closed connection.
        if !self.cq.is_destroyed() {
            self.drain(&mut q);
        }
        self.flush_outstanding(&mut q);
        // No window may stay bound on the queue pair when it is destroyed (see
        // `BoundWindows::revoke_all`): the peer loses those keys with the connection anyway.
        self.bound.revoke_all();
        // Nothing stays registered, whatever the application still holds (see `Registered`).
        self.registered.release_all();
        self.qp.destroy();
        // Only once nobody waits on its channel (see `CompletionQueue::close`).
        let cq_closed = self.cq.close();
        drop(q);
        self.notify.notify_waiters();
        // The domain is empty now; the identifier goes with it (librdmacm then puts the
        // device's context).
        match &self.shared {
            // The domain is the queue's, released with it.
            Some(shared) => {
                shared.give_back_all();
                if cq_closed {
                    self.id.release();
                }
            }
            None if cq_closed && self.pd.release() => self.id.release(),
            None => {}
        }
        if self.state.device_removed.load(Ordering::SeqCst) {
            removal::connection_released(&self.device);
        }
    }

    /// The device went away: sends the completion queue's waiters away, then tears down.
    pub(super) async fn release_removed(&self) {
        self.state.connected.store(false, Ordering::SeqCst);
        // No wait on the channel starts from here; the ones running are woken below (each
        // registered its wake-up before looking at the mark, see `Connection::poll_completion`),
        // or the readiness could never be given up.
        self.cq.begin_stop();
        {
            let mut q = self.lock();
            self.drain(&mut q);
            self.flush_outstanding(&mut q);
        }
        self.notify.notify_waiters();
        self.cq.stop_waiters().await;
        self.teardown();
        if let Some(shared) = &self.shared {
            // The device cannot finish going while its queue holds on; the last of its
            // connections to get here releases it.
            shared.queue.release();
        }
    }

    /// Ends every outstanding request flushed (binds included), delivering in order.
    fn flush_outstanding(&self, q: &mut Queues) {
        for entry in std::mem::take(&mut q.recv) {
            if let Kind::User { wr_id, opcode, .. } = entry.kind {
                q.ready
                    .push_back(Completion::new(wr_id, opcode, WcStatus::Flushed));
            }
        }
        let mut binds = Vec::new();
        for entry in q.send.iter_mut() {
            match entry.kind {
                Kind::Bind => binds.push(entry.seq),
                Kind::User { .. }
                    if matches!(
                        entry.progress,
                        Progress::Posted | Progress::PostedUnsignaled
                    ) =>
                {
                    entry.progress = Progress::Completed(WcStatus::Flushed)
                }
                Kind::User { .. } => {}
            }
        }
        q.send.retain(|entry| !matches!(entry.kind, Kind::Bind));
        for seq in binds {
            q.binds.insert(seq, WcStatus::Flushed);
        }
        self.release(q);
        self.tell_shared_closed(q, WcStatus::Flushed);
    }
}

/// The name of the device `id` is bound to.
fn device_name_of(id: &CmId) -> String {
    let ctx = id.context();
    if ctx.is_null() {
        return String::new();
    }
    // SAFETY: a bound identifier has a live context whose device name is a C string.
    let name = unsafe { std::ffi::CStr::from_ptr(ibv_get_device_name((*ctx).device)) };
    name.to_string_lossy().into_owned()
}

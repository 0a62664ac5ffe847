//! The verbs provider's shared receive queue (`ibv_create_srq`): one per device, made when
//! the first connection from that device is accepted with the queue and released when the
//! last one goes (or the device does), so that nothing of it holds a removed device.
//!
//! The connections of one device's queue share its protection domain, as verbs requires of a
//! queue pair and its shared receive queue. That is safe only with memory windows: a peer can
//! use no key but those of windows bound on its own queue pair (type 2), while a region's own
//! key would reach every connection in the domain. A device without memory windows (Linux
//! siw) is therefore refused.

use std::io;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use rdma_sys::*;

use super::cm::CmId;
use super::resources::ProtectionDomain;
use crate::rdma::shared_receive::{check_params, SharedReceiveParams, SharedReceiveQueue};
use crate::rdma::{Error, RegionMemory, Result, WrId};

/// The `wr_id` bit of a shared buffer's receive; the buffer's index is below. Distinct from
/// the connection's own receives (`RECV_BIT`) and send-queue sequence numbers.
pub(super) const SHARED_WR: WrId = 1 << 62;

/// The `wr_id` of the flushed receive completion that tells a connection's close.
pub(super) const SHARED_CLOSED: WrId = SHARED_WR | (u32::MAX as u64);

/// Holders of buffers are numbered from 1; 0 marks a buffer posted to the device.
static NEXT_HOLDER: AtomicU64 = AtomicU64::new(1);

/// A shared receive queue of the verbs provider: its shape, and a queue per device in use.
/// Clones share the queue.
#[derive(Clone)]
pub struct VerbsSharedQueue {
    inner: Arc<Devices>,
}

struct Devices {
    params: SharedReceiveParams,
    /// Per device context: its queue while connections use it.
    queues: Mutex<Vec<(usize, Weak<DeviceQueue>)>>,
}

impl std::fmt::Debug for VerbsSharedQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsSharedQueue")
            .field("params", &self.inner.params)
            .finish()
    }
}

impl VerbsSharedQueue {
    pub(super) fn new(params: SharedReceiveParams) -> Result<VerbsSharedQueue> {
        check_params(&params)?;
        Ok(VerbsSharedQueue {
            inner: Arc::new(Devices {
                params,
                queues: Mutex::new(Vec::new()),
            }),
        })
    }

    /// The queue of the device `id` is bound to, made if no connection uses one now.
    pub(super) fn on_device_of(&self, id: &Arc<CmId>) -> Result<Arc<DeviceQueue>> {
        let context = id.context() as usize;
        let mut queues = self.inner.queues.lock().unwrap_or_else(|e| e.into_inner());
        queues.retain(|(_, q)| q.strong_count() > 0);
        if let Some(queue) = queues
            .iter()
            .filter(|(c, _)| *c == context)
            .find_map(|(_, q)| q.upgrade())
            .filter(|q| !q.released.load(Ordering::Acquire))
        {
            return Ok(queue);
        }
        let queue = DeviceQueue::new(id, self.inner.params)?;
        queues.push((context, Arc::downgrade(&queue)));
        Ok(queue)
    }
}

impl SharedReceiveQueue for VerbsSharedQueue {
    fn params(&self) -> SharedReceiveParams {
        self.inner.params
    }

    /// On the device whose queue has the fewest; all of them when no connection uses one.
    fn free_buffers(&self) -> usize {
        let queues = self.inner.queues.lock().unwrap_or_else(|e| e.into_inner());
        queues
            .iter()
            .filter_map(|(_, q)| q.upgrade())
            .map(|q| q.posted.load(Ordering::Acquire))
            .min()
            .unwrap_or(self.inner.params.buffers)
    }
}

/// One device's shared receive queue, its buffers (one registration) and domain.
pub(super) struct DeviceQueue {
    srq: AtomicPtr<ibv_srq>,
    mr: AtomicPtr<ibv_mr>,
    lkey: u32,
    pub(super) pd: Arc<ProtectionDomain>,
    /// Where buffer `i` starts: `base + i * size`.
    base: *mut u8,
    size: usize,
    _memory: RegionMemory,
    /// Which connection holds each buffer (0: posted to the device).
    holders: Vec<AtomicU64>,
    /// Buffers posted to the device now.
    posted: AtomicUsize,
    /// Released with its device ([`DeviceQueue::release`]): nothing posts any more.
    released: AtomicBool,
    /// Posting and releasing exclude each other.
    post_lock: Mutex<()>,
}

// SAFETY: verbs objects are thread-safe in libibverbs; the buffers are written by the device
// only while posted, and read by the one connection holding them otherwise.
unsafe impl Send for DeviceQueue {}
// SAFETY: as above.
unsafe impl Sync for DeviceQueue {}

impl DeviceQueue {
    fn new(id: &Arc<CmId>, params: SharedReceiveParams) -> Result<Arc<DeviceQueue>> {
        // SAFETY: all-zero is a valid ibv_device_attr to be filled in.
        let mut attr: ibv_device_attr = unsafe { std::mem::zeroed() };
        // SAFETY: the identifier is bound to a device (a request was received on it).
        if unsafe { ibv_query_device(id.context(), &mut attr) } != 0 {
            return Err(Error::Io(io::Error::last_os_error()));
        }
        let most = attr.max_srq_wr.max(0) as usize;
        if attr.max_srq == 0 || params.buffers > most {
            return Err(Error::Unsupported(format!(
                "a shared receive queue of {} buffers: the device holds at most {most}",
                params.buffers
            )));
        }
        let pd = ProtectionDomain::new(id)?;
        let len = params
            .buffers
            .checked_mul(params.buffer_size)
            .ok_or_else(|| Error::InvalidWorkRequest("shared receive buffers too large".into()))?;
        let mut memory = RegionMemory::zeroed(len);
        let base = memory.as_mut_ptr();
        // SAFETY: `memory` stays in place for as long as this queue, which deregisters first.
        let mr = unsafe {
            ibv_reg_mr(
                pd.raw(),
                base.cast(),
                len,
                ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0 as i32,
            )
        };
        if mr.is_null() {
            return Err(Error::Io(io::Error::last_os_error()));
        }
        // SAFETY: all-zero is a valid starting point.
        let mut init: ibv_srq_init_attr = unsafe { std::mem::zeroed() };
        init.attr.max_wr = params.buffers as u32;
        init.attr.max_sge = 1;
        // SAFETY: the domain is live.
        let srq = unsafe { ibv_create_srq(pd.raw(), &mut init) };
        if srq.is_null() {
            let e = io::Error::last_os_error();
            // SAFETY: registered above, used by nothing.
            unsafe { ibv_dereg_mr(mr) };
            return Err(Error::Io(e));
        }
        // SAFETY: the region is live.
        let lkey = unsafe { (*mr).lkey };
        let queue = Arc::new(DeviceQueue {
            srq: AtomicPtr::new(srq),
            mr: AtomicPtr::new(mr),
            lkey,
            pd,
            base,
            size: params.buffer_size,
            _memory: memory,
            holders: (0..params.buffers).map(|_| AtomicU64::new(0)).collect(),
            posted: AtomicUsize::new(0),
            released: AtomicBool::new(false),
            post_lock: Mutex::new(()),
        });
        for index in 0..params.buffers {
            queue.post(index)?;
        }
        Ok(queue)
    }

    /// The device's queue, for a queue pair to be created on (null once released).
    pub(super) fn raw(&self) -> *mut ibv_srq {
        self.srq.load(Ordering::Acquire)
    }

    /// A new holder number, for a connection.
    pub(super) fn holder() -> u64 {
        NEXT_HOLDER.fetch_add(1, Ordering::Relaxed)
    }

    /// Posts buffer `index` to the device.
    fn post(&self, index: usize) -> Result<()> {
        let _post = self.post_lock.lock().unwrap_or_else(|e| e.into_inner());
        let srq = self.raw();
        if srq.is_null() || self.released.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        let mut sge = ibv_sge {
            // SAFETY: `index` is below the buffer count.
            addr: unsafe { self.base.add(index * self.size) } as u64,
            length: self.size as u32,
            lkey: self.lkey,
        };
        // SAFETY: all-zero is a valid starting point.
        let mut wr: ibv_recv_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = SHARED_WR | index as u64;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        let mut bad = ptr::null_mut();
        // SAFETY: the element lies in the queue's registration, alive while the queue is.
        let rc = unsafe { ibv_post_srq_recv(srq, &mut wr, &mut bad) };
        if rc != 0 {
            return Err(super::conn::post_error(
                rc,
                "shared receive",
                self.holders.len(),
            ));
        }
        self.posted.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// The index of the buffer a completion's `wr_id` names.
    pub(super) fn index_of(&self, wr_id: WrId) -> Option<usize> {
        if wr_id & SHARED_WR == 0 || wr_id == SHARED_CLOSED {
            return None;
        }
        let index = (wr_id & !SHARED_WR) as usize;
        (index < self.holders.len()).then_some(index)
    }

    /// The device filled buffer `index` for connection `holder`.
    pub(super) fn filled(&self, index: usize, holder: u64) {
        self.posted.fetch_sub(1, Ordering::AcqRel);
        self.holders[index].store(holder, Ordering::Release);
    }

    /// The device consumed buffer `index` without a message (an error completion): it goes
    /// back at once.
    pub(super) fn consumed(&self, index: usize) {
        self.posted.fetch_sub(1, Ordering::AcqRel);
        let _ = self.post(index);
    }

    /// Runs `f` on the first `len` bytes of buffer `index`, held by `holder`, and posts it
    /// again; `None` if `holder` does not hold it.
    pub(super) fn take<R>(
        &self,
        index: usize,
        len: usize,
        holder: u64,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Option<R> {
        if self.holders[index].load(Ordering::Acquire) != holder {
            return None;
        }
        // SAFETY: the buffer is not posted (its holder has it), so the device does not write
        // it; it lies within the queue's memory.
        let message = unsafe {
            std::slice::from_raw_parts(self.base.add(index * self.size), len.min(self.size))
        };
        let out = f(message);
        self.give_back(index, holder);
        Some(out)
    }

    /// Posts buffer `index` again if `holder` holds it.
    fn give_back(&self, index: usize, holder: u64) {
        if self.holders[index]
            .compare_exchange(holder, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            let _ = self.post(index);
        }
    }

    /// Posts again every buffer `holder` still holds: its connection is gone.
    pub(super) fn give_back_all(&self, holder: u64) {
        for index in 0..self.holders.len() {
            if self.holders[index].load(Ordering::Acquire) == holder {
                self.give_back(index, holder);
            }
        }
    }

    /// Destroys the queue, deregisters its buffers and deallocates its domain now: its
    /// device is going, or its last connection went. Nothing posts from the first call on.
    /// The device refuses while a queue pair still uses the queue (the other connections of a
    /// removed device are still tearing down): false, and the last one's call does it.
    pub(super) fn release(&self) -> bool {
        let _post = self.post_lock.lock().unwrap_or_else(|e| e.into_inner());
        self.released.store(true, Ordering::Release);
        let srq = self.srq.load(Ordering::Acquire);
        if !srq.is_null() {
            // SAFETY: nothing posts any more (the flag, under the lock); a queue pair still
            // on it makes the call fail, and the queue stays.
            if unsafe { ibv_destroy_srq(srq) } != 0 {
                return false;
            }
            self.srq.store(ptr::null_mut(), Ordering::Release);
        }
        let mr = self.mr.swap(ptr::null_mut(), Ordering::AcqRel);
        if !mr.is_null() {
            // SAFETY: the queue that held receives naming it is gone.
            unsafe { ibv_dereg_mr(mr) };
        }
        self.pd.release()
    }
}

impl Drop for DeviceQueue {
    fn drop(&mut self) {
        // The last connection on it is gone, its queue pair destroyed.
        self.release();
    }
}

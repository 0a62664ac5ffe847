//! The soft provider's shared receive queue: buffers every connection accepted with it takes
//! its Sends into (see [`crate::rdma::shared_receive`]).
//!
//! Each buffer is a registration of its own, so that connections placing Sends into different
//! buffers never wait for each other's region lock. A buffer is free, or held by one
//! connection from the Send that filled it until the consumer takes the message.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::tags::TagTable;
use crate::rdma::shared_receive::{check_params, SharedReceiveParams, SharedReceiveQueue};
use crate::rdma::{Access, Completion, Error, MemoryRegion, RecvWr, Result, Sge, WcOpcode};
use crate::rdma::{WcStatus, WrId};

/// The `wr_id` bit of receive completions from a shared queue; the buffer's index is below.
pub(crate) const SHARED_WR: WrId = 1 << 61;

/// The `wr_id` of the flushed receive completion a connection on a shared queue yields when
/// it closes: no buffer's.
pub(crate) const SHARED_CLOSED: WrId = SHARED_WR | (u32::MAX as u64);

/// Holders of buffers are numbered from 1; 0 marks a free buffer.
static NEXT_HOLDER: AtomicU64 = AtomicU64::new(1);

/// A shared receive queue of the soft provider. Clones share the queue.
#[derive(Clone)]
pub struct SoftSharedQueue {
    inner: Arc<Buffers>,
}

struct Buffers {
    params: SharedReceiveParams,
    regions: Vec<MemoryRegion>,
    /// Which connection holds each buffer (0: free).
    holders: Vec<AtomicU64>,
    free: Mutex<Vec<u32>>,
    /// Kept to keep the registrations' table alive with them.
    _tags: Arc<TagTable>,
}

impl std::fmt::Debug for SoftSharedQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SoftSharedQueue")
            .field("params", &self.inner.params)
            .field("free", &self.free_buffers())
            .finish()
    }
}

impl SoftSharedQueue {
    /// A queue of `params.buffers` zeroed buffers.
    pub(crate) fn new(params: SharedReceiveParams) -> Result<SoftSharedQueue> {
        check_params(&params)?;
        let tags = Arc::new(TagTable::default());
        let regions = (0..params.buffers)
            .map(|_| tags.register(vec![0; params.buffer_size], Access::LOCAL_WRITE))
            .collect::<Result<Vec<_>>>()?;
        Ok(SoftSharedQueue {
            inner: Arc::new(Buffers {
                params,
                regions,
                holders: (0..params.buffers).map(|_| AtomicU64::new(0)).collect(),
                // Popped from the end: buffer 0 first, so a lightly used queue touches few.
                free: Mutex::new((0..params.buffers as u32).rev().collect()),
                _tags: tags,
            }),
        })
    }

    /// A holder for a new connection: what it takes buffers as.
    pub(crate) fn holder(&self) -> SharedHolder {
        SharedHolder {
            queue: self.clone(),
            id: NEXT_HOLDER.fetch_add(1, Ordering::Relaxed),
            held: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn lock_free(&self) -> std::sync::MutexGuard<'_, Vec<u32>> {
        self.inner.free.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl SharedReceiveQueue for SoftSharedQueue {
    fn params(&self) -> SharedReceiveParams {
        self.inner.params
    }

    fn free_buffers(&self) -> usize {
        self.lock_free().len()
    }
}

/// One connection's use of a shared queue: the buffers it holds and how many it may.
pub(crate) struct SharedHolder {
    queue: SoftSharedQueue,
    id: u64,
    /// Buffers this connection holds (filled or being filled, not taken yet); shared with the
    /// connection, which takes them back ([`SharedHolder::take`]) outside the core's lock.
    held: Arc<AtomicUsize>,
}

impl SharedHolder {
    /// Another handle on the same holder, for the connection (the core keeps the first).
    pub(crate) fn handle(&self) -> SharedHolder {
        SharedHolder {
            queue: self.queue.clone(),
            id: self.id,
            held: self.held.clone(),
        }
    }

    /// A free buffer for the next Send, unless this connection holds `limit` already or the
    /// queue is empty.
    pub(crate) fn next(&self, limit: usize) -> Option<RecvWr> {
        if self.held.load(Ordering::Acquire) >= limit {
            return None;
        }
        let index = self.queue.lock_free().pop()?;
        let buffers = &self.queue.inner;
        buffers.holders[index as usize].store(self.id, Ordering::Release);
        self.held.fetch_add(1, Ordering::AcqRel);
        let region = &buffers.regions[index as usize];
        Some(RecvWr::new(
            SHARED_WR | index as u64,
            Sge::new(region, 0..region.len()).ok()?,
        ))
    }

    /// Gives back a buffer this connection holds, without a message for the consumer (a Send
    /// cut short by the connection's end).
    pub(crate) fn give_back(&self, wr_id: WrId) {
        if let Some(index) = self.index_held(wr_id) {
            self.release(index);
        }
    }

    /// Runs `f` on the message of receive completion `c` and gives its buffer back.
    pub(crate) fn take<R>(&self, c: &Completion, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        if c.opcode != WcOpcode::Recv || c.status != WcStatus::Success {
            return Err(Error::InvalidWorkRequest(format!(
                "not a successful receive: {:?} {}",
                c.opcode, c.status
            )));
        }
        let index = self.index_held(c.wr_id).ok_or_else(|| {
            Error::InvalidWorkRequest(
                "the completion names no shared buffer this connection holds (taken already?)"
                    .into(),
            )
        })?;
        let region = &self.queue.inner.regions[index];
        let len = (c.byte_len as usize).min(region.len());
        let out = region.with_slice(|all| f(&all[..len]));
        self.release(index);
        Ok(out)
    }

    /// The index of the buffer `wr_id` names, if this connection holds it.
    fn index_held(&self, wr_id: WrId) -> Option<usize> {
        if wr_id & SHARED_WR == 0 || wr_id == SHARED_CLOSED {
            return None;
        }
        let index = (wr_id & !SHARED_WR) as usize;
        let holder = self.queue.inner.holders.get(index)?;
        (holder.load(Ordering::Acquire) == self.id).then_some(index)
    }

    fn release(&self, index: usize) {
        let buffers = &self.queue.inner;
        // Only the holder releases: a second take of the same completion finds it free.
        if buffers.holders[index]
            .compare_exchange(self.id, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.held.fetch_sub(1, Ordering::AcqRel);
            self.queue.lock_free().push(index as u32);
        }
    }

    /// Gives back every buffer this connection still holds: it is gone, and completions it
    /// did not deliver, or that were never taken, name them.
    pub(crate) fn release_all(&self) {
        if self.held.load(Ordering::Acquire) == 0 {
            return;
        }
        for index in 0..self.queue.inner.holders.len() {
            if self.queue.inner.holders[index].load(Ordering::Acquire) == self.id {
                self.release(index);
            }
        }
    }
}

//! Receives from the device's shared receive queue (see `verbs::shared_receive`): completing
//! them, handing their messages over, and telling the consumer of the close, which no receive
//! of the connection's own flush would tell.

use super::*;
use crate::rdma::verbs::shared_receive::SHARED_CLOSED;

/// A connection's part in its device's shared receive queue.
pub(super) struct SharedRecv {
    pub(super) queue: Arc<DeviceQueue>,
    /// What the queue knows the connection's buffers by.
    holder: u64,
    /// The receive completion that tells of the close was queued.
    close_told: AtomicBool,
}

impl SharedRecv {
    pub(super) fn new(queue: Arc<DeviceQueue>) -> SharedRecv {
        SharedRecv {
            queue,
            holder: DeviceQueue::holder(),
            close_told: AtomicBool::new(false),
        }
    }

    /// Posts again every buffer the connection holds: it is going.
    pub(super) fn give_back_all(&self) {
        self.queue.give_back_all(self.holder);
    }
}

impl Inner {
    /// A receive into a shared buffer completed: the message is the connection's until the
    /// consumer takes it; a receive that failed gives its buffer back and tells of the close.
    pub(super) fn complete_shared(&self, q: &mut Queues, wc: &ibv_wc) {
        let Some(shared) = &self.shared else {
            return;
        };
        let Some(index) = shared.queue.index_of(wc.wr_id) else {
            return;
        };
        let status = self.receive_status(wc);
        if status != WcStatus::Success {
            shared.queue.consumed(index);
            return self.tell_shared_closed(q, status);
        }
        shared.queue.filled(index, shared.holder);
        let c = self.received(wc, wc.wr_id, status);
        q.ready.push_back(c);
    }

    /// Runs `f` on the message of receive completion `c` and posts its buffer again.
    pub(super) fn take_shared<R>(&self, c: &Completion, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        let Some(shared) = &self.shared else {
            return Err(Error::Unsupported(
                "taking a shared receive on a connection without a shared queue".into(),
            ));
        };
        let index = (c.opcode == WcOpcode::Recv && c.status == WcStatus::Success)
            .then(|| shared.queue.index_of(c.wr_id))
            .flatten();
        index
            .and_then(|index| {
                shared
                    .queue
                    .take(index, c.byte_len as usize, shared.holder, f)
            })
            .ok_or_else(|| {
                Error::InvalidWorkRequest(
                    "the completion names no shared buffer this connection holds (taken \
                     already?)"
                        .into(),
                )
            })
    }

    /// Queues the receive completion that tells the consumer the connection closed, once.
    pub(super) fn tell_shared_closed(&self, q: &mut Queues, status: WcStatus) {
        if let Some(shared) = &self.shared {
            if !shared.close_told.swap(true, Ordering::AcqRel) {
                q.ready
                    .push_back(Completion::new(SHARED_CLOSED, WcOpcode::Recv, status));
            }
        }
    }
}

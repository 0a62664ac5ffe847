//! Receives from a shared queue (see [`crate::rdma::shared_receive`]): where a connection on
//! one takes the buffer for each arriving Send, and how it says it closed.

use super::*;
use crate::rdma::soft::shared_receive::SHARED_CLOSED;

/// A connection's receives from a shared queue.
pub(super) struct SharedRx {
    holder: SharedHolder,
    /// Most buffers the connection may hold at once.
    limit: usize,
    buffer_size: usize,
    /// The receive completion that tells the consumer of the close was queued.
    close_told: bool,
}

impl Core {
    /// From now on the connection's receives come from `holder`'s queue, at most `limit` held
    /// at once; receives already posted to it stay first.
    pub(crate) fn use_shared(&mut self, holder: SharedHolder, limit: usize, buffer_size: usize) {
        self.shared = Some(SharedRx {
            holder,
            limit: limit.max(1),
            buffer_size,
            close_told: false,
        });
    }

    /// Changes how many shared buffers the connection may hold at once.
    pub fn limit_shared(&mut self, limit: usize) {
        if let Some(shared) = &mut self.shared {
            shared.limit = limit.max(1);
        }
    }

    /// The receive the next Send goes into: a posted one, else one from the shared queue.
    pub(super) fn next_receive(&mut self) -> Option<RecvWr> {
        if let Some(wr) = self.rq.pop_front() {
            return Some(wr);
        }
        let shared = self.shared.as_ref()?;
        shared.holder.next(shared.limit)
    }

    /// The fast path's receive for a whole Send of `payload`, with the payload placed; `None`
    /// leaves everything as it was (the FPDU path then decides).
    pub(super) fn fast_receive(&mut self, payload: &[u8]) -> Option<RecvWr> {
        let fits = match (self.rq.front(), &self.shared) {
            (Some(wr), _) => payload.len() <= wr.sge.len,
            (None, Some(shared)) => payload.len() <= shared.buffer_size,
            (None, None) => false,
        };
        if !fits {
            return None;
        }
        let wr = self.next_receive()?;
        if !payload.is_empty() && wr.sge.mr.write(wr.sge.offset, payload).is_err() {
            self.put_back(wr);
            return None;
        }
        Some(wr)
    }

    /// Undoes [`Core::next_receive`].
    fn put_back(&mut self, wr: RecvWr) {
        match &self.shared {
            Some(shared) if wr.wr_id & crate::rdma::soft::shared_receive::SHARED_WR != 0 => {
                shared.holder.give_back(wr.wr_id)
            }
            _ => self.rq.push_front(wr),
        }
    }

    /// A receive under way ends with `status` (not success): its own completion for a posted
    /// receive; for a shared buffer, the buffer goes back and the close is told once.
    pub(super) fn end_receive(&mut self, wr_id: crate::rdma::WrId, status: WcStatus) {
        match &self.shared {
            Some(shared) if wr_id & crate::rdma::soft::shared_receive::SHARED_WR != 0 => {
                shared.holder.give_back(wr_id);
                self.shared_closed(status);
            }
            _ => self
                .cq
                .push_back(Completion::new(wr_id, WcOpcode::Recv, status)),
        }
    }

    /// Tells the consumer of a connection on a shared queue that it closed, once: it has no
    /// receives of its own whose flush would.
    pub(super) fn shared_closed(&mut self, status: WcStatus) {
        if let Some(shared) = &mut self.shared {
            if !shared.close_told {
                shared.close_told = true;
                self.cq
                    .push_back(Completion::new(SHARED_CLOSED, WcOpcode::Recv, status));
            }
        }
    }
}

//! Posting: the core's operations turned into work requests, posted in the order the core
//! emitted them, each run of them as one list.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{Conn, Posted, State};
use crate::rdma::{Access, Connection, MemoryRegion, RemoteAddr, SendOp, SendWr, Sge};
use crate::rpc::observe::{self, metrics, CloseReason};
use crate::transport::core::{Op, Slice};
use crate::transport::pool::PoolBuf;

impl<C: Connection> Conn<C> {
    /// Posts everything the core has emitted, takes the completions that came while posting,
    /// and delivers the core's events.
    pub(super) fn flush(self: &Arc<Self>, st: &mut State) {
        loop {
            let mut posted = false;
            // RDMA Writes, Reads and invalidations wait here for the next Send, which goes
            // with them in one list: a reply's Writes and its Send ring the device's doorbell
            // once. A Send alone (most rounds) is posted at once.
            let mut held = Vec::new();
            while let Some(op) = st.backlog.pop_front().or_else(|| st.core.poll_op()) {
                if op.id().is_some() && st.sq_used >= self.sq_depth {
                    // The send queue is full: this waits for a completion, and everything
                    // after it with it (a revocation must not pass the Write before it).
                    st.backlog.push_front(op);
                    break;
                }
                posted = true;
                if let Err(e) = self.post(st, op, &mut held) {
                    return self.posting_failed(st, e);
                }
            }
            if let Err(e) = self.post_held(&mut held) {
                return self.posting_failed(st, e);
            }
            // A Send that completed as it was written is the poster's to take: a provider's
            // hook is not called from inside `post_send` (`Connection::set_completion_hook`).
            // Without a hook the completion task takes every completion (and, taking them
            // before it locks the state, would see them out of order if this did too).
            let mut took = false;
            if posted && self.hooked.load(Ordering::Acquire) {
                while let Some(c) = self.conn.try_completion() {
                    took = true;
                    self.complete(st, c);
                }
            }
            if !took {
                break;
            }
        }
        self.deliver(st);
        if observe::connection_events_enabled() {
            self.tell_errors_sent(st);
        }
        if self.draining.load(Ordering::Acquire)
            && st.core.calls_in_progress() == 0
            && st.posted.is_empty()
            && st.backlog.is_empty()
        {
            // Every posted Send has completed too: a Send alone ends its call in the core
            // when it is posted, and a disconnect flushes what a device has not sent yet (on
            // rxe the last reply of a draining connection was lost that way).
            self.close_locked(st, CloseReason::Shutdown);
        }
    }

    /// A registered buffer for a Send of `len` bytes: one of the free ones, or a new one as
    /// large as the peer receives (which version 2's RBSIZ may have raised since).
    fn send_buffer(&self, st: &mut State, len: usize) -> crate::rdma::Result<MemoryRegion> {
        match st.send_buffers.pop() {
            Some(mr) if mr.len() >= len => Ok(mr),
            _ => {
                let size = st.core.config().peer_recv_size.max(len);
                self.conn.register(vec![0; size], Access::NONE)
            }
        }
    }

    /// Posts `op`: a Send at once, with the requests `held` before it; the others join
    /// `held`; a revocation is carried out once what is held is posted.
    fn post(
        &self,
        st: &mut State,
        op: Op<PoolBuf>,
        held: &mut Vec<SendWr>,
    ) -> crate::rdma::Result<()> {
        let sge = |s: &Slice<PoolBuf>| Sge {
            mr: s.buf.region().clone(),
            offset: s.offset,
            len: s.len,
        };
        let wr = match op {
            Op::Send {
                id,
                message,
                invalidate,
            } => {
                let mr = self.send_buffer(st, message.len())?;
                let len = mr.with_mut_slice(|dst| {
                    let mut at = 0;
                    for part in message.pieces() {
                        dst[at..at + part.len()].copy_from_slice(part);
                        at += part.len();
                    }
                    at
                });
                // The buffer is all this side needs back: a requester learns from the reply
                // that its call arrived, and a responder needs no word of its reply's arrival.
                st.counts.bytes_sent += len as u64;
                metrics::bytes(self.side, "rdma", true, len as u64);
                let mut wr = SendWr::send(id, Sge::new(&mr, 0..len)?).complete_locally();
                if let Some(handle) = invalidate {
                    wr = wr.with_invalidate(handle);
                }
                st.posted.push_back((id, Posted::Send(mr)));
                wr
            }
            Op::Read { id, sink, remote } => SendWr::read(
                id,
                sge(&sink),
                RemoteAddr::new(remote.rdma_handle, remote.rdma_offset),
            ),
            Op::Write { id, source, remote } => SendWr::write(
                id,
                sge(&source),
                RemoteAddr::new(remote.rdma_handle, remote.rdma_offset),
            ),
            Op::Invalidate { id, buf } => {
                let wr = SendWr::local_invalidate(id, crate::transport::core::Buf::handle(&buf));
                st.posted.push_back((id, Posted::Invalidate(buf)));
                wr
            }
            Op::Revoke { buf } => {
                self.post_held(held)?;
                return self.pool.revoke(&buf).map_err(|e| {
                    crate::rdma::Error::InvalidWorkRequest(format!("revoking a handle: {e}"))
                });
            }
        };
        st.sq_used += 1;
        if !matches!(wr.op, SendOp::Send { .. }) {
            held.push(wr);
            return Ok(());
        }
        if held.is_empty() {
            return self.conn.post_send(wr);
        }
        held.push(wr);
        self.conn.post_sends(std::mem::take(held))
    }

    /// Posts the requests `held`, as one list.
    fn post_held(&self, held: &mut Vec<SendWr>) -> crate::rdma::Result<()> {
        match held.len() {
            0 => Ok(()),
            1 => self.conn.post_send(held.remove(0)),
            _ => self.conn.post_sends(std::mem::take(held)),
        }
    }

    /// A work request the provider refused: the connection cannot go on.
    #[cold]
    fn posting_failed(self: &Arc<Self>, st: &mut State, e: crate::rdma::Error) {
        tracing::warn!(error = %e, peer = %self.peer, "posting failed: closing");
        self.close_locked(st, CloseReason::Error);
    }
}

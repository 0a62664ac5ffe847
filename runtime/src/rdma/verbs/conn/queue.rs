//! The queues: posting with the queues locked, and completions taken in posting order.

use super::*;
use crate::rdma::verbs::shared_receive::SHARED_WR;

impl Inner {
    /// Drains the completion queue into the ready list; returns how many were consumed.
    pub(super) fn drain(&self, q: &mut Queues) -> usize {
        let mut wcs = std::mem::take(&mut q.wcs);
        let mut total = 0;
        while let Ok(n) = self.cq.poll(&mut wcs) {
            for wc in &wcs[..n] {
                self.complete(q, wc);
            }
            total += n;
            if n < POLL_BATCH {
                break;
            }
        }
        q.wcs = wcs;
        if total > 0 {
            self.notify.notify_waiters();
        }
        total
    }

    /// Turns one work completion into a contract completion (or a bind result): a receive's
    /// at once, a send-queue request's once every request posted before it has completed.
    pub(super) fn complete(&self, q: &mut Queues, wc: &ibv_wc) {
        if wc.wr_id & SHARED_WR != 0 && wc.wr_id & RECV_BIT == 0 {
            return self.complete_shared(q, wc);
        }
        let is_recv = wc.wr_id & RECV_BIT != 0;
        let seq = wc.wr_id & !RECV_BIT;
        if !is_recv {
            let status = map_status(wc.status);
            if status != WcStatus::Success {
                // Any error completion means the queue pair is in the error state.
                self.state.connected.store(false, Ordering::SeqCst);
            }
            let Some(pos) = q.send.iter().position(|o| o.seq == seq) else {
                return;
            };
            if matches!(q.send[pos].kind, Kind::Bind) {
                // The provider's own: its waiter needs it now, whatever is ahead of it.
                q.binds.insert(seq, status);
                q.send.remove(pos);
                return;
            }
            q.send[pos].progress = Progress::Completed(status);
            // The unsignaled requests before this one, which have no completion of their own,
            // have succeeded: a device processes its send queue in order. Not the signaled
            // ones: their completions may come later than this one (Linux siw completes a
            // Send before an RDMA Read posted ahead of it has its response), and until then
            // their memory is not ready (a Read's sink not filled).
            for entry in q.send.range_mut(..pos) {
                if matches!(entry.progress, Progress::PostedUnsignaled) {
                    entry.progress = Progress::Completed(WcStatus::Success);
                }
            }
            return self.release(q);
        }
        let Some(pos) = q.recv.iter().position(|o| o.seq == seq) else {
            return;
        };
        let Some(entry) = q.recv.remove(pos) else {
            return;
        };
        let status = self.receive_status(wc);
        if let Kind::User { wr_id, .. } = entry.kind {
            q.ready.push_back(self.received(wc, wr_id, status));
        }
        drop(entry.keep);
    }

    /// The status of a receive's work completion; an error one means the queue pair is in
    /// the error state.
    pub(super) fn receive_status(&self, wc: &ibv_wc) -> WcStatus {
        let mut status = map_status(wc.status);
        if self.shape.rxe && wc.status == ibv_wc_status::IBV_WC_LOC_QP_OP_ERR {
            status = WcStatus::LocalLengthError;
        }
        if status != WcStatus::Success {
            self.state.connected.store(false, Ordering::SeqCst);
        }
        status
    }

    /// The contract's completion of a receive (`wr_id`, `status`) from its work completion:
    /// its length, and the key a Send With Invalidate invalidated.
    pub(super) fn received(&self, wc: &ibv_wc, wr_id: WrId, status: WcStatus) -> Completion {
        let mut c = Completion::new(wr_id, WcOpcode::Recv, status);
        if status == WcStatus::Success {
            c = c.with_byte_len(wc.byte_len);
            let mut inv = ibv_wc_flags::IBV_WC_WITH_INV.0;
            if self.shape.rxe {
                inv |= rxe_quirks::KERNEL_WITH_INVALIDATE;
            }
            if wc.wc_flags & inv != 0 {
                // SAFETY: WITH_INV says the union holds the invalidated rkey.
                let rkey = unsafe { wc.imm_data_invalidated_rkey_union.invalidated_rkey };
                // If it was one of our windows, that window is free now; if it was a
                // region's own key (no windows), the peer revoked it.
                self.bound.remove(rkey);
                c = c.with_invalidated_rkey(rkey);
            }
        }
        c
    }

    /// Delivers the send-queue completions at the front of the queue, in posting order,
    /// carrying out the emulated local invalidates among them.
    pub(super) fn release(&self, q: &mut Queues) {
        while let Some(front) = q.send.front() {
            let status = match front.progress {
                Progress::Posted | Progress::PostedUnsignaled => return,
                Progress::Completed(status) => status,
                // A key of no live registration of this connection: an error completion,
                // which (as every error completion) ends the connection.
                Progress::Revoke(rkey) => {
                    if self.plain.revoke(rkey) {
                        WcStatus::Success
                    } else {
                        self.state.connected.store(false, Ordering::SeqCst);
                        WcStatus::LocalProtectionError
                    }
                }
            };
            let Some(entry) = q.send.pop_front() else {
                return;
            };
            if let Kind::User {
                wr_id,
                opcode,
                signaled,
            } = entry.kind
            {
                q.user_send -= 1;
                if signaled || status != WcStatus::Success {
                    let mut c = Completion::new(wr_id, opcode, status);
                    if status == WcStatus::Success && opcode == WcOpcode::RdmaRead {
                        c = c.with_byte_len(entry.len);
                    }
                    q.ready.push_back(c);
                }
            }
            drop(entry.keep);
        }
    }

    /// Posts `wr` to the send queue while `q` is locked, recording it as `kind`.
    ///
    /// # Safety
    /// Every address in `wr` must point into a live registration of this connection that is
    /// kept alive (through `keep`) until the request completes; the hardware reads or writes it
    /// asynchronously.
    pub(super) unsafe fn post_send_locked(
        &self,
        q: &mut Queues,
        wr: &mut ibv_send_wr,
        kind: Kind,
        keep: Keep,
        len: u32,
    ) -> Result<u64> {
        let seq = q.next_seq;
        q.next_seq += 1;
        wr.wr_id = seq;
        wr.send_flags |= ibv_send_flags::IBV_SEND_SIGNALED.0;
        let mut bad = std::ptr::null_mut();
        // SAFETY: the caller guarantees the memory; the queue pair is live; the lock
        // serialises posting so completions match the ring order.
        let rc = unsafe { ibv_post_send(self.qp.raw(), wr, &mut bad) };
        if rc != 0 {
            return Err(post_error(rc, "send", self.shape.send_depth));
        }
        q.send.push_back(Outstanding {
            seq,
            kind,
            keep,
            len,
            progress: Progress::Posted,
        });
        Ok(seq)
    }

    /// Posts the bind of `reg`'s window (in `slot`, locked, free) over `addr..addr + len`
    /// with the new key `rkey` and the remote rights of `access`, while `q` is locked. The
    /// window counts as bound with `rkey` from here on (in send-queue order: later requests
    /// see it bound); [`Self::wait_bind`] waits for the outcome.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn post_bind_locked(
        &self,
        q: &mut Queues,
        reg: &Registration,
        slot: &mut Window,
        addr: *mut u8,
        len: usize,
        access: Access,
        rkey: u32,
    ) -> Result<u64> {
        if slot.raw().is_null() {
            return Err(Error::InvalidWorkRequest(
                "the region has no memory window".into(),
            ));
        }
        // SAFETY: all-zero is a valid starting point.
        let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.opcode = ibv_wr_opcode::IBV_WR_BIND_MW;
        wr.bind_mw_tso_union.bind_mw = bind_mw_t {
            mw: slot.raw(),
            rkey,
            bind_info: ibv_mw_bind_info {
                mr: reg.mr(),
                addr: addr as u64,
                length: len as u64,
                mw_access_flags: mw_access(access),
            },
        };
        if !self.state.connected.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        // SAFETY: the bind names no local memory through a scatter list; the registration
        // it binds over outlives the window (the window is deallocated first).
        let seq = unsafe { self.post_send_locked(q, &mut wr, Kind::Bind, Keep::Nothing, 0)? };
        // libibverbs took the window's current key (the device's) from `*mw` while posting;
        // the device's is `rkey` once the bind executes, and the next bind must name that.
        slot.set_key(rkey);
        self.bound.insert(rkey, reg);
        Ok(seq)
    }

    /// Waits for the window bind posted as `seq`, polling the completion queue: completions
    /// of the consumer's requests found meanwhile go to the ready list, as in
    /// [`Connection::try_completion`], so none is lost.
    pub(super) fn wait_bind(&self, seq: u64) -> Result<()> {
        let deadline = Instant::now() + BIND_TIMEOUT;
        loop {
            {
                let mut q = self.lock();
                self.drain(&mut q);
                if let Some(status) = q.binds.remove(&seq) {
                    return match status {
                        WcStatus::Success => Ok(()),
                        WcStatus::Flushed => Err(Error::Closed),
                        other => Err(Error::Io(io::Error::other(format!(
                            "binding a memory window failed: {other}"
                        )))),
                    };
                }
            }
            if Instant::now() > deadline {
                return Err(Error::Io(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the memory window bind did not complete",
                )));
            }
            std::thread::yield_now();
        }
    }

    /// Waits until completions may have arrived: a completion-channel event, or another task
    /// having drained completions into the ready list (`notified` was registered before the
    /// caller last looked, so no drain in between is missed).
    pub(super) async fn wait(
        &self,
        notified: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
    ) {
        if self.cq.is_going() {
            // The device went: completions come only from `flush_outstanding` now.
            return notified.await;
        }
        tokio::select! {
            _ = notified => {}
            r = self.cq.wait_event() => {
                if r.is_err() {
                    // The channel failed; fall back to a short sleep so polling continues.
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        }
    }
}

/// Translates a non-zero `ibv_post_*` return code.
/// `ENOMEM` means the device's work queue is full (`queue` of `depth` requests).
pub(in crate::rdma::verbs) fn post_error(rc: i32, queue: &'static str, depth: usize) -> Error {
    match rc {
        libc::ENOMEM => Error::QueueFull { queue, depth },
        rc if rc > 0 => Error::Io(io::Error::from_raw_os_error(rc)),
        _ => Error::Io(io::Error::last_os_error()),
    }
}

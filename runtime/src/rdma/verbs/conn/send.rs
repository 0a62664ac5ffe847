//! Send-queue requests: each checked and turned into an `ibv_send_wr` with its gather list,
//! then a list of them posted with one `ibv_post_send`, which rings the device's doorbell once
//! (on rxe and siw one system call for the list; a reply's RDMA Writes and its Send go so).

use super::*;

/// A request ready to post: the device's form of it and what the queue keeps for it.
struct Prepared {
    swr: ibv_send_wr,
    sges: [ibv_sge; MAX_SGE],
    opcode: WcOpcode,
    wr_id: WrId,
    /// The request itself, until the queue keeps it.
    wr: Option<SendWr>,
    /// For RDMA Read: the sink length, reported as the completion's byte count.
    len: u32,
    /// The key a local invalidate names.
    invalidates: Option<u32>,
    /// Whether its success is delivered ([`SendWr::unsignaled`]).
    signaled: bool,
}

impl VerbsConnection {
    /// Posts one request.
    pub(super) fn post_one(&self, wr: SendWr) -> Result<()> {
        let mut p = self.prepare_send(wr)?;
        let mut q = self.inner.lock();
        self.check_open()?;
        if q.user_send >= self.inner.shape.send_depth {
            return Err(self.queue_full());
        }
        match p.invalidates {
            Some(rkey) if !self.inner.shape.windows => {
                self.revoke_in_order(&mut q, &mut p, rkey);
                Ok(())
            }
            _ => self.post_run(&mut q, std::slice::from_mut(&mut p)),
        }
    }

    /// Posts `wrs` in order: every run of them the device takes goes in one `ibv_post_send`.
    /// On an error, the requests before the failing one are posted, the others are not.
    pub(super) fn post_list(&self, wrs: Vec<SendWr>) -> Result<()> {
        let mut prepared = Vec::with_capacity(wrs.len());
        let mut failed = None;
        for wr in wrs {
            match self.prepare_send(wr) {
                Ok(p) => prepared.push(p),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if prepared.is_empty() {
            return failed.map_or(Ok(()), Err);
        }
        let mut q = self.inner.lock();
        self.check_open()?;
        let mut start = 0;
        for i in 0..prepared.len() {
            if q.user_send + (i - start) >= self.inner.shape.send_depth {
                self.post_run(&mut q, &mut prepared[start..i])?;
                return Err(self.queue_full());
            }
            match prepared[i].invalidates {
                Some(rkey) if !self.inner.shape.windows => {
                    self.post_run(&mut q, &mut prepared[start..i])?;
                    self.revoke_in_order(&mut q, &mut prepared[i], rkey);
                    start = i + 1;
                }
                _ => {}
            }
        }
        self.post_run(&mut q, &mut prepared[start..])?;
        failed.map_or(Ok(()), Err)
    }

    /// Whether requests may be posted now.
    fn check_open(&self) -> Result<()> {
        if self.inner.state.establishing.load(Ordering::SeqCst) {
            return Err(Error::InvalidWorkRequest(
                "nothing can be sent before the connection is established".into(),
            ));
        }
        if !self.is_connected() {
            return Err(Error::Closed);
        }
        Ok(())
    }

    fn queue_full(&self) -> Error {
        Error::QueueFull {
            queue: "send",
            depth: self.inner.shape.send_depth,
        }
    }

    /// A local invalidate of `rkey` on a device without memory windows: Linux siw takes none
    /// from user space, and a region's own key is all the peer was given here, so the region
    /// is deregistered instead, in send-queue order (see `release`), after every request
    /// posted before it.
    fn revoke_in_order(&self, q: &mut Queues, p: &mut Prepared, rkey: u32) {
        let seq = q.next_seq;
        q.next_seq += 1;
        q.send.push_back(Outstanding {
            seq,
            kind: p.kind(),
            keep: p.wr.take().map_or(Keep::Nothing, Keep::Send),
            len: p.len,
            progress: Progress::Revoke(rkey),
        });
        q.user_send += 1;
        self.inner.release(q);
        self.inner.notify.notify_waiters();
    }

    /// Posts `run` with one `ibv_post_send` while `q` is locked, each request numbered in
    /// send-queue order; those the device took are recorded in the queue.
    fn post_run(&self, q: &mut Queues, run: &mut [Prepared]) -> Result<()> {
        if run.is_empty() {
            return Ok(());
        }
        let first_seq = q.next_seq;
        // Linked in place: `run` does not move until the call returns.
        let n = run.len();
        for i in 0..n {
            let next = match run.get_mut(i + 1) {
                Some(p) => &mut p.swr as *mut ibv_send_wr,
                None => std::ptr::null_mut(),
            };
            let p = &mut run[i];
            if p.swr.num_sge > 0 {
                p.swr.sg_list = p.sges.as_mut_ptr();
            }
            p.swr.next = next;
            p.swr.wr_id = first_seq + i as u64;
            // Without memory windows a local invalidate is emulated in send-queue order (see
            // `revoke_in_order`), which needs every request before it to complete on its own.
            // An RDMA Read always reports its own: its sink is filled only when its response
            // has come, which a later request's completion does not say.
            if p.device_signaled(self.inner.shape.windows) {
                p.swr.send_flags |= ibv_send_flags::IBV_SEND_SIGNALED.0;
            }
        }
        let mut bad = std::ptr::null_mut();
        // SAFETY: every element was checked to lie inside a registration of this domain, and
        // each request (holding those regions) is kept in the queue until its completion is
        // delivered; the queue pair is live; the lock serialises posting so completions match
        // the ring order.
        let rc = unsafe { ibv_post_send(self.inner.qp.raw(), &mut run[0].swr, &mut bad) };
        // The device took every request before the one `bad` names (all of them on success).
        let taken = if rc == 0 {
            n
        } else {
            run.iter()
                .position(|p| std::ptr::eq(&p.swr, bad.cast_const()))
                .unwrap_or(0)
        };
        for (i, p) in run.iter_mut().take(taken).enumerate() {
            let progress = if p.device_signaled(self.inner.shape.windows) {
                Progress::Posted
            } else {
                Progress::PostedUnsignaled
            };
            q.send.push_back(Outstanding {
                seq: first_seq + i as u64,
                kind: p.kind(),
                keep: p.wr.take().map_or(Keep::Nothing, Keep::Send),
                len: p.len,
                progress,
            });
            q.user_send += 1;
            if let Some(rkey) = p.invalidates {
                // If it names one of our windows, that window is free for every later request.
                self.inner.bound.remove(rkey);
            }
        }
        q.next_seq += taken as u64;
        if rc != 0 {
            return Err(post_error(rc, "send", self.inner.shape.send_depth));
        }
        Ok(())
    }

    /// Checks `wr` and builds its `ibv_send_wr` (its gather list is linked when posted).
    fn prepare_send(&self, wr: SendWr) -> Result<Prepared> {
        // SAFETY: all-zero is a valid starting point.
        let mut swr: ibv_send_wr = unsafe { std::mem::zeroed() };
        // SAFETY: ibv_sge is plain old data; all-zero is valid.
        let mut sges: [ibv_sge; MAX_SGE] = unsafe { std::mem::zeroed() };
        let mut n = 0;
        let max = self.inner.shape.max_send_sge.min(MAX_SGE);
        let mut add = |sge: &Sge| -> Result<()> {
            if n == max {
                return Err(Error::InvalidWorkRequest(format!(
                    "more than {max} gather elements"
                )));
            }
            sges[n] = self.inner.sge(sge)?;
            n += 1;
            Ok(())
        };
        let mut len = 0;
        let mut invalidates = None;
        let opcode = match &wr.op {
            SendOp::Send {
                sg,
                solicited,
                invalidate,
            } => {
                for s in sg {
                    add(s)?;
                }
                if *solicited {
                    swr.send_flags |= ibv_send_flags::IBV_SEND_SOLICITED.0;
                }
                if let Some(rkey) = invalidate {
                    swr.opcode = ibv_wr_opcode::IBV_WR_SEND_WITH_INV;
                    swr.imm_data_invalidated_rkey_union.invalidated_rkey = *rkey;
                } else {
                    swr.opcode = ibv_wr_opcode::IBV_WR_SEND;
                }
                WcOpcode::Send
            }
            SendOp::RdmaWrite { sg, remote } => {
                for s in sg {
                    add(s)?;
                }
                swr.opcode = ibv_wr_opcode::IBV_WR_RDMA_WRITE;
                swr.wr.rdma = rdma_t {
                    remote_addr: remote.addr,
                    rkey: remote.rkey,
                };
                WcOpcode::RdmaWrite
            }
            SendOp::RdmaRead { sink, remote } => {
                if !sink.mr.access().contains(Access::LOCAL_WRITE) {
                    return Err(Error::InvalidWorkRequest(
                        "an RDMA Read sink needs local write access".into(),
                    ));
                }
                add(sink)?;
                len = sink.len as u32;
                swr.opcode = ibv_wr_opcode::IBV_WR_RDMA_READ;
                swr.wr.rdma = rdma_t {
                    remote_addr: remote.addr,
                    rkey: remote.rkey,
                };
                WcOpcode::RdmaRead
            }
            SendOp::LocalInvalidate { rkey } => {
                invalidates = Some(*rkey);
                swr.opcode = ibv_wr_opcode::IBV_WR_LOCAL_INV;
                swr.imm_data_invalidated_rkey_union.invalidated_rkey = *rkey;
                WcOpcode::LocalInvalidate
            }
        };
        let payload = wr.byte_len();
        if matches!(opcode, WcOpcode::Send | WcOpcode::RdmaWrite)
            && payload > 0
            && payload <= self.inner.shape.max_inline as u64
        {
            // The device copies the bytes at post time; the regions need not stay alive, but
            // the queue keeps them anyway, as for every request.
            swr.send_flags |= ibv_send_flags::IBV_SEND_INLINE.0;
        }
        swr.num_sge = n as i32;
        Ok(Prepared {
            swr,
            sges,
            opcode,
            wr_id: wr.wr_id,
            signaled: wr.signaled,
            wr: Some(wr),
            len,
            invalidates,
        })
    }
}

impl Prepared {
    /// Whether the device is asked for this request's completion: a signaled request, an RDMA
    /// Read, and every request on a device without memory windows.
    fn device_signaled(&self, windows: bool) -> bool {
        self.signaled || !windows || self.opcode == WcOpcode::RdmaRead
    }

    /// What its completion reports.
    fn kind(&self) -> Kind {
        Kind::User {
            wr_id: self.wr_id,
            opcode: self.opcode,
            signaled: self.signaled,
        }
    }
}

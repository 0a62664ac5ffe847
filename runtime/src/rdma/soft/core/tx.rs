//! The transmit half of the core: segmentation of Sends and RDMA Writes to the MULPDU,
//! RDMA Read Requests (and confirmation probes), RDMA Read Responses.

use super::*;

/// The default of [`CoreConfig::gather_min`]: payloads shorter than this are copied into the
/// transmit queue. A gathered FPDU costs a region lock, a boxed part and two more slices per
/// write, more than copying up to a few pages costs; a 64 KiB Send's 65,000-byte segment stays
/// gathered. Measurements: docs/bench/round_trip_64k.md.
pub const DEFAULT_GATHER_MIN: usize = 32 * 1024;

/// The most a message may have left for its last segment to join the batch before it
/// ([`Core::poll_transmit`]).
const BATCH_TAIL: usize = 4096;

/// Most Sends and RDMA Writes that wait for confirmation while a probe is held back for the
/// poller (see [`Core::needs_probe`]): a consumer that posts on without taking its completions
/// still has them confirmed in rounds of this many.
pub(super) const PROBE_HELD_MOST: usize = 32;

impl Core {
    /// Queues one FPDU carrying `hdr` and `payload`, copied.
    pub(super) fn emit(&mut self, hdr: &DdpHeader, payload: &[u8], out: &mut Transmit) {
        let head = hdr.to_bytes();
        out.put_fpdu(&mut self.writer, &head, hdr.len(), payload);
    }

    /// Queues one FPDU carrying `hdr` and `n` bytes of `sg` from `start`: gathered from the
    /// registrations when it is large enough and there are no markers, copied otherwise. Takes
    /// the parts of the core it uses, so that `sg` may be a request still on the send queue.
    #[allow(clippy::too_many_arguments)]
    fn emit_payload(
        gather_min: usize,
        writer: &mut FpduWriter,
        scratch: &mut Vec<u8>,
        hdr: &DdpHeader,
        sg: &[Sge],
        start: usize,
        n: usize,
        out: &mut Transmit,
    ) {
        let (head, head_len) = (hdr.to_bytes(), hdr.len());
        if !writer.framing().markers && n >= gather_min {
            out.put_gathered(writer, &head[..head_len], ranges(sg, start, n));
            return;
        }
        match locate_single(sg, start, n) {
            Some((mr, off)) => {
                mr.with_slice(|s| out.put_fpdu(writer, &head, head_len, &s[off..off + n]));
            }
            None => {
                scratch.clear();
                gather(sg, start, n, scratch);
                out.put_fpdu(writer, &head, head_len, scratch);
            }
        }
    }

    /// Reports the bytes the driver wrote from `out`: Sends and RDMA Writes whose bytes are
    /// all written complete now (without [`CoreConfig::confirm`]).
    pub fn transmitted(&mut self, out: &mut Transmit) {
        while let Some(seq) = out.take_completed() {
            // RFC 5040 section 5: a Send or Write completes locally once handed to the LLP.
            self.finish(seq, WcStatus::Success);
        }
    }

    pub(super) fn untagged(
        &self,
        opcode: Opcode,
        qn: u32,
        msn: u32,
        mo: u32,
        last: bool,
        rsvd: u32,
    ) -> DdpHeader {
        DdpHeader {
            last,
            ddp_version: self.cfg.version,
            rdmap_version: self.cfg.version,
            opcode: opcode.into(),
            reserved: 0,
            buffer: Buffer::Untagged {
                rsvd_ulp: rsvd,
                qn,
                msn,
                mo,
            },
        }
    }

    pub(super) fn tagged(&self, opcode: Opcode, stag: u32, to: u64, last: bool) -> DdpHeader {
        DdpHeader {
            last,
            ddp_version: self.cfg.version,
            rdmap_version: self.cfg.version,
            opcode: opcode.into(),
            reserved: 0,
            buffer: Buffer::Tagged { stag, to },
        }
    }

    /// Queues stream bytes in `out` (until it holds a batch). Returns true when the stream
    /// should be shut down once `out` is written (closed or terminated). Payloads are not
    /// copied: `out` refers to the registrations (see [`Transmit`]). Call
    /// [`Core::transmitted`] after writing.
    pub fn poll_transmit(&mut self, out: &mut Transmit) -> bool {
        if !self.out_urgent.is_empty() {
            out.put(&self.out_urgent);
            self.out_urgent.clear();
        }
        if self.fast_paths
            && self.state == State::Established
            && !self.cfg.tx.markers
            && self.fast_transmit(out)
        {
            // Nothing left: the loop below would find that out.
            return false;
        }
        while self.state == State::Established {
            let batch = if self.inbound_reads.is_empty() {
                self.tx_batch()
            } else {
                READ_RESPONSE_BATCH
            };
            if out.len() >= batch && !self.short_tail_follows() {
                // A probe due after the message just queued goes in the same write, past the
                // batch: it is a few bytes, and written apart it reaches the peer in a read of
                // its own, which the peer answers with a write of its own instead of with its
                // next message.
                if self.cur_tx.is_none() && self.inbound_reads.is_empty() && self.needs_probe() {
                    self.emit_read_request(None, None, 0, 0, 0, 0, out);
                }
                break;
            }
            if !self.inbound_reads.is_empty() {
                self.emit_read_response(out);
                continue;
            }
            if self.cur_tx.is_none() {
                // A probe goes after the last message the batch takes, confirming them all;
                // before the next one only when that one will not end in this batch (a large
                // message: its predecessors' completions come back while it flows).
                let next_ends_here = self.sq.front().is_some_and(|wr| {
                    (out.len() as u64).saturating_add(wr.byte_len()) < batch as u64
                });
                if !next_ends_here && self.needs_probe() {
                    self.emit_read_request(None, None, 0, 0, 0, 0, out);
                }
                if !self.start_next(out) {
                    break;
                }
            }
            if self.cur_tx.is_some() {
                self.emit_segment(out);
            }
        }
        self.state != State::Established
    }

    /// The message being segmented has at most [`BATCH_TAIL`] bytes left: its last segment
    /// goes in the batch of the one before it, past the batch's limit (a 64 KiB Send is a
    /// 65,000-byte segment and a 536-byte one), rather than in a write of its own. Not while
    /// RDMA Read Responses are due: they go first, and would then run past the batch.
    fn short_tail_follows(&self) -> bool {
        self.inbound_reads.is_empty()
            && self
                .cur_tx
                .as_ref()
                .is_some_and(|job| job.total - job.sent <= BATCH_TAIL)
    }

    /// Starts the next send-queue request; false when nothing can start.
    pub(super) fn start_next(&mut self, out: &mut Transmit) -> bool {
        let Some(front) = self.sq.front() else {
            return false;
        };
        let byte_len = front.byte_len() as u32;
        match &front.op {
            SendOp::Send { .. } | SendOp::RdmaWrite { .. } => {
                // Segmented from where it is: it leaves the send queue once emitted.
                let opcode = opcode_of(&front.op);
                let seq = self.push_inflight(front.wr_id, front.signaled, opcode, byte_len);
                let msn = if opcode == WcOpcode::Send {
                    let m = self.tx_msn[0];
                    self.tx_msn[0] = m.wrapping_add(1);
                    m
                } else {
                    0
                };
                self.cur_tx = Some(TxJob {
                    seq,
                    msn,
                    sent: 0,
                    total: byte_len as usize,
                });
            }
            SendOp::RdmaRead { .. } if self.pending_reads.len() >= self.cfg.ord.max(1) => {
                return false;
            }
            &SendOp::RdmaRead { ref sink, remote } => {
                let (wr_id, signaled, sink) = (front.wr_id, front.signaled, sink.clone());
                self.sq.pop_front();
                let seq = self.push_inflight(wr_id, signaled, WcOpcode::RdmaRead, byte_len);
                let sink_stag = sink.mr.rkey();
                let sink_to = sink.mr.addr().wrapping_add(sink.offset as u64);
                self.emit_read_request(
                    Some(seq),
                    Some(sink),
                    sink_stag,
                    sink_to,
                    remote.rkey,
                    remote.addr,
                    out,
                );
            }
            &SendOp::LocalInvalidate { rkey } => {
                let (wr_id, signaled) = (front.wr_id, front.signaled);
                self.sq.pop_front();
                let seq = self.push_inflight(wr_id, signaled, WcOpcode::LocalInvalidate, 0);
                let status = if self.tags.invalidate(rkey) {
                    WcStatus::Success
                } else {
                    WcStatus::LocalProtectionError
                };
                self.finish(seq, status);
            }
        }
        true
    }

    /// How many unwritten bytes the transmit queue takes before a write when no RDMA Read
    /// Response is due ([`TX_BATCH`], [`TX_BATCH_CRC`]).
    pub(super) fn tx_batch(&self) -> usize {
        if self.cfg.tx.crc {
            TX_BATCH_CRC
        } else {
            TX_BATCH
        }
    }

    /// True when emitted Sends/Writes wait for confirmation and no RDMA Read is outstanding
    /// or about to start that would confirm them. [`Core::poll_transmit`] puts a due probe
    /// after the last message of a batch, confirming them all, and between two messages only
    /// before one that will not end in the batch, so that completions come back while a large
    /// one flows (at most one probe per round trip: none while one is outstanding).
    ///
    /// A poller that still has completions to take is not waiting for more: the probe waits
    /// until it has taken them all ([`Core::probe_held_back`] tells the driver when), or until
    /// [`PROBE_HELD_MOST`] messages wait for one. A stream of RDMA Writes with a window of
    /// work requests then costs a probe per window, not one per two messages.
    pub(super) fn needs_probe(&self) -> bool {
        self.cfg.confirm
            && self.unconfirmed > 0
            && self.pending_reads.is_empty()
            && self.cur_tx.is_none()
            && !matches!(
                self.sq.front(),
                Some(SendWr {
                    op: SendOp::RdmaRead { .. },
                    ..
                })
            )
            && !self.probe_waits_for_poller()
    }

    /// A poller has completions left to take, and fewer than [`PROBE_HELD_MOST`] messages wait
    /// for the probe (see [`Core::needs_probe`]).
    fn probe_waits_for_poller(&self) -> bool {
        self.defer_probes && !self.cq.is_empty() && self.unconfirmed < PROBE_HELD_MOST
    }

    /// Emits an RDMA Read Request (RFC 5040 section 4.4); `seq`/`sink` are `None` for a
    /// zero-length confirmation probe.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn emit_read_request(
        &mut self,
        seq: Option<u64>,
        sink: Option<Sge>,
        sink_stag: u32,
        sink_to: u64,
        src_stag: u32,
        src_to: u64,
        out: &mut Transmit,
    ) {
        let size = sink.as_ref().map_or(0, |s| s.len);
        let req = ReadRequest {
            sink_stag,
            sink_to,
            size: size as u32,
            src_stag,
            src_to,
        };
        let msn = self.tx_msn[1];
        self.tx_msn[1] = msn.wrapping_add(1);
        let hdr = self.untagged(Opcode::ReadRequest, ddp::QN_READ_REQUEST, msn, 0, true, 0);
        // The whole ULPDU is headers: rendered in one fixed-size buffer.
        let mut head = [0; ddp::UNTAGGED_LEN + rdmap::READ_REQUEST_LEN];
        head[..ddp::UNTAGGED_LEN].copy_from_slice(&hdr.to_bytes());
        head[ddp::UNTAGGED_LEN..].copy_from_slice(&req.to_bytes());
        out.put_fpdu(&mut self.writer, &head, head.len(), &[]);
        let confirms_upto = self.inflight_base + self.inflight.len() as u64;
        if size > 0 {
            self.reads_with_data += 1;
        }
        if size >= super::direct::HINT_MIN {
            self.large_reads += 1;
        }
        self.pending_reads.push_back(PendingRead {
            seq,
            confirms_upto,
            size,
            sink,
            sink_stag,
            sink_to,
            received: 0,
        });
    }

    /// Emits the next segment of the current Send or RDMA Write (the front of the send queue).
    pub(super) fn emit_segment(&mut self, out: &mut Transmit) {
        let Some(mut job) = self.cur_tx.take() else {
            return;
        };
        let Some(wr) = self.sq.front() else {
            return;
        };
        let hdr_len = match &wr.op {
            SendOp::Send { .. } => ddp::UNTAGGED_LEN,
            SendOp::RdmaWrite { .. } => ddp::TAGGED_LEN,
            _ => return,
        };
        let room = self.cfg.mulpdu - hdr_len;
        let n = room.min(job.total - job.sent);
        let last = job.sent + n == job.total;
        let (hdr, emitted) = match &wr.op {
            SendOp::Send {
                solicited,
                invalidate,
                ..
            } => {
                let opcode = match (solicited, invalidate.is_some()) {
                    (false, false) => Opcode::Send,
                    (false, true) => Opcode::SendInvalidate,
                    (true, false) => Opcode::SendSolicited,
                    (true, true) => Opcode::SendSolicitedInvalidate,
                };
                let hdr = self.untagged(
                    opcode,
                    ddp::QN_SEND,
                    job.msn,
                    job.sent as u32,
                    last,
                    invalidate.unwrap_or(0),
                );
                (hdr, Emitted::Send { msn: job.msn })
            }
            SendOp::RdmaWrite { remote, .. } => {
                let hdr = self.tagged(
                    Opcode::RdmaWrite,
                    remote.rkey,
                    remote.addr.wrapping_add(job.sent as u64),
                    last,
                );
                let emitted = Emitted::Write {
                    stag: remote.rkey,
                    to: remote.addr,
                    len: job.total as u64,
                };
                (hdr, emitted)
            }
            _ => return,
        };
        if let SendOp::Send { sg, .. } | SendOp::RdmaWrite { sg, .. } = &wr.op {
            Self::emit_payload(
                self.cfg.gather_min,
                &mut self.writer,
                &mut self.scratch,
                &hdr,
                sg,
                job.sent,
                n,
                out,
            );
        }
        job.sent += n;
        if !last {
            self.cur_tx = Some(job);
            return;
        }
        let local = self.sq.pop_front().is_some_and(|wr| wr.complete_locally);
        if self.cfg.confirm && !local {
            if let Some(e) = self.seq_entry(job.seq) {
                e.emitted = Some(emitted);
            }
            self.unconfirmed += 1;
        } else {
            // Completes once the driver has written its bytes (`Core::transmitted`): the
            // payload is read from the registrations until then. Behind a request still to be
            // confirmed, it waits for that one (completions come in posting order).
            out.complete_when_written(job.seq);
        }
    }

    pub(super) fn emit_read_response(&mut self, out: &mut Transmit) {
        let Some(mut r) = self.inbound_reads.pop_front() else {
            return;
        };
        let room = self.cfg.mulpdu - ddp::TAGGED_LEN;
        let n = room.min(r.size - r.sent);
        let last = r.sent + n == r.size;
        let hdr = self.tagged(
            Opcode::ReadResponse,
            r.sink_stag,
            r.sink_to.wrapping_add(r.sent as u64),
            last,
        );
        match &r.source {
            Some(mr) => {
                let sg = [Sge {
                    mr: mr.clone(),
                    offset: r.src_off,
                    len: r.size,
                }];
                Self::emit_payload(
                    self.cfg.gather_min,
                    &mut self.writer,
                    &mut self.scratch,
                    &hdr,
                    &sg,
                    r.sent,
                    n,
                    out,
                );
            }
            None => self.emit(&hdr, &[], out),
        }
        r.sent += n;
        if !last {
            self.inbound_reads.push_front(r);
        }
    }
}

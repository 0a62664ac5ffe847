//! The receive half of the core: FPDUs from the stream, validation of every header field,
//! placement, Terminate handling (direct placement from the socket: `direct.rs`).

use super::direct::HINT_MIN;
use super::*;

impl Core {
    /// Notes that the peer is about to write into `mr` by RDMA Write (a Write chunk of a call
    /// being sent), so that its first segment too is placed directly (see
    /// [`Core::next_read_hint`]). Not under markers, where nothing is placed directly, nor for
    /// a region smaller than `HINT_MIN` (32 KiB), whose payload costs less to copy than a read
    /// of the header alone.
    pub fn expect_write(&self, mr: &MemoryRegion) {
        if !self.cfg.rx.markers {
            self.tags.expect_write(mr, HINT_MIN);
        }
    }

    /// How the tagged payloads received so far reached their registrations.
    pub fn placement_stats(&self) -> PlacementStats {
        self.placement
    }

    /// Feeds stream bytes; returns how many were consumed. Consumes everything once the
    /// connection is no longer established.
    pub fn handle_input(&mut self, buf: &[u8]) -> usize {
        let mut at = 0;
        while self.state == State::Established && at < buf.len() {
            // Whatever comes next is no longer the expected header (`end_direct` sets it
            // again at the end of a segment), unless it is only part of one.
            let follows = std::mem::take(&mut self.segment_follows);
            if self.direct.is_some() {
                at += self.feed_direct(&buf[at..]);
                continue;
            }
            if self.fast_paths && !self.cfg.rx.markers {
                if let Some(n) = self.fast_input(&buf[at..]) {
                    at += n;
                    continue;
                }
            }
            if let Some(n) = self.try_begin_direct(&buf[at..]) {
                if n == 0 {
                    self.segment_follows = follows;
                    break;
                }
                at += n;
                continue;
            }
            // The ULPDU is a slice of `buf` (or, with markers, of the scratch buffer, taken
            // only then: this runs for every FPDU).
            let markers = self.cfg.rx.markers;
            let mut scratch = if markers {
                std::mem::take(&mut self.rx_scratch)
            } else {
                Vec::new()
            };
            let step = match self.reader.next_in(&buf[at..], &mut scratch) {
                Ok(Some(fpdu)) => {
                    at += fpdu.consumed;
                    if let Err(fault) = self.process(fpdu.ulpdu) {
                        self.fail(fault);
                    }
                    true
                }
                Ok(None) => false,
                Err(e) => {
                    self.fail(e.into());
                    true
                }
            };
            if markers {
                self.rx_scratch = scratch;
            }
            if !step {
                // Part of an FPDU: still expected as it was.
                self.segment_follows = follows;
                break;
            }
        }
        if self.state != State::Established {
            return buf.len();
        }
        at
    }

    pub(super) fn finish_read(&mut self) {
        if let Some(p) = self.pending_reads.pop_front() {
            if p.size > 0 {
                self.reads_with_data -= 1;
            }
            if p.size >= HINT_MIN {
                self.large_reads -= 1;
            }
            // RFC 5040 section 5.5: the responder processed everything sent before the Read
            // Request before it answered, so those Sends and Writes are confirmed.
            self.confirm_before(p.confirms_upto);
            let status = if p.received == p.size {
                WcStatus::Success
            } else {
                WcStatus::BadResponse
            };
            match p.seq {
                Some(seq) => self.finish(seq, status),
                None => self.drain_inflight(),
            }
        }
    }

    pub(super) fn confirm_before(&mut self, upto: u64) {
        let n = (upto.saturating_sub(self.inflight_base) as usize).min(self.inflight.len());
        for e in self.inflight.iter_mut().take(n) {
            if e.status.is_none() && e.emitted.is_some() {
                e.status = Some(WcStatus::Success);
                self.unconfirmed -= 1;
            }
        }
    }

    /// Applies a received Terminate: the request it names (by the offending header it
    /// carries) gets `status`, the ones before it were processed, the rest are flushed.
    pub(super) fn apply_terminate(&mut self, term: &Terminate, status: WcStatus) {
        let named = term
            .ddp
            .as_ref()
            .and_then(|(_, raw)| DdpHeader::parse(raw).ok());
        let target = self.inflight.iter().position(|e| match (e.emitted, named) {
            (Some(Emitted::Send { msn }), Some(h)) => {
                matches!(h.buffer, Buffer::Untagged { qn: ddp::QN_SEND, msn: m, .. } if m == msn)
            }
            (Some(Emitted::Write { stag, to, len }), Some(h)) => match h.buffer {
                Buffer::Tagged { stag: s, to: t } => {
                    s == stag && t >= to && t <= to.wrapping_add(len)
                }
                _ => false,
            },
            _ => false,
        });
        let target = target.or_else(|| self.inflight.iter().position(|e| e.status.is_none()));
        if let Some(t) = target {
            for (i, e) in self.inflight.iter_mut().enumerate() {
                if e.status.is_none() {
                    if i < t && e.emitted.is_some() {
                        e.status = Some(WcStatus::Success);
                    } else if i == t {
                        e.status = Some(status);
                    }
                }
            }
        }
        self.flush(None);
    }

    /// Sends a Terminate for `fault` and enters the error state.
    pub(super) fn fail(&mut self, fault: Fault) {
        if self.state != State::Established {
            return;
        }
        crate::rpc::observe::metrics::protocol_error("rdma", "terminate_sent");
        tracing::warn!(
            target: crate::rpc::observe::CONNECTIONS,
            event = "protocol_error",
            transport = "rdma",
            kind = "terminate_sent",
            detail = ?fault.code,
            "terminating connection"
        );
        let mut term = Terminate::new(fault.code);
        term.ddp = fault.ddp;
        term.rdmap = fault.rdmap;
        // Terminate goes on untagged queue 2 (RFC 5040 section 5.4) and is the last message.
        let msn = self.tx_msn[2];
        self.tx_msn[2] = msn.wrapping_add(1);
        let hdr = self.untagged(Opcode::Terminate, ddp::QN_TERMINATE, msn, 0, true, 0);
        let mut head = Vec::new();
        hdr.emit(&mut head);
        term.emit(&mut head);
        self.writer.write(&[&head], &mut self.out_urgent);
        self.terminate_sent = Some(term);
        self.state = State::Error;
        if let (Some(status), Some(cur)) = (fault.recv_status, self.cur_recv.take()) {
            self.end_receive(cur.wr.wr_id, status);
        }
        self.flush(None);
    }

    pub(super) fn process(&mut self, ulpdu: &[u8]) -> std::result::Result<(), Fault> {
        let hdr = DdpHeader::parse(ulpdu)?;
        let hlen = hdr.len();
        let raw = &ulpdu[..hlen];
        let payload = &ulpdu[hlen..];
        let with_hdr = |code: TermCode| Fault {
            ddp: Some((ulpdu.len() as u16, raw.to_vec())),
            ..Fault::new(code)
        };
        // RFC 5041 section 7.2 / RFC 5040 section 7.1: versions must be the negotiated ones.
        if hdr.ddp_version != self.cfg.version {
            let code = match hdr.buffer {
                Buffer::Tagged { .. } => TermCode::new(TermLayer::Ddp, 1, 0x04),
                Buffer::Untagged { .. } => WireError::DdpVersion(hdr.ddp_version).terminate(),
            };
            return Err(with_hdr(code));
        }
        if hdr.rdmap_version != self.cfg.version {
            return Err(Fault::new(
                WireError::RdmapVersion(hdr.rdmap_version).terminate(),
            ));
        }
        match hdr.buffer {
            Buffer::Tagged { .. } => {
                let (region, offset, read_response) =
                    self.validate_tagged(&hdr, payload.len(), raw)?;
                if let (false, Some(region)) = (payload.is_empty(), region) {
                    region.with_mut_slice(|s| {
                        s[offset..offset + payload.len()].copy_from_slice(payload)
                    });
                    self.placement.copied += payload.len() as u64;
                }
                if read_response {
                    if let Some(p) = self.pending_reads.front_mut().filter(|p| p.size > 0) {
                        p.received += payload.len();
                    }
                    if hdr.last {
                        self.finish_read();
                    }
                }
                Ok(())
            }
            Buffer::Untagged {
                rsvd_ulp,
                qn,
                msn,
                mo,
            } => self.process_untagged(&hdr, rsvd_ulp, qn, msn, mo, payload, raw),
        }
    }

    /// Checks a tagged segment against the tag table (RDMA Write) or the pending RDMA Read
    /// (Read Response); returns the region, the offset in it, and whether it is a response.
    pub(super) fn validate_tagged(
        &mut self,
        hdr: &DdpHeader,
        len: usize,
        raw: &[u8],
    ) -> std::result::Result<(Option<MemoryRegion>, usize, bool), Fault> {
        let Buffer::Tagged { stag, to } = hdr.buffer else {
            return Err(Fault::new(TermCode::CATASTROPHIC));
        };
        let seg_len = (raw.len() + len) as u16;
        let with_hdr = |code: TermCode| Fault {
            ddp: Some((seg_len, raw.to_vec())),
            ..Fault::new(code)
        };
        match Opcode::from(hdr.opcode) {
            Opcode::RdmaWrite => {
                // RFC 5041 section 7.2 (tagged buffer errors) and RFC 5040 section 7.1 (access).
                let region = self
                    .tags
                    .lookup(stag)
                    .map_err(|_| with_hdr(TermCode::DDP_INVALID_STAG))?;
                if !region.access().contains(Access::REMOTE_WRITE) {
                    return Err(with_hdr(TermCode::ACCESS_RIGHTS));
                }
                let offset =
                    bounds(&region, to, len).ok_or_else(|| with_hdr(TermCode::DDP_BASE_BOUNDS))?;
                Ok((Some(region), offset, false))
            }
            Opcode::ReadResponse => {
                let p = self
                    .pending_reads
                    .front()
                    .ok_or_else(|| with_hdr(TermCode::new(TermLayer::Ddp, 1, 0x02)))?;
                if stag != p.sink_stag {
                    return Err(with_hdr(TermCode::DDP_INVALID_STAG));
                }
                // Linux siw (seen on 6.1) answers a zero-length RDMA Read that reaches it while
                // one of its Sends is going out with that Send's data: the response reuses the
                // Send's scatter list. A zero-length Read places nothing (our confirmation
                // probes are such Reads), so the bytes are read and dropped instead of ending
                // the connection with a bounds violation (RFC 5041 section 7.2).
                if p.size == 0 {
                    return Ok((None, 0, true));
                }
                let expected_to = p.sink_to.wrapping_add(p.received as u64);
                if to != expected_to || p.received + len > p.size {
                    return Err(with_hdr(TermCode::DDP_BASE_BOUNDS));
                }
                match &p.sink {
                    Some(sink) => Ok((Some(sink.mr.clone()), sink.offset + p.received, true)),
                    None => Ok((None, 0, true)),
                }
            }
            _ => Err(Fault::new(WireError::Opcode(hdr.opcode).terminate())),
        }
    }

    /// Completes the receive of [`Core::cur_recv`], whose Send's last segment (`msn`) is
    /// placed: invalidates `rsvd_ulp` first for a Send with Invalidate, and refuses with
    /// `with_hdr`'s Fault when that STag cannot be invalidated.
    pub(super) fn finish_recv(
        &mut self,
        opcode: Opcode,
        rsvd_ulp: u32,
        msn: u32,
        with_hdr: impl Fn(TermCode) -> Fault,
    ) -> std::result::Result<(), Fault> {
        let Some(cur) = self.cur_recv.take() else {
            return Err(Fault::new(TermCode::CATASTROPHIC));
        };
        self.rx_msn[0] = msn.wrapping_add(1);
        self.last_send_large = cur.placed >= HINT_MIN;
        let mut c = Completion::new(cur.wr.wr_id, WcOpcode::Recv, WcStatus::Success)
            .with_byte_len(cur.placed as u32)
            .with_solicited(matches!(
                opcode,
                Opcode::SendSolicited | Opcode::SendSolicitedInvalidate
            ));
        if matches!(
            opcode,
            Opcode::SendInvalidate | Opcode::SendSolicitedInvalidate
        ) {
            // RFC 5040 section 5.3: invalidate before the receive completes.
            if !self.tags.invalidate(rsvd_ulp) {
                self.cur_recv = Some(cur);
                return Err(Fault {
                    recv_status: Some(WcStatus::RemoteInvalidRequest),
                    ..with_hdr(TermCode::CANNOT_INVALIDATE)
                });
            }
            c = c.with_invalidated_rkey(rsvd_ulp);
        }
        self.cq.push_back(c);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn process_untagged(
        &mut self,
        hdr: &DdpHeader,
        rsvd_ulp: u32,
        qn: u32,
        msn: u32,
        mo: u32,
        payload: &[u8],
        raw: &[u8],
    ) -> std::result::Result<(), Fault> {
        let seg_len = (raw.len() + payload.len()) as u16;
        let with_hdr = |code: TermCode| Fault {
            ddp: Some((seg_len, raw.to_vec())),
            ..Fault::new(code)
        };
        let opcode = Opcode::from(hdr.opcode);
        let qi = match qn {
            ddp::QN_SEND | ddp::QN_READ_REQUEST | ddp::QN_TERMINATE => qn as usize,
            _ => return Err(with_hdr(WireError::QueueNumber(qn).terminate())),
        };
        let opcode_ok = match qn {
            ddp::QN_SEND => opcode.is_send(),
            ddp::QN_READ_REQUEST => opcode == Opcode::ReadRequest,
            _ => opcode == Opcode::Terminate,
        };
        if !opcode_ok {
            return Err(Fault::new(WireError::Opcode(hdr.opcode).terminate()));
        }
        // RFC 5041 section 5.3: segments of the expected message only (TCP keeps order).
        if msn != self.rx_msn[qi] {
            return Err(with_hdr(TermCode::DDP_MSN_RANGE));
        }
        match qn {
            ddp::QN_SEND => {
                if self.cur_recv.is_none() {
                    if mo != 0 {
                        return Err(with_hdr(TermCode::DDP_INVALID_MO));
                    }
                    let wr = self
                        .next_receive()
                        .ok_or_else(|| with_hdr(TermCode::DDP_NO_BUFFER))?;
                    self.cur_recv = Some(CurRecv { wr, placed: 0 });
                    self.last_send_seg = payload.len();
                }
                let cur = self.cur_recv.as_mut().expect("set above");
                if mo as usize != cur.placed {
                    return Err(with_hdr(TermCode::DDP_INVALID_MO));
                }
                if cur.placed + payload.len() > cur.wr.sge.len {
                    // RFC 5041 section 7.2: message too long for the buffer.
                    return Err(Fault {
                        recv_status: Some(WcStatus::LocalLengthError),
                        ..with_hdr(TermCode::DDP_TOO_LONG)
                    });
                }
                if !payload.is_empty() {
                    cur.wr
                        .sge
                        .mr
                        .write(cur.wr.sge.offset + cur.placed, payload)
                        .map_err(|_| Fault::new(TermCode::CATASTROPHIC))?;
                }
                cur.placed += payload.len();
                if hdr.last {
                    self.finish_recv(opcode, rsvd_ulp, msn, with_hdr)?;
                }
                Ok(())
            }
            ddp::QN_READ_REQUEST => {
                if !hdr.last || mo != 0 {
                    return Err(with_hdr(TermCode::DDP_INVALID_MO));
                }
                let req = ReadRequest::parse(payload).map_err(|e| Fault {
                    ddp: Some((seg_len, raw.to_vec())),
                    ..Fault::from(e)
                })?;
                let with_req = |code: TermCode| Fault {
                    rdmap: Some(payload.to_vec()),
                    ..Fault::new(code)
                };
                if self.inbound_reads.len() >= self.cfg.ird.max(1) {
                    return Err(with_req(TermCode::new(TermLayer::Rdmap, 2, 0xff)));
                }
                let size = req.size as usize;
                // RFC 5040 section 5.2: a zero-length Read is not validated.
                let (source, src_off) = if size == 0 {
                    (None, 0)
                } else {
                    let region = self
                        .tags
                        .lookup(req.src_stag)
                        .map_err(|_| with_req(TermCode::INVALID_STAG))?;
                    if !region.access().contains(Access::REMOTE_READ) {
                        return Err(with_req(TermCode::ACCESS_RIGHTS));
                    }
                    let off = bounds(&region, req.src_to, size)
                        .ok_or_else(|| with_req(TermCode::BASE_BOUNDS))?;
                    (Some(region), off)
                };
                self.rx_msn[1] = msn.wrapping_add(1);
                self.inbound_reads.push_back(InboundRead {
                    source,
                    src_off,
                    sink_stag: req.sink_stag,
                    sink_to: req.sink_to,
                    size,
                    sent: 0,
                });
                Ok(())
            }
            _ => {
                let term = Terminate::parse(payload)
                    .unwrap_or_else(|_| Terminate::new(TermCode::new(TermLayer::Llp, 0, 0x04)));
                crate::rpc::observe::metrics::protocol_error("rdma", "terminate_received");
                tracing::warn!(
                    target: crate::rpc::observe::CONNECTIONS,
                    event = "protocol_error",
                    transport = "rdma",
                    kind = "terminate_received",
                    detail = ?term.code,
                    "peer terminated the connection"
                );
                let status = status_of(term.code);
                self.state = State::Error;
                self.apply_terminate(&term, status);
                self.terminate_received = Some(term);
                Ok(())
            }
        }
    }
}

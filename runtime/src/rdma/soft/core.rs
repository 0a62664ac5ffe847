//! The sans-IO connection core: RDMAP over DDP over MPA in Full Operation.
//!
//! Inputs: [`Core::post_send`], [`Core::post_recv`], stream bytes ([`Core::handle_input`]),
//! [`Core::peer_closed`], [`Core::close`]. Outputs: stream bytes ([`Core::poll_transmit`]),
//! completions ([`Core::poll_completion`]), and [`Core::state`]. No sockets, no clocks; the
//! driver ([`super::driver`]) moves bytes between these calls and a TCP stream.
//!
//! Every field from the wire is validated before it touches memory; an invalid segment makes
//! the core emit a Terminate (RFC 5040 section 4.8) with the layer, type and code of the error,
//! and enter the error state, which flushes all outstanding work.

use std::collections::VecDeque;
use std::sync::Arc;

use super::tags::TagTable;
use super::wire::ddp::{self, Buffer, DdpHeader};
use super::wire::mpa::{FpduReader, FpduWriter, Framing};
use super::wire::rdmap::{Opcode, ReadRequest, TermCode, TermLayer, Terminate};
use super::wire::WireError;
use crate::rdma::{
    Access, Completion, Error, MemoryRegion, RecvWr, Result, SendOp, SendWr, Sge, WcOpcode,
    WcStatus,
};

/// Stop filling the transmit buffer beyond this many bytes per call.
const TX_BATCH: usize = 256 * 1024;

/// Parameters of a core, fixed at connection establishment.
#[derive(Clone, Copy, Debug)]
pub struct CoreConfig {
    /// DDP and RDMAP version (0 RDMAC, 1 IETF).
    pub version: u8,
    /// Framing of the data this side sends.
    pub tx: Framing,
    /// Framing of the data this side receives.
    pub rx: Framing,
    /// Largest ULPDU (DDP segment) sent and accepted (RFC 5044 MULPDU).
    pub mulpdu: usize,
    /// Send queue depth.
    pub sq_depth: usize,
    /// Receive queue depth.
    pub rq_depth: usize,
    /// Outstanding outbound RDMA Reads.
    pub ord: usize,
    /// Outstanding inbound RDMA Reads accepted.
    pub ird: usize,
    /// Complete Sends and RDMA Writes only once the peer has processed them (confirmed by a
    /// later RDMA Read Response, sending a zero-length RDMA Read as a probe when needed), so
    /// a refusal by the peer shows up in the request's own completion, as on verbs. Without
    /// it they complete when handed to TCP (RFC 5040 section 5) and a refusal only
    /// terminates the connection.
    pub confirm: bool,
}

/// Connection state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Full Operation.
    Established,
    /// Closed in an orderly way (locally or by the peer).
    Closed,
    /// Terminated after an error (sent or received Terminate, bad stream).
    Error,
}

/// An error found in an incoming segment: the Terminate to send and the local effect.
#[derive(Debug)]
struct Fault {
    code: TermCode,
    /// Length and header of the offending DDP segment (D flag).
    ddp: Option<(u16, Vec<u8>)>,
    /// The offending RDMA Read Request header (R flag).
    rdmap: Option<Vec<u8>>,
    /// Status for the receive being filled, if the error concerns it.
    recv_status: Option<WcStatus>,
}

impl Fault {
    fn new(code: TermCode) -> Fault {
        Fault {
            code,
            ddp: None,
            rdmap: None,
            recv_status: None,
        }
    }
}

impl From<WireError> for Fault {
    fn from(e: WireError) -> Fault {
        Fault::new(e.terminate())
    }
}

struct Inflight {
    wr_id: u64,
    opcode: WcOpcode,
    byte_len: u32,
    status: Option<WcStatus>,
    /// Fully handed to TCP, waiting for confirmation.
    emitted: Option<Emitted>,
}

/// What identifies an emitted request in a Terminate's copy of the offending header.
#[derive(Clone, Copy)]
enum Emitted {
    Send { msn: u32 },
    Write { stag: u32, to: u64, len: u64 },
}

struct TxJob {
    seq: u64,
    wr: SendWr,
    msn: u32,
    sent: usize,
    total: usize,
}

struct PendingRead {
    /// The user's request, or `None` for a confirmation probe.
    seq: Option<u64>,
    /// Emitted requests with a lower sequence number are confirmed by this read's response.
    confirms_upto: u64,
    sink: Option<Sge>,
    sink_stag: u32,
    sink_to: u64,
    size: usize,
    received: usize,
}

struct InboundRead {
    source: Option<MemoryRegion>,
    src_off: usize,
    sink_stag: u32,
    sink_to: u64,
    size: usize,
    sent: usize,
}

struct CurRecv {
    wr: RecvWr,
    placed: usize,
}

/// Where the payload of the FPDU being received goes when the driver places it straight from
/// the socket (tagged segments without CRC and markers).
#[derive(Debug, Clone)]
pub struct DirectPlacement {
    /// Target registration.
    pub region: MemoryRegion,
    /// Offset of the first byte.
    pub offset: usize,
    /// Payload bytes still to read from the stream.
    pub remaining: usize,
    /// Pad bytes after the payload.
    pub pad: usize,
}

/// The connection core. See the module documentation for the call contract.
pub struct Core {
    cfg: CoreConfig,
    tags: Arc<TagTable>,
    writer: FpduWriter,
    reader: FpduReader,
    state: State,
    sq: VecDeque<SendWr>,
    cur_tx: Option<TxJob>,
    inflight: VecDeque<Inflight>,
    inflight_base: u64,
    pending_reads: VecDeque<PendingRead>,
    inbound_reads: VecDeque<InboundRead>,
    tx_msn: [u32; 3],
    rx_msn: [u32; 3],
    rq: VecDeque<RecvWr>,
    cur_recv: Option<CurRecv>,
    cq: VecDeque<Completion>,
    out_urgent: Vec<u8>,
    terminate_received: Option<Terminate>,
    terminate_sent: Option<Terminate>,
    direct: Option<DirectState>,
    scratch: Vec<u8>,
    unconfirmed: usize,
}

/// Progress of a direct placement.
struct DirectState {
    place: DirectPlacement,
    last: bool,
    read_response: bool,
}

impl Core {
    /// A core in Full Operation.
    pub fn new(cfg: CoreConfig, tags: Arc<TagTable>) -> Core {
        Core {
            writer: FpduWriter::new(cfg.tx),
            reader: FpduReader::new(cfg.rx, cfg.mulpdu),
            cfg,
            tags,
            state: State::Established,
            sq: VecDeque::new(),
            cur_tx: None,
            inflight: VecDeque::new(),
            inflight_base: 0,
            pending_reads: VecDeque::new(),
            inbound_reads: VecDeque::new(),
            // RFC 5041 section 5.1: the MSN of each queue starts at 1.
            tx_msn: [1; 3],
            rx_msn: [1; 3],
            rq: VecDeque::new(),
            cur_recv: None,
            cq: VecDeque::new(),
            out_urgent: Vec::new(),
            terminate_received: None,
            terminate_sent: None,
            direct: None,
            scratch: Vec::new(),
            unconfirmed: 0,
        }
    }

    /// The connection state.
    pub fn state(&self) -> State {
        self.state
    }

    /// The Terminate received from the peer, if any.
    pub fn terminate_received(&self) -> Option<&Terminate> {
        self.terminate_received.as_ref()
    }

    /// The Terminate sent to the peer, if any.
    pub fn terminate_sent(&self) -> Option<&Terminate> {
        self.terminate_sent.as_ref()
    }

    fn check_sge(&self, sge: &Sge, need: Access) -> Result<()> {
        if !self.tags.owns(&sge.mr) {
            return Err(Error::InvalidWorkRequest(
                "the region was registered on another connection".into(),
            ));
        }
        if !sge.mr.access().contains(need) {
            return Err(Error::InvalidWorkRequest(format!(
                "the region lacks {need:?} access"
            )));
        }
        sge.mr.checked_range(sge.offset, sge.len)?;
        Ok(())
    }

    /// Queues a send-queue request.
    pub fn post_send(&mut self, wr: SendWr) -> Result<()> {
        if self.state != State::Established {
            return Err(Error::Closed);
        }
        let outstanding = self.sq.len() + self.inflight.len();
        if outstanding >= self.cfg.sq_depth {
            return Err(Error::QueueFull {
                queue: "send",
                depth: self.cfg.sq_depth,
            });
        }
        match &wr.op {
            SendOp::Send { sg, .. } | SendOp::RdmaWrite { sg, .. } => {
                for sge in sg {
                    self.check_sge(sge, Access::NONE)?;
                }
                if wr.byte_len() > u32::MAX as u64 {
                    return Err(Error::InvalidWorkRequest(
                        "message longer than 4 GiB".into(),
                    ));
                }
            }
            SendOp::RdmaRead { sink, .. } => self.check_sge(sink, Access::LOCAL_WRITE)?,
            SendOp::LocalInvalidate { .. } => {}
        }
        self.sq.push_back(wr);
        Ok(())
    }

    /// Queues a receive buffer.
    pub fn post_recv(&mut self, wr: RecvWr) -> Result<()> {
        if self.state != State::Established {
            return Err(Error::Closed);
        }
        if self.rq.len() + self.cur_recv.is_some() as usize >= self.cfg.rq_depth {
            return Err(Error::QueueFull {
                queue: "receive",
                depth: self.cfg.rq_depth,
            });
        }
        self.check_sge(&wr.sge, Access::LOCAL_WRITE)?;
        self.rq.push_back(wr);
        Ok(())
    }

    /// The next completion.
    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.cq.pop_front()
    }

    /// True when completions are waiting.
    pub fn has_completions(&self) -> bool {
        !self.cq.is_empty()
    }

    /// True when [`Core::poll_transmit`] has something to emit.
    pub fn wants_transmit(&self) -> bool {
        if !self.out_urgent.is_empty() {
            return true;
        }
        if self.state != State::Established {
            return false;
        }
        !self.inbound_reads.is_empty()
            || self.cur_tx.is_some()
            || self.needs_probe()
            || match self.sq.front() {
                Some(SendWr {
                    op: SendOp::RdmaRead { .. },
                    ..
                }) => self.pending_reads.len() < self.cfg.ord.max(1),
                Some(_) => true,
                None => false,
            }
    }

    /// Closes the connection in an orderly way: everything outstanding is flushed.
    pub fn close(&mut self) {
        if self.state == State::Established {
            self.state = State::Closed;
        }
        self.flush(None);
    }

    /// The peer closed its stream.
    pub fn peer_closed(&mut self) {
        self.close();
    }

    fn seq_entry(&mut self, seq: u64) -> Option<&mut Inflight> {
        let idx = seq.checked_sub(self.inflight_base)? as usize;
        self.inflight.get_mut(idx)
    }

    fn push_inflight(&mut self, wr_id: u64, opcode: WcOpcode, byte_len: u32) -> u64 {
        let seq = self.inflight_base + self.inflight.len() as u64;
        self.inflight.push_back(Inflight {
            wr_id,
            opcode,
            byte_len,
            status: None,
            emitted: None,
        });
        seq
    }

    fn finish(&mut self, seq: u64, status: WcStatus) {
        if let Some(e) = self.seq_entry(seq) {
            if e.status.is_none() {
                e.status = Some(status);
            }
        }
        self.drain_inflight();
    }

    /// Moves finished send-queue requests to the completion queue, in posting order.
    fn drain_inflight(&mut self) {
        while let Some(front) = self.inflight.front() {
            let Some(status) = front.status else { break };
            let e = self.inflight.pop_front().expect("front exists");
            self.inflight_base += 1;
            let len = if status == WcStatus::Success {
                e.byte_len
            } else {
                0
            };
            self.cq
                .push_back(Completion::new(e.wr_id, e.opcode, status).with_byte_len(len));
        }
    }

    /// Flushes every outstanding request. `first_error` goes to the oldest unfinished
    /// send-queue request (the one a received Terminate refers to).
    fn flush(&mut self, first_error: Option<WcStatus>) {
        let mut first_error = first_error;
        if let Some(cur) = self.cur_recv.take() {
            self.cq.push_back(Completion::new(
                cur.wr.wr_id,
                WcOpcode::Recv,
                WcStatus::Flushed,
            ));
        }
        for wr in self.rq.drain(..) {
            self.cq
                .push_back(Completion::new(wr.wr_id, WcOpcode::Recv, WcStatus::Flushed));
        }
        for e in self.inflight.iter_mut() {
            if e.status.is_none() {
                e.status = Some(first_error.take().unwrap_or(WcStatus::Flushed));
            }
        }
        self.cur_tx = None;
        self.unconfirmed = 0;
        self.pending_reads.clear();
        self.inbound_reads.clear();
        self.direct = None;
        self.drain_inflight();
        for wr in self.sq.drain(..) {
            let status = first_error.take().unwrap_or(WcStatus::Flushed);
            self.cq
                .push_back(Completion::new(wr.wr_id, opcode_of(&wr.op), status));
        }
    }

    fn emit(&mut self, hdr: &DdpHeader, payload: &[&[u8]], out: &mut Vec<u8>) {
        let mut head = Vec::with_capacity(ddp::UNTAGGED_LEN + 28);
        hdr.emit(&mut head);
        let mut parts: Vec<&[u8]> = Vec::with_capacity(1 + payload.len());
        parts.push(&head);
        parts.extend_from_slice(payload);
        self.writer.write(&parts, out);
    }

    fn untagged(
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

    fn tagged(&self, opcode: Opcode, stag: u32, to: u64, last: bool) -> DdpHeader {
        DdpHeader {
            last,
            ddp_version: self.cfg.version,
            rdmap_version: self.cfg.version,
            opcode: opcode.into(),
            reserved: 0,
            buffer: Buffer::Tagged { stag, to },
        }
    }

    /// Appends wire bytes to `out` (up to a batch). Returns true when the stream should be
    /// shut down afterwards (closed or terminated).
    pub fn poll_transmit(&mut self, out: &mut Vec<u8>) -> bool {
        out.append(&mut self.out_urgent);
        while self.state == State::Established && out.len() < TX_BATCH {
            if !self.inbound_reads.is_empty() {
                self.emit_read_response(out);
                continue;
            }
            if self.cur_tx.is_none() && !self.start_next(out) {
                if self.needs_probe() {
                    self.emit_read_request(None, None, 0, 0, 0, 0, out);
                }
                break;
            }
            if self.cur_tx.is_some() {
                self.emit_segment(out);
            }
        }
        self.state != State::Established
    }

    /// Starts the next send-queue request; false when nothing can start.
    fn start_next(&mut self, out: &mut Vec<u8>) -> bool {
        let Some(front) = self.sq.front() else {
            return false;
        };
        match &front.op {
            SendOp::RdmaRead { .. } if self.pending_reads.len() >= self.cfg.ord.max(1) => false,
            _ => {
                let wr = self.sq.pop_front().expect("front exists");
                let byte_len = wr.byte_len() as u32;
                match wr.op {
                    SendOp::Send { .. } | SendOp::RdmaWrite { .. } => {
                        let opcode = opcode_of(&wr.op);
                        let seq = self.push_inflight(wr.wr_id, opcode, byte_len);
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
                            wr,
                        });
                    }
                    SendOp::RdmaRead { sink, remote } => {
                        let seq = self.push_inflight(wr.wr_id, WcOpcode::RdmaRead, byte_len);
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
                    SendOp::LocalInvalidate { rkey } => {
                        let seq = self.push_inflight(wr.wr_id, WcOpcode::LocalInvalidate, 0);
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
        }
    }

    /// True when emitted Sends/Writes wait for confirmation and no RDMA Read is outstanding
    /// that would confirm them.
    fn needs_probe(&self) -> bool {
        self.cfg.confirm
            && self.unconfirmed > 0
            && self.pending_reads.is_empty()
            && self.cur_tx.is_none()
            && self.sq.is_empty()
    }

    /// Emits an RDMA Read Request (RFC 5040 section 4.4); `seq`/`sink` are `None` for a
    /// zero-length confirmation probe.
    #[allow(clippy::too_many_arguments)]
    fn emit_read_request(
        &mut self,
        seq: Option<u64>,
        sink: Option<Sge>,
        sink_stag: u32,
        sink_to: u64,
        src_stag: u32,
        src_to: u64,
        out: &mut Vec<u8>,
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
        let mut body = Vec::with_capacity(28);
        req.emit(&mut body);
        self.emit(&hdr, &[&body], out);
        let confirms_upto = self.inflight_base + self.inflight.len() as u64;
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

    /// Emits the next segment of the current Send or RDMA Write.
    fn emit_segment(&mut self, out: &mut Vec<u8>) {
        let Some(job) = self.cur_tx.take() else {
            return;
        };
        let (hdr_len, sg) = match &job.wr.op {
            SendOp::Send { sg, .. } => (ddp::UNTAGGED_LEN, sg),
            SendOp::RdmaWrite { sg, .. } => (ddp::TAGGED_LEN, sg),
            _ => return,
        };
        let room = self.cfg.mulpdu - hdr_len;
        let n = room.min(job.total - job.sent);
        let last = job.sent + n == job.total;
        let hdr = match &job.wr.op {
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
                self.untagged(
                    opcode,
                    ddp::QN_SEND,
                    job.msn,
                    job.sent as u32,
                    last,
                    invalidate.unwrap_or(0),
                )
            }
            SendOp::RdmaWrite { remote, .. } => self.tagged(
                Opcode::RdmaWrite,
                remote.rkey,
                remote.addr.wrapping_add(job.sent as u64),
                last,
            ),
            _ => return,
        };
        // Gather `n` bytes starting at `job.sent` across the elements.
        let single = locate_single(sg, job.sent, n);
        match single {
            Some((mr, off)) => {
                let mut head = Vec::with_capacity(hdr_len);
                hdr.emit(&mut head);
                let writer = &mut self.writer;
                mr.with_slice(|s| writer.write(&[&head, &s[off..off + n]], out));
            }
            None => {
                let mut buf = std::mem::take(&mut self.scratch);
                buf.clear();
                gather(sg, job.sent, n, &mut buf);
                self.emit(&hdr, &[&buf], out);
                self.scratch = buf;
            }
        }
        let mut job = job;
        job.sent += n;
        if last {
            if self.cfg.confirm {
                let emitted = match &job.wr.op {
                    SendOp::RdmaWrite { remote, .. } => Emitted::Write {
                        stag: remote.rkey,
                        to: remote.addr,
                        len: job.total as u64,
                    },
                    _ => Emitted::Send { msn: job.msn },
                };
                if let Some(e) = self.seq_entry(job.seq) {
                    e.emitted = Some(emitted);
                }
                self.unconfirmed += 1;
            } else {
                // RFC 5040 section 5: a Send or Write completes locally once handed to the LLP.
                self.finish(job.seq, WcStatus::Success);
            }
        } else {
            self.cur_tx = Some(job);
        }
    }

    fn emit_read_response(&mut self, out: &mut Vec<u8>) {
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
        let mut head = Vec::with_capacity(ddp::TAGGED_LEN);
        hdr.emit(&mut head);
        match &r.source {
            Some(mr) => {
                let start = r.src_off + r.sent;
                let writer = &mut self.writer;
                mr.with_slice(|s| writer.write(&[&head, &s[start..start + n]], out));
            }
            None => self.writer.write(&[&head], out),
        }
        r.sent += n;
        if !last {
            self.inbound_reads.push_front(r);
        }
    }

    /// What the driver may place straight from the stream, if the core is in the middle of a
    /// directly placed tagged segment.
    pub fn direct_placement(&self) -> Option<&DirectPlacement> {
        self.direct.as_ref().map(|d| &d.place)
    }

    /// Feeds stream bytes; returns how many were consumed. Consumes everything once the
    /// connection is no longer established.
    pub fn handle_input(&mut self, buf: &[u8]) -> usize {
        let mut at = 0;
        while self.state == State::Established && at < buf.len() {
            if self.direct.is_some() {
                at += self.feed_direct(&buf[at..]);
                continue;
            }
            if let Some(n) = self.try_begin_direct(&buf[at..]) {
                if n == 0 {
                    break;
                }
                at += n;
                continue;
            }
            match self.reader.next(&buf[at..]) {
                Ok(Some(fpdu)) => {
                    at += fpdu.consumed;
                    if let Err(fault) = self.process(&fpdu.ulpdu) {
                        self.fail(fault);
                    }
                }
                Ok(None) => break,
                Err(e) => self.fail(e.into()),
            }
        }
        if self.state != State::Established {
            return buf.len();
        }
        at
    }

    /// Begins a direct placement when `buf` starts with the header of a tagged segment and the
    /// receive direction has neither CRC nor markers. `Some(0)`: need more bytes; `None`: not a
    /// direct candidate (use the FPDU path).
    fn try_begin_direct(&mut self, buf: &[u8]) -> Option<usize> {
        if self.cfg.rx.crc || self.cfg.rx.markers {
            return None;
        }
        if buf.len() < 3 {
            return None;
        }
        if buf[2] & 0x80 == 0 {
            return None;
        }
        let head_len = 2 + ddp::TAGGED_LEN;
        if buf.len() < head_len {
            return None;
        }
        let ulpdu_len = u16::from_be_bytes([buf[0], buf[1]]) as usize;
        if ulpdu_len > self.cfg.mulpdu || ulpdu_len < ddp::TAGGED_LEN {
            return None;
        }
        let payload = ulpdu_len - ddp::TAGGED_LEN;
        // Small segments are cheaper through the FPDU path.
        if payload < 4096 {
            return None;
        }
        let hdr = match DdpHeader::parse(&buf[2..head_len]) {
            Ok(h) => h,
            Err(_) => return None,
        };
        let raw = buf[2..head_len].to_vec();
        match self.validate_tagged(&hdr, payload, &raw) {
            Ok((Some(region), offset, read_response)) => {
                self.reader.advance(head_len);
                self.direct = Some(DirectState {
                    place: DirectPlacement {
                        region,
                        offset,
                        remaining: payload,
                        pad: super::wire::mpa::pad_len(ulpdu_len),
                    },
                    last: hdr.last,
                    read_response,
                });
                Some(head_len)
            }
            Ok((None, ..)) => None,
            Err(fault) => {
                self.fail(fault);
                Some(head_len)
            }
        }
    }

    /// Copies buffered payload bytes of a direct placement; returns bytes consumed.
    fn feed_direct(&mut self, buf: &[u8]) -> usize {
        let Some(d) = self.direct.as_mut() else {
            return 0;
        };
        let n = d.place.remaining.min(buf.len());
        if n > 0 {
            let off = d.place.offset;
            d.place
                .region
                .with_mut_slice(|s| s[off..off + n].copy_from_slice(&buf[..n]));
        }
        let mut used = n;
        self.placed_direct_inner(n);
        // Pad bytes after the payload.
        if let Some(d) = self.direct.as_mut() {
            if d.place.remaining == 0 {
                let pad = d.place.pad.min(buf.len() - used);
                d.place.pad -= pad;
                used += pad;
                self.reader.advance(pad);
                if d.place.pad == 0 {
                    self.end_direct();
                }
            }
        }
        used
    }

    /// Records `n` payload bytes the driver placed straight from the socket into the region
    /// of [`Core::direct_placement`].
    pub fn placed_direct(&mut self, n: usize) {
        self.placed_direct_inner(n);
        if let Some(d) = &self.direct {
            if d.place.remaining == 0 && d.place.pad == 0 {
                self.end_direct();
            }
        }
    }

    fn placed_direct_inner(&mut self, n: usize) {
        if let Some(d) = self.direct.as_mut() {
            d.place.remaining -= n;
            d.place.offset += n;
            self.reader.advance(n);
            if d.read_response {
                if let Some(p) = self.pending_reads.front_mut() {
                    p.received += n;
                }
            }
        }
    }

    fn end_direct(&mut self) {
        if let Some(d) = self.direct.take() {
            if d.read_response && d.last {
                self.finish_read();
            }
        }
    }

    fn finish_read(&mut self) {
        if let Some(p) = self.pending_reads.pop_front() {
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

    fn confirm_before(&mut self, upto: u64) {
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
    fn apply_terminate(&mut self, term: &Terminate, status: WcStatus) {
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
    fn fail(&mut self, fault: Fault) {
        if self.state != State::Established {
            return;
        }
        tracing::warn!(code = ?fault.code, "terminating connection");
        let mut term = Terminate::new(fault.code);
        term.ddp = fault.ddp;
        term.rdmap = fault.rdmap;
        // Terminate goes on untagged queue 2 (RFC 5040 section 5.4) and is the last message.
        let msn = self.tx_msn[2];
        self.tx_msn[2] = msn.wrapping_add(1);
        let hdr = self.untagged(Opcode::Terminate, ddp::QN_TERMINATE, msn, 0, true, 0);
        let mut body = Vec::new();
        term.emit(&mut body);
        let mut out = std::mem::take(&mut self.out_urgent);
        self.emit(&hdr, &[&body], &mut out);
        self.out_urgent = out;
        self.terminate_sent = Some(term);
        self.state = State::Error;
        if let (Some(status), Some(cur)) = (fault.recv_status, self.cur_recv.take()) {
            self.cq
                .push_back(Completion::new(cur.wr.wr_id, WcOpcode::Recv, status));
        }
        self.flush(None);
    }

    fn process(&mut self, ulpdu: &[u8]) -> std::result::Result<(), Fault> {
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
                }
                if read_response {
                    if let Some(p) = self.pending_reads.front_mut() {
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
    fn validate_tagged(
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

    #[allow(clippy::too_many_arguments)]
    fn process_untagged(
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
            ddp::QN_SEND => matches!(
                opcode,
                Opcode::Send
                    | Opcode::SendInvalidate
                    | Opcode::SendSolicited
                    | Opcode::SendSolicitedInvalidate
            ),
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
                        .rq
                        .pop_front()
                        .ok_or_else(|| with_hdr(TermCode::DDP_NO_BUFFER))?;
                    self.cur_recv = Some(CurRecv { wr, placed: 0 });
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
                    let cur = self.cur_recv.take().expect("set above");
                    self.rx_msn[0] = msn.wrapping_add(1);
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
                tracing::warn!(code = ?term.code, "peer terminated the connection");
                let status = status_of(term.code);
                self.state = State::Error;
                self.apply_terminate(&term, status);
                self.terminate_received = Some(term);
                Ok(())
            }
        }
    }
}

/// The offset of `[to, to + len)` inside `region`, if it lies inside.
fn bounds(region: &MemoryRegion, to: u64, len: usize) -> Option<usize> {
    let off = to.checked_sub(region.addr())?;
    let end = off.checked_add(len as u64)?;
    (end <= region.len() as u64).then_some(off as usize)
}

/// The completion status a requester reports for a Terminate it received.
fn status_of(code: TermCode) -> WcStatus {
    match (code.layer, code.etype) {
        (TermLayer::Rdmap, 1) | (TermLayer::Ddp, 1) => WcStatus::RemoteAccessError,
        (TermLayer::Rdmap, 2) | (TermLayer::Ddp, 2) => WcStatus::RemoteOperationError,
        _ => WcStatus::RemoteOperationError,
    }
}

fn opcode_of(op: &SendOp) -> WcOpcode {
    match op {
        SendOp::Send { .. } => WcOpcode::Send,
        SendOp::RdmaWrite { .. } => WcOpcode::RdmaWrite,
        SendOp::RdmaRead { .. } => WcOpcode::RdmaRead,
        SendOp::LocalInvalidate { .. } => WcOpcode::LocalInvalidate,
    }
}

/// The element and offset holding `start..start + n` when one element holds it all.
fn locate_single(sg: &[Sge], start: usize, n: usize) -> Option<(&MemoryRegion, usize)> {
    let mut base = 0;
    for sge in sg {
        if start >= base && start + n <= base + sge.len {
            return Some((&sge.mr, sge.offset + (start - base)));
        }
        base += sge.len;
    }
    if n == 0 {
        return sg.first().map(|s| (&s.mr, s.offset));
    }
    None
}

/// Appends `n` bytes starting at `start` of the gathered elements to `out`.
fn gather(sg: &[Sge], start: usize, n: usize, out: &mut Vec<u8>) {
    let mut base = 0;
    let end = start + n;
    for sge in sg {
        let (lo, hi) = (base.max(start), (base + sge.len).min(end));
        if lo < hi {
            let (a, b) = (sge.offset + lo - base, sge.offset + hi - base);
            sge.mr.with_slice(|s| out.extend_from_slice(&s[a..b]));
        }
        base += sge.len;
    }
}

#[cfg(test)]
mod tests;

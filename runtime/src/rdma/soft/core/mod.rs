//! The sans-IO connection core: RDMAP over DDP over MPA in Full Operation.
//!
//! Inputs: [`Core::post_send`], [`Core::post_recv`], stream bytes ([`Core::handle_input`]),
//! [`Core::peer_closed`], [`Core::close`], and how far the driver got writing
//! ([`Core::transmitted`]). Outputs: stream bytes ([`Core::poll_transmit`] into a
//! [`Transmit`], which refers to registered memory instead of copying payloads), completions
//! ([`Core::poll_completion`]), and [`Core::state`]. No sockets, no clocks; the driver
//! (`soft::driver`) moves bytes between these calls and a TCP stream.
//!
//! Every field from the wire is validated before it touches memory; an invalid segment makes
//! the core emit a Terminate (RFC 5040 section 4.8) with the layer, type and code of the error,
//! and enter the error state, which flushes all outstanding work. Under CRC, a large tagged
//! segment's payload is placed as it arrives and the FPDU's CRC checked at its end, as Linux
//! siw does (see `direct::try_begin_direct`); every other FPDU is checked before it is used.

use std::collections::VecDeque;
use std::sync::Arc;

use super::shared_receive::SharedHolder;
use super::tags::TagTable;
use super::wire::crc;
use super::wire::ddp::{self, Buffer, DdpHeader};
use super::wire::mpa::{self, FpduReader, FpduWriter, Framing};
use super::wire::rdmap::{self, Opcode, ReadRequest, TermCode, TermLayer, Terminate};
use super::wire::WireError;
use crate::rdma::{
    Access, Completion, Error, MemoryRegion, RecvWr, Result, SendOp, SendWr, Sge, WcOpcode,
    WcStatus,
};

/// Stop filling the transmit queue beyond this many unwritten bytes when FPDUs carry no CRC:
/// about one FPDU (MULPDU <= 65535) per write, so that each write hands TCP an FPDU as soon as
/// it is queued, and a write of smaller FPDUs stays within one 64 KiB loopback segment (at
/// 64 KiB, 16 KiB RDMA Writes went out 65,632 bytes a write: a full segment and a 149-byte
/// one each time). A message's short last segment still joins the batch it follows
/// (`BATCH_TAIL` in `tx.rs`). Measurements: docs/bench/round_trip_64k.md.
const TX_BATCH: usize = 48 * 1024;

/// The same with MPA CRCs, where the batch is also the stretch of CRC work done between two
/// writes: 64 KiB measured 0.99x of 256 KiB there, in one process and in two (7 of 8 runs
/// lost), so CRC keeps the larger batch.
const TX_BATCH_CRC: usize = 256 * 1024;

/// The same while RDMA Read Responses are due: the receive task that takes a Read Request
/// writes its response itself as far as the socket takes it (`driver`: `transmit_now`), and
/// hands less over to the transmit task. 1 MiB RDMA Reads without CRC moved 1.2-1.4x as much
/// as with 256 KiB, with CRC as much; larger batches for Sends and Writes, which the posting
/// thread writes, measured 10-20 % slower (alternating rounds, `benches/rdma_soft.rs`, 2-vCPU
/// VM).
const READ_RESPONSE_BATCH: usize = 1024 * 1024;

/// Parameters of a core, fixed at connection establishment.
#[derive(Clone, Copy, Debug)]
pub struct CoreConfig {
    /// DDP and RDMAP version (0 RDMAC, 1 IETF).
    pub version: u8,
    /// Framing of the data this side sends.
    pub tx: Framing,
    /// Framing of the data this side receives.
    pub rx: Framing,
    /// Largest ULPDU (DDP segment) sent (RFC 5044 MULPDU). Any ULPDU length the 16-bit field
    /// can carry is accepted on receive: MPA does not negotiate the peer's MULPDU.
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
    /// Payloads of Sends, RDMA Writes and Read Responses at least this long are gathered
    /// from their registrations when written ([`Transmit`]); shorter ones are copied into the
    /// transmit queue ([`DEFAULT_GATHER_MIN`]). Under markers everything is copied.
    pub gather_min: usize,
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
    /// Completes with a completion on success too ([`SendWr::unsignaled`]).
    signaled: bool,
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

/// Progress of the Send or RDMA Write at the front of the send queue.
struct TxJob {
    seq: u64,
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
/// the socket (large tagged segments, without markers).
#[derive(Debug, Clone)]
pub struct DirectPlacement {
    /// Target registration.
    pub region: MemoryRegion,
    /// Offset of the first byte.
    pub offset: usize,
    /// Payload bytes still to read from the stream.
    pub remaining: usize,
    /// Stream bytes after the payload up to the next FPDU: the pad and the CRC field (checked
    /// once in when CRCs are in use).
    pub trailer: usize,
    /// More segments of the same message follow (the DDP Last flag is clear): the next FPDU
    /// is most likely another large tagged one.
    pub more: bool,
    /// More large tagged data is expected after this message (another RDMA Write the consumer
    /// announced, the response to another RDMA Read of this side): the next FPDU is most
    /// likely a Send, and one of those behind it.
    pub expect_more: bool,
    /// Stream bytes past the trailer a read takes when more of the message follows
    /// ([`DirectPlacement::more`]): the next segment's header (the MPA length and the DDP
    /// header), and for a Send some of what comes after it (see `SEND_TAIL`).
    pub read_after: usize,
}

/// How the tagged payloads a connection received (RDMA Writes into its registrations, the
/// responses to its RDMA Reads) reached their registrations, in bytes.
///
/// Large segments are meant to go from the socket straight into place; a share of `copied`
/// that grows with the transfer size is a receiver copying what it should place. Small
/// segments (under 4 KiB) and everything under MPA markers are always copied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlacementStats {
    /// Bytes read from the socket straight into their registration.
    pub direct: u64,
    /// Bytes read into the receive buffer first and copied from there.
    pub copied: u64,
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
    /// Receives come from a shared queue instead of `rq` ([`Core::use_shared`]).
    shared: Option<shared::SharedRx>,
    cur_recv: Option<CurRecv>,
    cq: VecDeque<Completion>,
    out_urgent: Vec<u8>,
    terminate_received: Option<Terminate>,
    terminate_sent: Option<Terminate>,
    direct: Option<DirectState>,
    /// The last input ended a directly placed segment that was not its message's last: the
    /// stream's next bytes are most likely the next segment's header (see
    /// [`Core::next_read_hint`]).
    segment_follows: bool,
    /// What [`Core::segment_follows`] expects to read: the placement's
    /// [`DirectPlacement::read_after`].
    follow_read: usize,
    /// The last Send received was of at least `HINT_MIN` bytes: the next one, if the receive
    /// at the head of the queue is as large, is expected header first to be placed directly.
    last_send_large: bool,
    /// Payload bytes of the first segment of the last Send received: how much of the next
    /// one a scatter read puts straight into its receive ([`Core::scatter_target`]).
    last_send_seg: usize,
    scratch: Vec<u8>,
    /// Where received ULPDUs are put together when markers split them.
    rx_scratch: Vec<u8>,
    unconfirmed: usize,
    /// Completions go to a poller that takes them from [`Core::poll_completion`] (no hook):
    /// a probe waits while the poller still has some to take ([`Core::probe_held_back`]).
    defer_probes: bool,
    /// Outstanding RDMA Reads of this side's that move data (not probes).
    reads_with_data: usize,
    /// Those of them of at least `HINT_MIN` bytes.
    large_reads: usize,
    /// Small messages take the fast paths (see `fast.rs`); off only in the tests that compare
    /// the two.
    fast_paths: bool,
    placement: PlacementStats,
}

/// Progress of a direct placement.
struct DirectState {
    place: DirectPlacement,
    last: bool,
    read_response: bool,
    /// A segment of a Send placed into its receive ([`Core::cur_recv`]), completed with the
    /// last one.
    send: Option<DirectSend>,
    /// Under CRC: the FPDU's CRC so far, checked once its trailer is in.
    crc: Option<DirectCrc>,
}

/// What completing a Send placed directly takes from its segment's untagged header, and the
/// header itself for a Terminate that must quote it.
struct DirectSend {
    opcode: Opcode,
    rsvd_ulp: u32,
    msn: u32,
    raw: [u8; ddp::UNTAGGED_LEN],
    seg_len: u16,
}

/// The CRC of a directly placed FPDU (RFC 5044 section 4.1: over the ULPDU length, the ULPDU
/// and the pad), computed over the bytes as they are placed, and the trailer (pad and CRC
/// field) as it arrives.
struct DirectCrc {
    running: u32,
    trailer: [u8; 3 + mpa::CRC_LEN],
    got: usize,
}

impl Core {
    /// A core in Full Operation.
    pub fn new(cfg: CoreConfig, tags: Arc<TagTable>) -> Core {
        Core {
            writer: FpduWriter::new(cfg.tx),
            reader: FpduReader::new(cfg.rx, u16::MAX as usize),
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
            shared: None,
            cur_recv: None,
            cq: VecDeque::new(),
            out_urgent: Vec::new(),
            terminate_received: None,
            terminate_sent: None,
            direct: None,
            segment_follows: false,
            follow_read: 0,
            last_send_large: false,
            last_send_seg: 0,
            scratch: Vec::new(),
            rx_scratch: Vec::new(),
            unconfirmed: 0,
            defer_probes: true,
            reads_with_data: 0,
            large_reads: 0,
            fast_paths: true,
            placement: PlacementStats::default(),
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
        // The request being emitted is on both queues.
        let outstanding = self.sq.len() + self.inflight.len() - self.cur_tx.is_some() as usize;
        if outstanding >= self.cfg.sq_depth {
            return Err(Error::QueueFull {
                queue: "send",
                depth: self.cfg.sq_depth,
            });
        }
        match &wr.op {
            SendOp::Send { sg, .. } | SendOp::RdmaWrite { sg, .. } => {
                let mut total = 0u64;
                for sge in sg {
                    self.check_sge(sge, Access::NONE)?;
                    total += sge.len as u64;
                }
                if total > u32::MAX as u64 {
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
        if self.shared.is_some() {
            return Err(Error::InvalidWorkRequest(
                "the connection takes its receives from a shared queue".into(),
            ));
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

    /// Completions go to a hook, which takes each as it is made: a confirmation probe is never
    /// held back for a poller to come (see [`Core::probe_held_back`]).
    pub fn set_hooked(&mut self) {
        self.defer_probes = false;
    }

    /// True when a confirmation probe that waited for the poller to take every completion is
    /// due now: the poller found none left, and is about to wait. Without a hook, a poller
    /// that still has completions to take is not waiting for more, so the probe for the Sends
    /// and Writes posted meanwhile waits until it took the last one, or until 32 of them wait
    /// for one.
    #[inline]
    pub fn probe_held_back(&self) -> bool {
        self.defer_probes && self.cq.is_empty() && self.needs_probe()
    }

    /// True when completions are waiting.
    pub fn has_completions(&self) -> bool {
        !self.cq.is_empty()
    }

    /// True while bulk data is on its way in: an RDMA Read of this side's with data is
    /// outstanding, or a large tagged segment is being placed (see the driver's `Receiver`:
    /// the receive task reads such a stream, pollers do not).
    pub fn awaits_data(&self) -> bool {
        self.direct.is_some() || self.reads_with_data > 0
    }

    /// True when [`Core::poll_transmit`] has something to emit.
    #[inline]
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

    /// True when all [`Core::poll_transmit`] has to emit is answers to zero-length RDMA Reads
    /// (confirmation probes): a few bytes that only let the peer complete its requests, which
    /// the driver may hold back for the next message.
    pub fn owes_only_confirmations(&self) -> bool {
        self.state == State::Established
            && self.out_urgent.is_empty()
            && self.cur_tx.is_none()
            && self.sq.is_empty()
            && !self.needs_probe()
            && !self.inbound_reads.is_empty()
            // By index: a deque's iterator costs more than the one or two entries it looks at.
            && (0..self.inbound_reads.len()).all(|i| self.inbound_reads[i].size == 0)
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

    /// Records request `wr_id` (posted `signaled` or not) as started; returns its sequence
    /// number.
    fn push_inflight(
        &mut self,
        wr_id: u64,
        signaled: bool,
        opcode: WcOpcode,
        byte_len: u32,
    ) -> u64 {
        let seq = self.inflight_base + self.inflight.len() as u64;
        self.inflight.push_back(Inflight {
            wr_id,
            opcode,
            byte_len,
            signaled,
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
            self.complete(e, status);
        }
    }

    /// Queues the completion of the finished request `e`, unless it was posted unsignaled
    /// and succeeded.
    fn complete(&mut self, e: Inflight, status: WcStatus) {
        if status == WcStatus::Success {
            if e.signaled {
                self.cq.push_back(
                    Completion::new(e.wr_id, e.opcode, status).with_byte_len(e.byte_len),
                );
            }
        } else {
            self.cq
                .push_back(Completion::new(e.wr_id, e.opcode, status));
        }
    }

    /// Flushes every outstanding request. `first_error` goes to the oldest unfinished
    /// send-queue request (the one a received Terminate refers to).
    fn flush(&mut self, first_error: Option<WcStatus>) {
        let mut first_error = first_error;
        if let Some(cur) = self.cur_recv.take() {
            self.end_receive(cur.wr.wr_id, WcStatus::Flushed);
        }
        self.shared_closed(WcStatus::Flushed);
        for wr in self.rq.drain(..) {
            self.cq
                .push_back(Completion::new(wr.wr_id, WcOpcode::Recv, WcStatus::Flushed));
        }
        for e in self.inflight.iter_mut() {
            if e.status.is_none() {
                e.status = Some(first_error.take().unwrap_or(WcStatus::Flushed));
            }
        }
        if self.cur_tx.take().is_some() {
            // Flushed below as an inflight request.
            self.sq.pop_front();
        }
        self.unconfirmed = 0;
        self.pending_reads.clear();
        self.reads_with_data = 0;
        self.large_reads = 0;
        self.inbound_reads.clear();
        self.direct = None;
        self.drain_inflight();
        for wr in self.sq.drain(..) {
            let status = first_error.take().unwrap_or(WcStatus::Flushed);
            self.cq
                .push_back(Completion::new(wr.wr_id, opcode_of(&wr.op), status));
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

/// The pieces of the elements holding `n` bytes starting at `start`.
fn ranges(sg: &[Sge], start: usize, n: usize) -> transmit::Ranges {
    let mut out = transmit::Ranges::new();
    let mut base = 0;
    let end = start + n;
    for sge in sg {
        let (lo, hi) = (base.max(start), (base + sge.len).min(end));
        if lo < hi {
            out.push((
                sge.mr.clone(),
                sge.offset + lo - base..sge.offset + hi - base,
            ));
        }
        base += sge.len;
    }
    out
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

mod direct;
mod fast;
mod rx;
mod shared;
mod transmit;
mod tx;

pub use direct::{ReadHint, ScatterRead, ScatterTarget};
pub use transmit::Transmit;
pub use tx::DEFAULT_GATHER_MIN;

#[cfg(test)]
mod fast_tests;
#[cfg(test)]
mod tests;

//! Fast paths for the small messages that make up most traffic on a stream without markers: a
//! Send that fits one segment, and a zero-length RDMA Read Request and its Response (the
//! confirmation probes of [`CoreConfig::confirm`]).
//!
//! Each reads the fields it needs straight from the bytes, checks everything the general path
//! checks for that message, and does what the general path does, without the parsed header
//! types, the fault values built for errors, or the general path's dispatch. A message of
//! another kind, or one that any check refuses, is left untouched to the general path, which
//! then handles it or reports the error: the fast paths decide before they change anything.
//! The tests (`core/tests.rs`, `fast_paths_agree_with_the_general_path`) run the same streams
//! through both and compare what comes out.

use super::*;
use crate::rdma::soft::wire::{be32, be64};

/// DDP control byte: Tagged flag, Last flag, version bits (RFC 5041 section 4).
pub(super) const DDP_T: u8 = 0x80;
pub(super) const DDP_L: u8 = 0x40;
const DDP_DV: u8 = 0x03;

impl Core {
    /// Takes the FPDU at the start of `b` if it is one of the fast-path messages and every
    /// check passes; returns the stream bytes consumed. `None`: nothing was done (an FPDU of
    /// another kind, an error to report, or not all of it in `b`).
    pub(super) fn fast_input(&mut self, b: &[u8]) -> Option<usize> {
        debug_assert!(!self.cfg.rx.markers, "markers take the general path");
        let &[l0, l1, c0, c1, ..] = b else {
            return None;
        };
        let ulpdu_len = u16::from_be_bytes([l0, l1]) as usize;
        let covered = mpa::ULPDU_LEN_LEN + ulpdu_len + mpa::pad_len(ulpdu_len);
        let fpdu = b.get(..covered + mpa::CRC_LEN)?;
        // RFC 5041 section 7.2 / RFC 5040 section 7.1: versions must be the negotiated ones.
        let v = self.cfg.version;
        if c0 & DDP_DV != v || c1 >> 6 != v {
            return None;
        }
        if self.cfg.rx.crc {
            let mut field = [0; mpa::CRC_LEN];
            field.copy_from_slice(&fpdu[covered..]);
            // RFC 5044 section 8: the general path terminates on a mismatch.
            if mpa::crc_from_bytes(field) != crc::of(&fpdu[..covered]) {
                return None;
            }
        }
        let ulpdu = &fpdu[mpa::ULPDU_LEN_LEN..mpa::ULPDU_LEN_LEN + ulpdu_len];
        let done = if c0 & DDP_T != 0 {
            self.fast_read_response(c0, c1, ulpdu)
        } else {
            self.fast_untagged(c0, c1, ulpdu)
        };
        done.then(|| {
            self.reader.advance(fpdu.len());
            fpdu.len()
        })
    }

    /// The zero-length RDMA Read Response to the oldest outstanding Read, itself of zero
    /// length (a confirmation probe's answer): the Read completes, and with it what it
    /// confirms.
    fn fast_read_response(&mut self, c0: u8, c1: u8, ulpdu: &[u8]) -> bool {
        let Some(hdr) = ulpdu.first_chunk::<{ ddp::TAGGED_LEN }>() else {
            return false;
        };
        let stag = be32(hdr, 2);
        let answers_probe = c1 & 0x0f == u8::from(Opcode::ReadResponse)
            && c0 & DDP_L != 0
            && ulpdu.len() == ddp::TAGGED_LEN
            && self
                .pending_reads
                .front()
                .is_some_and(|p| p.size == 0 && p.sink_stag == stag);
        if answers_probe {
            self.finish_probe();
        }
        answers_probe
    }

    /// [`Core::finish_read`] for the answer to a confirmation probe (the oldest outstanding
    /// Read, of zero length): the Sends and Writes emitted before it complete, in order. When
    /// something else stands among them (a Read still outstanding, a request already
    /// finished), the general path sorts it out.
    fn finish_probe(&mut self) {
        let upto = match self.pending_reads.front() {
            Some(p) if p.seq.is_none() => p.confirms_upto,
            _ => return self.finish_read(),
        };
        // By index: a deque's iterator costs more than the usual one entry it looks at.
        let confirmed = upto.saturating_sub(self.inflight_base) as usize;
        let plain = (0..confirmed).all(|i| {
            self.inflight
                .get(i)
                .is_some_and(|e| e.status.is_none() && e.emitted.is_some())
        });
        if !plain {
            return self.finish_read();
        }
        self.pending_reads.pop_front();
        // RFC 5040 section 5.5: the responder processed everything sent before the Read
        // Request before it answered, so those Sends and Writes are confirmed.
        while self.inflight_base < upto {
            let Some(e) = self.inflight.pop_front() else {
                break;
            };
            self.inflight_base += 1;
            self.unconfirmed -= 1;
            self.complete(e, WcStatus::Success);
        }
        // Requests behind them that finished already (completed once written) follow.
        self.drain_inflight();
    }

    /// A Send in one segment into the next posted receive, or a zero-length RDMA Read
    /// Request.
    fn fast_untagged(&mut self, c0: u8, c1: u8, ulpdu: &[u8]) -> bool {
        let Some(hdr) = ulpdu.first_chunk::<{ ddp::UNTAGGED_LEN }>() else {
            return false;
        };
        let (qn, msn, mo) = (be32(hdr, 6), be32(hdr, 10), be32(hdr, 14));
        let payload = &ulpdu[ddp::UNTAGGED_LEN..];
        let opcode = c1 & 0x0f;
        // One whole message: the last segment, at offset 0 (RFC 5041 section 5.3: the
        // expected message, TCP keeps order).
        if c0 & DDP_L == 0 || mo != 0 {
            return false;
        }
        match qn {
            ddp::QN_SEND => {
                let solicited = opcode == u8::from(Opcode::SendSolicited);
                if !(opcode == u8::from(Opcode::Send) || solicited)
                    || msn != self.rx_msn[0]
                    || self.cur_recv.is_some()
                {
                    return false;
                }
                let Some(wr) = self.fast_receive(payload) else {
                    return false;
                };
                self.rx_msn[0] = msn.wrapping_add(1);
                self.last_send_large = payload.len() >= super::direct::HINT_MIN;
                self.last_send_seg = payload.len();
                self.cq.push_back(
                    Completion::new(wr.wr_id, WcOpcode::Recv, WcStatus::Success)
                        .with_byte_len(payload.len() as u32)
                        .with_solicited(solicited),
                );
                true
            }
            ddp::QN_READ_REQUEST => {
                let Some(req) = payload.first_chunk::<{ rdmap::READ_REQUEST_LEN }>() else {
                    return false;
                };
                // RFC 5040 section 5.2: a zero-length Read is not validated.
                if opcode != u8::from(Opcode::ReadRequest)
                    || payload.len() != rdmap::READ_REQUEST_LEN
                    || msn != self.rx_msn[1]
                    || be32(req, 12) != 0
                    || self.inbound_reads.len() >= self.cfg.ird.max(1)
                {
                    return false;
                }
                self.rx_msn[1] = msn.wrapping_add(1);
                self.inbound_reads.push_back(InboundRead {
                    source: None,
                    src_off: 0,
                    sink_stag: be32(req, 0),
                    sink_to: be64(req, 4),
                    size: 0,
                    sent: 0,
                });
                true
            }
            _ => false,
        }
    }
}

/// The untagged DDP header (RFC 5041 section 4.3) with the RDMAP control byte of a
/// last segment, as [`DdpHeader::to_bytes`] writes it.
fn untagged_last(
    version: u8,
    opcode: Opcode,
    rsvd_ulp: u32,
    qn: u32,
    msn: u32,
) -> [u8; ddp::UNTAGGED_LEN] {
    let mut h = [0; ddp::UNTAGGED_LEN];
    h[0] = DDP_L | (version & DDP_DV);
    h[1] = ((version << 6) & 0xc0) | (u8::from(opcode) & 0x0f);
    h[2..6].copy_from_slice(&rsvd_ulp.to_be_bytes());
    h[6..10].copy_from_slice(&qn.to_be_bytes());
    h[10..14].copy_from_slice(&msn.to_be_bytes());
    // MO 0: the whole message in this segment.
    h
}

impl Core {
    /// Emits, ahead of the general loop of [`Core::poll_transmit`], what the fast paths cover,
    /// in the order that loop would: the answers to zero-length RDMA Reads, then Sends that fit
    /// one segment and are copied (one element, shorter than the gather threshold), each
    /// followed by a confirmation probe where one is due. Stops at anything else, which the
    /// general loop then takes in its turn. True when nothing is left for that loop (the send
    /// queue is empty, and so is the queue of Reads to answer).
    pub(super) fn fast_transmit(&mut self, out: &mut Transmit) -> bool {
        debug_assert!(!self.cfg.tx.markers, "markers take the general path");
        let v = self.cfg.version;
        let crc = self.cfg.tx.crc;
        let batch = self.tx_batch();
        while let Some(r) = self.inbound_reads.front() {
            if r.size != 0 {
                return false;
            }
            // RFC 5040 section 4.4: a Read Response of zero length is a bare tagged header.
            let mut h = [0; ddp::TAGGED_LEN];
            h[0] = DDP_T | DDP_L | (v & DDP_DV);
            h[1] = ((v << 6) & 0xc0) | u8::from(Opcode::ReadResponse);
            h[2..6].copy_from_slice(&r.sink_stag.to_be_bytes());
            h[6..14].copy_from_slice(&r.sink_to.to_be_bytes());
            self.writer.skip(out.put_small(crc, &h, &[]));
            self.inbound_reads.pop_front();
        }
        while self.cur_tx.is_none() && out.len() < batch {
            // As in the general path, a probe goes after the last message of the batch.
            let Some(wr) = self.sq.front() else {
                if self.needs_probe() {
                    self.emit_probe(out);
                }
                return true;
            };
            let SendOp::Send {
                sg,
                solicited,
                invalidate,
            } = &wr.op
            else {
                return false;
            };
            let [sge] = &sg[..] else {
                return false;
            };
            let n = sge.len;
            if n >= self.cfg.gather_min || n > self.cfg.mulpdu - ddp::UNTAGGED_LEN {
                return false;
            }
            let opcode = match (solicited, invalidate.is_some()) {
                (false, false) => Opcode::Send,
                (false, true) => Opcode::SendInvalidate,
                (true, false) => Opcode::SendSolicited,
                (true, true) => Opcode::SendSolicitedInvalidate,
            };
            let msn = self.tx_msn[0];
            self.tx_msn[0] = msn.wrapping_add(1);
            let h = untagged_last(v, opcode, invalidate.unwrap_or(0), ddp::QN_SEND, msn);
            let len = {
                let memory = sge.mr.read_guard();
                out.put_small(crc, &h, &memory[sge.offset..sge.offset + n])
            };
            self.writer.skip(len);
            let (wr_id, signaled, local) = (wr.wr_id, wr.signaled, wr.complete_locally);
            self.sq.pop_front();
            let seq = self.push_inflight(wr_id, signaled, WcOpcode::Send, n as u32);
            if self.cfg.confirm && !local {
                if let Some(e) = self.inflight.back_mut() {
                    e.emitted = Some(Emitted::Send { msn });
                }
                self.unconfirmed += 1;
            } else {
                out.complete_when_written(seq);
            }
        }
        false
    }

    /// A zero-length RDMA Read Request (a confirmation probe): what
    /// [`Core::emit_read_request`] emits for one, without its general arguments.
    pub(super) fn emit_probe(&mut self, out: &mut Transmit) {
        let msn = self.tx_msn[1];
        self.tx_msn[1] = msn.wrapping_add(1);
        let mut head = [0; ddp::UNTAGGED_LEN + rdmap::READ_REQUEST_LEN];
        head[..ddp::UNTAGGED_LEN].copy_from_slice(&untagged_last(
            self.cfg.version,
            Opcode::ReadRequest,
            0,
            ddp::QN_READ_REQUEST,
            msn,
        ));
        // The Read Request's fields (sink and source STag, offsets, size) are all zero.
        self.writer.skip(out.put_small(self.cfg.tx.crc, &head, &[]));
        let confirms_upto = self.inflight_base + self.inflight.len() as u64;
        self.pending_reads.push_back(PendingRead {
            seq: None,
            confirms_upto,
            size: 0,
            sink: None,
            sink_stag: 0,
            sink_to: 0,
            received: 0,
        });
    }
}

//! Direct placement: tagged segments and large Sends placed straight from the socket into
//! their memory, and the read sizes that keep the next one on that path.

use super::*;

/// Bytes copied and then added to the CRC at a time when a directly placed segment's payload
/// comes from the buffer under CRC: small enough that the CRC finds them in the L1 cache.
const COPY_CRC_BLOCK: usize = 8 * 1024;

/// The smallest tagged payload placed directly; smaller segments are cheaper through the FPDU
/// path.
const DIRECT_MIN: usize = 4096;

/// The smallest RDMA Read whose response, and the smallest region whose announced RDMA Write,
/// is expected header first ([`Core::next_read_hint`]): the short read of the header costs a
/// system call, worth it only when it keeps more than a few pages from being copied.
pub(super) const HINT_MIN: usize = 32 * 1024;

/// Stream bytes of a Send segment's header: the MPA length and the untagged DDP header, with
/// the RDMAP control byte in it (RFC 5041 section 4.3).
const SEND_HEADER: usize = mpa::ULPDU_LEN_LEN + ddp::UNTAGGED_LEN;

/// What a read takes when a large Send is expected: its header, and room for the answer to a
/// confirmation probe (a bare tagged header and its CRC), which a peer that confirms its
/// completions writes just before its next message. Without it that answer took a read of
/// its own.
pub(super) const SEND_EXPECTED: usize =
    SEND_HEADER + mpa::ULPDU_LEN_LEN + ddp::TAGGED_LEN + mpa::CRC_LEN;

/// Bytes a read takes past the next segment's header when more of a Send follows the segment
/// being placed: the last segment of a message just over a segment's size is short, and comes
/// whole with this read instead of in one of its own; a large one has at most this much of
/// its payload copied instead of placed.
const SEND_TAIL: usize = 4096;

/// The smallest Send segment whose payload a scatter read puts straight into its receive
/// ([`Core::scatter_target`]); smaller ones are copied out of the receive buffer. Below this a
/// three-slice read and the placement's steps cost more than the copy they save; from it on
/// the read replaces the header-first read of large Sends (docs/bench/round_trip_64k.md).
const SCATTER_MIN: usize = HINT_MIN;

/// Stream bytes of the answer to a confirmation probe: the MPA length, a bare tagged DDP
/// header (an RDMA Read Response of no data, no pad) and the CRC field.
const PROBE_ANSWER: usize = mpa::ULPDU_LEN_LEN + ddp::TAGGED_LEN + mpa::CRC_LEN;

/// Where the driver's next read may put the payload of the Send the core expects next: the
/// stream's next `head` bytes into the receive buffer, then up to `len` bytes into `region`
/// from `offset` (the receive at the head of the queue), then the rest into the buffer again
/// ([`Core::scatter_target`], [`Core::handle_scatter_head`]).
#[derive(Debug, Clone)]
pub struct ScatterTarget {
    /// The receive's registration.
    pub region: MemoryRegion,
    /// Where the receive's buffer begins in it.
    pub offset: usize,
    /// Payload bytes expected in the Send's first segment (at most the receive's length).
    pub len: usize,
    /// Stream bytes before the payload: the Send's header, after the answer to this side's
    /// confirmation probe when one is due.
    pub head: usize,
}

/// What the core made of a scatter read ([`Core::take_scatter`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScatterRead {
    /// `buf[start..end]`: bytes read and not consumed yet.
    pub start: usize,
    /// See `start`.
    pub end: usize,
    /// Payload bytes of the Send expected that the read put in place (0: it found something
    /// else, and what the region got was copied back into the buffer).
    pub placed: usize,
}

/// How the driver's next read from the stream should take what comes ([`Core::read_hint`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadHint {
    /// How many bytes the receive buffer should hold, not consumed, after the read
    /// ([`Core::next_read_hint`]); 0: no expectation (and the other fields
    /// are false).
    pub hold: usize,
    /// The bytes the core left unconsumed begin an FPDU (no direct placement under way).
    pub at_fpdu: bool,
    /// Large tagged data is expected beyond the messages under way: an RDMA Write the
    /// consumer announced, the response to an RDMA Read of this side.
    pub expect_more: bool,
}

impl ReadHint {
    /// How many bytes the next read should take into a buffer that holds `pending`
    /// unconsumed; `None`: as many as the socket holds.
    ///
    /// With an expectation, the read takes the part of the expected header not in the buffer
    /// yet. When the buffer holds that much already, it holds the start of an FPDU that is
    /// not placed directly (a Send, a small segment): if a large segment may come behind it
    /// (its message goes on, or more is expected), the read takes the rest of that FPDU and
    /// the header after it, so that the large segment is still placed directly rather than
    /// brought in whole by this read and copied. That is how results come with several calls
    /// in flight, each RDMA Write followed by its reply's Send: reads of whatever the socket
    /// held copied more than half of them (`tests/transport_placement.rs`).
    pub fn read_size(&self, pending: &[u8]) -> Option<usize> {
        if self.hold == 0 {
            return None;
        }
        if self.hold > pending.len() {
            return Some(self.hold - pending.len());
        }
        if !self.at_fpdu {
            return None;
        }
        let len = mpa::fpdu_len_at(pending)?;
        // The DDP control byte follows the length field (RFC 5041 section 4.2).
        let goes_on = pending
            .get(mpa::ULPDU_LEN_LEN)
            .is_some_and(|c| c & fast::DDP_L == 0);
        (len > pending.len() && (goes_on || self.expect_more))
            .then(|| len - pending.len() + self.hold)
    }
}

impl Core {
    /// How the driver's next read should take what comes: [`Core::next_read_hint`], with what
    /// [`ReadHint::read_size`] needs to see past an FPDU that is not placed directly.
    pub fn read_hint(&self) -> ReadHint {
        // Without an expectation the rest does not matter (this runs on every input and post).
        let Some(hold) = self.next_read_hint() else {
            return ReadHint::default();
        };
        ReadHint {
            hold,
            at_fpdu: self.direct.is_none(),
            expect_more: self.expects_tagged_data(false),
        }
    }

    /// True while large tagged data is expected: an RDMA Write the consumer announced and
    /// that has not come yet, or an RDMA Read of this side of at least [`HINT_MIN`]
    /// outstanding, besides the one whose last segment is arriving when `read_ending`. The
    /// driver then reads only up to the next header, so that the next large payload too is
    /// placed directly; smaller ones cost less to copy from a longer read than a read each.
    fn expects_tagged_data(&self, read_ending: bool) -> bool {
        let ending_large = read_ending
            && self
                .pending_reads
                .front()
                .is_some_and(|p| p.size >= HINT_MIN);
        self.tags.writes_awaited() || self.large_reads > usize::from(ending_large)
    }

    /// What the driver may place straight from the stream, if the core is in the middle of a
    /// directly placed tagged segment.
    pub fn direct_placement(&self) -> Option<&DirectPlacement> {
        self.direct.as_ref().map(|d| &d.place)
    }

    /// How many bytes past those consumed the driver's buffer should hold after its next read,
    /// when the core expects the header of a tagged segment to be placed directly: the trailer
    /// of the segment being placed, if any is left, and the next segment's header (of which
    /// the buffer may hold a part already, not consumed). `None`: no expectation (read what
    /// the socket holds).
    ///
    /// A large tagged message comes as segments of about 64 KiB, and a peer that writes them
    /// one by one to a receiver that keeps up leaves a segment boundary at the end of each
    /// read: a read of whatever is there would take the whole next segment into the buffer,
    /// and the core would copy it, segment after segment. Reading only the header keeps every
    /// payload on the direct path for one short read: between two processes, 1 MiB
    /// RPC-over-RDMA READs copied 50-90 % of their payload out of the buffer without it.
    ///
    /// The response to this side's large RDMA Read is expected the same way before its first
    /// segment: it is most likely what comes next, and its first segment too is then placed
    /// directly (a Send that comes first instead costs one short read more). So is an RDMA
    /// Write the consumer said is coming ([`TagTable::expect_write`]: a Write chunk of a call
    /// just sent), whose first segment would otherwise come in with the header and be copied,
    /// every payload of up to one segment (64 KiB) among them.
    ///
    /// [`TagTable::expect_write`]: crate::rdma::soft::tags::TagTable::expect_write
    #[inline]
    pub fn next_read_hint(&self) -> Option<usize> {
        const HEADER: usize = mpa::ULPDU_LEN_LEN + ddp::TAGGED_LEN;
        // Small messages first (this runs on every input and post): no placement under way or
        // just ended, no RDMA Read with data outstanding, no RDMA Write or large Send expected.
        if self.direct.is_none()
            && !self.segment_follows
            && self.reads_with_data == 0
            && !self.tags.writes_awaited()
            && !self.last_send_large
        {
            return None;
        }
        if self.cfg.rx.markers {
            // Nothing is placed directly under markers.
            return None;
        }
        match &self.direct {
            Some(d) if d.place.remaining == 0 && d.place.more => {
                Some(d.place.trailer + d.place.read_after)
            }
            Some(_) => None,
            None if self.segment_follows => Some(self.follow_read),
            None if self.tags.writes_awaited()
                || self
                    .pending_reads
                    .front()
                    .is_some_and(|p| p.received == 0 && p.size >= HINT_MIN) =>
            {
                Some(HEADER)
            }
            // A large Send after a large Send, into a receive that holds it: its first segment
            // too is placed directly (a small one that comes instead costs one short read, and
            // the next is expected whole again).
            None => (self.last_send_large
                && self.cur_recv.is_none()
                && self.rq.front().is_some_and(|wr| wr.sge.len >= HINT_MIN))
            .then_some(SEND_EXPECTED),
        }
    }

    /// Where the next read may put the payload of the Send expected next, straight into its
    /// receive instead of the receive buffer (which the core would copy it out of): when the
    /// last Send received began with a segment of at least `SCATTER_MIN` bytes, nothing else is
    /// under way or expected (no placement, no RDMA Write announced, no RDMA Read with data
    /// outstanding), and the receive at the head of the queue holds that much too. A peer that confirms
    /// its completions answers this side's probe just before its next message: that answer is
    /// expected before the Send's header.
    ///
    /// A read that finds something else there costs a copy of what went into the region back
    /// into the buffer (see [`Core::handle_scatter_head`]). The receive's memory is the
    /// provider's until the receive completes; a Send shorter than `len` leaves stream bytes
    /// (its trailer, what followed it) in the receive past its length, which a completion
    /// never covers.
    pub fn scatter_target(&self) -> Option<ScatterTarget> {
        let (sge, len) = self.scatter_receive()?;
        let answer = self.pending_reads.front().is_some_and(|p| p.size == 0);
        Some(ScatterTarget {
            region: sge.mr.clone(),
            offset: sge.offset,
            len,
            head: SEND_HEADER + if answer { PROBE_ANSWER } else { 0 },
        })
    }

    /// True when [`Core::scatter_target`] has a target (without taking it).
    pub fn scatter_expected(&self) -> bool {
        self.scatter_receive().is_some()
    }

    /// The receive of [`Core::scatter_target`] and the payload bytes expected in it.
    fn scatter_receive(&self) -> Option<(&Sge, usize)> {
        if self.last_send_seg < SCATTER_MIN
            || self.cfg.rx.markers
            || self.direct.is_some()
            || self.segment_follows
            || self.cur_recv.is_some()
            || self.reads_with_data > 0
            || self.tags.writes_awaited()
        {
            return None;
        }
        let sge = &self.rq.front()?.sge;
        let len = sge.len.min(self.last_send_seg);
        (len >= SCATTER_MIN).then_some((sge, len))
    }

    /// Takes `head`, the bytes a scatter read for `target` put into the receive buffer before
    /// the region ([`Core::scatter_target`]), when they are what was expected: the answer to
    /// this side's probe (if one was due) and the header of the Send whose payload the read
    /// put in place. Returns the bytes consumed and, when the Send's header was among them,
    /// its segment's payload length: its payload is being placed directly from where the read
    /// put it, and the driver reports the bytes it read there with [`Core::placed_direct`].
    ///
    /// Anything else (`None`) is left untouched, and nothing is written anywhere: the region's
    /// bytes are then stream bytes like any other, which the driver copies back behind `head`
    /// before it hands over the rest with [`Core::handle_input`].
    pub fn handle_scatter_head(
        &mut self,
        head: &[u8],
        target: &ScatterTarget,
    ) -> (usize, Option<usize>) {
        if self.state != State::Established || head.len() != target.head {
            return (0, None);
        }
        let mut used = 0;
        if target.head > SEND_HEADER {
            // A zero-length RDMA Read Response writes nothing (the fast path checks it whole).
            let &[l0, l1, c0, ..] = head else {
                return (0, None);
            };
            let answer =
                u16::from_be_bytes([l0, l1]) as usize == ddp::TAGGED_LEN && c0 & fast::DDP_T != 0;
            match answer
                .then(|| self.fast_input(&head[..PROBE_ANSWER]))
                .flatten()
            {
                Some(n) => used = n,
                None => return (0, None),
            }
        }
        let send = &head[used..];
        // The DDP control byte follows the length field (RFC 5041 section 4.2).
        let untagged = send
            .get(mpa::ULPDU_LEN_LEN)
            .is_some_and(|c| c & fast::DDP_T == 0);
        if !untagged {
            return (used, None);
        }
        // The payload went into the receive at the head of the queue, which the Send takes.
        let into_target = self.cur_recv.is_none()
            && self.rq.front().is_some_and(|wr| {
                wr.sge.mr.ptr_eq(&target.region) && wr.sge.offset == target.offset
            });
        if !into_target {
            return (used, None);
        }
        // At least `SCATTER_MIN`, and so `DIRECT_MIN`, bytes were expected: a smaller Send is
        // not placed directly, and goes back to the buffer with the rest.
        let ulpdu_len = u16::from_be_bytes([send[0], send[1]]) as usize;
        let begun = self.try_begin_direct_send(send, ulpdu_len);
        match (begun, &self.direct) {
            (Some(SEND_HEADER), Some(d)) => (head.len(), Some(d.place.remaining)),
            _ => (used, None),
        }
    }

    /// Takes the `n` bytes a scatter read for `t` put into `buf` and the region: `t.head` at
    /// the start of `buf`, up to `t.len` in the region, the rest from `buf[t.head + t.len..]`.
    /// The head first ([`Core::handle_scatter_head`]); when it was the Send expected, the
    /// payload bytes in the region are its own, and what the region got past them is copied
    /// back in front of what `buf` got after it; otherwise everything the region got is
    /// copied back behind the head and taken as any other input.
    pub fn take_scatter(&mut self, buf: &mut [u8], t: &ScatterTarget, n: usize) -> ScatterRead {
        let (head, len) = (t.head, t.len);
        if n <= head {
            let start = self.handle_input(&buf[..n]);
            return ScatterRead {
                start,
                end: n,
                placed: 0,
            };
        }
        let in_region = (n - head).min(len);
        // Read after the region only once it was full.
        let after = n - head - in_region;
        let (used, placing) = self.handle_scatter_head(&buf[..head], t);
        let placed = placing.map_or(0, |payload| payload.min(in_region));
        if placing.is_some() {
            self.placed_direct(placed);
        }
        let (back, start, end) = match placing {
            Some(_) => {
                let back = head + len - (in_region - placed);
                (back, back, head + len + after)
            }
            None => (head, used, head + in_region + after),
        };
        let moved = in_region - placed;
        if moved > 0 {
            t.region.with_slice(|s| {
                buf[back..back + moved]
                    .copy_from_slice(&s[t.offset + placed..t.offset + in_region]);
            });
        }
        let start = if start < end {
            start + self.handle_input(&buf[start..end])
        } else {
            start
        };
        ScatterRead { start, end, placed }
    }

    /// Begins a direct placement when `buf` starts with the header of a tagged segment and the
    /// receive direction has no markers. `Some(0)`: need more bytes; `None`: not a direct
    /// candidate (use the FPDU path).
    ///
    /// Under CRC the header is checked before anything is placed, as always, but the payload
    /// is placed as it arrives and the FPDU's CRC checked once its trailer is in, as Linux siw
    /// does: a mismatch terminates the connection (RFC 5044 section 8) before any completion
    /// could report the data, which RDMA leaves undefined until then. Checking first would
    /// mean reading each FPDU into a buffer and copying it again: that copy was a fifth of a
    /// 1 MiB RPC-over-RDMA READ's client CPU time (`perf`, two processes).
    pub(super) fn try_begin_direct(&mut self, buf: &[u8]) -> Option<usize> {
        if self.cfg.rx.markers {
            return None;
        }
        let head_len = 2 + ddp::TAGGED_LEN;
        let head = buf.first_chunk::<{ 2 + ddp::TAGGED_LEN }>()?;
        let ulpdu_len = u16::from_be_bytes([head[0], head[1]]) as usize;
        if head[2] & 0x80 == 0 {
            return self.try_begin_direct_send(buf, ulpdu_len);
        }
        // Small segments (checked first: most are small).
        let payload = ulpdu_len.checked_sub(ddp::TAGGED_LEN)?;
        if payload < DIRECT_MIN {
            return None;
        }
        let hdr = match DdpHeader::parse(&buf[2..head_len]) {
            Ok(h) => h,
            Err(_) => return None,
        };
        match self.validate_tagged(&hdr, payload, &buf[2..head_len]) {
            Ok((Some(region), offset, read_response)) => {
                self.reader.advance(head_len);
                // This segment's own Write no longer counts as awaited (`validate_tagged`
                // looked its tag up), nor, once done, does its own Read.
                let expect_more = self.expects_tagged_data(read_response && hdr.last);
                let crc = self.cfg.rx.crc.then(|| DirectCrc {
                    running: crc::of(&buf[..head_len]),
                    trailer: [0; 3 + mpa::CRC_LEN],
                    got: 0,
                });
                self.direct = Some(DirectState {
                    place: DirectPlacement {
                        region,
                        offset,
                        remaining: payload,
                        trailer: crate::rdma::soft::wire::mpa::pad_len(ulpdu_len)
                            + crate::rdma::soft::wire::mpa::CRC_LEN,
                        more: !hdr.last,
                        expect_more,
                        read_after: head_len,
                    },
                    last: hdr.last,
                    read_response,
                    send: None,
                    crc,
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

    /// [`Core::try_begin_direct`] for an untagged segment: a large segment of a Send, placed
    /// into its receive as a tagged one into its region. Only a segment that passes every check
    /// of [`Core::process_untagged`] is placed so (the expected MSN, its MO, a receive that
    /// holds it); anything else is left to the FPDU path, which reports what is wrong.
    fn try_begin_direct_send(&mut self, buf: &[u8], ulpdu_len: usize) -> Option<usize> {
        let payload = ulpdu_len.checked_sub(ddp::UNTAGGED_LEN)?;
        if payload < DIRECT_MIN {
            return None;
        }
        let head = buf.first_chunk::<SEND_HEADER>()?;
        let hdr = DdpHeader::parse(&head[mpa::ULPDU_LEN_LEN..]).ok()?;
        let Buffer::Untagged {
            rsvd_ulp,
            qn,
            msn,
            mo,
        } = hdr.buffer
        else {
            return None;
        };
        let opcode = Opcode::from(hdr.opcode);
        // RFC 5041 section 5.3: segments of the expected message only, in order.
        if !opcode.is_send()
            || qn != ddp::QN_SEND
            || hdr.ddp_version != self.cfg.version
            || hdr.rdmap_version != self.cfg.version
            || msn != self.rx_msn[0]
        {
            return None;
        }
        let (placed, room) = match &self.cur_recv {
            Some(cur) => (cur.placed, cur.wr.sge.len),
            None => (0, self.rq.front()?.sge.len),
        };
        // RFC 5041 section 7.2: a message too long for its buffer is the FPDU path's error.
        if mo as usize != placed || placed + payload > room {
            return None;
        }
        if self.cur_recv.is_none() {
            let wr = self.rq.pop_front()?;
            self.cur_recv = Some(CurRecv { wr, placed: 0 });
            self.last_send_seg = payload;
        }
        let sge = &self.cur_recv.as_ref()?.wr.sge;
        let (region, offset) = (sge.mr.clone(), sge.offset + placed);
        self.reader.advance(SEND_HEADER);
        let mut raw = [0; ddp::UNTAGGED_LEN];
        raw.copy_from_slice(&head[mpa::ULPDU_LEN_LEN..]);
        self.direct = Some(DirectState {
            place: DirectPlacement {
                region,
                offset,
                remaining: payload,
                trailer: mpa::pad_len(ulpdu_len) + mpa::CRC_LEN,
                more: !hdr.last,
                expect_more: false,
                read_after: SEND_HEADER + SEND_TAIL,
            },
            last: hdr.last,
            read_response: false,
            send: Some(DirectSend {
                opcode,
                rsvd_ulp,
                msn,
                raw,
                seg_len: ulpdu_len as u16,
            }),
            crc: self.cfg.rx.crc.then(|| DirectCrc {
                running: crc::of(head),
                trailer: [0; 3 + mpa::CRC_LEN],
                got: 0,
            }),
        });
        Some(SEND_HEADER)
    }

    /// Copies buffered payload bytes of a direct placement; returns bytes consumed.
    pub(super) fn feed_direct(&mut self, buf: &[u8]) -> usize {
        let Some(d) = self.direct.as_mut() else {
            return 0;
        };
        let n = d.place.remaining.min(buf.len());
        if d.send.is_none() {
            self.placement.copied += n as u64;
        }
        if n > 0 {
            let off = d.place.offset;
            let crc = &mut d.crc;
            d.place.region.with_mut_slice(|s| {
                let dst = &mut s[off..off + n];
                match crc {
                    // Block by block, the CRC reading what the copy just brought into the
                    // cache.
                    Some(crc) => {
                        for (to, from) in dst
                            .chunks_mut(COPY_CRC_BLOCK)
                            .zip(buf[..n].chunks(COPY_CRC_BLOCK))
                        {
                            to.copy_from_slice(from);
                            crc.running = crc::append(crc.running, from);
                        }
                    }
                    None => dst.copy_from_slice(&buf[..n]),
                }
            });
        }
        let mut used = n;
        self.placed_direct_inner(n);
        // Pad and CRC field after the payload.
        if let Some(d) = self.direct.as_mut() {
            if d.place.remaining == 0 {
                let trailer = d.place.trailer.min(buf.len() - used);
                if let Some(crc) = &mut d.crc {
                    crc.trailer[crc.got..crc.got + trailer]
                        .copy_from_slice(&buf[used..used + trailer]);
                    crc.got += trailer;
                }
                d.place.trailer -= trailer;
                used += trailer;
                self.reader.advance(trailer);
                if d.place.trailer == 0 {
                    self.end_direct();
                }
            }
        }
        used
    }

    /// Records `n` payload bytes the driver placed straight from the socket into the region
    /// of [`Core::direct_placement`].
    pub fn placed_direct(&mut self, n: usize) {
        // Under CRC the bytes are added from the region, where the driver put them.
        if let Some(d) = self.direct.as_mut().filter(|_| n > 0) {
            if let Some(crc) = &mut d.crc {
                let at = d.place.offset;
                crc.running = d
                    .place
                    .region
                    .with_slice(|s| crc::append(crc.running, &s[at..at + n]));
            }
        }
        if self.direct.as_ref().is_some_and(|d| d.send.is_none()) {
            self.placement.direct += n as u64;
        }
        self.placed_direct_inner(n);
        if let Some(d) = &self.direct {
            if d.place.remaining == 0 && d.place.trailer == 0 {
                self.end_direct();
            }
        }
    }

    /// Accounts for `n` payload bytes placed (their CRC already taken).
    pub(super) fn placed_direct_inner(&mut self, n: usize) {
        if let Some(d) = self.direct.as_mut() {
            d.place.remaining -= n;
            d.place.offset += n;
            self.reader.advance(n);
            if d.read_response {
                if let Some(p) = self.pending_reads.front_mut() {
                    p.received += n;
                }
            }
            if d.send.is_some() {
                if let Some(cur) = self.cur_recv.as_mut() {
                    cur.placed += n;
                }
            }
        }
    }

    pub(super) fn end_direct(&mut self) {
        if let Some(d) = self.direct.take() {
            self.segment_follows = !d.last;
            self.follow_read = d.place.read_after;
            if let Some(crc) = d.crc {
                let pad = crc.got.saturating_sub(mpa::CRC_LEN);
                let computed = crc::append(crc.running, &crc.trailer[..pad]);
                let mut field = [0; mpa::CRC_LEN];
                field.copy_from_slice(&crc.trailer[pad..pad + mpa::CRC_LEN]);
                let received = mpa::crc_from_bytes(field);
                // RFC 5044 section 8: a CRC mismatch is a fatal error.
                if received != computed {
                    return self.fail(WireError::BadCrc { received, computed }.into());
                }
            }
            if d.read_response && d.last {
                self.finish_read();
            }
            if let Some(s) = d.send.filter(|_| d.last) {
                let with_hdr = |code: TermCode| Fault {
                    ddp: Some((s.seg_len, s.raw.to_vec())),
                    ..Fault::new(code)
                };
                if let Err(fault) = self.finish_recv(s.opcode, s.rsvd_ulp, s.msn, with_hdr) {
                    self.fail(fault);
                }
            }
        }
    }
}

//! [`Transmit`]: the stream bytes the core hands to the driver, with payloads left in the
//! registrations they come from.
//!
//! An FPDU (RFC 5044 section 4) whose payload is large enough is queued as a *gathered* FPDU:
//! its framing (ULPDU length, DDP/RDMAP header, pad, CRC) in a few owned bytes and its payload
//! as ranges of [`MemoryRegion`]s. The driver writes them with one vectored write
//! ([`Transmit::write_with`]) straight from the registered memory. Everything else (control
//! messages, small payloads, and every FPDU when markers are on) is copied into owned bytes.
//!
//! Soundness: each gathered FPDU holds a clone of its regions, so the memory stays allocated
//! (and registered) until the bytes are written or the `Transmit` is dropped; the memory is only
//! read through [`MemoryRegion::read_guard`], under the region's read lock, for the duration of
//! one non-blocking write call.
//!
//! With CRC on, the CRC of a gathered FPDU is computed under that same lock, right before the
//! write that starts sending it, so the trailer always matches the bytes that went out even if
//! the application changes the memory meanwhile. When a write stops inside such an FPDU, the
//! rest of its payload is copied while the lock is still held (at most one MULPDU); the CRCs of
//! gathered FPDUs that were not started are dropped and computed again at the next write.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::ops::Range;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use smallvec::SmallVec;

use super::super::wire::mpa::{self, FpduWriter};
use super::super::wire::{crc, ddp};
use crate::rdma::mr::RegionReadGuard;
use crate::rdma::MemoryRegion;

/// Soft limit of slices handed to one vectored write (Linux accepts up to 1024).
const MAX_SLICES: usize = 64;

/// Most bytes of gathered FPDUs with CRC offered to one vectored write (at least one FPDU is).
///
/// Under CRC every gathered FPDU of the window has its CRC computed before the write, and those
/// the socket did not take are computed again at the next one (see the module documentation):
/// with windows of about 256 KiB (four 64 KiB FPDUs) on a socket that was full most of the
/// time, CRC-on transfers ran 30-40 % slower than with one FPDU per write. Owned bytes (control
/// messages, small payloads) are not counted: many small messages still go out in one write.
const GATHER_WINDOW_CRC: usize = 64 * 1024;

/// The same for FPDUs without CRC: one FPDU of RDMA Read Responses (about 64 KiB) per write,
/// as with CRC. Larger windows (256 KiB) left 1 MiB RDMA Reads without CRC below the CI
/// floor on a fast loopback; measurements in docs/bench/round_trip_64k.md.
const GATHER_WINDOW: usize = 64 * 1024;

/// Staged bytes sealed into a part of their own are copied out (and the staging buffer keeps
/// its memory) up to this many; more move out with the buffer's memory, which is not copied.
const COPY_SEAL_MAX: usize = 4096;

/// Owned bytes held in a part itself, without an allocation (a probe, its answer, a header).
const INLINE_PART: usize = 64;

/// A gathered FPDU's payload: ranges of registered memory (one or two for most messages).
pub(super) type Ranges = SmallVec<[(MemoryRegion, Range<usize>); 2]>;

/// Longest framing before a gathered payload: ULPDU length and an untagged DDP header.
const HEAD_MAX: usize = mpa::ULPDU_LEN_LEN + ddp::UNTAGGED_LEN;

/// Longest framing after a gathered payload: pad and CRC.
const TAIL_MAX: usize = 3 + mpa::CRC_LEN;

/// Stream bytes queued for the socket, in order, and the send-queue requests that complete
/// once their bytes are written.
///
/// Filled by [`Core::poll_transmit`](super::Core::poll_transmit), written by the driver with
/// [`Transmit::write_with`] (or [`Transmit::write_all_to`] without a socket), then reported
/// back with [`Core::transmitted`](super::Core::transmitted).
#[derive(Default)]
pub struct Transmit {
    /// Owned bytes not yet sealed into a part: `staging[staged_from..]` (the bytes before it
    /// are written). A plain vector, emptied once written, rather than a `BytesMut` advanced
    /// and reclaimed: ~90 instructions less per write of small messages (callgrind). It keeps
    /// its capacity, at most a batch (`TX_BATCH` or `TX_BATCH_CRC`, or `READ_RESPONSE_BATCH`
    /// with markers, when every FPDU is copied) and one FPDU.
    staging: Vec<u8>,
    staged_from: usize,
    parts: VecDeque<Part>,
    /// Bytes queued since creation (written or not).
    queued: u64,
    /// Bytes written since creation.
    written: u64,
    /// Requests that complete once `written` reaches the position: (position, sequence).
    completions: VecDeque<(u64, u64)>,
}

enum Part {
    Owned(Bytes),
    /// A few owned bytes, and how many of them are written.
    Inline(SmallVec<[u8; INLINE_PART]>, usize),
    Gathered(Box<Gathered>),
}

/// One FPDU whose payload stays in registered memory.
struct Gathered {
    head: [u8; HEAD_MAX],
    head_len: usize,
    payload: Ranges,
    /// Pad, then the CRC (its last four bytes once computed, when `crc` is set).
    tail: [u8; TAIL_MAX],
    tail_len: usize,
    crc: bool,
    crc_ready: bool,
    /// Bytes of this FPDU already written.
    done: usize,
}

impl Gathered {
    fn len(&self) -> usize {
        self.head_len + self.payload.iter().map(|(_, r)| r.len()).sum::<usize>() + self.tail_len
    }

    /// The FPDU's bytes from byte `skip` on, in pieces: framing, the payload ranges (read
    /// through `data`, which gives a locked region's memory), trailer.
    fn pieces_from<'a>(
        &'a self,
        skip: usize,
        data: impl Fn(&MemoryRegion) -> &'a [u8] + 'a,
    ) -> impl Iterator<Item = &'a [u8]> + 'a {
        let mut skip = skip;
        std::iter::once(&self.head[..self.head_len])
            .chain(self.payload.iter().map(move |(mr, r)| &data(mr)[r.clone()]))
            .chain(std::iter::once(&self.tail[..self.tail_len]))
            .filter_map(move |piece| {
                if skip >= piece.len() {
                    skip -= piece.len();
                    None
                } else {
                    let rest = &piece[skip..];
                    skip = 0;
                    Some(rest)
                }
            })
    }

    fn slice_count(&self) -> usize {
        self.payload.len() + 2
    }

    /// The CRC32c over length field, ULPDU and pad (RFC 5044 section 4.1), from `data`.
    fn compute_crc(&mut self, data: &[&[u8]]) {
        let pad = self.tail_len - mpa::CRC_LEN;
        let mut crc = crc::of(&self.head[..self.head_len]);
        for d in data {
            crc = crc::append(crc, d);
        }
        crc = crc::append(crc, &self.tail[..pad]);
        self.tail[pad..self.tail_len].copy_from_slice(&mpa::crc_bytes(crc));
        self.crc_ready = true;
    }
}

impl Transmit {
    /// An empty queue.
    pub fn new() -> Transmit {
        Transmit::default()
    }

    /// True when every queued byte has been written.
    pub fn is_empty(&self) -> bool {
        self.queued == self.written
    }

    /// Bytes queued and not yet written.
    pub fn len(&self) -> usize {
        (self.queued - self.written) as usize
    }

    /// Appends owned bytes.
    pub(super) fn put(&mut self, bytes: &[u8]) {
        self.staging.extend_from_slice(bytes);
        self.queued += bytes.len() as u64;
    }

    /// Frames one FPDU with `writer` (markers and CRC as it says), copying the headers in
    /// `head` (its first `head_len` bytes) and `payload`.
    pub(super) fn put_fpdu<const N: usize>(
        &mut self,
        writer: &mut FpduWriter,
        head: &[u8; N],
        head_len: usize,
        payload: &[u8],
    ) {
        let before = self.staging.len();
        writer.write_message(head, head_len, payload, &mut self.staging);
        self.queued += (self.staging.len() - before) as u64;
    }

    /// Frames and copies one FPDU without markers whose ULPDU is `head` and `payload` (the fast
    /// paths' small messages: the header copied whole, without a call), with its CRC if `crc`;
    /// returns its length, which the caller reports to its [`FpduWriter`] (`skip`).
    #[inline]
    pub(super) fn put_small<const N: usize>(
        &mut self,
        crc: bool,
        head: &[u8; N],
        payload: &[u8],
    ) -> usize {
        let ulpdu_len = N + payload.len();
        let len = mpa::ULPDU_LEN_LEN + ulpdu_len + mpa::pad_len(ulpdu_len) + mpa::CRC_LEN;
        let s = &mut self.staging;
        let start = s.len();
        s.reserve(len + 3);
        s.extend_from_slice(&(ulpdu_len as u16).to_be_bytes());
        s.extend_from_slice(head);
        s.extend_from_slice(payload);
        // Pad and the CRC field (zero without CRCs, see `mpa::Framing::crc`), cut back.
        s.extend_from_slice(&[0; 3 + mpa::CRC_LEN]);
        s.truncate(start + len);
        if crc {
            let at = start + len - mpa::CRC_LEN;
            let sum = mpa::crc_bytes(crc::of(&s[start..at]));
            s[at..].copy_from_slice(&sum);
        }
        self.queued += len as u64;
        len
    }

    /// Queues one FPDU without markers carrying the ULPDU `header` followed by `payload`, left
    /// in the registrations. The caller has checked every range against its region.
    pub(super) fn put_gathered(&mut self, writer: &mut FpduWriter, header: &[u8], payload: Ranges) {
        let framing = writer.framing();
        debug_assert!(!framing.markers, "markers need the copying path");
        let payload_len: usize = payload.iter().map(|(_, r)| r.len()).sum();
        let ulpdu_len = header.len() + payload_len;
        debug_assert!(ulpdu_len <= u16::MAX as usize);
        let mut head = [0u8; HEAD_MAX];
        head[..2].copy_from_slice(&(ulpdu_len as u16).to_be_bytes());
        head[2..2 + header.len()].copy_from_slice(header);
        // Without CRCs the CRC field stays zero (see `mpa::Framing::crc`).
        let tail_len = mpa::pad_len(ulpdu_len) + mpa::CRC_LEN;
        let g = Gathered {
            head,
            head_len: 2 + header.len(),
            payload,
            tail: [0; TAIL_MAX],
            tail_len,
            crc: framing.crc,
            crc_ready: false,
            done: 0,
        };
        let len = g.len();
        debug_assert_eq!(len, framing.fpdu_len(ulpdu_len));
        writer.skip(len);
        self.seal();
        self.parts.push_back(Part::Gathered(Box::new(g)));
        self.queued += len as u64;
    }

    /// The request `seq` completes once everything queued so far is written.
    pub(super) fn complete_when_written(&mut self, seq: u64) {
        self.completions.push_back((self.queued, seq));
    }

    /// True when requests wait for their bytes to be written to complete.
    pub fn completes_when_written(&self) -> bool {
        !self.completions.is_empty()
    }

    /// The next request whose bytes are all written.
    pub(super) fn take_completed(&mut self) -> Option<u64> {
        match self.completions.front() {
            Some(&(at, seq)) if at <= self.written => {
                self.completions.pop_front();
                Some(seq)
            }
            _ => None,
        }
    }

    fn seal(&mut self) {
        let staged = &self.staging[self.staged_from..];
        match staged.len() {
            0 => {}
            n if n <= INLINE_PART => self
                .parts
                .push_back(Part::Inline(SmallVec::from_slice(staged), 0)),
            n if n <= COPY_SEAL_MAX => self
                .parts
                .push_back(Part::Owned(Bytes::copy_from_slice(staged))),
            _ => {
                let b = Bytes::from(std::mem::take(&mut self.staging)).slice(self.staged_from..);
                self.parts.push_back(Part::Owned(b));
            }
        }
        self.staging.clear();
        self.staged_from = 0;
    }

    /// Offers the next queued bytes to `write` as slices (owned bytes and registered memory,
    /// the latter under the regions' read locks for the duration of the call) and consumes as
    /// many as it reports written. `write` is a non-blocking write such as
    /// `try_write_vectored`; its error is returned unchanged and nothing is consumed.
    pub fn write_with<F>(&mut self, write: F) -> io::Result<usize>
    where
        F: FnOnce(&[IoSlice<'_>]) -> io::Result<usize>,
    {
        if self.parts.is_empty() {
            // Owned bytes only (small messages): straight from the staging buffer.
            let staged = &self.staging[self.staged_from..];
            let n = write(&[IoSlice::new(staged)])?.min(staged.len());
            self.staged_from += n;
            if self.staged_from == self.staging.len() {
                self.staging.clear();
                self.staged_from = 0;
            }
            self.written += n as u64;
            return Ok(n);
        }
        // The window: whole parts, up to the slice limit and `GATHER_WINDOW` bytes of gathered
        // FPDUs (`GATHER_WINDOW_CRC` of those with CRC; at least one part); then the staged
        // bytes after the last part, if every part is in it (not sealed: no copy).
        let mut count = 0;
        let mut slices = 0;
        // Gathered bytes without and with CRC.
        let (mut plain, mut crc) = (0, 0);
        for p in &self.parts {
            let (s, len, with_crc) = match p {
                Part::Owned(_) | Part::Inline(..) => (1, 0, false),
                Part::Gathered(g) => (g.slice_count(), g.len() - g.done, g.crc),
            };
            let (taken, window) = match with_crc {
                false => (&mut plain, GATHER_WINDOW),
                true => (&mut crc, GATHER_WINDOW_CRC),
            };
            if count > 0 && (slices + s > MAX_SLICES || *taken + len > window) {
                break;
            }
            count += 1;
            slices += s;
            *taken += len;
        }
        if count == 0 {
            return write(&[]);
        }
        let with_staged = count == self.parts.len()
            && slices < MAX_SLICES
            && self.staged_from < self.staging.len();
        // Lock each region of the window once, in lock order (see `MemoryRegion::read_guard`).
        let mut regions: SmallVec<[MemoryRegion; 4]> = SmallVec::new();
        for p in self.parts.iter().take(count) {
            if let Part::Gathered(g) = p {
                for (mr, _) in &g.payload {
                    regions.push(mr.clone());
                }
            }
        }
        regions.sort_by_key(MemoryRegion::lock_order);
        regions.dedup_by(|a, b| a.ptr_eq(b));
        let guards: SmallVec<[RegionReadGuard<'_>; 4]> =
            regions.iter().map(|r| r.read_guard()).collect();
        let data = |mr: &MemoryRegion| -> &[u8] {
            let i = regions
                .binary_search_by_key(&mr.lock_order(), MemoryRegion::lock_order)
                .expect("every region of the window is locked");
            &guards[i]
        };
        // CRCs of gathered FPDUs not started yet, over the memory as it is now (and stays until
        // the guards go).
        for p in self.parts.iter_mut().take(count) {
            if let Part::Gathered(g) = p {
                if g.crc && !g.crc_ready {
                    let pieces: SmallVec<[&[u8]; 4]> = g
                        .payload
                        .iter()
                        .map(|(mr, r)| &data(mr)[r.clone()])
                        .collect();
                    g.compute_crc(&pieces);
                }
            }
        }
        let mut io: SmallVec<[IoSlice<'_>; 16]> = SmallVec::with_capacity(slices + 1);
        for p in self.parts.iter().take(count) {
            match p {
                Part::Owned(b) => io.push(IoSlice::new(b)),
                Part::Inline(b, done) => io.push(IoSlice::new(&b[*done..])),
                Part::Gathered(g) => io.extend(g.pieces_from(g.done, data).map(IoSlice::new)),
            }
        }
        if with_staged {
            io.push(IoSlice::new(&self.staging[self.staged_from..]));
        }
        let n = write(&io)?;
        let total: usize = io.iter().map(|s| s.len()).sum();
        let n = n.min(total);
        drop(io);
        // Where the write stopped: the part it stopped in and how far into it.
        let mut left = n;
        let mut whole = 0;
        for p in self.parts.iter().take(count) {
            let rest = match p {
                Part::Owned(b) => b.len(),
                Part::Inline(b, done) => b.len() - done,
                Part::Gathered(g) => g.len() - g.done,
            };
            if left < rest {
                break;
            }
            left -= rest;
            whole += 1;
        }
        // Past every part: the rest came from the staged bytes (consumed once the slices,
        // which borrow them, are gone).
        let staged_written = if whole == count && with_staged {
            std::mem::take(&mut left)
        } else {
            0
        };
        // A gathered FPDU under CRC cut by the write: its CRC covers the memory as it was, so
        // the rest of it goes out as a copy taken under the same locks.
        let mut snapshot = None;
        if left > 0 {
            if let Some(Part::Gathered(g)) = self.parts.get(whole) {
                if g.crc {
                    let mut rest = BytesMut::with_capacity(g.len() - g.done - left);
                    for piece in g.pieces_from(g.done + left, data) {
                        rest.put_slice(piece);
                    }
                    snapshot = Some(rest.freeze());
                }
            }
        }
        drop(guards);
        drop(regions);
        if staged_written > 0 {
            self.staged_from += staged_written;
            if self.staged_from == self.staging.len() {
                self.staging.clear();
                self.staged_from = 0;
            }
        }
        for _ in 0..whole {
            self.parts.pop_front();
        }
        if left > 0 {
            match (snapshot, self.parts.front_mut()) {
                (Some(rest), Some(front)) => *front = Part::Owned(rest),
                (None, Some(Part::Owned(b))) => b.advance(left),
                (None, Some(Part::Inline(_, done))) => *done += left,
                (None, Some(Part::Gathered(g))) => g.done += left,
                _ => {}
            }
        }
        // CRCs computed for FPDUs that did not start are stale once the locks are released.
        for p in self.parts.iter_mut().take(count - whole) {
            if let Part::Gathered(g) = p {
                if g.done == 0 {
                    g.crc_ready = false;
                }
            }
        }
        self.written += n as u64;
        Ok(n)
    }

    /// Writes everything into `out` (for tests and tools without a socket).
    pub fn write_all_to(&mut self, out: &mut Vec<u8>) {
        while !self.is_empty() {
            let _ = self.write_with(|slices| {
                let mut n = 0;
                for s in slices {
                    out.extend_from_slice(s);
                    n += s.len();
                }
                Ok(n)
            });
        }
    }
}

impl std::fmt::Debug for Transmit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transmit")
            .field("queued", &self.queued)
            .field("written", &self.written)
            .field("parts", &self.parts.len())
            .finish()
    }
}

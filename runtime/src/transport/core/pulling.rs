//! Pulling the Read chunks of the peer's calls: memory taken a piece at a time, within the
//! budget and a window that grows as the peer answers.
//!
//! A Read chunk is a few bytes of header that name up to the whole call's payload (64 MiB
//! by default). The memory it lands in is taken as the data is about to come, not when the
//! call arrives: each chunk is cut into pieces of at most one pool buffer
//! ([`Memory::max_piece`]), and a piece gets its memory ([`Memory::alloc_sinks`], refused
//! over a budget) only when its RDMA Reads are about to be posted. How much may be waiting
//! for the peer's answer at once is a window ([`Window`]) that starts at one piece and grows
//! by what the peer answers, as TCP's slow start does: a peer that never answers its Read
//! chunks holds one piece per connection, however large the chunks it names, while one that
//! answers soon has the IRD's worth of Reads in flight (seed 004 section 4.3: "limits on RDMA
//! Read operations in progress at the responder").
//!
//! Pieces are taken in the order the calls came, so the call that came first is always the
//! one whose pieces come next: calls of one connection never hold memory waiting on each
//! other. Reads that make no progress close the connection ([`ReadWatch`]): after
//! [`CoreConfig::read_timeout`], or [`PRESSURE_STALL`] when memory is short for others.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::memory::Sinks;
use super::{pair_up, Buf, CallId, CoreConfig, Event, Memory, MemoryErrorKind, Outbox, Owner};
use super::{Slice, Stats};
use crate::id_map::IdMap;
use crate::transport::header::{ReadChunk, Segment};

/// Under memory pressure, RDMA Reads that make no progress for this long close the
/// connection: their sinks are memory others wait for.
pub const PRESSURE_STALL: Duration = Duration::from_secs(2);

/// The window a connection starts with: pieces of more than this go one at a time until the
/// peer has answered some.
const INITIAL_WINDOW: usize = 1 << 20;

/// The most a window grows to.
const MAX_WINDOW: usize = 64 << 20;

/// A byte range of one Read chunk, pulled with one sink.
#[derive(Debug, Clone, Copy)]
struct Piece {
    chunk: usize,
    offset: usize,
    len: usize,
}

/// One call's pulling.
struct Pull<B> {
    /// The call's Read chunks.
    chunks: Vec<ReadChunk>,
    /// Each chunk's Position, memory so far and length.
    sinks: Sinks<B>,
    /// Pieces without memory yet, in order.
    pieces: VecDeque<Piece>,
    /// RDMA Reads of this call not yet complete.
    reads_left: usize,
    failed: bool,
    /// It waited for memory (counted once).
    waited: bool,
}

/// How one call's pulling ended.
pub(super) enum Pulled<B> {
    /// Every byte is here: the chunks' Positions, memory and lengths.
    Done(CallId, Sinks<B>),
    /// It cannot be pulled: the peer refused an RDMA Read (a bad handle or range in its chunk,
    /// seed 004 section 5.5), or no budget could ever hold it.
    Failed(CallId),
}

/// Watches the RDMA Reads in flight for progress. Coarse on purpose (the deadline moves once
/// per period, not per Read): a connection's task re-arms its timer only when it moves.
#[derive(Debug, Clone, Copy)]
struct ReadWatch {
    /// When the current period started.
    since: Instant,
    /// Read completions counted when it started.
    progress: u64,
}

/// How much may wait for the peer's RDMA Read Responses at once.
#[derive(Debug)]
struct Window {
    size: usize,
    /// Bytes of pieces with memory whose Reads are not all complete.
    used: usize,
}

impl Window {
    /// True when a piece of `len` bytes may take memory now: it fits, or nothing is out.
    fn admits(&self, len: usize) -> bool {
        self.used == 0 || self.used + len <= self.size
    }
}

/// The Read chunks of the peer's calls being pulled.
pub(super) struct Puller<B> {
    pulls: IdMap<CallId, Pull<B>>,
    /// Calls with pieces left, in arrival order.
    queue: VecDeque<CallId>,
    /// Reads of pieces with memory not yet posted (the peer's IRD), in order.
    reads_waiting: VecDeque<(CallId, Slice<B>, Segment)>,
    reads_in_flight: usize,
    /// Pieces with memory whose Reads are not all done, in posting order: call, bytes, Reads
    /// left.
    pieces_out: VecDeque<(CallId, usize, usize)>,
    window: Window,
    /// Reads completed, in all.
    progress: u64,
    watch: Option<ReadWatch>,
    /// The front call waits because a budget is spent.
    memory_short: bool,
    /// Memory this side may lend is spent and someone waits for it.
    pressure: bool,
}

impl<B: Buf> Puller<B> {
    pub(super) fn new() -> Puller<B> {
        Puller {
            pulls: IdMap::default(),
            queue: VecDeque::new(),
            reads_waiting: VecDeque::new(),
            reads_in_flight: 0,
            pieces_out: VecDeque::new(),
            window: Window {
                size: INITIAL_WINDOW,
                used: 0,
            },
            progress: 0,
            watch: None,
            memory_short: false,
            pressure: false,
        }
    }

    /// Forgets everything (the connection closed).
    pub(super) fn clear(&mut self) {
        *self = Puller::new();
    }

    /// Starts pulling call `id`'s Read chunks (at least one of them not empty), cut into
    /// pieces of at most `max_piece` bytes.
    pub(super) fn start(&mut self, id: CallId, chunks: Vec<ReadChunk>, max_piece: usize) {
        let max_piece = max_piece.max(1);
        let mut pieces = VecDeque::new();
        for (chunk, c) in chunks.iter().enumerate() {
            let len = c.len() as usize;
            let mut offset = 0;
            while offset < len {
                let n = (len - offset).min(max_piece);
                pieces.push_back(Piece {
                    chunk,
                    offset,
                    len: n,
                });
                offset += n;
            }
        }
        let sinks = chunks
            .iter()
            .map(|c| (c.position, Vec::new(), c.len() as usize))
            .collect();
        self.pulls.insert(
            id,
            Pull {
                chunks,
                sinks,
                pieces,
                reads_left: 0,
                failed: false,
                waited: false,
            },
        );
        self.queue.push_back(id);
    }

    /// True while a call waits for memory (a budget is spent): call [`Puller::pump`] again
    /// once memory has come back.
    pub(super) fn memory_waiting(&self) -> bool {
        self.memory_short && !self.queue.is_empty()
    }

    /// Says whether memory is short for others.
    pub(super) fn set_pressure(&mut self, on: bool) {
        self.pressure = on;
    }

    /// True while Reads are watched for progress.
    pub(super) fn watched(&self) -> bool {
        self.watch.is_some()
    }

    /// Takes memory for pieces while the window and the budget allow, and posts their Reads
    /// while the peer's IRD allows. Calls that can never be pulled come back as `Failed`.
    #[must_use]
    pub(super) fn pump<M: Memory<Buf = B>>(
        &mut self,
        mem: &mut M,
        config: &CoreConfig,
        out: &mut Outbox<B>,
        stats: &mut Stats,
    ) -> Vec<Pulled<B>> {
        let mut ended = Vec::new();
        self.memory_short = false;
        while let Some(&id) = self.queue.front() {
            let Some(pull) = self.pulls.get_mut(&id) else {
                self.queue.pop_front();
                continue;
            };
            let Some(&piece) = pull.pieces.front() else {
                self.queue.pop_front();
                continue;
            };
            if !self.window.admits(piece.len) {
                break;
            }
            let memory = match mem.alloc_sinks(&[piece.len]) {
                Ok(mut memory) => memory.pop().unwrap_or_default(),
                Err(e) if e.kind() == MemoryErrorKind::Exhausted => {
                    self.memory_short = true;
                    if !pull.waited {
                        pull.waited = true;
                        stats.memory_waits += 1;
                        tracing::debug!(error = %e, "a call waits for memory for its Read chunks");
                    }
                    // Memory held and waiting for more: watched, as stalled Reads are.
                    self.arm_watch(config);
                    break;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "no memory for a call's Read chunks");
                    self.queue.pop_front();
                    self.forget(id);
                    ended.push(Pulled::Failed(id));
                    continue;
                }
            };
            pull.pieces.pop_front();
            let remote = sub_segments(&pull.chunks[piece.chunk].segments, piece.offset, piece.len);
            let reads = pair_up(&memory, &remote, piece.len);
            pull.sinks[piece.chunk].1.extend(memory);
            pull.reads_left += reads.len();
            self.window.used += piece.len;
            self.pieces_out.push_back((id, piece.len, reads.len()));
            for (sink, remote) in reads {
                self.reads_waiting.push_back((id, sink, remote));
            }
            if pull.pieces.is_empty() {
                self.queue.pop_front();
            }
        }
        self.post(config, out);
        ended
    }

    /// Posts waiting Reads while the peer's IRD allows.
    fn post(&mut self, config: &CoreConfig, out: &mut Outbox<B>) {
        while self.reads_in_flight < config.max_reads.max(1) {
            let Some((id, sink, remote)) = self.reads_waiting.pop_front() else {
                return;
            };
            if !self.pulls.contains_key(&id) {
                // Its call is gone: the Read never goes, and its piece is out no more.
                self.read_done(id);
                continue;
            }
            self.reads_in_flight += 1;
            self.arm_watch(config);
            out.read(Owner::Responder(id), sink, remote);
        }
    }

    fn arm_watch(&mut self, config: &CoreConfig) {
        if self.watch.is_none() && config.read_timeout.is_some() {
            // The one clock reading of the Read path: when a watch period starts.
            self.watch = Some(ReadWatch {
                since: Instant::now(),
                progress: self.progress,
            });
        }
    }

    /// An RDMA Read of call `id` completed: the calls that ended (this one, when it was its
    /// last Read; others the freed window let through).
    #[must_use]
    pub(super) fn completed<M: Memory<Buf = B>>(
        &mut self,
        id: CallId,
        ok: bool,
        mem: &mut M,
        config: &CoreConfig,
        out: &mut Outbox<B>,
        stats: &mut Stats,
    ) -> Vec<Pulled<B>> {
        let mut ended = Vec::new();
        self.reads_in_flight = self.reads_in_flight.saturating_sub(1);
        self.progress += 1;
        if let Some(at) = self
            .pieces_out
            .iter()
            .position(|&(c, _, left)| c == id && left > 0)
        {
            self.pieces_out[at].2 -= 1;
        }
        while let Some(&(_, len, 0)) = self.pieces_out.front() {
            self.pieces_out.pop_front();
            self.window.used = self.window.used.saturating_sub(len);
            // Slow start: the window grows by what the peer answered.
            self.window.size = (self.window.size + len).min(MAX_WINDOW);
        }
        if let Some(pull) = self.pulls.get_mut(&id) {
            pull.reads_left = pull.reads_left.saturating_sub(1);
            pull.failed |= !ok;
            if pull.reads_left == 0 && (pull.failed || pull.pieces.is_empty()) {
                let failed = pull.failed;
                if let Some(pull) = self.forget(id) {
                    ended.push(match failed {
                        true => Pulled::Failed(id),
                        false => Pulled::Done(id, pull.sinks),
                    });
                }
            }
        }
        ended.extend(self.pump(mem, config, out, stats));
        ended
    }

    /// Counts one Read of call `id` done (completed, or never to be posted): a piece whose
    /// Reads are all done leaves the window, which grows by it (slow start: by what the peer
    /// answered).
    fn read_done(&mut self, id: CallId) {
        if let Some(at) = self
            .pieces_out
            .iter()
            .position(|&(c, _, left)| c == id && left > 0)
        {
            self.pieces_out[at].2 -= 1;
        }
        while let Some(&(_, len, 0)) = self.pieces_out.front() {
            self.pieces_out.pop_front();
            self.window.used = self.window.used.saturating_sub(len);
            self.window.size = (self.window.size + len).min(MAX_WINDOW);
        }
    }

    /// Stops pulling call `id`, its memory given back (what Reads still target stays with
    /// them until they complete).
    fn forget(&mut self, id: CallId) -> Option<Pull<B>> {
        self.queue.retain(|&c| c != id);
        self.pulls.remove(&id)
    }

    /// How long Reads may go without progress: the read timeout, or [`PRESSURE_STALL`]
    /// under memory pressure.
    fn stall_limit(&self, config: &CoreConfig) -> Option<Duration> {
        let timeout = config.read_timeout?;
        Some(match self.pressure {
            true => timeout.min(PRESSURE_STALL),
            false => timeout,
        })
    }

    /// When the Reads must have made progress.
    pub(super) fn next_deadline(&self, config: &CoreConfig) -> Option<Instant> {
        self.watch
            .zip(self.stall_limit(config))
            .map(|(watch, limit)| watch.since + limit)
    }

    /// Ends a watch period that is over: the connection is unusable when memory was held for
    /// the peer's Read chunks all along (Reads in flight, or pieces waiting for more memory)
    /// and no Read completed; otherwise a new period starts if memory is still held.
    pub(super) fn expire(&mut self, now: Instant, config: &CoreConfig, out: &mut Outbox<B>) {
        let (Some(watch), Some(limit)) = (self.watch, self.stall_limit(config)) else {
            return;
        };
        if watch.since + limit > now {
            return;
        }
        let holding = self.reads_in_flight > 0 || self.window.used > 0 || self.memory_waiting();
        if !holding {
            self.watch = None;
        } else if self.progress == watch.progress {
            out.events.push_back(Event::Fatal(format!(
                "the peer's Read chunks made no progress for {limit:?} ({} RDMA Reads unanswered)",
                self.reads_in_flight
            )));
            self.watch = None;
        } else {
            self.watch = Some(ReadWatch {
                since: now,
                progress: self.progress,
            });
        }
    }
}

/// The part `offset..offset + len` of the byte range `segments` cover in order.
fn sub_segments(segments: &[Segment], offset: usize, len: usize) -> Vec<Segment> {
    let mut out = Vec::new();
    let (mut skip, mut left) = (offset as u64, len as u64);
    for s in segments {
        if left == 0 {
            break;
        }
        let seg_len = s.rdma_length as u64;
        if skip >= seg_len {
            skip -= seg_len;
            continue;
        }
        let n = (seg_len - skip).min(left);
        out.push(Segment {
            rdma_handle: s.rdma_handle,
            rdma_length: n as u32,
            rdma_offset: s.rdma_offset.wrapping_add(skip),
        });
        left -= n;
        skip = 0;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(handle: u32, len: u32, offset: u64) -> Segment {
        Segment {
            rdma_handle: handle,
            rdma_length: len,
            rdma_offset: offset,
        }
    }

    #[test]
    fn a_piece_covers_its_part_of_the_segments() {
        let segs = [seg(1, 100, 1000), seg(2, 50, 0), seg(3, 100, 7)];
        assert_eq!(sub_segments(&segs, 0, 250), segs.to_vec());
        assert_eq!(
            sub_segments(&segs, 90, 70),
            vec![seg(1, 10, 1090), seg(2, 50, 0), seg(3, 10, 7)]
        );
        assert_eq!(sub_segments(&segs, 150, 100), vec![seg(3, 100, 7)]);
        assert_eq!(sub_segments(&segs, 249, 1), vec![seg(3, 1, 106)]);
    }

    #[test]
    fn the_window_takes_one_piece_at_least_and_more_within_its_size() {
        let mut w = Window {
            size: INITIAL_WINDOW,
            used: 0,
        };
        assert!(w.admits(4 << 20), "one piece, however large");
        w.used = 4 << 20;
        assert!(!w.admits(1));
        w.used = 512 << 10;
        assert!(w.admits(512 << 10));
        assert!(!w.admits((512 << 10) + 1));
    }
}

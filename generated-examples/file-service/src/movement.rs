//! How one call and its reply moved, read from the transport's counters before and after it.
//!
//! The client's connection counts each call it sends as inline, with Read chunks, or long
//! (RDMA_NOMSG with a Position-Zero Read chunk); the server's connection counts each reply it
//! sends as inline, with Write chunks, or long (RDMA_NOMSG through the Reply chunk). The
//! difference of two [`Snapshot`]s taken around a call, with nothing else in flight, is that
//! call's [`Movement`]. Nothing here is inferred from sizes: a count that does not show exactly
//! one call or one reply gives `None`.

use std::fmt;
use std::sync::Arc;

use rpcrdma::rdma::Provider;
use rpcrdma::transport::core::Stats;
use rpcrdma::transport::pool::PoolStats;
use rpcrdma::transport::{RdmaListener, RdmaTransport};

/// How a call went to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallMove {
    /// In the Send (RDMA_MSG without chunks).
    Inline,
    /// In the Send, with DDP-eligible arguments in Read chunks the server pulled by RDMA Read.
    ReadChunk,
    /// A long call: the whole message in a Position-Zero Read chunk (RDMA_NOMSG).
    Long,
}

/// How a reply came back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyMove {
    /// In the Send (RDMA_MSG; a Write chunk provided for a result that was absent or empty
    /// stays unused).
    Inline,
    /// In the Send, with DDP-eligible results pushed by RDMA Write into Write chunks.
    WriteChunk,
    /// A long reply: the whole message pushed by RDMA Write into the Reply chunk (RDMA_NOMSG).
    ReplyChunk,
    /// Results in Write chunks and the rest in the Reply chunk.
    WriteAndReplyChunk,
}

impl CallMove {
    /// The move of the one call that changed the client's counters from `before` to `after`.
    pub fn between(before: &Stats, after: &Stats) -> Option<CallMove> {
        let d = (
            after.calls_inline - before.calls_inline,
            after.calls_read_chunks - before.calls_read_chunks,
            after.calls_long - before.calls_long,
        );
        match d {
            (1, 0, 0) => Some(CallMove::Inline),
            (0, 1, 0) => Some(CallMove::ReadChunk),
            (0, 0, 1) => Some(CallMove::Long),
            _ => None,
        }
    }
}

impl ReplyMove {
    /// The move of the one reply that changed the server's counters from `before` to `after`.
    pub fn between(before: &Stats, after: &Stats) -> Option<ReplyMove> {
        let d = (
            after.replies_inline - before.replies_inline,
            after.replies_write_chunks - before.replies_write_chunks,
            after.replies_long - before.replies_long,
        );
        match d {
            (1, 0, 0) => Some(ReplyMove::Inline),
            (0, 1, 0) => Some(ReplyMove::WriteChunk),
            (0, 0, 1) => Some(ReplyMove::ReplyChunk),
            (0, 1, 1) => Some(ReplyMove::WriteAndReplyChunk),
            _ => None,
        }
    }
}

impl fmt::Display for CallMove {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            CallMove::Inline => "inline",
            CallMove::ReadChunk => "read chunk",
            CallMove::Long => "long call",
        })
    }
}

impl fmt::Display for ReplyMove {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            ReplyMove::Inline => "inline",
            ReplyMove::WriteChunk => "write chunk",
            ReplyMove::ReplyChunk => "reply chunk",
            ReplyMove::WriteAndReplyChunk => "write+reply chunk",
        })
    }
}

/// The counters of both ends at one moment.
#[derive(Debug, Clone, Copy)]
pub struct Snapshot {
    client: Stats,
    client_pool: PoolStats,
    /// `None` when the server runs elsewhere.
    server: Option<(Stats, PoolStats)>,
}

/// How one call moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Movement {
    /// How the call went; `None` if the counters do not show exactly one call.
    pub call: Option<CallMove>,
    /// How the reply came back; `None` if the server's counters are not at hand or do not
    /// show exactly one reply.
    pub reply: Option<ReplyMove>,
    /// Bytes copied into registered memory to be moved by RDMA (both ends' pools): 0 when
    /// every chunk was sent from and received into registered buffers.
    pub copied: u64,
    /// Bytes RDMA moved straight from the registered buffer they were in (both ends' pools).
    pub zero_copy: u64,
}

impl Snapshot {
    /// What changed from `self` to `later`.
    pub fn movement(&self, later: &Snapshot) -> Movement {
        let (mut copied, mut zero_copy) = pool_delta(&self.client_pool, &later.client_pool);
        let reply = match (&self.server, &later.server) {
            (Some((before, pool_before)), Some((after, pool_after))) => {
                let (c, z) = pool_delta(pool_before, pool_after);
                copied += c;
                zero_copy += z;
                ReplyMove::between(before, after)
            }
            _ => None,
        };
        Movement {
            call: CallMove::between(&self.client, &later.client),
            reply,
            copied,
            zero_copy,
        }
    }
}

fn pool_delta(before: &PoolStats, after: &PoolStats) -> (u64, u64) {
    (
        after.copied_bytes - before.copied_bytes,
        after.zero_copy_bytes - before.zero_copy_bytes,
    )
}

/// Reads the counters of a client connection and, in one process, of its server.
pub struct Meter<P: Provider> {
    transport: Arc<RdmaTransport<P>>,
    listener: Option<Arc<RdmaListener<P>>>,
}

impl<P: Provider> Meter<P> {
    /// A meter of `transport`'s calls, and of the replies of `listener` when the server runs
    /// in this process (its connections' counters are added up).
    pub fn new(transport: Arc<RdmaTransport<P>>, listener: Option<Arc<RdmaListener<P>>>) -> Self {
        Meter {
            transport,
            listener,
        }
    }

    /// Whether replies are counted (the server runs in this process).
    pub fn sees_replies(&self) -> bool {
        self.listener.is_some()
    }

    /// The counters now.
    pub fn snapshot(&self) -> Snapshot {
        let server = self.listener.as_ref().map(|l| {
            l.stats().into_iter().fold(
                Default::default(),
                |(s, p): (Stats, PoolStats), (cs, cp)| (add_stats(s, cs), add_pool(p, cp)),
            )
        });
        Snapshot {
            client: self.transport.stats(),
            client_pool: self.transport.pool_stats(),
            server,
        }
    }
}

fn add_stats(a: Stats, b: Stats) -> Stats {
    Stats {
        calls_inline: a.calls_inline + b.calls_inline,
        calls_read_chunks: a.calls_read_chunks + b.calls_read_chunks,
        calls_long: a.calls_long + b.calls_long,
        replies_inline: a.replies_inline + b.replies_inline,
        replies_write_chunks: a.replies_write_chunks + b.replies_write_chunks,
        replies_long: a.replies_long + b.replies_long,
        ..a
    }
}

fn add_pool(a: PoolStats, b: PoolStats) -> PoolStats {
    PoolStats {
        copied_bytes: a.copied_bytes + b.copied_bytes,
        zero_copy_bytes: a.zero_copy_bytes + b.zero_copy_bytes,
        ..a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(f: impl FnOnce(&mut Stats)) -> Stats {
        let mut s = Stats::default();
        f(&mut s);
        s
    }

    #[test]
    fn one_call_is_named_by_the_counter_that_moved() {
        let zero = Stats::default();
        let cases = [
            (stats(|s| s.calls_inline = 1), Some(CallMove::Inline)),
            (
                stats(|s| s.calls_read_chunks = 1),
                Some(CallMove::ReadChunk),
            ),
            (stats(|s| s.calls_long = 1), Some(CallMove::Long)),
            (zero, None),
            (stats(|s| s.calls_inline = 2), None),
            (
                stats(|s| {
                    s.calls_inline = 1;
                    s.calls_long = 1;
                }),
                None,
            ),
        ];
        for (after, expected) in cases {
            assert_eq!(CallMove::between(&zero, &after), expected, "{after:?}");
        }
    }

    #[test]
    fn one_reply_is_named_by_the_counters_that_moved() {
        let zero = Stats::default();
        let cases = [
            (stats(|s| s.replies_inline = 1), Some(ReplyMove::Inline)),
            (
                stats(|s| s.replies_write_chunks = 1),
                Some(ReplyMove::WriteChunk),
            ),
            (stats(|s| s.replies_long = 1), Some(ReplyMove::ReplyChunk)),
            (
                stats(|s| {
                    s.replies_write_chunks = 1;
                    s.replies_long = 1;
                }),
                Some(ReplyMove::WriteAndReplyChunk),
            ),
            (zero, None),
            (
                stats(|s| {
                    s.replies_inline = 1;
                    s.replies_long = 1;
                }),
                None,
            ),
        ];
        for (after, expected) in cases {
            assert_eq!(ReplyMove::between(&zero, &after), expected, "{after:?}");
        }
    }
}

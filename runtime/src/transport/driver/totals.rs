//! Counters of a client transport or a listener summed over all its connections, closed ones
//! included ([`Totals`]): a connection adds its final counts when it closes.

use parking_lot::Mutex;

use crate::rpc::observe::RdmaStats;
use crate::rpc::TransportStats;
use crate::transport::core::Stats;
use crate::transport::pool::PoolStats;

/// What one connection counts besides its core and pool: the messages and bytes it exchanged.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ConnCounts {
    /// Calls sent (a client) or received (a server).
    pub(crate) calls: u64,
    /// Replies received (a client) or sent (a server).
    pub(crate) replies: u64,
    /// Bytes of the Sends posted (transport headers included).
    pub(crate) bytes_sent: u64,
    /// Bytes of the messages received.
    pub(crate) bytes_received: u64,
}

/// One connection's counters at some moment.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ConnSnapshot {
    pub(crate) core: Stats,
    pub(crate) pool: PoolStats,
    pub(crate) counts: ConnCounts,
}

/// The counters of the connections that closed, and how many were made.
#[derive(Debug, Default)]
pub(crate) struct Totals {
    inner: Mutex<Retired>,
}

#[derive(Debug, Default)]
struct Retired {
    connections: u64,
    closed: u64,
    sum: ConnSnapshot,
}

impl Totals {
    /// A connection was made or accepted.
    pub(crate) fn opened(&self) {
        self.inner.lock().connections += 1;
    }

    /// A connection closed with these final counters; `mark` runs under the same lock, so a
    /// snapshot sees the connection either live or retired, never both or neither.
    pub(crate) fn retire(&self, last: &ConnSnapshot, mark: impl FnOnce()) {
        let mut retired = self.inner.lock();
        retired.closed += 1;
        add(&mut retired.sum, last, false);
        mark();
    }

    /// The sum of the retired connections and of `live`: each live connection's counters
    /// (taken before) with whether it had retired meanwhile, read under the lock.
    pub(crate) fn snapshot<'a>(
        &self,
        live: impl IntoIterator<Item = (ConnSnapshot, Box<dyn Fn() -> bool + 'a>)>,
    ) -> TransportStats {
        let live: Vec<_> = live.into_iter().collect();
        let retired = self.inner.lock();
        let mut sum = retired.sum;
        for (snapshot, has_retired) in &live {
            // A connection that retired after its snapshot was taken is in `retired.sum`
            // already, with counts at least as large.
            if !has_retired() {
                add(&mut sum, snapshot, true);
            }
        }
        TransportStats {
            connections: retired.connections,
            connections_closed: retired.closed,
            calls: sum.counts.calls,
            replies: sum.counts.replies,
            bytes_sent: sum.counts.bytes_sent,
            bytes_received: sum.counts.bytes_received,
            backward_calls: 0,
            dropped: 0,
            rdma: Some(RdmaStats {
                transport: sum.core,
                pool: sum.pool,
            }),
        }
    }
}

/// Adds `b` to `a`; the pool's gauges (`live`, `lent_bytes`) only when `gauges` (a live
/// connection's: a closed one holds nothing). Destructured whole, so that a counter added to
/// either struct is a compile error here until it is summed.
fn add(a: &mut ConnSnapshot, b: &ConnSnapshot, gauges: bool) {
    let Stats {
        calls_inline,
        calls_read_chunks,
        calls_long,
        calls_received,
        replies_inline,
        replies_write_chunks,
        replies_long,
        replies_received_inline,
        replies_received_write_chunks,
        replies_received_long,
        errors_sent,
        dropped,
        remote_invalidations,
        local_invalidations,
        revocations,
        resent,
        unexpected_invalidations,
        padded_sent,
        padding_bytes_sent,
        padded_received,
        replies_read_chunks,
        replies_received_read_chunks,
        dones_sent,
        dones_received,
        exposures_expired,
        memory_waits,
    } = b.core;
    let c = &mut a.core;
    c.calls_inline += calls_inline;
    c.calls_read_chunks += calls_read_chunks;
    c.calls_long += calls_long;
    c.calls_received += calls_received;
    c.replies_inline += replies_inline;
    c.replies_write_chunks += replies_write_chunks;
    c.replies_long += replies_long;
    c.replies_received_inline += replies_received_inline;
    c.replies_received_write_chunks += replies_received_write_chunks;
    c.replies_received_long += replies_received_long;
    c.errors_sent += errors_sent;
    c.dropped += dropped;
    c.remote_invalidations += remote_invalidations;
    c.local_invalidations += local_invalidations;
    c.revocations += revocations;
    c.resent += resent;
    c.unexpected_invalidations += unexpected_invalidations;
    c.padded_sent += padded_sent;
    c.padding_bytes_sent += padding_bytes_sent;
    c.padded_received += padded_received;
    c.replies_read_chunks += replies_read_chunks;
    c.replies_received_read_chunks += replies_received_read_chunks;
    c.dones_sent += dones_sent;
    c.dones_received += dones_received;
    c.exposures_expired += exposures_expired;
    c.memory_waits += memory_waits;
    let PoolStats {
        registrations,
        live,
        rekeys,
        checkouts,
        copied_bytes,
        zero_copy_bytes,
        lent_bytes,
        copied_out_bytes,
    } = b.pool;
    let p = &mut a.pool;
    p.registrations += registrations;
    p.rekeys += rekeys;
    p.checkouts += checkouts;
    p.copied_bytes += copied_bytes;
    p.zero_copy_bytes += zero_copy_bytes;
    p.copied_out_bytes += copied_out_bytes;
    if gauges {
        p.live += live;
        p.lent_bytes += lent_bytes;
    }
    let ConnCounts {
        calls,
        replies,
        bytes_sent,
        bytes_received,
    } = b.counts;
    a.counts.calls += calls;
    a.counts.replies += replies;
    a.counts.bytes_sent += bytes_sent;
    a.counts.bytes_received += bytes_received;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(calls: u64, live: u64) -> ConnSnapshot {
        ConnSnapshot {
            core: Stats {
                calls_inline: calls,
                ..Stats::default()
            },
            pool: PoolStats {
                checkouts: calls,
                live,
                ..PoolStats::default()
            },
            counts: ConnCounts {
                calls,
                ..ConnCounts::default()
            },
        }
    }

    #[test]
    fn closed_connections_keep_their_counts_and_drop_their_gauges() {
        let totals = Totals::default();
        for _ in 0..3 {
            totals.opened();
        }
        let mut marked = false;
        totals.retire(&conn(5, 7), || marked = true);
        assert!(marked);
        let stats = totals.snapshot([
            (conn(2, 3), Box::new(|| false) as Box<dyn Fn() -> bool>),
            // Retired after its snapshot: counted once, as retired.
            (conn(1, 1), Box::new(|| true)),
        ]);
        assert_eq!((stats.connections, stats.connections_closed), (3, 1));
        assert_eq!(stats.calls, 7);
        let rdma = stats.rdma.unwrap();
        assert_eq!(rdma.transport.calls_inline, 7);
        assert_eq!(rdma.pool.checkouts, 7);
        assert_eq!(rdma.pool.live, 3, "gauges of live connections only");
    }
}

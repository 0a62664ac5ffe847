//! The cache's table: calls by key, running or answered, answered ones in least recently used
//! order under the bounds. No clock and no I/O: the caller passes the time in.

use std::collections::hash_map::Entry as MapEntry;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::rpc::deadlines::CoarseInstant;

use super::key::CallKey;
use super::pending::{CachedReply, Pending};
use super::replay::RecordedResults;
use super::{ReplyCacheConfig, ReplyCacheStats};

/// What an entry costs besides its reply's bytes: the entry in the map, its place in the
/// order, and the recording's own fields (counted so that a flood of empty replies is bounded
/// by bytes too, not by entries alone).
pub(crate) const ENTRY_OVERHEAD: usize = std::mem::size_of::<(CallKey, Entry)>()
    + std::mem::size_of::<(u64, Used)>()
    + std::mem::size_of::<RecordedResults>();

/// What to do with a call the cache covers.
#[derive(Debug)]
pub(crate) enum Admission {
    /// A new call: run it, then [`Table::complete`] (or [`Table::abandon`]) entry `id`;
    /// duplicates meanwhile wait on `pending`.
    Run {
        /// The entry's id.
        id: u64,
        /// Where duplicates wait.
        pending: Arc<Pending>,
    },
    /// A retransmission of an answered call: its reply.
    Replay(CachedReply),
    /// A retransmission of a call still running: wait for its end.
    Wait(Arc<Pending>),
}

#[derive(Debug)]
enum State {
    Running(Arc<Pending>),
    Done {
        reply: CachedReply,
        /// Its place in the order of use.
        stamp: u64,
        /// The bytes it counts for.
        size: usize,
    },
}

#[derive(Debug)]
pub(crate) struct Entry {
    id: u64,
    state: State,
}

/// An answered entry's place in the order of use.
#[derive(Debug)]
pub(crate) struct Used {
    /// When it was answered or last replayed (expiry counts from here, as in nfsd).
    at: CoarseInstant,
    key: CallKey,
}

/// The table (see the module's documentation).
#[derive(Debug)]
pub(crate) struct Table {
    config: ReplyCacheConfig,
    entries: HashMap<CallKey, Entry>,
    /// Answered entries by their last use, oldest first (so also the first to expire).
    order: BTreeMap<u64, Used>,
    /// The next entry id and use stamp.
    next: u64,
    bytes: usize,
    stats: ReplyCacheStats,
}

impl Table {
    /// An empty table under `config`'s bounds.
    pub(crate) fn new(config: ReplyCacheConfig) -> Table {
        Table {
            config,
            entries: HashMap::new(),
            order: BTreeMap::new(),
            next: 0,
            bytes: 0,
            stats: ReplyCacheStats::default(),
        }
    }

    /// Looks `key` up at time `now`.
    pub(crate) fn admit(&mut self, key: &CallKey, now: CoarseInstant) -> Admission {
        self.expire(now);
        self.next += 1;
        let stamp = self.next;
        match self.entries.entry(*key) {
            MapEntry::Occupied(mut occupied) => match &mut occupied.get_mut().state {
                State::Running(pending) => {
                    self.stats.in_progress += 1;
                    Admission::Wait(pending.clone())
                }
                State::Done {
                    reply, stamp: old, ..
                } => {
                    self.stats.hits += 1;
                    let old = std::mem::replace(old, stamp);
                    let reply = reply.clone();
                    self.order.remove(&old);
                    self.order.insert(stamp, Used { at: now, key: *key });
                    Admission::Replay(reply)
                }
            },
            MapEntry::Vacant(vacant) => {
                self.stats.misses += 1;
                let pending = Arc::new(Pending::default());
                let state = State::Running(pending.clone());
                vacant.insert(Entry { id: stamp, state });
                Admission::Run { id: stamp, pending }
            }
        }
    }

    /// Keeps `reply` as the answer of entry `id` at time `now`, evicting the least recently
    /// used answers to stay within the bounds; a reply larger than the byte bound alone is
    /// not kept (its entry goes). Returns whether it was kept.
    pub(crate) fn complete(
        &mut self,
        key: &CallKey,
        id: u64,
        reply: CachedReply,
        now: CoarseInstant,
    ) -> bool {
        let size = ENTRY_OVERHEAD + reply.as_ref().map_or(0, |r| r.size());
        let fits = size <= self.config.max_bytes && self.config.max_entries > 0;
        let Some(entry) = self
            .entries
            .get_mut(key)
            .filter(|e| e.id == id && matches!(e.state, State::Running(_)))
        else {
            return false;
        };
        if !fits {
            self.entries.remove(key);
            self.stats.oversized += 1;
            return false;
        }
        self.next += 1;
        let stamp = self.next;
        entry.state = State::Done { reply, stamp, size };
        self.order.insert(stamp, Used { at: now, key: *key });
        self.bytes += size;
        self.expire(now);
        // The newest entry is the last to go, and alone it fits: the loop stops before it.
        while self.order.len() > self.config.max_entries || self.bytes > self.config.max_bytes {
            if !self.remove_oldest() {
                break;
            }
            self.stats.evictions += 1;
        }
        true
    }

    /// Forgets entry `id`, whose execution stopped without an answer: the next
    /// retransmission runs.
    pub(crate) fn abandon(&mut self, key: &CallKey, id: u64) {
        if let MapEntry::Occupied(entry) = self.entries.entry(*key) {
            if entry.get().id == id && matches!(entry.get().state, State::Running(_)) {
                entry.remove();
            }
        }
    }

    /// Drops the answers not used for `max_age`: the order of use is the order of age, so
    /// they are the oldest ones.
    fn expire(&mut self, now: CoarseInstant) {
        while let Some((_, used)) = self.order.first_key_value() {
            if now.saturating_duration_since(used.at) < self.config.max_age {
                break;
            }
            self.remove_oldest();
            self.stats.expired += 1;
        }
    }

    /// Removes the least recently used answer; false when there is none.
    fn remove_oldest(&mut self) -> bool {
        let Some((_, used)) = self.order.pop_first() else {
            return false;
        };
        if let Some(Entry {
            state: State::Done { size, .. },
            ..
        }) = self.entries.remove(&used.key)
        {
            self.bytes -= size;
        }
        true
    }

    /// The counters, and what the table holds now.
    pub(crate) fn stats(&self) -> ReplyCacheStats {
        ReplyCacheStats {
            entries: self.order.len(),
            running: self.entries.len() - self.order.len(),
            bytes: self.bytes,
            ..self.stats
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::key::{ArgsDigest, ClientId};
    use super::*;
    use crate::rpc::auth::Auth;
    use crate::rpc::error::ReplyError;
    use std::time::Duration;

    fn key(xid: u32) -> CallKey {
        key_from("192.0.2.1:800", xid, b"args")
    }

    fn key_from(peer: &str, xid: u32, args: &[u8]) -> CallKey {
        CallKey {
            client: ClientId::new(Some(peer.parse().unwrap()), &Auth::None),
            xid,
            program: 100_003,
            version: 3,
            procedure: 12,
            args: ArgsDigest::new(args, 256),
        }
    }

    fn config(max_entries: usize, max_bytes: usize) -> ReplyCacheConfig {
        ReplyCacheConfig::new()
            .max_entries(max_entries)
            .max_bytes(max_bytes)
            .max_age(Duration::from_secs(120))
    }

    fn reply(len: usize) -> CachedReply {
        let results = Bytes::from(vec![7u8; len]);
        Ok(Arc::new(
            RecordedResults::record(&FixedOpaque(results)).unwrap(),
        ))
    }

    struct FixedOpaque(Bytes);

    impl crate::xdr::Encode for FixedOpaque {
        fn encode(&self, enc: &mut crate::xdr::Encoder) -> crate::xdr::Result<()> {
            enc.put_fixed_opaque(&self.0, self.0.len())
        }
    }

    use bytes::Bytes;

    /// Runs and answers `key` at `now`; panics unless the table said to run it.
    fn answer(table: &mut Table, key: &CallKey, reply: CachedReply, now: CoarseInstant) -> bool {
        match table.admit(key, now) {
            Admission::Run { id, .. } => table.complete(key, id, reply, now),
            other => panic!("expected to run {key:?}: {other:?}"),
        }
    }

    fn is_replay(admission: &Admission) -> bool {
        matches!(admission, Admission::Replay(_))
    }

    #[test]
    fn an_answered_call_is_replayed_and_counted_as_a_hit() {
        let mut table = Table::new(config(8, 1 << 20));
        let now = CoarseInstant::now();
        let k = key(1);
        assert!(answer(&mut table, &k, reply(40), now));
        match table.admit(&k, now) {
            Admission::Replay(Ok(r)) => assert_eq!(r.size(), reply(40).unwrap().size()),
            other => panic!("{other:?}"),
        }
        let stats = table.stats();
        assert_eq!((stats.hits, stats.misses, stats.entries), (1, 1, 1));
        assert_eq!(stats.bytes, ENTRY_OVERHEAD + reply(40).unwrap().size());
    }

    #[test]
    fn an_error_reply_is_kept_too() {
        let mut table = Table::new(config(8, 1 << 20));
        let now = CoarseInstant::now();
        assert!(answer(&mut table, &key(1), Err(ReplyError::SystemErr), now));
        assert!(matches!(
            table.admit(&key(1), now),
            Admission::Replay(Err(ReplyError::SystemErr))
        ));
    }

    #[test]
    fn other_arguments_with_the_same_xid_are_a_miss() {
        let mut table = Table::new(config(8, 1 << 20));
        let now = CoarseInstant::now();
        let first = key_from("192.0.2.1:800", 5, b"remove a");
        assert!(answer(&mut table, &first, reply(8), now));
        let other = key_from("192.0.2.1:800", 5, b"remove b");
        assert!(matches!(table.admit(&other, now), Admission::Run { .. }));
        assert_eq!(table.stats().misses, 2);
    }

    #[test]
    fn another_client_with_the_same_xid_is_a_miss_a_new_port_is_not() {
        let mut table = Table::new(config(8, 1 << 20));
        let now = CoarseInstant::now();
        assert!(answer(
            &mut table,
            &key_from("192.0.2.1:800", 5, b"x"),
            reply(8),
            now
        ));
        let other_host = key_from("192.0.2.2:800", 5, b"x");
        assert!(matches!(
            table.admit(&other_host, now),
            Admission::Run { .. }
        ));
        let reconnected = key_from("192.0.2.1:40123", 5, b"x");
        assert!(is_replay(&table.admit(&reconnected, now)));
    }

    #[test]
    fn a_duplicate_of_a_running_call_waits_on_it() {
        let mut table = Table::new(config(8, 1 << 20));
        let now = CoarseInstant::now();
        let k = key(3);
        let Admission::Run { id, pending } = table.admit(&k, now) else {
            panic!("first is run")
        };
        match table.admit(&k, now) {
            Admission::Wait(p) => assert!(Arc::ptr_eq(&p, &pending)),
            other => panic!("{other:?}"),
        }
        assert_eq!(table.stats().running, 1);
        assert!(table.complete(&k, id, reply(4), now));
        let stats = table.stats();
        assert_eq!((stats.in_progress, stats.running, stats.entries), (1, 0, 1));
    }

    #[test]
    fn an_abandoned_call_runs_again() {
        let mut table = Table::new(config(8, 1 << 20));
        let now = CoarseInstant::now();
        let k = key(3);
        let Admission::Run { id, .. } = table.admit(&k, now) else {
            panic!("first is run")
        };
        table.abandon(&k, id);
        let Admission::Run { id: again, .. } = table.admit(&k, now) else {
            panic!("runs again")
        };
        // The first execution's late word changes nothing.
        assert!(!table.complete(&k, id, reply(4), now));
        assert!(table.complete(&k, again, reply(4), now));
    }

    #[test]
    fn the_entry_bound_evicts_the_least_recently_used() {
        let mut table = Table::new(config(3, 1 << 20));
        let now = CoarseInstant::now();
        for xid in 1..=3 {
            assert!(answer(&mut table, &key(xid), reply(8), now));
        }
        // Used again, 1 is now the most recent: 2 goes first, then 3.
        assert!(is_replay(&table.admit(&key(1), now)));
        assert!(answer(&mut table, &key(4), reply(8), now));
        assert!(answer(&mut table, &key(5), reply(8), now));
        let stats = table.stats();
        assert_eq!((stats.entries, stats.evictions), (3, 2));
        for xid in [1, 4, 5] {
            assert!(is_replay(&table.admit(&key(xid), now)), "{xid}");
        }
        for xid in [2, 3] {
            assert!(
                matches!(table.admit(&key(xid), now), Admission::Run { .. }),
                "{xid}"
            );
        }
    }

    #[test]
    fn the_byte_bound_evicts_until_the_new_reply_fits() {
        let one = ENTRY_OVERHEAD + reply(1000).unwrap().size();
        let mut table = Table::new(config(100, 3 * one));
        let now = CoarseInstant::now();
        for xid in 1..=3 {
            assert!(answer(&mut table, &key(xid), reply(1000), now));
        }
        assert_eq!(table.stats().bytes, 3 * one);
        // Twice the size: two entries go.
        assert!(answer(&mut table, &key(4), reply(2000), now));
        let stats = table.stats();
        assert_eq!((stats.entries, stats.evictions), (2, 2));
        assert!(stats.bytes <= 3 * one);
        assert!(is_replay(&table.admit(&key(3), now)));
        assert!(is_replay(&table.admit(&key(4), now)));
    }

    #[test]
    fn a_reply_larger_than_the_byte_bound_is_not_kept() {
        let mut table = Table::new(config(100, 2048));
        let now = CoarseInstant::now();
        assert!(answer(&mut table, &key(1), reply(16), now));
        assert!(!answer(&mut table, &key(2), reply(4096), now));
        let stats = table.stats();
        assert_eq!((stats.oversized, stats.entries, stats.running), (1, 1, 0));
        // What was kept stays.
        assert!(is_replay(&table.admit(&key(1), now)));
    }

    #[test]
    fn answers_expire_after_their_last_use() {
        let mut table = Table::new(config(8, 1 << 20));
        let start = CoarseInstant::now();
        let at = |secs| start + Duration::from_secs(secs);
        assert!(answer(&mut table, &key(1), reply(8), at(0)));
        assert!(answer(&mut table, &key(2), reply(8), at(0)));
        // A replay at 100 s keeps 1 for another 120 s; 2 is gone at 120 s.
        assert!(is_replay(&table.admit(&key(1), at(100))));
        assert!(matches!(
            table.admit(&key(2), at(120)),
            Admission::Run { .. }
        ));
        assert!(is_replay(&table.admit(&key(1), at(219))));
        assert!(matches!(
            table.admit(&key(1), at(339)),
            Admission::Run { .. }
        ));
        let stats = table.stats();
        assert_eq!(stats.expired, 2);
        assert_eq!(stats.entries, 0);
        assert_eq!(stats.bytes, 0);
    }

    #[test]
    fn no_entries_allowed_keeps_nothing() {
        let mut table = Table::new(config(0, 1 << 20));
        let now = CoarseInstant::now();
        assert!(!answer(&mut table, &key(1), reply(8), now));
        assert!(matches!(table.admit(&key(1), now), Admission::Run { .. }));
    }
}

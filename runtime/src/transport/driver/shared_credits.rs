//! Credits granted from a shared receive queue.
//!
//! Seed 004 section 4.3: the granted value is "the maximum number of RPC calls the responder
//! can handle at once", and the responder "MAY dynamically adjust the granted credit value to
//! match its needs or policies (e.g. to accommodate the available resources in a shared
//! receive queue)". A Send that finds no buffer fails its connection, so the rule kept here is
//! that the receives every connection's grant lets its peer use (its credits, backward
//! credits and RDMA_DONEs: [`RdmaConfig::receives`](super::config::RdmaConfig::receives))
//! add up to at most the buffers the queue holds. Each connection reserves what it grants
//! before it grants it and gives it back when it closes.
//!
//! Grants only grow. Lowering one is allowed, but the server cannot tell when the client has
//! seen the lower value (Sends in either direction are ordered only among themselves), so
//! the buffers the higher grant reserved could never be given back safely before the close.
//!
//! A connection starts with [`FIRST_GRANT`] credits (at most its configured credits), fewer
//! when the queue has fewer free, and is refused when not even one fits. It grows, doubling
//! up to its configured credits, when a call arrives with every credit in use, from what is
//! free beyond an eighth of the queue: that eighth stays for first credits of connections
//! still to come.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Credits a connection on a shared receive queue starts with (at most its configured ones):
/// little for an idle one to keep, and two, so that a client with one call at a time (most of
/// thousands of them) never looks as if it wanted more ([`SharedGrant::grow`]).
pub(crate) const FIRST_GRANT: u32 = 2;

/// The buffers of one shared receive queue and what connections have reserved of them.
#[derive(Debug)]
pub(crate) struct SharedCredits {
    buffers: usize,
    reserved: AtomicUsize,
}

impl SharedCredits {
    /// A ledger of `buffers` buffers, none reserved.
    pub(crate) fn new(buffers: usize) -> Arc<SharedCredits> {
        Arc::new(SharedCredits {
            buffers,
            reserved: AtomicUsize::new(0),
        })
    }

    /// Buffers not reserved by any connection.
    pub(crate) fn free(&self) -> usize {
        self.buffers
            .saturating_sub(self.reserved.load(Ordering::Acquire))
    }

    /// Reserves `want` buffers if that leaves at least `keep` free; none otherwise.
    fn reserve(&self, want: usize, keep: usize) -> bool {
        self.reserved
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |reserved| {
                let after = reserved.checked_add(want)?;
                (after + keep <= self.buffers).then_some(after)
            })
            .is_ok()
    }

    fn release(&self, n: usize) {
        self.reserved.fetch_sub(n, Ordering::AcqRel);
    }
}

/// One connection's grant and the buffers it reserved for it; given back when dropped.
#[derive(Debug)]
pub(crate) struct SharedGrant {
    ledger: Arc<SharedCredits>,
    /// Credits granted now.
    credits: u32,
    /// The most it may grow to: the configured credits.
    most: u32,
    /// Receives one credit does not count: backward credits, the 2004 mode's extra ones.
    extra: usize,
    reserved: usize,
}

impl SharedGrant {
    /// The first grant of a connection configured with `most` credits and `extra` receives
    /// beside them; `None` when the queue cannot take even one credit's worth.
    pub(crate) fn first(
        ledger: &Arc<SharedCredits>,
        most: u32,
        extra: usize,
        per_credit: usize,
    ) -> Option<SharedGrant> {
        let most = most.max(1);
        let mut credits = FIRST_GRANT.min(most);
        loop {
            let want = credits as usize * per_credit + extra;
            if ledger.reserve(want, 0) {
                return Some(SharedGrant {
                    ledger: ledger.clone(),
                    credits,
                    most,
                    extra,
                    reserved: want,
                });
            }
            if credits == 1 {
                return None;
            }
            credits /= 2;
        }
    }

    /// Credits granted now.
    pub(crate) fn credits(&self) -> u32 {
        self.credits
    }

    /// Receives the peer may use at once under this grant.
    pub(crate) fn receives(&self) -> usize {
        self.reserved
    }

    /// Grows the grant (see the module documentation) when `in_use` calls occupy every
    /// credit; the new credits if it grew.
    pub(crate) fn grow(&mut self, in_use: usize) -> Option<u32> {
        if in_use < self.credits as usize || self.credits >= self.most {
            return None;
        }
        let per_credit = (self.reserved - self.extra) / self.credits as usize;
        let keep = self.ledger.buffers / 8;
        let mut target = (self.credits * 2).min(self.most);
        while target > self.credits {
            let more = (target - self.credits) as usize * per_credit;
            if self.ledger.reserve(more, keep) {
                self.reserved += more;
                self.credits = target;
                return Some(target);
            }
            target = self.credits + (target - self.credits) / 2;
        }
        None
    }
}

impl Drop for SharedGrant {
    fn drop(&mut self) {
        self.ledger.release(self.reserved);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_never_add_up_to_more_than_the_queue_holds() {
        let ledger = SharedCredits::new(24);
        let mut grants = Vec::new();
        while let Some(g) = SharedGrant::first(&ledger, 32, 1, 1) {
            grants.push(g);
        }
        // 8 connections of 2 credits + 1 backward receive each: 24.
        assert_eq!(grants.len(), 8);
        assert_eq!(ledger.free(), 0);
        assert!(grants.iter().all(|g| g.credits() == 2 && g.receives() == 3));
        drop(grants.pop());
        assert_eq!(ledger.free(), 3);
        let again = SharedGrant::first(&ledger, 32, 1, 1).expect("room again");
        assert_eq!(again.credits(), 2);
    }

    #[test]
    fn a_first_grant_shrinks_to_what_is_free_and_is_refused_below_one_credit() {
        let ledger = SharedCredits::new(3);
        let g = SharedGrant::first(&ledger, 32, 0, 1).unwrap();
        assert_eq!(g.credits(), 2);
        let h = SharedGrant::first(&ledger, 32, 0, 1).unwrap();
        assert_eq!(h.credits(), 1, "halved to what is free");
        assert!(SharedGrant::first(&ledger, 32, 0, 1).is_none());
        assert_eq!(ledger.free(), 0);
    }

    #[test]
    fn a_grant_grows_only_when_every_credit_is_in_use_and_keeps_an_eighth_free() {
        let ledger = SharedCredits::new(64);
        let mut g = SharedGrant::first(&ledger, 32, 0, 1).unwrap();
        assert_eq!(g.grow(1), None, "a credit unused");
        assert_eq!(g.grow(2), Some(4));
        assert_eq!(g.grow(4), Some(8));
        assert_eq!(g.grow(8), Some(16));
        assert_eq!(g.grow(16), Some(32));
        assert_eq!(g.grow(32), None, "at the configured credits");
        assert_eq!(ledger.free(), 32);
        let mut h = SharedGrant::first(&ledger, 64, 0, 1).unwrap();
        // 30 free, 8 kept: grows by at most 22.
        assert_eq!(h.grow(2), Some(4));
        assert_eq!(h.grow(4), Some(8));
        assert_eq!(h.grow(8), Some(16));
        assert_eq!(h.grow(16), Some(24));
        assert_eq!(ledger.free(), 8);
        assert_eq!(h.grow(24), None);
        drop(g);
        drop(h);
        assert_eq!(ledger.free(), 64);
    }
}

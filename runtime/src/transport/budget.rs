//! Memory budgets: how much registered memory a peer can make this side commit.
//!
//! A peer's header is a few bytes; the memory it asks for (a Read chunk's sink, a reply's
//! buffers) can be gigabytes. Every buffer a connection's pool lends is charged to the
//! connection's [`MemoryBudget`], and that budget is a child of the server's, so one limit
//! holds per connection and another for all of a server's connections together. Memory a
//! peer pushes at this side (Read chunks) is taken only within both limits: a call over them
//! waits until memory comes back, or, when it could never fit, gets the protocol's answer.
//! Memory this side decides to use (its own calls, its replies) is counted but never refused
//! here: what bounds it is the credits, the chunk sizes the peer offered, and the handlers.
//!
//! A charge is given back when the buffer it paid for is dropped (the last [`bytes::Bytes`]
//! frozen from it included), which wakes whoever waits for memory.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// The default budget of one connection: 128 MiB, twice the largest Read chunk total a call
/// may carry by default ([`HeaderLimits::max_read_bytes`](super::header::HeaderLimits)), so one
/// maximal call can be read while another is being handled.
pub const DEFAULT_CONNECTION_BUDGET: usize = 128 << 20;

/// The default budget of a server, all connections together: 1 GiB. On the verbs provider
/// registered memory is pinned; a server meant for more busy clients raises it.
pub const DEFAULT_SERVER_BUDGET: usize = 1 << 30;

/// Limits on registered memory lent out, per connection and per server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryLimits {
    /// Bytes one connection's pool may have lent at once (Read chunk sinks, reply buffers,
    /// buffers handlers or callers hold).
    pub per_connection: usize,
    /// Bytes all connections of one server (one [`serve`](super::serve)) may have lent at once.
    pub per_server: usize,
}

impl Default for MemoryLimits {
    fn default() -> Self {
        MemoryLimits {
            per_connection: DEFAULT_CONNECTION_BUDGET,
            per_server: DEFAULT_SERVER_BUDGET,
        }
    }
}

struct Inner {
    limit: usize,
    used: AtomicUsize,
    parent: Option<MemoryBudget>,
    /// Tasks waiting for memory to come back (only the root's counts).
    waiting: AtomicUsize,
    /// Raised by every refund while someone waits (only the root's counts).
    generation: AtomicUsize,
    freed: Notify,
}

/// A limit on registered memory and what is charged to it now. Cheap to clone; clones share
/// the count.
#[derive(Clone)]
pub struct MemoryBudget {
    inner: Arc<Inner>,
}

impl fmt::Debug for MemoryBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryBudget")
            .field("used", &self.used())
            .field("limit", &self.limit())
            .finish()
    }
}

/// Why a charge was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shortage {
    /// Over a limit now: possible once memory comes back.
    Now,
    /// More than a limit allows at all.
    Never,
}

impl MemoryBudget {
    /// A budget of `limit` bytes with no parent.
    pub fn new(limit: usize) -> MemoryBudget {
        MemoryBudget::with_parent(limit, None)
    }

    /// A budget of `limit` bytes whose charges also count against `self`.
    pub fn child(&self, limit: usize) -> MemoryBudget {
        MemoryBudget::with_parent(limit, Some(self.clone()))
    }

    fn with_parent(limit: usize, parent: Option<MemoryBudget>) -> MemoryBudget {
        MemoryBudget {
            inner: Arc::new(Inner {
                limit,
                used: AtomicUsize::new(0),
                parent,
                waiting: AtomicUsize::new(0),
                generation: AtomicUsize::new(0),
                freed: Notify::new(),
            }),
        }
    }

    /// The limit in bytes.
    pub fn limit(&self) -> usize {
        self.inner.limit
    }

    /// The bytes charged now.
    pub fn used(&self) -> usize {
        self.inner.used.load(Ordering::Relaxed)
    }

    /// True when `bytes` more could be charged now, here and in every parent.
    pub fn has_room(&self, bytes: usize) -> bool {
        let mut at = Some(self);
        while let Some(b) = at {
            if b.used().saturating_add(bytes) > b.limit() {
                return false;
            }
            at = b.inner.parent.as_ref();
        }
        true
    }

    /// True while someone waits for memory under this budget's root (a call's Read chunks
    /// that did not fit).
    pub fn under_pressure(&self) -> bool {
        self.root().inner.waiting.load(Ordering::Relaxed) > 0
    }

    /// True when this budget and every parent have at most half their limit charged.
    pub fn below_half(&self) -> bool {
        let mut at = Some(self);
        while let Some(b) = at {
            if b.used() > b.limit() / 2 {
                return false;
            }
            at = b.inner.parent.as_ref();
        }
        true
    }

    /// Charges `bytes` if this budget and every parent have room for them.
    pub(crate) fn try_charge(&self, bytes: usize) -> Result<Charge, Shortage> {
        let mut at = Some(self);
        while let Some(b) = at {
            if bytes > b.limit() {
                return Err(Shortage::Never);
            }
            at = b.inner.parent.as_ref();
        }
        let mut charged: Vec<&MemoryBudget> = Vec::new();
        let mut at = Some(self);
        while let Some(b) = at {
            let fits = b
                .inner
                .used
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                    let after = used.checked_add(bytes)?;
                    (after <= b.limit()).then_some(after)
                })
                .is_ok();
            if !fits {
                for done in charged {
                    done.inner.used.fetch_sub(bytes, Ordering::AcqRel);
                }
                return Err(Shortage::Now);
            }
            charged.push(b);
            at = b.inner.parent.as_ref();
        }
        Ok(Charge {
            budget: Some(self.clone()),
            bytes,
        })
    }

    /// Charges `bytes` whatever the limits say (memory this side chose to use).
    pub(crate) fn charge(&self, bytes: usize) -> Charge {
        let mut at = Some(self);
        while let Some(b) = at {
            b.inner.used.fetch_add(bytes, Ordering::AcqRel);
            at = b.inner.parent.as_ref();
        }
        Charge {
            budget: Some(self.clone()),
            bytes,
        }
    }

    fn refund(&self, bytes: usize) {
        let mut at = Some(self);
        let mut root = self;
        while let Some(b) = at {
            b.inner.used.fetch_sub(bytes, Ordering::AcqRel);
            root = b;
            at = b.inner.parent.as_ref();
        }
        // Sequentially consistent with the waiter's raising of `waiting` before it looks for
        // memory: either it sees these bytes back, or this sees it waiting.
        std::sync::atomic::fence(Ordering::SeqCst);
        if root.inner.waiting.load(Ordering::SeqCst) > 0 {
            root.inner.generation.fetch_add(1, Ordering::SeqCst);
            root.inner.freed.notify_waiters();
        }
    }

    fn root(&self) -> &MemoryBudget {
        let mut b = self;
        while let Some(p) = &b.inner.parent {
            b = p;
        }
        b
    }

    /// A wait for the next time memory is given back anywhere under this budget's root. It
    /// counts from the moment it is made: take it, look for memory, and await it only if
    /// there was none; memory given back in between ends the wait at once.
    pub(crate) fn freed(&self) -> impl Future<Output = ()> + Send + 'static {
        let root = self.root().clone();
        root.inner.waiting.fetch_add(1, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        let seen = root.inner.generation.load(Ordering::SeqCst);
        let guard = WaitGuard(root);
        async move {
            let root = &guard.0;
            loop {
                let notified = root.inner.freed.notified();
                let mut notified = std::pin::pin!(notified);
                notified.as_mut().enable();
                if root.inner.generation.load(Ordering::SeqCst) != seen {
                    return;
                }
                notified.await;
            }
        }
    }
}

/// Lowers the root's count of waiters when a wait ends or is dropped.
struct WaitGuard(MemoryBudget);

impl Drop for WaitGuard {
    fn drop(&mut self) {
        self.0.inner.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Bytes charged to a budget, given back when dropped.
#[must_use]
pub(crate) struct Charge {
    budget: Option<MemoryBudget>,
    bytes: usize,
}

impl fmt::Debug for Charge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Charge({})", self.bytes)
    }
}

impl Charge {
    /// Moves `bytes` (at most what is left) of this charge into a charge of its own.
    pub(crate) fn split(&mut self, bytes: usize) -> Charge {
        let bytes = bytes.min(self.bytes);
        self.bytes -= bytes;
        Charge {
            budget: self.budget.clone(),
            bytes,
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if let (Some(budget), true) = (&self.budget, self.bytes > 0) {
            budget.refund(self.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_count_in_the_parent_and_come_back_when_dropped() {
        let server = MemoryBudget::new(100);
        let a = server.child(60);
        let b = server.child(60);
        let ca = a.try_charge(50).unwrap();
        assert_eq!((a.used(), server.used()), (50, 50));
        // b has room of its own, the server not.
        assert_eq!(b.try_charge(60).unwrap_err(), Shortage::Now);
        assert_eq!((b.used(), server.used()), (0, 50));
        let cb = b.try_charge(50).unwrap();
        assert_eq!(server.used(), 100);
        drop(ca);
        assert_eq!((a.used(), server.used()), (0, 50));
        drop(cb);
        assert_eq!(server.used(), 0);
    }

    #[test]
    fn a_charge_over_any_limit_can_never_be_had() {
        let server = MemoryBudget::new(100);
        let conn = server.child(1000);
        assert_eq!(conn.try_charge(101).unwrap_err(), Shortage::Never);
        assert_eq!(
            server.child(10).try_charge(11).unwrap_err(),
            Shortage::Never
        );
    }

    #[test]
    fn forced_charges_pass_the_limit_and_block_bounded_ones() {
        let conn = MemoryBudget::new(10).child(10);
        let forced = conn.charge(15);
        assert_eq!(conn.used(), 15);
        assert!(!conn.has_room(1));
        assert_eq!(conn.try_charge(1).unwrap_err(), Shortage::Now);
        drop(forced);
        assert!(conn.has_room(10));
    }

    #[test]
    fn split_charges_give_back_their_own_part() {
        let conn = MemoryBudget::new(100);
        let mut whole = conn.try_charge(30).unwrap();
        let part = whole.split(10);
        drop(whole);
        assert_eq!(conn.used(), 10);
        drop(part);
        assert_eq!(conn.used(), 0);
    }

    #[tokio::test]
    async fn a_refund_anywhere_under_the_root_ends_a_wait() {
        let server = MemoryBudget::new(100);
        let a = server.child(100);
        let b = server.child(100);
        let held = a.try_charge(100).unwrap();
        let wait = b.freed();
        assert_eq!(b.try_charge(1).unwrap_err(), Shortage::Now);
        drop(held);
        // Registered before the refund: completes at once.
        tokio::time::timeout(std::time::Duration::from_secs(10), wait)
            .await
            .expect("the refund ends the wait");
        assert!(b.try_charge(1).is_ok());
    }
}

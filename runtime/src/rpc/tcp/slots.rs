//! The calls one server connection runs at once, counted with atomics.
//!
//! The task reading a connection takes a slot before it reads a call, and the slot goes back
//! when the call's reply has been written (from whichever task wrote it). A tokio
//! `Semaphore` did this with a mutex on every release and a future per acquire; here taking
//! and giving back are one atomic operation each, and only the one reading task ever waits.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use atomic_waker::AtomicWaker;

/// At most `limit` slots in use; one task takes them, any task gives them back.
pub(super) struct Slots {
    in_use: AtomicUsize,
    limit: usize,
    /// The waiting task wants waking when `in_use` falls below this; 0 while it does not
    /// wait (so giving back a slot costs no wake-up on the common path).
    wake_below: AtomicUsize,
    waiter: AtomicWaker,
}

/// One slot in use, given back when dropped.
pub(super) struct Slot(Arc<Slots>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.give_back();
    }
}

impl Slots {
    /// `limit` slots (at least one).
    pub(super) fn new(limit: usize) -> Arc<Slots> {
        Arc::new(Slots {
            in_use: AtomicUsize::new(0),
            limit: limit.max(1),
            wake_below: AtomicUsize::new(0),
            waiter: AtomicWaker::new(),
        })
    }

    /// A slot when one is free, else `cx` is woken when one is. Only one task may take
    /// slots (the connection's reader): taking is a look then an increment.
    pub(super) fn poll_take(self: &Arc<Self>, cx: &mut Context<'_>) -> Poll<Slot> {
        if self.poll_in_use_below(cx, self.limit).is_pending() {
            return Poll::Pending;
        }
        self.in_use.fetch_add(1, Ordering::SeqCst);
        Poll::Ready(Slot(self.clone()))
    }

    /// A slot when one is free, without waiting; any number of tasks may take them this
    /// way (a compare-and-swap).
    pub(super) fn try_take(self: &Arc<Self>) -> Option<Slot> {
        self.in_use
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.limit).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(self.clone()))
    }

    /// `Ready` when every slot is back; otherwise `cx` is woken when they are.
    pub(super) fn poll_all_back(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.poll_in_use_below(cx, 1)
    }

    fn poll_in_use_below(&self, cx: &mut Context<'_>, bound: usize) -> Poll<()> {
        if self.in_use.load(Ordering::SeqCst) < bound {
            return Poll::Ready(());
        }
        self.waiter.register(cx.waker());
        self.wake_below.store(bound, Ordering::SeqCst);
        // A slot given back before `wake_below` was set found nobody to wake: look again.
        // (SeqCst on both sides: either this load sees that slot back, or `give_back`
        // sees `wake_below`.)
        if self.in_use.load(Ordering::SeqCst) < bound {
            self.wake_below.store(0, Ordering::SeqCst);
            return Poll::Ready(());
        }
        Poll::Pending
    }

    fn give_back(&self) {
        let in_use = self.in_use.fetch_sub(1, Ordering::SeqCst) - 1;
        if in_use < self.wake_below.load(Ordering::SeqCst) {
            self.wake_below.store(0, Ordering::SeqCst);
            self.waiter.wake();
        }
    }

    /// Slots in use now.
    #[cfg(test)]
    fn in_use(&self) -> usize {
        self.in_use.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn take(slots: &Arc<Slots>) -> Slot {
        std::future::poll_fn(|cx| slots.poll_take(cx)).await
    }

    #[tokio::test]
    async fn the_reader_waits_at_the_limit_until_a_slot_comes_back() {
        let slots = Slots::new(2);
        let first = take(&slots).await;
        let second = take(&slots).await;
        assert_eq!(slots.in_use(), 2);
        let third = tokio::spawn({
            let slots = slots.clone();
            async move { take(&slots).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!third.is_finished(), "a third slot out of two");
        std::thread::spawn(move || drop(first)).join().unwrap();
        let third = tokio::time::timeout(Duration::from_secs(10), third)
            .await
            .expect("woken when a slot came back")
            .unwrap();
        assert_eq!(slots.in_use(), 2);
        drop((second, third));
        assert_eq!(slots.in_use(), 0);
    }

    #[tokio::test]
    async fn all_back_waits_for_the_last_slot() {
        let slots = Slots::new(4);
        let held: Vec<Slot> = [take(&slots).await, take(&slots).await].into();
        let all_back = tokio::spawn({
            let slots = slots.clone();
            async move { std::future::poll_fn(|cx| slots.poll_all_back(cx)).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!all_back.is_finished());
        let mut held = held;
        drop(held.pop());
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!all_back.is_finished(), "one slot is still out");
        drop(held);
        tokio::time::timeout(Duration::from_secs(10), all_back)
            .await
            .expect("woken when the last slot came back")
            .unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_slot_given_back_on_another_thread_is_missed() {
        let slots = Slots::new(1);
        for _ in 0..2000 {
            let slot = take(&slots).await;
            let thread = std::thread::spawn(move || drop(slot));
            let again = tokio::time::timeout(Duration::from_secs(10), take(&slots))
                .await
                .expect("a slot given back was missed");
            drop(again);
            thread.join().unwrap();
        }
        assert_eq!(slots.in_use(), 0);
    }
}

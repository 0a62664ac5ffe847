//! The waker the stream always holds ([`ReadWake`]): it passes each wake-up on to the reader of
//! the moment, a reading poller or the receive task, and puts a woken poller on the flusher's
//! watch.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::Waker;

use super::{flusher, Shared};

/// The waker the stream holds: passes its wake-ups on to the reader of the moment (see
/// [`Receiver`](super::Receiver)).
pub(crate) struct ReadWake {
    to: Mutex<ReadWakeTargets>,
    /// A poller is the reader ([`ReadWakeTargets::poller`]); read without the lock.
    pub(super) poller_reads: AtomicBool,
    /// A wake-up came and nobody has read since (see [`ReadWake::clear_poller`]).
    pub(super) woken: AtomicBool,
    /// The stream holds this waker for its next wake-up: the last read found nothing more
    /// (tokio registers a waker only then).
    pub(super) registered: AtomicBool,
    /// Wake-ups passed on to a reading poller, counted.
    pub(super) wakes: AtomicU64,
    /// The count at which the flusher last found a poller's wake-up unread ([`Shared::rescue_reader`]).
    pub(super) stale_at: AtomicU64,
    /// The connection's place on the flusher's list: a poller woken is watched.
    flush: Arc<FlushEntry>,
}

/// A connection's place on the flusher's list (see [`flusher`]).
pub(crate) struct FlushEntry {
    /// The connection is on the list.
    pub(super) listed: AtomicBool,
    pub(super) conn: Weak<Shared>,
}

#[derive(Default)]
pub(super) struct ReadWakeTargets {
    /// The receive task's waker.
    pub(super) task: Option<Waker>,
    /// The waker of the last poller that read, kept when it stops (the next is often the same
    /// task: no clone then).
    poller: Option<Waker>,
    /// Changes with [`ReadWakeTargets::poller`]: who the reading poller is.
    ticket: u64,
}

impl ReadWake {
    pub(super) fn new(flush: Arc<FlushEntry>) -> ReadWake {
        ReadWake {
            to: Mutex::new(ReadWakeTargets::default()),
            poller_reads: AtomicBool::new(false),
            woken: AtomicBool::new(false),
            registered: AtomicBool::new(false),
            wakes: AtomicU64::new(0),
            stale_at: AtomicU64::new(u64::MAX),
            flush,
        }
    }

    pub(super) fn targets(&self) -> MutexGuard<'_, ReadWakeTargets> {
        self.to.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The receive task's waker, when it changed.
    pub(super) fn set_task(&self, waker: &Waker) {
        let mut to = self.targets();
        if !to.task.as_ref().is_some_and(|w| w.will_wake(waker)) {
            to.task = Some(waker.clone());
        }
    }

    /// The poller of `waker` reads from now on; returns its ticket, and the waker of the
    /// reading poller it displaced, if any (which must then wait on the completion list).
    #[inline]
    pub(super) fn set_poller(&self, waker: &Waker) -> (u64, Option<Waker>) {
        let mut to = self.targets();
        let mut displaced = None;
        if !to.poller.as_ref().is_some_and(|w| w.will_wake(waker)) {
            let old = to.poller.replace(waker.clone());
            if self.poller_reads.load(Ordering::SeqCst) {
                displaced = old;
            }
            to.ticket += 1;
        }
        self.poller_reads.store(true, Ordering::SeqCst);
        (to.ticket, displaced)
    }

    /// The task of `waker` reads from now on, unless another poller is the reader (then
    /// `None`); its ticket. Unlike [`ReadWake::set_poller`] it never displaces a reader: the
    /// consumers of [`Shared::poll_input`] are many callers of one connection, and each would
    /// otherwise take the stream from the last.
    #[inline]
    pub(super) fn try_set_reader(&self, waker: &Waker) -> Option<u64> {
        let mut to = self.targets();
        if !to.poller.as_ref().is_some_and(|w| w.will_wake(waker)) {
            if self.poller_reads.load(Ordering::SeqCst) {
                return None;
            }
            to.poller = Some(waker.clone());
            to.ticket += 1;
        }
        self.poller_reads.store(true, Ordering::SeqCst);
        Some(to.ticket)
    }

    /// The task of `waker` stops reading, if it is the reader (see [`ReadWake::clear_poller`]).
    pub(super) fn clear_reader(&self, waker: &Waker) {
        if !self.poller_reads.load(Ordering::SeqCst) {
            return;
        }
        let ticket = {
            let to = self.targets();
            match &to.poller {
                Some(w) if w.will_wake(waker) => to.ticket,
                _ => return,
            }
        };
        self.clear_poller(ticket);
    }

    /// The poller of `ticket` stops reading, if it still is the reader: the receive task reads
    /// again, and is woken if a wake-up came that nobody has read yet.
    pub(super) fn clear_poller(&self, ticket: u64) {
        if !self.poller_reads.load(Ordering::SeqCst) {
            return;
        }
        let task = {
            let to = self.targets();
            if to.ticket != ticket {
                return;
            }
            self.poller_reads.store(false, Ordering::SeqCst);
            if !self.woken.load(Ordering::SeqCst) {
                return;
            }
            to.task.clone()
        };
        wake(task);
    }

    /// The poller of `ticket`, if it still is the reader, hands reading to the receive task,
    /// which it wakes.
    pub(super) fn hand_to_task(&self, ticket: u64) {
        self.back_to_task(Some(ticket));
    }

    /// Whatever poller reads hands reading to the receive task, which it wakes (the flusher's
    /// rescue of a poller that stopped reading, see `Shared::rescue_reader`).
    pub(super) fn take_from_poller(&self) {
        self.back_to_task(None);
    }

    /// The receive task reads again and is woken, if a poller reads (the poller of `ticket`,
    /// when given).
    fn back_to_task(&self, ticket: Option<u64>) {
        let task = {
            let to = self.targets();
            if ticket.is_some_and(|t| t != to.ticket) || !self.poller_reads.load(Ordering::SeqCst) {
                return;
            }
            self.poller_reads.store(false, Ordering::SeqCst);
            to.task.clone()
        };
        wake(task);
    }

    /// Wakes the reading poller, if there is one and it is not `running`.
    #[inline]
    pub(super) fn wake_poller_except(&self, running: Option<&Waker>) {
        if !self.poller_reads.load(Ordering::SeqCst) {
            return;
        }
        let poller = {
            let to = self.targets();
            match &to.poller {
                Some(w)
                    if self.poller_reads.load(Ordering::SeqCst)
                        && !running.is_some_and(|r| r.will_wake(w)) =>
                {
                    w.clone()
                }
                _ => return,
            }
        };
        poller.wake();
    }

    /// A reader is about to read: the wake-ups so far are taken care of.
    pub(super) fn reading(&self) {
        if self.woken.load(Ordering::Relaxed) {
            self.woken.store(false, Ordering::SeqCst);
        }
        if self.registered.load(Ordering::Relaxed) {
            self.registered.store(false, Ordering::SeqCst);
        }
    }

    /// The stream holds this waker and has not woken it since: nothing has arrived to read.
    #[inline]
    pub(super) fn armed(&self) -> bool {
        self.registered.load(Ordering::SeqCst) && !self.woken.load(Ordering::SeqCst)
    }
}

/// Wakes `target`, if any, with no lock of the [`ReadWake`] held: the task woken (often on
/// another thread, at once) takes that lock first thing ([`ReadWake::set_poller`],
/// [`ReadWake::set_task`]), and woken under it found it held for the whole wake-up, a system call
/// on the multi-thread runtime, then slept on it and had to be woken again.
fn wake(target: Option<Waker>) {
    if let Some(w) = target {
        w.wake();
    }
}

impl std::task::Wake for ReadWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        let (target, to_poller) = {
            let to = self.targets();
            if self.poller_reads.load(Ordering::SeqCst) {
                (to.poller.clone(), true)
            } else {
                (to.task.clone(), false)
            }
        };
        if !to_poller {
            return wake(target);
        }
        self.wakes.fetch_add(1, Ordering::SeqCst);
        wake(target);
        // A poller woken here is expected to read soon; one whose future is kept but no longer
        // polled would hold the stream forever: the flusher checks (`Shared::rescue_reader`).
        flusher::watch(&self.flush);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::OnceLock;
    use std::task::Wake;

    /// A waker that records, each time it is woken, whether the [`ReadWake`]'s lock was free.
    #[derive(Default)]
    struct Probe {
        read_wake: OnceLock<Weak<ReadWake>>,
        lock_free: Mutex<Vec<bool>>,
    }

    impl Wake for Probe {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }

        fn wake_by_ref(self: &Arc<Self>) {
            let rw = self
                .read_wake
                .get()
                .and_then(Weak::upgrade)
                .expect("read wake");
            let free = rw.to.try_lock().is_ok();
            self.lock_free.lock().unwrap().push(free);
        }
    }

    fn read_wake() -> Arc<ReadWake> {
        // Listed already: the flusher leaves it alone (no thread for this test).
        let flush = Arc::new(FlushEntry {
            listed: AtomicBool::new(true),
            conn: Weak::new(),
        });
        Arc::new(ReadWake::new(flush))
    }

    /// Every wake-up a `ReadWake` passes on (to the reading poller, to the receive task) is
    /// made with its lock released: the task woken takes that lock first thing, and on
    /// another thread found it held for the whole wake-up.
    #[test]
    fn wake_ups_are_passed_on_with_the_lock_released() {
        let rw = read_wake();
        let probe = Arc::new(Probe::default());
        probe.read_wake.set(Arc::downgrade(&rw)).ok();
        let waker = Waker::from(probe.clone());

        // The receive task reads: a stream wake-up goes to it.
        rw.set_task(&waker);
        Wake::wake_by_ref(&rw);
        // A poller reads: a stream wake-up goes to it, and so does wake_poller_except.
        let (ticket, displaced) = rw.set_poller(&waker);
        assert!(displaced.is_none());
        Wake::wake_by_ref(&rw);
        rw.wake_poller_except(None);
        // The poller stops reading after a wake-up it did not read: the task is woken.
        rw.clear_poller(ticket);
        // A poller hands reading to the task, which it wakes.
        let (ticket, _) = rw.set_poller(&waker);
        rw.hand_to_task(ticket);

        let seen = probe.lock_free.lock().unwrap().clone();
        assert_eq!(seen, vec![true; 5], "lock free at each wake-up: {seen:?}");
    }
}

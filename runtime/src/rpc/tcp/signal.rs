//! A flag raised once, which one task waits for and checks on every poll.
//!
//! The task serving a connection looks at "has the server stopped?" and "has the sending
//! side closed?" each time it wakes, that is once per call. With `tokio::sync::watch` /
//! `Notify` each look took the notifier's mutex (~600 instructions per NULL call on the
//! server, callgrind); here it is one atomic load while nothing happens.

use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};

use atomic_waker::AtomicWaker;

/// Raised at most once; one task at a time waits for it.
#[derive(Default)]
pub(super) struct Signal {
    raised: AtomicBool,
    waiter: AtomicWaker,
}

impl Signal {
    /// Raises the flag and wakes the task waiting for it.
    pub(super) fn raise(&self) {
        self.raised.store(true, Ordering::SeqCst);
        self.waiter.wake();
    }

    /// Whether the flag is raised.
    pub(super) fn is_raised(&self) -> bool {
        self.raised.load(Ordering::SeqCst)
    }

    /// `Ready` once raised; otherwise `cx` is woken when it is. Only one task may wait: a
    /// second one takes the place of the first.
    pub(super) fn poll_raised(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.is_raised() {
            return Poll::Ready(());
        }
        self.register(cx.waker())
    }

    /// [`poll_raised`](Self::poll_raised) for a waiter that polls on every wake-up, mostly
    /// with the same waker: `registered` keeps the waker it registered last. While the flag is
    /// down that waker stays registered (only `raise` takes it out), so it is not registered
    /// again (two compare-and-swaps per look saved). Only for a signal with that one waiter:
    /// a waiter displaced by another task's registration would not know it.
    pub(super) fn poll_raised_with(
        &self,
        cx: &mut Context<'_>,
        registered: &mut Option<Waker>,
    ) -> Poll<()> {
        if self.is_raised() {
            return Poll::Ready(());
        }
        if registered.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            return Poll::Pending;
        }
        *registered = Some(cx.waker().clone());
        self.register(cx.waker())
    }

    /// Registers `waker`, then looks at the flag again.
    fn register(&self, waker: &Waker) -> Poll<()> {
        self.waiter.register(waker);
        // Raised between the look and the registration: `raise` may have found no waker.
        if self.is_raised() {
            return Poll::Ready(());
        }
        Poll::Pending
    }

    /// Waits until the flag is raised.
    pub(super) async fn raised(&self) {
        std::future::poll_fn(|cx| self.poll_raised(cx)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn a_waiting_task_wakes_when_raised_from_another_thread() {
        let signal = Arc::new(Signal::default());
        assert!(!signal.is_raised());
        let waiting = tokio::spawn({
            let signal = signal.clone();
            async move { signal.raised().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        let raiser = signal.clone();
        std::thread::spawn(move || raiser.raise()).join().unwrap();
        tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("woken")
            .unwrap();
        // Stays raised.
        signal.raised().await;
    }

    /// A waker that notes it was woken.
    #[derive(Default)]
    struct Woken(AtomicBool);

    impl std::task::Wake for Woken {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_remembered_waker_is_woken_and_a_new_one_takes_its_place() {
        let poll = |signal: &Signal, waker: &Waker, registered: &mut Option<Waker>| {
            signal.poll_raised_with(&mut Context::from_waker(waker), registered)
        };
        let (a, b) = (Arc::new(Woken::default()), Arc::new(Woken::default()));
        let (waker_a, waker_b) = (Waker::from(a.clone()), Waker::from(b.clone()));

        // Polled again and again by the same task: still woken when raised.
        let signal = Signal::default();
        let mut registered = None;
        for _ in 0..3 {
            assert!(poll(&signal, &waker_a, &mut registered).is_pending());
        }
        signal.raise();
        assert!(a.0.load(Ordering::SeqCst));
        assert!(poll(&signal, &waker_a, &mut registered).is_ready());

        // The waiter moved to another task: that one is woken, not the first.
        a.0.store(false, Ordering::SeqCst);
        let signal = Signal::default();
        let mut registered = None;
        assert!(poll(&signal, &waker_a, &mut registered).is_pending());
        assert!(poll(&signal, &waker_b, &mut registered).is_pending());
        signal.raise();
        assert!(b.0.load(Ordering::SeqCst));
        assert!(!a.0.load(Ordering::SeqCst));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_raise_is_missed_while_the_waiter_registers() {
        for _ in 0..2000 {
            let signal = Arc::new(Signal::default());
            let raiser = signal.clone();
            let thread = std::thread::spawn(move || raiser.raise());
            tokio::time::timeout(Duration::from_secs(10), signal.raised())
                .await
                .expect("a raise was missed");
            thread.join().unwrap();
        }
    }
}

//! The first execution of a call, as duplicates that arrive while it runs wait for it.

use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

use super::replay::RecordedResults;
use crate::rpc::error::ReplyError;

/// A reply as the cache keeps it: the recorded results, or the error the handler answered.
pub(crate) type CachedReply = Result<Arc<RecordedResults>, ReplyError>;

/// How a first execution ended, for a duplicate waiting on it.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    /// It answered this.
    Done(CachedReply),
    /// It stopped without answering (its future was dropped: the connection or the server
    /// went away while the handler ran): a waiting duplicate must look again.
    Abandoned,
}

#[derive(Debug)]
enum State {
    Running(Vec<Waker>),
    Ended(Outcome),
}

/// The rendezvous between a first execution and its duplicates.
#[derive(Debug)]
pub(crate) struct Pending {
    state: Mutex<State>,
}

impl Default for Pending {
    fn default() -> Self {
        Pending {
            state: Mutex::new(State::Running(Vec::new())),
        }
    }
}

impl Pending {
    /// Ends the execution with `outcome` (the first end counts) and wakes every waiter.
    pub(crate) fn end(&self, outcome: Outcome) {
        let wakers = {
            let mut st = self.state.lock();
            match &mut *st {
                State::Running(wakers) => {
                    let wakers = std::mem::take(wakers);
                    *st = State::Ended(outcome);
                    wakers
                }
                State::Ended(_) => return,
            }
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// The outcome once the execution has ended; until then `cx` is woken when it does.
    pub(crate) fn poll_outcome(&self, cx: &mut Context<'_>) -> Poll<Outcome> {
        let mut st = self.state.lock();
        match &mut *st {
            State::Ended(outcome) => Poll::Ready(outcome.clone()),
            State::Running(wakers) => {
                // A waiter polled again (first from where the call arrived, then from a task
                // of its own) replaces its waker rather than adding one.
                if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
                    wakers.push(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }

    /// Waits for the outcome.
    pub(crate) async fn outcome(self: &Arc<Self>) -> Outcome {
        std::future::poll_fn(|cx| self.poll_outcome(cx)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn waiters_are_woken_once_by_the_first_end() {
        let pending = Pending::default();
        let count = Arc::new(Count::default());
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(pending.poll_outcome(&mut cx).is_pending());
        assert!(pending.poll_outcome(&mut cx).is_pending());
        pending.end(Outcome::Done(Err(ReplyError::SystemErr)));
        pending.end(Outcome::Abandoned);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        match pending.poll_outcome(&mut cx) {
            Poll::Ready(Outcome::Done(Err(ReplyError::SystemErr))) => {}
            other => panic!("{other:?}"),
        }
    }
}

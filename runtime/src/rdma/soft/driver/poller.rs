//! A task waiting for completions ([`NextCompletion`]): it takes one the core holds, reads the
//! stream itself when nobody else does (see [`Receiver`](super::Receiver)), or waits on the
//! connection's completion list.

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, Waker};

use super::{flusher, Shared};
use crate::rdma::Completion;

/// A poller waiting in [`Shared::next_completion`]: its waker is on the list while it waits,
/// or it is the stream's reader (see [`Receiver`](super::Receiver)). A future written out rather than an
/// `async fn`: a poll is then one call, not three.
pub(crate) struct NextCompletion<'a> {
    shared: &'a Shared,
    /// The waker last put on the list.
    waker: Option<Waker>,
    /// This poller's ticket as the stream's reader, once it has been it.
    reader: Option<u64>,
}

/// What a poller's read of the stream came to.
enum Reading {
    /// A completion.
    Done(Completion),
    /// Nothing more to read: the poller is the reader, woken when there is.
    Waiting,
    /// Someone else is reading.
    Busy,
}

impl Shared {
    /// Puts `waker` on the completion list (a reading poller that another displaced).
    fn push_waiter(&self, waker: Waker) {
        let mut list = self.cq_waiters.lock().unwrap_or_else(|e| e.into_inner());
        if !list.iter().any(|w| w.will_wake(&waker)) {
            list.push(waker);
            self.pollers.store(list.len(), Ordering::SeqCst);
        }
    }
}

impl std::future::Future for NextCompletion<'_> {
    type Output = Completion;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Completion> {
        let this = &mut *self;
        let shared = this.shared;
        // A poller that has been the reader reads first: what it reads comes after any
        // completion already there, and it takes the oldest.
        if this.reader.is_none() || shared.hook.get().is_some() {
            if let Some(c) = shared.core().poll_completion() {
                return Poll::Ready(c);
            }
        }
        let reading = shared.hook.get().is_none()
            && match this.read(cx) {
                Reading::Done(c) => return Poll::Ready(c),
                // The reader is woken by the stream and by [`Shared::wake_pollers`].
                Reading::Waiting => true,
                Reading::Busy => false,
            };
        if !reading {
            this.register(cx.waker());
        }
        // A completion that came before the registration found no waker to wake.
        match shared.take_completion() {
            Some(c) => Poll::Ready(c),
            None => Poll::Pending,
        }
    }
}

impl NextCompletion<'_> {
    pub(super) fn new(shared: &Shared) -> NextCompletion<'_> {
        NextCompletion {
            shared,
            waker: None,
            reader: None,
        }
    }

    fn register(&mut self, waker: &Waker) {
        let mut list = self
            .shared
            .cq_waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if !list.iter().any(|w| w.will_wake(waker)) {
            list.push(waker.clone());
            self.shared.pollers.store(list.len(), Ordering::SeqCst);
        }
        if !self.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
            self.waker = Some(waker.clone());
        }
    }

    /// Reads the stream as the receive task would, when nobody else is reading, until a
    /// completion comes (returned) or nothing is left to read; then this poller is the one the
    /// stream's wake-ups go to (see [`Receiver`](super::Receiver)).
    fn read(&mut self, cx: &mut Context<'_>) -> Reading {
        let shared = self.shared;
        // A bulk transfer coming in is read by the receive task, beside this poller's task: a
        // poller reading it took it in turns with the receive task, a hand-over per read (1 MiB
        // RDMA Reads 80-83 % of TCP's throughput instead of 84-90 %, `rdma_soft -- throughput`).
        // So is the input of a bulk transfer going out, the peer's confirmations, when the
        // poller is not a task (a caller in `block_on`): as the reader, its thread, a third one
        // beside the runtime's workers, was woken for each of them. 1 MiB RDMA Writes without
        // CRC posted from `block_on`, three alternating pairs of `rdma_soft -- profile write
        // crc-off`: 4,383 / 4,472 / 4,408 MB/s at 0.321-0.333 ns/B of CPU with the receive
        // task reading, 4,159 / 4,108 / 4,025 at 0.369-0.374 with the poller; posted from a
        // task, who reads made no difference (4,678 / 4,680 against 4,647 / 4,659).
        if shared.bulk() || (shared.outbound_bulk() && tokio::task::try_id().is_none()) {
            if let Some(ticket) = self.reader {
                shared.read_wake.hand_to_task(ticket);
            }
            return Reading::Busy;
        }
        let (ticket, displaced) = shared.read_wake.set_poller(cx.waker());
        self.reader = Some(ticket);
        if let Some(other) = displaced {
            shared.push_waiter(other);
        }
        // The stream will wake this poller (just made the target) when bytes come: no read
        // can find any before.
        if shared.read_wake.armed() {
            return Reading::Waiting;
        }
        let step = {
            // Someone else reading (the receive task, another poller) wakes the pollers with
            // what it finds.
            let Ok(mut guard) = shared.rx.try_lock() else {
                return Reading::Busy;
            };
            let Some(rx) = guard.as_mut() else {
                return Reading::Busy;
            };
            shared.receive_step(rx, true, true)
        };
        match step {
            Poll::Pending => Reading::Waiting,
            Poll::Ready(None) => {
                shared.kick();
                Reading::Busy
            }
            Poll::Ready(Some(mut input)) => {
                let taken = input.taken.take();
                if shared.after_input(input, Some(cx.waker())) {
                    flusher::watch(&shared.flush);
                }
                if let Some(c) = taken {
                    return Reading::Done(c);
                }
                // A message longer than one read, or a bulk transfer under way: the receive
                // task reads the rest, while this poller's task goes on with its own work on
                // another worker, as it did before pollers read (1 MiB RDMA Reads were slower
                // with the poller reading them).
                shared.read_wake.hand_to_task(ticket);
                Reading::Busy
            }
        }
    }
}

impl Drop for NextCompletion<'_> {
    /// Leaves the list, if still on it, and stops being the stream's reader.
    fn drop(&mut self) {
        if let Some(ticket) = self.reader {
            self.shared.read_wake.clear_poller(ticket);
        }
        let Some(mine) = &self.waker else { return };
        // Usually a wake-up took the whole list (see `Shared::wake_pollers`). `pollers` is the
        // list's length, stored under its lock after every change; this thread's own push
        // stored at least 1, so 0 means a later change emptied the list, waker and all.
        if self.shared.pollers.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut list = self
            .shared
            .cq_waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(i) = list.iter().position(|w| w.will_wake(mine)) {
            list.swap_remove(i);
            self.shared.pollers.store(list.len(), Ordering::SeqCst);
        }
    }
}

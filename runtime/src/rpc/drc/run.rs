//! The futures the server runs for a call the cache covers: the first execution, which
//! records its reply, and a duplicate, which waits for it or replays it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use super::key::CallKey;
use super::pending::{CachedReply, Outcome, Pending};
use super::replay::RecordedResults;
use super::table::Admission;
use super::ReplyCache;
use crate::rpc::error::ReplyError;
use crate::rpc::server::{CatchPanic, HandlerFuture, HandlerResult};
use crate::xdr::{self, Encode, Encoder};

/// Results replayed from the cache: encoded again by the transport, for its own chunks.
struct Replayed(Arc<RecordedResults>);

impl Encode for Replayed {
    fn encode(&self, enc: &mut Encoder) -> xdr::Result<()> {
        self.0.encode(enc)
    }
}

/// A cached reply as a handler's result.
pub(super) fn replayed(reply: CachedReply) -> HandlerResult {
    reply.map(|results| Box::new(Replayed(results)) as Box<dyn Encode + Send>)
}

/// What the first execution of entry `id` owes the cache: its reply, or word that there will
/// be none (when dropped unfinished).
struct Owed {
    cache: Arc<ReplyCache>,
    key: CallKey,
    id: u64,
    pending: Arc<Pending>,
    paid: bool,
}

impl Owed {
    /// Records `result`, keeps it as the entry's answer and hands it to the waiters.
    fn pay(mut self, result: &HandlerResult) {
        let reply = match result {
            Ok(value) => RecordedResults::record(&**value)
                .map(Arc::new)
                .map_err(|error| {
                    // The transport's encoding of the same value fails the same way and
                    // answers SYSTEM_ERR (`encode_reply`); so do the replays.
                    tracing::debug!(xid = self.key.xid, %error, "results do not encode");
                    ReplyError::SystemErr
                }),
            Err(error) => Err(*error),
        };
        self.cache.complete(&self.key, self.id, reply.clone());
        self.pending.end(Outcome::Done(reply));
        self.paid = true;
    }
}

impl Drop for Owed {
    fn drop(&mut self) {
        if !self.paid {
            self.cache.abandon(&self.key, self.id);
            self.pending.end(Outcome::Abandoned);
        }
    }
}

/// The first execution of a call the cache covers.
///
/// A panic in the handler becomes SYSTEM_ERR here rather than in the transport, so that it is
/// the reply kept: the handler may have changed something before it panicked, and at most
/// once means a retransmission must not run it again.
///
/// Dropped unfinished (its caller went away), it hands the handler to a task of its own that
/// runs it to the end and keeps the reply, within [`Orphans`]' bound.
pub(super) struct FirstRun {
    future: Option<CatchPanic>,
    owed: Option<Owed>,
}

/// Counts the executions running on after their caller went away, up to a bound.
#[derive(Debug)]
pub(super) struct Orphans {
    count: Arc<AtomicUsize>,
    max: usize,
}

impl Orphans {
    pub(super) fn new(max: usize) -> Orphans {
        Orphans {
            count: Arc::default(),
            max,
        }
    }

    /// How many run now.
    pub(super) fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// A place for one more, if the bound allows: held while it runs.
    fn admit(&self) -> Option<OrphanTicket> {
        self.count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .ok()
            .map(|_| OrphanTicket(self.count.clone()))
    }
}

/// One orphan's place in [`Orphans`].
struct OrphanTicket(Arc<AtomicUsize>);

impl Drop for OrphanTicket {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl FirstRun {
    pub(super) fn new(
        cache: Arc<ReplyCache>,
        key: CallKey,
        id: u64,
        pending: Arc<Pending>,
        future: HandlerFuture,
    ) -> FirstRun {
        FirstRun {
            future: Some(CatchPanic::new(future)),
            owed: Some(Owed {
                cache,
                key,
                id,
                pending,
                paid: false,
            }),
        }
    }
}

impl Future for FirstRun {
    type Output = HandlerResult;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<HandlerResult> {
        let Some(future) = self.future.as_mut() else {
            return Poll::Ready(Err(ReplyError::SystemErr));
        };
        let result = ready!(Pin::new(future).poll(cx));
        self.future = None;
        if let Some(owed) = self.owed.take() {
            owed.pay(&result);
        }
        // The first reply goes out from the handler's own results (over RPC-over-RDMA, its
        // registered buffers move without a copy); only replays use the recording.
        Poll::Ready(result)
    }
}

impl Drop for FirstRun {
    fn drop(&mut self) {
        let (Some(future), Some(owed)) = (self.future.take(), self.owed.take()) else {
            return;
        };
        // Without a runtime to run on, or past the bound, `owed` is dropped unpaid: the entry
        // is abandoned and a duplicate runs the call.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let Some(ticket) = owed.cache.orphans.admit() else {
            tracing::debug!(
                xid = owed.key.xid,
                "too many calls running on without their caller: this one is dropped"
            );
            return;
        };
        tracing::debug!(
            xid = owed.key.xid,
            "the caller went away: the call runs on so that its retransmission gets the reply"
        );
        // A task of its own, not a `FirstRun`: if the runtime drops it, it abandons the entry
        // instead of handing itself on again.
        runtime.spawn(async move {
            let _ticket = ticket;
            let result = future.await;
            owed.pay(&result);
        });
    }
}

/// A retransmission that arrived while the first execution ran: it waits for that reply
/// (`future`, its own handler, is never run then). If the first execution is dropped
/// unfinished, the duplicate looks again and may be the one that runs.
pub(super) async fn duplicate(
    cache: Arc<ReplyCache>,
    key: CallKey,
    mut pending: Arc<Pending>,
    future: HandlerFuture,
) -> HandlerResult {
    loop {
        match pending.outcome().await {
            Outcome::Done(reply) => return replayed(reply),
            Outcome::Abandoned => match cache.admit(&key) {
                Admission::Replay(reply) => return replayed(reply),
                Admission::Wait(next) => pending = next,
                Admission::Run { id, pending } => {
                    return FirstRun::new(cache, key, id, pending, future).await
                }
            },
        }
    }
}

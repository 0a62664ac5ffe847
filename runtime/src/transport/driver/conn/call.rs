//! The requester's side of a connection: a call started under the connection's lock, its
//! waiter, the wait for its reply ([`AwaitReply`]), its cancellation when its future is dropped,
//! and the sweep of calls past the default timeout.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::encoders::EncoderUse;
use super::Conn;
use crate::rdma::Connection;
use crate::rpc::deadlines::{self, CoarseInstant, Expire};
use crate::rpc::observe::{self, Moved};
use crate::rpc::{self, Reply, TransportError};
use crate::transport::core::{CallId, OutgoingCall, Slice, Stats, WriteTarget};
use crate::transport::pool::PoolBuf;
use crate::xdr::Encoder;

/// A call waiting for its reply: the reply lands here, under the connection's lock, and the
/// caller takes it from here ([`Conn::poll_reply`]). (A oneshot channel per call cost an
/// allocation and its own synchronisation on top of the lock every call takes anyway.)
pub(super) struct Waiter {
    /// The reply or the failure, once the call is over.
    outcome: Option<Result<Reply, TransportError>>,
    /// The caller's waker, once it waited.
    waker: Option<Waker>,
    /// When the connection's sweeper fails the call, and the limit to report (the default
    /// timeout, see [`deadlines`]); `None` when the call has a timer of its own, or none.
    deadline: Option<(CoarseInstant, Duration)>,
}

impl Waiter {
    pub(super) fn new(waker: Option<Waker>, deadline: Option<(CoarseInstant, Duration)>) -> Waiter {
        Waiter {
            outcome: None,
            waker,
            deadline,
        }
    }

    /// Ends the call with `outcome` and wakes its caller (a second outcome is ignored).
    pub(super) fn finish(&mut self, outcome: Result<Reply, TransportError>) {
        if self.outcome.is_none() {
            self.outcome = Some(outcome);
            if let Some(waker) = self.waker.take() {
                waker.wake();
            }
        }
    }
}
impl<C: Connection> Conn<C> {
    /// Sends a message of an extension's header type and waits for its answer's body.
    pub(crate) async fn extension_call(
        self: &Arc<Self>,
        htype: u32,
        flags: u32,
        body: Bytes,
    ) -> Result<Bytes, TransportError> {
        let id = {
            let mut st = self.state.lock();
            let id = st
                .core
                .start_extension(htype, flags, body, Instant::now())?;
            st.waiters.insert(id, Waiter::new(None, None));
            self.flush(&mut st);
            id
        };
        let mut guard = Cancel {
            conn: self,
            id,
            armed: true,
        };
        let reply = AwaitReply::new(self, id, false);
        let outcome = match self.timeout {
            Some(t) => match tokio::time::timeout(t, reply).await {
                Ok(r) => r,
                Err(_) => return Err(TransportError::TimedOut(t)),
            },
            None => reply.await,
        };
        guard.armed = false;
        outcome.map(|reply| reply.message)
    }

    /// Sends a call on this connection and waits for its reply: with the XID in `xid`, or a
    /// fresh one, left there for a retransmission to reuse.
    pub(crate) async fn call(
        self: &Arc<Self>,
        call: &rpc::Call<'_>,
        xid: &mut Option<u32>,
        plan: ReplyPlan,
        timeout: Option<Duration>,
        backward: bool,
    ) -> Result<Reply, rpc::Error> {
        // The waiter holds this task's waker from the start: the first wait for the reply
        // need not lock the state to hand it over ([`AwaitReply`]).
        let waker = std::future::poll_fn(|cx| Poll::Ready(cx.waker().clone())).await;
        // The call starts in a plain function: what it needs on the way is not kept in this
        // future, which is copied whole into the caller's box.
        let (id, timer, observed) = self.start_call(call, xid, plan, timeout, backward, waker)?;
        // Dropping this future cancels the call: its handles are invalidated at once.
        let mut guard = Cancel {
            conn: self,
            id,
            armed: true,
        };
        let reply = AwaitReply::new(self, id, true);
        let outcome = match timer {
            // Boxed: a timer of the call's own is rare, and inline its future (a tokio
            // `Sleep`) would make every call's future larger.
            Some(t) => match Box::pin(tokio::time::timeout(t, reply)).await {
                Ok(r) => r,
                Err(_) => return Err(TransportError::TimedOut(t).into()),
            },
            None => reply.await,
        };
        guard.armed = false;
        if let Ok(reply) = &outcome {
            self.observe_reply(call, reply);
            if let (Some(sent), Some(xid)) = (observed, *xid) {
                self.record_reply(sent, xid, reply);
            }
        }
        outcome.map_err(rpc::Error::from)
    }

    /// Records in the call's span how its reply came (see [`observe`]): the Write chunks it
    /// brought, and whether it was RDMA_NOMSG through the Reply chunk.
    #[cold]
    fn record_reply(&self, sent: Sent, xid: u32, reply: &Reply) {
        let long = Conn::<C>::took_nomsg(&mut self.state.lock(), xid);
        let written = reply.chunks.as_ref().map_or(0, |c| c.write_len()) as u64;
        let message = reply.message.len() as u64;
        let moved = match (written > 0, long) {
            (false, false) => Moved::Inline,
            (true, false) => Moved::WriteChunks,
            (false, true) => Moved::ReplyChunk,
            (true, true) => Moved::WriteAndReplyChunks,
        };
        let (rdma, copied) = match long {
            true => (written + message, 0),
            false => (written, message),
        };
        observe::record_reply(moved, sent.rdma + rdma, sent.copied + copied);
    }

    /// Encodes and starts a call (see [`Conn::call`]) whose waiter wakes `waker`; its id, the
    /// timer it needs of its own, if any, and, when a subscriber wants its span, how it went
    /// out.
    fn start_call(
        self: &Arc<Self>,
        call: &rpc::Call<'_>,
        xid: &mut Option<u32>,
        plan: ReplyPlan,
        timeout: Option<Duration>,
        backward: bool,
        waker: Waker,
    ) -> Result<(CallId, Option<Duration>, Option<Sent>), rpc::Error> {
        if self.is_closed() {
            return Err(TransportError::Closed.into());
        }
        let ReplyPlan {
            targets: write_chunks,
            reply_inline,
            room,
        } = plan;
        let (xid, policy, reply_chunk, pad_threshold) = {
            let mut st = self.state.lock();
            // A first attempt takes a fresh XID; a retransmission keeps it.
            let xid = *xid.get_or_insert_with(|| st.core.next_xid());
            // Read-Read (2004 mode): a long reply comes as a Read chunk instead.
            // Not beside Write chunks when so configured (the Linux kernel's server fails such a
            // call: RdmaConfig::reply_chunk_with_write_chunks).
            let reply_chunk = (!backward
                && !st.core.read_read_requester()
                && (self.reply_chunk_with_write_chunks || write_chunks.is_empty())
                && st.core.needs_reply_chunk(reply_inline, write_chunks.len()))
            .then(|| {
                call.options
                    .max_reply
                    .or(call.reply.max_len)
                    .unwrap_or(st.core.config().default_reply_chunk)
            });
            (
                xid,
                st.core.call_policy(),
                reply_chunk,
                st.core.pad_threshold(),
            )
        };
        let kept = (!backward && pad_threshold.is_none()).then_some(EncoderUse::Call(policy));
        let mut enc = match kept {
            Some(usage) => self.encoder(usage),
            None if backward => Box::new(Encoder::new()),
            None => Box::new(Encoder::for_call(policy)),
        };
        if let Some(thresh) = pad_threshold {
            enc.record_pad_points(thresh);
        }
        let encoded = call.encode(xid, &mut enc);
        let (message, moved) = self.finish_encoder(enc, kept);
        encoded.map_err(rpc::Error::Encode)?;
        // A timeout of the call's own gets an exact timer; the default one only a deadline
        // the connection's sweeper enforces: a tokio timer per call costs every call (see
        // `deadlines`).
        let (timer, deadline) = match (timeout, self.timeout) {
            (Some(own), _) => (Some(own), None),
            (None, Some(limit)) if self.sweeping(limit) => {
                (None, Some((CoarseInstant::after(limit), limit)))
            }
            (None, limit) => (limit, None),
        };
        // What the span needs, only when a subscriber wants it: the sizes, and the core's
        // counters around the call, which say how it went out.
        let observed = observe::calls_enabled().then(|| {
            let moved: usize = moved.iter().map(|m| m.data.len()).sum();
            (message.len() as u64, moved as u64)
        });
        let mut st = self.state.lock();
        let before = observed.map(|_| st.core.stats());
        let id = st.core.start_call(
            OutgoingCall {
                xid,
                message,
                moved,
                write_chunks,
                reply_chunk,
                timeout: None,
                backward,
                room,
            },
            Instant::now(),
            &mut &self.pool,
        )?;
        st.counts.calls += 1;
        self.note_credits(&mut st);
        let sent = match (observed, before) {
            (Some((inline, moved)), Some(before)) => {
                Some(Sent::record(xid, &before, &st.core.stats(), inline, moved))
            }
            _ => None,
        };
        st.waiters.insert(id, Waiter::new(Some(waker), deadline));
        self.flush(&mut st);
        Ok((id, timer, sent))
    }

    /// Tells `credits_exhausted` when calls start waiting for a credit, once per episode
    /// (until a call finds none waiting).
    #[inline]
    fn note_credits(&self, st: &mut super::State) {
        let waiting = st.core.calls_queued() > 0 && !st.core.negotiating();
        if waiting != st.credit_wait {
            st.credit_wait = waiting;
            if waiting {
                let credits = u64::from(st.core.config().credits);
                observe::credits_exhausted("rdma", self.peer, credits);
            }
        }
    }

    /// The outcome of call `id` once it has one (its waiter is then gone), else `cx` is woken
    /// when it has; with `wake` false, nobody is (the caller reads the input itself, see
    /// [`AwaitReply`], and the hook it runs must not wake it). A call without a waiter was
    /// failed by the connection's end.
    fn poll_reply(
        &self,
        id: CallId,
        cx: &mut Context<'_>,
        wake: bool,
    ) -> Poll<Result<Reply, TransportError>> {
        let mut st = self.state.lock();
        let Some(waiter) = st.waiters.get_mut(&id) else {
            return Poll::Ready(Err(TransportError::Closed));
        };
        if waiter.outcome.is_none() {
            if !wake {
                waiter.waker = None;
            } else if !waiter
                .waker
                .as_ref()
                .is_some_and(|w| w.will_wake(cx.waker()))
            {
                waiter.waker = Some(cx.waker().clone());
            }
            return Poll::Pending;
        }
        let outcome = st.waiters.remove(&id).and_then(|w| w.outcome);
        Poll::Ready(outcome.unwrap_or(Err(TransportError::Closed)))
    }

    /// Starts the sweeper for calls under the default timeout `limit` unless it runs; false if
    /// it cannot run here (outside a runtime, or no timer could be made).
    fn sweeping(self: &Arc<Self>, limit: Duration) -> bool {
        self.sweeper
            .get_or_init(|| {
                tokio::runtime::Handle::try_current().ok()?;
                let expire: Arc<dyn Expire> = self.clone();
                deadlines::watch(Arc::downgrade(&expire), deadlines::period(limit))
                    .inspect_err(|e| {
                        tracing::warn!(error = %e, "no deadline sweeper: each call keeps a timer")
                    })
                    .ok()
            })
            .is_some()
    }

    /// Where a call's results come back ([`ReplyPlan`]): the caller's buffers (from this
    /// connection's pool) and sizes when it gave them; otherwise what the procedure's recent
    /// results say ([`ReplySizes`](super::reply_sizes::ReplySizes)).
    ///
    /// As Linux's xprtrdma does, no Write chunk is provided when the caller gave the size of
    /// every DDP-eligible result and the whole reply then fits the receive buffer: the results
    /// come inline, which costs no registration and no RDMA Write. Without sizes the same
    /// holds when the procedure's recent results were that small: a 20-byte result costs what
    /// a result without DDP-eligible items does. Otherwise each result gets a Write chunk of
    /// about the largest recent size (the first call of a procedure:
    /// [`RdmaConfig::default_write_chunk`](crate::transport::RdmaConfig)). A guess too small is put
    /// right by sending the call again with more room, within [`ReplyPlan::room`] (the result
    /// type's bound, at most
    /// [`RdmaConfig::max_reply_size`](crate::transport::RdmaConfig::max_reply_size)), same
    /// XID, which the server answers from its stash of undelivered results rather than
    /// running the procedure again.
    pub(crate) fn reply_plan(&self, call: &mut rpc::Call<'_>, backward: bool) -> ReplyPlan {
        // The result type's bound, or the caller's promise (CallOptions::max_inline_results).
        let promised = call.options.max_inline_results;
        let promised = promised.map(|n| n.saturating_add(rpc::MAX_REPLY_HEADER));
        let inline = match (call.reply.max_inline_len, promised) {
            (Some(shape), Some(promised)) => Some(shape.min(promised)),
            (shape, promised) => shape.or(promised),
        };
        let plain = |reply_inline| ReplyPlan {
            targets: Vec::new(),
            reply_inline,
            room: Vec::new(),
        };
        if backward {
            return plain(call.reply.max_len);
        }
        if self.mode_2004 && self.state.lock().core.read_read_requester() {
            // Read-Read (seed 000 section 3.8): the responder exposes the results instead.
            return plain(call.reply.max_len);
        }
        let options = &mut call.options;
        let n = call
            .reply
            .ddp_items
            .max(options.reply_buffers.len())
            .max(options.reply_sizes.len());
        if n == 0 {
            // No DDP-eligible result (a NULL call, most calls): no Write chunk to provide.
            return plain(inline);
        }
        let st = self.state.lock();
        let bound = call
            .reply
            .max_len
            .unwrap_or(usize::MAX)
            .min(st.core.config().max_reply_size);
        let room = vec![bound; n];
        let with = |sizes: &mut dyn Iterator<Item = usize>| {
            inline.map(|i| {
                i + sizes
                    .map(|len| 4 + len + crate::xdr::padding(len))
                    .sum::<usize>()
            })
        };
        let given = !options.reply_buffers.is_empty() || !options.reply_sizes.is_empty();
        if !given {
            let procedure = (call.prog, call.vers, call.proc);
            let predicted = self.reply_sizes.lock().predict(procedure);
            let expected = with(&mut predicted.into_iter());
            let size = match predicted {
                Some(_) if !st.core.needs_reply_chunk(expected, 0) => {
                    // Small lately: inline, with room to fall back on.
                    return ReplyPlan {
                        targets: Vec::new(),
                        reply_inline: expected,
                        room,
                    };
                }
                // A quarter more than the largest recent result, in whole pages.
                Some(size) => (size + size / 4).next_multiple_of(4096),
                // The procedure's first call: the configured default.
                None => st.core.config().default_write_chunk,
            };
            let size = size.min(bound);
            drop(st);
            return ReplyPlan {
                targets: (0..n).map(|_| WriteTarget::Size(size)).collect(),
                reply_inline: inline,
                room,
            };
        }
        let all_sizes = options.reply_buffers.is_empty() && options.reply_sizes.len() >= n;
        let with_results = with(&mut options.reply_sizes.iter().copied());
        if all_sizes && !st.core.needs_reply_chunk(with_results, 0) {
            return ReplyPlan {
                targets: Vec::new(),
                reply_inline: with_results,
                room,
            };
        }
        let default = st.core.config().default_write_chunk;
        drop(st);
        let mut buffers = std::mem::take(&mut options.reply_buffers).into_iter();
        let targets = (0..n)
            .map(|i| {
                let size = options.reply_sizes.get(i).copied();
                match buffers.next().and_then(|b| self.pool.take_lease(b)) {
                    Some(lease) => {
                        let (buf, len) = lease.into_parts();
                        WriteTarget::Buffer(vec![Slice {
                            buf,
                            offset: 0,
                            len,
                        }])
                    }
                    None => WriteTarget::Size(size.unwrap_or(default)),
                }
            })
            .collect();
        ReplyPlan {
            targets,
            reply_inline: inline,
            room,
        }
    }

    /// Remembers how large the DDP-eligible results of `call`'s procedure were in `reply`.
    fn observe_reply(&self, call: &rpc::Call<'_>, reply: &Reply) {
        if call.reply.ddp_items == 0 {
            return;
        }
        let size = match &reply.chunks {
            Some(chunks) if chunks.write_len() > 0 => chunks.write_len(),
            _ => reply.message.len(),
        };
        self.reply_sizes
            .lock()
            .observe((call.prog, call.vers, call.proc), size);
    }
}

/// How an observed call went out: bytes for its reply's record in the span.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sent {
    /// Bytes the responder reads by RDMA Read (Read chunks, the message of a long call).
    rdma: u64,
    /// Bytes copied into the Send.
    copied: u64,
}

impl Sent {
    /// Records `xid` and how the call moved, read from the core's counters `before` and
    /// `after` it started (the core marshals a call when it starts), in the current span;
    /// `inline` is the message's length, `moved` its DDP-eligible items'.
    #[cold]
    fn record(xid: u32, before: &Stats, after: &Stats, inline: u64, moved: u64) -> Sent {
        let (args, sent) = if after.calls_long > before.calls_long {
            let sent = Sent {
                rdma: inline + moved,
                copied: 0,
            };
            (Moved::LongCall, sent)
        } else if after.calls_read_chunks > before.calls_read_chunks {
            let sent = Sent {
                rdma: moved,
                copied: inline,
            };
            (Moved::ReadChunks, sent)
        } else {
            let sent = Sent {
                rdma: 0,
                copied: inline,
            };
            (Moved::Inline, sent)
        };
        observe::record_call(xid, args);
        sent
    }
}

/// Where a call's results come back, as [`Conn::reply_plan`] decides.
#[derive(Debug)]
pub(crate) struct ReplyPlan {
    /// The Write chunks to provide, one per DDP-eligible result (none: they come inline).
    pub(crate) targets: Vec<WriteTarget<PoolBuf>>,
    /// The largest reply expected inline once the results are in their chunks (`None`:
    /// unbounded), which decides the Reply chunk.
    pub(crate) reply_inline: Option<usize>,
    /// The Write chunk sizes to send the call again with when the results do not fit
    /// ([`OutgoingCall::room`]).
    pub(crate) room: Vec<usize>,
}

impl<C: Connection> Expire for Conn<C> {
    /// Fails the calls past their default timeout as a dropped call is cancelled (see
    /// [`Cancel`]): the core invalidates their handles at once.
    fn expire(self: Arc<Self>, now: CoarseInstant) {
        let mut st = self.state.lock();
        let expired: Vec<CallId> = st
            .waiters
            .iter()
            .filter(|(_, w)| w.deadline.is_some_and(|(at, _)| at <= now))
            .map(|(&id, _)| id)
            .collect();
        if expired.is_empty() {
            return;
        }
        for id in expired {
            if let Some(waiter) = st.waiters.get_mut(&id) {
                let limit = waiter.deadline.map_or(Duration::ZERO, |(_, limit)| limit);
                // Swept once: the caller takes the outcome and removes the waiter.
                waiter.deadline = None;
                waiter.finish(Err(TransportError::TimedOut(limit)));
                st.core.cancel(id);
            }
        }
        self.flush(&mut st);
    }
}

/// Waits for the reply of call `id`. On a hooked connection the caller reads the input itself
/// ([`Connection::poll_input`]): the provider wakes its task when bytes arrive, and the hook,
/// run in this task, puts the reply in its waiter, instead of the hook in the provider's
/// receive task putting it there and waking this task (one task switch per call fewer).
struct AwaitReply<'a, C: Connection> {
    conn: &'a Arc<Conn<C>>,
    id: CallId,
    /// The call's waiter holds the waker of the task that polls this first (taken in the same
    /// poll, before the call started): that poll has nothing to look at, since an outcome that
    /// came meanwhile woke the task, which then polls again. Not on a hooked connection, whose
    /// first poll reads the input.
    registered: bool,
    /// The waker this task reads the input with, until [`Connection::end_input`].
    reading: Option<Waker>,
}

impl<'a, C: Connection> AwaitReply<'a, C> {
    fn new(conn: &'a Arc<Conn<C>>, id: CallId, registered: bool) -> AwaitReply<'a, C> {
        AwaitReply {
            conn,
            id,
            registered: registered && !conn.hooked.load(Ordering::Acquire),
            reading: None,
        }
    }

    /// The outcome, once there, with the input left to the provider again.
    fn done(
        &mut self,
        outcome: Result<Reply, TransportError>,
    ) -> Poll<Result<Reply, TransportError>> {
        if let Some(waker) = self.reading.take() {
            self.conn.conn.end_input(&waker);
        }
        Poll::Ready(outcome)
    }
}

impl<C: Connection> Future for AwaitReply<'_, C> {
    type Output = Result<Reply, TransportError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if std::mem::take(&mut this.registered) {
            return Poll::Pending;
        }
        // A handler the hook polls (with a waker that wakes nobody, see `Conn::no_waker`) waits
        // as any task would until it goes on in a task of its own.
        if !this.conn.hooked.load(Ordering::Acquire) || cx.waker().will_wake(&this.conn.no_waker) {
            return this.conn.poll_reply(this.id, cx, true);
        }
        loop {
            if let Poll::Ready(outcome) = this.conn.poll_reply(this.id, cx, false) {
                return this.done(outcome);
            }
            if !this
                .reading
                .as_ref()
                .is_some_and(|w| w.will_wake(cx.waker()))
            {
                this.reading = Some(cx.waker().clone());
            }
            if this.conn.conn.poll_input(cx).is_pending() {
                // Nothing to read now (or another task reads): the provider or the hook
                // wakes this task.
                return match this.conn.poll_reply(this.id, cx, true) {
                    Poll::Ready(outcome) => this.done(outcome),
                    Poll::Pending => Poll::Pending,
                };
            }
        }
    }
}

impl<C: Connection> Drop for AwaitReply<'_, C> {
    /// A caller that stops waiting (a timeout, a cancelled call) leaves the input to the
    /// provider.
    fn drop(&mut self) {
        if let Some(waker) = self.reading.take() {
            self.conn.conn.end_input(&waker);
        }
    }
}

/// Cancels a call whose future is dropped before its reply arrives.
struct Cancel<'a, C: Connection> {
    conn: &'a Arc<Conn<C>>,
    id: CallId,
    armed: bool,
}

impl<C: Connection> Drop for Cancel<'_, C> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut st = self.conn.state.lock();
        st.waiters.remove(&self.id);
        st.core.cancel(self.id);
        self.conn.flush(&mut st);
    }
}

//! One connection's replies: who reads them from the socket, and how each reaches the call
//! waiting for it.
//!
//! A call made while no other call waits on the connection reads the socket itself, from its
//! own task: one call at a time (the common case of a synchronous caller) then costs no hand-
//! over between tasks, which was about 0.3 us of a 15 us NULL round trip on loopback. As soon
//! as a second call waits, the reading passes to the connection's reply task, which reads for
//! everyone and hands each reply to its call; so a caller that stops polling its call (a
//! future kept aside in a `select!`) never holds up the replies of other calls.
//!
//! Who reads is the [`Reader`] role, changed only under the lock of the waiting calls:
//! * `Free`: no call waits for a reply; nobody reads. The next call takes the role, and first
//!   reads what arrived meanwhile (stray replies, or the end of the connection, which it then
//!   learns before sending anything), until the socket is empty and waits to wake it;
//! * `Caller(xid)`: the only waiting call reads;
//! * `Task`: the reply task reads, until no call waits any more.
//!
//! A connection whose client serves backward calls ([`TcpConfig::backchannel`]) is read at
//! all times: the role starts with the reply task and stays there, so that a CALL arriving
//! while no call of the client's waits is answered (the callback that recalls a delegation
//! comes when it comes). CALL records go to the connection's [`Callbacks`], whoever reads.
//!
//! Only the holder of the role polls the socket (tokio wakes only the last task that polled
//! it), and it checks that it holds the role while holding the socket's lock.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::{Mutex, MutexGuard};

use bytes::Bytes;

use crate::rpc::observe::metrics::Side;
use crate::rpc::observe::{self, CloseReason, TcpCounters};
use tokio::net::tcp::OwnedReadHalf;
use tokio::sync::Notify;

use super::backward::{self, Callbacks};
use super::calls::Calls;
use super::config::TcpConfig;
use super::sink::RecordSink;
use super::stream::{poll_record, ReadError, Records};
use crate::rpc::deadlines::{CoarseInstant, Expire};

/// The most records a call taking the reading role reads before it is sent (see
/// [`Replies::drain_idle`]).
const MAX_IDLE_DRAIN: usize = 64;

/// Why a call got no reply from a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lost {
    /// The connection was gone before the call went out.
    BeforeSending,
    /// The connection went after the call went out.
    AfterSending,
    /// Another call on the connection has this XID (only after 2^32 XIDs).
    XidInUse,
    /// The call passed its deadline (see [`deadlines`](crate::rpc::deadlines)).
    TimedOut,
    /// As many calls as allowed wait already: wait for [`Replies::slot_freed`], then try again.
    Full,
}

/// Which XID a call registers with.
#[derive(Clone, Copy)]
pub(super) enum Xid<'a> {
    /// The next of this counter not waiting on the connection.
    Fresh(&'a AtomicU32),
    /// This one (a call sent again on a new connection keeps its XID).
    Same(u32),
}

/// Who reads the socket, as kept in [`Replies::reader`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reader {
    Free,
    Task,
    Caller(u32),
}

impl Reader {
    fn encode(self) -> u64 {
        match self {
            Reader::Free => 0,
            Reader::Task => 1,
            Reader::Caller(xid) => 1 << 32 | u64::from(xid),
        }
    }
}

/// The replies of one connection, shared by its calls and its reply task.
pub(super) struct Replies {
    peer: SocketAddr,
    pending: Mutex<Pending>,
    /// `pending.open`, readable without the lock.
    open: AtomicBool,
    /// The [`Reader`] role, encoded; written under `pending`'s lock, read without it.
    reader: AtomicU64,
    /// The reading side; locked only by the holder of the role, within one poll.
    read: Mutex<ReadSide>,
    /// Closed when the connection ends, so that nothing more is written.
    sink: RecordSink,
    /// The most calls registered at once ([`TcpConfig::max_in_flight`](super::TcpConfig)).
    max_calls: usize,
    /// Wakes the calls waiting for a slot when one frees up from full (or the connection
    /// ends).
    slot_freed: Notify,
    /// The client's counters (connections closed).
    counters: Arc<TcpCounters>,
    /// The connection's `close` was told (once, however it ended).
    close_told: AtomicBool,
    /// Calls wait for a slot: the `credits_exhausted` event was told for this episode.
    full_told: AtomicBool,
    /// Answers the peer's CALLs (the backward direction).
    callbacks: Arc<Callbacks>,
    /// The reply task reads at all times (a backchannel server is configured).
    always_read: bool,
}

struct ReadSide {
    stream: OwnedReadHalf,
    records: Records,
}

struct Pending {
    /// Calls waiting for their reply (or holding one not yet taken), by XID.
    calls: Calls<Waiting>,
    /// How many of `calls` have no answer yet.
    unanswered: usize,
    /// False once the connection is lost.
    open: bool,
    /// Wakes the reply task when the role passes to it.
    task: Option<Waker>,
}

/// A call waiting for its reply.
struct Waiting {
    answer: Option<Answer>,
    waker: Waker,
    /// When the sweeper fails the call; `None`: the caller has a timer of its own, or waits
    /// forever.
    deadline: Option<CoarseInstant>,
}

/// What a waiting call gets.
enum Answer {
    Reply(Bytes),
    /// Past its deadline.
    TimedOut,
    /// The connection ended.
    Lost,
}

impl Replies {
    /// The replies of a connection read from `stream` (records of at most `max_record` bytes),
    /// whose writing side is `sink`.
    pub(super) fn new(
        peer: SocketAddr,
        stream: OwnedReadHalf,
        config: &TcpConfig,
        sink: RecordSink,
        counters: Arc<TcpCounters>,
    ) -> Replies {
        let callbacks = Callbacks::new(peer, sink.clone(), config, counters.clone());
        let always_read = callbacks.serves();
        let reader = match always_read {
            true => Reader::Task,
            false => Reader::Free,
        };
        Replies {
            peer,
            pending: Mutex::new(Pending {
                calls: Calls::default(),
                unanswered: 0,
                open: true,
                task: None,
            }),
            open: AtomicBool::new(true),
            reader: AtomicU64::new(reader.encode()),
            read: Mutex::new(ReadSide {
                stream,
                records: Records::new(config.max_record),
            }),
            sink,
            max_calls: config.slots() as usize,
            slot_freed: Notify::new(),
            counters,
            close_told: AtomicBool::new(false),
            full_told: AtomicBool::new(false),
            callbacks,
            always_read,
        }
    }

    /// Tells the connection's end (`close` event, counters), once.
    pub(super) fn closed(&self, reason: CloseReason) {
        if !self.close_told.swap(true, Ordering::AcqRel) {
            self.counters.closed();
            observe::closed(Side::Client, "tcp", self.peer, reason);
        }
    }

    /// A call found every slot taken (`full`) or one free: the `credits_exhausted` event
    /// once per episode of waiting calls.
    pub(super) fn note_full(&self, full: bool) {
        if self.full_told.load(Ordering::Relaxed) != full
            && self.full_told.swap(full, Ordering::Relaxed) != full
            && full
        {
            observe::credits_exhausted("tcp", self.peer, self.max_calls as u64);
        }
    }

    /// Waits until a slot is free (see [`Lost::Full`]) or the connection has ended.
    pub(super) async fn slot_freed(&self) {
        let notified = self.slot_freed.notified();
        let mut notified = std::pin::pin!(notified);
        // Listening before looking, so that a slot freed in between is not missed.
        notified.as_mut().enable();
        {
            let pending = self.pending.lock();
            if !pending.open || pending.calls.len() < self.max_calls {
                return;
            }
        }
        notified.await
    }

    /// Forgets call `xid` (which must be there), waking the calls waiting for a slot when all
    /// were taken.
    fn forget(&self, pending: &mut Pending, xid: u32) -> Option<Waiting> {
        let full = pending.calls.len() >= self.max_calls;
        let call = pending.calls.remove(xid);
        if full && call.is_some() {
            self.slot_freed.notify_waiters();
        }
        call
    }

    pub(super) fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    /// Registers a call, before it is sent, with an XID chosen per `xid`; its reply (or its
    /// deadline `deadline`, or the end of the connection) then wakes `cx`'s task, and is
    /// polled for with the [`Ticket`].
    ///
    /// When the call takes the reading role it first reads what came while no call waited,
    /// and the ticket says whether that left the socket [`listening`](Ticket::listening).
    pub(super) fn register(
        &self,
        xid: Xid<'_>,
        deadline: Option<CoarseInstant>,
        cx: &mut Context<'_>,
    ) -> Result<Ticket, Lost> {
        let (xid, first) = {
            let mut pending = self.pending.lock();
            if !pending.open {
                return Err(Lost::BeforeSending);
            }
            if pending.calls.len() >= self.max_calls {
                return Err(Lost::Full);
            }
            let xid = match xid {
                Xid::Same(xid) if pending.calls.contains(xid) => return Err(Lost::XidInUse),
                Xid::Same(xid) => xid,
                Xid::Fresh(next) => loop {
                    let xid = next.fetch_add(1, Ordering::Relaxed);
                    if !pending.calls.contains(xid) {
                        break xid;
                    }
                },
            };
            pending.calls.insert(
                xid,
                Waiting {
                    answer: None,
                    waker: cx.waker().clone(),
                    deadline,
                },
            );
            pending.unanswered += 1;
            let (task, first) = match self.role() {
                Reader::Free => {
                    self.set_role(Reader::Caller(xid));
                    (None, true)
                }
                // Company: the reply task reads from now on.
                Reader::Caller(_) => {
                    self.set_role(Reader::Task);
                    (pending.task.clone(), false)
                }
                Reader::Task => (None, false),
            };
            drop(pending);
            wake(task);
            (xid, first)
        };
        let mut ticket = Ticket {
            xid,
            armed: true,
            listening: false,
        };
        if first {
            // Nobody read while no call waited: take in what came meanwhile.
            match self.drain_idle(xid, cx) {
                Ok(listening) => ticket.listening = listening,
                Err(lost) => {
                    self.cancel(&mut ticket);
                    return Err(lost);
                }
            }
        }
        Ok(ticket)
    }

    /// Reads what arrived while no call waited, until the socket has nothing more. Nothing of
    /// it is for a call (none waited, and the new one is not sent yet): stray or late replies,
    /// dropped; the peer's CALLs, answered; or the end of the connection, then
    /// `Lost::BeforeSending`. `Ok(true)` when the socket was left waiting, to wake `cx`'s
    /// task when more comes (its reply, once sent).
    fn drain_idle(&self, xid: u32, cx: &mut Context<'_>) -> Result<bool, Lost> {
        let mut read = self.read.lock();
        let ReadSide { stream, records } = &mut *read;
        // With the socket held: once another call came, the reply task reads (and must stay
        // the one the socket wakes). At most a few records here: what a server keeps sending
        // is read later, by the call's waiter, which gives way to other tasks as it goes.
        for _ in 0..MAX_IDLE_DRAIN {
            if self.role() != Reader::Caller(xid) {
                break;
            }
            // Usually nothing came: then tokio, having heard of nothing new, keeps the waker
            // without a system call; the call's first poll after sending need not read.
            match poll_record(cx, stream, records) {
                Poll::Pending => return Ok(true),
                Poll::Ready(Ok(Some(record))) => match backward::kind(&record) {
                    // The peer's call: answered.
                    backward::Kind::Call(xid) => self.callbacks.call(xid, record),
                    // No call of this end's waited: late or stray.
                    _ => {
                        self.counters.dropped(record.len());
                        tracing::debug!(
                            peer = %self.peer,
                            len = record.len(),
                            "a record received while no call waited (a late reply): dropped"
                        );
                    }
                },
                Poll::Ready(end) => {
                    drop(read);
                    self.end(end);
                    return Err(Lost::BeforeSending);
                }
            }
        }
        Ok(false)
    }

    /// The reply task's part: reads while it holds the role; `Ready` once the connection has
    /// ended.
    pub(super) fn poll_task(&self, cx: &mut Context<'_>) -> Poll<()> {
        {
            let mut pending = self.pending.lock();
            if !pending.open {
                return Poll::Ready(());
            }
            if !pending
                .task
                .as_ref()
                .is_some_and(|w| w.will_wake(cx.waker()))
            {
                pending.task = Some(cx.waker().clone());
            }
        }
        if self.role() != Reader::Task {
            return Poll::Pending;
        }
        let mut read = self.read.lock();
        let ReadSide { stream, records } = &mut *read;
        // Checked again with the socket held: a caller that took the role meanwhile has
        // polled the socket last, and must stay the one tokio wakes.
        while self.role() == Reader::Task {
            match poll_record(cx, stream, records) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(Some(record))) => {
                    self.route(record, None);
                    // A unit of the task's budget per record, so that a server sending a
                    // flood (of stray replies, say) does not keep the runtime's thread.
                    match tokio::task::coop::poll_proceed(cx) {
                        Poll::Ready(budget) => budget.made_progress(),
                        Poll::Pending => return Poll::Pending,
                    }
                }
                Poll::Ready(end) => {
                    drop(read);
                    self.end(end);
                    return Poll::Ready(());
                }
            }
        }
        Poll::Pending
    }

    /// Hands `record` to the call waiting for it, or returns it when it is the reply to
    /// `mine` (the reading caller's own call, which is then forgotten). A CALL goes to the
    /// connection's [`Callbacks`] (RFC 5531 section 9's `msg_type` tells them apart).
    fn route(&self, record: Bytes, mine: Option<u32>) -> Option<Bytes> {
        let xid = match backward::kind(&record) {
            backward::Kind::Reply(xid) => xid,
            backward::Kind::Call(xid) => {
                self.callbacks.call(xid, record);
                return None;
            }
            backward::Kind::Other => {
                self.counters.dropped(record.len());
                tracing::warn!(peer = %self.peer, len = record.len(), "a record neither an RPC CALL nor a REPLY: dropped");
                return None;
            }
        };
        let mut pending = self.pending.lock();
        if mine == Some(xid) {
            // Unanswered unless the sweeper timed it out just now.
            if pending
                .calls
                .remove(xid)
                .is_some_and(|call| call.answer.is_none())
            {
                pending.unanswered -= 1;
            }
            let task = self.settle(&mut pending);
            drop(pending);
            wake(task);
            return Some(record);
        }
        let waker = match pending.calls.get_mut(xid) {
            Some(call) if call.answer.is_none() => {
                call.answer = Some(Answer::Reply(record));
                let waker = call.waker.clone();
                pending.unanswered -= 1;
                let task = self.settle(&mut pending);
                drop(pending);
                wake(task);
                waker
            }
            _ => {
                drop(pending);
                self.counters.dropped(record.len());
                tracing::debug!(
                    peer = %self.peer,
                    xid,
                    "a reply no call waits for (late after a timeout, or a duplicate): dropped"
                );
                return None;
            }
        };
        waker.wake();
        None
    }

    /// Passes the role on when its holder no longer waits: to the reply task while calls
    /// wait, to nobody otherwise. Returns the task's waker when the role passed to it.
    fn settle(&self, pending: &mut Pending) -> Option<Waker> {
        let unanswered = pending.unanswered;
        match self.role() {
            Reader::Caller(xid)
                if pending
                    .calls
                    .get(xid)
                    .map_or(true, |call| call.answer.is_some()) =>
            {
                if unanswered == 0 {
                    self.set_role(Reader::Free);
                    None
                } else {
                    self.set_role(Reader::Task);
                    pending.task.clone()
                }
            }
            Reader::Task if unanswered == 0 && !self.always_read => {
                self.set_role(Reader::Free);
                None
            }
            _ => None,
        }
    }

    /// The connection has ended (`end` says how): nothing more is written, and every waiting
    /// call fails.
    fn end(&self, end: Result<Option<Bytes>, ReadError>) {
        let reason = match end {
            Ok(None) => CloseReason::PeerClosed,
            Err(ReadError::Record(error)) => {
                observe::protocol_error("tcp", self.peer, "record_marking", &error, true);
                CloseReason::ProtocolViolation
            }
            Err(ReadError::Io(error)) => {
                tracing::debug!(peer = %self.peer, %error, "connection lost");
                CloseReason::Error
            }
            Ok(Some(_)) => CloseReason::Error,
        };
        self.closed(reason);
        self.sink.close();
        self.fail_all();
    }

    /// Fails every waiting call: the connection is lost.
    pub(super) fn fail_all(&self) {
        let wakers: Vec<Waker> = {
            let mut pending = self.pending.lock();
            pending.open = false;
            self.open.store(false, Ordering::Release);
            pending.unanswered = 0;
            self.set_role(Reader::Free);
            pending
                .calls
                .values_mut()
                .filter(|call| call.answer.is_none())
                .map(|call| {
                    call.answer = Some(Answer::Lost);
                    call.waker.clone()
                })
                .collect()
        };
        for waker in wakers {
            waker.wake();
        }
    }

    /// Wakes `waker` (rather than the one registered, unless it wakes the same task) when
    /// call `xid` is answered.
    fn update_waker(&self, xid: u32, waker: &Waker) {
        if let Some(call) = self.pending.lock().calls.get_mut(xid) {
            if !call.waker.will_wake(waker) {
                call.waker = waker.clone();
            }
        }
    }

    fn role(&self) -> Reader {
        match self.reader.load(Ordering::Acquire) {
            0 => Reader::Free,
            1 => Reader::Task,
            n => Reader::Caller(n as u32),
        }
    }

    /// Called with `pending`'s lock held.
    fn set_role(&self, reader: Reader) {
        self.reader.store(reader.encode(), Ordering::Release);
    }
}

fn wake(waker: Option<Waker>) {
    if let Some(waker) = waker {
        waker.wake();
    }
}

impl Expire for Replies {
    fn expire(self: Arc<Self>, now: CoarseInstant) {
        let mut wakers = Vec::new();
        let task = {
            let mut pending = self.pending.lock();
            let mut expired = 0;
            for call in pending.calls.values_mut() {
                if call.answer.is_none() && call.deadline.is_some_and(|d| d <= now) {
                    call.answer = Some(Answer::TimedOut);
                    wakers.push(call.waker.clone());
                    expired += 1;
                }
            }
            pending.unanswered -= expired;
            self.settle(&mut pending)
        };
        wake(task);
        for waker in wakers {
            waker.wake();
        }
    }
}

/// A call registered with [`Replies::register`]. Whoever holds it polls for the reply with [`Replies::poll_reply`] and, giving up before
/// the reply (a timeout of its own, cancellation), hands it to [`Replies::cancel`];
/// [`Waiter`] does both for a borrowed `Replies`.
pub(super) struct Ticket {
    xid: u32,
    /// Still registered: not answered, not cancelled.
    armed: bool,
    /// Registering left the socket waiting to wake the registering task when anything comes,
    /// the reply included: in that same poll, once the call is sent, the task may return
    /// `Pending` without reading (it is polled again when there is something to read). Half
    /// the reading of a call saved: its first poll, which found the socket empty.
    listening: bool,
}

impl Ticket {
    /// The call's XID.
    pub(super) fn xid(&self) -> u32 {
        self.xid
    }

    /// Whether the socket waits to wake the task that registered the call (see
    /// [`Replies::register`]); only meaningful in the poll that registered it.
    pub(super) fn listening(&self) -> bool {
        self.listening
    }
}

impl Replies {
    /// The answer to `ticket`'s call: its reply, or why there is none. `Pending` until then,
    /// with `cx` woken when it comes. Must not be polled again once `Ready`.
    pub(super) fn poll_reply(
        &self,
        ticket: &mut Ticket,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Bytes, Lost>> {
        if let Some(done) = std::task::ready!(self.poll_read(ticket, cx)) {
            return Poll::Ready(done);
        }
        // Not (or no longer) the reader: the answer comes from whoever reads.
        let mut pending = self.pending.lock();
        let Some(call) = pending.calls.get_mut(ticket.xid) else {
            // Not reachable: only the ticket's holder removes its call, but for its own reply.
            ticket.armed = false;
            return Poll::Ready(Err(Lost::AfterSending));
        };
        let Some(answer) = call.answer.take() else {
            if !call.waker.will_wake(cx.waker()) {
                call.waker = cx.waker().clone();
            }
            return Poll::Pending;
        };
        self.forget(&mut pending, ticket.xid);
        ticket.armed = false;
        Poll::Ready(match answer {
            Answer::Reply(reply) => Ok(reply),
            Answer::TimedOut => Err(Lost::TimedOut),
            Answer::Lost => Err(Lost::AfterSending),
        })
    }

    /// Reads replies while `ticket`'s call holds the role; `Ready(Some)` with its own.
    fn poll_read(
        &self,
        ticket: &mut Ticket,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Lost>>> {
        let me = Reader::Caller(ticket.xid);
        if self.role() != me {
            return Poll::Ready(None);
        }
        let mut read = self.read.lock();
        let ReadSide { stream, records } = &mut *read;
        while self.role() == me {
            match poll_record(cx, stream, records) {
                Poll::Pending => return self.pending(read, ticket, cx),
                Poll::Ready(Ok(Some(record))) => {
                    if let Some(reply) = self.route(record, Some(ticket.xid)) {
                        ticket.armed = false;
                        return Poll::Ready(Some(Ok(reply)));
                    }
                    // A record for no call (late or stray): a unit of the task's budget each,
                    // as the reply task does.
                    match tokio::task::coop::poll_proceed(cx) {
                        Poll::Ready(budget) => budget.made_progress(),
                        Poll::Pending => return self.pending(read, ticket, cx),
                    }
                }
                Poll::Ready(end) => {
                    drop(read);
                    self.end(end);
                    break;
                }
            }
        }
        Poll::Ready(None)
    }

    /// `Pending` from the reading caller, the socket released, with `cx`'s waker the one its
    /// answer wakes. (Rare: a reading caller is mostly polled when its reply has come. So the
    /// waker is compared under the lock rather than a copy kept in the ticket, which cost a
    /// clone per call.)
    fn pending<T>(
        &self,
        read: MutexGuard<'_, ReadSide>,
        ticket: &mut Ticket,
        cx: &Context<'_>,
    ) -> Poll<T> {
        drop(read);
        self.update_waker(ticket.xid, cx.waker());
        Poll::Pending
    }

    /// Forgets `ticket`'s call if it is still registered (its holder gave up waiting).
    pub(super) fn cancel(&self, ticket: &mut Ticket) {
        if !std::mem::replace(&mut ticket.armed, false) {
            return;
        }
        let mut pending = self.pending.lock();
        if let Some(call) = self.forget(&mut pending, ticket.xid) {
            if call.answer.is_none() {
                pending.unanswered -= 1;
            }
        }
        let task = self.settle(&mut pending);
        drop(pending);
        wake(task);
    }
}

/// A registered call's reply as a future, from a borrowed [`Replies`]; dropping it forgets
/// the call (however it ends: a timeout of its own, cancellation, a lost connection).
pub(super) struct Waiter<'a> {
    replies: &'a Replies,
    ticket: Ticket,
}

impl<'a> Waiter<'a> {
    /// Waits for the answer to `ticket`'s call, registered with `replies`.
    pub(super) fn new(replies: &'a Replies, ticket: Ticket) -> Waiter<'a> {
        Waiter { replies, ticket }
    }

    /// The call's XID.
    pub(super) fn xid(&self) -> u32 {
        self.ticket.xid
    }
}

impl Future for Waiter<'_> {
    type Output = Result<Bytes, Lost>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        this.replies.poll_reply(&mut this.ticket, cx)
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        self.replies.cancel(&mut self.ticket);
    }
}

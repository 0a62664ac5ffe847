//! The backward direction of a connection: calls from the server to its client on the
//! connection the client made (RFC 5661 section 2.10.3.1: an NFSv4.1 session's callbacks
//! "travel on the same connection as the fore channel"), CALL records one way and REPLY
//! records the other, record marking (RFC 5531 section 11) in both directions.
//!
//! Each end's reader tells the peer's messages apart by `msg_type`, the word after the XID
//! (RFC 5531 section 9: `struct rpc_msg { unsigned int xid; union switch (msg_type mtype)
//! ...}`): one comparison per record on the forward path, made where the record is handed
//! on.
//!
//! * Server side, [`BackwardCalls`]: the [`CallTransport`] of the `Client` a handler gets from
//!   [`CallContext::backchannel`](crate::rpc::CallContext::backchannel). Its calls take fresh
//!   XIDs (their own space: a REPLY from the client can only answer one of them), wait for a
//!   REPLY the connection's reader hands over ([`BackwardCalls::reply`]), and fail with
//!   [`TransportError::Closed`] when the connection ends. At most
//!   [`TcpConfig::max_backward_in_flight`] at once; more wait for a place within their
//!   timeout. A REPLY for no waiting call is dropped and counted.
//! * Client side, [`Callbacks`]: runs the CALLs the reader hands over with the configured
//!   [`TcpConfig::backchannel`] server (PROG_UNAVAIL without one), at most
//!   [`TcpConfig::max_backward_in_flight`] at once; a call beyond that is dropped and
//!   counted, and so is one arriving while as many records wait to be written beyond the
//!   client's own calls (at most [`TcpConfig::max_in_flight`] of those wait): a peer that
//!   does not read its replies cannot make the client queue them without bound. A call's
//!   place is given back before its reply is handed to the socket, not once it has been
//!   written: a peer with the same limit sends its next call as soon as it has the reply,
//!   maybe before the writer got back from the write, and that call must find the place
//!   free.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::{oneshot, Semaphore};

use super::config::TcpConfig;
use super::encoding::with_message;
use super::sink::{RecordSink, SinkClosed};
use super::slots::{Slot, Slots};
use crate::rpc::msg::MsgType;
use crate::rpc::observe::{CallStatus, TcpCounters};
use crate::rpc::{
    encode_reply, BoxFuture, BufferSource, Call, CallTransport, CallerConnection, CatchPanic,
    Client, Dispatch, Error, HandlerResult, HeapBuffers, Incoming, Reply, ReplyError, Server,
    TransportError, TransportKind, TransportStats,
};

/// `msg_type` CALL (RFC 5531 section 9).
const CALL: u32 = MsgType::Call as i32 as u32;
/// `msg_type` REPLY (RFC 5531 section 9).
const REPLY: u32 = MsgType::Reply as i32 as u32;

/// What a record is, by its first two words (RFC 5531 section 9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A CALL with this XID.
    Call(u32),
    /// A REPLY with this XID.
    Reply(u32),
    /// Too short for an XID and a `msg_type`, or a `msg_type` neither CALL nor REPLY.
    Other,
}

/// What `record` is.
#[inline]
pub(super) fn kind(record: &[u8]) -> Kind {
    let Some(&[x0, x1, x2, x3, m0, m1, m2, m3]) = record.first_chunk::<8>() else {
        return Kind::Other;
    };
    let xid = u32::from_be_bytes([x0, x1, x2, x3]);
    match u32::from_be_bytes([m0, m1, m2, m3]) {
        CALL => Kind::Call(xid),
        REPLY => Kind::Reply(xid),
        _ => Kind::Other,
    }
}

/// A connection as a handler sees it: open until either side closes it; on a server, with
/// its backchannel.
pub(super) struct TcpCaller {
    pub(super) sink: RecordSink,
    pub(super) backchannel: Option<Client>,
}

impl CallerConnection for TcpCaller {
    fn is_closed(&self) -> bool {
        self.sink.is_closed()
    }

    fn closed(&self) -> BoxFuture<'static, ()> {
        Box::pin(self.sink.closing())
    }

    fn backchannel(&self) -> Option<&Client> {
        self.backchannel.as_ref()
    }
}

/// A server connection's calls to its client: the transport of the connection's backchannel
/// `Client` (see the module's doc).
pub(super) struct BackwardCalls {
    peer: SocketAddr,
    sink: RecordSink,
    next_xid: AtomicU32,
    /// Calls waiting for their REPLY, by XID; `None` once the connection has ended.
    waiting: Mutex<Option<HashMap<u32, oneshot::Sender<Bytes>>>>,
    /// How many calls wait (`waiting`'s length), readable without the lock.
    count: AtomicUsize,
    /// The places of [`TcpConfig::max_backward_in_flight`]; closed with the connection.
    places: Semaphore,
    timeout: Option<Duration>,
    max_record: usize,
    counters: Arc<TcpCounters>,
}

impl BackwardCalls {
    /// The backward calls of the connection to `peer` written to `sink`.
    pub(super) fn new(
        peer: SocketAddr,
        sink: RecordSink,
        config: &TcpConfig,
        counters: Arc<TcpCounters>,
    ) -> BackwardCalls {
        BackwardCalls {
            peer,
            sink,
            next_xid: AtomicU32::new(super::client::initial_xid()),
            waiting: Mutex::new(Some(HashMap::new())),
            count: AtomicUsize::new(0),
            places: Semaphore::new(config.max_backward_in_flight.min(Semaphore::MAX_PERMITS)),
            timeout: config.timeout,
            max_record: config.max_record,
            counters,
        }
    }

    /// Whether any call waits for its REPLY (the reader then reads on even when every slot
    /// of the forward direction is taken: a handler waiting for a REPLY holds one).
    pub(super) fn is_waiting(&self) -> bool {
        self.count.load(Ordering::Acquire) > 0
    }

    /// Hands the REPLY `record` to call `xid`; dropped and counted when no call waits for it
    /// (late after a timeout, a duplicate, a stray XID).
    pub(super) fn reply(&self, xid: u32, record: Bytes) {
        let len = record.len();
        let waiter = {
            let mut waiting = self.waiting.lock();
            let waiter = waiting.as_mut().and_then(|calls| calls.remove(&xid));
            self.count
                .store(waiting.as_ref().map_or(0, HashMap::len), Ordering::Release);
            waiter
        };
        match waiter.map(|waiter| waiter.send(record)) {
            Some(Ok(())) => self.counters.backward_reply(len, false),
            // Its caller gave up just now.
            Some(Err(_)) | None => {
                self.counters.dropped(len);
                tracing::debug!(
                    peer = %self.peer,
                    xid,
                    "a REPLY no backward call waits for (late, a duplicate or a stray XID): dropped"
                );
            }
        }
    }

    /// The connection has ended: waiting calls fail with
    /// [`TransportError::Closed`], and so do later ones.
    pub(super) fn close(&self) {
        let calls = self.waiting.lock().take();
        self.count.store(0, Ordering::Release);
        self.places.close();
        // Their senders dropped: the waiting calls learn the connection has ended.
        drop(calls);
    }

    /// Registers a call with a fresh XID: its XID and where its REPLY will come.
    fn register(&self) -> Result<(u32, oneshot::Receiver<Bytes>), Error> {
        let mut waiting = self.waiting.lock();
        let calls = waiting.as_mut().ok_or(TransportError::Closed)?;
        let xid = loop {
            let xid = self.next_xid.fetch_add(1, Ordering::Relaxed);
            if !calls.contains_key(&xid) {
                break xid;
            }
        };
        let (sender, receiver) = oneshot::channel();
        calls.insert(xid, sender);
        self.count.store(calls.len(), Ordering::Release);
        Ok((xid, receiver))
    }

    /// Forgets call `xid` (answered, given up, or failed).
    fn forget(&self, xid: u32) {
        let mut waiting = self.waiting.lock();
        if let Some(calls) = waiting.as_mut() {
            calls.remove(&xid);
            self.count.store(calls.len(), Ordering::Release);
        }
    }

    /// Sends `call` and waits for its REPLY, without a time limit.
    async fn exchange(&self, call: &Call<'_>) -> Result<Reply, Error> {
        let _place = self
            .places
            .acquire()
            .await
            .map_err(|_| TransportError::Closed)?;
        let (xid, reply) = self.register()?;
        // Forgotten however the call ends (cancelled included).
        let _registered = Registered { calls: self, xid };
        let mut len = 0;
        let encode = |enc: &mut crate::xdr::Encoder| {
            call.encode(xid, enc).map_err(Error::Encode)?;
            if enc.len() > self.max_record {
                return Err(TransportError::TooLarge {
                    len: enc.len() as u64,
                    max: self.max_record as u64,
                }
                .into());
            }
            len = enc.len();
            Ok::<(), Error>(())
        };
        if let Err(SinkClosed) = with_message(encode, |message| self.sink.send(message, None))? {
            return Err(TransportError::Closed.into());
        }
        self.counters.backward_call(len, true);
        let message = reply.await.map_err(|_| TransportError::Closed)?;
        Ok(Reply {
            message,
            chunks: None,
        })
    }
}

/// A registered call, forgotten when dropped.
struct Registered<'a> {
    calls: &'a BackwardCalls,
    xid: u32,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.calls.forget(self.xid);
    }
}

impl CallTransport for BackwardCalls {
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Reply, Error>> {
        Box::pin(async move {
            match call.options.timeout.or(self.timeout) {
                Some(limit) => tokio::time::timeout(limit, self.exchange(&call))
                    .await
                    .unwrap_or(Err(TransportError::TimedOut(limit).into())),
                None => self.exchange(&call).await,
            }
        })
    }

    fn buffers(&self) -> Arc<dyn BufferSource> {
        Arc::new(HeapBuffers)
    }

    fn kind(&self) -> TransportKind {
        TransportKind::Tcp
    }

    fn stats(&self) -> Option<TransportStats> {
        Some(self.counters.snapshot())
    }
}

/// A client connection's answers to the CALLs its peer sends (see the module's doc).
pub(super) struct Callbacks {
    peer: SocketAddr,
    /// The server answering them; `None`: PROG_UNAVAIL.
    server: Option<Server>,
    sink: RecordSink,
    /// The calls running.
    places: Arc<Slots>,
    /// Records waiting to be written beyond which a CALL is dropped: the client's own calls
    /// ([`TcpConfig::max_in_flight`]) and [`TcpConfig::max_backward_in_flight`] replies.
    max_queued: usize,
    max_record: usize,
    counters: Arc<TcpCounters>,
    /// The connection as the handlers see it.
    caller: Arc<dyn CallerConnection>,
    buffers: Arc<dyn BufferSource>,
}

impl Callbacks {
    /// The answers to the CALLs of the connection to `peer`, written to `sink`.
    pub(super) fn new(
        peer: SocketAddr,
        sink: RecordSink,
        config: &TcpConfig,
        counters: Arc<TcpCounters>,
    ) -> Arc<Callbacks> {
        Arc::new(Callbacks {
            peer,
            server: config.backchannel.clone(),
            caller: Arc::new(TcpCaller {
                sink: sink.clone(),
                backchannel: None,
            }),
            sink,
            places: Slots::new(config.max_backward_in_flight),
            max_queued: config.slots() as usize + config.max_backward_in_flight.max(1),
            max_record: config.max_record,
            counters,
            buffers: Arc::new(HeapBuffers),
        })
    }

    /// Whether a server answers the calls (the connection is then read at all times).
    pub(super) fn serves(&self) -> bool {
        self.server.is_some()
    }

    /// Answers the CALL `message` (XID `xid`): runs it, or answers PROG_UNAVAIL, or drops
    /// it when every place is taken (see the module's doc).
    pub(super) fn call(self: &Arc<Self>, xid: u32, message: Bytes) {
        // (`max_backward_in_flight` 0 still takes one: `Slots` has at least one.)
        let place = match self.sink.queued() < self.max_queued {
            true => self.places.try_take(),
            false => None,
        };
        let Some(place) = place else {
            self.counters.dropped(message.len());
            tracing::debug!(
                peer = %self.peer,
                xid,
                "a backward CALL beyond TcpConfig::max_backward_in_flight (running, or replies waiting to be written): dropped"
            );
            return;
        };
        self.counters.backward_call(message.len(), false);
        let Some(server) = &self.server else {
            tracing::debug!(peer = %self.peer, xid, "a backward CALL, and no TcpConfig::backchannel server: PROG_UNAVAIL");
            self.reply(xid, &Err(ReplyError::ProgUnavail), place);
            return;
        };
        let incoming = Incoming {
            message,
            chunks: None,
            transport: TransportKind::Tcp,
            peer: Some(self.peer),
            buffers: self.buffers.clone(),
            backchannel: None,
            caller: Some(self.caller.clone()),
            deadline: None,
        };
        match server.dispatch(incoming) {
            Dispatch::Run { xid, future } => {
                let this = self.clone();
                let future = CatchPanic::new(future);
                tokio::spawn(async move {
                    let closed = this.sink.closing();
                    let result = tokio::select! {
                        result = future => result,
                        // Nobody to answer: the handler is dropped.
                        () = closed => return,
                    };
                    this.reply(xid, &result, place);
                });
            }
            Dispatch::Reply { xid, error } => self.reply(xid, &Err(error), place),
            Dispatch::ChunkError { xid, .. } => {
                self.reply(xid, &Err(ReplyError::GarbageArgs), place)
            }
            Dispatch::NotACall { .. } | Dispatch::Drop(_) => {
                // RFC 5531 section 9 has no reply for a message without a readable call
                // header.
                tracing::debug!(peer = %self.peer, xid, "an unreadable backward CALL: dropped");
                server.served(None, CallStatus::Dropped);
            }
        }
    }

    /// Gives `place` back and sends the reply to `xid`.
    fn reply(&self, xid: u32, result: &HandlerResult, place: Slot) {
        drop(place);
        let mut status = CallStatus::of_reply(result);
        let max_record = self.max_record;
        let encode = |enc: &mut crate::xdr::Encoder| -> crate::xdr::Result<()> {
            encode_reply(enc, xid, result)?;
            if enc.len() > max_record {
                tracing::warn!(peer = %self.peer, xid, len = enc.len(), max = max_record, "a backward reply exceeds the record bound: SYSTEM_ERR");
                enc.clear();
                crate::rpc::encode_reply_header(enc, xid, Err(ReplyError::SystemErr))?;
                status = CallStatus::SystemErr;
            }
            Ok(())
        };
        let mut len = 0;
        match with_message(encode, |message| {
            len = match message {
                super::sink::Record::Slice(s) => s.len(),
                super::sink::Record::Parts(p) => p.iter().map(Bytes::len).sum(),
            };
            self.sink.send(message, None)
        }) {
            Ok(Ok(())) => self.counters.backward_reply(len, true),
            Ok(Err(SinkClosed)) => status = CallStatus::Dropped,
            Err(error) => {
                tracing::error!(peer = %self.peer, xid, %error, "a backward reply does not encode");
                status = CallStatus::Dropped;
            }
        }
        if let Some(server) = &self.server {
            server.served(None, status);
        }
    }
}

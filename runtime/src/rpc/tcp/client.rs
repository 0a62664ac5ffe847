//! The client side: [`TcpTransport`], many calls in flight on one connection, replies matched
//! to calls by XID.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll, Waker};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use bytes::Bytes;
use tokio::net::{TcpStream, ToSocketAddrs};
use tokio::task::JoinHandle;

use super::config::TcpConfig;
use super::encoding::with_message;
use super::replies::{Lost, Replies, Ticket, Waiter, Xid};
use super::sink::{RecordSink, SinkClosed};
use crate::rpc::deadlines::{self, CoarseInstant, Expire};
use crate::rpc::header::encode_call_header;
use crate::rpc::msg::OpaqueAuth;
use crate::rpc::observe::metrics::{self, Side};
use crate::rpc::observe::{self, CloseReason, Moved, TcpCounters};
use crate::rpc::{
    BoxFuture, BufferSource, Call, CallTransport, Client, Error, HeapBuffers, Reply,
    TransportError, TransportKind, TransportStats,
};
use crate::xdr::{self, Encoder};

/// A [`CallTransport`] over one TCP connection with record marking (RFC 5531 section 11).
///
/// Calls from any number of tasks share the connection, up to
/// [`TcpConfig::max_in_flight`] at once; each gets its own XID, and replies are matched to
/// calls by XID whatever their order. A reply for no waiting call (late, after its call
/// timed out, or a duplicate) is logged and dropped. A call alone on the connection reads its
/// reply from its own task; while several wait, a task of the connection reads for all of
/// them (so a call future kept aside unpolled never holds up the others).
///
/// When the connection is lost, every call waiting for a reply is sent again, once by
/// default ([`TcpConfig::retransmits`]), with the same XID on a new connection to the same
/// address; a call made after the loss connects again first.
///
/// Calls from the server on the connection (the backward direction, RFC 5661 section
/// 2.10.3.1) are answered by the server of [`TcpConfig::backchannel`], on whichever
/// connection is current, while the client's own calls go on; without one, they are
/// answered PROG_UNAVAIL (see [`TcpConfig::backchannel`] and
/// [`TcpConfig::max_backward_in_flight`]).
///
/// ```no_run
/// # async fn example() -> std::io::Result<()> {
/// use rpcrdma::rpc::tcp::{TcpConfig, TcpTransport};
/// use rpcrdma::rpc::Client;
///
/// let transport = TcpTransport::connect("127.0.0.1:2049", TcpConfig::new()).await?;
/// let client = Client::new(transport);
/// # Ok(()) }
/// ```
pub struct TcpTransport {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for TcpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpTransport")
            .field("peer", &self.inner.peer)
            .finish()
    }
}

/// Connects a [`Client`] to `addr` over TCP with the default [`TcpConfig`].
pub async fn connect(addr: impl ToSocketAddrs) -> io::Result<Client> {
    connect_with(addr, TcpConfig::default()).await
}

/// Connects a [`Client`] to `addr` over TCP with `config`.
pub async fn connect_with(addr: impl ToSocketAddrs, config: TcpConfig) -> io::Result<Client> {
    Ok(Client::new(TcpTransport::connect(addr, config).await?))
}

impl TcpTransport {
    /// Connects to `addr` (the first of its addresses that accepts; later connections go to
    /// that one).
    pub async fn connect(addr: impl ToSocketAddrs, config: TcpConfig) -> io::Result<TcpTransport> {
        let stream = TcpStream::connect(addr).await?;
        let peer = stream.peer_addr()?;
        let counters = Arc::new(TcpCounters::default());
        let connection = Connection::start(stream, &config, &counters)?;
        Ok(TcpTransport {
            inner: Arc::new(Inner {
                peer,
                next_xid: AtomicU32::new(initial_xid()),
                current: Mutex::new(connection),
                connecting: tokio::sync::Mutex::new(()),
                config,
                counters,
            }),
        })
    }

    /// The server's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.inner.peer
    }

    /// The settings.
    pub fn config(&self) -> &TcpConfig {
        &self.inner.config
    }
}

impl CallTransport for TcpTransport {
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Reply, Error>> {
        self.inner.call(call)
    }

    fn buffers(&self) -> Arc<dyn BufferSource> {
        Arc::new(HeapBuffers)
    }

    fn kind(&self) -> TransportKind {
        TransportKind::Tcp
    }

    fn stats(&self) -> Option<TransportStats> {
        Some(self.inner.counters.snapshot())
    }

    fn serves_backward(&self) -> bool {
        self.inner.config.backchannel.is_some()
    }
}

struct Inner {
    peer: SocketAddr,
    config: TcpConfig,
    /// Connections, calls, replies and bytes, across reconnections.
    counters: Arc<TcpCounters>,
    next_xid: AtomicU32,
    /// The connection calls go to (possibly lost: then the next call reconnects).
    current: Mutex<Arc<Connection>>,
    /// Held while reconnecting, so that one caller does it.
    connecting: tokio::sync::Mutex<()>,
}

/// When a call under the configured default timeout must have its reply.
#[derive(Clone, Copy)]
struct Deadline {
    at: CoarseInstant,
    limit: Duration,
}

impl Deadline {
    fn error(self) -> Error {
        TransportError::TimedOut(self.limit).into()
    }

    /// `future`, unless `deadline` passes first. For the slow paths only (waiting for a free
    /// slot, connecting again): a timer each, and boxed, to keep them out of every call's
    /// future (a smaller future is cheaper to allocate and move).
    fn bound<'a, T: 'a>(
        deadline: Option<Deadline>,
        future: impl std::future::Future<Output = Result<T, Error>> + Send + 'a,
    ) -> BoxFuture<'a, Result<T, Error>> {
        Box::pin(async move {
            match deadline {
                Some(d) => tokio::time::timeout_at(d.at.to_instant().into(), future)
                    .await
                    .unwrap_or_else(|_| Err(d.error())),
                None => future.await,
            }
        })
    }
}

/// What a call's exchange needs of its [`Call`]: what its message is made of. (A call's
/// future holds it throughout: the whole `Call`, options included, made every call's future
/// larger, and it is copied into its box.)
#[derive(Clone, Copy)]
struct Message<'a> {
    prog: u32,
    vers: u32,
    proc: u32,
    cred: &'a OpaqueAuth,
    verf: &'a OpaqueAuth,
    args: &'a (dyn Fn(&mut Encoder) -> xdr::Result<()> + Sync),
}

impl<'a> Message<'a> {
    fn of(call: &Call<'a>) -> Message<'a> {
        Message {
            prog: call.prog,
            vers: call.vers,
            proc: call.proc,
            cred: call.cred,
            verf: call.verf,
            args: call.args,
        }
    }

    /// Encodes the message with `xid` into `enc`, within `max_record` bytes.
    fn encode(&self, xid: u32, enc: &mut Encoder, max_record: usize) -> Result<(), Error> {
        encode_call_header(
            enc, xid, self.prog, self.vers, self.proc, self.cred, self.verf,
        )
        .and_then(|()| (self.args)(enc))
        .map_err(Error::Encode)?;
        if enc.len() > max_record {
            return Err(TransportError::TooLarge {
                len: enc.len() as u64,
                max: max_record as u64,
            }
            .into());
        }
        Ok(())
    }
}

impl Inner {
    /// The call's future, boxed.
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Reply, Error>> {
        let message = Message::of(&call);
        match (call.options.timeout, self.config.timeout) {
            // A timeout of the call's own: a timer of its own, exact.
            (Some(limit), _) => Box::pin(async move {
                tokio::time::timeout(limit, Exchange::new(self, message, None))
                    .await
                    .unwrap_or(Err(TransportError::TimedOut(limit).into()))
            }),
            // The default: a deadline the connection's sweeper enforces (see `deadlines`).
            (None, Some(limit)) => {
                let at = CoarseInstant::after(limit);
                Box::pin(Exchange::new(self, message, Some(at)))
            }
            (None, None) => Box::pin(Exchange::new(self, message, None)),
        }
    }

    /// A call's slow path, for whatever [`Exchange`] does not do itself: waiting for a slot,
    /// connecting again, sending again after `last` attempt failed.
    async fn exchange(
        &self,
        message: Message<'_>,
        deadline: Option<Deadline>,
        mut last: Option<Attempt>,
    ) -> Result<Reply, Error> {
        // Whoever reads the reply wakes this task.
        let waker = std::future::poll_fn(|cx| Poll::Ready(cx.waker().clone())).await;
        // The call's XID, once a connection took it (a call sent again keeps it).
        let mut xid = last.as_ref().and_then(|a| a.xid);
        let mut retransmits = self.config.retransmits;
        let mut reconnect_unsent = true;
        loop {
            let connection = match last.take() {
                None => self.connection_until(None, deadline).await?,
                Some(Attempt {
                    connection, lost, ..
                }) => {
                    match lost {
                        Lost::BeforeSending if reconnect_unsent => reconnect_unsent = false,
                        Lost::AfterSending if retransmits > 0 => {
                            retransmits -= 1;
                            tracing::debug!(
                                xid = xid.unwrap_or_default(),
                                peer = %self.peer,
                                "connection lost before the reply: sending the call again on a new one"
                            );
                        }
                        Lost::TimedOut => {
                            return Err(
                                deadline.map_or(TransportError::Closed.into(), Deadline::error)
                            )
                        }
                        Lost::XidInUse => {
                            return Err(TransportError::Protocol(format!(
                                "XID {:#010x} is already waiting for a reply on this connection",
                                xid.unwrap_or_default()
                            ))
                            .into())
                        }
                        _ => return Err(TransportError::Closed.into()),
                    }
                    self.connection_until(Some(&connection), deadline).await?
                }
            };
            let (outcome, sent) = connection
                .exchange(self, &mut xid, &message, deadline, &waker)
                .await?;
            match outcome {
                Ok(message) => return Ok(self.received(message, sent)),
                Err(lost) => {
                    last = Some(Attempt {
                        connection,
                        xid,
                        lost,
                    })
                }
            }
        }
    }

    /// [`connection`](Self::connection), within `deadline` when it has to connect.
    async fn connection_until(
        &self,
        lost: Option<&Arc<Connection>>,
        deadline: Option<Deadline>,
    ) -> Result<Arc<Connection>, Error> {
        if let Some(c) = self.usable(lost) {
            return Ok(c);
        }
        Deadline::bound(deadline, async { Ok(self.connection(lost).await?) }).await
    }

    /// The current connection when it is open (and not `lost`), else a new one.
    async fn connection(
        &self,
        lost: Option<&Arc<Connection>>,
    ) -> Result<Arc<Connection>, TransportError> {
        if let Some(c) = self.usable(lost) {
            return Ok(c);
        }
        let _one = self.connecting.lock().await;
        if let Some(c) = self.usable(lost) {
            // Another caller reconnected meanwhile.
            return Ok(c);
        }
        let stream = TcpStream::connect(self.peer).await?;
        let connection = Connection::start(stream, &self.config, &self.counters)?;
        *self.current.lock() = connection.clone();
        Ok(connection)
    }

    /// A reply of a call `sent` bytes long: counted, recorded in the call's span.
    #[inline]
    fn received(&self, message: Bytes, sent: usize) -> Reply {
        self.counters.reply(message.len(), false);
        metrics::bytes(Side::Client, "tcp", false, message.len() as u64 + 4);
        if observe::calls_enabled() {
            let copied = (sent + message.len() + 8) as u64;
            observe::record_reply(Moved::Record, 0, copied);
        }
        plain(message)
    }

    fn usable(&self, lost: Option<&Arc<Connection>>) -> Option<Arc<Connection>> {
        let current = self.current.lock().clone();
        let same = lost.is_some_and(|l| Arc::ptr_eq(l, &current));
        (current.replies.is_open() && !same).then_some(current)
    }
}

/// A call's future. The common case is polled here, with no `async` machinery: the current
/// connection is open and has a free slot, the call is registered and sent at once, and its
/// reply awaited. Anything else (no slot free, no connection, a connection lost) continues
/// in [`Inner::exchange`], boxed. (The nested `async` functions this replaces cost about 180
/// more instructions per NULL call, callgrind, of some 4,800, and a larger future to copy
/// into its box.)
struct Exchange<'a> {
    inner: &'a Inner,
    message: Message<'a>,
    /// The deadline under the configured default timeout (its limit is in `inner`: a
    /// smaller future, copied into its box with fewer instructions).
    at: Option<CoarseInstant>,
    /// The length of the call as sent (for the reply's record in the span).
    sent: u32,
    step: Step<'a>,
}

/// Where an [`Exchange`] is.
enum Step<'a> {
    /// Not polled yet.
    Start,
    /// Sent on `connection`; waiting for the reply.
    Waiting {
        connection: Arc<Connection>,
        ticket: Ticket,
    },
    /// In the slow path.
    Slow(BoxFuture<'a, Result<Reply, Error>>),
    /// Finished.
    Done,
}

/// An attempt that got no reply, for the slow path to go on from.
struct Attempt {
    connection: Arc<Connection>,
    /// The XID the call was registered with, if it was.
    xid: Option<u32>,
    lost: Lost,
}

impl<'a> Exchange<'a> {
    /// The call of `message` on `inner`, due `at` if the configured default timeout applies.
    fn new(inner: &'a Inner, message: Message<'a>, at: Option<CoarseInstant>) -> Exchange<'a> {
        Exchange {
            inner,
            message,
            at,
            sent: 0,
            step: Step::Start,
        }
    }

    /// Continues in the slow path from `last`.
    fn slow(&mut self, last: Option<Attempt>) {
        let deadline = self.at.zip(self.inner.config.timeout);
        let deadline = deadline.map(|(at, limit)| Deadline { at, limit });
        let future = self.inner.exchange(self.message, deadline, last);
        self.step = Step::Slow(Box::pin(future));
    }

    /// Registers and sends the call on the current connection, or hands it to the slow path;
    /// `Err` when the call cannot be made at all (it does not encode). `Ok(true)` when the
    /// call was sent and the socket waits to wake this task (see [`Ticket::listening`]):
    /// then nothing is to be read in this poll.
    fn start(&mut self, cx: &mut Context<'_>) -> Result<bool, Error> {
        let Some(connection) = self.inner.usable(None) else {
            self.slow(None);
            return Ok(false);
        };
        let xid = Xid::Fresh(&self.inner.next_xid);
        let mut ticket = match connection.replies.register(xid, self.at, cx) {
            Ok(ticket) => {
                connection.replies.note_full(false);
                ticket
            }
            // No slot free: the slow path waits for one.
            Err(Lost::Full) => {
                connection.replies.note_full(true);
                self.slow(None);
                return Ok(false);
            }
            Err(lost) => {
                self.slow(Some(Attempt {
                    connection,
                    xid: None,
                    lost,
                }));
                return Ok(false);
            }
        };
        let xid = ticket.xid();
        match connection.send(self.inner, &self.message, xid) {
            Ok(Ok(sent)) => {
                self.sent = sent as u32;
                let listening = ticket.listening();
                self.step = Step::Waiting { connection, ticket };
                Ok(listening)
            }
            Ok(Err(SinkClosed)) => {
                connection.replies.cancel(&mut ticket);
                self.slow(Some(Attempt {
                    connection,
                    xid: Some(xid),
                    lost: Lost::BeforeSending,
                }));
                Ok(false)
            }
            Err(error) => {
                connection.replies.cancel(&mut ticket);
                Err(error)
            }
        }
    }
}

impl std::future::Future for Exchange<'_> {
    type Output = Result<Reply, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        loop {
            match &mut this.step {
                Step::Start => match this.start(cx) {
                    Err(error) => {
                        this.step = Step::Done;
                        return Poll::Ready(Err(error));
                    }
                    // Whoever the socket wakes reads the reply: this task, or the reply
                    // task if another call came meanwhile (then it wakes this one).
                    Ok(true) => return Poll::Pending,
                    Ok(false) => {}
                },
                Step::Waiting { connection, ticket } => {
                    let outcome = ready!(connection.replies.poll_reply(ticket, cx));
                    let Step::Waiting { connection, ticket } =
                        std::mem::replace(&mut this.step, Step::Done)
                    else {
                        unreachable!("matched above")
                    };
                    match outcome {
                        Ok(message) => {
                            return Poll::Ready(Ok(this
                                .inner
                                .received(message, this.sent as usize)))
                        }
                        Err(lost) => this.slow(Some(Attempt {
                            connection,
                            xid: Some(ticket.xid()),
                            lost,
                        })),
                    }
                }
                Step::Slow(future) => {
                    let result = ready!(future.as_mut().poll(cx));
                    this.step = Step::Done;
                    return Poll::Ready(result);
                }
                Step::Done => panic!("a call's future polled after it completed"),
            }
        }
    }
}

impl Drop for Exchange<'_> {
    fn drop(&mut self) {
        // Cancelled while waiting: the call is forgotten (a late reply is dropped).
        if let Step::Waiting { connection, ticket } = &mut self.step {
            connection.replies.cancel(ticket);
        }
    }
}

/// A reply over TCP: the message alone (no chunks).
fn plain(message: Bytes) -> Reply {
    Reply {
        message,
        chunks: None,
    }
}

/// A first XID unlikely to repeat one a server saw from an earlier client on this host
/// (time, process and a per-process counter, mixed), so that a server's duplicate request
/// cache does not take a new call for an old one.
pub(super) fn initial_xid() -> u32 {
    static SEQUENCE: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut x = nanos
        ^ (u64::from(std::process::id()) << 32)
        ^ SEQUENCE
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    // splitmix64's finalizer.
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    x as u32
}

/// One TCP connection: its writing side, its replies, and the task that reads them when
/// several calls wait (see [`replies`](super::replies)).
struct Connection {
    replies: Arc<Replies>,
    sink: RecordSink,
    task: JoinHandle<()>,
    /// Fails its calls past their deadline (see [`deadlines`]).
    sweeper: Option<JoinHandle<()>>,
}

impl Connection {
    fn start(
        stream: TcpStream,
        config: &TcpConfig,
        counters: &Arc<TcpCounters>,
    ) -> io::Result<Arc<Connection>> {
        stream.set_nodelay(true)?;
        let peer = stream.peer_addr()?;
        let (read, write) = stream.into_split();
        let sink = RecordSink::new(write, config.max_fragment);
        let replies = Arc::new(Replies::new(
            peer,
            read,
            config,
            sink.clone(),
            counters.clone(),
        ));
        counters.opened();
        observe::opened(Side::Client, "tcp", peer);
        let sweeper = match config.timeout {
            Some(timeout) => {
                let expire: Arc<dyn Expire> = replies.clone();
                Some(deadlines::watch(
                    Arc::downgrade(&expire),
                    deadlines::period(timeout),
                )?)
            }
            None => None,
        };
        let task = tokio::spawn(reply_task(replies.clone(), sink.clone()));
        Ok(Arc::new(Connection {
            replies,
            sink,
            task,
            sweeper,
        }))
    }

    /// Registers the call (with a fresh XID, or `xid` once it has one, which is then set),
    /// sends `message` and waits for its reply, at most until `deadline`; with the length
    /// sent.
    async fn exchange(
        &self,
        inner: &Inner,
        xid: &mut Option<u32>,
        message: &Message<'_>,
        deadline: Option<Deadline>,
        waker: &Waker,
    ) -> Result<(Result<Bytes, Lost>, usize), Error> {
        let chosen = match *xid {
            Some(xid) => Xid::Same(xid),
            None => Xid::Fresh(&inner.next_xid),
        };
        let waiter = loop {
            // (The waiter's first poll reads whatever the socket has by then.)
            let registered = {
                let mut cx = Context::from_waker(waker);
                self.replies
                    .register(chosen, deadline.map(|d| d.at), &mut cx)
            };
            match registered {
                Ok(ticket) => break Waiter::new(&self.replies, ticket),
                Err(Lost::Full) => {
                    self.replies.note_full(true);
                    Deadline::bound(deadline, async {
                        self.replies.slot_freed().await;
                        Ok(())
                    })
                    .await?
                }
                Err(lost) => return Ok((Err(lost), 0)),
            }
        };
        *xid = Some(waiter.xid());
        let Ok(sent) = self.send(inner, message, waiter.xid())? else {
            return Ok((Err(Lost::BeforeSending), 0));
        };
        Ok((waiter.await, sent))
    }

    /// Encodes `message` with `xid` and sends it; its length. Encoded on every sending
    /// (rarely more than once): a small message goes out from the thread's encoder, with
    /// nothing kept.
    fn send(
        &self,
        inner: &Inner,
        message: &Message<'_>,
        xid: u32,
    ) -> Result<Result<usize, SinkClosed>, Error> {
        let mut len = 0;
        let encode = |enc: &mut Encoder| {
            message.encode(xid, enc, inner.config.max_record)?;
            len = enc.len();
            Ok::<(), Error>(())
        };
        if let Err(closed) = with_message(encode, |call| self.sink.send(call, None))? {
            return Ok(Err(closed));
        }
        inner.counters.call(len, true);
        metrics::bytes(Side::Client, "tcp", true, len as u64 + 4);
        if observe::calls_enabled() {
            observe::record_call(xid, Moved::Record);
        }
        Ok(Ok(len))
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.replies.closed(CloseReason::Local);
        self.task.abort();
        if let Some(sweeper) = &self.sweeper {
            sweeper.abort();
        }
        self.sink.close();
    }
}

/// Reads replies while several calls wait (see [`Replies::poll_task`]), until the connection
/// ends or its sending side closes.
async fn reply_task(replies: Arc<Replies>, sink: RecordSink) {
    tokio::select! {
        biased;
        () = std::future::poll_fn(|cx| replies.poll_task(cx)) => {}
        () = sink.closed() => {}
    }
    sink.close();
    replies.fail_all();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::encode_reply_header;
    use crate::xdr::{Encode, Procedure};
    use std::future::Future;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    struct Double;

    impl Procedure for Double {
        const PROGRAM: u32 = 0x2000_0001;
        const VERSION: u32 = 1;
        const PROCEDURE: u32 = 1;
        const NAME: &'static str = "DOUBLE";
        type Args = u32;
        type Result = u32;
    }

    /// Reads one call (a record of one fragment, as our client sends): its XID and argument.
    async fn read_call(peer: &mut TcpStream) -> (u32, u32) {
        let len = peer.read_u32().await.unwrap() & !crate::rpc::record::LAST_FRAGMENT;
        let mut call = vec![0; len as usize];
        peer.read_exact(&mut call).await.unwrap();
        let word = |i: usize| u32::from_be_bytes(call[i..i + 4].try_into().unwrap());
        (word(0), word(call.len() - 4))
    }

    async fn reply(peer: &mut TcpStream, xid: u32, result: u32) {
        let mut enc = Encoder::new();
        encode_reply_header(&mut enc, xid, Ok(())).unwrap();
        result.encode(&mut enc).unwrap();
        let message = enc.finish().into_bytes();
        let mut record = (message.len() as u32 | crate::rpc::record::LAST_FRAGMENT)
            .to_be_bytes()
            .to_vec();
        record.extend_from_slice(&message);
        peer.write_all(&record).await.unwrap();
    }

    /// `call`'s outcome, provided it is woken for it within 5 seconds (a timer around it
    /// would poll it when it fires, and hide a lost wake-up).
    async fn woken<F: std::future::Future>(call: F) -> F::Output {
        tokio::select! {
            biased;
            () = tokio::time::sleep(Duration::from_secs(5)) => panic!("the call was never woken"),
            outcome = call => outcome,
        }
    }

    /// A waker that notes it was woken.
    #[derive(Default)]
    struct Flag(std::sync::atomic::AtomicBool);

    impl std::task::Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    impl Flag {
        fn woken(&self) -> bool {
            self.0.load(Ordering::SeqCst)
        }
    }

    /// A reading call polled from another task than the one that sent it (its future moved)
    /// is woken there when its reply is handed to it by the reply task, not where it was.
    #[tokio::test]
    async fn a_reading_call_moved_to_another_task_is_woken_there() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = Client::new(TcpTransport::connect(addr, TcpConfig::new()).await.unwrap());
        let (mut peer, _) = listener.accept().await.unwrap();
        peer.set_nodelay(true).unwrap();
        let (sent_by, moved_to) = (Arc::new(Flag::default()), Arc::new(Flag::default()));
        let (sent_by_waker, moved_to_waker) =
            (Waker::from(sent_by.clone()), Waker::from(moved_to.clone()));
        let mut first = std::pin::pin!(client.call::<Double>(&1));
        let mut poll_first = |waker: &Waker| first.as_mut().poll(&mut Context::from_waker(waker));
        assert!(poll_first(&sent_by_waker).is_pending());
        let (first_xid, _) = read_call(&mut peer).await;
        // Polled from elsewhere while it still reads (nothing came).
        assert!(poll_first(&moved_to_waker).is_pending());
        // A second call: the reply task reads from now on, and routes the first's reply.
        let second = tokio::spawn({
            let client = client.clone();
            async move { client.call::<Double>(&2).await }
        });
        let (second_xid, _) = read_call(&mut peer).await;
        reply(&mut peer, first_xid, 2).await;
        tokio::time::timeout(Duration::from_secs(5), async {
            while !moved_to.woken() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await
        .expect("the task the call moved to is woken for its reply");
        assert!(!sent_by.woken(), "the task the call left is not woken");
        match poll_first(&moved_to_waker) {
            Poll::Ready(answer) => assert_eq!(answer.unwrap(), 2),
            Poll::Pending => panic!("woken, but no answer"),
        }
        reply(&mut peer, second_xid, 4).await;
        assert_eq!(woken(second).await.unwrap().unwrap(), 4);
    }

    /// A call sent on an idle connection waits without reading: the socket wakes it for its
    /// reply. When a second call comes, the reply task reads instead, and hands the first its
    /// reply while the second is kept aside; the other way round too. In rounds.
    #[tokio::test]
    async fn a_call_that_waits_for_the_socket_gets_its_reply_from_whoever_reads() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = Client::new(TcpTransport::connect(addr, TcpConfig::new()).await.unwrap());
        let (mut peer, _) = listener.accept().await.unwrap();
        peer.set_nodelay(true).unwrap();
        for round in 0..50u32 {
            let (x, y) = (2 * round, 2 * round + 1);
            // Alone: only the socket can wake the call.
            let (lone, ()) = tokio::join!(woken(client.call::<Double>(&x)), async {
                let (xid, arg) = read_call(&mut peer).await;
                reply(&mut peer, xid, 2 * arg).await;
            });
            assert_eq!(lone.unwrap(), 2 * x);
            // Two at once.
            let mut first = std::pin::pin!(client.call::<Double>(&x));
            // The first call is sent (it was polled before the peer read it).
            let (first_xid, arg) = tokio::select! {
                biased;
                r = &mut first => panic!("answered before its reply: {r:?}"),
                call = read_call(&mut peer) => call,
            };
            assert_eq!(arg, x);
            let mut second = std::pin::pin!(client.call::<Double>(&y));
            let (second_xid, arg) = tokio::select! {
                biased;
                r = &mut second => panic!("answered before its reply: {r:?}"),
                call = read_call(&mut peer) => call,
            };
            assert_eq!(arg, y);
            // Odd rounds answer the later call first.
            let (early, late) = match round % 2 {
                0 => ((first, first_xid, x), (second, second_xid, y)),
                _ => ((second, second_xid, y), (first, first_xid, x)),
            };
            for (call, xid, arg) in [early, late] {
                reply(&mut peer, xid, 2 * arg).await;
                assert_eq!(woken(call).await.unwrap(), 2 * arg);
            }
        }
    }
}

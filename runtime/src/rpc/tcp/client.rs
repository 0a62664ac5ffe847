//! The client side: [`TcpTransport`], many calls in flight on one connection, replies matched
//! to calls by XID.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tokio::net::{TcpStream, ToSocketAddrs};
use tokio::task::JoinHandle;

use super::config::TcpConfig;
use super::deadlines::{self, Expire};
use super::encoding::encode_message;
use super::replies::{Lost, Replies, Xid};
use super::sink::RecordSink;
use crate::rpc::{
    BoxFuture, BufferSource, Call, CallTransport, Client, Error, HeapBuffers, Reply,
    TransportError, TransportKind,
};
use crate::xdr::Encoded;

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
        let connection = Connection::start(stream, &config)?;
        Ok(TcpTransport {
            inner: Arc::new(Inner {
                peer,
                next_xid: AtomicU32::new(initial_xid()),
                current: Mutex::new(connection),
                connecting: tokio::sync::Mutex::new(()),
                config,
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
}

struct Inner {
    peer: SocketAddr,
    config: TcpConfig,
    next_xid: AtomicU32,
    /// The connection calls go to (possibly lost: then the next call reconnects).
    current: Mutex<Arc<Connection>>,
    /// Held while reconnecting, so that one caller does it.
    connecting: tokio::sync::Mutex<()>,
}

/// When a call under the configured default timeout must have its reply.
#[derive(Clone, Copy)]
struct Deadline {
    at: Instant,
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
                Some(d) => tokio::time::timeout_at(d.at.into(), future)
                    .await
                    .unwrap_or_else(|_| Err(d.error())),
                None => future.await,
            }
        })
    }
}

impl Inner {
    /// The call's future, boxed as it is (an `async fn` around it would hold `call` twice).
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Reply, Error>> {
        match (call.options.timeout, self.config.timeout) {
            // A timeout of the call's own: a timer of its own, exact.
            (Some(limit), _) => Box::pin(async move {
                tokio::time::timeout(limit, self.exchange(call, None))
                    .await
                    .unwrap_or(Err(TransportError::TimedOut(limit).into()))
            }),
            // The default: a deadline the process's sweeper enforces (see `deadlines`).
            (None, Some(limit)) => {
                let deadline = Deadline {
                    at: Instant::now() + limit,
                    limit,
                };
                Box::pin(self.exchange(call, Some(deadline)))
            }
            (None, None) => Box::pin(self.exchange(call, None)),
        }
    }

    async fn exchange(&self, call: Call<'_>, deadline: Option<Deadline>) -> Result<Reply, Error> {
        // Whoever reads the reply wakes this task.
        let waker = std::future::poll_fn(|cx| Poll::Ready(cx.waker().clone())).await;
        let encode = |xid: u32| {
            let message = encode_message(|enc| call.encode(xid, enc)).map_err(Error::Encode)?;
            if message.len() > self.config.max_record {
                return Err(Error::from(TransportError::TooLarge {
                    len: message.len() as u64,
                    max: self.config.max_record as u64,
                }));
            }
            Ok(message)
        };
        let mut connection = self.connection_until(None, deadline).await?;
        // The XID and message once encoded (on the first connection that takes the call).
        let mut sent: Option<(u32, Encoded)> = None;
        let mut retransmits = self.config.retransmits;
        let mut reconnect_unsent = true;
        loop {
            let xid = match &sent {
                // A call sent again keeps its XID.
                Some((xid, _)) => Xid::Same(*xid),
                None => Xid::Fresh(&self.next_xid),
            };
            let outcome = connection
                .exchange(xid, &mut sent, &encode, deadline, &waker)
                .await?;
            let xid = sent.as_ref().map(|(xid, _)| *xid);
            match outcome {
                Ok(message) => {
                    return Ok(Reply {
                        message,
                        chunks: None,
                    })
                }
                Err(Lost::BeforeSending) if reconnect_unsent => reconnect_unsent = false,
                Err(Lost::AfterSending) if retransmits > 0 => {
                    retransmits -= 1;
                    tracing::debug!(
                        xid = xid.unwrap_or_default(),
                        peer = %self.peer,
                        "connection lost before the reply: sending the call again on a new one"
                    );
                }
                Err(Lost::TimedOut) => {
                    return Err(deadline.map_or(TransportError::Closed.into(), Deadline::error))
                }
                Err(Lost::XidInUse) => {
                    return Err(TransportError::Protocol(format!(
                        "XID {:#010x} is already waiting for a reply on this connection",
                        xid.unwrap_or_default()
                    ))
                    .into())
                }
                Err(_) => return Err(TransportError::Closed.into()),
            }
            connection = self.connection_until(Some(&connection), deadline).await?;
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
        let connection = Connection::start(stream, &self.config)?;
        tracing::debug!(peer = %self.peer, "reconnected");
        *self.lock_current() = connection.clone();
        Ok(connection)
    }

    fn usable(&self, lost: Option<&Arc<Connection>>) -> Option<Arc<Connection>> {
        let current = self.lock_current().clone();
        let same = lost.is_some_and(|l| Arc::ptr_eq(l, &current));
        (current.replies.is_open() && !same).then_some(current)
    }

    fn lock_current(&self) -> MutexGuard<'_, Arc<Connection>> {
        self.current.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A first XID unlikely to repeat one a server saw from an earlier client on this host
/// (time, process and a per-process counter, mixed), so that a server's duplicate request
/// cache does not take a new call for an old one.
fn initial_xid() -> u32 {
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
}

impl Connection {
    fn start(stream: TcpStream, config: &TcpConfig) -> io::Result<Arc<Connection>> {
        stream.set_nodelay(true)?;
        let peer = stream.peer_addr()?;
        let (read, write) = stream.into_split();
        let sink = RecordSink::new(Arc::new(write), config.max_fragment);
        let replies = Arc::new(Replies::new(peer, read, config, sink.clone()));
        if let Some(timeout) = config.timeout {
            let expire: Arc<dyn Expire> = replies.clone();
            deadlines::watch(Arc::downgrade(&expire), deadlines::period(timeout));
        }
        let task = tokio::spawn(reply_task(replies.clone(), sink.clone()));
        Ok(Arc::new(Connection {
            replies,
            sink,
            task,
        }))
    }

    /// Registers a call with an XID chosen per `xid`, sends it and waits for its reply, at
    /// most until `deadline`. The message is `sent`'s, or `encode`d with the XID then kept
    /// there with it (for sending again).
    async fn exchange(
        &self,
        xid: Xid<'_>,
        sent: &mut Option<(u32, Encoded)>,
        encode: &impl Fn(u32) -> Result<Encoded, Error>,
        deadline: Option<Deadline>,
        waker: &Waker,
    ) -> Result<Result<Bytes, Lost>, Error> {
        let waiter = loop {
            // Made before trying, so that a slot freed in between is not missed.
            let slot_freed = self.replies.slot_freed();
            match self.replies.register(xid, deadline.map(|d| d.at), waker) {
                Ok(waiter) => break waiter,
                Err(Lost::Full) => {
                    Deadline::bound(deadline, async {
                        slot_freed.await;
                        Ok(())
                    })
                    .await?
                }
                Err(lost) => return Ok(Err(lost)),
            }
        };
        let (_, message) = match sent {
            Some(sent) => sent,
            None => sent.insert((waiter.xid(), encode(waiter.xid())?)),
        };
        if self.sink.send(message.parts(), None).is_err() {
            return Ok(Err(Lost::BeforeSending));
        }
        Ok(waiter.await)
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.task.abort();
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

//! The client side: [`TcpTransport`], many calls in flight on one connection, replies matched
//! to calls by XID.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::{TcpStream, ToSocketAddrs};
use tokio::sync::{oneshot, Semaphore};
use tokio::task::JoinHandle;

use super::config::TcpConfig;
use super::deadlines::{self, Expire};
use super::sink::RecordSink;
use super::stream::{next_record, ReadError};
use crate::id_map::IdMap;
use crate::rpc::msg::MsgType;
use crate::rpc::record::RecordReader;
use crate::rpc::{
    BoxFuture, BufferSource, Call, CallTransport, Client, Error, HeapBuffers, Reply,
    TransportError, TransportKind,
};
use crate::xdr::Encoder;

/// A [`CallTransport`] over one TCP connection with record marking (RFC 5531 section 11).
///
/// Calls from any number of tasks share the connection, up to
/// [`TcpConfig::max_in_flight`] at once; each gets its own XID, and replies are matched to
/// calls by XID whatever their order. A reply for no waiting call (late, after its call
/// timed out, or a duplicate) is logged and dropped.
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
                slots: Semaphore::new(config.slots() as usize),
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
        Box::pin(self.inner.call(call))
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
    /// Calls in flight.
    slots: Semaphore,
    next_xid: AtomicU32,
    /// The connection calls go to (possibly lost: then the next call reconnects).
    current: Mutex<Arc<Connection>>,
    /// Held while reconnecting, so that one caller does it.
    connecting: tokio::sync::Mutex<()>,
}

/// Why a call got no reply from a connection.
enum Lost {
    /// The connection was gone before the call went out.
    BeforeSending,
    /// The connection went after the call went out.
    AfterSending,
    /// Another call on the connection has this XID (only after 2^32 XIDs).
    XidInUse,
    /// The call passed its deadline (see [`deadlines`]).
    TimedOut,
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
    /// slot, connecting again): a timer each.
    async fn bound<T>(
        deadline: Option<Deadline>,
        future: impl std::future::Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        match deadline {
            Some(d) => tokio::time::timeout_at(d.at.into(), future)
                .await
                .unwrap_or_else(|_| Err(d.error())),
            None => future.await,
        }
    }
}

impl Inner {
    async fn call(&self, call: Call<'_>) -> Result<Reply, Error> {
        match (call.options.timeout, self.config.timeout) {
            // A timeout of the call's own: a timer of its own, exact.
            (Some(limit), _) => tokio::time::timeout(limit, self.exchange(call, None))
                .await
                .unwrap_or(Err(TransportError::TimedOut(limit).into())),
            // The default: a deadline the process's sweeper enforces (see `deadlines`).
            (None, Some(limit)) => {
                let deadline = Deadline {
                    at: Instant::now() + limit,
                    limit,
                };
                self.exchange(call, Some(deadline)).await
            }
            (None, None) => self.exchange(call, None).await,
        }
    }

    async fn exchange(&self, call: Call<'_>, deadline: Option<Deadline>) -> Result<Reply, Error> {
        let _slot = match self.slots.try_acquire() {
            Ok(slot) => slot,
            Err(_) => {
                Deadline::bound(deadline, async {
                    // The semaphore is never closed.
                    self.slots
                        .acquire()
                        .await
                        .map_err(|_| TransportError::Closed.into())
                })
                .await?
            }
        };
        let mut connection = self.connection_until(None, deadline).await?;
        let xid = self.allocate_xid(&connection);
        let mut enc = Encoder::new();
        call.encode(xid, &mut enc).map_err(Error::Encode)?;
        let message = enc.finish();
        if message.len() > self.config.max_record {
            return Err(TransportError::TooLarge {
                len: message.len() as u64,
                max: self.config.max_record as u64,
            }
            .into());
        }
        let mut retransmits = self.config.retransmits;
        let mut reconnect_unsent = true;
        loop {
            match connection.exchange(xid, message.parts(), deadline).await {
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
                        xid,
                        peer = %self.peer,
                        "connection lost before the reply: sending the call again on a new one"
                    );
                }
                Err(Lost::TimedOut) => {
                    return Err(deadline.map_or(TransportError::Closed.into(), Deadline::error))
                }
                Err(Lost::XidInUse) => {
                    return Err(TransportError::Protocol(format!(
                        "XID {xid:#010x} is already waiting for a reply on this connection"
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
        (current.shared.is_open() && !same).then_some(current)
    }

    fn lock_current(&self) -> MutexGuard<'_, Arc<Connection>> {
        self.current.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next XID not waiting for a reply on `connection`.
    fn allocate_xid(&self, connection: &Connection) -> u32 {
        let pending = connection.shared.lock();
        loop {
            let xid = self.next_xid.fetch_add(1, Ordering::Relaxed);
            if !pending.calls.contains_key(&xid) {
                return xid;
            }
        }
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

/// One TCP connection: its writing side and the task reading its replies.
struct Connection {
    shared: Arc<Shared>,
    sink: RecordSink,
    reader: JoinHandle<()>,
}

/// What the reading task shares with callers.
struct Shared {
    peer: SocketAddr,
    pending: Mutex<Pending>,
    /// `pending.open`, readable without the lock.
    open: AtomicBool,
}

struct Pending {
    /// Calls waiting for their reply, by XID.
    calls: IdMap<u32, Waiting>,
    /// False once the connection is lost.
    open: bool,
}

/// A call waiting for its reply.
struct Waiting {
    reply: oneshot::Sender<Answer>,
    /// When the sweeper fails the call; `None`: the caller has a timer of its own, or waits
    /// forever.
    deadline: Option<Instant>,
}

/// What a waiting call gets.
enum Answer {
    Reply(Bytes),
    /// Past its deadline.
    TimedOut,
}

impl Connection {
    fn start(stream: TcpStream, config: &TcpConfig) -> io::Result<Arc<Connection>> {
        stream.set_nodelay(true)?;
        let peer = stream.peer_addr()?;
        let (read, write) = stream.into_split();
        let sink = RecordSink::new(Arc::new(write), config.max_fragment);
        let shared = Arc::new(Shared {
            peer,
            pending: Mutex::new(Pending {
                calls: IdMap::default(),
                open: true,
            }),
            open: AtomicBool::new(true),
        });
        if let Some(timeout) = config.timeout {
            let expire: Arc<dyn Expire> = shared.clone();
            deadlines::watch(Arc::downgrade(&expire), deadlines::period(timeout));
        }
        let reader = tokio::spawn(read_replies(
            read,
            shared.clone(),
            sink.clone(),
            config.max_record,
        ));
        Ok(Arc::new(Connection {
            shared,
            sink,
            reader,
        }))
    }

    /// Sends the call `message` (whose XID is `xid`) and waits for its reply, at most until
    /// `deadline`.
    async fn exchange(
        &self,
        xid: u32,
        message: &[Bytes],
        deadline: Option<Deadline>,
    ) -> Result<Bytes, Lost> {
        let reply = {
            let mut pending = self.shared.lock();
            if !pending.open {
                return Err(Lost::BeforeSending);
            }
            if pending.calls.contains_key(&xid) {
                return Err(Lost::XidInUse);
            }
            let (reply, rx) = oneshot::channel();
            let deadline = deadline.map(|d| d.at);
            pending.calls.insert(xid, Waiting { reply, deadline });
            rx
        };
        // Forgets the XID however this ends: timeout, cancellation, a lost connection.
        let mut forget = Forget {
            shared: &self.shared,
            xid,
            armed: true,
        };
        if self.sink.send(message, None).is_err() {
            return Err(Lost::BeforeSending);
        }
        let answer = reply.await.map_err(|_| Lost::AfterSending)?;
        // The reading task took the XID out when it routed the reply, or the sweeper did.
        forget.armed = false;
        match answer {
            Answer::Reply(reply) => Ok(reply),
            Answer::TimedOut => Err(Lost::TimedOut),
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.reader.abort();
        self.sink.close();
    }
}

struct Forget<'a> {
    shared: &'a Shared,
    xid: u32,
    armed: bool,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.shared.lock().calls.remove(&self.xid);
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    /// Hands a record to the call waiting for it.
    fn route(&self, record: Bytes) {
        let Some(header) = record.first_chunk::<8>() else {
            tracing::warn!(peer = %self.peer, len = record.len(), "a record too short for an RPC reply: dropped");
            return;
        };
        let [x0, x1, x2, x3, m0, m1, m2, m3] = *header;
        let xid = u32::from_be_bytes([x0, x1, x2, x3]);
        if u32::from_be_bytes([m0, m1, m2, m3]) != MsgType::Reply as i32 as u32 {
            tracing::debug!(peer = %self.peer, xid, "a CALL from the server (no backward direction over TCP): dropped");
            return;
        }
        let waiting = self.lock().calls.remove(&xid);
        match waiting {
            // The caller may have given up just now; then nobody wants the reply.
            Some(call) => drop(call.reply.send(Answer::Reply(record))),
            None => tracing::debug!(
                peer = %self.peer,
                xid,
                "a reply no call waits for (late after a timeout, or a duplicate): dropped"
            ),
        }
    }

    /// Fails every waiting call: the connection is lost.
    fn fail_all(&self) {
        let calls = {
            let mut pending = self.lock();
            pending.open = false;
            self.open.store(false, Ordering::Release);
            std::mem::take(&mut pending.calls)
        };
        // Dropping the senders wakes the callers.
        drop(calls);
    }
}

impl Expire for Shared {
    fn expire(&self, now: Instant) {
        let expired: Vec<Waiting> = {
            let mut pending = self.lock();
            let xids: Vec<u32> = pending
                .calls
                .iter()
                .filter(|(_, w)| w.deadline.is_some_and(|d| d <= now))
                .map(|(xid, _)| *xid)
                .collect();
            xids.iter()
                .filter_map(|xid| pending.calls.remove(xid))
                .collect()
        };
        for call in expired {
            // The caller may have given up just now.
            drop(call.reply.send(Answer::TimedOut));
        }
    }
}

/// Reads replies until the connection ends, then fails the calls still waiting.
async fn read_replies(
    mut stream: OwnedReadHalf,
    shared: Arc<Shared>,
    sink: RecordSink,
    max_record: usize,
) {
    let mut reader = RecordReader::new(max_record);
    // One future for the whole loop (a watch subscription per record is not free).
    let mut closed = std::pin::pin!(sink.closed());
    loop {
        let record = tokio::select! {
            record = next_record(&mut stream, &mut reader) => record,
            () = closed.as_mut() => break,
        };
        match record {
            Ok(Some(record)) => shared.route(record),
            Ok(None) => {
                tracing::debug!(peer = %shared.peer, "the server closed the connection");
                break;
            }
            Err(ReadError::Record(error)) => {
                tracing::warn!(peer = %shared.peer, %error, "bad record marking: closing the connection");
                break;
            }
            Err(ReadError::Io(error)) => {
                tracing::debug!(peer = %shared.peer, %error, "connection lost");
                break;
            }
        }
    }
    sink.close();
    shared.fail_all();
}

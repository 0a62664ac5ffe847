//! [`SoftListener`]: accepts TCP connections in a background task and reads each one's MPA
//! Request in a task of its own, so no handshake waits on another.
//!
//! A responder answers only a Request it has received (RFC 5044 section 7.1: the Reply
//! follows the Request), and a peer may take as long as it likes to send it, or never send
//! it. Reading Requests one after another in the accept loop
//! let a few silent peers lock every other client out for a handshake timeout each. Here:
//!
//! * the accept loop only accepts, and gives each connection a task that reads its Request
//!   under [`SoftConfig::handshake_timeout`], a deadline for the whole Request;
//! * completed Requests queue for [`Listener::next_request`], in the order they completed;
//! * at most [`SoftConfig::max_handshakes`] connections negotiate at once, a queued request
//!   or one being answered included; beyond that a new connection is closed at once (it has
//!   not sent a Request yet, so there is nothing to answer), with a rate-limited log line, as
//!   a careful server refuses work it cannot bound rather than letting it queue;
//! * dropping the listener ends the accept loop, stops every handshake and closes every
//!   request still queued.
//!
//! Answering a request ([`ConnectRequest::accept`](crate::rdma::ConnectRequest::accept) or
//! `reject`) writes one Reply of at most 532 octets into a fresh socket's send buffer, which
//! never waits on the peer; it runs in whatever task the caller picks (the RPC-over-RDMA
//! server spawns one per request).

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Mutex, OwnedSemaphorePermit, Semaphore};
use tokio::task::{JoinHandle, JoinSet};

use super::provider::{conn_tap, read_frame, record_frame, SoftConnection, SoftRequest};
use super::wire::mpa::FrameKind;
use super::SoftConfig;
use crate::admission::{is_about_one_connection, Refusals, ACCEPT_BACKOFF};
use crate::rdma::{Error, Listener, Result};

/// The log line of a connection refused at the cap.
static AT_CAP: Refusals = Refusals::new(
    "refusing a connection: the listener's MPA handshakes are at their cap",
    "SoftConfig::max_handshakes",
);

/// A listening socket of the soft provider.
pub struct SoftListener {
    local: SocketAddr,
    /// Requests whose MPA Request arrived, in the order they arrived.
    requests: Mutex<mpsc::UnboundedReceiver<SoftRequest>>,
    /// Places for connections negotiating: [`SoftConfig::max_handshakes`] of them.
    slots: Arc<Semaphore>,
    max_handshakes: usize,
    /// The accept loop; its handshake tasks go with it.
    accepting: JoinHandle<()>,
}

impl std::fmt::Debug for SoftListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SoftListener")
            .field("local", &self.local)
            .field("handshakes", &self.handshakes())
            .field("max_handshakes", &self.max_handshakes)
            .finish()
    }
}

impl SoftListener {
    /// Listens on `addr` and starts accepting in the background (in the current tokio
    /// runtime).
    pub(super) async fn bind(addr: SocketAddr, config: SoftConfig) -> Result<SoftListener> {
        let listener = TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let max_handshakes = config.max_handshakes.clamp(1, Semaphore::MAX_PERMITS);
        let slots = Arc::new(Semaphore::new(max_handshakes));
        let (queue, requests) = mpsc::unbounded_channel();
        let accepting = tokio::spawn(accept_loop(
            listener,
            Handshakes {
                config,
                slots: slots.clone(),
                max: max_handshakes,
                queue,
            },
        ));
        Ok(SoftListener {
            local,
            requests: Mutex::new(requests),
            slots,
            max_handshakes,
            accepting,
        })
    }

    /// Connections negotiating now: reading their Request, or with a Request read and not
    /// yet answered (queued for [`Listener::next_request`] or being accepted).
    pub fn handshakes(&self) -> usize {
        self.max_handshakes - self.slots.available_permits()
    }
}

impl Listener for SoftListener {
    type Conn = SoftConnection;
    type Request = SoftRequest;

    fn local_addr(&self) -> Result<SocketAddr> {
        Ok(self.local)
    }

    /// The next connection whose MPA Request has arrived. Cancel-safe: a request is never
    /// lost by dropping this future.
    async fn next_request(&self) -> Result<SoftRequest> {
        // Only ends if the accept loop did, which it does only when the listener is dropped.
        self.requests.lock().await.recv().await.ok_or(Error::Closed)
    }
}

impl Drop for SoftListener {
    fn drop(&mut self) {
        // Its JoinSet aborts every handshake; the queue drops the requests waiting in it.
        self.accepting.abort();
    }
}

/// What the accept loop gives each connection's handshake.
struct Handshakes {
    config: SoftConfig,
    slots: Arc<Semaphore>,
    max: usize,
    queue: mpsc::UnboundedSender<SoftRequest>,
}

/// Accepts connections until the listener is dropped, and starts a handshake on each one
/// there is a place for.
async fn accept_loop(listener: TcpListener, handshakes: Handshakes) {
    let mut running = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            Some(_) = running.join_next(), if !running.is_empty() => continue,
            () = handshakes.queue.closed() => break,
        };
        match accepted {
            Ok((stream, peer)) => match handshakes.slots.clone().try_acquire_owned() {
                Ok(slot) => {
                    running.spawn(handshake(
                        stream,
                        peer,
                        handshakes.config.clone(),
                        slot,
                        handshakes.queue.clone(),
                    ));
                }
                // Closed before reading anything: the peer sees its connection end at once.
                Err(_) => {
                    AT_CAP.refused(peer, handshakes.max);
                    drop(stream);
                }
            },
            Err(error) if is_about_one_connection(&error) => {
                tracing::debug!(%error, "accepting a connection failed");
            }
            Err(error) => {
                tracing::warn!(%error, "accepting connections failed: pausing");
                tokio::select! {
                    () = tokio::time::sleep(ACCEPT_BACKOFF) => {}
                    () = handshakes.queue.closed() => break,
                }
            }
        }
    }
}

/// Reads one connection's MPA Request within the handshake timeout and queues the request;
/// `slot` goes with it.
async fn handshake(
    mut stream: TcpStream,
    peer: SocketAddr,
    config: SoftConfig,
    slot: OwnedSemaphorePermit,
    queue: mpsc::UnboundedSender<SoftRequest>,
) {
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%peer, %error, "TCP_NODELAY refused");
    }
    let tap = conn_tap(&config, &stream);
    // One deadline for the whole frame, not one per read: a peer sending a byte at a time
    // gets no more time than a silent one.
    let read = tokio::time::timeout(
        config.handshake_timeout,
        read_frame(&mut stream, FrameKind::Request),
    )
    .await;
    match read {
        Ok(Ok(request)) => {
            record_frame(tap.as_ref(), &request);
            let request = SoftRequest::new(stream, peer, request, config, tap, slot);
            // Fails only once the listener is gone: the request drops, closing the stream.
            let _ = queue.send(request);
        }
        Ok(Err(error)) => tracing::warn!(%peer, %error, "bad MPA Request: closing"),
        Err(_) => tracing::warn!(
            %peer,
            timeout = ?config.handshake_timeout,
            "no complete MPA Request in time: closing"
        ),
    }
}

#[cfg(test)]
mod tests;

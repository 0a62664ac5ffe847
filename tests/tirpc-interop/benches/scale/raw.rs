//! The `raw-tcp` transport: no RPC, no framing beyond a fixed size, only what a request and
//! its answer cost through the kernel's TCP and tokio.
//!
//! A request is [`MESSAGE`] bytes; the server's task for the connection reads one and writes
//! it back. A client connection carries one request at a time (a worker holds its lock for the
//! round trip). With the same clients, workers and round-robin order as the other transports,
//! its ratio of 4,096 connections to 64 is what this machine's TCP allows any protocol on top
//! of it, the soft provider included. Below 64 connections, where a connection gets several of
//! the 64 calls in flight, they wait for each other: those points are not comparable.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;

/// Bytes of a request and of its answer.
pub const MESSAGE: usize = 8;

/// A listening raw server and the connections it serves.
pub struct RawServer {
    open: Arc<AtomicU64>,
    accepting: tokio::task::JoinHandle<()>,
}

impl RawServer {
    /// Listens on `addr` and serves every connection in a task of its own.
    pub async fn start(addr: SocketAddr) -> std::io::Result<(RawServer, SocketAddr)> {
        let listener = TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let open = Arc::new(AtomicU64::new(0));
        let accepting = tokio::spawn({
            let open = open.clone();
            async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    open.fetch_add(1, Ordering::Relaxed);
                    let open = open.clone();
                    tokio::spawn(async move {
                        let _ = answer(stream).await;
                        open.fetch_sub(1, Ordering::Relaxed);
                    });
                }
            }
        });
        Ok((RawServer { open, accepting }, local))
    }

    /// Connections being served.
    pub fn connections(&self) -> u64 {
        self.open.load(Ordering::Relaxed)
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// Writes every request back until the peer closes.
async fn answer(mut stream: TcpStream) -> std::io::Result<()> {
    let mut request = [0u8; MESSAGE];
    loop {
        stream.read_exact(&mut request).await?;
        stream.write_all(&request).await?;
    }
}

/// A client's raw connection.
pub struct RawConnection {
    stream: Mutex<TcpStream>,
    sent: AtomicU64,
}

impl RawConnection {
    /// Connects to `addr`.
    pub async fn connect(addr: SocketAddr) -> std::io::Result<RawConnection> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(RawConnection {
            stream: Mutex::new(stream),
            sent: AtomicU64::new(0),
        })
    }

    /// One request and its answer, checked: the answer must be the request.
    pub async fn call(&self) -> Result<(), String> {
        let n = self.sent.fetch_add(1, Ordering::Relaxed);
        let request = n.to_le_bytes();
        let mut stream = self.stream.lock().await;
        stream
            .write_all(&request)
            .await
            .map_err(|e| format!("raw request: {e}"))?;
        let mut back = [0u8; MESSAGE];
        stream
            .read_exact(&mut back)
            .await
            .map_err(|e| format!("raw answer: {e}"))?;
        if back == request {
            Ok(())
        } else {
            Err(format!("raw answer {back:?} for request {request:?}"))
        }
    }
}

//! A handler and its caller: the server's time limit reaches the handler as a deadline, and a
//! handler whose caller's connection closed is dropped (or, between waits, can see it), over
//! both transports.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::tcp::{TcpConfig, TcpServer, TcpTransport};
use rpcrdma::rpc::{
    self, handler, CallContext, CallOptions, Client, DispatchError, HandlerFuture,
    ReplyCacheConfig, Server, Service,
};
use rpcrdma::transport::{serve, RdmaConfig, RdmaTransport};
use rpcrdma::xdr::{Decoder, Procedure};
use tokio::sync::watch;

const PROG: u32 = 0x2000_0c0c;

/// WAIT: the handler waits for ever (until it is dropped). DEADLINE: answers how many
/// milliseconds its context's deadline is away (0 without one). CHANGE: waits for the gate
/// to open, then counts a change and answers the count.
struct Waiting {
    /// Handlers running now.
    running: Arc<AtomicUsize>,
    /// Handlers dropped before they finished.
    dropped: Arc<AtomicUsize>,
    /// CHANGE's gate.
    gate: watch::Receiver<bool>,
    /// Changes made.
    changed: Arc<AtomicUsize>,
}

/// Counts a running handler; a drop before `finished` counts it as dropped.
struct Guard {
    running: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.running.fetch_sub(1, Ordering::SeqCst);
        self.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

impl Service for Waiting {
    fn program(&self) -> u32 {
        PROG
    }

    fn version(&self) -> u32 {
        1
    }

    fn call(
        &self,
        ctx: CallContext,
        procedure: u32,
        _args: &mut Decoder<'_>,
    ) -> Result<HandlerFuture, DispatchError> {
        match procedure {
            1 => {
                self.running.fetch_add(1, Ordering::SeqCst);
                let guard = Guard {
                    running: self.running.clone(),
                    dropped: self.dropped.clone(),
                };
                Ok(handler(async move {
                    let _guard = guard;
                    std::future::pending::<()>().await;
                    Ok(())
                }))
            }
            2 => Ok(handler(async move {
                let left = ctx.deadline().map_or(0, |d| {
                    d.saturating_duration_since(Instant::now()).as_millis()
                });
                Ok(left as u32)
            })),
            3 => {
                let (mut gate, changed) = (self.gate.clone(), self.changed.clone());
                Ok(handler(async move {
                    let _ = gate.wait_for(|open| *open).await;
                    Ok(changed.fetch_add(1, Ordering::SeqCst) as u32 + 1)
                }))
            }
            _ => Err(DispatchError::ProcUnavail),
        }
    }
}

struct Wait;
impl Procedure for Wait {
    const PROGRAM: u32 = PROG;
    const VERSION: u32 = 1;
    const PROCEDURE: u32 = 1;
    const NAME: &'static str = "WAIT";
    type Args = ();
    type Result = ();
    const RESULT_DDP_ITEMS: usize = 0;
}

struct DeadlineLeft;
impl Procedure for DeadlineLeft {
    const PROGRAM: u32 = PROG;
    const VERSION: u32 = 1;
    const PROCEDURE: u32 = 2;
    const NAME: &'static str = "DEADLINE";
    type Args = ();
    type Result = u32;
    const RESULT_DDP_ITEMS: usize = 0;
}

struct Change;
impl Procedure for Change {
    const PROGRAM: u32 = PROG;
    const VERSION: u32 = 1;
    const PROCEDURE: u32 = 3;
    const NAME: &'static str = "CHANGE";
    type Args = ();
    type Result = u32;
    const RESULT_DDP_ITEMS: usize = 0;
}

struct Counts {
    running: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
    gate: watch::Sender<bool>,
    changed: Arc<AtomicUsize>,
}

fn service() -> (Waiting, Counts) {
    let (running, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (gate, gate_rx) = watch::channel(false);
    let changed = Arc::new(AtomicUsize::new(0));
    let service = Waiting {
        running: running.clone(),
        dropped: dropped.clone(),
        gate: gate_rx,
        changed: changed.clone(),
    };
    let counts = Counts {
        running,
        dropped,
        gate,
        changed,
    };
    (service, counts)
}

fn server(call_timeout: Option<Duration>) -> (Server, Counts) {
    let (service, counts) = service();
    let mut b = Server::builder();
    b.add(service);
    if let Some(t) = call_timeout {
        b.call_timeout(t);
    }
    (b.build(), counts)
}

async fn rdma_server(server: Server) -> SocketAddr {
    let listener = SoftProvider::default()
        .listen("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let listener = Arc::new(serve::<SoftProvider>(
        listener,
        server,
        RdmaConfig::default(),
    ));
    tokio::spawn(async move { listener.run().await });
    addr
}

/// Waits (up to a safety net) until `done` holds.
async fn until(what: &str, done: impl Fn() -> bool) {
    tokio::time::timeout(Duration::from_secs(20), async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{what}: not within the 20 s safety net"));
}

fn quick() -> CallOptions {
    CallOptions::new().timeout(Duration::from_millis(200))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_whose_caller_closed_its_connection_is_dropped_over_rdma() {
    let (server, counts) = server(None);
    let addr = rdma_server(server).await;
    let transport = Arc::new(
        RdmaTransport::connect(
            Arc::new(SoftProvider::default()),
            addr,
            RdmaConfig::default(),
        )
        .await
        .unwrap(),
    );
    let client = Client::from_arc(transport.clone());
    let err = client.call_with::<Wait>(&(), quick()).await.unwrap_err();
    assert_eq!(err.kind(), rpc::ErrorKind::TimedOut);
    until("the handler running", || {
        counts.running.load(Ordering::SeqCst) == 1
    })
    .await;
    assert_eq!(
        counts.dropped.load(Ordering::SeqCst),
        0,
        "the connection is open"
    );
    transport.disconnect();
    until("the handler dropped", || {
        counts.dropped.load(Ordering::SeqCst) == 1
    })
    .await;
    assert_eq!(counts.running.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_whose_caller_closed_its_connection_is_dropped_over_tcp() {
    let (server, counts) = server(None);
    let tcp = TcpServer::bind("127.0.0.1:0", server, TcpConfig::new())
        .await
        .unwrap();
    let client = Client::new(
        TcpTransport::connect(tcp.local_addr(), TcpConfig::new())
            .await
            .unwrap(),
    );
    let err = client.call_with::<Wait>(&(), quick()).await.unwrap_err();
    assert_eq!(err.kind(), rpc::ErrorKind::TimedOut);
    until("the handler running", || {
        counts.running.load(Ordering::SeqCst) == 1
    })
    .await;
    assert_eq!(
        counts.dropped.load(Ordering::SeqCst),
        0,
        "the connection is open"
    );
    drop(client);
    until("the handler dropped", || {
        counts.dropped.load(Ordering::SeqCst) == 1
    })
    .await;
    assert_eq!(counts.running.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_time_limit_is_the_handlers_deadline_on_both_transports() {
    let limit = Duration::from_secs(5);
    let (server, counts) = server(Some(limit));
    let addr = rdma_server(server.clone()).await;
    let rdma = Client::new(
        RdmaTransport::connect(
            Arc::new(SoftProvider::default()),
            addr,
            RdmaConfig::default(),
        )
        .await
        .unwrap(),
    );
    let tcp_server = TcpServer::bind("127.0.0.1:0", server, TcpConfig::new())
        .await
        .unwrap();
    let tcp = Client::new(
        TcpTransport::connect(tcp_server.local_addr(), TcpConfig::new())
            .await
            .unwrap(),
    );
    for client in [&rdma, &tcp] {
        let left = client.call::<DeadlineLeft>(&()).await.unwrap();
        assert!(
            left > 0 && left as u128 <= limit.as_millis(),
            "{left} ms left of {limit:?}"
        );
    }
    // A handler past the limit is dropped, and the call answered SYSTEM_ERR.
    let short = {
        let (mut service, _) = service();
        (service.running, service.dropped) = (counts.running.clone(), counts.dropped.clone());
        let mut b = Server::builder();
        b.add(service).call_timeout(Duration::from_millis(100));
        b.build()
    };
    let addr = rdma_server(short).await;
    let rdma = Client::new(
        RdmaTransport::connect(
            Arc::new(SoftProvider::default()),
            addr,
            RdmaConfig::default(),
        )
        .await
        .unwrap(),
    );
    let err = rdma.call::<Wait>(&()).await.unwrap_err();
    assert!(matches!(err, rpc::Error::SystemErr), "{err:?}");
    assert_eq!(counts.dropped.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_reply_cache_covers_runs_on_after_its_caller_closed_and_its_reply_is_kept() {
    let (service, counts) = service();
    let mut b = Server::builder();
    b.add(service).reply_cache(ReplyCacheConfig::new());
    let server = b.build();
    let tcp = TcpServer::bind("127.0.0.1:0", server.clone(), TcpConfig::new())
        .await
        .unwrap();
    let client = Client::new(
        TcpTransport::connect(tcp.local_addr(), TcpConfig::new())
            .await
            .unwrap(),
    );
    let err = client.call_with::<Change>(&(), quick()).await.unwrap_err();
    assert_eq!(err.kind(), rpc::ErrorKind::TimedOut);
    drop(client);
    let stats = || server.reply_cache_stats().unwrap();
    until("the call running without its caller", || {
        stats().orphans == 1
    })
    .await;
    counts.gate.send_replace(true);
    until("the call answered", || stats().entries == 1).await;
    assert_eq!(counts.changed.load(Ordering::SeqCst), 1);
    let stats = stats();
    assert_eq!((stats.misses, stats.running, stats.orphans), (1, 0, 0));
}

#[tokio::test]
async fn in_one_process_the_callers_deadline_reaches_the_handler() {
    use rpcrdma::rpc::LocalTransport;
    // No server limit: the handler's deadline is the caller's.
    let (unlimited, _counts) = server(None);
    let client = Client::new(LocalTransport::new(unlimited));
    let wanted = Duration::from_secs(3);
    let left = client
        .call_with::<DeadlineLeft>(&(), CallOptions::new().timeout(wanted))
        .await
        .unwrap();
    assert!(
        left > 0 && u128::from(left) <= wanted.as_millis(),
        "{left} ms left of {wanted:?}"
    );
    assert_eq!(
        client.call::<DeadlineLeft>(&()).await.unwrap(),
        0,
        "none given"
    );
    // With a server limit too, the earlier one counts.
    let (limited, _counts) = server(Some(Duration::from_secs(60)));
    let client = Client::new(LocalTransport::new(limited));
    let left = client
        .call_with::<DeadlineLeft>(&(), CallOptions::new().timeout(wanted))
        .await
        .unwrap();
    assert!(u128::from(left) <= wanted.as_millis(), "{left} ms left");
    let left = client.call::<DeadlineLeft>(&()).await.unwrap();
    assert!(
        u128::from(left) > wanted.as_millis(),
        "the server's 60 s: {left} ms left"
    );
}

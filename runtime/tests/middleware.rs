//! `tower` layers around a server's handlers (feature `tower`, `rpc::layer`): a timeout turns
//! a slow handler into SYSTEM_ERR, a concurrency limit of 1 runs one handler at a time, load
//! shedding answers SYSTEM_ERR at once, the duplicate request cache still sees the calls,
//! and the layers take effect over TCP and RPC-over-RDMA alike.
#![cfg(feature = "tower")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::tcp::{TcpConfig, TcpServer};
use rpcrdma::rpc::{
    handler, CallContext, CallStatus, Client, DispatchError, Error, HandlerFuture, LocalTransport,
    ReplyCacheConfig, ReplyError, Server, ServerBuilder, Service,
};
use rpcrdma::transport::{serve, RdmaConfig, RdmaTransport};
use rpcrdma::xdr::{Decoder, Procedure};
use tower::ServiceBuilder;

const PROGRAM: u32 = 0x2000_0200;

/// Procedure 1: sleeps the milliseconds it is given, counting how many run at once; answers
/// the most that ran at once so far. Procedure 2: refuses with PROC_UNAVAIL from inside the
/// handler (an error that must pass the layers unchanged).
#[derive(Default)]
struct Sleeper {
    running: AtomicUsize,
    most: AtomicUsize,
    runs: AtomicUsize,
}

struct Running<'a>(&'a Sleeper);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(Clone)]
struct Shared(Arc<Sleeper>);

impl Service for Shared {
    fn program(&self) -> u32 {
        PROGRAM
    }
    fn version(&self) -> u32 {
        1
    }
    fn call(
        &self,
        _: CallContext,
        procedure: u32,
        args: &mut Decoder<'_>,
    ) -> Result<HandlerFuture, DispatchError> {
        let state = self.0.clone();
        match procedure {
            1 => {
                let ms: u32 = rpcrdma::rpc::decode_args(args)?;
                Ok(handler(async move {
                    state.runs.fetch_add(1, Ordering::SeqCst);
                    let now = state.running.fetch_add(1, Ordering::SeqCst) + 1;
                    let _running = Running(&state);
                    state.most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(ms.into())).await;
                    Ok(state.most.load(Ordering::SeqCst) as u32)
                }))
            }
            2 => Ok(handler(async { Err::<(), _>(ReplyError::ProcUnavail) })),
            _ => Err(DispatchError::ProcUnavail),
        }
    }
}

struct Sleep;

impl Procedure for Sleep {
    const PROGRAM: u32 = PROGRAM;
    const VERSION: u32 = 1;
    const PROCEDURE: u32 = 1;
    const NAME: &'static str = "SLEEP";
    type Args = u32;
    type Result = u32;
}

struct Refuse;

impl Procedure for Refuse {
    const PROGRAM: u32 = PROGRAM;
    const VERSION: u32 = 1;
    const PROCEDURE: u32 = 2;
    const NAME: &'static str = "REFUSE";
    type Args = ();
    type Result = ();
}

fn builder(sleeper: &Arc<Sleeper>) -> ServerBuilder {
    let mut builder = Server::builder();
    builder.add(Shared(sleeper.clone()));
    builder
}

/// Four calls at once; the answers.
async fn four_at_once(client: &Client, ms: u32) -> Vec<Result<u32, Error>> {
    let call = || client.call::<Sleep>(&ms);
    let (a, b, c, d) = tokio::join!(call(), call(), call(), call());
    vec![a, b, c, d]
}

#[tokio::test]
async fn a_timeout_layer_answers_a_slow_handler_with_system_err() {
    let sleeper = Arc::default();
    let mut builder = builder(&sleeper);
    builder.layer(ServiceBuilder::new().timeout(Duration::from_millis(20)));
    let server = builder.build();
    let client = Client::new(LocalTransport::new(server.clone()));
    // Well within the limit: answered.
    assert_eq!(client.call::<Sleep>(&0).await.unwrap(), 1);
    // Far over it (the handler would sleep a minute): SYSTEM_ERR, and the handler dropped.
    let slow = client.call::<Sleep>(&60_000).await;
    assert!(matches!(slow, Err(Error::SystemErr)), "{slow:?}");
    assert_eq!(
        sleeper.running.load(Ordering::SeqCst),
        0,
        "the handler was dropped"
    );
    // A handler's own refusal passes the layer unchanged.
    let refused = client.call::<Refuse>(&()).await;
    assert!(matches!(refused, Err(Error::ProcUnavail)), "{refused:?}");
    let stats = server.stats();
    assert_eq!(stats.count(CallStatus::SystemErr), 1);
    assert_eq!(stats.count(CallStatus::ProcUnavail), 1);
}

#[tokio::test]
async fn a_concurrency_limit_of_one_runs_one_handler_at_a_time() {
    // Without the layer the four run together (the control).
    let sleeper: Arc<Sleeper> = Arc::default();
    let client = Client::new(LocalTransport::new(builder(&sleeper).build()));
    four_at_once(&client, 10).await;
    assert_eq!(sleeper.most.load(Ordering::SeqCst), 4);

    let sleeper: Arc<Sleeper> = Arc::default();
    let mut limited = builder(&sleeper);
    limited.layer(ServiceBuilder::new().concurrency_limit(1));
    let client = Client::new(LocalTransport::new(limited.build()));
    for answer in four_at_once(&client, 10).await {
        assert_eq!(answer.unwrap(), 1);
    }
    assert_eq!(sleeper.most.load(Ordering::SeqCst), 1);
    assert_eq!(sleeper.runs.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn load_shedding_answers_the_excess_with_system_err_at_once() {
    let sleeper: Arc<Sleeper> = Arc::default();
    let mut builder = builder(&sleeper);
    builder.layer(ServiceBuilder::new().load_shed().concurrency_limit(1));
    let client = Client::new(LocalTransport::new(builder.build()));
    let answers = four_at_once(&client, 50).await;
    let served = answers.iter().filter(|a| a.is_ok()).count();
    let shed = answers
        .iter()
        .filter(|a| matches!(a, Err(Error::SystemErr)))
        .count();
    assert_eq!((served, shed), (1, 3), "{answers:?}");
    assert_eq!(
        sleeper.runs.load(Ordering::SeqCst),
        1,
        "shed calls never ran"
    );
}

#[tokio::test]
async fn the_reply_cache_keeps_working_under_layers() {
    let sleeper: Arc<Sleeper> = Arc::default();
    let mut builder = builder(&sleeper);
    builder.reply_cache(ReplyCacheConfig::new()).layer(
        ServiceBuilder::new()
            .concurrency_limit(1)
            .timeout(Duration::from_secs(30)),
    );
    let server = builder.build();
    let client = Client::new(LocalTransport::new(server.clone()));
    for answer in four_at_once(&client, 1).await {
        assert_eq!(answer.unwrap(), 1);
    }
    let cache = server.reply_cache_stats().unwrap();
    assert_eq!((cache.misses, cache.entries), (4, 4), "{cache:?}");
}

#[tokio::test]
async fn layers_take_effect_over_tcp() {
    let sleeper: Arc<Sleeper> = Arc::default();
    let mut builder = builder(&sleeper);
    builder.layer(
        ServiceBuilder::new()
            .concurrency_limit(1)
            .timeout(Duration::from_millis(500)),
    );
    let tcp = TcpServer::bind("127.0.0.1:0", builder.build(), TcpConfig::new())
        .await
        .unwrap();
    let client = rpcrdma::rpc::tcp::connect(tcp.local_addr()).await.unwrap();
    for answer in four_at_once(&client, 5).await {
        assert_eq!(answer.unwrap(), 1);
    }
    let slow = client.call::<Sleep>(&60_000).await;
    assert!(matches!(slow, Err(Error::SystemErr)), "{slow:?}");
    tcp.shutdown().await;
}

#[tokio::test]
async fn layers_take_effect_over_rdma() {
    let sleeper: Arc<Sleeper> = Arc::default();
    let mut builder = builder(&sleeper);
    builder.layer(
        ServiceBuilder::new()
            .concurrency_limit(1)
            .timeout(Duration::from_millis(500)),
    );
    let provider = SoftProvider::default();
    let listener = provider
        .listen("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let listener = Arc::new(serve::<SoftProvider>(
        listener,
        builder.build(),
        RdmaConfig::default(),
    ));
    tokio::spawn({
        let listener = listener.clone();
        async move { listener.run().await }
    });
    let transport = RdmaTransport::connect(Arc::new(provider), addr, RdmaConfig::default())
        .await
        .unwrap();
    let client = Client::new(transport);
    for answer in four_at_once(&client, 5).await {
        assert_eq!(answer.unwrap(), 1);
    }
    let slow = client.call::<Sleep>(&60_000).await;
    assert!(matches!(slow, Err(Error::SystemErr)), "{slow:?}");
    listener.shutdown().await;
}

//! What a call and a connection leave for an operator (`rpc::observe`): a span per call on
//! both ends with its fields, connection events, and counters that add up across connections,
//! over TCP and over RPC-over-RDMA on the software provider; and the client's interceptor.
//!
//! Each test installs a capturing subscriber for its own thread and runs on a current-thread
//! runtime, so every task of the test (the provider's included) reports to it.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::tcp::{TcpConfig, TcpServer};
use rpcrdma::rpc::{
    AuthSys, CallStatus, Client, Credentials, Error, Intercepted, LocalTransport, Server,
};
use rpcrdma::transport::conformance::program::{
    pattern, server, EchoArgs, PlainArgs, TestversClient,
};
use rpcrdma::transport::{serve, RdmaConfig, RdmaTransport};
use rpcrdma::xdr::Procedure;

#[path = "support/capture.rs"]
mod capture;
use capture::{Capture, SpanSeen};

/// TESTPROG's number (testprog.x).
const TESTPROG: u32 = 0x2000_0077;

/// A procedure TESTPROG does not have: PROC_UNAVAIL.
struct Missing;

impl Procedure for Missing {
    const PROGRAM: u32 = TESTPROG;
    const VERSION: u32 = 1;
    const PROCEDURE: u32 = 99;
    const NAME: &'static str = "MISSING";
    type Args = ();
    type Result = ();
}

/// Waits (up to a safety net of 10 s) until `done` holds.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let waited = tokio::time::timeout(Duration::from_secs(10), async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "never happened: {what}");
}

/// The server span with the XID of `client`'s span.
fn served_as(capture: &Capture, client: &SpanSeen) -> SpanSeen {
    let xid = client.get("xid");
    assert!(!xid.is_empty(), "the client span has its XID: {client:?}");
    let found: Vec<_> = capture
        .spans("rpc.serve")
        .into_iter()
        .filter(|s| s.get("xid") == xid)
        .collect();
    assert_eq!(found.len(), 1, "one server span for XID {xid}: {found:?}");
    found.into_iter().next().unwrap()
}

/// The client spans of procedure `procedure`.
fn calls_of(capture: &Capture, procedure: u32) -> Vec<SpanSeen> {
    capture
        .spans("rpc.call")
        .into_iter()
        .filter(|s| s.get("procedure") == procedure.to_string())
        .collect()
}

fn number(span: &SpanSeen, field: &str) -> u64 {
    span.get(field)
        .parse()
        .unwrap_or_else(|_| panic!("{field} is a number in {span:?}"))
}

#[tokio::test]
async fn tcp_calls_have_a_span_on_each_end_and_connections_their_events() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.subscriber());
    let served = server();
    let tcp = TcpServer::bind("127.0.0.1:0", served.clone(), TcpConfig::new())
        .await
        .unwrap();
    let rpc = rpcrdma::rpc::tcp::connect(tcp.local_addr()).await.unwrap();
    let client = TestversClient::new(rpc.clone());
    client.test_null().await.unwrap();
    let echoed = client
        .test_echo(EchoArgs {
            tag: 7,
            data: Bytes::from_static(b"twelve bytes"),
        })
        .await
        .unwrap();
    assert_eq!(echoed.tag, 7);
    let refused = rpc.call::<Missing>(&()).await;
    assert!(matches!(refused, Err(Error::ProcUnavail)), "{refused:?}");

    // The spans and their fields, on both ends.
    let echo = calls_of(&capture, 1);
    assert_eq!(echo.len(), 1);
    let echo = &echo[0];
    assert_eq!(echo.target, "rpcrdma::call");
    assert_eq!(echo.get("program"), TESTPROG.to_string());
    assert_eq!(echo.get("version"), "1");
    assert_eq!(echo.get("transport"), "tcp");
    assert_eq!(echo.get("args"), "record");
    assert_eq!(echo.get("result"), "record");
    assert_eq!(echo.get("status"), "ok");
    assert_eq!(echo.get("rdma_bytes"), "0");
    assert!(number(echo, "copied_bytes") > 2 * 12, "{echo:?}");
    number(echo, "duration_us");
    let serve = served_as(&capture, echo);
    assert_eq!(serve.get("procedure"), "1");
    assert_eq!(serve.get("status"), "ok");
    assert_eq!(serve.get("args"), "record");
    assert_eq!(serve.get("copied_bytes"), echo.get("copied_bytes"));
    assert!(serve.get("peer").starts_with("127.0.0.1:"), "{serve:?}");
    let missing = &calls_of(&capture, 99)[0];
    assert_eq!(missing.get("status"), "proc_unavail");
    assert_eq!(served_as(&capture, missing).get("status"), "proc_unavail");
    // Each span ends with its `call finished` event.
    let finished: Vec<_> = capture
        .events()
        .into_iter()
        .filter(|e| e.get("message") == "call finished")
        .collect();
    assert_eq!(finished.len(), 6, "three calls, two ends: {finished:?}");
    assert!(finished
        .iter()
        .all(|e| matches!(e.span, Some("rpc.call" | "rpc.serve"))));

    // Counters: the client's, its transport's, the server's and the TCP server's.
    let calls = rpc.call_stats();
    assert_eq!(calls.count(CallStatus::Ok), 2);
    assert_eq!(calls.count(CallStatus::ProcUnavail), 1);
    assert_eq!(calls.total(), 3);
    let sent = rpc.transport_stats().expect("TCP keeps counters");
    assert_eq!((sent.connections, sent.calls, sent.replies), (1, 3, 3));
    assert_eq!(served.stats().count(CallStatus::Ok), 2);
    assert_eq!(served.stats().count(CallStatus::ProcUnavail), 1);
    let received = tcp.stats();
    assert_eq!((received.calls, received.replies), (3, 3));
    assert_eq!(received.bytes_received, sent.bytes_sent);
    assert_eq!(received.bytes_sent, sent.bytes_received);

    // Connection events: made, accepted, and closed with the reason on each end.
    assert_eq!(capture.conn_events("connect").len(), 1);
    let accepted = capture.conn_events("accept");
    assert_eq!(accepted.len(), 1);
    assert_eq!(accepted[0].get("transport"), "tcp");
    assert_eq!(accepted[0].level, tracing::Level::DEBUG);
    drop((client, rpc));
    until("the server saw the client close", || {
        !capture.conn_events("close").is_empty() && tcp.stats().connections_closed == 1
    })
    .await;
    let reasons: Vec<String> = capture
        .conn_events("close")
        .iter()
        .map(|e| e.get("reason").to_string())
        .collect();
    assert!(reasons.contains(&"local".to_string()), "{reasons:?}");
    until("the server's close event", || {
        capture
            .conn_events("close")
            .iter()
            .any(|e| e.get("reason") == "peer_closed")
    })
    .await;
    tcp.shutdown().await;
}

/// The test program on a loopback port of the software provider, with `config`.
async fn rdma_server(
    config: RdmaConfig,
) -> (
    Arc<rpcrdma::transport::RdmaListener<SoftProvider>>,
    std::net::SocketAddr,
    Server,
) {
    let provider = SoftProvider::default();
    let listener = provider
        .listen("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let served = server();
    let listener = Arc::new(serve::<SoftProvider>(listener, served.clone(), config));
    tokio::spawn({
        let listener = listener.clone();
        async move { listener.run().await }
    });
    (listener, addr, served)
}

#[tokio::test]
async fn rdma_spans_say_how_each_call_and_its_reply_moved() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.subscriber());
    let (listener, addr, served) = rdma_server(RdmaConfig::default()).await;
    let provider = Arc::new(SoftProvider::default());
    let transport = Arc::new(
        RdmaTransport::connect(provider, addr, RdmaConfig::default())
            .await
            .unwrap(),
    );
    let rpc = Client::from_arc(transport.clone());
    let client = TestversClient::new(rpc.clone());

    client.test_null().await.unwrap();
    let big = pattern(64 << 10, 1);
    let echoed = client
        .test_echo(EchoArgs {
            tag: 1,
            data: big.clone(),
        })
        .await
        .unwrap();
    assert_eq!(echoed.data, big);
    // Not DDP-eligible and over the 4 KiB inline threshold: a long call.
    client
        .test_longargs(PlainArgs {
            data: pattern(16 << 10, 2),
        })
        .await
        .unwrap();
    // An unbounded result over the threshold: the whole reply in the Reply chunk.
    assert_eq!(
        client.test_big(16 << 10).await.unwrap().data.len(),
        16 << 10
    );

    let expect = [
        (0, "inline", "inline"),
        (1, "read_chunks", "write_chunks"),
        (3, "long_call", "inline"),
        (2, "inline", "reply_chunk"),
    ];
    for (procedure, args, result) in expect {
        let spans = calls_of(&capture, procedure);
        assert_eq!(spans.len(), 1, "procedure {procedure}");
        let call = &spans[0];
        assert_eq!(call.get("transport"), "rdma");
        assert_eq!(call.get("status"), "ok");
        assert_eq!(
            (call.get("args"), call.get("result")),
            (args, result),
            "{call:?}"
        );
        let serve = served_as(&capture, call);
        assert_eq!(
            (serve.get("args"), serve.get("result")),
            (args, result),
            "{serve:?}"
        );
        assert_eq!(serve.get("status"), "ok");
    }
    // The 64 KiB went by RDMA both ways; a NULL call moved nothing by RDMA.
    let echo = &calls_of(&capture, 1)[0];
    assert!(number(echo, "rdma_bytes") >= 2 * (64 << 10), "{echo:?}");
    assert!(number(echo, "copied_bytes") < 4096, "{echo:?}");
    assert_eq!(calls_of(&capture, 0)[0].get("rdma_bytes"), "0");
    let long = served_as(&capture, &calls_of(&capture, 3)[0]);
    assert!(number(&long, "rdma_bytes") > 16 << 10, "{long:?}");

    // The connection's events.
    let mpa = capture.conn_events("mpa_negotiated");
    assert_eq!(mpa.len(), 2, "both ends: {mpa:?}");
    assert!(mpa
        .iter()
        .all(|e| e.get("crc") == "true" && e.get("revision") == "2"));
    let private = capture.conn_events("private_data");
    assert_eq!(private.len(), 2, "both ends: {private:?}");
    assert!(private.iter().all(|e| e.get("rfc8797") == "true"));
    assert_eq!(capture.conn_events("accept").len(), 1);
    assert_eq!(capture.conn_events("connect").len(), 1);

    // Counters across a reconnection.
    let before = rpc.transport_stats().unwrap();
    assert_eq!((before.connections, before.calls), (1, 4));
    transport.disconnect();
    client.test_null().await.unwrap();
    let after = rpc.transport_stats().unwrap();
    assert_eq!((after.connections, after.connections_closed), (2, 1));
    assert_eq!((after.calls, after.replies), (5, 5));
    let rdma = after.rdma.unwrap();
    assert_eq!(rdma.transport.calls_read_chunks, 1);
    assert_eq!(rdma.transport.calls_long, 1);
    assert_eq!(rdma.transport.replies_received_long, 1);
    assert_eq!(rdma.transport.calls_inline, 3);
    assert_eq!(rpc.call_stats().count(CallStatus::Ok), 5);
    until("the server counted both connections", || {
        let total = listener.total_stats();
        total.connections == 2 && total.connections_closed == 1 && total.replies == 5
    })
    .await;
    let total = listener.total_stats();
    assert_eq!(total.calls, 5);
    assert_eq!(total.rdma.unwrap().transport.replies_write_chunks, 1);
    assert_eq!(served.stats().count(CallStatus::Ok), 5);
    let closes = capture.conn_events("close");
    assert!(
        closes.iter().any(|e| e.get("reason") == "local"),
        "{closes:?}"
    );
    until("the server's close event", || {
        capture
            .conn_events("close")
            .iter()
            .any(|e| e.get("reason") == "peer_closed")
    })
    .await;
    listener.shutdown().await;
}

#[tokio::test]
async fn credits_exhausted_is_told_once_per_episode() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.subscriber());
    let (listener, addr, _) = rdma_server(RdmaConfig::default().credits(1)).await;
    let transport = RdmaTransport::connect(
        Arc::new(SoftProvider::default()),
        addr,
        RdmaConfig::default().credits(1),
    )
    .await
    .unwrap();
    let client = TestversClient::new(Client::new(transport));
    for episode in 1..=2 {
        // Three at once on one credit: two wait.
        let (a, b, c) = tokio::join!(
            client.test_sleep(20),
            client.test_sleep(20),
            client.test_sleep(20)
        );
        assert_eq!((a.unwrap(), b.unwrap(), c.unwrap()), (20, 20, 20));
        // One alone: nobody waits, the episode ends.
        client.test_null().await.unwrap();
        let told = capture.conn_events("credits_exhausted");
        assert_eq!(told.len(), episode, "{told:?}");
        assert_eq!(told[0].get("credits"), "1");
    }
    listener.shutdown().await;
}

/// Answers procedure 1 with the caller's AUTH_SYS uid (0 without one).
struct WhoAmI;

impl rpcrdma::rpc::Service for WhoAmI {
    fn program(&self) -> u32 {
        0x2000_0100
    }
    fn version(&self) -> u32 {
        1
    }
    fn call(
        &self,
        ctx: rpcrdma::rpc::CallContext,
        procedure: u32,
        _: &mut rpcrdma::xdr::Decoder<'_>,
    ) -> Result<rpcrdma::rpc::HandlerFuture, rpcrdma::rpc::DispatchError> {
        match procedure {
            1 | 2 => {
                let uid = ctx.auth().sys().map_or(0, |s| s.uid);
                Ok(rpcrdma::rpc::handler(async move { Ok(uid) }))
            }
            _ => Err(rpcrdma::rpc::DispatchError::ProcUnavail),
        }
    }
}

struct Who<const P: u32>;

impl<const P: u32> Procedure for Who<P> {
    const PROGRAM: u32 = 0x2000_0100;
    const VERSION: u32 = 1;
    const PROCEDURE: u32 = P;
    const NAME: &'static str = "WHO";
    type Args = ();
    type Result = u32;
}

#[tokio::test]
async fn an_interceptor_sets_credentials_and_refuses_calls() {
    let mut builder = Server::builder();
    builder.add(WhoAmI);
    let served = builder.build();
    let plain = Client::new(LocalTransport::new(served.clone()));
    assert_eq!(plain.call::<Who<1>>(&()).await.unwrap(), 0);
    let client = plain.with_interceptor(|call: &mut Intercepted| {
        assert_eq!((call.program(), call.version()), (0x2000_0100, 1));
        if call.procedure() == 2 {
            return Err("procedure 2 is not for this client".into());
        }
        call.set_credentials(&Credentials::Sys(AuthSys::new("interceptor", 4242, 7)))?;
        Ok(())
    });
    assert_eq!(client.call::<Who<1>>(&()).await.unwrap(), 4242);
    let refused = client.call::<Who<2>>(&()).await;
    match refused {
        Err(Error::Refused(why)) => assert!(why.to_string().contains("procedure 2")),
        other => panic!("expected a refusal, got {other:?}"),
    }
    // The refused call never reached the server; the client counted it.
    assert_eq!(served.stats().total(), 2);
    let calls = client.call_stats();
    assert_eq!(calls.count(CallStatus::Refused), 1);
    assert_eq!(
        calls.count(CallStatus::Ok),
        2,
        "shared with the client it came from"
    );
}

/// Without a subscriber the spans are `Span::none()`, and calls are counted all the same; a
/// handler's context names the call's program and version.
#[tokio::test]
async fn without_a_subscriber_calls_are_counted_and_contexts_name_the_program() {
    let mut builder = Server::builder();
    builder.add(Capturing);
    let served = builder.build();
    let client = Client::new(LocalTransport::new(served.clone()));
    client.call::<Peek>(&()).await.unwrap();
    assert_eq!(served.stats().count(CallStatus::Ok), 1);
    assert_eq!(client.call_stats().count(CallStatus::Ok), 1);
    let ctx = CONTEXT
        .with(|c| c.borrow_mut().take())
        .expect("the service saw the call");
    assert_eq!(
        (ctx.program(), ctx.version(), ctx.procedure()),
        (0x2000_0101, 1, 3)
    );
}

struct Peek;

impl Procedure for Peek {
    const PROGRAM: u32 = 0x2000_0101;
    const VERSION: u32 = 1;
    const PROCEDURE: u32 = 3;
    const NAME: &'static str = "PEEK";
    type Args = ();
    type Result = ();
}

thread_local! {
    static CONTEXT: std::cell::RefCell<Option<rpcrdma::rpc::CallContext>> =
        const { std::cell::RefCell::new(None) };
}

/// Keeps the context of the call it gets.
struct Capturing;

impl rpcrdma::rpc::Service for Capturing {
    fn program(&self) -> u32 {
        0x2000_0101
    }
    fn version(&self) -> u32 {
        1
    }
    fn call(
        &self,
        ctx: rpcrdma::rpc::CallContext,
        _: u32,
        _: &mut rpcrdma::xdr::Decoder<'_>,
    ) -> Result<rpcrdma::rpc::HandlerFuture, rpcrdma::rpc::DispatchError> {
        CONTEXT.with(|c| *c.borrow_mut() = Some(ctx));
        Ok(rpcrdma::rpc::handler(async { Ok(()) }))
    }
}

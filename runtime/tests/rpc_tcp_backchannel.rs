//! Both directions on one ONC RPC over TCP connection (RFC 5661 section 2.10.3.1: an
//! NFSv4.1 session's callbacks travel on the connection the client made; RFC 5531 section 11
//! record marking both ways): a server's handler calls its client back during a call, forward
//! and backward calls at once, a client that serves nothing, a connection closing under a
//! backward call, the bounds, and raw peers sending stray REPLYs and oversized CALLs.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rpcrdma::rpc::msg::{AuthFlavor, OpaqueAuth};
use rpcrdma::rpc::tcp::{TcpConfig, TcpServer, TcpTransport};
use rpcrdma::rpc::{
    self, decode_args, decode_reply_header, encode_call_header, encode_reply_header, handler,
    CallContext, Client, DispatchError, ErrorKind, HandlerFuture, ReplyError, Server, Service,
    TransportError,
};
use rpcrdma::xdr::{self, Decoder, Encode, Encoder, Procedure};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// The forward program, served by the TCP server.
const PROG: u32 = 0x2000_0002;
/// The callback program, served by the client (a number of the client's choosing, as
/// NFSv4.1's `csa_cb_program`).
const CB_PROG: u32 = 0x4000_0000;

macro_rules! procedure {
    ($name:ident, $prog:expr, $proc:expr, $args:ty, $res:ty) => {
        struct $name;
        impl Procedure for $name {
            const PROGRAM: u32 = $prog;
            const VERSION: u32 = 1;
            const PROCEDURE: u32 = $proc;
            const NAME: &'static str = stringify!($name);
            type Args = $args;
            type Result = $res;
        }
    };
}

// Forward: CALLBACK(n) calls the client's PING(n) and answers what it answered; SLEEP(ms)
// answers ms after ms; ECHO; OUTCOME(n) calls PING(n) from a task of its own and reports how
// the backward call ended on the server's outcome channel (as a code, see `code`).
procedure!(Callback, PROG, 1, u32, u32);
procedure!(Sleep, PROG, 2, u32, u32);
procedure!(Echo, PROG, 3, Bytes, Bytes);
procedure!(Outcome, PROG, 4, u32, u32);
// Backward: PING(n) answers n + 1, after n / 1000 ms.
procedure!(Ping, CB_PROG, 1, u32, u32);

/// How a backward call ended, as OUTCOME reports it.
fn code(result: &Result<u32, rpc::Error>) -> String {
    match result {
        Ok(v) => format!("ok {v}"),
        Err(rpc::Error::ProgUnavail) => "prog_unavail".into(),
        Err(rpc::Error::Transport(TransportError::Closed)) => "closed".into(),
        Err(e) if e.kind() == ErrorKind::TimedOut => "timed_out".into(),
        Err(e) => format!("other {e}"),
    }
}

struct Forward {
    outcomes: mpsc::UnboundedSender<String>,
}

impl Service for Forward {
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
        args: &mut Decoder<'_>,
    ) -> Result<HandlerFuture, DispatchError> {
        match procedure {
            1 => {
                let n: u32 = decode_args(args)?;
                Ok(handler(async move {
                    let client = ctx.backchannel().ok_or(ReplyError::SystemErr)?;
                    client
                        .call::<Ping>(&n)
                        .await
                        .map_err(|_| ReplyError::SystemErr)
                }))
            }
            2 => {
                let ms: u32 = decode_args(args)?;
                Ok(handler(async move {
                    tokio::time::sleep(Duration::from_millis(ms.into())).await;
                    Ok(ms)
                }))
            }
            3 => {
                let data: Bytes = decode_args(args)?;
                Ok(handler(async move { Ok(data) }))
            }
            4 => {
                let n: u32 = decode_args(args)?;
                let outcomes = self.outcomes.clone();
                let client = ctx.backchannel().cloned();
                Ok(handler(async move {
                    let Some(client) = client else {
                        let _ = outcomes.send("no backchannel".into());
                        return Err(ReplyError::SystemErr);
                    };
                    // In a task of its own: the handler is dropped if its caller goes away,
                    // the backward call's outcome is still told.
                    let call = tokio::spawn(async move {
                        let first = code(&client.call::<Ping>(&n).await);
                        let _ = outcomes.send(first.clone());
                        if first == "closed" {
                            // And every later call too, at once.
                            let _ = outcomes.send(code(&client.call::<Ping>(&n).await));
                        }
                        first
                    });
                    match call.await {
                        Ok(first) if first.starts_with("ok") => Ok(n),
                        _ => Err(ReplyError::SystemErr),
                    }
                }))
            }
            _ => Err(DispatchError::ProcUnavail),
        }
    }
}

/// The client's callback service; counts the PINGs running at once.
struct Callbacks {
    running: Arc<std::sync::atomic::AtomicUsize>,
    most: Arc<std::sync::atomic::AtomicUsize>,
}

impl Service for Callbacks {
    fn program(&self) -> u32 {
        CB_PROG
    }

    fn version(&self) -> u32 {
        1
    }

    fn call(
        &self,
        _ctx: CallContext,
        procedure: u32,
        args: &mut Decoder<'_>,
    ) -> Result<HandlerFuture, DispatchError> {
        use std::sync::atomic::Ordering::SeqCst;
        match procedure {
            1 => {
                let n: u32 = decode_args(args)?;
                let (running, most) = (self.running.clone(), self.most.clone());
                Ok(handler(async move {
                    let now = running.fetch_add(1, SeqCst) + 1;
                    most.fetch_max(now, SeqCst);
                    tokio::time::sleep(Duration::from_millis((n / 1000).into())).await;
                    running.fetch_sub(1, SeqCst);
                    Ok(n + 1)
                }))
            }
            _ => Err(DispatchError::ProcUnavail),
        }
    }
}

fn callback_server() -> (Server, Arc<std::sync::atomic::AtomicUsize>) {
    let most = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut b = Server::builder();
    b.add(Callbacks {
        running: Arc::default(),
        most: most.clone(),
    });
    (b.build(), most)
}

async fn start(config: TcpConfig) -> (TcpServer, mpsc::UnboundedReceiver<String>) {
    let (outcomes, received) = mpsc::unbounded_channel();
    let mut b = Server::builder();
    b.add(Forward { outcomes });
    let server = TcpServer::bind("127.0.0.1:0", b.build(), config)
        .await
        .unwrap();
    (server, received)
}

async fn client(addr: SocketAddr, config: TcpConfig) -> Client {
    Client::new(TcpTransport::connect(addr, config).await.unwrap())
}

/// A client serving the callback program.
async fn serving_client(addr: SocketAddr) -> Client {
    client(addr, TcpConfig::new().backchannel(callback_server().0)).await
}

fn none_auth() -> OpaqueAuth {
    OpaqueAuth {
        flavor: AuthFlavor::AuthNone,
        body: Bytes::new(),
    }
}

fn call_message(xid: u32, prog: u32, proc: u32, args: &impl Encode) -> Vec<u8> {
    let mut enc = Encoder::new();
    encode_call_header(&mut enc, xid, prog, 1, proc, &none_auth(), &none_auth()).unwrap();
    args.encode(&mut enc).unwrap();
    enc.finish().into_bytes().to_vec()
}

fn reply_message(xid: u32, result: &impl Encode) -> Vec<u8> {
    let mut enc = Encoder::new();
    encode_reply_header(&mut enc, xid, Ok(())).unwrap();
    result.encode(&mut enc).unwrap();
    enc.finish().into_bytes().to_vec()
}

/// `message` as one record of one fragment.
fn record(message: &[u8]) -> Vec<u8> {
    let mut out = (message.len() as u32 | 0x8000_0000).to_be_bytes().to_vec();
    out.extend_from_slice(message);
    out
}

/// Reads one record.
async fn read_record(s: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut message = Vec::new();
    loop {
        let header = s.read_u32().await?;
        let mut data = vec![0; (header & 0x7fff_ffff) as usize];
        s.read_exact(&mut data).await?;
        message.extend_from_slice(&data);
        if header & 0x8000_0000 != 0 {
            return Ok(message);
        }
    }
}

fn word(message: &[u8], i: usize) -> u32 {
    u32::from_be_bytes(message[4 * i..4 * i + 4].try_into().unwrap())
}

/// The results of a SUCCESS reply.
fn parse_reply<T: xdr::Decode>(message: Vec<u8>) -> Result<T, rpc::Error> {
    let bytes = Bytes::from(message);
    let mut dec = Decoder::new(&bytes);
    decode_reply_header(&mut dec)?;
    let value = T::decode(&mut dec).map_err(rpc::Error::Decode)?;
    dec.finish().map_err(rpc::Error::Decode)?;
    Ok(value)
}

/// True when the peer closed the connection (or reset it).
async fn closed_by_peer(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    loop {
        match s.read(&mut buf).await {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => return e.kind() == io::ErrorKind::ConnectionReset,
        }
    }
}

async fn within<F: std::future::Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(10), future)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within 10 s"))
}

/// A handler calls its client back on the caller's connection during the call (as the RDMA
/// conformance suite's `backchannel` case), again and again, and the counters say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_calls_its_client_back_during_a_call() {
    let (server, _) = start(TcpConfig::new()).await;
    let c = serving_client(server.local_addr()).await;
    for n in 0..20u32 {
        assert_eq!(
            within("CALLBACK", c.call::<Callback>(&n)).await.unwrap(),
            n + 1
        );
    }
    let stats = server.stats();
    assert_eq!(stats.backward_calls, 20, "{stats:?}");
    assert_eq!(
        stats.calls, 20,
        "backward calls are not forward calls: {stats:?}"
    );
    assert_eq!(stats.dropped, 0, "{stats:?}");
    let client_stats = c.transport_stats().unwrap();
    assert_eq!(client_stats.backward_calls, 20, "{client_stats:?}");
    assert_eq!(client_stats.calls, 20, "{client_stats:?}");
}

/// Forward calls (slow and fast) and backward calls (slow callbacks) at once on one
/// connection, from many tasks: every one gets its own answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forward_and_backward_calls_at_once_on_one_connection() {
    let (server, _) = start(TcpConfig::new()).await;
    let (callbacks, most) = callback_server();
    let c = client(server.local_addr(), TcpConfig::new().backchannel(callbacks)).await;
    let mut tasks = Vec::new();
    for i in 0..60u32 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            match i % 3 {
                // A callback that takes 0-19 ms at the client.
                0 => {
                    let n = (i % 20) * 1000 + i;
                    assert_eq!(c.call::<Callback>(&n).await.unwrap(), n + 1);
                }
                1 => assert_eq!(c.call::<Sleep>(&(i % 25)).await.unwrap(), i % 25),
                _ => {
                    let data = Bytes::from(vec![i as u8; 100 + i as usize * 97]);
                    assert_eq!(c.call::<Echo>(&data).await.unwrap(), data);
                }
            }
        }));
    }
    for (i, task) in tasks.into_iter().enumerate() {
        if tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .is_err()
        {
            panic!(
                "call {i} unanswered within 10 s; client {:?}, server {:?}",
                c.transport_stats(),
                server.stats()
            );
        }
    }
    let stats = c.transport_stats().unwrap();
    assert_eq!((stats.backward_calls, stats.dropped), (20, 0), "{stats:?}");
    assert!(
        most.load(std::sync::atomic::Ordering::SeqCst) > 1,
        "callbacks ran concurrently at the client"
    );
}

/// A server's backward calls beyond `max_backward_in_flight` wait for a place: all are
/// answered, never more than the limit at once at the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backward_calls_beyond_the_servers_limit_wait_for_a_place() {
    let (server, _) = start(TcpConfig::new().max_backward_in_flight(2)).await;
    let (callbacks, most) = callback_server();
    let c = client(server.local_addr(), TcpConfig::new().backchannel(callbacks)).await;
    let tasks: Vec<_> = (0..8u32)
        .map(|i| {
            let c = c.clone();
            // 20 ms at the client each.
            tokio::spawn(async move { c.call::<Callback>(&(20_000 + i)).await })
        })
        .collect();
    for (i, task) in tasks.into_iter().enumerate() {
        assert_eq!(
            within("CALLBACK", task).await.unwrap().unwrap(),
            20_001 + i as u32
        );
    }
    assert_eq!(most.load(std::sync::atomic::Ordering::SeqCst), 2);
}

/// A server with one slot per connection, its handler holding it while waiting for its
/// backward call's reply, and more forward calls arriving meanwhile: the reply is read (the
/// calls behind it wait their turn), nothing deadlocks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_holding_the_only_slot_still_gets_its_backward_reply() {
    let (server, _) = start(TcpConfig::new().max_in_flight(1)).await;
    let c = serving_client(server.local_addr()).await;
    // PING 30,000 takes 30 ms at the client: the ECHOs arrive while it runs.
    let callback = tokio::spawn({
        let c = c.clone();
        async move { c.call::<Callback>(&30_000).await }
    });
    tokio::time::sleep(Duration::from_millis(5)).await;
    let echoes: Vec<_> = (0..4u8)
        .map(|i| {
            let c = c.clone();
            tokio::spawn(async move { c.call::<Echo>(&Bytes::from(vec![i; 8])).await })
        })
        .collect();
    assert_eq!(within("CALLBACK", callback).await.unwrap().unwrap(), 30_001);
    for (i, echo) in echoes.into_iter().enumerate() {
        assert_eq!(
            within("ECHO", echo).await.unwrap().unwrap(),
            Bytes::from(vec![i as u8; 8])
        );
    }
}

/// A client that serves no backward direction answers the server's call PROG_UNAVAIL at
/// once (RFC 5531 section 9): the handler learns it without waiting for a timeout.
#[tokio::test]
async fn a_backward_call_to_a_client_serving_nothing_is_answered_prog_unavail() {
    let (server, mut outcomes) = start(TcpConfig::new()).await;
    let c = client(server.local_addr(), TcpConfig::new()).await;
    let err = within("OUTCOME", c.call::<Outcome>(&7)).await.unwrap_err();
    assert!(matches!(err, rpc::Error::SystemErr), "{err}");
    assert_eq!(outcomes.recv().await.unwrap(), "prog_unavail");
    // A callback server without the program: the same, from its dispatch.
    let c = client(
        server.local_addr(),
        TcpConfig::new().backchannel(Server::builder().build()),
    )
    .await;
    assert!(within("OUTCOME", c.call::<Outcome>(&7)).await.is_err());
    assert_eq!(outcomes.recv().await.unwrap(), "prog_unavail");
}

/// A server offering no backchannel (`max_backward_in_flight` 0): the handler's context has
/// none.
#[tokio::test]
async fn a_server_can_offer_no_backchannel() {
    let (server, mut outcomes) = start(TcpConfig::new().max_backward_in_flight(0)).await;
    let c = serving_client(server.local_addr()).await;
    assert!(within("OUTCOME", c.call::<Outcome>(&1)).await.is_err());
    assert_eq!(outcomes.recv().await.unwrap(), "no backchannel");
}

/// The client's connection closes while the server's backward call waits for its reply:
/// the call fails with `Closed` at once (not at its timeout), and so does the next one.
#[tokio::test]
async fn the_connection_closing_fails_a_pending_backward_call() {
    let (server, mut outcomes) =
        start(TcpConfig::new().timeout(Some(Duration::from_secs(60)))).await;
    let mut raw = TcpStream::connect(server.local_addr()).await.unwrap();
    raw.write_all(&record(&call_message(1, PROG, 4, &5u32)))
        .await
        .unwrap();
    // The server's PING: a CALL of the callback program, a fresh XID.
    let ping = within("the backward CALL", read_record(&mut raw))
        .await
        .unwrap();
    assert_eq!(word(&ping, 1), 0, "msg_type CALL");
    assert_eq!((word(&ping, 3), word(&ping, 5)), (CB_PROG, 1));
    drop(raw);
    assert_eq!(
        within("the outcome", outcomes.recv()).await.unwrap(),
        "closed"
    );
    assert_eq!(
        within("the next call", outcomes.recv()).await.unwrap(),
        "closed"
    );
}

/// A server shutting down fails the backward calls its handlers wait for (their replies
/// could no longer be read), so the shutdown does not wait out their timeout.
#[tokio::test]
async fn a_shutdown_fails_pending_backward_calls_at_once() {
    let (server, mut outcomes) =
        start(TcpConfig::new().timeout(Some(Duration::from_secs(60)))).await;
    let mut raw = TcpStream::connect(server.local_addr()).await.unwrap();
    raw.write_all(&record(&call_message(1, PROG, 4, &5u32)))
        .await
        .unwrap();
    within("the backward CALL", read_record(&mut raw))
        .await
        .unwrap();
    within("the shutdown", server.shutdown()).await;
    assert_eq!(
        within("the outcome", outcomes.recv()).await.unwrap(),
        "closed"
    );
}

/// A raw client answering the server's backward call by hand: a REPLY with an unknown XID
/// first (dropped and counted), then the right one; the forward call completes, and the
/// connection goes on serving calls.
#[tokio::test]
async fn a_reply_with_an_unknown_xid_is_dropped_and_counted() {
    let (server, mut outcomes) = start(TcpConfig::new()).await;
    let mut raw = TcpStream::connect(server.local_addr()).await.unwrap();
    // A stray REPLY before anything: no backward call waits.
    raw.write_all(&record(&reply_message(0xdead_beef, &1u32)))
        .await
        .unwrap();
    raw.write_all(&record(&call_message(1, PROG, 4, &41u32)))
        .await
        .unwrap();
    let ping = within("the backward CALL", read_record(&mut raw))
        .await
        .unwrap();
    let xid = word(&ping, 0);
    let mut out = record(&reply_message(xid.wrapping_add(1), &0u32));
    // A REPLY too short for a reply header, with the right XID's neighbour.
    out.extend(record(&[0, 0, 0, 9, 0, 0, 0, 1]));
    out.extend(record(&reply_message(xid, &42u32)));
    raw.write_all(&out).await.unwrap();
    assert_eq!(
        within("the outcome", outcomes.recv()).await.unwrap(),
        "ok 42"
    );
    let answer = within("the forward reply", read_record(&mut raw))
        .await
        .unwrap();
    assert_eq!(word(&answer, 0), 1);
    assert_eq!(parse_reply::<u32>(answer).unwrap(), 41);
    // A duplicate of the right REPLY, late: dropped too.
    raw.write_all(&record(&reply_message(xid, &42u32)))
        .await
        .unwrap();
    raw.write_all(&record(&call_message(
        2,
        PROG,
        3,
        &Bytes::from_static(b"on"),
    )))
    .await
    .unwrap();
    let answer = within("ECHO", read_record(&mut raw)).await.unwrap();
    assert_eq!(
        parse_reply::<Bytes>(answer).unwrap(),
        Bytes::from_static(b"on")
    );
    assert_eq!(server.stats().dropped, 4, "{:?}", server.stats());
}

/// A raw peer announcing a CALL record over the bound loses its connection, both ways: to a
/// server (as for any record), and as a server to a client serving callbacks (whose calls
/// then fail; nothing of the announced length is allocated).
#[tokio::test]
async fn a_call_record_over_the_bound_closes_the_connection_both_ways() {
    let (server, _) = start(TcpConfig::new().max_record(4096)).await;
    let mut raw = TcpStream::connect(server.local_addr()).await.unwrap();
    raw.write_all(&0xffff_fff0u32.to_be_bytes()).await.unwrap();
    raw.write_all(&call_message(1, PROG, 3, &Bytes::new()))
        .await
        .unwrap();
    assert!(within("the close", closed_by_peer(&mut raw)).await);

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let call = read_record(&mut s).await.unwrap();
        // A backward CALL announcing 2 GiB, its first bytes, and nothing more.
        s.write_all(&0xffff_fff0u32.to_be_bytes()).await.unwrap();
        s.write_all(&call_message(7, CB_PROG, 1, &1u32))
            .await
            .unwrap();
        let closed = closed_by_peer(&mut s).await;
        (word(&call, 0), closed)
    });
    let c = client(
        addr,
        TcpConfig::new()
            .max_record(4096)
            .retransmits(0)
            .backchannel(callback_server().0),
    )
    .await;
    let err = within("SLEEP", c.call::<Sleep>(&1)).await.unwrap_err();
    assert!(
        matches!(err, rpc::Error::Transport(TransportError::Closed)),
        "{err}"
    );
    let (_, closed) = within("the raw server", peer).await.unwrap();
    assert!(closed, "the client closed the connection");
}

/// A raw server calling a client that serves callbacks while the client waits for nothing
/// (it is read at all times): the CALL is answered on the connection; a stray REPLY is
/// dropped and counted; then the client's own call works.
#[tokio::test]
async fn a_client_answers_calls_arriving_while_it_waits_for_nothing() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (callbacks, _) = callback_server();
    let c = client(addr, TcpConfig::new().backchannel(callbacks)).await;
    let (mut s, _) = listener.accept().await.unwrap();
    let mut out = record(&reply_message(0x1234, &0u32));
    out.extend(record(&call_message(77, CB_PROG, 1, &9u32)));
    // Unknown procedure and program: PROC_UNAVAIL and PROG_UNAVAIL.
    out.extend(record(&call_message(78, CB_PROG, 9, &())));
    out.extend(record(&call_message(79, PROG, 1, &())));
    s.write_all(&out).await.unwrap();
    let mut answers = Vec::new();
    for _ in 0..3 {
        let answer = within("a backward reply", read_record(&mut s))
            .await
            .unwrap();
        answers.push((
            word(&answer, 0),
            parse_reply::<u32>(answer).map_err(|e| e.to_string()),
        ));
    }
    answers.sort_by_key(|(xid, _)| *xid);
    assert_eq!(answers[0], (77, Ok(10)));
    assert_eq!(answers[1].0, 78);
    assert!(
        answers[1].1.as_ref().unwrap_err().contains("procedure"),
        "{answers:?}"
    );
    assert_eq!(answers[2].0, 79);
    assert!(
        answers[2].1.as_ref().unwrap_err().contains("program"),
        "{answers:?}"
    );
    let stats = c.transport_stats().unwrap();
    assert_eq!((stats.dropped, stats.backward_calls), (1, 3), "{stats:?}");
    // The client's own call.
    let call = tokio::spawn({
        let c = c.clone();
        async move { c.call::<Sleep>(&3).await }
    });
    let message = within("the client's call", read_record(&mut s))
        .await
        .unwrap();
    s.write_all(&record(&reply_message(word(&message, 0), &3u32)))
        .await
        .unwrap();
    assert_eq!(within("SLEEP", call).await.unwrap().unwrap(), 3);
}

/// A raw server sending more backward calls than the client's `max_backward_in_flight` while
/// they run: those beyond are dropped and counted, and the client's own calls still get
/// their replies meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backward_calls_beyond_the_clients_limit_are_dropped_and_counted() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (callbacks, most) = callback_server();
    let c = client(
        addr,
        TcpConfig::new()
            .backchannel(callbacks)
            .max_backward_in_flight(2),
    )
    .await;
    let (mut s, _) = listener.accept().await.unwrap();
    // Ten PINGs of 200 ms each at once.
    let out: Vec<u8> = (0..10u32)
        .flat_map(|i| record(&call_message(100 + i, CB_PROG, 1, &200_000u32)))
        .collect();
    s.write_all(&out).await.unwrap();
    let call = tokio::spawn({
        let c = c.clone();
        async move { c.call::<Sleep>(&5).await }
    });
    // The client's call arrives (its own direction is not held up by the callbacks).
    let mut message = within("the client's call", read_record(&mut s))
        .await
        .unwrap();
    while word(&message, 1) != 0 {
        message = within("the client's call", read_record(&mut s))
            .await
            .unwrap();
    }
    s.write_all(&record(&reply_message(word(&message, 0), &5u32)))
        .await
        .unwrap();
    assert_eq!(within("SLEEP", call).await.unwrap().unwrap(), 5);
    let mut replies = 0;
    while replies < 2 {
        let answer = within("a backward reply", read_record(&mut s))
            .await
            .unwrap();
        if word(&answer, 1) == 1 {
            assert_eq!(parse_reply::<u32>(answer).unwrap(), 200_001);
            replies += 1;
        }
    }
    let stats = c.transport_stats().unwrap();
    assert_eq!((stats.backward_calls, stats.dropped), (2, 8), "{stats:?}");
    assert_eq!(most.load(std::sync::atomic::Ordering::SeqCst), 2);
}

//! ONC RPC over TCP with record marking (RFC 5531 section 11) on loopback: every reply status,
//! many calls in flight matched by XID, fragments both ways, the record bound, lost
//! connections, timeouts and shutdown. Peers that misbehave are raw sockets written here.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rpcrdma::rpc::msg::{AuthFlavor, AuthStat, OpaqueAuth};
use rpcrdma::rpc::tcp::{self, TcpConfig, TcpServer, TcpTransport};
use rpcrdma::rpc::{
    self, decode_args, decode_reply_header, encode_call_header, encode_reply_header, handler,
    AuthSys, CallContext, CallOptions, Client, Credentials, DispatchError, HandlerFuture,
    ReplyError, Server, Service, TransportError,
};
use rpcrdma::xdr::{self, Decoder, Encode, Encoder, Procedure};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};

const PROG: u32 = 0x2000_0001;

/// Calls that wait at the server until the test opens their gate.
struct Gates {
    state: watch::Sender<GateState>,
}

#[derive(Default)]
struct GateState {
    waiting: BTreeMap<u32, oneshot::Sender<()>>,
    /// The most calls ever waiting at once.
    max_waiting: usize,
}

impl Gates {
    fn new() -> Arc<Gates> {
        Arc::new(Gates {
            state: watch::Sender::new(GateState::default()),
        })
    }

    /// Waits (at the server) until the test opens gate `v`.
    async fn pass(&self, v: u32) {
        let (tx, rx) = oneshot::channel();
        self.state.send_modify(|s| {
            s.waiting.insert(v, tx);
            s.max_waiting = s.max_waiting.max(s.waiting.len());
        });
        let _ = rx.await;
    }

    /// Waits until at least `n` calls wait at their gates.
    async fn until_waiting(&self, n: usize) {
        let mut rx = self.state.subscribe();
        rx.wait_for(|s| s.waiting.len() >= n).await.unwrap();
    }

    fn open(&self, v: u32) {
        self.state.send_modify(|s| {
            let gate = s.waiting.remove(&v).expect("a call waits at this gate");
            let _ = gate.send(());
        });
    }

    fn lowest_waiting(&self) -> u32 {
        *self
            .state
            .borrow()
            .waiting
            .keys()
            .next()
            .expect("a call waits")
    }

    fn max_waiting(&self) -> usize {
        self.state.borrow().max_waiting
    }
}

/// A hand-written service standing in for generated code.
/// Calls of procedure 9 the server has dispatched (one test uses it).
static COUNTED_CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

struct Lab {
    version: u32,
    gates: Arc<Gates>,
}

impl Service for Lab {
    fn program(&self) -> u32 {
        PROG
    }

    fn version(&self) -> u32 {
        self.version
    }

    fn call(
        &self,
        ctx: CallContext,
        procedure: u32,
        args: &mut Decoder<'_>,
    ) -> Result<HandlerFuture, DispatchError> {
        match procedure {
            0 => Ok(handler(async { Ok(()) })),
            1 => {
                let (a, b): (u32, u32) = decode_args(args)?;
                Ok(handler(async move { Ok(a.wrapping_add(b)) }))
            }
            2 => Ok(handler(async { Err::<(), _>(ReplyError::SystemErr) })),
            3 => Ok(handler(async {
                if true {
                    panic!("a handler bug");
                }
                Ok(())
            })),
            4 => Ok(handler(async move {
                assert_eq!(ctx.transport(), rpc::TransportKind::Tcp);
                assert!(ctx.peer().is_some_and(|p| p.ip().is_loopback()));
                Ok(ctx.auth().sys().map_or(u32::MAX, |s| s.uid))
            })),
            5 => {
                let data: Bytes = decode_args(args)?;
                Ok(handler(async move { Ok(data) }))
            }
            6 => {
                let v: u32 = decode_args(args)?;
                Ok(handler(async move {
                    let ms = u64::from(v.wrapping_mul(37) % 50);
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    Ok(v * 3 + 1)
                }))
            }
            7 => {
                let v: u32 = decode_args(args)?;
                let gates = self.gates.clone();
                Ok(handler(async move {
                    gates.pass(v).await;
                    Ok(v + 1000)
                }))
            }
            8 => {
                let len: u32 = decode_args(args)?;
                Ok(handler(
                    async move { Ok(Bytes::from(vec![0xab; len as usize])) },
                ))
            }
            9 => {
                // Counted where the server runs it, on the server's runtime thread.
                COUNTED_CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok(handler(async { Ok(()) }))
            }
            _ => Err(DispatchError::ProcUnavail),
        }
    }
}

macro_rules! procedure {
    ($name:ident, $prog:expr, $vers:expr, $proc:expr, $args:ty, $res:ty) => {
        struct $name;
        impl Procedure for $name {
            const PROGRAM: u32 = $prog;
            const VERSION: u32 = $vers;
            const PROCEDURE: u32 = $proc;
            const NAME: &'static str = stringify!($name);
            type Args = $args;
            type Result = $res;
        }
    };
}

procedure!(Null, PROG, 1, 0, (), ());
procedure!(Add, PROG, 1, 1, (u32, u32), u32);
procedure!(Add3, PROG, 3, 1, (u32, u32), u32);
procedure!(AddWithOneArg, PROG, 1, 1, u32, u32);
procedure!(Fail, PROG, 1, 2, (), ());
procedure!(Panic, PROG, 1, 3, (), ());
procedure!(WhoAmI, PROG, 1, 4, (), u32);
procedure!(Echo, PROG, 1, 5, Bytes, Bytes);
procedure!(SleepThenAnswer, PROG, 1, 6, u32, u32);
procedure!(Gated, PROG, 1, 7, u32, u32);
procedure!(Big, PROG, 1, 8, u32, Bytes);
procedure!(Missing, PROG, 1, 99, (), ());
procedure!(Version2, PROG, 2, 0, (), ());
procedure!(Unhosted, 0x2000_0099, 1, 0, (), ());

fn lab_server(gates: &Arc<Gates>) -> Server {
    let mut b = Server::builder();
    b.add(Lab {
        version: 1,
        gates: gates.clone(),
    })
    .add(Lab {
        version: 3,
        gates: gates.clone(),
    });
    b.build()
}

async fn start(config: TcpConfig) -> (TcpServer, Arc<Gates>) {
    let gates = Gates::new();
    let server = TcpServer::bind("127.0.0.1:0", lab_server(&gates), config)
        .await
        .unwrap();
    (server, gates)
}

async fn client(addr: SocketAddr, config: TcpConfig) -> Client {
    Client::new(TcpTransport::connect(addr, config).await.unwrap())
}

fn none_auth() -> OpaqueAuth {
    OpaqueAuth {
        flavor: AuthFlavor::AuthNone,
        body: Bytes::new(),
    }
}

fn call_message(xid: u32, proc: u32, args: &impl Encode) -> Vec<u8> {
    let mut enc = Encoder::new();
    encode_call_header(&mut enc, xid, PROG, 1, proc, &none_auth(), &none_auth()).unwrap();
    args.encode(&mut enc).unwrap();
    enc.finish().into_bytes().to_vec()
}

fn reply_message(xid: u32, result: &impl Encode) -> Vec<u8> {
    let mut enc = Encoder::new();
    encode_reply_header(&mut enc, xid, Ok(())).unwrap();
    result.encode(&mut enc).unwrap();
    enc.finish().into_bytes().to_vec()
}

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|v| v.to_be_bytes()).collect()
}

/// `message` as one record of fragments of at most `fragment` bytes.
fn frame(message: &[u8], fragment: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut chunks = message.chunks(fragment).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&0x8000_0000u32.to_be_bytes());
    }
    while let Some(chunk) = chunks.next() {
        let last = if chunks.peek().is_none() {
            0x8000_0000
        } else {
            0
        };
        out.extend_from_slice(&(chunk.len() as u32 | last).to_be_bytes());
        out.extend_from_slice(chunk);
    }
    out
}

/// Reads one record: its bytes and how many fragments carried it.
async fn read_record(s: &mut TcpStream) -> io::Result<(Vec<u8>, usize)> {
    let mut record = Vec::new();
    let mut fragments = 0;
    loop {
        let header = s.read_u32().await?;
        let mut data = vec![0; (header & 0x7fff_ffff) as usize];
        s.read_exact(&mut data).await?;
        record.extend_from_slice(&data);
        fragments += 1;
        if header & 0x8000_0000 != 0 {
            return Ok((record, fragments));
        }
    }
}

fn xid_of(record: &[u8]) -> u32 {
    u32::from_be_bytes(record[..4].try_into().unwrap())
}

/// The reply's status, and the results when it is SUCCESS.
fn parse_reply<T: xdr::Decode>(record: Vec<u8>) -> Result<T, rpc::Error> {
    let bytes = Bytes::from(record);
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

#[tokio::test]
async fn every_reply_status_over_tcp() {
    let (server, _) = start(TcpConfig::new()).await;
    let c = client(server.local_addr(), TcpConfig::new()).await;
    c.call::<Null>(&()).await.unwrap();
    assert_eq!(c.call::<Add>(&(2, 40)).await.unwrap(), 42);
    assert_eq!(c.call::<Add3>(&(u32::MAX, 2)).await.unwrap(), 1);
    let err = c.call::<Unhosted>(&()).await.unwrap_err();
    assert!(matches!(err, rpc::Error::ProgUnavail), "{err}");
    let err = c.call::<Version2>(&()).await.unwrap_err();
    assert!(
        matches!(err, rpc::Error::ProgMismatch { low: 1, high: 3 }),
        "{err}"
    );
    let err = c.call::<Missing>(&()).await.unwrap_err();
    assert!(matches!(err, rpc::Error::ProcUnavail), "{err}");
    let err = c.call::<AddWithOneArg>(&7).await.unwrap_err();
    assert!(matches!(err, rpc::Error::GarbageArgs), "{err}");
    let err = c.call::<Fail>(&()).await.unwrap_err();
    assert!(matches!(err, rpc::Error::SystemErr), "{err}");
    let err = c.call::<Panic>(&()).await.unwrap_err();
    assert!(matches!(err, rpc::Error::SystemErr), "{err}");
    assert_eq!(c.call::<WhoAmI>(&()).await.unwrap(), u32::MAX);
    let sys = c
        .with_credentials(&Credentials::Sys(AuthSys::new("host", 1000, 100)))
        .unwrap();
    assert_eq!(sys.call::<WhoAmI>(&()).await.unwrap(), 1000);
    // The connection carried all of it.
    assert_eq!(c.call::<Add>(&(3, 4)).await.unwrap(), 7);

    let mut b = Server::builder();
    b.add(Lab {
        version: 1,
        gates: Gates::new(),
    })
    .accept_flavors(&[AuthFlavor::AuthSys]);
    let strict = TcpServer::bind("127.0.0.1:0", b.build(), TcpConfig::new())
        .await
        .unwrap();
    let c = tcp::connect(strict.local_addr()).await.unwrap();
    let err = c.call::<Null>(&()).await.unwrap_err();
    assert!(
        matches!(err, rpc::Error::Auth(AuthStat::AuthTooweak)),
        "{err}"
    );
}

#[tokio::test]
async fn rpc_mismatch_auth_badcred_and_unanswerable_records_from_a_raw_peer() {
    let (server, _) = start(TcpConfig::new()).await;
    let mut s = TcpStream::connect(server.local_addr()).await.unwrap();
    // RPC version 3.
    s.write_all(&frame(&words(&[9, 0, 3, PROG, 1, 0, 0, 0, 0, 0]), 64))
        .await
        .unwrap();
    let (reply, _) = read_record(&mut s).await.unwrap();
    assert_eq!(xid_of(&reply), 9);
    let err = parse_reply::<()>(reply).unwrap_err();
    assert!(
        matches!(err, rpc::Error::RpcMismatch { low: 2, high: 2 }),
        "{err}"
    );
    // An unknown credential flavor.
    s.write_all(&frame(&words(&[10, 0, 2, PROG, 1, 0, 77, 0, 0, 0]), 64))
        .await
        .unwrap();
    let err = parse_reply::<()>(read_record(&mut s).await.unwrap().0).unwrap_err();
    assert!(
        matches!(err, rpc::Error::Auth(AuthStat::AuthBadcred)),
        "{err}"
    );
    // A REPLY, a record too short to hold an XID, and an empty record: no answer, and the
    // connection carries on.
    s.write_all(&frame(&words(&[11, 1, 0]), 64)).await.unwrap();
    s.write_all(&frame(&[1, 2], 64)).await.unwrap();
    s.write_all(&frame(&[], 64)).await.unwrap();
    s.write_all(&frame(&call_message(12, 1, &(20u32, 22u32)), 64))
        .await
        .unwrap();
    let (reply, _) = read_record(&mut s).await.unwrap();
    assert_eq!(xid_of(&reply), 12);
    assert_eq!(parse_reply::<u32>(reply).unwrap(), 42);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_calls_on_one_connection_each_get_their_own_reply() {
    let (server, _) = start(TcpConfig::new().max_in_flight(256)).await;
    let c = client(server.local_addr(), TcpConfig::new().max_in_flight(256)).await;
    let calls: Vec<_> = (0..200u32)
        .map(|v| {
            let c = c.clone();
            // Each handler sleeps a different time, so replies come back out of order.
            tokio::spawn(async move { (v, c.call::<SleepThenAnswer>(&v).await) })
        })
        .collect();
    for call in calls {
        let (v, result) = call.await.unwrap();
        assert_eq!(result.unwrap(), v * 3 + 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_calls_in_flight_answered_in_reverse_order() {
    let (server, gates) = start(TcpConfig::new().max_in_flight(256)).await;
    let c = client(server.local_addr(), TcpConfig::new().max_in_flight(256)).await;
    let mut calls: Vec<_> = (0..200u32)
        .map(|v| {
            let c = c.clone();
            tokio::spawn(async move { c.call::<Gated>(&v).await })
        })
        .collect();
    // All 200 reach the server before any is answered: they are in flight at once.
    gates.until_waiting(200).await;
    for v in (0..200u32).rev() {
        gates.open(v);
        let result = calls.pop().unwrap().await.unwrap();
        assert_eq!(result.unwrap(), v + 1000);
    }
}

#[tokio::test]
async fn callers_beyond_the_clients_limit_wait_for_a_slot() {
    let (server, gates) = start(TcpConfig::new()).await;
    let c = client(server.local_addr(), TcpConfig::new().max_in_flight(4)).await;
    let calls: Vec<_> = (0..20u32)
        .map(|v| {
            let c = c.clone();
            tokio::spawn(async move { c.call::<Gated>(&v).await })
        })
        .collect();
    for left in (1..=20usize).rev() {
        gates.until_waiting(left.min(4)).await;
        gates.open(gates.lowest_waiting());
    }
    for (v, call) in calls.into_iter().enumerate() {
        assert_eq!(call.await.unwrap().unwrap(), v as u32 + 1000);
    }
    assert_eq!(gates.max_waiting(), 4);
}

#[tokio::test]
async fn a_caller_waiting_for_a_slot_times_out_or_learns_the_connection_is_gone() {
    let (server, gates) = start(TcpConfig::new()).await;
    let config = TcpConfig::new().max_in_flight(1).retransmits(0);
    let c = client(
        server.local_addr(),
        config.timeout(Some(Duration::from_millis(50))),
    )
    .await;
    let first = {
        let c = c.clone();
        // A timeout of its own, longer: the slot stays taken past the next call's deadline.
        let options = CallOptions::new().timeout(Duration::from_secs(60));
        tokio::spawn(async move { c.call_with::<Gated>(&1, options).await })
    };
    gates.until_waiting(1).await;
    // The one slot is taken: the next call waits for it until its deadline.
    let err = c.call::<Add>(&(1, 2)).await.unwrap_err();
    assert!(
        matches!(err, rpc::Error::Transport(TransportError::TimedOut(_))),
        "{err}"
    );
    drop(first);
    gates.open(1);

    let c = client(
        server.local_addr(),
        TcpConfig::new().max_in_flight(1).retransmits(0),
    )
    .await;
    let first = {
        let c = c.clone();
        tokio::spawn(async move { c.call::<Gated>(&2).await })
    };
    gates.until_waiting(1).await;
    let second = {
        let c = c.clone();
        tokio::spawn(async move { c.call::<Add>(&(1, 2)).await })
    };
    tokio::task::yield_now().await;
    // The server goes: the first call fails, and the one waiting for its slot is not left
    // waiting (it tries to connect again, and finds nobody).
    drop(server);
    assert!(first.await.unwrap().is_err());
    let second = tokio::time::timeout(Duration::from_secs(30), second)
        .await
        .expect("the caller waiting for a slot is not stranded");
    assert!(second.unwrap().is_err());
}

#[tokio::test]
async fn the_server_runs_at_most_its_limit_of_calls_per_connection() {
    let (server, gates) = start(TcpConfig::new().max_in_flight(3)).await;
    let c = client(server.local_addr(), TcpConfig::new()).await;
    let calls: Vec<_> = (0..12u32)
        .map(|v| {
            let c = c.clone();
            tokio::spawn(async move { c.call::<Gated>(&v).await })
        })
        .collect();
    for left in (1..=12usize).rev() {
        gates.until_waiting(left.min(3)).await;
        gates.open(gates.lowest_waiting());
    }
    for call in calls {
        call.await.unwrap().unwrap();
    }
    assert_eq!(gates.max_waiting(), 3);
}

#[tokio::test]
async fn records_split_in_many_fragments_both_ways() {
    let (server, _) = start(TcpConfig::new().max_fragment(5)).await;
    let c = client(server.local_addr(), TcpConfig::new().max_fragment(7)).await;
    let data = Bytes::from((0..1000u32).map(|i| i as u8).collect::<Vec<u8>>());
    assert_eq!(c.call::<Echo>(&data).await.unwrap(), data);

    // The server's reply really comes in 5-byte fragments, and it takes a call in 3-byte
    // ones.
    let mut s = TcpStream::connect(server.local_addr()).await.unwrap();
    let call = call_message(77, 5, &Bytes::from_static(&[9; 100]));
    s.write_all(&frame(&call, 3)).await.unwrap();
    let (reply, fragments) = read_record(&mut s).await.unwrap();
    assert_eq!(fragments, reply.len().div_ceil(5));
    assert_eq!(parse_reply::<Bytes>(reply).unwrap(), &[9u8; 100][..]);
}

#[tokio::test]
async fn the_client_sends_fragments_of_its_configured_size() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let (call, fragments) = read_record(&mut s).await.unwrap();
        s.write_all(&frame(&reply_message(xid_of(&call), &7u32), 1024))
            .await
            .unwrap();
        (call.len(), fragments)
    });
    let c = client(addr, TcpConfig::new().max_fragment(8)).await;
    assert_eq!(c.call::<AddWithOneArg>(&1).await.unwrap(), 7);
    let (len, fragments) = peer.await.unwrap();
    assert_eq!(fragments, len.div_ceil(8));
}

#[tokio::test]
async fn a_record_over_the_bound_closes_only_its_connection() {
    let (server, _) = start(TcpConfig::new().max_record(1024)).await;
    let good = client(server.local_addr(), TcpConfig::new()).await;
    assert_eq!(good.call::<Add>(&(1, 2)).await.unwrap(), 3);

    // A header announcing 2 GiB: refused as it arrives, without waiting for the data.
    let mut raw = TcpStream::connect(server.local_addr()).await.unwrap();
    raw.write_all(&0xffff_ffffu32.to_be_bytes()).await.unwrap();
    assert!(closed_by_peer(&mut raw).await);

    // Fragments adding up over the bound: the second header crosses it.
    let mut raw = TcpStream::connect(server.local_addr()).await.unwrap();
    let mut stream = Vec::new();
    stream.extend_from_slice(&1000u32.to_be_bytes());
    stream.extend_from_slice(&[0; 1000]);
    stream.extend_from_slice(&(0x8000_0000u32 | 100).to_be_bytes());
    raw.write_all(&stream).await.unwrap();
    assert!(closed_by_peer(&mut raw).await);

    // Our client sending too much loses its connection (and its one retransmission).
    let big = client(server.local_addr(), TcpConfig::new()).await;
    let err = big
        .call::<Echo>(&Bytes::from(vec![0; 2000]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, rpc::Error::Transport(TransportError::Closed)),
        "{err}"
    );

    // The other connection never noticed.
    assert_eq!(good.call::<Add>(&(4, 5)).await.unwrap(), 9);
}

#[tokio::test]
async fn the_client_refuses_to_send_a_call_over_its_bound() {
    let (server, _) = start(TcpConfig::new()).await;
    let c = client(server.local_addr(), TcpConfig::new().max_record(512)).await;
    let err = c
        .call::<Echo>(&Bytes::from(vec![0; 600]))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            rpc::Error::Transport(TransportError::TooLarge { max: 512, .. })
        ),
        "{err}"
    );
    assert_eq!(c.call::<Add>(&(1, 1)).await.unwrap(), 2);
}

#[tokio::test]
async fn a_reply_over_the_servers_bound_becomes_system_err() {
    let (server, _) = start(TcpConfig::new().max_record(2048)).await;
    let c = client(server.local_addr(), TcpConfig::new()).await;
    assert_eq!(c.call::<Big>(&1000).await.unwrap().len(), 1000);
    let err = c.call::<Big>(&4096).await.unwrap_err();
    assert!(matches!(err, rpc::Error::SystemErr), "{err}");
}

/// A server that reads one call on each connection, then closes it without answering, until
/// it has seen `closes` calls; it answers the next. Returns the XIDs it saw.
async fn closing_server(closes: usize) -> (SocketAddr, tokio::task::JoinHandle<Vec<u32>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut xids = Vec::new();
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            let Ok((call, _)) = read_record(&mut s).await else {
                continue;
            };
            xids.push(xid_of(&call));
            if xids.len() > closes {
                s.write_all(&frame(&reply_message(xid_of(&call), &99u32), 1024))
                    .await
                    .unwrap();
                return xids;
            }
        }
    });
    (addr, task)
}

#[tokio::test]
async fn a_lost_connection_is_retransmitted_once_with_the_same_xid() {
    let (addr, server) = closing_server(1).await;
    let c = client(addr, TcpConfig::new()).await;
    assert_eq!(c.call::<AddWithOneArg>(&1).await.unwrap(), 99);
    let xids = server.await.unwrap();
    assert_eq!(xids.len(), 2);
    assert_eq!(xids[0], xids[1], "the retransmission keeps the XID");
}

#[tokio::test]
async fn a_connection_lost_twice_fails_the_call_with_closed() {
    let (addr, server) = closing_server(2).await;
    let c = client(addr, TcpConfig::new()).await;
    let err = c.call::<AddWithOneArg>(&1).await.unwrap_err();
    assert!(
        matches!(err, rpc::Error::Transport(TransportError::Closed)),
        "{err}"
    );
    // The next call connects again and goes through.
    assert_eq!(c.call::<AddWithOneArg>(&2).await.unwrap(), 99);
    let xids = server.await.unwrap();
    assert_eq!(xids.len(), 3);
    assert_eq!(xids[0], xids[1]);
    assert_ne!(xids[1], xids[2]);
}

#[tokio::test]
async fn without_retransmission_a_lost_connection_fails_the_call_with_closed() {
    let (addr, server) = closing_server(1).await;
    let c = client(addr, TcpConfig::new().retransmits(0)).await;
    let err = c.call::<AddWithOneArg>(&1).await.unwrap_err();
    assert!(
        matches!(err, rpc::Error::Transport(TransportError::Closed)),
        "{err}"
    );
    server.abort();
}

#[tokio::test]
async fn every_waiting_call_fails_when_the_server_goes_away() {
    let (server, gates) = start(TcpConfig::new()).await;
    let addr = server.local_addr();
    let c = client(addr, TcpConfig::new().retransmits(0)).await;
    let calls: Vec<_> = (0..5u32)
        .map(|v| {
            let c = c.clone();
            tokio::spawn(async move { c.call::<Gated>(&v).await })
        })
        .collect();
    gates.until_waiting(5).await;
    drop(server);
    for call in calls {
        let err = call.await.unwrap().unwrap_err();
        assert!(
            matches!(err, rpc::Error::Transport(TransportError::Closed)),
            "{err}"
        );
    }
    // Reconnecting finds nobody listening.
    let err = c.call::<Null>(&()).await.unwrap_err();
    assert!(
        matches!(err, rpc::Error::Transport(TransportError::Io(_))),
        "{err}"
    );
}

/// A call alone on its connection reads its own reply; a caller that polls it once and then
/// keeps it aside (as a `select!` loop may) must not hold up the replies of later calls.
#[tokio::test]
async fn a_call_kept_aside_does_not_hold_up_the_replies_of_others() {
    let (server, gates) = start(TcpConfig::new()).await;
    let c = client(server.local_addr(), TcpConfig::new()).await;
    let mut aside = std::pin::pin!(c.call::<Gated>(&1));
    tokio::select! {
        _ = &mut aside => panic!("answered before its gate opened"),
        () = gates.until_waiting(1) => {}
    }
    // `aside` is not polled from here until its reply has arrived.
    let later = tokio::time::timeout(Duration::from_secs(30), c.call::<Add>(&(40, 2)))
        .await
        .expect("a later call is answered while the first is kept aside");
    assert_eq!(later.unwrap(), 42);
    gates.open(1);
    assert_eq!(c.call::<Add>(&(1, 2)).await.unwrap(), 3);
    assert_eq!(aside.await.unwrap(), 1001);
}

/// Calls that come and go from several threads, some cut short at any point by a timeout of
/// their own, pass the reading of replies between themselves and the reply task: none is
/// stranded, and each gets its own answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_coming_and_going_pass_the_reading_between_them() {
    let (server, _) = start(TcpConfig::new()).await;
    let c = client(server.local_addr(), TcpConfig::new()).await;
    let tasks: Vec<_> = (0..8u32)
        .map(|t| {
            let c = c.clone();
            tokio::spawn(async move {
                let mut answered = 0;
                for i in 0..400u32 {
                    let cut_short = i % 5 == 4;
                    let options = match cut_short {
                        true => {
                            CallOptions::new().timeout(Duration::from_micros(u64::from(i % 50)))
                        }
                        false => CallOptions::new(),
                    };
                    match c.call_with::<Add>(&(t, i), options).await {
                        Ok(sum) => {
                            assert_eq!(sum, t + i);
                            answered += 1;
                        }
                        Err(rpc::Error::Transport(TransportError::TimedOut(_))) if cut_short => {}
                        Err(e) => panic!("call {t}/{i}: {e}"),
                    }
                    if i % (t + 2) == 0 {
                        tokio::task::yield_now().await;
                    }
                }
                answered
            })
        })
        .collect();
    let answered = tokio::time::timeout(Duration::from_secs(120), async {
        let mut answered = 0;
        for task in tasks {
            answered += task.await.unwrap();
        }
        answered
    })
    .await
    .expect("no call is stranded");
    assert!(answered >= 8 * 320, "{answered}");
    // Alone again, a call reads its own reply.
    assert_eq!(c.call::<Add>(&(1, 1)).await.unwrap(), 2);
}

/// A server that answers one call per connection and then closes it, `connections` times.
async fn one_call_per_connection_server(
    connections: usize,
) -> (SocketAddr, watch::Receiver<usize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (closed_tx, closed) = watch::channel(0);
    tokio::spawn(async move {
        for n in 1..=connections {
            let (mut s, _) = listener.accept().await.unwrap();
            let (call, _) = read_record(&mut s).await.unwrap();
            s.write_all(&frame(&reply_message(xid_of(&call), &(n as u32)), 1024))
                .await
                .unwrap();
            drop(s);
            closed_tx.send_replace(n);
        }
    });
    (addr, closed)
}

#[tokio::test]
async fn a_connection_closed_while_idle_is_replaced_before_the_next_call_is_sent() {
    let (addr, mut closed) = one_call_per_connection_server(3).await;
    // No retransmission: a call sent on the closed connection would fail.
    let c = client(addr, TcpConfig::new().retransmits(0)).await;
    for n in 1..=3u32 {
        assert_eq!(c.call::<AddWithOneArg>(&0).await.unwrap(), n);
        closed.wait_for(|&c| c >= n as usize).await.unwrap();
        // Let the runtime take in the end of the stream (any park turns its reactor).
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_call_times_out_and_its_late_reply_is_dropped() {
    let (server, gates) = start(TcpConfig::new()).await;
    let c = client(server.local_addr(), TcpConfig::new()).await;
    let short = CallOptions::new().timeout(Duration::from_millis(20));
    let err = c.call_with::<Gated>(&1, short).await.unwrap_err();
    assert!(
        matches!(err, rpc::Error::Transport(TransportError::TimedOut(_))),
        "{err}"
    );
    // The reply comes later, for an XID no call waits for.
    gates.until_waiting(1).await;
    gates.open(1);
    assert_eq!(c.call::<Add>(&(1, 1)).await.unwrap(), 2);

    // The configured default applies when the call says nothing.
    let c = client(
        server.local_addr(),
        TcpConfig::new().timeout(Some(Duration::from_millis(20))),
    )
    .await;
    let err = c.call::<Gated>(&2).await.unwrap_err();
    assert!(
        matches!(err, rpc::Error::Transport(TransportError::TimedOut(_))),
        "{err}"
    );
}

#[tokio::test]
async fn late_duplicate_and_stray_replies_are_dropped() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (timed_out_tx, timed_out_rx) = oneshot::channel::<()>();
    let peer = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let (first, _) = read_record(&mut s).await.unwrap();
        timed_out_rx.await.unwrap();
        let (second, _) = read_record(&mut s).await.unwrap();
        let mut out = Vec::new();
        // Late (its call timed out), a CALL, a stub, then the answer twice.
        out.extend(frame(&reply_message(xid_of(&first), &1u32), 1024));
        out.extend(frame(&call_message(5, 0, &()), 1024));
        out.extend(frame(&[0, 0, 0, 1], 1024));
        out.extend(frame(&reply_message(xid_of(&second), &2u32), 1024));
        out.extend(frame(&reply_message(xid_of(&second), &3u32), 1024));
        s.write_all(&out).await.unwrap();
        // The CALL is answered: the client serves no backward direction (PROG_UNAVAIL).
        let (answer, _) = read_record(&mut s).await.unwrap();
        assert_eq!(xid_of(&answer), 5);
        assert!(
            matches!(parse_reply::<()>(answer), Err(rpc::Error::ProgUnavail)),
            "PROG_UNAVAIL"
        );
        let (third, _) = read_record(&mut s).await.unwrap();
        s.write_all(&frame(&reply_message(xid_of(&third), &4u32), 1024))
            .await
            .unwrap();
        [first, second, third].map(|r| xid_of(&r))
    });
    let c = client(addr, TcpConfig::new()).await;
    let short = CallOptions::new().timeout(Duration::from_millis(20));
    let err = c.call_with::<AddWithOneArg>(&0, short).await.unwrap_err();
    assert!(
        matches!(err, rpc::Error::Transport(TransportError::TimedOut(_))),
        "{err}"
    );
    timed_out_tx.send(()).unwrap();
    assert_eq!(c.call::<AddWithOneArg>(&0).await.unwrap(), 2);
    assert_eq!(c.call::<AddWithOneArg>(&0).await.unwrap(), 4);
    let [a, b, c] = peer.await.unwrap();
    assert!(a != b && b != c && a != c, "XIDs are unique: {a} {b} {c}");
}

/// A server that breaks the record marking (a record over the client's bound, whether the
/// call reads alone or the reply task reads for two) loses its connection; the calls fail.
#[tokio::test]
async fn a_server_sending_a_record_over_the_clients_bound_loses_the_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = tokio::spawn(async move {
        // One call alone: its answer announces 2 GiB.
        let (mut s, _) = listener.accept().await.unwrap();
        read_record(&mut s).await.unwrap();
        s.write_all(&0xffff_ffffu32.to_be_bytes()).await.unwrap();
        let first = closed_by_peer(&mut s).await;
        // Two calls: fragments that add up over the bound.
        let (mut s, _) = listener.accept().await.unwrap();
        read_record(&mut s).await.unwrap();
        read_record(&mut s).await.unwrap();
        let mut out = 1000u32.to_be_bytes().to_vec();
        out.extend_from_slice(&[0; 1000]);
        out.extend_from_slice(&(0x8000_0000u32 | 100).to_be_bytes());
        s.write_all(&out).await.unwrap();
        first && closed_by_peer(&mut s).await
    });
    let c = client(addr, TcpConfig::new().max_record(1024).retransmits(0)).await;
    let closed = |r: Result<u32, rpc::Error>| {
        matches!(r, Err(rpc::Error::Transport(TransportError::Closed)))
    };
    assert!(closed(c.call::<Add>(&(1, 2)).await));
    let (a, b) = tokio::join!(c.call::<Add>(&(1, 2)), c.call::<Add>(&(3, 4)));
    assert!(closed(a) && closed(b));
    assert!(peer.await.unwrap(), "the client closed both connections");
}

#[tokio::test]
async fn a_client_that_closes_its_sending_side_still_gets_its_reply() {
    let (server, _) = start(TcpConfig::new()).await;
    let mut s = TcpStream::connect(server.local_addr()).await.unwrap();
    s.write_all(&frame(&call_message(3, 1, &(40u32, 2u32)), 1024))
        .await
        .unwrap();
    s.shutdown().await.unwrap();
    let (reply, _) = read_record(&mut s).await.unwrap();
    assert_eq!(parse_reply::<u32>(reply).unwrap(), 42);
    assert!(closed_by_peer(&mut s).await);
}

#[tokio::test]
async fn a_client_that_disconnects_mid_call_harms_nobody() {
    let (server, gates) = start(TcpConfig::new()).await;
    let mut s = TcpStream::connect(server.local_addr()).await.unwrap();
    s.write_all(&frame(&call_message(3, 7, &5u32), 1024))
        .await
        .unwrap();
    gates.until_waiting(1).await;
    drop(s);
    // The handler finishes with nobody to answer.
    gates.open(5);
    let c = client(server.local_addr(), TcpConfig::new()).await;
    let call = {
        let c = c.clone();
        tokio::spawn(async move { c.call::<Gated>(&6).await })
    };
    gates.until_waiting(1).await;
    gates.open(6);
    assert_eq!(call.await.unwrap().unwrap(), 1006);
}

#[tokio::test]
async fn shutdown_answers_the_running_calls_then_stops_listening() {
    let (server, gates) = start(TcpConfig::new()).await;
    let addr = server.local_addr();
    let c = client(addr, TcpConfig::new().retransmits(0)).await;
    let call = {
        let c = c.clone();
        tokio::spawn(async move { c.call::<Gated>(&1).await })
    };
    gates.until_waiting(1).await;
    let stopped = server.shutdown();
    gates.open(1);
    assert_eq!(call.await.unwrap().unwrap(), 1001);
    stopped.await;
    assert!(TcpStream::connect(addr).await.is_err());
}

#[tokio::test]
async fn serve_runs_a_server_as_a_future() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let serving = tokio::spawn(tcp::serve(
        listener,
        lab_server(&Gates::new()),
        TcpConfig::new(),
    ));
    let c = tcp::connect(addr).await.unwrap();
    assert_eq!(c.call::<Add>(&(5, 6)).await.unwrap(), 11);
    serving.abort();
}

#[tokio::test]
async fn records_larger_than_the_socket_buffers_go_out_whole_and_in_order() {
    // A 32 MiB reply cannot fit in loopback's socket buffers while the client is not reading:
    // the server's writer is left with a partly written record and the replies queued behind
    // it, and finishes them as the client reads.
    const BIG: u32 = 32 << 20;
    let config = TcpConfig::new().max_record(64 << 20);
    let (server, _) = start(config.clone()).await;
    let mut s = TcpStream::connect(server.local_addr()).await.unwrap();
    let mut calls = frame(&call_message(1, 8, &BIG), 1024);
    calls.extend(frame(&call_message(2, 1, &(1u32, 2u32)), 1024));
    calls.extend(frame(&call_message(3, 1, &(3u32, 4u32)), 1024));
    s.write_all(&calls).await.unwrap();
    let (big, _) = read_record(&mut s).await.unwrap();
    assert_eq!(xid_of(&big), 1);
    let data = parse_reply::<Bytes>(big).unwrap();
    assert_eq!(data.len(), BIG as usize);
    assert!(data.iter().all(|b| *b == 0xab));
    for (xid, sum) in [(2, 3u32), (3, 7)] {
        let (reply, _) = read_record(&mut s).await.unwrap();
        assert_eq!(xid_of(&reply), xid);
        assert_eq!(parse_reply::<u32>(reply).unwrap(), sum);
    }

    // Both ways through our client, with calls in flight behind the large ones.
    let c = client(server.local_addr(), config).await;
    let payload = Bytes::from((0..BIG).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
    let echoes: Vec<_> = (0..2)
        .map(|_| {
            let (c, payload) = (c.clone(), payload.clone());
            tokio::spawn(async move { c.call::<Echo>(&payload).await })
        })
        .collect();
    let adds: Vec<_> = (0..10u32)
        .map(|v| {
            let c = c.clone();
            tokio::spawn(async move { c.call::<Add>(&(v, v)).await })
        })
        .collect();
    for echo in echoes {
        assert!(echo.await.unwrap().unwrap() == payload);
    }
    for (v, add) in adds.into_iter().enumerate() {
        assert_eq!(add.await.unwrap().unwrap(), 2 * v as u32);
    }
}

/// A client pipelining calls faster than they are answered does not keep a current-thread
/// runtime to itself: the connection's task gives way every so many calls (tokio's budget),
/// so other tasks run while the flood is being answered, even when thousands of calls are
/// already waiting in the socket.
#[tokio::test]
async fn a_client_pipelining_calls_does_not_keep_the_runtime_to_itself() {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicBool, Ordering};

    const FLOOD: usize = 20_000;
    let (server, _gates) = start(TcpConfig::new()).await;
    let mut flood = std::net::TcpStream::connect(server.local_addr()).unwrap();
    let record_len = frame(&call_message(0, 9, &()), usize::MAX).len();
    let calls: Vec<u8> = (0..FLOOD as u32)
        .flat_map(|xid| frame(&call_message(xid, 9, &()), usize::MAX))
        .collect();
    // As many calls as the socket takes before the server reads any (this task holds the
    // runtime's only thread until its first await), the rest from a thread.
    flood.set_nonblocking(true).unwrap();
    let buffered = flood.write(&calls).unwrap_or(0);
    flood.set_nonblocking(false).unwrap();
    let mut replies_in = flood.try_clone().unwrap();
    let writing = std::thread::spawn(move || {
        flood.write_all(&calls[buffered..]).unwrap();
        flood
    });
    let done = Arc::new(AtomicBool::new(false));
    // Replies read as they come, so that the server never waits for the socket.
    let counting = std::thread::spawn({
        let done = done.clone();
        move || {
            let mut head = [0u8; 4];
            let mut body = [0u8; 64];
            for _ in 0..FLOOD {
                replies_in.read_exact(&mut head).unwrap();
                let len = (u32::from_be_bytes(head) & 0x7fff_ffff) as usize;
                replies_in.read_exact(&mut body[..len]).unwrap();
            }
            done.store(true, Ordering::SeqCst);
        }
    });
    // Another task of the runtime: the most calls the server dispatched between two of its
    // turns.
    let start = COUNTED_CALLS.load(Ordering::SeqCst);
    let ticker = tokio::spawn({
        let done = done.clone();
        async move {
            let (mut last, mut longest) = (start, 0);
            while !done.load(Ordering::SeqCst) {
                tokio::task::yield_now().await;
                let now = COUNTED_CALLS.load(Ordering::SeqCst);
                longest = longest.max(now - last);
                last = now;
            }
            longest
        }
    });
    tokio::task::spawn_blocking(move || counting.join().unwrap())
        .await
        .unwrap();
    let longest = ticker.await.unwrap();
    let _flood = writing.join().unwrap();
    // tokio's budget is 128 units per turn; without giving way per call the task answered
    // everything the socket held in one turn.
    assert!(
        longest <= 1000,
        "the server answered {longest} pipelined calls in a row without letting another task run \
         ({} calls were waiting in the socket at the start)",
        buffered / record_len
    );
}

/// A server that sends nothing but stray replies, without end, before and after the call,
/// neither keeps the call from being sent and timing out nor holds the client's thread: the
/// call reads only a few records before it is sent, and gives way to other tasks between the
/// ones it reads after.
#[test]
fn a_server_flooding_stray_replies_does_not_hold_the_client() {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let written = Arc::new(AtomicUsize::new(0));
    // The peer: replies for no call (XIDs counting from 7), written as long as the client
    // reads them; and how much of them it had written when the call came.
    let call_came = std::thread::spawn({
        let written = written.clone();
        move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut calls = s.try_clone().unwrap();
            let counter = written.clone();
            std::thread::spawn(move || {
                let strays: Vec<u8> = (7..1007u32)
                    .flat_map(|xid| frame(&reply_message(xid, &()), usize::MAX))
                    .collect();
                while s.write_all(&strays).is_ok() {
                    counter.fetch_add(strays.len(), Ordering::SeqCst);
                }
            });
            let mut head = [0u8; 4];
            calls.read_exact(&mut head).unwrap();
            written.load(Ordering::SeqCst)
        }
    });
    let (outcome, ended) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let result = runtime.block_on(async {
            let client = client(addr, TcpConfig::new()).await;
            // Strays pile up while no call waits.
            tokio::time::sleep(Duration::from_millis(50)).await;
            client
                .call_with::<Null>(&(), CallOptions::new().timeout(Duration::from_millis(300)))
                .await
        });
        let _ = outcome.send(result);
    });
    // Before the call went out, the client read at most what the sockets' buffers held
    // (about 4 MiB here) and a few records more; reading on while strays came, it read tens
    // of megabytes to gigabytes, however long the socket did not run dry.
    let before_the_call = call_came.join().unwrap();
    assert!(
        before_the_call < 16 << 20,
        "the client read {before_the_call} bytes of stray replies before sending its call"
    );
    let result = ended
        .recv_timeout(Duration::from_secs(60))
        .expect("the call never ended: the client's thread kept reading stray replies");
    assert!(
        matches!(
            result,
            Err(rpc::Error::Transport(TransportError::TimedOut(_)))
        ),
        "{result:?}"
    );
}

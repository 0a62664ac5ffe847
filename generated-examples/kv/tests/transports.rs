//! One table of calls through the generated typed client, with default settings on both ends,
//! over ONC RPC over TCP and over RPC-over-RDMA versions 1 and 2 on the software provider, and
//! (feature `verbs`, in the Soft-RoCE guest of `tests/vm/run provider`) over version 1 on the
//! verbs provider: every result the same, whatever the size of the values (none named by the
//! caller).

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use kv_service::{blob_byte, kv_v1, KvGetRes, KvKey, KvPutArgs, KvStatus, KvV1Client, MemoryKv};
use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::tcp::{TcpConfig, TcpServer, TcpTransport};
use rpcrdma::rpc::{Client, Server};
use rpcrdma::transport::{RdmaConfig, RdmaListener, RdmaTransport};

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

/// One call of the table.
#[derive(Debug, Clone)]
enum Op {
    Null,
    Put(&'static str, usize),
    Get(&'static str),
    Remove(&'static str),
    Take(&'static str),
    Blob(usize),
}

/// What a call returned, comparable across transports (values by length and content).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Done,
    Status(KvStatus),
    Value(usize),
    Missing,
    Bytes(usize),
}

/// The value PUT under `key` with `len` bytes.
fn value(key: &str, len: usize) -> Bytes {
    let seed = key
        .bytes()
        .fold(7u8, |a, b| a.wrapping_mul(31).wrapping_add(b));
    Bytes::from(
        (0..len)
            .map(|i| (i as u8).wrapping_mul(seed).wrapping_add((i >> 12) as u8))
            .collect::<Vec<u8>>(),
    )
}

/// Sizes of every kind: empty, tiny, one page, over the old 1 MiB default chunk, the `.x`
/// bound (64 MiB), tiny after huge; an unbounded result small and large.
fn table() -> Vec<(Op, Outcome)> {
    use Op::*;
    use Outcome::{Bytes, Done, Missing, Status, Value};
    vec![
        (Null, Done),
        (Put("empty", 0), Status(KvStatus::KvOk)),
        (Get("empty"), Value(0)),
        (Put("tiny", 20), Status(KvStatus::KvOk)),
        (Get("tiny"), Value(20)),
        (Put("page", 4 * KIB), Status(KvStatus::KvOk)),
        (Get("page"), Value(4 * KIB)),
        (Put("four", 4 * MIB), Status(KvStatus::KvOk)),
        (Get("four"), Value(4 * MIB)),
        (Get("tiny"), Value(20)),
        (Put("sixteen", 16 * MIB + 3), Status(KvStatus::KvOk)),
        (Get("sixteen"), Value(16 * MIB + 3)),
        (Get("tiny"), Value(20)),
        (Get("nothing"), Missing),
        (Blob(3), Bytes(3)),
        (Blob(5 * MIB + 1), Bytes(5 * MIB + 1)),
        (Blob(10), Bytes(10)),
        (Put("bound", 64 * MIB), Status(KvStatus::KvOk)),
        (Get("bound"), Value(64 * MIB)),
        (Blob(64 * MIB), Bytes(64 * MIB)),
        (Get("tiny"), Value(20)),
        (Remove("tiny"), Status(KvStatus::KvOk)),
        (Remove("tiny"), Status(KvStatus::KvNoent)),
        (Get("tiny"), Missing),
        (Put("taken", 4 * MIB), Status(KvStatus::KvOk)),
        (Take("taken"), Value(4 * MIB)),
        (Take("taken"), Missing),
    ]
}

/// A GET or TAKE result, its value checked against what was PUT under `key`.
fn found(key: &str, result: KvGetRes) -> Outcome {
    match result {
        KvGetRes::KvOk(found) => {
            let len = found.value.len();
            assert!(
                found.value == value(key, len),
                "{key}: the value read back differs"
            );
            Outcome::Value(len)
        }
        KvGetRes::Default { .. } => Outcome::Missing,
    }
}

async fn run(client: &KvV1Client, op: &Op) -> Result<Outcome, rpcrdma::rpc::Error> {
    let key = |k: &str| KvKey(k.to_string().into());
    Ok(match op {
        Op::Null => {
            client.kv_null().await?;
            Outcome::Done
        }
        Op::Put(k, len) => Outcome::Status(
            client
                .kv_put(KvPutArgs {
                    key: key(k),
                    value: value(k, *len),
                })
                .await?,
        ),
        Op::Get(k) => found(k, client.kv_get(key(k)).await?),
        Op::Take(k) => found(k, client.kv_take(key(k)).await?),
        Op::Remove(k) => Outcome::Status(client.kv_remove(key(k)).await?),
        Op::Blob(len) => {
            let blob = client.kv_blob(*len as u32).await?;
            assert!(
                blob.data
                    .iter()
                    .enumerate()
                    .all(|(i, &b)| b == blob_byte(i)),
                "BLOB {len}: the data differs"
            );
            Outcome::Bytes(blob.data.len())
        }
    })
}

fn server() -> (Server, Arc<MemoryKv>) {
    served(Arc::new(MemoryKv::new()))
}

fn served(kv: Arc<MemoryKv>) -> (Server, Arc<MemoryKv>) {
    let mut builder = Server::builder();
    kv_v1::register_arc(&mut builder, kv.clone());
    (builder.build(), kv)
}

async fn rdma_server(config: RdmaConfig) -> (Arc<RdmaListener<SoftProvider>>, SocketAddr) {
    rdma_server_of(server().0, config).await
}

async fn rdma_server_of(
    server: Server,
    config: RdmaConfig,
) -> (Arc<RdmaListener<SoftProvider>>, SocketAddr) {
    rdma_server_on(
        SoftProvider::default(),
        "127.0.0.1:0".parse().unwrap(),
        server,
        config,
    )
    .await
}

/// `server` served over RPC-over-RDMA on `provider`, listening at `bind`.
async fn rdma_server_on<P: Provider>(
    provider: P,
    bind: SocketAddr,
    server: Server,
    config: RdmaConfig,
) -> (Arc<RdmaListener<P>>, SocketAddr) {
    let listener = provider.listen(bind).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let rdma = Arc::new(rpcrdma::transport::serve::<P>(listener, server, config));
    tokio::spawn({
        let rdma = rdma.clone();
        async move { rdma.run().await }
    });
    (rdma, addr)
}

async fn rdma_client(addr: SocketAddr, config: RdmaConfig) -> Arc<RdmaTransport<SoftProvider>> {
    Arc::new(
        RdmaTransport::connect(Arc::new(SoftProvider::default()), addr, config)
            .await
            .unwrap(),
    )
}

/// A fresh server over TCP on loopback (kept while the client lives) and a client of it.
async fn tcp_client() -> (TcpServer, KvV1Client) {
    let tcp_server = TcpServer::bind("127.0.0.1:0", server().0, TcpConfig::new())
        .await
        .unwrap();
    let tcp = KvV1Client::new(Client::new(
        TcpTransport::connect(tcp_server.local_addr(), TcpConfig::new())
            .await
            .unwrap(),
    ));
    (tcp_server, tcp)
}

/// The table over TCP on loopback, as the other transports' reference.
async fn over_tcp() -> Vec<Outcome> {
    let (_server, tcp) = tcp_client().await;
    run_table("TCP", &tcp).await
}

async fn run_table(name: &str, client: &KvV1Client) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    for (op, expected) in table() {
        let got = run(client, &op)
            .await
            .unwrap_or_else(|e| panic!("{name}: {op:?} failed: {e}"));
        assert_eq!(got, expected, "{name}: {op:?}");
        outcomes.push(got);
    }
    outcomes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_table_of_calls_gives_the_same_results_over_tcp_and_rdma_v1_and_v2() {
    let over_tcp = over_tcp().await;

    let (_v1_server, v1_addr) = rdma_server(RdmaConfig::default()).await;
    let v1 = rdma_client(v1_addr, RdmaConfig::default()).await;
    let over_v1 = run_table(
        "RPC-over-RDMA v1",
        &KvV1Client::new(Client::from_arc(v1.clone())),
    )
    .await;
    assert_eq!(v1.version(), 1);

    let (_v2_server, v2_addr) = rdma_server(RdmaConfig::default().version_2(true)).await;
    let v2 = rdma_client(v2_addr, RdmaConfig::default().version_2(true)).await;
    let over_v2 = run_table(
        "RPC-over-RDMA v2",
        &KvV1Client::new(Client::from_arc(v2.clone())),
    )
    .await;
    assert_eq!(v2.version(), 2);

    assert_eq!(over_tcp, over_v1);
    assert_eq!(over_tcp, over_v2);
}

/// Version 1 on a real verbs stack: runs where `RPCRDMA_VERBS_ADDR` names an RDMA-capable
/// interface (the Soft-RoCE guest; `tests/vm/run provider` sets it). Elsewhere the verbs
/// provider has no device to open, and the table above stands for the transport.
#[cfg(feature = "verbs")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_table_over_rdma_v1_on_the_verbs_provider() {
    use rpcrdma::rdma::verbs::VerbsProvider;
    let Some(text) = std::env::var("RPCRDMA_VERBS_ADDR").ok() else {
        return;
    };
    let ip: std::net::IpAddr = text
        .parse()
        .unwrap_or_else(|e| panic!("RPCRDMA_VERBS_ADDR={text:?}: {e}"));
    let (_server, addr) = rdma_server_on(
        VerbsProvider::new(),
        SocketAddr::new(ip, 0),
        server().0,
        RdmaConfig::default(),
    )
    .await;
    let transport = Arc::new(
        RdmaTransport::connect(Arc::new(VerbsProvider::new()), addr, RdmaConfig::default())
            .await
            .unwrap(),
    );
    let over_verbs = run_table(
        "RPC-over-RDMA v1 on verbs",
        &KvV1Client::new(Client::from_arc(transport.clone())),
    )
    .await;
    assert_eq!(transport.version(), 1);
    assert_eq!(over_tcp().await, over_verbs);
    println!(
        "kv table on verbs: {} calls, every result equal to TCP's",
        over_verbs.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_results_of_a_procedure_with_a_ddp_result_come_back_inline() {
    let (_server, addr) = rdma_server(RdmaConfig::default()).await;
    let transport = rdma_client(addr, RdmaConfig::default()).await;
    let client = KvV1Client::new(Client::from_arc(transport.clone()));
    let key = KvKey("k".to_string().into());
    client
        .kv_put(KvPutArgs {
            key: key.clone(),
            value: Bytes::from_static(&[7; 20]),
        })
        .await
        .unwrap();
    // The first GET offers a Write chunk of the default size (nothing is known of the
    // procedure's results yet); from then on its results are known to be small.
    client.kv_get(key.clone()).await.unwrap();
    let before = transport.stats();
    for _ in 0..10 {
        let KvGetRes::KvOk(found) = client.kv_get(key.clone()).await.unwrap() else {
            panic!("the key is there");
        };
        assert_eq!(found.value.len(), 20);
    }
    let after = transport.stats();
    assert_eq!(
        after.replies_received_inline - before.replies_received_inline,
        10
    );
    assert_eq!(
        after.replies_received_write_chunks,
        before.replies_received_write_chunks
    );
    assert_eq!(after.resent, before.resent, "no call needed sending again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_over_the_configured_ceiling_fails_naming_the_setting() {
    let (_server, addr) = rdma_server(RdmaConfig::default()).await;
    let ceiling = 2 * MIB;
    let transport = rdma_client(addr, RdmaConfig::default().max_reply_size(ceiling)).await;
    let client = KvV1Client::new(Client::from_arc(transport.clone()));
    let err = client.kv_blob(3 * MIB as u32).await.unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(
            err,
            rpcrdma::rpc::Error::Transport(rpcrdma::rpc::TransportError::ReplyTooLarge {
                needed: None,
                limit
            }) if limit == ceiling as u64
        ),
        "{err:?}"
    );
    assert!(text.contains("max_reply_size"), "{text}");
    // Within the ceiling it works, and the connection carries on.
    assert_eq!(client.kv_blob(MIB as u32).await.unwrap().data.len(), MIB);

    // Version 2 names the size the reply needs.
    let (_server, addr) = rdma_server(RdmaConfig::default().version_2(true)).await;
    let transport = rdma_client(
        addr,
        RdmaConfig::default()
            .version_2(true)
            .max_reply_size(ceiling),
    )
    .await;
    let client = KvV1Client::new(Client::from_arc(transport));
    let err = client.kv_blob(3 * MIB as u32).await.unwrap_err();
    assert!(
        matches!(
            err,
            rpcrdma::rpc::Error::Transport(rpcrdma::rpc::TransportError::ReplyTooLarge {
                needed: Some(n),
                ..
            }) if n == 3 * MIB as u64
        ),
        "{err:?}"
    );
}

/// A server of a fresh table with a value of `len` bytes put under `key`, a client of it, and
/// the TAKE of it (which removes it): the calls the client sent again, and how many removals
/// the server made, to show a procedure sent again with more room runs once.
async fn take_after_put(config: RdmaConfig, name: &str, len: usize) -> (u64, u64) {
    let (server, kv) = served(Arc::new(MemoryKv::new()));
    let (_server, addr) = rdma_server_of(server, config.clone()).await;
    let transport = rdma_client(addr, config).await;
    let client = KvV1Client::new(Client::from_arc(transport.clone()));
    let key = KvKey(name.to_string().into());
    let put = value(name, len);
    client
        .kv_put(KvPutArgs {
            key: key.clone(),
            value: put.clone(),
        })
        .await
        .unwrap();
    let KvGetRes::KvOk(taken) = client.kv_take(key).await.unwrap() else {
        panic!("the value is gone");
    };
    assert!(taken.value == put);
    assert!(kv.is_empty());
    (transport.stats().resent, kv.removals())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_sent_again_with_more_room_is_not_run_twice() {
    for version_2 in [false, true] {
        // Never seen a TAKE result: it is expected in the default Write chunk (1 MiB), does
        // not fit, and the call goes again with room. The server answers it from the result
        // it kept.
        let config = RdmaConfig::default().version_2(version_2);
        let (resent, removals) = take_after_put(config, "taken", 4 * MIB).await;
        assert_eq!(resent, 1, "version_2 {version_2}");
        assert_eq!(removals, 1, "version_2 {version_2}: TAKE ran once");
    }
}

/// Version 1's ERR_CHUNK says only that the chunks would not do: the call goes again with
/// sixteen times the room each time, up to the result's bound, rather than registering (and,
/// on a device, pinning) all of the bound for one reply. The result is kept between attempts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_1_call_is_sent_again_in_steps_and_run_once() {
    // The first TAKE offers the default Write chunk (1 MiB), then 16 MiB, then the bound.
    let (resent, removals) = take_after_put(RdmaConfig::default(), "stepped", 20 * MIB).await;
    assert_eq!(resent, 2, "two steps");
    assert_eq!(removals, 1, "TAKE ran once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_typed_method_takes_per_call_options() {
    use rpcrdma::rpc::CallOptions;
    let (_server, addr) = rdma_server(RdmaConfig::default()).await;
    let transport = rdma_client(addr, RdmaConfig::default()).await;
    let client = KvV1Client::new(Client::from_arc(transport.clone()));
    let key = KvKey("big".to_string().into());
    let put = value("big", 4 * MIB);
    client
        .kv_put_with(
            KvPutArgs {
                key: key.clone(),
                value: put.clone(),
            },
            CallOptions::new().timeout(std::time::Duration::from_secs(30)),
        )
        .await
        .unwrap();
    // The expected size: the result goes straight into a Write chunk large enough.
    let before = transport.stats();
    let KvGetRes::KvOk(found) = client
        .kv_get_with(key.clone(), CallOptions::new().reply_size(4 * MIB))
        .await
        .unwrap()
    else {
        panic!("the value is there");
    };
    assert!(found.value == put);
    assert_eq!(
        transport.stats().resent,
        before.resent,
        "sized right the first time"
    );
    // A registered buffer of the caller's: the result is received into it, no copy.
    let buffer = client.rpc().buffer(4 * MIB);
    let start = buffer.as_slice().as_ptr() as usize;
    let KvGetRes::KvOk(found) = client
        .kv_get_with(key.clone(), CallOptions::new().reply_buffer(buffer))
        .await
        .unwrap()
    else {
        panic!("the value is there");
    };
    assert!(found.value == put);
    assert_eq!(found.value.as_ptr() as usize, start, "read in place");
    // A deadline already past fails the call at once, as over TCP.
    let err = client
        .kv_null_with(CallOptions::new().deadline(std::time::Instant::now()))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), rpcrdma::rpc::ErrorKind::TimedOut, "{err:?}");
    let (_tcp_server, tcp) = tcp_client().await;
    let err = tcp
        .kv_null_with(CallOptions::new().deadline(std::time::Instant::now()))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), rpcrdma::rpc::ErrorKind::TimedOut, "{err:?}");
}

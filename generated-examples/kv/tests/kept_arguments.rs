//! A handler that keeps its arguments: MemoryKv's PUT stores the value's `Bytes` as it
//! arrived. Over RPC-over-RDMA that is the registered buffer the transport read it into; kept
//! without bound it would pin memory without bound. 10,000 PUTs of 1 MiB (`KV_KEPT_PUTS`
//! changes the count) against a server whose budgets are 64 MiB per connection and 128 MiB
//! in all: what the server lends never passes its budget, the values past half of it are
//! copied to ordinary memory (counted), the registrations stay few, and every value reads
//! back.

use std::sync::Arc;

use bytes::Bytes;
use kv_service::{kv_v1, KvGetRes, KvKey, KvPutArgs, KvStatus, KvV1Client, MemoryKv};
use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::{Client, Server};
use rpcrdma::transport::{serve, MemoryLimits, RdmaConfig, RdmaTransport};

const MIB: usize = 1 << 20;

fn key(i: usize) -> KvKey {
    KvKey(format!("value-{i}").into())
}

/// The value PUT under key `i`: its bytes say which it is.
fn value(i: usize) -> Bytes {
    let mut v = vec![(i % 251) as u8; MIB];
    v[..8].copy_from_slice(&(i as u64).to_be_bytes());
    Bytes::from(v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_keeping_every_put_argument_stays_under_its_memory_ceiling() {
    let puts: usize = std::env::var("KV_KEPT_PUTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let limits = MemoryLimits {
        per_connection: 64 * MIB,
        per_server: 128 * MIB,
    };
    let provider = SoftProvider::default();
    let listener = provider
        .listen("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let kv = Arc::new(MemoryKv::new());
    let mut builder = Server::builder();
    kv_v1::register_arc(&mut builder, kv.clone());
    let server = Arc::new(serve::<SoftProvider>(
        listener,
        builder.build(),
        RdmaConfig::default().memory(limits),
    ));
    tokio::spawn({
        let server = server.clone();
        async move { server.run().await }
    });
    let transport = Arc::new(
        RdmaTransport::connect(
            Arc::new(SoftProvider::default()),
            addr,
            RdmaConfig::default(),
        )
        .await
        .unwrap(),
    );
    let client = KvV1Client::new(Client::from_arc(transport.clone()));

    let mut most_lent = 0;
    for i in 0..puts {
        let status = client
            .kv_put(KvPutArgs {
                key: key(i),
                value: value(i),
            })
            .await
            .unwrap_or_else(|e| panic!("PUT {i}: {e}"));
        assert_eq!(status, KvStatus::KvOk);
        let lent = server.memory().used();
        most_lent = most_lent.max(lent);
        assert!(
            lent <= limits.per_server,
            "after PUT {i}: {lent} bytes lent, over the {} budget",
            limits.per_server
        );
    }
    assert_eq!(kv.len(), puts);
    let (stats, pool) = server.stats().into_iter().next().expect("the connection");
    assert_eq!(stats.calls_read_chunks, 0, "server side");
    assert!(
        pool.copied_out_bytes >= ((puts as u64).saturating_sub(64)) * MIB as u64,
        "values past half the budget are copied out: {pool:?}"
    );
    assert!(
        pool.live <= 64,
        "{} registrations alive for {puts} kept values",
        pool.live
    );
    eprintln!(
        "{puts} PUTs of 1 MiB kept: at most {} MiB lent (budget {} MiB), {} MiB copied out, {} registrations alive",
        most_lent >> 20,
        limits.per_server >> 20,
        pool.copied_out_bytes >> 20,
        pool.live
    );
    for i in 0..puts {
        match client.kv_get(key(i)).await.unwrap() {
            KvGetRes::KvOk(found) => assert!(found.value == value(i), "GET {i}: other bytes"),
            KvGetRes::Default { .. } => panic!("GET {i}: missing"),
        }
    }
}

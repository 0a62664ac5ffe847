//! A small result of a procedure whose result type has a DDP-eligible item, called through the
//! typed client with default settings, against the same call on a result type without one,
//! over RPC-over-RDMA version 1 on the software provider, measured in the same run.
//!
//! `kv.x`'s KV_GET returns `kv_get_res`, whose value is marked DDP-eligible (up to 64 MiB);
//! KV_PEEK returns `kv_peek_res`, the same value in a type without a DDP-eligible item bounded
//! to 1 KiB, so its reply always fits inline. Same argument, same 20-byte value: once the
//! client has seen KV_GET's results are small it expects them inline (no Write chunk, no RDMA
//! Write), so the marked call must cost what the plain one does. Target: at most 1.1x. Prints medians, their ranges and the median per-round ratio; `-- --check`
//! fails on a miss; `BENCH_QUICK=1` measures briefly; the figures are also written as records
//! for `scripts/bench`'s report.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bench_report::{Recorder, Target};
use bytes::Bytes;
use kv_service::{kv_v1, KvGetRes, KvKey, KvPeekRes, KvPutArgs, KvV1Client, MemoryKv};
use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::{Client, Server};
use rpcrdma::transport::{serve, RdmaConfig, RdmaTransport};

const GROUP: &str = "Small results of DDP-eligible result types (RPC-over-RDMA v1, soft provider)";
const LEN: usize = 20;

fn key() -> KvKey {
    KvKey("small".to_string().into())
}

async fn connect() -> (KvV1Client, Arc<RdmaTransport<SoftProvider>>) {
    let provider = Arc::new(SoftProvider::default());
    let listener = provider
        .listen("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let mut builder = Server::builder();
    kv_v1::register(&mut builder, MemoryKv::new());
    let listener = serve::<SoftProvider>(listener, builder.build(), RdmaConfig::default());
    tokio::spawn(async move { listener.run().await });
    let transport = Arc::new(
        RdmaTransport::connect(provider, addr, RdmaConfig::default())
            .await
            .unwrap(),
    );
    let client = KvV1Client::new(Client::from_arc(transport.clone()));
    client
        .kv_put(KvPutArgs {
            key: key(),
            value: Bytes::from(vec![7; LEN]),
        })
        .await
        .unwrap();
    (client, transport)
}

/// `calls` calls of KV_GET (`marked`) or KV_PEEK, in a task of the runtime.
async fn run(client: &KvV1Client, marked: bool, calls: usize) -> Duration {
    let client = client.clone();
    tokio::spawn(async move {
        let start = Instant::now();
        for _ in 0..calls {
            let len = if marked {
                match client.kv_get(key()).await.unwrap() {
                    KvGetRes::KvOk(found) => found.value.len(),
                    KvGetRes::Default { .. } => 0,
                }
            } else {
                match client.kv_peek(key()).await.unwrap() {
                    KvPeekRes::KvOk(value) => value.len(),
                    KvPeekRes::Default { .. } => 0,
                }
            };
            assert_eq!(len, LEN);
        }
        start.elapsed()
    })
    .await
    .expect("the measured calls do not panic")
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() -> ExitCode {
    let check = std::env::args().any(|a| a == "--check")
        || std::env::var("BENCH_CHECK").is_ok_and(|v| v == "1");
    let quick = bench_report::quick();
    let (rounds, calls) = if quick { (5, 1000) } else { (15, 4000) };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (mut marked, mut plain, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let inline = rt.block_on(async {
        let mut inline = true;
        for round in 0..rounds {
            // A fresh connection each round: the client learns the procedure's sizes anew.
            let (client, transport) = connect().await;
            // Warm: pools, registrations, and the first KV_GET, which offers a Write chunk of
            // the default size since nothing is known of its results yet.
            run(&client, true, 10).await;
            run(&client, false, 10).await;
            let before = transport.stats();
            let (tm, tp) = if round % 2 == 0 {
                let tm = run(&client, true, calls).await;
                (tm, run(&client, false, calls).await)
            } else {
                let tp = run(&client, false, calls).await;
                (run(&client, true, calls).await, tp)
            };
            let after = transport.stats();
            // Every measured call of either kind came back inline.
            inline &= after.replies_received_inline - before.replies_received_inline
                == 2 * calls as u64
                && after.replies_received_write_chunks == before.replies_received_write_chunks;
            let per = |t: Duration| t.as_secs_f64() * 1e6 / calls as f64;
            let (m, p) = (per(tm), per(tp));
            marked.push(m);
            plain.push(p);
            ratios.push(m / p);
        }
        inline
    });
    let (lo, hi) = ratios
        .iter()
        .fold((f64::MAX, f64::MIN), |(l, h), r| (l.min(*r), h.max(*r)));
    let (mm, mp, r) = (median(&mut marked), median(&mut plain), median(&mut ratios));
    let target = Target::at_most(1.1);
    let met = target.holds(r) && inline;
    println!("{GROUP}: {rounds} rounds of {calls} calls, alternating which kind goes first");
    println!(
        "  {LEN}-byte result, marked {mm:.2} us, plain {mp:.2} us, marked/plain {r:.3} [{lo:.3} .. {hi:.3}]  target {target}: {}{}",
        if met { "met" } else { "MISSED" },
        if inline { "" } else { " (some replies did not come inline)" }
    );
    let mut rec = Recorder::new("small_results");
    rec.figure(
        GROUP,
        "20-byte value, DDP-eligible type (KV_GET, per call)",
        mm,
        "us",
    )
    .baseline(
        "the same value, type without a DDP-eligible item (KV_PEEK)",
        mp,
    )
    .ratio(r, "marked / plain, median of the rounds")
    .ratio_range(lo, hi)
    .target(target);
    rec.note(
        GROUP,
        format!("{rounds} alternating rounds of {calls} calls in a task of a two-worker runtime, a fresh connection each round (warmed with 10 calls of each); both ends in this process; every measured reply came inline: {inline}"),
    );
    if let Err(e) = rec.save() {
        eprintln!("writing the records: {e}");
    }
    if check && !met {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

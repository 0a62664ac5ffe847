//! Load: many clients, each with its own connection, making mixed calls against one server at
//! once, every result checked, latency and memory measured.
//!
//! Used by `cargo run --release -p rpcrdma --example transport-load` (64 clients x 10,000
//! calls by default) and, reduced, by `cargo test -p rpcrdma --test transport_load`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::program::{self, pattern_of, EchoArgs, TestversClient};
use crate::rdma::{Listener, Provider};
use crate::rpc::{CallOptions, Client};
use crate::transport::{serve, RdmaConfig, RdmaTransport};

/// What a load run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadConfig {
    /// Clients, each on its own connection, all calling at once.
    pub clients: usize,
    /// Calls each client makes, one after another.
    pub calls_per_client: usize,
    /// Size of the bulk READ and WRITE calls.
    pub bulk_size: usize,
}

impl Default for LoadConfig {
    fn default() -> Self {
        LoadConfig {
            clients: 64,
            calls_per_client: 10_000,
            bulk_size: 1 << 20,
        }
    }
}

/// Calls each client makes before the measured ones (two rounds of the mix).
const WARM_UP: usize = 20;

/// The kinds of call in the mix, in the order of [`LoadReport::latency`].
pub const KINDS: [&str; 4] = ["NULL", "ECHO 1 KiB", "READ bulk", "WRITE bulk"];

/// The kind of the `i`th call of a client: of every ten, four NULL, four small echoes, one
/// bulk read (a Write chunk) and one bulk write (a Read chunk).
fn kind(i: usize) -> usize {
    match i % 10 {
        0..=3 => 0,
        4..=7 => 1,
        8 => 2,
        _ => 3,
    }
}

/// Latency percentiles of one kind of call, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Percentiles {
    /// Calls measured.
    pub count: usize,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Slowest.
    pub max: f64,
}

/// What a load run measured (after every client made `WARM_UP` calls, not counted).
#[derive(Debug, Clone, PartialEq)]
pub struct LoadReport {
    /// Calls completed with the right result.
    pub ok: u64,
    /// Calls that failed or came back wrong (each described in `problems`).
    pub failed: u64,
    /// The first few failures, described.
    pub problems: Vec<String>,
    /// Latency per kind of call, in [`KINDS`] order.
    pub latency: [Percentiles; 4],
    /// Live heap bytes when the first thousand calls had completed, and when all but the last
    /// thousand had (from the caller's allocator counter).
    pub heap: (i64, i64),
    /// Wall time of the whole run.
    pub elapsed: Duration,
}

impl LoadReport {
    /// The report as lines of text.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "{} calls ok, {} failed, in {:.1} s ({:.0} calls/s)",
            self.ok,
            self.failed,
            self.elapsed.as_secs_f64(),
            self.ok as f64 / self.elapsed.as_secs_f64()
        )];
        for (name, p) in KINDS.iter().zip(&self.latency) {
            out.push(format!(
                "  {name:<12} {:>7} calls  p50 {:>9.1} us  p99 {:>9.1} us  max {:>9.1} us",
                p.count, p.p50, p.p99, p.max
            ));
        }
        out.push(format!(
            "  heap after the first thousand calls {} bytes, before the last thousand {} bytes ({:+})",
            self.heap.0,
            self.heap.1,
            self.heap.1 - self.heap.0
        ));
        out.extend(self.problems.iter().map(|p| format!("  problem: {p}")));
        out
    }
}

/// Runs the load against a server on `provider` at `listen` (port 0 picks one). `heap` reads
/// the caller's count of live heap bytes (a counting global allocator), or returns 0.
pub async fn run_load<P: Provider + Clone>(
    provider: P,
    listen: SocketAddr,
    config: LoadConfig,
    heap: fn() -> i64,
) -> Result<LoadReport, String> {
    let provider = Arc::new(provider);
    let listener = provider.listen(listen).await.map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let server_config = RdmaConfig::default().credits(32);
    let listener = Arc::new(serve::<P>(listener, program::server(), server_config));
    let accept = tokio::spawn({
        let l = listener.clone();
        async move {
            let _ = l.run().await;
        }
    });
    let mut clients = Vec::with_capacity(config.clients);
    for _ in 0..config.clients {
        let t = RdmaTransport::connect(
            provider.clone(),
            addr,
            RdmaConfig::default().timeout(Some(Duration::from_secs(60))),
        )
        .await
        .map_err(|e| format!("connecting: {e}"))?;
        clients.push(TestversClient::new(Client::new(t)));
    }

    // Warm up: every client makes each kind of call a few times at once, so connection pools
    // and buffers reach the size this concurrency needs before anything is measured.
    let warm: Vec<_> = clients
        .iter()
        .enumerate()
        .map(|(n, client)| {
            let client = client.clone();
            tokio::spawn(async move {
                for i in 0..WARM_UP {
                    one_call(&client, kind(i), n, i, config.bulk_size).await?;
                }
                Ok::<(), String>(())
            })
        })
        .collect();
    for w in warm {
        w.await
            .map_err(|e| format!("a client panicked: {e}"))?
            .map_err(|e| format!("warming up: {e}"))?;
    }

    let total = (config.clients * config.calls_per_client) as u64;
    let done = Arc::new(AtomicU64::new(0));
    let heap_first = Arc::new(AtomicI64::new(i64::MIN));
    let heap_last = Arc::new(AtomicI64::new(i64::MIN));
    let start = Instant::now();
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(n, client)| {
            let (done, first, last) = (done.clone(), heap_first.clone(), heap_last.clone());
            tokio::spawn(async move {
                // Sized up front: the measurement must not grow the heap it measures.
                let mut times: [Vec<u32>; 4] =
                    std::array::from_fn(|_| Vec::with_capacity(config.calls_per_client));
                let mut problems = Vec::new();
                let mut ok = 0u64;
                for i in 0..config.calls_per_client {
                    let k = kind(i);
                    let t0 = Instant::now();
                    match one_call(&client, k, n, i, config.bulk_size).await {
                        Ok(()) => {
                            ok += 1;
                            times[k].push(t0.elapsed().as_micros().min(u32::MAX as u128) as u32);
                        }
                        Err(e) => problems.push(format!("client {n} call {i}: {e}")),
                    }
                    let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                    if d == 1000.min(total) {
                        first.store(heap(), Ordering::Relaxed);
                    }
                    if d == total.saturating_sub(1000).max(1) {
                        last.store(heap(), Ordering::Relaxed);
                    }
                }
                (ok, problems, times)
            })
        })
        .collect();
    let mut ok = 0;
    let mut problems = Vec::new();
    let mut all: [Vec<u32>; 4] = Default::default();
    for t in tasks {
        let (o, p, times) = t.await.map_err(|e| format!("a client panicked: {e}"))?;
        ok += o;
        problems.extend(p);
        for (a, t) in all.iter_mut().zip(times) {
            a.extend(t);
        }
    }
    let elapsed = start.elapsed();
    accept.abort();
    let latency = all.map(|mut v| {
        v.sort_unstable();
        let at = |q: f64| {
            v.get(((v.len() as f64 * q) as usize).min(v.len().saturating_sub(1)))
                .map_or(0.0, |&x| x as f64)
        };
        Percentiles {
            count: v.len(),
            p50: at(0.5),
            p99: at(0.99),
            max: v.last().map_or(0.0, |&x| x as f64),
        }
    });
    let failed = problems.len() as u64;
    problems.truncate(10);
    Ok(LoadReport {
        ok,
        failed,
        problems,
        latency,
        heap: (
            heap_first.load(Ordering::Relaxed),
            heap_last.load(Ordering::Relaxed),
        ),
        elapsed,
    })
}

/// One call of kind `k`, its result checked.
async fn one_call(
    client: &TestversClient,
    k: usize,
    n: usize,
    i: usize,
    bulk: usize,
) -> Result<(), String> {
    let tag = (n * 1_000_003 + i) as u32;
    match k {
        0 => client.test_null().await.map_err(|e| e.to_string()),
        1 => {
            let data = pattern_of(1024, (i % 8) as u8);
            let r = client
                .test_echo(EchoArgs {
                    tag,
                    data: data.clone(),
                })
                .await
                .map_err(|e| e.to_string())?;
            if r.tag != tag || r.data != data {
                return Err("ECHO came back with another call's result".into());
            }
            Ok(())
        }
        2 => {
            // Into a buffer the client registered: no copy on either side.
            let buffer = client.rpc().buffer(bulk);
            let r = client
                .rpc()
                .call_with::<program::testvers::TestFill>(
                    &(bulk as u32),
                    CallOptions::new().reply_buffer(buffer),
                )
                .await
                .map_err(|e| e.to_string())?;
            if r.tag != bulk as u32 || r.data != pattern_of(bulk, 5) {
                return Err("READ came back with the wrong bytes".into());
            }
            Ok(())
        }
        _ => {
            let data = pattern_of(bulk, (i % 8) as u8);
            let expected = program::word_sum(&data);
            let sum = client
                .test_sum(EchoArgs { tag, data })
                .await
                .map_err(|e| e.to_string())?;
            if sum != expected {
                return Err("WRITE arrived with other bytes".into());
            }
            Ok(())
        }
    }
}

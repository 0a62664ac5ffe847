//! RPC-over-RDMA under injected faults: a client on a provider that drops, delays and reorders
//! completions, fails registrations and disconnects at a chosen operation
//! (`rpcrdma::rdma::faults`), seeded and replayable.
//!
//! For every seed: every call either completes with the right result or fails with a clear
//! error within its timeout (none is lost, none answered twice: a call's future resolves once),
//! the server keeps serving a well-behaved client, and once everything is dropped no
//! registration is left behind.
//!
//! `FAULT_SEEDS=N` runs seeds 0..N (default 16); `FAULT_SEED=S` replays one seed;
//! `FAULT_VERBOSE=1` prints each call that failed and why.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rpcrdma::rdma::faults::{FaultPlan, FaultyProvider};
use rpcrdma::rdma::soft::{self, SoftProvider};
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::{self, Client, TransportError};
use rpcrdma::transport::conformance::program::{self, pattern_of, EchoArgs, TestversClient};
use rpcrdma::transport::{serve, RdmaConfig, RdmaTransport};

/// How long a call may wait for its reply before it fails with a timeout.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);

fn seeds() -> Vec<u64> {
    if let Some(seed) = std::env::var("FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return vec![seed];
    }
    let n = std::env::var("FAULT_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16);
    (0..n).collect()
}

/// An error the caller can act on: the transport's own, or a server's reply status.
fn clear(e: &rpc::Error) -> bool {
    match e {
        rpc::Error::Transport(t) => matches!(
            t,
            TransportError::TimedOut(_)
                | TransportError::Closed
                | TransportError::Other(_)
                | TransportError::RdmaChunk
                | TransportError::Protocol(_)
        ),
        e => e.is_reply(),
    }
}

/// One call of a mix, checked: `Ok(true)` done right, `Ok(false)` failed clearly.
async fn call(client: &TestversClient, i: u32) -> Result<bool, String> {
    let outcome = match i % 4 {
        0 => client.test_null().await.map(|()| true),
        1 => {
            let data = pattern_of(64 << 10, (i % 8) as u8);
            client
                .test_echo(EchoArgs {
                    tag: i,
                    data: data.clone(),
                })
                .await
                .map(|r| r.tag == i && r.data == data)
        }
        2 => client
            .test_fill(100_000)
            .await
            .map(|r| r.data == pattern_of(100_000, 5)),
        _ => {
            let data = pattern_of(200_000, 2);
            client
                .test_write(EchoArgs { tag: i, data })
                .await
                .map(|n| n == 200_000)
        }
    };
    match outcome {
        Ok(true) => Ok(true),
        Ok(false) => Err(format!("call {i} came back with the wrong result")),
        Err(e) if clear(&e) => {
            if std::env::var_os("FAULT_VERBOSE").is_some() {
                eprintln!("call {i}: {e}");
            }
            Ok(false)
        }
        Err(e) => Err(format!("call {i} failed unclearly: {e:?}")),
    }
}

async fn connect_faulty(
    provider: Arc<FaultyProvider<SoftProvider>>,
    addr: SocketAddr,
) -> Option<TestversClient> {
    // An injected registration failure may refuse a connection: that is a clear error too.
    for _ in 0..5 {
        let config = RdmaConfig::default().timeout(Some(CALL_TIMEOUT));
        if let Ok(t) = RdmaTransport::connect(provider.clone(), addr, config).await {
            return Some(TestversClient::new(Client::new(t)));
        }
    }
    None
}

async fn run_seed(seed: u64) -> Result<String, String> {
    let plan = FaultPlan::random(seed);
    let server_provider = SoftProvider::default();
    let listener = server_provider
        .listen("127.0.0.1:0".parse().unwrap())
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let listener = Arc::new(serve::<SoftProvider>(
        listener,
        program::server(),
        RdmaConfig::default(),
    ));
    let accept = tokio::spawn({
        let l = listener.clone();
        async move { l.run().await }
    });

    let faulty = Arc::new(FaultyProvider::new(SoftProvider::default(), plan.clone()));
    let mut ok = 0;
    let mut failed = 0;
    if let Some(client) = connect_faulty(faulty.clone(), addr).await {
        let tasks: Vec<_> = (0..48u32)
            .map(|i| {
                let c = client.clone();
                tokio::spawn(async move { call(&c, i).await })
            })
            .collect();
        for t in tasks {
            match t.await.map_err(|e| format!("a call panicked: {e}"))?? {
                true => ok += 1,
                false => failed += 1,
            }
        }
    }

    // The server still serves a client that behaves.
    let good = TestversClient::new(Client::new(
        RdmaTransport::connect(
            Arc::new(SoftProvider::default()),
            addr,
            RdmaConfig::default().timeout(Some(CALL_TIMEOUT)),
        )
        .await
        .map_err(|e| format!("the good client could not connect: {e}"))?,
    ));
    for i in 0..4 {
        let data = pattern_of(100_000, i);
        let r = good
            .test_echo(EchoArgs {
                tag: i as u32,
                data: data.clone(),
            })
            .await
            .map_err(|e| format!("the server stopped serving: {e}"))?;
        if r.data != data {
            return Err("the good client got the wrong bytes".into());
        }
    }
    accept.abort();
    let counts = faulty.counts();
    use std::sync::atomic::Ordering::Relaxed;
    Ok(format!(
        "seed {seed}: {ok} ok, {failed} failed clearly; faults: {} dropped, {} delayed, {} \
         registrations failed, {} disconnects ({plan:?})",
        counts.dropped.load(Relaxed),
        counts.delayed.load(Relaxed),
        counts.failed_registrations.load(Relaxed),
        counts.disconnects.load(Relaxed),
    ))
}

#[test]
fn every_call_completes_right_or_fails_clearly_under_faults() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for seed in seeds() {
        let replay =
            format!("replay: FAULT_SEED={seed} cargo test -p rpcrdma --test transport_faults");
        let before = soft::live_registrations();
        let outcome = rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(60), run_seed(seed)).await
        });
        match outcome {
            Ok(Ok(summary)) => println!("{summary}"),
            Ok(Err(e)) => panic!("seed {seed}: {e} ({replay})"),
            Err(_) => panic!("seed {seed}: a call was lost (no outcome within 60 s) ({replay})"),
        }
        // Everything of the seed is dropped: its connections wind down, and with them every
        // registration (give their tasks a moment).
        let mut left = soft::live_registrations();
        for _ in 0..100 {
            if left <= before {
                break;
            }
            rt.block_on(async { tokio::time::sleep(Duration::from_millis(50)).await });
            left = soft::live_registrations();
        }
        assert!(
            left <= before,
            "seed {seed}: {} registrations left behind ({replay})",
            left - before
        );
    }
}

//! The transport conformance suite (`rpcrdma::transport::conformance`) over the software
//! iWARP provider on loopback: RPC-over-RDMA version 1 end to end, a generated client calling
//! a generated server, every way a message can move, and the answers a lying peer gets.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rpcrdma::rdma::conformance::Harness;
use rpcrdma::rdma::soft::{MpaConfig, RnicKind, SoftConfig, SoftProvider};
use rpcrdma::rpc::Client;
use rpcrdma::transport::conformance::program::{pattern, EchoArgs, TestversClient};
use rpcrdma::transport::conformance::{run_case, Case};

#[path = "support/served.rs"]
mod served;
use served::{two_workers, Served};

fn harness(mpa: MpaConfig) -> Harness<SoftProvider> {
    Harness::new(
        SoftProvider::new(SoftConfig {
            mpa,
            ..SoftConfig::default()
        }),
        "127.0.0.1:0".parse().unwrap(),
    )
}

/// MPA revision 2 with CRCs: the provider's default.
mod crc {
    use super::*;
    rpcrdma::transport_conformance_tests!(harness(MpaConfig::default()));
}

/// Markers and CRCs, RDMAC framing: the transport does not care.
mod markers {
    use super::*;
    rpcrdma::transport_conformance_tests!(harness(MpaConfig {
        kind: RnicKind::IetfPermissive,
        markers: true,
        crc: true,
        revision: 2,
    }));
}

/// A provider that cannot rekey, as the verbs provider on a device without memory windows
/// (Linux siw; `SoftConfig::rekey` off): every buffer the peer must reach is a registration
/// for that one use, revoked when the call is done; the rest are pooled without remote
/// rights; no Send With Invalidate is offered.
mod without_rekey {
    use super::*;
    rpcrdma::transport_conformance_tests!(Harness::new(
        SoftProvider::new(SoftConfig {
            rekey: false,
            ..SoftConfig::default()
        }),
        "127.0.0.1:0".parse().unwrap(),
    )
    .without_remote_invalidation());
}

/// The servers take every connection's receives from one shared receive queue, credits
/// granted from what it holds.
mod shared_receive_queue {
    use super::*;
    rpcrdma::transport_conformance_tests!(
        harness(MpaConfig::default()).with_shared_receive_queue(64)
    );
}

/// The name of the threads that run [`no_hostile_case_makes_anything_panic`]'s cases.
const HOSTILE_THREADS: &str = "hostile-case";

/// Every hostile case once more, with every panic recorded (tokio catches a panicking task, so
/// a test would not see it otherwise): none may panic.
///
/// The panic hook is the process's, and the other tests of this file run in the same process
/// at the same time: it records only panics on this test's own threads, its runtime's workers
/// (named [`HOSTILE_THREADS`]) and the software provider's flusher thread (one per process).
/// Each case runs on a runtime of its own, dropped before the case's record is read, so that a
/// panic in a task the case left behind is charged to that case. A failure names the case and
/// what it waited for (the case's own error) or each panic (thread, place, message).
#[test]
fn no_hostile_case_makes_anything_panic() {
    let panics: Arc<Mutex<Vec<String>>> = Arc::default();
    let previous = std::panic::take_hook();
    let record = panics.clone();
    let test_thread = std::thread::current().id();
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("");
        if thread.id() == test_thread || name == HOSTILE_THREADS || name == "soft-rdma-flusher" {
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_default();
            let place = info.location().map(|l| l.to_string()).unwrap_or_default();
            record
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(format!("thread '{name}' at {place}: {message}"));
        }
        previous(info);
    }));
    let put = harness(MpaConfig::default());
    for &case in Case::ALL.iter().filter(|c| c.name().starts_with("Hostile")) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(HOSTILE_THREADS)
            .enable_all()
            .build()
            .unwrap();
        let outcome = rt.block_on(run_case(&put, case));
        // Every task the case spawned ends here, panicking or not.
        drop(rt);
        let seen = std::mem::take(&mut *panics.lock().unwrap_or_else(|e| e.into_inner()));
        if let Err(e) = outcome {
            panic!("{}: {e}", case.name());
        }
        assert!(seen.is_empty(), "{}: {seen:#?}", case.name());
    }
}

/// A client dropped after its runtime's `block_on` returned (as a bench's `main` does) closes
/// its connection without a runtime to spawn on, and does not panic.
#[test]
fn a_client_dropped_outside_its_runtime_does_not_panic() {
    let rt = two_workers();
    let client = rt.block_on(async {
        let client = Served::start().await.client();
        client.test_null().await.unwrap();
        client
    });
    drop(client);
    drop(rt);
}

/// A connection is listed by its listener before it serves anything: the reply to a call made
/// the moment a connection opens is already in the listener's counters when the call returns
/// (the file-service example reads how each call moved from them). Forty connections open at
/// once, so that connections start while others are serving. When a connection was listed only
/// after it started, the gap was a few instructions wide: this guards the contract, it does not
/// reproduce that race on demand.
#[test]
fn the_first_call_on_a_new_connection_shows_in_the_listener_counters() {
    two_workers().block_on(async {
        let served = Arc::new(Served::start().await);
        let returned = Arc::new(AtomicUsize::new(0));
        let mut first_calls = tokio::task::JoinSet::new();
        for _ in 0..40 {
            let (served, returned) = (served.clone(), returned.clone());
            first_calls.spawn(async move {
                let transport = served.connect().await;
                TestversClient::new(Client::from_arc(transport.clone()))
                    .test_null()
                    .await
                    .unwrap();
                let returned = returned.fetch_add(1, Ordering::SeqCst) + 1;
                let answered = served
                    .listener
                    .stats()
                    .iter()
                    .filter(|(s, _)| s.replies_inline > 0)
                    .count();
                assert!(
                    answered >= returned,
                    "{returned} first calls returned, {answered} listed connections answered one"
                );
                transport
            });
        }
        // Every connection stays open until all have checked.
        let open = first_calls.join_all().await;
        assert_eq!(open.len(), 40);
    });
}

/// A shutdown with nothing left to answer (the conformance case `Shutdown` has a call running):
/// idle connections close at once and `run` returns `Ok`.
#[test]
fn shutdown_with_only_idle_connections_ends_at_once_and_stops_run() {
    two_workers().block_on(async {
        let mut served = Served::start().await;
        let mut clients = vec![served.client()];
        for _ in 1..3 {
            clients.push(TestversClient::new(Client::from_arc(
                served.connect().await,
            )));
        }
        for client in &clients {
            client.test_null().await.unwrap();
        }
        assert_eq!(served.listener.stats().len(), 3);

        tokio::time::timeout(Duration::from_secs(10), served.listener.shutdown())
            .await
            .expect("idle connections close at once");
        let run = tokio::time::timeout(Duration::from_secs(10), &mut served.running)
            .await
            .expect("run returns after shutdown");
        assert!(matches!(run, Ok(Ok(()))), "{run:?}");

        assert!(served.listener.stats().is_empty());
        for client in &clients {
            assert!(client.test_null().await.is_err());
        }
        let again = served.try_connect().await;
        assert!(again.is_err(), "the listening endpoint is closed");
    });
}

/// A shutdown in the middle of load: eight connections with four callers each, making echoes
/// (Read chunks out, Write chunks back), registered fills and calls whose handlers wait. Every
/// call ends, answered with its own result or failed once its connection closed (none hangs,
/// nothing panics), and the shutdown completes.
#[test]
fn shutdown_under_load_ends_every_call_and_completes() {
    two_workers().block_on(async {
        let served = Served::start().await;
        let mut transports = vec![served.transport.clone()];
        for _ in 1..8 {
            transports.push(served.connect().await);
        }
        let answered = Arc::new(AtomicUsize::new(0));
        let mut callers = tokio::task::JoinSet::new();
        for (c, transport) in transports.iter().enumerate() {
            for lane in 0..4u32 {
                let client = TestversClient::new(Client::from_arc(transport.clone()));
                let answered = answered.clone();
                callers.spawn(async move {
                    let tag = c as u32 * 4 + lane;
                    let data = pattern(65_536, tag as u8);
                    for i in 0u32.. {
                        let ended = match i % 3 {
                            0 => client
                                .test_echo(EchoArgs {
                                    tag,
                                    data: data.clone(),
                                })
                                .await
                                .map(|r| assert!(r.tag == tag && r.data == data, "not its echo")),
                            1 => client
                                .test_fill(65_536)
                                .await
                                .map(|r| assert_eq!(r.data.len(), 65_536)),
                            _ => client.test_sleep(5).await.map(|ms| assert_eq!(ms, 5)),
                        };
                        if ended.is_err() {
                            return i;
                        }
                        answered.fetch_add(1, Ordering::SeqCst);
                    }
                    unreachable!()
                });
            }
        }
        while answered.load(Ordering::SeqCst) < 300 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::time::timeout(Duration::from_secs(30), served.listener.shutdown())
            .await
            .expect("shutdown completes under load");
        let ended = tokio::time::timeout(Duration::from_secs(30), callers.join_all())
            .await
            .expect("every caller's last call ends");
        assert_eq!(ended.len(), 32);
        assert!(served.listener.stats().is_empty());
    });
}

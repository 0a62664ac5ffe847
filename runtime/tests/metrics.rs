//! The `metrics` feature: a recorder installed by the application (here `metrics-util`'s
//! debugging recorder, where a Prometheus exporter would be) sees the calls, connections and
//! bytes of ONC RPC over TCP under the documented names and labels
//! (`rpc::observe::metric`).
#![cfg(feature = "metrics")]

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::{CompositeKey, MetricKind};
use rpcrdma::rpc::observe::metric;
use rpcrdma::rpc::tcp::{TcpConfig, TcpServer};
use rpcrdma::transport::conformance::program::{server, EchoArgs, TestversClient};

type Snapshot = Vec<(
    CompositeKey,
    Option<metrics::Unit>,
    Option<metrics::SharedString>,
    DebugValue,
)>;

/// The value of counter `name` whose labels include every one of `labels`, summed.
fn counter(snapshot: &Snapshot, name: &str, labels: &[(&str, &str)]) -> u64 {
    snapshot
        .iter()
        .filter(|(key, ..)| key.kind() == MetricKind::Counter && key.key().name() == name)
        .filter(|(key, ..)| {
            labels.iter().all(|(k, v)| {
                key.key()
                    .labels()
                    .any(|label| label.key() == *k && label.value() == *v)
            })
        })
        .map(|(.., value)| match value {
            DebugValue::Counter(n) => *n,
            other => panic!("{name} is not a counter: {other:?}"),
        })
        .sum()
}

#[test]
fn a_recorder_sees_calls_connections_and_bytes_under_their_names() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        // One thread: the runtime's tasks (client, server) all record to this recorder.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let tcp = TcpServer::bind("127.0.0.1:0", server(), TcpConfig::new())
                .await
                .unwrap();
            let rpc = rpcrdma::rpc::tcp::connect(tcp.local_addr()).await.unwrap();
            let client = TestversClient::new(rpc);
            client.test_null().await.unwrap();
            for tag in 0..3 {
                let data = bytes::Bytes::from_static(b"data");
                client.test_echo(EchoArgs { tag, data }).await.unwrap();
            }
            drop(client);
            tcp.shutdown().await;
        });
    });
    let snapshot: Snapshot = snapshotter.snapshot().into_vec();
    let program = 0x2000_0077u32.to_string();
    for side in ["client", "server"] {
        let ok = [
            ("side", side),
            ("transport", "tcp"),
            ("program", program.as_str()),
            ("procedure", "1"),
            ("status", "ok"),
        ];
        assert_eq!(counter(&snapshot, metric::CALLS_TOTAL, &ok), 3, "{side}");
        let null = [("side", side), ("procedure", "0"), ("status", "ok")];
        assert_eq!(counter(&snapshot, metric::CALLS_TOTAL, &null), 1, "{side}");
        let conns = [("side", side), ("transport", "tcp")];
        assert_eq!(
            counter(&snapshot, metric::CONNECTIONS_TOTAL, &conns),
            1,
            "{side}"
        );
        assert_eq!(
            counter(&snapshot, metric::CONNECTIONS_CLOSED_TOTAL, &conns),
            1,
            "{side}"
        );
    }
    // What one end sent, the other received.
    let bytes = |side, direction| {
        counter(
            &snapshot,
            metric::BYTES_TOTAL,
            &[("side", side), ("direction", direction)],
        )
    };
    assert!(bytes("client", "sent") > 0);
    assert_eq!(bytes("client", "sent"), bytes("server", "received"));
    assert_eq!(bytes("server", "sent"), bytes("client", "received"));
    // The durations are histograms with one sample per call.
    let durations: usize = snapshot
        .iter()
        .filter(|(key, ..)| key.key().name() == metric::CALL_DURATION)
        .map(|(.., value)| match value {
            DebugValue::Histogram(samples) => samples.len(),
            other => panic!("not a histogram: {other:?}"),
        })
        .sum();
    assert_eq!(durations, 8, "four calls, two ends");
}

//! NULL round-trip latency over loopback TCP: our client and server against libtirpc's
//! (rpcgen C programs), measured in the same run, one call at a time on one connection.
//!
//! Prints the mean per call for every pairing and the ratio ours/libtirpc (target: at most 1).
//! `cargo bench -p tirpc-interop --bench rpc_tcp`; `RPC_TCP_BENCH_CALLS` sets the number of
//! calls (default 20000, 5000 with `BENCH_QUICK=1`). The ratios are also written as records
//! for `scripts/bench`'s report (`bench_report`).

use std::net::{Ipv4Addr, SocketAddr};
use std::process::Command;
use std::time::Instant;

use bench_report::Recorder;

use rpcrdma::rpc::tcp::{TcpConfig, TcpServer, TcpTransport};
use rpcrdma::rpc::{Client, Server};
use tirpc_interop::c::{self, CPrograms, CServer};
use tirpc_interop::interop::interop_prog::interop_vers::InteropNull;
use tirpc_interop::service;

/// The C client's own mean, in µs, against `port`.
fn c_client_mean_us(programs: &CPrograms, port: u16, calls: u64) -> f64 {
    let out = Command::new(&programs.client)
        .args([port.to_string(), "bench".into(), calls.to_string()])
        .output()
        .expect("run the C client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "C client failed: {stdout}");
    stdout
        .trim()
        .strip_prefix("mean_us=")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("unexpected C client output {stdout:?}"))
}

/// Our client's mean, in µs, against `addr`.
async fn rust_client_mean_us(addr: SocketAddr, calls: u64) -> f64 {
    let client = Client::new(TcpTransport::connect(addr, TcpConfig::new()).await.unwrap());
    for _ in 0..calls / 10 + 1 {
        client.call::<InteropNull>(&()).await.unwrap();
    }
    let start = Instant::now();
    for _ in 0..calls {
        client.call::<InteropNull>(&()).await.unwrap();
    }
    start.elapsed().as_secs_f64() * 1e6 / calls as f64
}

fn our_server() -> Server {
    let mut builder = Server::builder();
    service::register(&mut builder, service::Reference);
    builder.build()
}

/// The best of `ROUNDS` interleaved rounds is reported: other load on the machine only ever
/// adds time, and interleaving exposes every pairing to the same conditions.
const ROUNDS: usize = 5;

#[derive(Default)]
struct Best(Option<f64>);

impl Best {
    fn add(&mut self, v: f64) {
        self.0 = Some(self.0.map_or(v, |b| b.min(v)));
    }
    fn get(&self) -> f64 {
        self.0.unwrap_or(f64::NAN)
    }
}

fn main() {
    let programs = c::programs().unwrap_or_else(|why| panic!("{why}"));
    let calls: u64 = std::env::var("RPC_TCP_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if bench_report::quick() { 5_000 } else { 20_000 });
    let mut rec = Recorder::new("rpc_tcp");
    let group = "ONC RPC: NULL round trip";
    let c_server = CServer::start(&programs).expect("start the C server");
    let c_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, c_server.port()));
    let mut baseline = Best::default();
    println!("NULL round trip over loopback TCP, best of {ROUNDS} rounds of {calls} calls");
    for (name, runtime) in [
        (
            "current-thread runtime",
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
        ),
        (
            "multi-thread runtime (2 workers)",
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap(),
        ),
    ] {
        let (mut to_c, mut from_c, mut ours) = (Best::default(), Best::default(), Best::default());
        runtime.block_on(async {
            let server = TcpServer::bind("127.0.0.1:0", our_server(), TcpConfig::new())
                .await
                .unwrap();
            let port = server.local_addr().port();
            for _ in 0..ROUNDS {
                let p = programs.clone();
                let c_port = c_server.port();
                baseline.add(
                    tokio::task::spawn_blocking(move || c_client_mean_us(&p, c_port, calls))
                        .await
                        .unwrap(),
                );
                // In a task, as an application's callers are (not in `block_on`).
                to_c.add(
                    tokio::spawn(rust_client_mean_us(c_addr, calls))
                        .await
                        .unwrap(),
                );
                let p = programs.clone();
                from_c.add(
                    tokio::task::spawn_blocking(move || c_client_mean_us(&p, port, calls))
                        .await
                        .unwrap(),
                );
                ours.add(
                    tokio::spawn(rust_client_mean_us(server.local_addr(), calls))
                        .await
                        .unwrap(),
                );
            }
            server.shutdown().await;
        });
        let base = baseline.get();
        println!("{name}:");
        println!("  libtirpc client -> libtirpc server {base:8.2} µs");
        println!(
            "  ours client     -> libtirpc server {:8.2} µs   client ours/libtirpc {:.2}",
            to_c.get(),
            to_c.get() / base
        );
        println!(
            "  libtirpc client -> ours server     {:8.2} µs   server ours/libtirpc {:.2}",
            from_c.get(),
            from_c.get() / base
        );
        println!(
            "  ours client     -> ours server     {:8.2} µs   (one process, one runtime)",
            ours.get()
        );
        for (who, v) in [("our TCP client", &to_c), ("our TCP server", &from_c)] {
            rec.figure(
                group,
                &format!("{who} with libtirpc's other half, {name} (best of {ROUNDS})"),
                v.get(),
                "us",
            )
            .baseline("libtirpc client and server (best)", base)
            .ratio(v.get() / base, "value / baseline");
        }
    }
    rec.note(
        group,
        format!(
            "rpc_tcp: our TCP client against the libtirpc (rpcgen) server and the libtirpc \
             client against our TCP server, each against libtirpc's own pair, best of \
             {ROUNDS} interleaved rounds of {calls} calls; our half runs on the named tokio \
             runtime in the bench process, libtirpc's in its own process."
        ),
    );
    if let Err(e) = rec.save() {
        eprintln!("rpc_tcp: records not written: {e}");
    }
}

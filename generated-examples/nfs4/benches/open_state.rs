//! What the server's open state costs its operations: OPEN, WRITE and CLOSE on fresh files by
//! one client, with nothing else held and with many other clients' opens held on other files.
//! A server whose state lookups scan every stateid slows down in proportion to what it holds;
//! one that looks up per file and per client does not.
//!
//! ```text
//! cargo bench -p rpcrdma-nfs4 --bench open_state
//! OPEN_STATE_HELD=20000 OPEN_STATE_CYCLES=2000 cargo bench -p rpcrdma-nfs4 --bench open_state
//! ```
//!
//! Calls go through the RPC layer in process (`LocalTransport`: encoding, dispatch and the
//! server's work, no network), so the figures are the server's own. Rounds alternate the two
//! servers; each prints the median time per cycle and the ratio held / empty.

use std::time::Instant;

use bytes::Bytes;
use rpcrdma::rpc::{Client, LocalTransport};
use rpcrdma_nfs4::client::{OpenOptions, Session, SessionConfig};
use rpcrdma_nfs4::nfs4::nfs4_program::nfs_v4::NfsV4Client;
use rpcrdma_nfs4::nfs4::StableHow4;
use rpcrdma_nfs4::server::{Nfs4Config, Nfs4Server};

/// Clients that hold the background opens (each within the per-client bound).
const HOLDERS: usize = 4;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn session(server: &Nfs4Server, owner: &str) -> Session {
    let nfs = NfsV4Client::new(Client::new(LocalTransport::new(server.rpc_server())));
    Session::establish(nfs, SessionConfig::new(owner.to_string(), *b"bench001"))
        .await
        .expect("session")
}

/// A server with `held` opens of other clients on files of their own, kept open.
async fn server_holding(held: usize) -> (Nfs4Server, Vec<Session>) {
    let server = Nfs4Server::new(Nfs4Config {
        lease_seconds: 3600,
        ..Nfs4Config::default()
    });
    let mut holders = Vec::new();
    for h in 0..HOLDERS {
        let s = session(&server, &format!("holder-{h}")).await;
        let root = s.root_fh().await.expect("root");
        for i in 0..held / HOLDERS {
            s.open(&root, &format!("held-{h}-{i}"), OpenOptions::create(0o644))
                .await
                .expect("background OPEN");
        }
        holders.push(s);
    }
    (server, holders)
}

/// Microseconds per OPEN (create) + WRITE + CLOSE of a fresh file, over `cycles`.
async fn cycle_us(s: &Session, round: usize, cycles: usize) -> f64 {
    let root = s.root_fh().await.expect("root");
    let data = Bytes::from_static(b"0123456789abcdef");
    let start = Instant::now();
    for i in 0..cycles {
        let name = format!("measured-{round}-{i}");
        let file = s
            .open(&root, &name, OpenOptions::create(0o644))
            .await
            .expect("OPEN");
        s.write(
            &file.fh,
            &file.stateid,
            0,
            data.clone(),
            StableHow4::Unstable4,
        )
        .await
        .expect("WRITE");
        s.close(&file.fh, &file.stateid).await.expect("CLOSE");
    }
    start.elapsed().as_secs_f64() * 1e6 / cycles as f64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let quick = std::env::var("BENCH_QUICK").is_ok_and(|v| v == "1");
    let held = env("OPEN_STATE_HELD", 20_000);
    let cycles = env("OPEN_STATE_CYCLES", if quick { 2_000 } else { 20_000 });
    let rounds = env("OPEN_STATE_ROUNDS", if quick { 3 } else { 7 });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let started = Instant::now();
        let (empty, _none) = server_holding(0).await;
        let (loaded, _holders) = server_holding(held).await;
        println!(
            "open_state: {held} opens of {HOLDERS} other clients held, set up in {:.1} s; {cycles} cycles per round, {rounds} rounds",
            started.elapsed().as_secs_f64()
        );
        let a = session(&empty, "measured").await;
        let b = session(&loaded, "measured").await;
        let (mut base, mut with) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            // Alternate which goes first, so that neither always runs on a warmer cache.
            if round % 2 == 0 {
                base.push(cycle_us(&a, round, cycles).await);
                with.push(cycle_us(&b, round, cycles).await);
            } else {
                with.push(cycle_us(&b, round, cycles).await);
                base.push(cycle_us(&a, round, cycles).await);
            }
        }
        let ratios: Vec<f64> = with.iter().zip(&base).map(|(w, b)| w / b).collect();
        let (b, w) = (median(&mut base), median(&mut with));
        let mut r = ratios.clone();
        println!("OPEN + WRITE + CLOSE, nothing else held:  {b:.2} us per cycle (median of rounds)");
        println!("OPEN + WRITE + CLOSE, {held} opens held: {w:.2} us per cycle");
        println!(
            "ratio held / empty: {:.3}x (median of per-round ratios; rounds {:?})",
            median(&mut r),
            ratios.iter().map(|x| format!("{x:.3}")).collect::<Vec<_>>()
        );
    });
}

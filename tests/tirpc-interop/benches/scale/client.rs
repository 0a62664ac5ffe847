//! The client role (`--role client`): one process holding many connections to the server and
//! a fixed number of workers that keep calls in flight on them.
//!
//! It opens `--connections` connections (at most `--connects-at-once` being set up at a
//! time), makes one NULL call on each and checks it, then prints `ready SECONDS` (the time
//! the connections took) or `failed REASON` and exits non-zero. Then it obeys its standard
//! input, a command a line:
//!
//! * `run`: starts `--workers` workers. Each makes one call after another, every call on the
//!   next connection in round-robin order (one counter shared by the process's workers), so
//!   that with fewer connections than workers each connection carries several calls at once
//!   and with more every connection is used in turn, at most `--workers` of them with a call
//!   in flight at any moment.
//! * `record`: from now on the workers count the calls they complete and their latencies.
//! * `stop`: the workers stop after their current call; the process prints `result calls N
//!   seconds S failures F hist H` (and `error TEXT` after the first failure's text), where S
//!   is the time between `record` and `stop`.
//!
//! It disconnects and exits when its standard input closes. Every result is checked: NULL
//! must return, ECHO (`--echo BYTES`) must return the bytes sent; a call that fails or comes
//! back wrong is a failure, and its worker stops.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rpc::tcp::{TcpConfig, TcpTransport};
use rpcrdma::rpc::{CallOptions, Client};
use rpcrdma::transport::RdmaTransport;
use tirpc_interop::interop::interop_prog::interop_vers::{Echo, InteropNull};
use tirpc_interop::interop::EchoData;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;

use crate::histogram::Histogram;
use crate::raw::RawConnection;
use crate::tuning::Tuning;
use crate::Transport;

/// How long a connection's set-up call may take: a safety net for a server that accepts a
/// connection and never serves it (what a server out of room may do), far above any set-up
/// seen here (milliseconds), so that the failure says which connection stopped.
const SETUP_TIMEOUT: Duration = Duration::from_secs(30);

/// What the client role is given.
#[derive(Debug, Clone)]
pub struct ClientArgs {
    /// The transport to the server.
    pub transport: Transport,
    /// The server.
    pub addr: SocketAddr,
    /// Connections this process opens.
    pub connections: usize,
    /// Workers (calls in flight at once) this process runs.
    pub workers: usize,
    /// Connections set up at once.
    pub connects_at_once: usize,
    /// ECHO calls of this many bytes instead of NULL calls (0: NULL).
    pub echo: usize,
    /// Our endpoints' settings.
    pub tuning: Tuning,
    /// The CPUs the process runs on (`None`: any).
    pub cpus: Option<Vec<usize>>,
}

/// One connection of this process.
enum Connection {
    /// Our ONC RPC client, over RPC-over-RDMA or TCP.
    Rpc(Client),
    /// A plain TCP stream (`raw-tcp`).
    Raw(RawConnection),
}

/// One call on `connection`, its result checked.
async fn call(
    connection: &Connection,
    echo: Option<&EchoData>,
    options: CallOptions,
) -> Result<(), String> {
    match connection {
        Connection::Rpc(client) => rpc_call(client, echo, options).await,
        Connection::Raw(raw) => raw.call().await,
    }
}

/// One ONC RPC call on `client`, its result checked.
async fn rpc_call(
    client: &Client,
    echo: Option<&EchoData>,
    options: CallOptions,
) -> Result<(), String> {
    match echo {
        None => client
            .call_with::<InteropNull>(&(), options)
            .await
            .map_err(|e| format!("NULL: {e}")),
        Some(data) => {
            let back = client
                .call_with::<Echo>(data, options)
                .await
                .map_err(|e| format!("ECHO: {e}"))?;
            if back == *data {
                Ok(())
            } else {
                Err(format!(
                    "ECHO: {} bytes back for {} sent, or other bytes",
                    back.len(),
                    data.len()
                ))
            }
        }
    }
}

/// Opens a connection and makes its set-up call (a NULL).
async fn connect(
    transport: Transport,
    addr: SocketAddr,
    provider: Arc<SoftProvider>,
    tuning: Tuning,
) -> Result<Connection, String> {
    let client = match transport {
        Transport::Rdma | Transport::RdmaShared => Client::new(
            RdmaTransport::connect(provider, addr, tuning.rdma())
                .await
                .map_err(|e| format!("connecting: {e}"))?,
        ),
        Transport::Tcp | Transport::Libtirpc => Client::new(
            TcpTransport::connect(addr, TcpConfig::new())
                .await
                .map_err(|e| format!("connecting: {e}"))?,
        ),
        Transport::RawTcp => {
            let raw = RawConnection::connect(addr)
                .await
                .map_err(|e| format!("connecting: {e}"))?;
            raw.call().await.map_err(|e| format!("set-up call: {e}"))?;
            return Ok(Connection::Raw(raw));
        }
    };
    rpc_call(&client, None, CallOptions::new().timeout(SETUP_TIMEOUT))
        .await
        .map_err(|e| format!("set-up call: {e}"))?;
    Ok(Connection::Rpc(client))
}

/// Opens every connection, at most `args.connects_at_once` at a time.
async fn connect_all(args: &ClientArgs) -> Result<Vec<Connection>, String> {
    let provider = Arc::new(SoftProvider::new(args.tuning.soft()));
    let places = Arc::new(Semaphore::new(args.connects_at_once.max(1)));
    let mut pending = JoinSet::new();
    let mut clients = Vec::with_capacity(args.connections);
    for _ in 0..args.connections {
        // A connection that failed ends the set-up now, not after every other was tried
        // (against a server that stopped serving, each would wait out its time-out).
        while let Some(done) = pending.try_join_next() {
            clients.push(done.map_err(|e| format!("a connecting task failed: {e}"))??);
        }
        let place = places
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| e.to_string())?;
        let (transport, addr, provider, tuning) =
            (args.transport, args.addr, provider.clone(), args.tuning);
        pending.spawn(async move {
            let result = connect(transport, addr, provider, tuning).await;
            drop(place);
            result
        });
    }
    while let Some(done) = pending.join_next().await {
        let client = done.map_err(|e| format!("a connecting task failed: {e}"))??;
        clients.push(client);
    }
    Ok(clients)
}

/// What the workers share.
struct Shared {
    clients: Vec<Connection>,
    next: AtomicUsize,
    recording: AtomicBool,
    stop: AtomicBool,
    echo: Option<EchoData>,
}

/// What one worker did while recording.
struct Done {
    calls: u64,
    latencies: Histogram,
    failure: Option<String>,
}

async fn worker(shared: Arc<Shared>) -> Done {
    let mut done = Done {
        calls: 0,
        latencies: Histogram::default(),
        failure: None,
    };
    while !shared.stop.load(Ordering::Relaxed) {
        let i = shared.next.fetch_add(1, Ordering::Relaxed) % shared.clients.len();
        let start = Instant::now();
        let result = call(&shared.clients[i], shared.echo.as_ref(), CallOptions::new()).await;
        let ns = start.elapsed().as_nanos() as u64;
        if let Err(e) = result {
            done.failure = Some(format!("connection {i}: {e}"));
            break;
        }
        if shared.recording.load(Ordering::Relaxed) {
            done.latencies.record(ns);
            done.calls += 1;
        }
    }
    done
}

/// Writes one line to standard output.
fn say(line: &str) -> bool {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush()).is_ok()
}

/// Runs the client role until standard input closes.
pub fn run(args: ClientArgs) -> ExitCode {
    // The process's own work is the calls: one thread, as one application's event loop.
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("scale client: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Standard input is read by a thread of its own, the commands forwarded to the runtime.
    let (commands_tx, mut commands) = mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if commands_tx.send(line.trim().to_string()).is_err() {
                break;
            }
        }
    });
    rt.block_on(async move {
        let started = Instant::now();
        let clients = match connect_all(&args).await {
            Ok(c) => c,
            Err(e) => {
                say(&format!("failed {e}"));
                return ExitCode::FAILURE;
            }
        };
        say(&format!("ready {:.3}", started.elapsed().as_secs_f64()));
        let echo = (args.echo > 0).then(|| {
            EchoData::from(Bytes::from(
                (0..args.echo).map(|i| (i * 7) as u8).collect::<Vec<u8>>(),
            ))
        });
        let shared = Arc::new(Shared {
            clients,
            next: AtomicUsize::new(0),
            recording: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            echo,
        });
        let mut workers = JoinSet::new();
        let mut recording_since = None;
        while let Some(command) = commands.recv().await {
            match command.as_str() {
                "run" => {
                    for _ in 0..args.workers {
                        workers.spawn(worker(shared.clone()));
                    }
                }
                "record" => {
                    recording_since = Some(Instant::now());
                    shared.recording.store(true, Ordering::Relaxed);
                }
                "stop" => {
                    shared.recording.store(false, Ordering::Relaxed);
                    let seconds = recording_since.map_or(0.0, |t| t.elapsed().as_secs_f64());
                    shared.stop.store(true, Ordering::Relaxed);
                    let (mut calls, mut latencies, mut failures, mut error) =
                        (0, Histogram::default(), 0, None);
                    while let Some(done) = workers.join_next().await {
                        let done = match done {
                            Ok(d) => d,
                            Err(e) => Done {
                                calls: 0,
                                latencies: Histogram::default(),
                                failure: Some(format!("a worker panicked: {e}")),
                            },
                        };
                        calls += done.calls;
                        latencies.merge(&done.latencies);
                        if let Some(f) = done.failure {
                            failures += 1;
                            error.get_or_insert(f);
                        }
                    }
                    let mut line = format!(
                        "result calls {calls} seconds {seconds:.6} failures {failures} hist {}",
                        latencies.to_text()
                    );
                    if let Some(e) = error {
                        line.push_str(&format!(" error {e}"));
                    }
                    say(&line);
                }
                other => {
                    eprintln!("scale client: unknown command {other:?}");
                    return ExitCode::FAILURE;
                }
            }
        }
        ExitCode::SUCCESS
    })
}

//! file-demo: the file service of `files.x` over RPC-over-RDMA version 1 on the software iWARP
//! provider. It serves a scratch directory, runs the scripted session of
//! `file_service::session` and prints, per call, how the call and its reply moved (read from
//! the transport's counters), the bytes RDMA moved, the copies made, the time, and the check
//! of the result. It exits non-zero if any result differs from what was written.
//!
//! ```text
//! cargo run --release -p file-service --example file-demo                   # both ends
//! cargo run --release -p file-service --example file-demo -- --listen 127.0.0.1:20049
//! cargo run --release -p file-service --example file-demo -- --connect 127.0.0.1:20049
//! ```

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use file_service::client::Files;
use file_service::movement::{CallMove, Meter, ReplyMove};
use file_service::server::FileServer;
use file_service::session::{self, size, Step};
use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::Client;
use rpcrdma::transport::{serve, RdmaConfig, RdmaListener, RdmaTransport};

type Error = Box<dyn std::error::Error>;

/// The file service over RPC-over-RDMA on the software iWARP provider.
#[derive(Parser, Debug)]
#[command(name = "file-demo")]
struct Args {
    /// Run only the server, on a fresh scratch directory, until its client goes away.
    #[arg(long, conflicts_with = "connect")]
    listen: Option<SocketAddr>,
    /// Run only the client's session, against a file-demo server at this address.
    #[arg(long)]
    connect: Option<SocketAddr>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build();
    let result = match runtime {
        Ok(rt) => rt.block_on(run(&args)),
        Err(e) => Err(e.into()),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("file-demo: verification FAILED (see the check column)");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("file-demo: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: &Args) -> Result<bool, Error> {
    let provider = Arc::new(SoftProvider::default());
    let config = RdmaConfig::default();
    let mut scratch = None;
    let listener = match args.connect {
        Some(_) => None,
        None => {
            let dir = tempfile::tempdir()?;
            session::populate(dir.path())?;
            let addr = args.listen.unwrap_or(([127, 0, 0, 1], 0).into());
            let listener = provider.listen(addr).await?;
            println!(
                "server: FILES_PROG version 1 (files.x) over RPC-over-RDMA v1 on the software \
                 iWARP provider, {}; serving {} ({} and {} log files)",
                listener.local_addr()?,
                dir.path().display(),
                session::HELLO,
                session::LOGS,
            );
            let server = FileServer::new(dir.path()).into_rpc_server();
            let listener = Arc::new(serve::<SoftProvider>(listener, server, config.clone()));
            tokio::spawn({
                let listener = listener.clone();
                async move { listener.run().await }
            });
            scratch = Some(dir);
            Some(listener)
        }
    };
    if args.listen.is_some() {
        if let Some(listener) = listener {
            serve_one_client(&listener).await;
        }
        return Ok(true);
    }
    let addr = match (args.connect, &listener) {
        (Some(addr), _) => addr,
        (None, Some(l)) => l.local_addr()?,
        (None, None) => unreachable!("a server runs unless --connect is given"),
    };
    let transport = Arc::new(RdmaTransport::connect(provider, addr, config.clone()).await?);
    let files = Files::new(Client::from_arc(transport.clone()));
    let meter = Meter::new(transport, listener);
    println!(
        "client: connected to {addr}; inline threshold {} each way; DDP-eligible arguments \
         of {} or more go by Read chunk, smaller ones inline",
        size(config.inline_size),
        size(config.min_ddp_size),
    );
    println!();
    println!(
        "{:>2}  {:<8} {:<40} {:>7} {:>7}  {:<10} {:<11} {:>7} {:>6} {:>6}  check",
        "#", "call", "", "args B", "res. B", "call moved", "reply moved", "RDMA B", "copy B", "µs"
    );
    let mut n = 0;
    let steps = session::run(&files, &meter, |step| {
        n += 1;
        print_step(n, step, meter.sees_replies());
    })
    .await?;
    if args.connect.is_some() {
        // A server in another process reads its counters from live connections only: stay
        // connected a moment so that it sees the last replies before this process leaves.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    drop(scratch);
    println!();
    println!("call moved:  inline = in the RDMA Send | read chunk = its DDP-eligible data pulled by the server (RDMA Read)");
    println!(
        "             long call = the whole call pulled by the server (Position-Zero Read chunk)"
    );
    println!("reply moved: inline = in the RDMA Send | write chunk = its DDP-eligible data pushed into the client's buffer");
    println!("             (RDMA Write) | reply chunk = the whole reply pushed by RDMA Write (the call provided a Reply chunk)");
    println!("RDMA B: bytes RDMA moved straight from the registered buffer they were in; copy B: bytes first copied");
    println!("into registered memory (both ends). Movement is read from the transport's counters around each call.");
    for note in notes(&steps, &config) {
        println!("{note}");
    }
    if !meter.sees_replies() {
        println!(
            "(the server runs in another process: it prints how its replies moved, and the byte \
             columns count this side only)"
        );
    }
    let failed: Vec<&Step> = steps.iter().filter(|s| s.check.is_err()).collect();
    if failed.is_empty() {
        println!(
            "verification OK: {} calls, every result as expected",
            steps.len()
        );
    }
    Ok(failed.is_empty())
}

fn print_step(n: usize, step: &Step, sees_replies: bool) {
    let m = &step.movement;
    let call = m.call.map_or("?".into(), |c| c.to_string());
    let reply = match (m.reply, sees_replies) {
        (Some(r), _) => r.to_string(),
        (None, true) => "?".into(),
        (None, false) => "(server)".into(),
    };
    let check = match &step.check {
        Ok(()) => "ok".to_string(),
        Err(why) => format!("MISMATCH: {why}"),
    };
    println!(
        "{n:>2}  {:<8} {:<40} {:>7} {:>7}  {call:<10} {reply:<11} {:>7} {:>6} {:>6}  {check}",
        step.procedure,
        step.detail,
        step.call_bytes,
        step.reply_bytes,
        m.zero_copy,
        m.copied,
        step.elapsed.as_micros(),
    );
}

/// Why some calls moved as they did, for the movements that surprise (each note is printed
/// only when the counters showed that movement).
fn notes(steps: &[Step], config: &RdmaConfig) -> Vec<String> {
    let mut notes = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let n = i + 1;
        let m = &step.movement;
        let fits = step.reply_bytes < config.inline_size;
        let note = match (step.procedure, m.call, m.reply) {
            ("READ", _, Some(ReplyMove::WriteChunk)) if fits => format!(
                "#{n}: {} bytes by RDMA Write although they would fit inline: the client provides \
                 a Write chunk for every READ, and a server must use a Write chunk it is given",
                m.zero_copy
            ),
            ("READ", _, Some(ReplyMove::Inline)) if step.key == "read-small" => format!(
                "#{n}: at most 4 KiB of data and the reply's header fit the client's receive \
                 buffer ({}): the client provides no Write chunk, the reply is inline",
                size(config.inline_size)
            ),
            ("READ", _, Some(ReplyMove::Inline)) => format!(
                "#{n}: no data to return: the Write chunk provided goes back unused, the reply \
                 is inline"
            ),
            ("WRITE", Some(CallMove::Inline), _) => format!(
                "#{n}: DDP-eligible data under min_ddp_size ({}) stays inline",
                size(config.min_ddp_size)
            ),
            (_, _, Some(ReplyMove::ReplyChunk)) if fits => format!(
                "#{n}: {} bytes through the Reply chunk: this result can be longer than the \
                 client's receive buffer, so the client provides a Reply chunk, and it is used",
                step.reply_bytes
            ),
            _ => continue,
        };
        notes.push(note);
    }
    notes
}

/// Serves until the first client's connection closes (or Ctrl-C, which shuts the server down
/// gracefully), then prints how the replies moved.
async fn serve_one_client(listener: &RdmaListener<SoftProvider>) {
    println!("server: waiting for one client (Ctrl-C to stop)");
    let mut last = None;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            _ = tokio::signal::ctrl_c() => {
                // The calls being served are answered before the connection closes.
                let stopped = tokio::time::timeout(Duration::from_secs(5), listener.shutdown());
                if stopped.await.is_err() {
                    println!("server: calls still running after 5 s; stopping anyway");
                }
                break;
            }
        }
        match listener.stats().first() {
            Some(&(stats, _)) => last = Some(stats),
            None if last.is_some() => break,
            None => {}
        }
    }
    if let Some(s) = last {
        println!(
            "server: the client left; replies: {} inline, {} with Write chunks, {} through the \
             Reply chunk",
            s.replies_inline, s.replies_write_chunks, s.replies_long
        );
    }
}

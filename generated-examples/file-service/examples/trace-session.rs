//! trace-session: the scripted file session of `file_service::session` over RPC-over-RDMA on
//! the software iWARP provider, both ends in this process, with its log printed by
//! `tracing-subscriber`: a span per call on each end (`rpc.call`, `rpc.serve`) whose fields say
//! how the call and its reply moved, the bytes RDMA moved and those copied, the status and the
//! time, and the connection's events (MPA negotiation, RFC 8797 private data, accept, close
//! with its reason). Then the counters a client, its transport, the server and the listener
//! keep (`rpcrdma::rpc::observe`).
//!
//! ```text
//! cargo run -p file-service --example trace-session
//! RUST_LOG=rpcrdma=trace cargo run -p file-service --example trace-session   # everything
//! RUST_LOG=rpcrdma::conn=debug cargo run -p file-service --example trace-session   # connections only
//! ```
//!
//! Without `RUST_LOG` the filter is `rpcrdma::call=debug,rpcrdma::conn=debug,warn`.

use std::sync::Arc;

use file_service::client::Files;
use file_service::movement::Meter;
use file_service::server::FileServer;
use file_service::session;
use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::Client;
use rpcrdma::transport::{serve, RdmaConfig, RdmaTransport};
use tracing_subscriber::EnvFilter;

type Error = Box<dyn std::error::Error>;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Error> {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("rpcrdma::call=debug,rpcrdma::conn=debug,warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(true)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .compact()
        .init();

    let dir = tempfile::tempdir()?;
    session::populate(dir.path())?;
    let provider = Arc::new(SoftProvider::default());
    let config = RdmaConfig::default();
    let listener = provider.listen(([127, 0, 0, 1], 0).into()).await?;
    let addr = listener.local_addr()?;
    let server = FileServer::new(dir.path()).into_rpc_server();
    let listener = Arc::new(serve::<SoftProvider>(
        listener,
        server.clone(),
        config.clone(),
    ));
    tokio::spawn({
        let listener = listener.clone();
        async move { listener.run().await }
    });

    let transport = Arc::new(RdmaTransport::connect(provider, addr, config).await?);
    let client = Client::from_arc(transport.clone());
    let files = Files::new(client.clone());
    let meter = Meter::new(transport.clone(), Some(listener.clone()));
    let steps = session::run(&files, &meter, |_| {}).await?;
    let failed = steps.iter().filter(|s| s.check.is_err()).count();

    transport.disconnect();
    // The server's side of the close, and its counters, once it has seen it.
    for _ in 0..200 {
        if listener.total_stats().connections_closed == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    listener.shutdown().await;

    println!();
    println!("{} calls, {failed} results wrong", steps.len());
    println!(
        "client, by status:  {:?}",
        client.call_stats().iter().collect::<Vec<_>>()
    );
    println!(
        "server, by status:  {:?}",
        server.stats().iter().collect::<Vec<_>>()
    );
    if let Some(stats) = client.transport_stats() {
        println!(
            "client transport:   {} connection(s), {} calls, {} replies, {} B sent, {} B received",
            stats.connections, stats.calls, stats.replies, stats.bytes_sent, stats.bytes_received
        );
    }
    let total = listener.total_stats();
    println!(
        "server listener:    {} connection(s) ({} closed), {} calls, {} replies",
        total.connections, total.connections_closed, total.calls, total.replies
    );
    if let Some(rdma) = total.rdma {
        println!(
            "server replies:     {} inline, {} with Write chunks, {} through the Reply chunk",
            rdma.transport.replies_inline,
            rdma.transport.replies_write_chunks,
            rdma.transport.replies_long
        );
    }
    if failed > 0 {
        return Err(format!("{failed} results differ from what was written").into());
    }
    Ok(())
}

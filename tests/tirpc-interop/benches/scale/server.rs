//! The server role (`--role server --transport rdma|rdma-srq|tcp`): `interop.x` served by our
//! RPC-over-RDMA server on the soft provider (`rdma-srq`: from one shared receive queue of
//! `--shared-buffers` buffers) or our ONC RPC over TCP, on 127.0.0.1, with the
//! library's defaults (unless `tuning.rs`'s options say otherwise), on a multi-thread runtime with a worker per CPU (as an application
//! would run it).
//!
//! It prints `port P` once it listens, then answers each `sample` line on its standard input
//! with `heap BYTES tasks N connections N`: the heap its allocator holds, the tasks alive on
//! its runtime, the connections it serves. It exits when its standard input closes.

use std::io::{BufRead, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;

use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Listener, Provider, SharedReceiveParams};
use rpcrdma::rpc::tcp::{TcpConfig, TcpServer};
use rpcrdma::rpc::Server;
use rpcrdma::transport::{serve, RdmaListener};
use tirpc_interop::service;

use crate::heap;
use crate::raw::RawServer;
use crate::tuning::Tuning;
use crate::Transport;

/// Our server of `interop.x` (NULL and ECHO are what the clients call).
fn program() -> Server {
    let mut b = Server::builder();
    service::register(&mut b, service::Reference);
    b.build()
}

/// A running server and how to count its connections.
enum Running {
    Rdma(Arc<RdmaListener<SoftProvider>>),
    Tcp(TcpServer),
    Raw(RawServer),
}

impl Running {
    async fn start(
        transport: Transport,
        tuning: Tuning,
        shared_buffers: usize,
    ) -> std::io::Result<(Running, SocketAddr)> {
        let any: SocketAddr = (Ipv4Addr::LOCALHOST, 0).into();
        match transport {
            Transport::Rdma | Transport::RdmaShared => {
                let provider = SoftProvider::new(tuning.soft());
                let listener = provider.listen(any).await.map_err(std::io::Error::other)?;
                let addr = listener.local_addr().map_err(std::io::Error::other)?;
                let config = tuning.rdma();
                let mut rdma = serve::<SoftProvider>(listener, program(), config.clone());
                if transport == Transport::RdmaShared {
                    let queue = provider
                        .shared_receive_queue(SharedReceiveParams::new(
                            shared_buffers,
                            config.inline_size,
                        ))
                        .map_err(std::io::Error::other)?;
                    rdma = rdma
                        .with_shared_receive_queue(queue)
                        .map_err(std::io::Error::other)?;
                }
                let rdma = Arc::new(rdma);
                tokio::spawn({
                    let rdma = rdma.clone();
                    async move {
                        if let Err(e) = rdma.run().await {
                            eprintln!("scale server: accepting stopped: {e}");
                        }
                    }
                });
                Ok((Running::Rdma(rdma), addr))
            }
            Transport::Tcp => {
                let tcp = TcpServer::bind(any, program(), TcpConfig::new()).await?;
                let addr = tcp.local_addr();
                Ok((Running::Tcp(tcp), addr))
            }
            Transport::RawTcp => {
                let (raw, addr) = RawServer::start(any).await?;
                Ok((Running::Raw(raw), addr))
            }
            Transport::Libtirpc => Err(std::io::Error::other(
                "libtirpc's server is the C program, not a role of this binary",
            )),
        }
    }

    fn connections(&self) -> u64 {
        match self {
            Running::Rdma(rdma) => rdma.connection_count() as u64,
            Running::Tcp(tcp) => {
                let s = tcp.stats();
                s.connections - s.connections_closed
            }
            Running::Raw(raw) => raw.connections(),
        }
    }
}

/// Runs the server role until standard input closes.
pub fn run(transport: Transport, tuning: Tuning, shared_buffers: usize) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("scale server: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (running, addr) = match rt.block_on(Running::start(transport, tuning, shared_buffers)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("scale server: cannot listen: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut out = std::io::stdout().lock();
    if writeln!(out, "port {}", addr.port())
        .and_then(|()| out.flush())
        .is_err()
    {
        return ExitCode::FAILURE;
    }
    // Samples are answered from this thread, outside the runtime's workers: the runtime's
    // task count is the server's alone.
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim() != "sample" {
            eprintln!("scale server: unknown command {line:?}");
            return ExitCode::FAILURE;
        }
        let answer = format!(
            "heap {} tasks {} connections {}",
            heap::live(),
            rt.metrics().num_alive_tasks(),
            running.connections()
        );
        if writeln!(out, "{answer}")
            .and_then(|()| out.flush())
            .is_err()
        {
            break;
        }
    }
    drop(running);
    ExitCode::SUCCESS
}

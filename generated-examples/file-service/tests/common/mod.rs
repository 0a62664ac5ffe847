//! A file server on a scratch directory and a client of it, in this process, over
//! RPC-over-RDMA on the software iWARP provider (loopback).

#![allow(dead_code)]

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Once};

use file_service::client::Files;
use file_service::movement::Meter;
use file_service::server::FileServer;
use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::Client;
use rpcrdma::transport::{serve, RdmaConfig, RdmaTransport};

pub struct Setup {
    pub files: Files,
    pub meter: Meter<SoftProvider>,
}

/// Serves `dir` and connects a client to it.
pub async fn start(dir: &Path) -> Setup {
    let provider = Arc::new(SoftProvider::default());
    let listener = provider
        .listen("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let server = FileServer::new(dir).into_rpc_server();
    let listener = Arc::new(serve::<SoftProvider>(
        listener,
        server,
        RdmaConfig::default(),
    ));
    tokio::spawn({
        let listener = listener.clone();
        async move { listener.run().await }
    });
    let transport = Arc::new(
        RdmaTransport::connect(provider, addr, RdmaConfig::default())
            .await
            .unwrap(),
    );
    Setup {
        files: Files::new(Client::from_arc(transport.clone())),
        meter: Meter::new(transport, Some(listener)),
    }
}

static PANICS: AtomicUsize = AtomicUsize::new(0);

/// Counts from now on the panics of tokio's threads, where the server's tasks and handlers
/// run (a failing assertion of a test runs on the test's own thread and is not counted).
pub fn count_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let thread = std::thread::current();
            if thread
                .name()
                .is_some_and(|n| n.starts_with("tokio-runtime"))
            {
                PANICS.fetch_add(1, Ordering::SeqCst);
            }
            previous(info);
        }));
    });
}

/// Panics of tokio's threads counted so far (in every test of the binary).
pub fn panics() -> usize {
    PANICS.load(Ordering::SeqCst)
}

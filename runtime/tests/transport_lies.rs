//! The transport's hostile-peer table (`rpcrdma::transport::conformance::lies`) over the
//! software provider: one named test per lie a client can tell a server. Each asserts the
//! protocol's answer (RDMA_ERROR with its code, an RPC reply status, a dropped message or a
//! closed connection), that a well-behaved client of the same server is served meanwhile, that
//! no registration of the liar's connection is left behind, and (for the whole table) that
//! nothing panics anywhere in the process.
//!
//! `cargo test -p rpcrdma --test transport_lies [-- NAME]`; `-- --list` lists the lies.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use libtest_mimic::{Arguments, Failed, Trial};
use rpcrdma::rdma::conformance::Harness;
use rpcrdma::rdma::soft::{self, SoftProvider};
use rpcrdma::transport::conformance::lies;

static PANICS: AtomicUsize = AtomicUsize::new(0);

fn main() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        previous(info);
    }));
    let mut args = Arguments::from_args();
    // The registration count is the process's: lies run one at a time.
    args.test_threads = Some(1);
    let rt = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime"),
    );
    let trials = lies::names()
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let rt = rt.clone();
            let test_name = format!("lie_{i:02}_{}", name.replace([' ', ',', '-', '^'], "_"));
            Trial::test(test_name, move || {
                let put = Harness::new(SoftProvider::default(), "127.0.0.1:0".parse().unwrap())
                    .with_registration_count(soft::live_registrations);
                let before = PANICS.load(Ordering::SeqCst);
                rt.block_on(lies::run_lie(&put, i))
                    .map_err(|e| Failed::from(format!("{name}: {e}")))?;
                if PANICS.load(Ordering::SeqCst) != before {
                    return Err(Failed::from(format!("{name}: something panicked")));
                }
                Ok(())
            })
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}

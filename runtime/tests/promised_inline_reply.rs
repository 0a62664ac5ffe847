//! `CallOptions::max_inline_results`: a caller that knows its unbounded result is small
//! saves the Reply chunk (seed 002 section 4.3), and a server that breaks the promise fails
//! that call only.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::{
    handler, CallContext, CallOptions, Client, DispatchError, HandlerFuture, Server, Service,
};
use rpcrdma::transport::core::Stats;
use rpcrdma::transport::{serve, RdmaConfig, RdmaTransport};
use rpcrdma::xdr::{Decode, Decoder, Procedure};

const PROG: u32 = 0x2000_0c1d;

/// FILL(n): `n` bytes of 7 as an `opaque<>`, a result with no bound of its own.
struct Filler;

impl Service for Filler {
    fn program(&self) -> u32 {
        PROG
    }

    fn version(&self) -> u32 {
        1
    }

    fn call(
        &self,
        _ctx: CallContext,
        procedure: u32,
        args: &mut Decoder<'_>,
    ) -> Result<HandlerFuture, DispatchError> {
        match procedure {
            1 => {
                let n = u32::decode(args).map_err(DispatchError::Args)?;
                Ok(handler(
                    async move { Ok(Bytes::from(vec![7u8; n as usize])) },
                ))
            }
            _ => Err(DispatchError::ProcUnavail),
        }
    }
}

struct Fill;
impl Procedure for Fill {
    const PROGRAM: u32 = PROG;
    const VERSION: u32 = 1;
    const PROCEDURE: u32 = 1;
    const NAME: &'static str = "FILL";
    type Args = u32;
    type Result = Bytes;
    const RESULT_DDP_ITEMS: usize = 0;
}

async fn rdma_server() -> SocketAddr {
    let mut b = Server::builder();
    b.add(Filler);
    let listener = SoftProvider::default()
        .listen("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let listener = Arc::new(serve::<SoftProvider>(
        listener,
        b.build(),
        RdmaConfig::default(),
    ));
    tokio::spawn(async move { listener.run().await });
    addr
}

/// Replies received inline and through a Reply chunk since `before`.
fn replies(transport: &RdmaTransport<SoftProvider>, before: &Stats) -> (u64, u64) {
    let now = transport.stats();
    (
        now.replies_received_inline - before.replies_received_inline,
        now.replies_received_long - before.replies_received_long,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promised_small_result_comes_inline_and_a_broken_promise_fails_that_call_only() {
    let addr = rdma_server().await;
    let transport = Arc::new(
        RdmaTransport::connect(
            Arc::new(SoftProvider::default()),
            addr,
            RdmaConfig::default(),
        )
        .await
        .unwrap(),
    );
    let client = Client::from_arc(transport.clone());

    // No promise: an unbounded result may be long, so the call offers a Reply chunk and the
    // reply comes through it.
    let before = transport.stats();
    let got = client.call::<Fill>(&100).await.unwrap();
    assert_eq!(got, Bytes::from(vec![7u8; 100]));
    assert_eq!(replies(&transport, &before), (0, 1));

    // Promised: no Reply chunk, the reply comes in the Send.
    let before = transport.stats();
    let small = || CallOptions::new().max_inline_results(128);
    let got = client.call_with::<Fill>(&100, small()).await.unwrap();
    assert_eq!(got, Bytes::from(vec![7u8; 100]));
    assert_eq!(replies(&transport, &before), (1, 0));

    // A promise too large to fit inline still offers a Reply chunk.
    let before = transport.stats();
    let large = CallOptions::new().max_inline_results(64 << 10);
    let got = client.call_with::<Fill>(&100, large).await.unwrap();
    assert_eq!(got.len(), 100);
    assert_eq!(replies(&transport, &before), (0, 1));

    // Broken: the server has nowhere to put 16 KiB and says so; that call fails, the
    // connection and the next call do not.
    let err = client
        .call_with::<Fill>(&(16 << 10), small())
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("chunk") || text.contains("CHUNK"),
        "the error names the missing chunk: {text}"
    );
    let got = client.call_with::<Fill>(&10, small()).await.unwrap();
    assert_eq!(got.len(), 10);
}

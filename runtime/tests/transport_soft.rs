//! RPC-over-RDMA version 1 end to end over the software iWARP provider on loopback: a
//! generated client calls a generated server, and every way a message can move is used.

#[path = "support/testprog.rs"]
mod testprog;

use std::sync::Arc;
use std::time::Duration;

use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::{self, CallOptions, Client, TransportError};
use rpcrdma::transport::{serve, RdmaConfig, RdmaListener, RdmaTransport};
use testprog::*;

struct Setup {
    listener: Arc<RdmaListener<SoftProvider>>,
    transport: Arc<RdmaTransport<SoftProvider>>,
    client: TestversClient,
}

async fn setup_with(server_config: RdmaConfig, client_config: RdmaConfig) -> Setup {
    let provider = Arc::new(SoftProvider::default());
    let listener = provider
        .listen("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let listener = Arc::new(serve::<SoftProvider>(listener, server(), server_config));
    tokio::spawn({
        let l = listener.clone();
        async move { l.run().await }
    });
    let transport = Arc::new(
        RdmaTransport::connect(provider, addr, client_config)
            .await
            .unwrap(),
    );
    let client = TestversClient::new(Client::from_arc(transport.clone()));
    Setup {
        listener,
        transport,
        client,
    }
}

async fn setup() -> Setup {
    setup_with(RdmaConfig::default(), RdmaConfig::default()).await
}

#[tokio::test]
async fn null_calls_go_inline() {
    let s = setup().await;
    for _ in 0..10 {
        s.client.test_null().await.unwrap();
    }
    let stats = s.transport.stats();
    assert_eq!(stats.calls_inline, 10);
    assert_eq!(s.listener.stats()[0].0.replies_inline, 10);
}

#[tokio::test]
async fn a_megabyte_moves_by_rdma_read_and_back_by_rdma_write() {
    let s = setup().await;
    let data = pattern(1 << 20, 1);
    let res = s
        .client
        .test_echo(EchoArgs {
            tag: 7,
            data: data.clone(),
        })
        .await
        .unwrap();
    assert_eq!(res.tag, 7);
    assert_eq!(res.data, data);
    let stats = s.transport.stats();
    assert_eq!(stats.calls_read_chunks, 1);
    assert_eq!(s.listener.stats()[0].0.replies_write_chunks, 1);
}

#[tokio::test]
async fn odd_lengths_and_every_size_around_the_thresholds() {
    let s = setup().await;
    for len in [0, 1, 3, 1023, 1024, 1025, 4000, 4096, 4097, 65_537, 300_001] {
        let data = pattern(len, len as u8);
        let res = s
            .client
            .test_echo(EchoArgs {
                tag: len as u32,
                data: data.clone(),
            })
            .await
            .unwrap();
        assert_eq!((res.tag, res.data), (len as u32, data), "{len} bytes");
    }
}

#[tokio::test]
async fn two_read_chunks_in_one_call() {
    let s = setup().await;
    let (a, b) = (pattern(70_001, 1), pattern(5_003, 2));
    let got = s
        .client
        .test_two(TwoArgs {
            first: a.clone(),
            middle: 99,
            second: b.clone(),
        })
        .await
        .unwrap();
    assert_eq!(got, checksum(&a) ^ 99 ^ checksum(&b).rotate_left(7));
}

#[tokio::test]
async fn a_long_call_goes_by_a_position_zero_read_chunk() {
    let s = setup().await;
    let data = pattern(100_000, 4);
    let got = s
        .client
        .test_longargs(PlainArgs { data: data.clone() })
        .await
        .unwrap();
    assert_eq!(got, checksum(&data));
    assert_eq!(s.transport.stats().calls_long, 1);
}

#[tokio::test]
async fn a_long_reply_comes_through_the_reply_chunk() {
    let s = setup().await;
    let res = s.client.test_big(50_000).await.unwrap();
    assert_eq!(res.data.len(), 50_000);
    assert!(res.data.iter().all(|&b| b == 0xb1));
    assert_eq!(s.listener.stats()[0].0.replies_long, 1);
}

#[tokio::test]
async fn an_unused_write_chunk_is_fine() {
    let s = setup().await;
    assert_eq!(
        s.client.test_maybe(0).await.unwrap(),
        MaybeRes::Default { discriminant: 1 }
    );
    match s.client.test_maybe(3000).await.unwrap() {
        MaybeRes::Case0(r) => assert_eq!(r.data, pattern(3000, 3)),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn many_concurrent_calls_within_few_credits() {
    let s = setup_with(RdmaConfig::default().credits(4), RdmaConfig::default()).await;
    let mut tasks = Vec::new();
    for i in 0..64u32 {
        let c = s.client.clone();
        tasks.push(tokio::spawn(async move {
            let data = pattern((i as usize) * 997, i as u8);
            let r = c
                .test_echo(EchoArgs {
                    tag: i,
                    data: data.clone(),
                })
                .await
                .unwrap();
            assert_eq!((r.tag, r.data), (i, data));
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

#[tokio::test]
async fn rpc_errors_come_back_typed() {
    let s = setup().await;
    struct Missing;
    impl rpcrdma::xdr::Procedure for Missing {
        const PROGRAM: u32 = 0x2000_0077;
        const VERSION: u32 = 1;
        const PROCEDURE: u32 = 42;
        const NAME: &'static str = "MISSING";
        type Args = ();
        type Result = ();
    }
    let err = s.client.rpc().call::<Missing>(&()).await.unwrap_err();
    assert!(matches!(err, rpc::Error::ProcUnavail), "{err}");
    struct Elsewhere;
    impl rpcrdma::xdr::Procedure for Elsewhere {
        const PROGRAM: u32 = 0x2000_0077;
        const VERSION: u32 = 9;
        const PROCEDURE: u32 = 0;
        const NAME: &'static str = "ELSEWHERE";
        type Args = ();
        type Result = ();
    }
    let err = s.client.rpc().call::<Elsewhere>(&()).await.unwrap_err();
    assert!(
        matches!(err, rpc::Error::ProgMismatch { low: 1, high: 1 }),
        "{err}"
    );
    s.client.test_null().await.unwrap();
}

#[tokio::test]
async fn a_call_times_out() {
    let s = setup().await;
    let err = s
        .client
        .rpc()
        .call_with::<testvers::TestSleep>(
            &2000,
            CallOptions::new().timeout(Duration::from_millis(50)),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, rpc::Error::Transport(TransportError::TimedOut(_))),
        "{err}"
    );
}

#[tokio::test]
async fn a_call_is_retransmitted_once_when_its_connection_drops() {
    let s = setup().await;
    let c = s.client.clone();
    let call = tokio::spawn(async move { c.test_sleep(300).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    s.transport.disconnect();
    assert_eq!(call.await.unwrap().unwrap(), 300);
    // The new connection serves later calls too.
    s.client.test_null().await.unwrap();
}

#[tokio::test]
async fn without_retransmission_a_dropped_connection_is_a_clear_error() {
    let s = setup_with(
        RdmaConfig::default(),
        RdmaConfig::default().retransmit(false),
    )
    .await;
    let c = s.client.clone();
    let call = tokio::spawn(async move { c.test_sleep(300).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    s.transport.disconnect();
    let err = call.await.unwrap().unwrap_err();
    assert!(
        matches!(err, rpc::Error::Transport(TransportError::Closed)),
        "{err}"
    );
}

#[tokio::test]
async fn the_server_calls_back_while_forward_calls_are_in_flight() {
    let s = setup_with(
        RdmaConfig::default().backward_credits(4),
        RdmaConfig::default().backchannel(callback_server(), 4),
    )
    .await;
    let slow = {
        let c = s.client.clone();
        tokio::spawn(async move { c.test_sleep(200).await })
    };
    let mut callbacks = Vec::new();
    for n in 0..8u32 {
        let c = s.client.clone();
        callbacks.push(tokio::spawn(async move { c.test_callback(n).await }));
    }
    for (n, t) in callbacks.into_iter().enumerate() {
        assert_eq!(t.await.unwrap().unwrap(), n as u32 + 1);
    }
    assert_eq!(slow.await.unwrap().unwrap(), 200);
}

#[tokio::test]
async fn a_result_filled_into_a_registered_buffer_moves_without_a_copy() {
    let s = setup().await;
    let len = 1 << 20;
    // The caller receives into its own registered buffer too.
    let buffer = s.client.rpc().buffer(len);
    assert!(buffer.is_registered());
    let res = s
        .client
        .rpc()
        .call_with::<testvers::TestFill>(&(len as u32), CallOptions::new().reply_buffer(buffer))
        .await
        .unwrap();
    let mut expected = vec![0; len];
    fill(&mut expected, 5);
    assert_eq!(&res.data[..], &expected[..]);
    let (_, server_pool) = s.listener.stats()[0];
    assert_eq!(server_pool.copied_bytes, 0, "{server_pool:?}");
    assert_eq!(server_pool.zero_copy_bytes, len as u64);
    let client_pool = s.transport.pool_stats();
    assert_eq!(client_pool.copied_bytes, 0, "{client_pool:?}");
}

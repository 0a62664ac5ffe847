//! The probe extension between real endpoints over the software provider: a server that
//! knows it answers, one that does not answers RDMA2_ERR_INVAL_HTYPE, and the connection
//! carries on either way (seed 003 sections 5.2 and 9).

use std::sync::Arc;

use bytes::Bytes;
use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::Client;
use rpcrdma::transport::conformance::program::{server, TestversClient};
use rpcrdma::transport::{serve, RdmaConfig, RdmaTransport};
use rpcrdma_probe::{peer_max_payload, probe, Probe, ProbeError};

/// A server with `server_config`, and a version 2 client that knows the extension.
async fn connect(server_config: RdmaConfig) -> (Arc<RdmaTransport<SoftProvider>>, TestversClient) {
    let provider = Arc::new(SoftProvider::default());
    let listener = provider
        .listen("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let server = serve::<SoftProvider>(listener, server(), server_config);
    tokio::spawn(async move { server.run().await });
    let config = RdmaConfig::default()
        .version_2(true)
        .extension(Probe::new(4096));
    let transport = Arc::new(
        RdmaTransport::connect(provider, addr, config)
            .await
            .unwrap(),
    );
    let client = TestversClient::new(Client::from_arc(transport.clone()));
    // The first call settles the version.
    client.test_null().await.unwrap();
    (transport, client)
}

#[tokio::test]
async fn a_server_that_knows_the_extension_answers_probes() {
    let (t, client) = connect(
        RdmaConfig::default()
            .version_2(true)
            .extension(Probe::new(3000)),
    )
    .await;
    assert_eq!(t.version(), 2);
    // Section 9.2: the server's property says it knows the extension.
    assert_eq!(peer_max_payload(&t), Some(3000));
    let payload = Bytes::from(vec![0xa5; 3000]);
    // The flag (section 9.4) asks for the payload back.
    assert_eq!(probe(&t, 7, payload.clone(), true).await.unwrap(), payload);
    assert_eq!(probe(&t, 8, payload, false).await.unwrap(), Bytes::new());
    // The new error code (section 9.3).
    let err = probe(&t, 9, Bytes::from(vec![1; 3001]), true)
        .await
        .unwrap_err();
    assert!(matches!(err, ProbeError::TooLong), "{err}");
    // Longer than the server's receive buffer: refused here, never sent.
    let too_long = RdmaConfig::default().inline_size + 1;
    let err = probe(&t, 11, Bytes::from(vec![1; too_long]), false)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ProbeError::Transport(rpcrdma::rpc::TransportError::TooLarge { .. })
        ),
        "{err}"
    );
    // The connection carries on.
    client.test_null().await.unwrap();
    assert_eq!(
        probe(&t, 10, Bytes::from_static(b"ok"), true)
            .await
            .unwrap(),
        "ok"
    );
}

#[tokio::test]
async fn a_server_that_does_not_know_it_answers_inval_htype_and_carries_on() {
    let (t, client) = connect(RdmaConfig::default().version_2(true)).await;
    assert_eq!(t.version(), 2);
    assert_eq!(peer_max_payload(&t), None);
    let err = probe(&t, 1, Bytes::from_static(b"ping"), true)
        .await
        .unwrap_err();
    assert!(matches!(err, ProbeError::Unknown), "{err}");
    client.test_null().await.unwrap();
}

#[tokio::test]
async fn a_version_1_server_leaves_no_room_for_extensions() {
    let (t, client) = connect(RdmaConfig::default()).await;
    assert_eq!(t.version(), 1);
    let err = probe(&t, 1, Bytes::new(), false).await.unwrap_err();
    assert!(matches!(err, ProbeError::Transport(_)), "{err}");
    client.test_null().await.unwrap();
}

//! RPC-over-RDMA version 1 traffic of `rpcrdma::transport` over the software provider on
//! loopback: calls of the transport conformance suite's program that move inline, by Read
//! chunks (one and two, at their Positions), by a Write chunk, through a Reply chunk and as
//! a long call (RDMA_NOMSG with a Position-Zero Read chunk). The same calls run in version 2
//! ([`capture_with`]).

use std::sync::Arc;

use rpcrdma::rdma::soft::{MpaConfig, PcapTap, RnicKind, SoftConfig, SoftProvider};
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::Client;
use rpcrdma::transport::conformance::program::{
    self, pattern, EchoArgs, PlainArgs, TestversClient, TwoArgs,
};
use rpcrdma::transport::{serve, RdmaConfig, RdmaTransport};

/// The software provider the captures are made with, tapped when `tap` is given: MPA revision
/// 1 (RFC 5044), CRCs, no markers, which is what Wireshark 4.0's MPA dissector knows without
/// warnings (it warns about revision 2's fields).
pub fn provider(tap: Option<Arc<PcapTap>>) -> SoftProvider {
    SoftProvider::new(SoftConfig {
        mpa: MpaConfig {
            kind: RnicKind::Ietf,
            markers: false,
            crc: true,
            revision: 1,
        },
        tap: tap.map(|t| t as _),
        // Local completions: no confirmation probes, the same frames in every run.
        confirm_completions: false,
        ..SoftConfig::default()
    })
}

/// Runs the calls and returns the client's capture as a pcap file.
pub async fn capture() -> Vec<u8> {
    capture_with(RdmaConfig::default()).await
}

/// [`capture`] with both ends configured by `config` (version 2 with
/// [`RdmaConfig::version_2`]).
pub async fn capture_with(config: RdmaConfig) -> Vec<u8> {
    let tap = Arc::new(PcapTap::new());
    let server = provider(None);
    let listener = server
        .listen("127.0.0.1:0".parse().unwrap())
        .await
        .expect("listen");
    let addr = listener.local_addr().expect("listener address");
    let rdma = serve::<SoftProvider>(listener, program::server(), config.clone());
    let serving = tokio::spawn(async move { rdma.run().await });
    let client = Arc::new(provider(Some(tap.clone())));
    let transport = RdmaTransport::connect(client, addr, config)
        .await
        .expect("connect");
    let transport = Arc::new(transport);
    let c = TestversClient::new(Client::from_arc(transport.clone()));
    // Inline both ways.
    c.test_null().await.expect("NULL");
    // A Read chunk for the argument, a Write chunk for the result (8 KiB, more than a
    // receive buffer holds).
    let data = pattern(8192, 1);
    let echoed = c
        .test_echo(EchoArgs {
            tag: 1,
            data: data.clone(),
        })
        .await
        .expect("ECHO");
    assert_eq!(echoed.data, data);
    // Two Read chunks at their Positions (each too large to stay inline).
    c.test_two(TwoArgs {
        first: pattern(6000, 2),
        middle: 7,
        second: pattern(7000, 3),
    })
    .await
    .expect("TWO");
    // A reply larger than the client's receive buffers: the Reply chunk.
    let big = c.test_big(20_000).await.expect("BIG");
    assert_eq!(big.data.len(), 20_000);
    // A call larger than the server's receive buffers, nothing DDP-eligible: a long call.
    c.test_longargs(PlainArgs {
        data: pattern(20_000, 4),
    })
    .await
    .expect("LONGARGS");
    transport.disconnect();
    serving.abort();
    tap.pcap()
}

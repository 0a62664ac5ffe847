//! Peers that stall connection setup against an RPC-over-RDMA server on the software provider:
//! silent, trickling, half-open, vanishing mid-handshake, and floods over the negotiation cap
//! and the connection limit. Each test names its class, asserts the server's answer (an MPA
//! Reply, its Reject bit, or the close), and that a legitimate client completes its handshake
//! and its calls while the hostile peers are stalled. The server's MPA handshake timeout is 60 s
//! and every wait has a 20 s safety net: a client that got in did not wait for a stalled peer's
//! timeout. Resource figures (descriptors, tasks, resident memory) return to their baseline
//! once the hostile peers are gone.
//!
//! The hostile peers are raw bytes on a tokio `TcpStream` (`support/stall.rs`).

#[path = "support/stall.rs"]
mod stall;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rpcrdma::rdma::soft::{SoftConfig, SoftProvider};
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::Client;
use rpcrdma::transport::conformance::program::{server, EchoArgs, TestversClient};
use rpcrdma::transport::{serve, RdmaConfig, RdmaListener, RdmaTransport};
use stall::{
    assert_back_to, closed_by_server, mpa_request, one_at_a_time, partial, read_mpa_answer, reset,
    silent, still_open, Figures, Seen, Trickle, MPA_REJECT, SAFETY,
};
use tokio::task::JoinHandle;

/// The server's MPA handshake timeout: three safety nets, so no test gets in by waiting it out.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);

/// Resident memory may stay this much above its baseline, which is taken once a client has
/// been served: the allocator keeps freed memory in per-thread arenas, and which worker
/// thread a connection's buffers (100+ KiB at each end) came from varies; 2-4 MiB of such
/// drift was seen after a test, none of it growing with the number of peers.
const RSS_SLACK_KIB: usize = 8 * 1024;

/// An RPC-over-RDMA server of the transport test program on a loopback port.
struct Served {
    listener: Arc<RdmaListener<SoftProvider>>,
    addr: SocketAddr,
    running: JoinHandle<rpcrdma::rdma::Result<()>>,
}

impl Served {
    /// Serves with a 60 s handshake timeout, `max_handshakes` and `max_connections`.
    async fn start(max_handshakes: usize, max_connections: usize) -> Served {
        let provider = SoftProvider::new(SoftConfig {
            handshake_timeout: HANDSHAKE_TIMEOUT,
            max_handshakes,
            ..SoftConfig::default()
        });
        let listener = provider
            .listen("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let config = RdmaConfig::default().max_connections(max_connections);
        let listener = Arc::new(serve::<SoftProvider>(listener, server(), config));
        let running = tokio::spawn({
            let listener = listener.clone();
            async move { listener.run().await }
        });
        Served {
            listener,
            addr,
            running,
        }
    }

    /// The resource figures once a legitimate client has been served: the allocator holds
    /// what a connection's buffers need from then on, so what stays above this is a leak.
    async fn baseline(&self) -> Figures {
        let before = Figures::now();
        legit_client(self.addr).await.unwrap();
        // Its connection closed at both ends: descriptors and tasks as before.
        assert_back_to(&before, usize::MAX).await;
        Figures::now()
    }

    /// Stops the server and waits for its connections to close.
    async fn stop(self) {
        tokio::time::timeout(SAFETY, self.listener.shutdown())
            .await
            .expect("the server shuts down");
        let _ = tokio::time::timeout(SAFETY, self.running).await;
    }
}

/// A legitimate client: a default software provider and transport, which connects and makes
/// a NULL call and an echo; within the safety net.
async fn legit_client(addr: SocketAddr) -> Result<(), String> {
    let work = async {
        let transport = RdmaTransport::connect(
            Arc::new(SoftProvider::default()),
            addr,
            RdmaConfig::default(),
        )
        .await
        .map_err(|e| format!("connect: {e}"))?;
        let client = TestversClient::new(Client::new(transport));
        client.test_null().await.map_err(|e| format!("NULL: {e}"))?;
        let echoed = client
            .test_echo(EchoArgs {
                tag: 7,
                data: b"not delayed".to_vec().into(),
            })
            .await
            .map_err(|e| format!("ECHO: {e}"))?;
        if echoed.tag != 7 || &echoed.data[..] != b"not delayed" {
            return Err(format!("ECHO answered {echoed:?}"));
        }
        Ok(())
    };
    tokio::time::timeout(SAFETY, work)
        .await
        .map_err(|_| "the client did not finish within the safety net".to_string())?
}

/// Retries [`legit_client`] until it gets in (the server frees places as it notices peers
/// left), within the safety net.
async fn legit_client_eventually(addr: SocketAddr) {
    let deadline = tokio::time::Instant::now() + SAFETY;
    loop {
        match legit_client(addr).await {
            Ok(()) => return,
            Err(e) if tokio::time::Instant::now() >= deadline => {
                panic!("the client never got in: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// The private data of an RFC 8797 RPC-over-RDMA version 1 client: the magic 0xf6ab0e18, the
/// version 1, the flags and the two inline sizes (4 KiB each, `(4096 >> 10) - 1` = 3).
fn rfc8797_private_data() -> Vec<u8> {
    vec![0xf6, 0xab, 0x0e, 0x18, 1, 0, 3, 3]
}

#[test]
fn silent_peers_do_not_delay_a_client() {
    one_at_a_time(async {
        let served = Served::start(64, 64).await;
        let baseline = served.baseline().await;
        let mut peers = Vec::new();
        for _ in 0..4 {
            peers.push(silent(served.addr).await);
        }
        legit_client(served.addr).await.unwrap();
        // Nothing waited for the silent peers' timeouts: they are still negotiating.
        assert!(peers.iter().all(still_open));
        drop(peers);
        assert_back_to(&baseline, RSS_SLACK_KIB).await;
        served.stop().await;
    });
}

#[test]
fn a_peer_trickling_its_mpa_request_does_not_delay_a_client() {
    one_at_a_time(async {
        let served = Served::start(64, 64).await;
        let baseline = served.baseline().await;
        // A byte every 250 ms: the 28-byte Request would take 7 s.
        let trickle = Trickle::start(
            served.addr,
            mpa_request(&rfc8797_private_data()),
            Duration::from_millis(250),
        )
        .await;
        legit_client(served.addr).await.unwrap();
        assert!(
            trickle.sent() < trickle.len,
            "the client got in while the Request was still trickling in ({} of {} bytes)",
            trickle.sent(),
            trickle.len
        );
        drop(trickle);
        assert_back_to(&baseline, RSS_SLACK_KIB).await;
        served.stop().await;
    });
}

#[test]
fn a_trickled_mpa_request_gets_no_more_than_the_handshake_deadline() {
    one_at_a_time(async {
        // Here the deadline is short and the trickle long: the server's answer is the close.
        let provider = SoftProvider::new(SoftConfig {
            handshake_timeout: Duration::from_millis(500),
            ..SoftConfig::default()
        });
        let listener = provider
            .listen("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        // A byte every 100 ms keeps every single read short; the whole Request would take 2.8 s,
        // more than five deadlines.
        let mut trickle = Trickle::start(
            addr,
            mpa_request(&rfc8797_private_data()),
            Duration::from_millis(100),
        )
        .await;
        assert!(trickle.stopped().await, "the server closed the connection");
        assert!(
            trickle.sent() < trickle.len,
            "closed before the Request was complete ({} of {} bytes)",
            trickle.sent(),
            trickle.len
        );
        assert_eq!(listener.handshakes(), 0, "its place came back");
    });
}

#[test]
fn a_half_open_peer_does_not_delay_a_client() {
    one_at_a_time(async {
        let served = Served::start(64, 64).await;
        let baseline = served.baseline().await;
        // Part of a Request, then nothing: neither reads, nor writes, nor closes (its host is
        // gone, as far as the server can tell).
        let request = mpa_request(&rfc8797_private_data());
        let half_open = partial(served.addr, &request, 10).await;
        legit_client(served.addr).await.unwrap();
        assert!(
            still_open(&half_open),
            "still waiting for the rest of its Request"
        );
        drop(half_open);
        assert_back_to(&baseline, RSS_SLACK_KIB).await;
        served.stop().await;
    });
}

#[test]
fn peers_vanishing_mid_handshake_give_their_places_back() {
    one_at_a_time(async {
        // One place to negotiate in: the client only gets in if the vanished peers gave theirs
        // back at once, not at their 60 s timeout.
        let served = Served::start(1, 64).await;
        let baseline = served.baseline().await;
        let request = mpa_request(&rfc8797_private_data());
        // A reset in the middle of the Request.
        let resetting = partial(served.addr, &request, 9).await;
        reset(resetting);
        legit_client_eventually(served.addr).await;
        // A close (FIN) in the middle of the Request.
        let closing = partial(served.addr, &request, 21).await;
        drop(closing);
        legit_client_eventually(served.addr).await;
        assert_back_to(&baseline, RSS_SLACK_KIB).await;
        served.stop().await;
    });
}

#[test]
fn a_flood_over_the_negotiation_cap_is_refused_at_once() {
    one_at_a_time(async {
        const CAP: usize = 8;
        let served = Served::start(CAP, 64).await;
        let baseline = served.baseline().await;
        let mut flood = Vec::new();
        for _ in 0..CAP {
            flood.push(silent(served.addr).await);
        }
        // Over the cap: closed unread, long before any handshake timeout.
        for _ in 0..4 {
            let mut over = silent(served.addr).await;
            assert!(closed_by_server(&mut over).await, "refused at once");
        }
        // So is a legitimate client while the flood holds every place: it is told at once, by
        // the close (no MPA Reply: its Request was never read).
        let refused = legit_client(served.addr).await;
        assert!(
            refused
                .as_ref()
                .is_err_and(|e| e.starts_with("connect") && !e.contains("rejected")),
            "{refused:?}"
        );
        assert!(
            flood.iter().all(still_open),
            "the cap's peers are untouched"
        );
        // Once the flood is gone, the client gets in.
        drop(flood);
        legit_client_eventually(served.addr).await;
        assert_back_to(&baseline, RSS_SLACK_KIB).await;
        served.stop().await;
    });
}

#[test]
fn a_flood_over_the_connection_limit_is_rejected_at_once() {
    one_at_a_time(async {
        const LIMIT: usize = 4;
        let served = Served::start(64, LIMIT).await;
        let baseline = served.baseline().await;
        let request = mpa_request(&rfc8797_private_data());
        // Peers that complete the MPA exchange and then stay idle hold every place.
        let mut flood = Vec::new();
        for _ in 0..LIMIT {
            let mut peer = partial(served.addr, &request, request.len()).await;
            match read_mpa_answer(&mut peer).await {
                Seen::Reply { flags } => assert_eq!(flags & MPA_REJECT, 0, "accepted"),
                other => panic!("expected an MPA Reply, saw {other:?}"),
            }
            flood.push(peer);
        }
        assert_eq!(served.listener.connection_count(), LIMIT);
        // One more: an MPA Reply with the Reject bit (RFC 5044 section 7.1), at once.
        let mut over = partial(served.addr, &request, request.len()).await;
        match read_mpa_answer(&mut over).await {
            Seen::Reply { flags } => assert_ne!(flags & MPA_REJECT, 0, "rejected"),
            other => panic!("expected an MPA Reply with the Reject bit, saw {other:?}"),
        }
        assert!(closed_by_server(&mut over).await);
        drop(over);
        // A legitimate client is rejected the same way while the limit holds.
        let refused = legit_client(served.addr).await;
        assert!(
            refused
                .as_ref()
                .is_err_and(|e| e.starts_with("connect: the peer rejected the connection")),
            "{refused:?}"
        );
        // One place given back is one client let in.
        drop(flood.pop());
        legit_client_eventually(served.addr).await;
        drop(flood);
        assert_back_to(&baseline, RSS_SLACK_KIB).await;
        served.stop().await;
    });
}

#[test]
fn every_stall_class_at_once_does_not_delay_a_client() {
    one_at_a_time(async {
        let served = Served::start(64, 64).await;
        let baseline = served.baseline().await;
        let request = mpa_request(&rfc8797_private_data());
        let silent_peers = [silent(served.addr).await, silent(served.addr).await];
        let half_open = partial(served.addr, &request, 17).await;
        let trickle =
            Trickle::start(served.addr, request.clone(), Duration::from_millis(250)).await;
        let vanishing = partial(served.addr, &request, 5).await;
        reset(vanishing);
        // Several clients, one after another, each with its own handshake and calls.
        for _ in 0..3 {
            legit_client(served.addr).await.unwrap();
        }
        assert!(silent_peers.iter().all(still_open) && still_open(&half_open));
        assert!(trickle.sent() < trickle.len);
        drop((silent_peers, half_open, trickle));
        assert_back_to(&baseline, RSS_SLACK_KIB).await;
        served.stop().await;
    });
}

#[test]
fn hundreds_of_silent_peers_leave_nothing_behind() {
    one_at_a_time(async {
        // 256 peers (512 descriptors in this process, under the usual limit of 1024).
        const PEERS: usize = 256;
        let served = Served::start(1024, 64).await;
        let baseline = served.baseline().await;
        let mut peers = Vec::new();
        for _ in 0..PEERS {
            peers.push(silent(served.addr).await);
        }
        legit_client(served.addr).await.unwrap();
        let during = Figures::now();
        eprintln!("with {PEERS} silent peers: {during:?}");
        assert!(
            during.fds >= baseline.fds + 2 * PEERS,
            "each peer held a socket at each end"
        );
        assert!(peers.iter().all(still_open));
        drop(peers);
        assert_back_to(&baseline, RSS_SLACK_KIB).await;
        served.stop().await;
    });
}

//! Peers that stall connection setup against ONC RPC over TCP (`TcpServer`): silent,
//! trickling a record marker, half-open, vanishing mid-record, and a flood over the connection
//! limit. Each test names its class, asserts the server's answer (the reply to a call, or the
//! close), and that a legitimate client connects and calls while the hostile peers are
//! stalled. The first-record timeout is 60 s unless a test is about it, and every wait has a
//! 20 s safety net. Resource figures return to their baseline once the peers are gone.
//!
//! The hostile peers are raw bytes on a tokio `TcpStream` (`support/stall.rs`).

#[path = "support/stall.rs"]
mod stall;

use std::net::SocketAddr;
use std::time::Duration;

use rpcrdma::rpc::tcp::{self, TcpConfig, TcpServer};
use rpcrdma::transport::conformance::program::{server, EchoArgs, TestversClient};
use stall::{
    assert_back_to, closed_by_server, one_at_a_time, partial, reset, silent, still_open, Figures,
    Trickle, SAFETY,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The first-record timeout of the tests not about it: three safety nets.
const FIRST_RECORD_TIMEOUT: Duration = Duration::from_secs(60);

/// Resident memory may stay this much above its baseline (taken once a client has been
/// served): the allocator's per-thread arenas keep some freed memory; under 100 KiB of such
/// drift was seen after a test.
const RSS_SLACK_KIB: usize = 1024;

/// The transport test program's number and version (`testprog.x`).
const TESTPROG: u32 = 0x2000_0077;

/// A TEST_NULL call to the test program as one record (RFC 5531 sections 9 and 11): the
/// record marker (last fragment, 40 octets), then XID, CALL, RPC version 2, program, version
/// 1, procedure 0, and AUTH_NONE credentials and verifier.
fn null_call_record(xid: u32) -> Vec<u8> {
    let words = [xid, 0, 2, TESTPROG, 1, 0, 0, 0, 0, 0];
    let mut out = (0x8000_0000u32 | 40).to_be_bytes().to_vec();
    for w in words {
        out.extend_from_slice(&w.to_be_bytes());
    }
    out
}

/// A TcpServer of the test program on a loopback port with `config`.
async fn serve(config: TcpConfig) -> TcpServer {
    TcpServer::bind("127.0.0.1:0", server(), config)
        .await
        .unwrap()
}

/// The configuration of the tests not about the first-record timeout.
fn patient(max_connections: usize) -> TcpConfig {
    TcpConfig::new()
        .first_record_timeout(Some(FIRST_RECORD_TIMEOUT))
        .max_connections(max_connections)
}

/// A legitimate client: connects, makes a NULL call and an echo, within the safety net.
async fn legit_client(addr: SocketAddr) -> Result<(), String> {
    let work = async {
        let client = tcp::connect_with(addr, TcpConfig::new().retransmits(0))
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let client = TestversClient::new(client);
        client.test_null().await.map_err(|e| format!("NULL: {e}"))?;
        let echoed = client
            .test_echo(EchoArgs {
                tag: 9,
                data: b"not delayed".to_vec().into(),
            })
            .await
            .map_err(|e| format!("ECHO: {e}"))?;
        if echoed.tag != 9 || &echoed.data[..] != b"not delayed" {
            return Err(format!("ECHO answered {echoed:?}"));
        }
        Ok(())
    };
    tokio::time::timeout(SAFETY, work)
        .await
        .map_err(|_| "the client did not finish within the safety net".to_string())?
}

/// Retries [`legit_client`] until it gets in, within the safety net.
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

/// The resource figures once a legitimate client has been served (see
/// `hostile_handshakes.rs`).
async fn baseline(addr: SocketAddr) -> Figures {
    let before = Figures::now();
    legit_client(addr).await.unwrap();
    assert_back_to(&before, usize::MAX).await;
    Figures::now()
}

/// Reads one reply record and returns its XID and the accept status (the seventh word of
/// an accepted reply with an AUTH_NONE verifier), within the safety net.
async fn read_reply(stream: &mut tokio::net::TcpStream) -> (u32, u32) {
    let mut marker = [0u8; 4];
    tokio::time::timeout(SAFETY, stream.read_exact(&mut marker))
        .await
        .unwrap()
        .unwrap();
    let len = (u32::from_be_bytes(marker) & 0x7fff_ffff) as usize;
    assert!(
        (24..=1024).contains(&len),
        "a reply to NULL is short: {len}"
    );
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await.unwrap();
    let word = |i: usize| u32::from_be_bytes(body[4 * i..4 * i + 4].try_into().unwrap());
    // XID, REPLY (1), MSG_ACCEPTED (0), verifier flavor and length, accept_stat.
    assert_eq!((word(1), word(2)), (1, 0), "an accepted reply");
    (word(0), word(5))
}

#[test]
fn tcp_silent_peers_do_not_delay_a_client() {
    one_at_a_time(async {
        let tcp = serve(patient(64)).await;
        let addr = tcp.local_addr();
        let baseline = baseline(addr).await;
        let mut peers = Vec::new();
        for _ in 0..4 {
            peers.push(silent(addr).await);
        }
        legit_client(addr).await.unwrap();
        assert!(peers.iter().all(still_open), "nothing waited for them");
        drop(peers);
        assert_back_to(&baseline, RSS_SLACK_KIB).await;
        tcp.shutdown().await;
    });
}

#[test]
fn tcp_a_peer_trickling_its_record_marker_does_not_delay_a_client() {
    one_at_a_time(async {
        let tcp = serve(patient(64)).await;
        let addr = tcp.local_addr();
        let baseline = baseline(addr).await;
        // A byte every 250 ms: the marker alone takes a second, the record 11 s.
        let trickle = Trickle::start(addr, null_call_record(1), Duration::from_millis(250)).await;
        legit_client(addr).await.unwrap();
        assert!(
            trickle.sent() < trickle.len,
            "the client was served while the record trickled in ({} of {} bytes)",
            trickle.sent(),
            trickle.len
        );
        drop(trickle);
        assert_back_to(&baseline, RSS_SLACK_KIB).await;
        tcp.shutdown().await;
    });
}

#[test]
fn tcp_a_trickled_first_record_gets_no_more_than_its_deadline() {
    one_at_a_time(async {
        let tcp =
            serve(TcpConfig::new().first_record_timeout(Some(Duration::from_millis(500)))).await;
        // A byte every 100 ms: the 44-byte record would take 4.4 s, almost nine deadlines.
        let mut trickle = Trickle::start(
            tcp.local_addr(),
            null_call_record(1),
            Duration::from_millis(100),
        )
        .await;
        assert!(trickle.stopped().await, "the server closed the connection");
        assert!(
            trickle.sent() < trickle.len,
            "closed before the record was complete ({} of {} bytes)",
            trickle.sent(),
            trickle.len
        );
        tcp.shutdown().await;
    });
}

#[test]
fn tcp_a_silent_peer_is_closed_at_the_first_record_deadline() {
    one_at_a_time(async {
        let tcp =
            serve(TcpConfig::new().first_record_timeout(Some(Duration::from_millis(200)))).await;
        let mut peer = silent(tcp.local_addr()).await;
        assert!(closed_by_server(&mut peer).await, "closed, unanswered");
        tcp.shutdown().await;
    });
}

#[test]
fn tcp_a_connection_that_has_spoken_may_stay_idle() {
    one_at_a_time(async {
        let tcp =
            serve(TcpConfig::new().first_record_timeout(Some(Duration::from_millis(200)))).await;
        let mut peer = silent(tcp.local_addr()).await;
        peer.write_all(&null_call_record(7)).await.unwrap();
        assert_eq!(read_reply(&mut peer).await, (7, 0), "NULL answered SUCCESS");
        // Five first-record deadlines of silence: only the first record had one.
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(still_open(&peer));
        peer.write_all(&null_call_record(8)).await.unwrap();
        assert_eq!(read_reply(&mut peer).await, (8, 0));
        tcp.shutdown().await;
    });
}

#[test]
fn tcp_a_half_open_peer_does_not_delay_a_client() {
    one_at_a_time(async {
        let tcp = serve(patient(64)).await;
        let addr = tcp.local_addr();
        let baseline = baseline(addr).await;
        // The marker and part of the call, then nothing at all.
        let half_open = partial(addr, &null_call_record(1), 10).await;
        legit_client(addr).await.unwrap();
        assert!(still_open(&half_open));
        drop(half_open);
        assert_back_to(&baseline, RSS_SLACK_KIB).await;
        tcp.shutdown().await;
    });
}

#[test]
fn tcp_peers_vanishing_mid_record_give_their_places_back() {
    one_at_a_time(async {
        // One place: the client only gets in once each vanished peer's is back.
        let tcp = serve(patient(1)).await;
        let addr = tcp.local_addr();
        let baseline = baseline(addr).await;
        let record = null_call_record(1);
        reset(partial(addr, &record, 6).await);
        legit_client_eventually(addr).await;
        drop(partial(addr, &record, 2).await);
        legit_client_eventually(addr).await;
        assert_back_to(&baseline, RSS_SLACK_KIB).await;
        tcp.shutdown().await;
    });
}

#[test]
fn tcp_a_flood_over_the_connection_limit_is_closed_at_once() {
    one_at_a_time(async {
        const LIMIT: usize = 4;
        let tcp = serve(patient(LIMIT)).await;
        let addr = tcp.local_addr();
        let baseline = baseline(addr).await;
        let mut flood = Vec::new();
        for _ in 0..LIMIT {
            flood.push(silent(addr).await);
        }
        // Over the limit: closed unread, whatever it sends, long before any timeout.
        for _ in 0..4 {
            let mut over = partial(addr, &null_call_record(2), 44).await;
            assert!(closed_by_server(&mut over).await, "closed at once");
        }
        // A legitimate client fails the same way while the flood holds every place.
        let refused = legit_client(addr).await;
        assert!(refused.is_err(), "{refused:?}");
        assert!(
            flood.iter().all(still_open),
            "the limit's peers are untouched"
        );
        // One place given back is one client let in.
        drop(flood.pop());
        legit_client_eventually(addr).await;
        drop(flood);
        assert_back_to(&baseline, RSS_SLACK_KIB).await;
        tcp.shutdown().await;
    });
}

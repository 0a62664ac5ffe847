use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;
use crate::rdma::soft::wire::mpa::StartupFrame;
use crate::rdma::soft::SoftProvider;
use crate::rdma::{ConnectParams, ConnectRequest, Provider};

/// Safety net for waits that end on an event; never the thing asserted.
const SAFETY: Duration = Duration::from_secs(20);

fn provider(max_handshakes: usize) -> SoftProvider {
    SoftProvider::new(SoftConfig {
        // Far above every wait below: nothing here ends by timing out.
        handshake_timeout: Duration::from_secs(60),
        max_handshakes,
        ..SoftConfig::default()
    })
}

/// A revision 1 MPA Request without private data, as bytes.
fn request_bytes() -> Vec<u8> {
    let mut out = Vec::new();
    crate::rdma::soft::MpaConfig {
        revision: 1,
        ..Default::default()
    }
    .request(&[], Default::default())
    .emit(&mut out);
    out
}

/// Waits until `listener` counts `n` handshakes.
async fn until_handshakes(listener: &SoftListener, n: usize) {
    tokio::time::timeout(SAFETY, async {
        while listener.handshakes() != n {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{} handshakes, not {n}", listener.handshakes()));
}

/// True once the peer's side of `stream` is closed (EOF or reset).
async fn closed_by_peer(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(
        tokio::time::timeout(SAFETY, stream.read(&mut byte)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test]
async fn silent_connections_do_not_hold_up_a_request_behind_them() {
    let p = provider(16);
    let listener = p.listen("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut silent = Vec::new();
    for _ in 0..3 {
        silent.push(TcpStream::connect(addr).await.unwrap());
    }
    until_handshakes(&listener, 3).await;
    let (client, server) = tokio::time::timeout(SAFETY, async {
        tokio::join!(
            p.connect(addr, ConnectParams::new()),
            listener.accept(ConnectParams::new())
        )
    })
    .await
    .expect("the client's handshake completes while three peers stay silent");
    client.unwrap();
    server.unwrap();
    // The silent peers are still negotiating: nothing waited for them to end.
    assert_eq!(listener.handshakes(), 3);
}

#[tokio::test]
async fn a_connection_over_the_cap_is_closed_at_once() {
    let p = provider(2);
    let listener = p.listen("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let _a = TcpStream::connect(addr).await.unwrap();
    let _b = TcpStream::connect(addr).await.unwrap();
    until_handshakes(&listener, 2).await;
    let mut third = TcpStream::connect(addr).await.unwrap();
    assert!(closed_by_peer(&mut third).await, "refused at the cap");
    assert_eq!(listener.handshakes(), 2);
}

#[tokio::test]
async fn a_queued_request_holds_its_place_until_answered() {
    let p = provider(1);
    let listener = p.listen("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut first = TcpStream::connect(addr).await.unwrap();
    first.write_all(&request_bytes()).await.unwrap();
    let request = listener.next_request().await.unwrap();
    // Read and taken, not answered: still one of the cap's.
    assert_eq!(listener.handshakes(), 1);
    let mut refused = TcpStream::connect(addr).await.unwrap();
    assert!(closed_by_peer(&mut refused).await);
    request.reject(b"no").await.unwrap();
    until_handshakes(&listener, 0).await;
    let mut head = [0u8; crate::rdma::soft::wire::mpa::STARTUP_HEADER_LEN];
    first.read_exact(&mut head).await.unwrap();
    let (reply, _) = StartupFrame::parse_header(FrameKind::Reply, &head).unwrap();
    assert!(
        reply.reject,
        "the answer is an MPA Reply with the Reject bit"
    );
}

#[tokio::test]
async fn a_peer_leaving_mid_request_gives_its_place_back() {
    let p = provider(1);
    let listener = p.listen("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut leaving = TcpStream::connect(addr).await.unwrap();
    leaving.write_all(&request_bytes()[..7]).await.unwrap();
    until_handshakes(&listener, 1).await;
    drop(leaving);
    until_handshakes(&listener, 0).await;
    let (client, server) = tokio::join!(
        p.connect(addr, ConnectParams::new()),
        listener.accept(ConnectParams::new())
    );
    client.unwrap();
    server.unwrap();
}

#[tokio::test]
async fn dropping_the_listener_closes_queued_requests_and_handshakes() {
    let p = provider(4);
    let listener = p.listen("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut queued = TcpStream::connect(addr).await.unwrap();
    queued.write_all(&request_bytes()).await.unwrap();
    let mut reading = TcpStream::connect(addr).await.unwrap();
    until_handshakes(&listener, 2).await;
    drop(listener);
    assert!(closed_by_peer(&mut queued).await, "a queued request closes");
    assert!(
        closed_by_peer(&mut reading).await,
        "a handshake in progress closes"
    );
    // Nothing listens any more.
    assert!(TcpStream::connect(addr).await.is_err());
}

#[tokio::test]
async fn the_handshake_deadline_covers_the_whole_request() {
    let p = SoftProvider::new(SoftConfig {
        handshake_timeout: Duration::from_millis(200),
        ..SoftConfig::default()
    });
    let listener = p.listen("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut trickler = TcpStream::connect(addr).await.unwrap();
    let request = request_bytes();
    // A byte every 100 ms: each read is quick, the whole Request would take 2 s, ten
    // deadlines.
    let mut sent = 0;
    let closed = tokio::time::timeout(SAFETY, async {
        for byte in &request {
            if trickler.write_all(&[*byte]).await.is_err() {
                return true;
            }
            sent += 1;
            let mut probe = [0u8; 1];
            if let Ok(Ok(0) | Err(_)) =
                tokio::time::timeout(Duration::from_millis(100), trickler.read(&mut probe)).await
            {
                return true;
            }
        }
        false
    })
    .await
    .unwrap();
    assert!(
        closed,
        "the listener closes a trickling peer at its deadline"
    );
    assert!(sent < request.len(), "before the Request was complete");
    until_handshakes(&listener, 0).await;
}

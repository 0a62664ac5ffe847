//! Hostile peers in raw bytes: a peer built by hand on a plain TCP socket
//! (`support/raw_peer.rs`, which shares no code with the crate) against a real server of the
//! transport conformance program on the software provider, and a raw responder against the
//! crate's client. Each test names the protocol's answer and checks it on the wire; each has a
//! control showing the same exchange done right is served.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{self, ConnectParams, Provider};
use rpcrdma::rpc::{self, Client};
use rpcrdma::transport::conformance::program::{testprog, testvers, TestversClient};
use rpcrdma::transport::{RdmaConfig, RdmaTransport};
use tokio::net::TcpListener;

#[path = "support/raw_peer.rs"]
mod raw_peer;
#[path = "support/served.rs"]
#[allow(dead_code)] // Only its server is used here.
mod served;

use raw_peer::*;
use served::{serve_program, two_workers};

/// Waits for `what`, failing the test with its name after a safety net of 30 s: the wait
/// itself is for the event, never for a time.
async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .unwrap_or_else(|_| panic!("{what}: nothing within the 30 s safety net"))
}

/// The private data a well-behaved revision 2 initiator sends: IRD/ORD 4/4 (RFC 6581), then
/// RFC 8797's 4 KiB inline sizes.
fn good_private_data() -> Vec<u8> {
    enhanced_private_data(4, 4, &rfc8797(4096, 4096))
}

async fn connect_good(addr: std::net::SocketAddr) -> RawPeer {
    let peer = within(
        "the MPA Reply",
        RawPeer::connect(addr, &MpaFrame::request(good_private_data())),
    )
    .await
    .expect("the MPA exchange");
    assert!(!peer.peer_frame().reject(), "{:?}", peer.peer_frame());
    peer
}

/// An RPC call of the test program.
fn call(xid: u32, proc: u32, args: &[u32]) -> Vec<u8> {
    rpc_call(xid, testprog::PROGRAM, testvers::VERSION, proc, args)
}

/// The next message from the server, as an RPC-over-RDMA header.
async fn answer(peer: &mut RawPeer, what: &str) -> RpcRdmaHeader {
    match within(what, peer.next()).await.expect(what) {
        Inbound::Send(m) => RpcRdmaHeader::parse(&m).unwrap_or_else(|| panic!("{what}: {m:?}")),
        other => panic!("{what}: {other:?}"),
    }
}

/// The RPC message of a reply to a NULL call `xid`, checked: RDMA_MSG, the same XID in both
/// headers, an accepted SUCCESS.
fn assert_null_reply(h: &RpcRdmaHeader, xid: u32) {
    let RpcRdmaBody::Msg(rpc) = &h.body else {
        panic!("not an RDMA_MSG: {h:?}")
    };
    assert_eq!((h.xid, h.vers, h.proc), (xid, 1, RDMA_MSG));
    assert_eq!(rpc_xid(rpc), Some(xid), "the RPC reply's XID");
    assert_eq!(
        rpc[4..],
        rpc_success(xid, &[])[4..],
        "REPLY, accepted, SUCCESS"
    );
}

/// RFC 6581 section 9: a revision 2 Request whose private data cannot hold the IRD/ORD words
/// gets a Reply with the Reject bit as the first and only thing the server sends, then the
/// close; never an accepting Reply. The listener carries on.
#[test]
fn rejects_a_revision_2_request_with_short_private_data_before_any_accepting_reply() {
    two_workers().block_on(async {
        let provider = SoftProvider::default();
        let (listener, addr, _running) = serve_program(&provider).await;
        for len in 0..4 {
            let request = MpaFrame::request(vec![0x00, 0x04, 0x00][..len].to_vec());
            let mut peer = within("the MPA Reply", RawPeer::connect(addr, &request))
                .await
                .expect("a Reply");
            let reply = peer.peer_frame().clone();
            assert!(reply.reject(), "{len} bytes: {reply:?}");
            assert_eq!((reply.is_reply, reply.revision), (true, 2));
            let after = within("the server's close", peer.drain()).await.unwrap();
            assert!(after.is_empty(), "{len} bytes: then {after:?}");
        }
        assert!(listener.stats().is_empty(), "a connection was accepted");

        // The same server accepts and serves a well-formed Request.
        let mut peer = connect_good(addr).await;
        peer.send_message(&rdma_msg(9, 4, &call(9, 0, &[])))
            .await
            .unwrap();
        assert_null_reply(&answer(&mut peer, "the NULL reply").await, 9);
    });
}

/// Seed 004 section 5.1.1 ("This XID MUST be the same as the XID in the RPC header"), section
/// 5.5: an RDMA_MSG whose XIDs differ gets RDMA_ERROR / ERR_CHUNK with the transport XID, and
/// the call is never dispatched.
#[test]
fn rejects_an_rdma_msg_whose_xids_differ() {
    two_workers().block_on(async {
        let provider = SoftProvider::default();
        let (listener, addr, _running) = serve_program(&provider).await;
        let mut peer = connect_good(addr).await;
        peer.send_message(&rdma_msg(0x100, 4, &call(0x101, 0, &[])))
            .await
            .unwrap();
        let h = answer(&mut peer, "the answer to XIDs 0x100 / 0x101").await;
        assert_eq!((h.xid, h.vers, h.proc), (0x100, 1, RDMA_ERROR), "{h:?}");
        assert!(
            matches!(
                h.body,
                RpcRdmaBody::Error {
                    code: ERR_CHUNK,
                    ..
                }
            ),
            "{h:?}"
        );
        let stats = listener.stats();
        assert_eq!(stats.len(), 1);
        assert_eq!(
            (stats[0].0.calls_received, stats[0].0.errors_sent),
            (0, 1),
            "dispatched"
        );

        // The connection carries on: the same call with equal XIDs is served.
        peer.send_message(&rdma_msg(0x101, 4, &call(0x101, 0, &[])))
            .await
            .unwrap();
        assert_null_reply(&answer(&mut peer, "the NULL reply").await, 0x101);
        assert_eq!(listener.stats()[0].0.calls_received, 1);
    });
}

/// RDMA_NOMSG carrying the call in a Position-Zero Read chunk: the server learns the RPC XID
/// only from its RDMA Read, then answers ERR_CHUNK as for RDMA_MSG.
#[test]
fn rejects_a_long_call_whose_xids_differ_once_it_is_read() {
    two_workers().block_on(async {
        let provider = SoftProvider::default();
        let (listener, addr, _running) = serve_program(&provider).await;
        let mut peer = connect_good(addr).await;
        // Read list: one Position-Zero chunk of the call's length at handle 0x77, offset 0x1000.
        let nomsg = |xid: u32, len: u32| {
            let w = [xid, 1, 4, RDMA_NOMSG, 1, 0, 0x77, len, 0, 0x1000, 0, 0, 0];
            w.iter().flat_map(|v| v.to_be_bytes()).collect::<Vec<u8>>()
        };
        for (xid, rpc_xid, served) in [(0x200, 0x201, false), (0x202, 0x202, true)] {
            let rpc = call(rpc_xid, 0, &[]);
            peer.send_message(&nomsg(xid, rpc.len() as u32))
                .await
                .unwrap();
            let read = match within("the server's RDMA Read", peer.next()).await.unwrap() {
                Inbound::ReadRequest(r) => r,
                other => panic!("{other:?}"),
            };
            assert_eq!(
                (read.src_stag, read.src_to, read.size),
                (0x77, 0x1000, rpc.len() as u32)
            );
            peer.send_read_response(&read, &rpc).await.unwrap();
            let h = answer(&mut peer, "the answer to the long call").await;
            if served {
                assert_null_reply(&h, xid);
            } else {
                assert_eq!((h.xid, h.proc), (xid, RDMA_ERROR), "{h:?}");
                assert!(
                    matches!(
                        h.body,
                        RpcRdmaBody::Error {
                            code: ERR_CHUNK,
                            ..
                        }
                    ),
                    "{h:?}"
                );
            }
            let calls = listener.stats()[0].0.calls_received;
            assert_eq!(calls, served as u64, "calls dispatched");
        }
    });
}

/// A ULPDU too short for the DDP header its first byte announces is DDP's error: the
/// Terminate names layer DDP (1), error type 0, code 0 (RFC 5041 section 7.2 has no code for a
/// header cut short), not an MPA Request/Reply frame error. Then the server closes.
#[test]
fn terminates_a_ulpdu_too_short_for_a_ddp_header_at_the_ddp_layer() {
    two_workers().block_on(async {
        let provider = SoftProvider::default();
        let (_listener, addr, _running) = serve_program(&provider).await;
        let untagged = untagged_header(opcode::SEND, true, 0, 0, 1, 0);
        let tagged = tagged_header(opcode::RDMA_WRITE, true, 0x77, 0);
        let cuts: [&[u8]; 5] = [
            &[],
            &untagged[..2],
            &untagged[..17],
            &tagged[..1],
            &tagged[..13],
        ];
        for cut in cuts {
            let mut peer = connect_good(addr).await;
            peer.send_ulpdu(cut).await.unwrap();
            let seen = within("the Terminate and the close", peer.drain())
                .await
                .unwrap();
            let [Inbound::Terminate(t)] = &seen[..] else {
                panic!("{} bytes: {seen:?}", cut.len())
            };
            assert_eq!((t.layer, t.etype, t.code), (1, 0, 0), "{} bytes", cut.len());
        }
        // A whole Send on a fresh connection is served.
        let mut peer = connect_good(addr).await;
        peer.send_message(&rdma_msg(5, 4, &call(5, 0, &[])))
            .await
            .unwrap();
        assert_null_reply(&answer(&mut peer, "the NULL reply").await, 5);
    });
}

/// The initiator's side of RFC 6581 section 9: the crate's client refuses a revision 2 Reply
/// whose private data cannot hold the IRD/ORD words, and closes without sending anything.
#[test]
fn a_client_refuses_a_revision_2_reply_with_short_private_data() {
    two_workers().block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        for (pd, accepted) in [(vec![0, 4], false), (good_private_data(), true)] {
            let client = tokio::spawn(async move {
                SoftProvider::default()
                    .connect(addr, ConnectParams::new())
                    .await
            });
            let raw = within("the client's MPA Request", RawPeer::accept(&listener))
                .await
                .unwrap();
            assert_eq!(raw.request.revision, 2);
            assert!(raw.request.enhanced() && raw.request.private_data.len() >= 4);
            let mut peer = raw.reply(&MpaFrame::reply(pd)).await.unwrap();
            let outcome = within("the client's outcome", client).await.unwrap();
            if accepted {
                assert!(outcome.is_ok(), "{:?}", outcome.err());
                continue;
            }
            match outcome {
                Err(rdma::Error::Establishment(why)) => assert!(why.contains("IRD/ORD"), "{why}"),
                other => panic!("{:?}", other.err()),
            }
            let after = within("the client's close", peer.drain()).await.unwrap();
            assert!(after.is_empty(), "then {after:?}");
        }
    });
}

/// The requester's side of seed 004 section 5.1.1: a reply whose RPC XID is not its transport
/// XID fails the call with a protocol error (section 5.5: "the requester SHOULD drop the RPC
/// request and return an error"), and is not delivered as the call's result.
#[test]
fn a_client_fails_a_call_whose_reply_carries_another_rpc_xid() {
    two_workers().block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let provider = Arc::new(SoftProvider::default());
        let config = RdmaConfig::default().timeout(Some(Duration::from_secs(30)));
        let connecting =
            tokio::spawn(async move { RdmaTransport::connect(provider, addr, config).await });
        let raw = within("the client's MPA Request", RawPeer::accept(&listener))
            .await
            .unwrap();
        let mut peer = raw
            .reply(&MpaFrame::reply(good_private_data()))
            .await
            .unwrap();
        let transport = within("the client's transport", connecting)
            .await
            .unwrap()
            .expect("connected");
        let client = TestversClient::new(Client::from_arc(Arc::new(transport)));

        for (flip, served) in [(0x8000_0000u32, false), (0, true)] {
            let caller = {
                let client = client.clone();
                tokio::spawn(async move { client.test_null().await })
            };
            let h = answer(&mut peer, "the client's call").await;
            let RpcRdmaBody::Msg(rpc) = &h.body else {
                panic!("{h:?}")
            };
            assert_eq!(rpc_xid(rpc), Some(h.xid), "the client's own call");
            peer.send_message(&rdma_msg(h.xid, 4, &rpc_success(h.xid ^ flip, &[])))
                .await
                .unwrap();
            let result = within("the call's result", caller).await.unwrap();
            if served {
                assert!(result.is_ok(), "{result:?}");
            } else {
                match result {
                    Err(rpc::Error::Transport(rpc::TransportError::Protocol(why))) => {
                        assert!(why.contains("RPC XID"), "{why}")
                    }
                    other => panic!("{other:?}"),
                }
            }
        }
    });
}

/// The raw peer's CRC32c is the textbook one (its check value), so that what the server
/// accepts above is checked against an independent implementation.
#[test]
fn the_raw_peers_crc32c_is_crc32c() {
    assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    assert_eq!(crc32c(b""), 0);
}

/// Seed 004 section 4.3: "The requester MUST NOT send unacknowledged requests in excess of
/// this granted responder credit limit. If the limit is exceeded, the RDMA layer may signal an
/// error, possibly terminating the connection." A peer that sends one call more than the 32
/// credits the server grants, while the others are still running, loses its connection;
/// another connection is served meanwhile.
#[test]
fn closes_the_connection_of_a_peer_over_its_credits() {
    two_workers().block_on(async {
        let provider = SoftProvider::default();
        let (listener, addr, _running) = serve_program(&provider).await;
        let mut peer = connect_good(addr).await;
        const TEST_SLEEP: u32 = 6;
        for xid in 1..=33 {
            peer.send_message(&rdma_msg(xid, 32, &call(xid, TEST_SLEEP, &[10_000])))
                .await
                .unwrap();
        }
        let after = within("the server's close", peer.drain()).await.unwrap();
        assert!(
            !after.iter().any(|m| matches!(m, Inbound::Send(_))),
            "no reply to any call: {after:?}"
        );
        // A well-behaved connection is served.
        let mut other = connect_good(addr).await;
        other
            .send_message(&rdma_msg(7, 4, &call(7, 0, &[])))
            .await
            .unwrap();
        assert_null_reply(&answer(&mut other, "the NULL reply").await, 7);
        assert_eq!(
            listener.stats().len(),
            1,
            "only the well-behaved one is open"
        );
    });
}

/// A peer that completes the MPA exchange and then says nothing is closed after the server's
/// first-message timeout, not kept for ever.
#[test]
fn closes_a_connection_whose_peer_sends_nothing_after_the_handshake() {
    two_workers().block_on(async {
        let provider = SoftProvider::default();
        let listener = provider
            .listen("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let addr = rdma::Listener::local_addr(&listener).unwrap();
        let config = RdmaConfig::default().first_message_timeout(Some(Duration::from_millis(300)));
        let server = Arc::new(rpcrdma::transport::serve::<SoftProvider>(
            listener,
            rpcrdma::transport::conformance::program::server(),
            config,
        ));
        tokio::spawn({
            let server = server.clone();
            async move { server.run().await }
        });
        let mut silent = connect_good(addr).await;
        let after = within("the server's close", silent.drain()).await.unwrap();
        assert!(
            !after.iter().any(|m| matches!(m, Inbound::Send(_))),
            "{after:?}"
        );
        // One that speaks in time is served, and stays.
        let mut peer = connect_good(addr).await;
        peer.send_message(&rdma_msg(5, 4, &call(5, 0, &[])))
            .await
            .unwrap();
        assert_null_reply(&answer(&mut peer, "the NULL reply").await, 5);
        tokio::time::sleep(Duration::from_millis(600)).await;
        peer.send_message(&rdma_msg(6, 4, &call(6, 0, &[])))
            .await
            .unwrap();
        assert_null_reply(&answer(&mut peer, "the second NULL reply").await, 6);
    });
}

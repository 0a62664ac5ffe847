//! Hostile peers against an RPC-over-RDMA server over the software provider: a raw connection
//! that speaks the wire format but lies gets the protocol's answer (RDMA_ERROR with the right
//! code) or a closed connection, never a panic; meanwhile a well-behaved client on the same
//! server completes its calls.

#[path = "support/testprog.rs"]
mod testprog;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

use bytes::Bytes;
use rpcrdma::rdma::soft::{SoftConnection, SoftProvider};
use rpcrdma::rdma::{
    Access, ConnectParams, Connection, Listener, MemoryRegion, Provider, RecvWr, SendWr, Sge,
    WcOpcode, WcStatus,
};
use rpcrdma::rpc::{self, Client};
use rpcrdma::transport::header::{self, Body, Chunks, Header, ReadChunk, Segment};
use rpcrdma::transport::private_data::PrivateData;
use rpcrdma::transport::{serve, RdmaConfig, RdmaListener, RdmaTransport};
use rpcrdma::xdr::Encoder;
use testprog::*;

static PANICS: AtomicUsize = AtomicUsize::new(0);

/// Counts panics anywhere in the process, spawned tasks included (tokio catches those).
fn count_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            previous(info);
        }));
    });
}

const CREDITS: u32 = 4;
const RECV_SIZE: usize = 4096;

struct Server {
    provider: Arc<SoftProvider>,
    addr: SocketAddr,
    _listener: Arc<RdmaListener<SoftProvider>>,
}

async fn server() -> Server {
    count_panics();
    let provider = Arc::new(SoftProvider::default());
    let listener = provider
        .listen("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let listener = Arc::new(serve::<SoftProvider>(
        listener,
        testprog::server(),
        RdmaConfig::default().credits(CREDITS),
    ));
    tokio::spawn({
        let l = listener.clone();
        async move { l.run().await }
    });
    Server {
        provider,
        addr,
        _listener: listener,
    }
}

/// A well-behaved client that must keep being served.
async fn good_client(s: &Server) -> TestversClient {
    let t = RdmaTransport::connect(s.provider.clone(), s.addr, RdmaConfig::default())
        .await
        .unwrap();
    TestversClient::new(Client::new(t))
}

async fn still_served(good: &TestversClient) {
    let data = pattern(100_000, 1);
    let r = good
        .test_echo(EchoArgs {
            tag: 1,
            data: data.clone(),
        })
        .await
        .expect("the good client's call");
    assert_eq!(r.data, data);
}

/// A peer that speaks the wire format by hand.
struct Raw {
    conn: SoftConnection,
    recv: MemoryRegion,
    next: u64,
}

/// What came back.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Message(Vec<u8>),
    Closed,
    Nothing,
}

impl Raw {
    async fn connect(s: &Server) -> Raw {
        let pd = PrivateData {
            remote_invalidate: false,
            send_size: RECV_SIZE,
            receive_size: RECV_SIZE,
        };
        let mut recv = None;
        let conn = s
            .provider
            .connect_with(
                s.addr,
                ConnectParams::new().private_data(pd.encode().to_vec()),
                |c| {
                    let r = c.register(vec![0; 8 * RECV_SIZE], Access::LOCAL_WRITE)?;
                    for slot in 0..8 {
                        c.post_recv(RecvWr::new(
                            1000 + slot,
                            Sge::new(
                                &r,
                                slot as usize * RECV_SIZE..(slot as usize + 1) * RECV_SIZE,
                            )?,
                        ))?;
                    }
                    recv = Some(r);
                    Ok(())
                },
            )
            .await
            .unwrap();
        Raw {
            conn,
            recv: recv.unwrap(),
            next: 1,
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        let mr = self.conn.register(bytes.to_vec(), Access::NONE).unwrap();
        self.next += 1;
        // A closed connection refuses the post; the answer says so.
        let _ = self
            .conn
            .post_send(SendWr::send(self.next, vec![Sge::whole(&mr)]));
    }

    /// The next message the server sends, or whether the connection closed.
    async fn answer(&mut self) -> Answer {
        loop {
            let c =
                match tokio::time::timeout(Duration::from_millis(500), self.conn.poll_completion())
                    .await
                {
                    Ok(c) => c,
                    Err(_) => return Answer::Nothing,
                };
            if c.opcode != WcOpcode::Recv {
                if !c.is_success() {
                    return Answer::Closed;
                }
                continue;
            }
            if c.status != WcStatus::Success {
                return Answer::Closed;
            }
            let slot = (c.wr_id - 1000) as usize;
            let bytes = self
                .recv
                .to_vec(slot * RECV_SIZE..slot * RECV_SIZE + c.byte_len as usize)
                .unwrap();
            let _ = self.conn.post_recv(RecvWr::new(
                c.wr_id,
                Sge::new(&self.recv, slot * RECV_SIZE..(slot + 1) * RECV_SIZE).unwrap(),
            ));
            return Answer::Message(bytes);
        }
    }

    /// Waits until the server has closed the connection.
    async fn closed(&mut self) -> bool {
        for _ in 0..20 {
            match self.answer().await {
                Answer::Closed => return true,
                Answer::Nothing if !self.conn.is_connected() => return true,
                _ => {}
            }
        }
        false
    }
}

fn encode(h: &Header) -> Vec<u8> {
    let mut enc = Encoder::new();
    header::encode(h, &mut enc).unwrap();
    enc.finish().into_bytes().to_vec()
}

/// An RPC call header for TESTPROG procedure `proc`, then `args` words.
fn rpc_call(xid: u32, proc: u32, args: &[u32]) -> Vec<u8> {
    let mut v = Vec::new();
    for w in [xid, 0, 2, 0x2000_0077, 1, proc, 0, 0, 0, 0] {
        v.extend_from_slice(&w.to_be_bytes());
    }
    for w in args {
        v.extend_from_slice(&w.to_be_bytes());
    }
    v
}

fn message(xid: u32, body: Body, rpc: &[u8]) -> Vec<u8> {
    let mut m = encode(&Header {
        xid,
        credit: CREDITS,
        body,
    });
    m.extend_from_slice(rpc);
    m
}

fn parsed(a: Answer) -> Header {
    match a {
        Answer::Message(m) => header::parse(&m, &Default::default()).unwrap().0,
        other => panic!("expected an answer, got {other:?}"),
    }
}

fn seg(handle: u32, len: u32, offset: u64) -> Segment {
    Segment {
        rdma_handle: handle,
        rdma_length: len,
        rdma_offset: offset,
    }
}

/// Runs one hostile case: the raw peer's exchange, then the good client's calls.
async fn case<F, Fut>(f: F)
where
    F: FnOnce(Raw) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let s = server().await;
    let good = good_client(&s).await;
    still_served(&good).await;
    let raw = Raw::connect(&s).await;
    f(raw).await;
    still_served(&good).await;
    // A fresh connection is served too.
    still_served(&good_client(&s).await).await;
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "something panicked");
}

#[tokio::test]
async fn a_misaligned_position_gets_err_chunk() {
    case(|mut raw| async move {
        let body = Body::Msg(Chunks {
            reads: vec![ReadChunk {
                position: 46,
                segments: vec![seg(0x100, 8, 0)],
            }],
            ..Default::default()
        });
        raw.send(&message(5, body, &rpc_call(5, 1, &[7, 8])));
        let h = parsed(raw.answer().await);
        assert_eq!((h.xid, h.body), (5, Body::ErrChunk));
    })
    .await;
}

#[tokio::test]
async fn a_read_chunk_that_does_not_add_up_gets_err_chunk() {
    case(|mut raw| async move {
        // ECHO: tag 7, then a length of 40,000 whose data is a Read chunk of 16 bytes.
        let src = raw.conn.register(vec![9; 16], Access::REMOTE_READ).unwrap();
        let rpc = rpc_call(6, 1, &[7, 40_000]);
        let body = Body::Msg(Chunks {
            reads: vec![ReadChunk {
                position: rpc.len() as u32,
                segments: vec![seg(src.rkey(), 16, src.addr())],
            }],
            writes: vec![vec![seg(0x200, 64, 0)]],
            ..Default::default()
        });
        raw.send(&message(6, body, &rpc));
        let h = parsed(raw.answer().await);
        assert_eq!((h.xid, h.body), (6, Body::ErrChunk));
    })
    .await;
}

#[tokio::test]
async fn a_huge_segment_count_gets_err_chunk() {
    case(|mut raw| async move {
        // RDMA_MSG, no Read list, a Write list whose first chunk claims 2^32 - 1 segments.
        let mut m = Vec::new();
        for w in [7u32, 1, CREDITS, 0, 0, 1, u32::MAX, 1, 2, 3] {
            m.extend_from_slice(&w.to_be_bytes());
        }
        raw.send(&m);
        let h = parsed(raw.answer().await);
        assert_eq!((h.xid, h.body), (7, Body::ErrChunk));
    })
    .await;
}

#[tokio::test]
async fn a_segment_past_its_registration_closes_the_connection() {
    case(|mut raw| async move {
        let src = raw.conn.register(vec![9; 64], Access::REMOTE_READ).unwrap();
        let rpc = rpc_call(8, 1, &[7, 4096]);
        let body = Body::Msg(Chunks {
            reads: vec![ReadChunk {
                position: rpc.len() as u32,
                // 4 KiB at the registration's start: it holds 64 bytes.
                segments: vec![seg(src.rkey(), 4096, src.addr())],
            }],
            writes: vec![vec![seg(0x200, 4096, 0)]],
            ..Default::default()
        });
        raw.send(&message(8, body, &rpc));
        // The provider refuses the server's RDMA Read (RFC 5040 Terminate): the connection
        // goes down, as it would on an RNIC.
        assert!(raw.closed().await, "the connection stayed up");
    })
    .await;
}

#[tokio::test]
async fn more_calls_than_credits_close_the_connection() {
    case(|mut raw| async move {
        // TEST_SLEEP(300) calls: none is answered before all are in.
        for xid in 0..CREDITS + 2 {
            raw.send(&message(
                100 + xid,
                Body::Msg(Chunks::default()),
                &rpc_call(100 + xid, 6, &[300]),
            ));
        }
        assert!(raw.closed().await, "the connection stayed up");
    })
    .await;
}

#[tokio::test]
async fn cut_headers_are_dropped_and_the_connection_carries_on() {
    case(|mut raw| async move {
        let full = message(9, Body::Msg(Chunks::default()), &rpc_call(9, 0, &[]));
        for cut in [0, 3, 8, 15] {
            raw.send(&full[..cut]);
        }
        assert_eq!(raw.answer().await, Answer::Nothing);
        // Cut inside the chunk lists: ERR_CHUNK.
        raw.send(&full[..20]);
        assert_eq!(parsed(raw.answer().await).body, Body::ErrChunk);
        // The same connection still works.
        raw.send(&full);
        let h = parsed(raw.answer().await);
        assert!(matches!(h.body, Body::Msg(_)), "{h:?}");
    })
    .await;
}

#[tokio::test]
async fn another_version_gets_err_vers() {
    case(|mut raw| async move {
        let mut m = message(10, Body::Msg(Chunks::default()), &rpc_call(10, 0, &[]));
        m[4..8].copy_from_slice(&2u32.to_be_bytes());
        raw.send(&m);
        let h = parsed(raw.answer().await);
        assert_eq!((h.xid, h.body), (10, Body::ErrVers { low: 1, high: 1 }));
    })
    .await;
}

#[tokio::test]
async fn rdma_nomsg_without_a_position_zero_chunk_gets_err_chunk() {
    case(|mut raw| async move {
        raw.send(&message(11, Body::NoMsg(Chunks::default()), &[]));
        let h = parsed(raw.answer().await);
        assert_eq!((h.xid, h.body), (11, Body::ErrChunk));
    })
    .await;
}

#[tokio::test]
async fn rdma_done_is_dropped_and_rdma_msgp_is_served_as_rdma_msg() {
    case(|mut raw| async move {
        raw.send(&message(12, Body::Done, &[]));
        assert_eq!(raw.answer().await, Answer::Nothing);
        let mut m = Vec::new();
        for w in [13u32, 1, CREDITS, 2, 0, 0, 0, 0, 0] {
            m.extend_from_slice(&w.to_be_bytes());
        }
        m.extend(rpc_call(13, 0, &[]));
        raw.send(&m);
        let h = parsed(raw.answer().await);
        assert_eq!(h.xid, 13);
        assert!(matches!(h.body, Body::Msg(_)));
    })
    .await;
}

#[tokio::test]
async fn a_reply_too_large_for_inline_without_a_reply_chunk_gets_err_chunk() {
    case(|mut raw| async move {
        // TEST_BIG(10,000): a reply that fits neither the 4 KiB receive buffer nor any chunk.
        raw.send(&message(
            14,
            Body::Msg(Chunks::default()),
            &rpc_call(14, 2, &[10_000]),
        ));
        let h = parsed(raw.answer().await);
        assert_eq!((h.xid, h.body), (14, Body::ErrChunk));
    })
    .await;
}

#[tokio::test]
async fn garbage_arguments_get_garbage_args() {
    case(|mut raw| async move {
        // ECHO with nothing after the call header.
        raw.send(&message(
            15,
            Body::Msg(Chunks::default()),
            &rpc_call(15, 1, &[]),
        ));
        let Answer::Message(m) = raw.answer().await else {
            panic!("no answer")
        };
        let (h, used) = header::parse(&m, &Default::default()).unwrap();
        assert!(matches!(h.body, Body::Msg(_)));
        let reply = Bytes::copy_from_slice(&m[used..]);
        let err = rpc::decode_reply::<()>(rpc::Reply {
            message: reply,
            chunks: None,
        })
        .unwrap_err();
        assert!(matches!(err, rpc::Error::GarbageArgs), "{err}");
    })
    .await;
}

//! Hostile peers over real sockets: a raw TCP client that completes the MPA exchange and then
//! sends bad segments is terminated; the listener and the other connections carry on.

use std::time::Duration;

use rpcrdma::rdma::soft::wire::ddp::{Buffer, DdpHeader};
use rpcrdma::rdma::soft::wire::mpa::{
    FpduReader, FpduWriter, FrameKind, Framing, StartupFrame, STARTUP_HEADER_LEN,
};
use rpcrdma::rdma::soft::wire::rdmap::{Opcode, TermCode, Terminate};
use rpcrdma::rdma::soft::{MpaConfig, RnicKind, SoftConfig, SoftProvider};
use rpcrdma::rdma::{
    Access, ConnectParams, Connection, Listener, Provider, RecvWr, SendWr, Sge, WcStatus,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const PLAIN: Framing = Framing {
    markers: false,
    crc: false,
};

fn provider() -> SoftProvider {
    SoftProvider::new(SoftConfig {
        mpa: MpaConfig {
            kind: RnicKind::Ietf,
            markers: false,
            crc: false,
            revision: 1,
        },
        ..SoftConfig::default()
    })
}

/// Performs the MPA exchange by hand (revision 1, no markers, no CRC).
async fn raw_connect(addr: std::net::SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut req = Vec::new();
    StartupFrame {
        kind: FrameKind::Request,
        markers: false,
        crc: false,
        reject: false,
        enhanced: false,
        reserved: 0,
        revision: 1,
        private_data: vec![],
    }
    .emit(&mut req);
    s.write_all(&req).await.unwrap();
    let mut head = [0u8; STARTUP_HEADER_LEN];
    s.read_exact(&mut head).await.unwrap();
    let (reply, pd) = StartupFrame::parse_header(FrameKind::Reply, &head).unwrap();
    assert!(!reply.reject);
    assert_eq!(pd, 0);
    s
}

/// Reads until EOF and returns the Terminate the provider sent.
async fn read_terminate(s: &mut TcpStream) -> Terminate {
    let mut all = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut all))
        .await
        .expect("the provider closes the stream")
        .unwrap();
    let f = FpduReader::new(PLAIN, 65535).next(&all).unwrap().unwrap();
    let h = DdpHeader::parse(&f.ulpdu).unwrap();
    assert_eq!(Opcode::from(h.opcode), Opcode::Terminate);
    Terminate::parse(&f.ulpdu[h.len()..]).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_peers_are_terminated_and_others_carry_on() {
    let p = provider();
    let listener = p.listen("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();

    // A well-behaved connection.
    let (good, good_server) = tokio::join!(
        p.connect(addr, ConnectParams::new()),
        listener.accept(ConnectParams::new())
    );
    let (good, good_server) = (good.unwrap(), good_server.unwrap());
    let rbuf = good_server
        .register(vec![0; 64], Access::LOCAL_WRITE)
        .unwrap();
    let target = good_server
        .register(vec![0; 64], Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    let msg = good.register(b"ping".to_vec(), Access::NONE).unwrap();
    let round_trip = |id: u64| {
        let (good, good_server, rbuf, msg) = (&good, &good_server, &rbuf, &msg);
        async move {
            good_server
                .post_recv(RecvWr::new(id, Sge::whole(rbuf)))
                .unwrap();
            good.post_send(SendWr::send(id, vec![Sge::whole(msg)]))
                .unwrap();
            let c = good_server.poll_completion().await;
            assert_eq!((c.wr_id, c.status), (id, WcStatus::Success));
            let c = good.poll_completion().await;
            assert_eq!((c.wr_id, c.status), (id, WcStatus::Success));
        }
    };
    round_trip(1).await;

    // Garbage instead of an MPA Request: the listener skips it.
    let mut junk = TcpStream::connect(addr).await.unwrap();
    junk.write_all(&[0x55; 40]).await.unwrap();

    // Each hostile segment gets a Terminate with its own code, and writes nothing.
    use rpcrdma::rdma::soft::wire::rdmap::TermLayer;
    type Case = (&'static str, Access, fn(u32, u64) -> Vec<u8>, TermCode);
    let cases: Vec<Case> = vec![
        (
            "unknown STag",
            Access::REMOTE_WRITE,
            |stag, to| segment(Opcode::RdmaWrite, stag ^ 0x300, to, &[1; 8]),
            TermCode::DDP_INVALID_STAG,
        ),
        (
            "write across the end",
            Access::REMOTE_WRITE,
            |stag, to| segment(Opcode::RdmaWrite, stag, to + 60, &[1; 8]),
            TermCode::DDP_BASE_BOUNDS,
        ),
        (
            "write without the right",
            Access::REMOTE_READ,
            |stag, to| segment(Opcode::RdmaWrite, stag, to, &[1; 8]),
            TermCode::ACCESS_RIGHTS,
        ),
        (
            "read response nobody asked for",
            Access::REMOTE_WRITE,
            |stag, to| segment(Opcode::ReadResponse, stag, to, &[1; 8]),
            TermCode::new(TermLayer::Ddp, 1, 0x02),
        ),
        (
            "ULPDU shorter than any DDP header",
            Access::REMOTE_WRITE,
            // Length 2, two ULPDU bytes, no pad, the (unchecked) CRC field.
            |_, _| vec![0x00, 0x02, 0x41, 0x43, 0, 0, 0, 0],
            TermCode::DDP_CATASTROPHIC,
        ),
    ];
    for (what, access, make, code) in cases {
        let (mut bad, bad_server) =
            tokio::join!(raw_connect(addr), listener.accept(ConnectParams::new()));
        let bad_server = bad_server.unwrap();
        let victim = bad_server.register(vec![0; 64], access).unwrap();
        bad.write_all(&make(victim.rkey(), victim.addr()))
            .await
            .unwrap();
        let term = read_terminate(&mut bad).await;
        assert_eq!(term.code, code, "{what}");
        assert!(!bad_server.is_connected(), "{what}");
        assert_eq!(bad_server.terminate_sent().map(|t| t.code), Some(code));
        assert!(
            victim.to_vec(0..64).unwrap().iter().all(|&b| b == 0),
            "{what}: written"
        );
    }

    // The good connection still works, and nothing was written into its memory.
    round_trip(2).await;
    round_trip(3).await;
    assert!(target.to_vec(0..64).unwrap().iter().all(|&b| b == 0));
    assert!(good.is_connected() && good_server.is_connected());
}

fn segment(opcode: Opcode, stag: u32, to: u64, payload: &[u8]) -> Vec<u8> {
    let mut h = Vec::new();
    DdpHeader {
        last: true,
        ddp_version: 1,
        rdmap_version: 1,
        opcode: opcode.into(),
        reserved: 0,
        buffer: Buffer::Tagged { stag, to },
    }
    .emit(&mut h);
    let mut out = Vec::new();
    FpduWriter::new(PLAIN).write(&[&h, payload], &mut out);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_rdmac_peer_as_non_permissive_and_reports_it() {
    // Seed 001 figure 2 over real sockets: RDMAC initiator, non-permissive responder.
    let responder = provider();
    let initiator = SoftProvider::new(SoftConfig {
        mpa: MpaConfig {
            kind: RnicKind::Rdmac,
            markers: true,
            crc: true,
            revision: 0,
        },
        ..SoftConfig::default()
    });
    let listener = responder
        .listen("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let (client, server) = tokio::join!(
        initiator.connect(addr, ConnectParams::new()),
        listener.accept(ConnectParams::new())
    );
    assert!(client.is_err(), "RDMAC initiator must close");
    assert!(server.is_err(), "non-permissive responder must close");
}

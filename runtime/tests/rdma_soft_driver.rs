//! The soft provider's driver over real sockets: large transfers (zero-copy transmit, direct
//! placement, partial writes, CRC) arrive intact on both runtime flavours, and a reply the
//! receive task leaves to a completion poller (current-thread runtime) goes out even when that
//! poller turns to something else.

use std::time::Duration;

use rpcrdma::rdma::soft::{MpaConfig, RnicKind, SoftConfig, SoftConnection, SoftProvider};
use rpcrdma::rdma::{
    Access, ConnectParams, Connection, Listener, Provider, RecvWr, RemoteAddr, SendWr, Sge,
    WcOpcode,
};

const MIB: usize = 1 << 20;

fn provider(crc: bool, confirm: bool) -> SoftProvider {
    SoftProvider::new(SoftConfig {
        mpa: MpaConfig {
            kind: RnicKind::Ietf,
            markers: false,
            crc,
            revision: 2,
        },
        mulpdu: 65000,
        confirm_completions: confirm,
        ..SoftConfig::default()
    })
}

async fn pair(p: &SoftProvider) -> (SoftConnection, SoftConnection) {
    let listener = p.listen("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (c, s) = tokio::join!(
        p.connect(addr, ConnectParams::new()),
        listener.accept(ConnectParams::new())
    );
    (c.unwrap(), s.unwrap())
}

fn pattern(len: usize, seed: usize) -> Vec<u8> {
    (0..len).map(|i| ((i * 7 + seed) % 251) as u8).collect()
}

/// Four 1 MiB RDMA Writes into the peer, then four 1 MiB RDMA Reads back, all outstanding
/// at once; every byte checked.
async fn transfers(crc: bool, confirm: bool) {
    let (c, s) = pair(&provider(crc, confirm)).await;
    let target = s
        .register(vec![0; 4 * MIB], Access::REMOTE_WRITE | Access::REMOTE_READ)
        .unwrap();
    let remote = RemoteAddr::new(target.rkey(), target.addr());
    let data = c.register(pattern(4 * MIB, 1), Access::NONE).unwrap();
    let sink = c.register(vec![0; 4 * MIB], Access::LOCAL_WRITE).unwrap();
    for i in 0..4 {
        let range = i * MIB..(i + 1) * MIB;
        let at = RemoteAddr::new(remote.rkey, remote.addr + range.start as u64);
        c.post_send(SendWr::write(
            i as u64,
            vec![Sge::new(&data, range).unwrap()],
            at,
        ))
        .unwrap();
    }
    for i in 0..4 {
        let range = i * MIB..(i + 1) * MIB;
        let at = RemoteAddr::new(remote.rkey, remote.addr + range.start as u64);
        c.post_send(SendWr::read(
            4 + i as u64,
            Sge::new(&sink, range).unwrap(),
            at,
        ))
        .unwrap();
    }
    for want in 0..8 {
        let done = tokio::time::timeout(Duration::from_secs(20), c.poll_completion())
            .await
            .expect("completion in time");
        assert!(done.is_success(), "{done:?}");
        assert_eq!(done.wr_id, want);
    }
    assert!(target.to_vec(0..4 * MIB).unwrap() == pattern(4 * MIB, 1));
    assert!(sink.to_vec(0..4 * MIB).unwrap() == pattern(4 * MIB, 1));
    assert!(c.is_connected() && s.is_connected());
}

#[test]
fn large_transfers_arrive_intact() {
    for crc in [false, true] {
        for confirm in [false, true] {
            let two_workers = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            two_workers.block_on(transfers(crc, confirm));
            let one_thread = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            one_thread.block_on(transfers(crc, confirm));
        }
    }
}

/// The receiver gets a Send (with its confirmation probe) while a task waits for completions;
/// that task takes the receive and then waits for something the sender only does once its
/// Send completed. The probe's Read Response must not wait for the receiver's next post.
#[tokio::test(flavor = "current_thread")]
async fn a_reply_left_to_a_poller_goes_out_when_it_turns_away() {
    let (c, s) = pair(&provider(false, true)).await;
    let rbuf = s.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    s.post_recv(RecvWr::new(1, Sge::whole(&rbuf))).unwrap();
    let (sent_tx, sent_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let done = s.poll_completion().await;
        assert_eq!(done.opcode, WcOpcode::Recv);
        // Turns to something else, neither posting nor polling the connection.
        sent_rx.await.unwrap();
        s
    });
    // Let the server task start waiting for its completion first.
    tokio::task::yield_now().await;
    let sbuf = c.register(vec![7; 64], Access::NONE).unwrap();
    c.post_send(SendWr::send(2, vec![Sge::whole(&sbuf)]))
        .unwrap();
    let done = tokio::time::timeout(Duration::from_secs(5), c.poll_completion())
        .await
        .expect("the Send is confirmed");
    assert!(done.is_success(), "{done:?}");
    sent_tx.send(()).unwrap();
    let s = server.await.unwrap();
    assert!(s.is_connected());
}

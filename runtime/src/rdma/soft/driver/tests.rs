//! The driver's own handshakes, over a real connection of the provider.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::rdma::{Access, Connection, RecvWr, SendWr, Sge, WcOpcode};

/// A message posted while another writer holds the transmit lock goes to the transmit task,
/// which finds the lock held, asks to be told when it is released, and waits (its worker free
/// meanwhile); released, the lock tells it, and the message goes out. Without that word the
/// message would wait for the next post on the connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_transmit_task_is_told_when_the_lock_it_waits_for_is_released() {
    let (c, s) = crate::rdma::soft::connected_pair().await;
    let inbox = s.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    s.post_recv(RecvWr::new(7, Sge::whole(&inbox))).unwrap();
    let outbox = c.register(vec![5; 64], Access::NONE).unwrap();

    // Another writer, in the middle of its write.
    let held = c.shared().try_tx().expect("nobody else writes yet");
    c.post_send(SendWr::send(1, vec![Sge::whole(&outbox)]))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !c.shared().tx_waiting.load(Ordering::SeqCst) {
        assert!(
            Instant::now() < deadline,
            "the transmit task never asked for the lock"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // Long enough for the task to use up any wake-up it had in hand and settle to waiting.
    tokio::time::sleep(Duration::from_millis(50)).await;
    drop(held);

    let done = tokio::time::timeout(Duration::from_secs(5), s.poll_completion())
        .await
        .expect("the message went out once the lock was released");
    assert!(done.is_success(), "{done:?}");
    assert_eq!((done.opcode, done.wr_id), (WcOpcode::Recv, 7));
    assert_eq!(inbox.to_vec(0..64).unwrap(), vec![5; 64]);
}

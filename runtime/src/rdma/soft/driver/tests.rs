//! The driver's own handshakes, over a real connection of the provider.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::Shared;
use crate::rdma::soft::SoftConnection;
use crate::rdma::{
    Access, Completion, Connection, MemoryRegion, RecvWr, RemoteAddr, SendWr, Sge, WcOpcode,
};

/// A connected pair, the server's receive posted, and the client's 64-byte message of 5s.
async fn pair_with_message() -> (SoftConnection, SoftConnection, MemoryRegion, MemoryRegion) {
    let (c, s) = crate::rdma::soft::connected_pair().await;
    let inbox = s.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    s.post_recv(RecvWr::new(7, Sge::whole(&inbox))).unwrap();
    let outbox = c.register(vec![5; 64], Access::NONE).unwrap();
    (c, s, inbox, outbox)
}

/// Waits until the transmit task, finding the lock held, has asked to be told when it is
/// released, and then long enough for it to use up any wake-up it had in hand and settle to
/// waiting.
async fn until_the_transmit_task_waits(shared: &Shared) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !shared.tx_waiting.load(Ordering::SeqCst) {
        assert!(
            Instant::now() < deadline,
            "the transmit task never asked for the lock"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
}

/// The message arrived whole at the server.
async fn arrived(s: &SoftConnection, inbox: &MemoryRegion) {
    let done = completed(s, WcOpcode::Recv).await;
    assert_eq!(done.wr_id, 7);
    assert_eq!(inbox.to_vec(0..64).unwrap(), vec![5; 64]);
}

/// A message posted while another writer, a task, holds the transmit lock goes to the
/// transmit task, which finds the lock held, asks to be told when it is released, and waits
/// (its worker free meanwhile); released in the task, the lock tells it, and the message goes
/// out. Without that word the message would wait for the next post on the connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_transmit_task_is_told_when_a_task_releases_the_lock_it_waits_for() {
    let (c, s, inbox, outbox) = pair_with_message().await;

    // Another writer, a task in the middle of its write (a local one: the lock's guard stays
    // on its thread).
    let shared = c.shared().clone();
    let (held_tx, held) = oneshot::channel();
    let (release, release_rx) = oneshot::channel::<()>();
    let tasks = tokio::task::LocalSet::new();
    let writer = tasks.spawn_local(async move {
        let out = shared.try_tx().expect("nobody else writes yet");
        held_tx.send(()).unwrap();
        release_rx.await.unwrap();
        assert!(tokio::task::try_id().is_some(), "released in a task");
        drop(out);
    });
    tasks
        .run_until(async {
            held.await.unwrap();
            c.post_send(SendWr::send(1, vec![Sge::whole(&outbox)]))
                .unwrap();
            until_the_transmit_task_waits(c.shared()).await;
            release.send(()).unwrap();
            writer.await.unwrap();
        })
        .await;

    arrived(&s, &inbox).await;
}

/// The same lock released outside the runtime's tasks (here `block_on`'s future, on a
/// current-thread runtime, where no other task runs until it yields): the releasing thread
/// takes the transmit task's step itself and the message is on the wire when the lock is
/// dropped, before the task could run. Telling the task instead leaves the message queued.
#[tokio::test(flavor = "current_thread")]
async fn a_releaser_outside_the_tasks_sends_what_the_transmit_task_waits_for() {
    let (c, s, inbox, outbox) = pair_with_message().await;

    let held = c.shared().try_tx().expect("nobody else writes yet");
    c.post_send(SendWr::send(1, vec![Sge::whole(&outbox)]))
        .unwrap();
    until_the_transmit_task_waits(c.shared()).await;
    assert!(tokio::task::try_id().is_none(), "released outside a task");
    drop(held);

    // No await since: only this thread can have written it.
    let shared = c.shared();
    assert!(!shared.tx_waiting.load(Ordering::SeqCst));
    assert!(
        !shared.core().wants_transmit(),
        "the message is still queued"
    );
    assert!(shared.try_tx().expect("the lock is free").is_empty());
    arrived(&s, &inbox).await;
}

/// Polls a completion wait of `c` once, with nothing to take, and says whether the poller
/// became the stream's reader.
fn a_poll_reads(c: &SoftConnection) -> bool {
    use std::future::Future;
    use std::task::{Context, Waker};
    let shared = c.shared();
    let mut wait = std::pin::pin!(shared.next_completion());
    let polled = wait.as_mut().poll(&mut Context::from_waker(Waker::noop()));
    assert!(polled.is_pending(), "a completion was left: {polled:?}");
    // Dropping the wait gives the stream back: look before.
    shared.read_wake.poller_reads.load(Ordering::SeqCst)
}

/// The next completion of `c`, within 5 s: a successful `opcode`.
async fn completed(c: &SoftConnection, opcode: WcOpcode) -> Completion {
    let done = tokio::time::timeout(Duration::from_secs(5), c.poll_completion())
        .await
        .expect("the request completed");
    assert!(done.is_success(), "{done:?}");
    assert_eq!(done.opcode, opcode);
    done
}

/// A poller outside the runtime's tasks (a caller in `block_on`) leaves the stream to the
/// receive task while a bulk transfer goes out, whose input is only the peer's confirmations,
/// and reads it itself again once the last message posted is small.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poller_outside_the_tasks_leaves_the_stream_to_the_receive_task_while_bulk_goes_out() {
    assert!(
        tokio::task::try_id().is_none(),
        "the test's body is not a task"
    );
    let (c, s) = crate::rdma::soft::connected_pair().await;
    let len = 2 * super::OUTBOUND_BULK as usize;
    let target = s
        .register(vec![0; len], Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    let source = c.register(vec![9; len], Access::NONE).unwrap();
    let remote = RemoteAddr::new(target.rkey(), target.addr());

    c.post_send(SendWr::write(1, Sge::whole(&source), remote))
        .unwrap();
    completed(&c, WcOpcode::RdmaWrite).await;
    assert_eq!(target.to_vec(0..len).unwrap(), vec![9; len]);
    assert!(
        !a_poll_reads(&c),
        "the poller took the stream after a bulk Write"
    );

    let (s_inbox, outbox) = (
        s.register(vec![0; 64], Access::LOCAL_WRITE).unwrap(),
        c.register(vec![5; 64], Access::NONE).unwrap(),
    );
    s.post_recv(RecvWr::new(7, Sge::whole(&s_inbox))).unwrap();
    c.post_send(SendWr::send(2, Sge::whole(&outbox))).unwrap();
    completed(&c, WcOpcode::Send).await;
    assert!(
        a_poll_reads(&c),
        "after a small message the poller reads the stream again"
    );
}

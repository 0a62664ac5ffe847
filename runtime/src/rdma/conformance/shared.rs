//! The conformance cases of shared receive queues (see [`crate::rdma::shared_receive`]).

use super::util::{ensure, expect_ok, expect_refused, next, region, ConnOf, Step, STEP};
use super::{Failure, ProviderUnderTest};
use crate::rdma::{
    Access, Completion, ConnectParams, ConnectRequest, Connection, Listener, Provider, RecvWr,
    SendWr, Sge, SharedReceiveParams, SharedReceiveQueue, WcOpcode, WcStatus,
};

/// The buffers and their size in the cases' queues.
const BUFFERS: usize = 4;
const SIZE: usize = 64;

type QueueOf<T> = <<T as ProviderUnderTest>::P as Provider>::SharedQueue;

/// `count` connections accepted with one shared queue (`limit` buffers each at once): (active
/// side, passive side) pairs, and the queue.
async fn shared_pairs<T: ProviderUnderTest>(
    put: &T,
    count: usize,
    limit: u32,
) -> Result<(Vec<(ConnOf<T>, ConnOf<T>)>, QueueOf<T>), Failure> {
    let provider = put.provider();
    let queue = provider
        .shared_receive_queue(SharedReceiveParams::new(BUFFERS, SIZE))
        .step("shared_receive_queue")?;
    let listener = provider.listen(put.listen_addr()).await.step("listen")?;
    let addr = listener.local_addr().step("listener address")?;
    let mut pairs = Vec::new();
    for _ in 0..count {
        let accepted = async {
            let request = listener.next_request().await.step("next request")?;
            request
                .accept_shared_with(
                    ConnectParams::new().queue_depths(64, limit),
                    &queue,
                    |c: &ConnOf<T>| {
                        let own = c.register(vec![0; SIZE], Access::LOCAL_WRITE)?;
                        match c.post_recv(RecvWr::new(1, Sge::whole(&own))) {
                            Ok(()) => Err(crate::rdma::Error::InvalidWorkRequest(
                                "post_recv on a connection on a shared queue succeeded".into(),
                            )),
                            Err(_) => Ok(()),
                        }
                    },
                )
                .await
                .step("accept_shared_with")
        };
        let (client, server) = tokio::time::timeout(STEP, async {
            tokio::join!(provider.connect(addr, ConnectParams::new()), accepted)
        })
        .await
        .map_err(|_| Failure("connection setup timed out".into()))?;
        pairs.push((client.step("connect")?, server?));
    }
    Ok((pairs, queue))
}

/// For a provider that refuses connections onto a shared queue: the refusal is an error of
/// the accept, and the peer's connect fails too.
async fn refused<T: ProviderUnderTest>(put: &T) -> Result<(), Failure> {
    let provider = put.provider();
    let queue = provider
        .shared_receive_queue(SharedReceiveParams::new(BUFFERS, SIZE))
        .step("shared_receive_queue")?;
    let listener = provider.listen(put.listen_addr()).await.step("listen")?;
    let addr = listener.local_addr().step("listener address")?;
    let accepted = async {
        let request = listener.next_request().await.step("next request")?;
        Ok::<_, Failure>(
            request
                .accept_shared_with(ConnectParams::new(), &queue, |_: &ConnOf<T>| Ok(()))
                .await
                .is_err(),
        )
    };
    let (client, refused) = tokio::time::timeout(STEP, async {
        tokio::join!(provider.connect(addr, ConnectParams::new()), accepted)
    })
    .await
    .map_err(|_| Failure("the refusal took too long".into()))?;
    ensure!(refused?, "accepting onto a shared queue succeeded");
    ensure!(client.is_err(), "the peer's connect succeeded");
    Ok(())
}

/// Sends `text` from `conn` as request `wr_id` and waits for its completion.
async fn send<C: Connection>(conn: &C, wr_id: u64, text: &[u8]) -> Result<(), Failure> {
    let buf = conn
        .register(text.to_vec(), Access::NONE)
        .step("register")?;
    conn.post_send(SendWr::send(wr_id, vec![Sge::whole(&buf)]))
        .step("post_send")?;
    expect_ok(conn, wr_id, WcOpcode::Send, "send")
        .await
        .map(drop)
}

/// The next completion, a successful receive, and its message taken.
async fn receive<C: Connection>(conn: &C, what: &str) -> Result<(Completion, Vec<u8>), Failure> {
    let c = next(conn, what).await?;
    ensure!(
        c.opcode == WcOpcode::Recv && c.status == WcStatus::Success,
        "{what}: expected a successful receive, got {c:?}"
    );
    let message = conn.take_shared(&c, |m| m.to_vec()).step("take_shared")?;
    Ok((c, message))
}

/// Waits until `queue` has `free` buffers free (buffers come back as connections go).
async fn free_becomes<Q: SharedReceiveQueue>(queue: &Q, free: usize) -> Result<(), Failure> {
    let deadline = tokio::time::Instant::now() + STEP;
    while queue.free_buffers() != free {
        ensure!(
            tokio::time::Instant::now() < deadline,
            "{} buffers free, expected {free}",
            queue.free_buffers()
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    Ok(())
}

/// Sends from two connections land in one queue's buffers, each on its own connection in
/// order; a message is taken once, and its buffer is free again; a Send longer than the
/// buffers fails as one longer than a posted receive does, and only on its connection.
pub(super) async fn shared_receive<T: ProviderUnderTest>(put: &T) -> Result<(), Failure> {
    if !put.shared_receive_queues() {
        return refused(put).await;
    }
    let (pairs, queue) = shared_pairs(put, 2, 8).await?;
    let [(a, a_server), (b, b_server)] =
        <[_; 2]>::try_from(pairs).map_err(|_| Failure("two connections".into()))?;
    ensure!(
        queue.free_buffers() == BUFFERS,
        "{} buffers free before any Send",
        queue.free_buffers()
    );
    send(&a, 1, b"first from a").await?;
    send(&b, 2, b"first from b").await?;
    send(&a, 3, b"second from a").await?;
    let (first, message) = receive(&a_server, "a's first").await?;
    ensure!(message == b"first from a", "a's first: {message:?}");
    ensure!(
        a_server.take_shared(&first, |_| ()).is_err(),
        "a message taken twice"
    );
    let (_, message) = receive(&a_server, "a's second").await?;
    ensure!(message == b"second from a", "a's second: {message:?}");
    let (_, message) = receive(&b_server, "b's first").await?;
    ensure!(message == b"first from b", "b's first: {message:?}");
    ensure!(
        queue.free_buffers() == BUFFERS,
        "{} buffers free after every message was taken",
        queue.free_buffers()
    );
    // More Sends over time than the queue has buffers: each taken buffer serves again.
    for i in 0..3 * BUFFERS as u64 {
        send(&b, 10 + i, format!("again {i}").as_bytes()).await?;
        let (_, message) = receive(&b_server, "again").await?;
        ensure!(
            message == format!("again {i}").as_bytes(),
            "again {i}: {message:?}"
        );
    }

    let long = region(&a, SIZE + 1, Access::NONE, |i| i as u8)?;
    a.post_send(SendWr::send(4, vec![Sge::whole(&long)]))
        .step("post oversized send")?;
    let c = next(&a_server, "receive of an oversized send").await?;
    ensure!(
        c.opcode == WcOpcode::Recv && c.status == WcStatus::LocalLengthError,
        "receive of an oversized send: expected a local length error, got {c:?}"
    );
    expect_refused(
        put,
        &a,
        4,
        &[
            WcStatus::RemoteOperationError,
            WcStatus::RemoteInvalidRequest,
        ],
        "oversized send",
    )
    .await?;
    send(&b, 5, b"b goes on").await?;
    let (_, message) = receive(&b_server, "b after a's failure").await?;
    ensure!(message == b"b goes on", "b after a's failure: {message:?}");
    drop((a, a_server));
    free_becomes(&queue, BUFFERS).await
}

/// A connection closed by its peer says so with one flushed receive completion; buffers it
/// held and the consumer never took come back when it is dropped.
pub(super) async fn shared_receive_close<T: ProviderUnderTest>(put: &T) -> Result<(), Failure> {
    if !put.shared_receive_queues() {
        return refused(put).await;
    }
    let (pairs, queue) = shared_pairs(put, 1, 8).await?;
    let (client, server) = pairs.into_iter().next().ok_or(Failure("a pair".into()))?;
    send(&client, 1, b"never taken").await?;
    let c = next(&server, "the receive").await?;
    ensure!(
        c.opcode == WcOpcode::Recv && c.status == WcStatus::Success,
        "expected a successful receive, got {c:?}"
    );
    ensure!(
        queue.free_buffers() == BUFFERS - 1,
        "{} buffers free while one message waits",
        queue.free_buffers()
    );
    client.disconnect().await.step("disconnect")?;
    drop(client);
    let c = next(&server, "the close").await?;
    ensure!(
        c.opcode == WcOpcode::Recv && c.status == WcStatus::Flushed,
        "expected a flushed receive for the close, got {c:?}"
    );
    drop(server);
    free_becomes(&queue, BUFFERS).await
}

/// A connection bounded to two buffers at once that gets a third Send before the consumer
/// takes any ends, and the others on the queue go on; a provider that cannot bound it (a
/// device that makes the Send wait for a buffer instead) delivers all three.
pub(super) async fn shared_receive_limit<T: ProviderUnderTest>(put: &T) -> Result<(), Failure> {
    if !put.shared_receive_queues() {
        return refused(put).await;
    }
    let (pairs, queue) = shared_pairs(put, 2, 2).await?;
    let [(a, a_server), (b, b_server)] =
        <[_; 2]>::try_from(pairs).map_err(|_| Failure("two connections".into()))?;
    for i in 0..3 {
        let buf = a.register(vec![i; 8], Access::NONE).step("register")?;
        a.post_send(SendWr::send(i as u64, vec![Sge::whole(&buf)]))
            .step("post_send")?;
    }
    let mut held = Vec::new();
    for _ in 0..2 {
        let c = next(&a_server, "a receive within the bound").await?;
        ensure!(
            c.status == WcStatus::Success,
            "a receive within the bound: {c:?}"
        );
        held.push(c);
    }
    if put.bounds_shared_receives() {
        let c = next(&a_server, "the Send past the bound").await?;
        ensure!(
            c.opcode == WcOpcode::Recv && c.status != WcStatus::Success,
            "the Send past the bound: expected the connection to end, got {c:?}"
        );
    } else {
        for c in &held {
            a_server.take_shared(c, |_| ()).step("take_shared")?;
        }
        held.clear();
        let (_, message) = receive(&a_server, "the third Send").await?;
        ensure!(message == [2; 8], "the third Send: {message:?}");
    }
    send(&b, 9, b"b is not bounded by a").await?;
    let (_, message) = receive(&b_server, "b").await?;
    ensure!(message == b"b is not bounded by a", "b: {message:?}");
    drop(held);
    drop((a, a_server));
    free_becomes(&queue, BUFFERS).await
}

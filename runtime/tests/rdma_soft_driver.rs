//! The soft provider's driver over real sockets: large transfers (zero-copy transmit, direct
//! placement, partial writes, CRC) arrive intact on both runtime flavours, a reply the
//! receive task leaves to a completion poller goes out even when that poller turns to something
//! else, and a confirmed ping-pong on the multi-thread runtime completes every Send whether
//! the client polls from a task or from `block_on`; a completion hook stands in for a poller;
//! a poller that reads the stream and gives up hands it back to the receive task, two pollers
//! share one stream, and a consumer with a hook reads the input in its own task
//! (`poll_input`).

use std::future::Future;
use std::time::Duration;

use rpcrdma::rdma::{Access, Connection, RecvWr, RemoteAddr, SendWr, Sge, WcOpcode};

const MIB: usize = 1 << 20;

#[path = "support/soft_pair.rs"]
mod soft_pair;
use soft_pair::{pair, provider};

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

/// A two-worker runtime, as the bench and most applications use.
fn two_workers() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `test` on a two-worker and then on a current-thread runtime: the driver behaves
/// differently on each (see its module documentation).
fn on_both_runtimes<F: std::future::Future>(test: impl Fn() -> F) {
    two_workers().block_on(test());
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(test());
}

#[test]
fn large_transfers_arrive_intact() {
    for crc in [false, true] {
        for confirm in [false, true] {
            on_both_runtimes(|| transfers(crc, confirm));
        }
    }
}

/// The receiver gets a Send (with its confirmation probe) while it waits for completions;
/// it takes the receive and then waits for something the sender only does once its Send
/// completed. The probe's Read Response, which the receive task may leave for the receiver's
/// next post, must not wait for it. `receiver_in_task`: the receiver polls from a spawned
/// task, else from the calling future (on the multi-thread runtime, `block_on`'s future).
async fn reply_left_to_a_poller_goes_out_when_it_turns_away(receiver_in_task: bool) {
    let (c, s) = pair(&provider(false, true)).await;
    let rbuf = s.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    s.post_recv(RecvWr::new(1, Sge::whole(&rbuf))).unwrap();
    let (sent_tx, sent_rx) = tokio::sync::oneshot::channel::<()>();
    let receiver = async move {
        let done = s.poll_completion().await;
        assert_eq!(done.opcode, WcOpcode::Recv);
        // Turns to something else, neither posting nor polling the connection.
        sent_rx.await.unwrap();
        s
    };
    let sender = async move {
        // Let the receiver start waiting for its completion first.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let sbuf = c.register(vec![7; 64], Access::NONE).unwrap();
        c.post_send(SendWr::send(2, vec![Sge::whole(&sbuf)]))
            .unwrap();
        let done = tokio::time::timeout(Duration::from_secs(5), c.poll_completion())
            .await
            .expect("the Send is confirmed");
        assert!(done.is_success(), "{done:?}");
        sent_tx.send(()).unwrap();
        c
    };
    let (c, s) = if receiver_in_task {
        let receiver = tokio::spawn(receiver);
        let c = sender.await;
        (c, receiver.await.unwrap())
    } else {
        let sender = tokio::spawn(sender);
        let s = receiver.await;
        (sender.await.unwrap(), s)
    };
    assert!(c.is_connected() && s.is_connected());
}

#[test]
fn a_reply_left_to_a_poller_goes_out_when_it_turns_away_on_both_runtimes() {
    for receiver_in_task in [true, false] {
        on_both_runtimes(|| reply_left_to_a_poller_goes_out_when_it_turns_away(receiver_in_task));
    }
}

/// Ping-pong of `size`-byte messages with confirmed completions on the two-worker runtime, the server polling from a
/// spawned task and the client from a task too or from `block_on`'s future (confirmations
/// wait for the next post, bounded by the receive task): every Send and every receive
/// completes, in order, payloads intact. The server's confirmation of the client's last Send
/// is left for a next post that never comes: the flusher sends it.
async fn confirmed_ping_pong(client_in_task: bool, rounds: u64, size: usize) {
    let (c, s) = pair(&provider(false, true)).await;
    // The server's first receive is posted before the client can send.
    let rbuf = s.register(vec![0; size], Access::LOCAL_WRITE).unwrap();
    let sbuf = s.register(vec![0; size], Access::NONE).unwrap();
    s.post_recv(RecvWr::new(0, Sge::whole(&rbuf))).unwrap();
    let server = tokio::spawn(async move {
        let (mut received, mut sent) = (0u64, 0u64);
        while received < rounds || sent < rounds {
            let done = tokio::time::timeout(Duration::from_secs(10), s.poll_completion())
                .await
                .expect("server completion in time");
            assert!(done.is_success(), "{done:?}");
            match done.opcode {
                WcOpcode::Recv => {
                    assert_eq!(done.wr_id, received);
                    let got = rbuf.to_vec(0..size).unwrap();
                    assert!(
                        got.iter().all(|&b| b == received as u8),
                        "payload {received}"
                    );
                    received += 1;
                    sbuf.write(0, &vec![received as u8; size]).unwrap();
                    s.post_recv(RecvWr::new(received, Sge::whole(&rbuf)))
                        .unwrap();
                    s.post_send(SendWr::send(received, vec![Sge::whole(&sbuf)]))
                        .unwrap();
                }
                WcOpcode::Send => {
                    sent += 1;
                    assert_eq!(done.wr_id, sent);
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        s
    });
    let client = async move {
        let rbuf = c.register(vec![0; size], Access::LOCAL_WRITE).unwrap();
        let sbuf = c.register(vec![0; size], Access::NONE).unwrap();
        let mut sends = 0;
        for i in 0..rounds {
            sbuf.write(0, &vec![i as u8; size]).unwrap();
            c.post_recv(RecvWr::new(i, Sge::whole(&rbuf))).unwrap();
            c.post_send(SendWr::send(i, vec![Sge::whole(&sbuf)]))
                .unwrap();
            loop {
                let done = tokio::time::timeout(Duration::from_secs(10), c.poll_completion())
                    .await
                    .expect("client completion in time");
                assert!(done.is_success(), "{done:?}");
                if done.opcode == WcOpcode::Recv {
                    assert_eq!(done.wr_id, i);
                    let got = rbuf.to_vec(0..size).unwrap();
                    assert!(got.iter().all(|&b| b == (i + 1) as u8), "reply {i}");
                    break;
                }
                assert_eq!(done.wr_id, sends);
                sends += 1;
            }
        }
        // The last Send's completion.
        while sends < rounds {
            let done = tokio::time::timeout(Duration::from_secs(10), c.poll_completion())
                .await
                .expect("last send completion in time");
            assert!(done.is_success(), "{done:?}");
            assert_eq!((done.opcode, done.wr_id), (WcOpcode::Send, sends));
            sends += 1;
        }
        c
    };
    let c = if client_in_task {
        tokio::spawn(client).await.unwrap()
    } else {
        client.await
    };
    let s = server.await.unwrap();
    assert!(c.is_connected() && s.is_connected());
}

#[test]
fn confirmed_ping_pong_completes_every_send_with_nearby_and_far_pollers() {
    for client_in_task in [true, false] {
        two_workers().block_on(confirmed_ping_pong(client_in_task, 500, 64));
        // Two segments a message: the probe comes in the read that completes the message,
        // and the poller reading it takes that completion itself.
        two_workers().block_on(confirmed_ping_pong(client_in_task, 200, 64 * 1024));
    }
}

/// Sends of changing sizes, each answered, on a stream whose receiver reads a large Send's
/// payload straight into its receive when the last one was as large (a scatter read): a
/// longer one, a shorter one, a small one, one behind an RDMA Write, two-segment ones; every
/// payload and length as sent, under CRC and without, confirmed and not.
async fn sends_of_changing_sizes(crc: bool, confirm: bool) {
    const KIB: usize = 1024;
    let sizes = [
        40 * KIB,
        40 * KIB,
        50 * KIB,
        36 * KIB,
        3 * KIB,
        40 * KIB,
        40 * KIB,
        100 * KIB,
        100 * KIB,
        64,
    ];
    let (c, s) = pair(&provider(crc, confirm)).await;
    let room = 128 * KIB;
    let target = s.register(vec![0; 64 * KIB], Access::REMOTE_WRITE).unwrap();
    let remote = RemoteAddr::new(target.rkey(), target.addr());
    // The server's first receive is posted before the client can send.
    let rbuf = s.register(vec![0; room], Access::LOCAL_WRITE).unwrap();
    s.post_recv(RecvWr::new(0, Sge::whole(&rbuf))).unwrap();
    let server = tokio::spawn(async move {
        for (i, &size) in sizes.iter().enumerate() {
            let done = loop {
                let done = tokio::time::timeout(Duration::from_secs(10), s.poll_completion())
                    .await
                    .expect("server completion in time");
                if done.opcode == WcOpcode::Recv {
                    break done;
                }
            };
            assert!(done.is_success(), "{done:?}");
            assert_eq!((done.wr_id, done.byte_len as usize), (i as u64, size));
            assert!(
                rbuf.to_vec(0..size).unwrap() == pattern(size, i),
                "payload {i}"
            );
            // The next receive before the answer, which the client's next Send follows.
            s.post_recv(RecvWr::new(i as u64 + 1, Sge::whole(&rbuf)))
                .unwrap();
            // The answer: the same bytes back.
            let echo = s.register(pattern(size, i), Access::NONE).unwrap();
            s.post_send(SendWr::send(i as u64, vec![Sge::whole(&echo)]))
                .unwrap();
        }
        assert_eq!(target.to_vec(0..40 * KIB).unwrap(), pattern(40 * KIB, 99));
        s
    });
    let rbuf = c.register(vec![0; room], Access::LOCAL_WRITE).unwrap();
    for (i, &size) in sizes.iter().enumerate() {
        c.post_recv(RecvWr::new(i as u64, Sge::whole(&rbuf)))
            .unwrap();
        if i == 6 {
            let src = c.register(pattern(40 * KIB, 99), Access::NONE).unwrap();
            c.post_send(SendWr::write(1000, vec![Sge::whole(&src)], remote).unsignaled())
                .unwrap();
        }
        let data = c.register(pattern(size, i), Access::NONE).unwrap();
        c.post_send(SendWr::send(i as u64, vec![Sge::whole(&data)]))
            .unwrap();
        let done = loop {
            let done = tokio::time::timeout(Duration::from_secs(10), c.poll_completion())
                .await
                .expect("client completion in time");
            assert!(done.is_success(), "{done:?}");
            if done.opcode == WcOpcode::Recv {
                break done;
            }
        };
        assert_eq!((done.wr_id, done.byte_len as usize), (i as u64, size));
        assert!(
            rbuf.to_vec(0..size).unwrap() == pattern(size, i),
            "answer {i}"
        );
    }
    let s = server.await.unwrap();
    assert!(c.is_connected() && s.is_connected());
}

#[test]
fn sends_of_changing_sizes_arrive_intact() {
    for crc in [false, true] {
        for confirm in [false, true] {
            on_both_runtimes(|| sends_of_changing_sizes(crc, confirm));
        }
    }
}

/// Short confirmed ping-pongs one after another, a few milliseconds apart, each ending with a
/// confirmation only the flusher sends: they come while the flusher waits to be told and while
/// it sleeps out a period after a round that had work (when nobody tells it), and each goes.
#[test]
fn short_ping_pongs_one_after_another_each_end_with_every_send_completed() {
    two_workers().block_on(async {
        for i in 0..12u64 {
            confirmed_ping_pong(i % 2 == 0, 3, 64).await;
            // Less than a period, or three: the flusher has had an empty round and waits.
            let pause = [0, 5, 30][i as usize % 3];
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
    });
}

/// A receiver with a completion hook and no poller: the hook is called as its Sends arrive,
/// every receive can be taken with `try_completion` once it has been, and the sender's Sends
/// are confirmed although the receiver never posts again (the confirmation the receive task
/// left to the next poster goes out by itself). Only one hook can be set.
async fn a_completion_hook_stands_in_for_the_poller() {
    const SENDS: u64 = 8;
    let (c, s) = pair(&provider(true, true)).await;
    let rbuf = s
        .register(vec![0; 64 * SENDS as usize], Access::LOCAL_WRITE)
        .unwrap();
    for i in 0..SENDS as usize {
        s.post_recv(RecvWr::new(
            i as u64,
            Sge::new(&rbuf, i * 64..(i + 1) * 64).unwrap(),
        ))
        .unwrap();
    }
    let (hooked_tx, mut hooked_rx) = tokio::sync::mpsc::unbounded_channel();
    assert!(s.set_completion_hook(Box::new(move || {
        let _ = hooked_tx.send(());
    })));
    assert!(
        !s.set_completion_hook(Box::new(|| {})),
        "a second hook is refused"
    );

    let sbuf = c.register(vec![7; 64], Access::NONE).unwrap();
    let mut received = Vec::new();
    for i in 0..SENDS {
        c.post_send(SendWr::send(100 + i, vec![Sge::whole(&sbuf)]))
            .unwrap();
        while received.len() as u64 <= i {
            tokio::time::timeout(Duration::from_secs(5), hooked_rx.recv())
                .await
                .expect("the hook is called")
                .unwrap();
            received.extend(std::iter::from_fn(|| s.try_completion()));
        }
    }
    for (i, done) in received.iter().enumerate() {
        assert!(done.is_success(), "{done:?}");
        assert_eq!((done.opcode, done.wr_id), (WcOpcode::Recv, i as u64));
    }
    for i in 0..SENDS {
        let done = tokio::time::timeout(Duration::from_secs(5), c.poll_completion())
            .await
            .expect("the Send is confirmed");
        assert!(done.is_success(), "{done:?}");
        assert_eq!(done.wr_id, 100 + i);
    }
}

#[test]
fn a_completion_hook_stands_in_for_the_poller_on_both_runtimes() {
    on_both_runtimes(a_completion_hook_stands_in_for_the_poller);
}

/// A poller reads the stream itself while it waits (see the driver's `Receiver`); when it
/// stops waiting, the receive task must read again. Here the server polls and gives up (its
/// future dropped by a timeout) before anything arrives, then never polls again: the client's
/// RDMA Write, its RDMA Read of the server's memory and its Send must still be processed (the
/// Read answered, the Send received) by the receive task alone.
async fn a_poller_that_gives_up_hands_the_stream_back() {
    let (c, s) = pair(&provider(false, true)).await;
    let target = s
        .register(pattern(4096, 3), Access::REMOTE_WRITE | Access::REMOTE_READ)
        .unwrap();
    let rbuf = s.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    s.post_recv(RecvWr::new(1, Sge::whole(&rbuf))).unwrap();
    // The server waits as the stream's reader, then gives up.
    assert!(
        tokio::time::timeout(Duration::from_millis(50), s.poll_completion())
            .await
            .is_err(),
        "nothing has arrived yet"
    );
    let remote = RemoteAddr::new(target.rkey(), target.addr());
    let data = c.register(pattern(2048, 9), Access::NONE).unwrap();
    let sink = c.register(vec![0; 4096], Access::LOCAL_WRITE).unwrap();
    c.post_send(SendWr::write(1, vec![Sge::whole(&data)], remote))
        .unwrap();
    c.post_send(SendWr::read(2, Sge::whole(&sink), remote))
        .unwrap();
    c.post_send(SendWr::send(3, vec![Sge::new(&data, 0..64).unwrap()]))
        .unwrap();
    for want in 1..=3 {
        let done = tokio::time::timeout(Duration::from_secs(5), c.poll_completion())
            .await
            .expect("the server's receive task answers");
        assert!(done.is_success(), "{done:?}");
        assert_eq!(done.wr_id, want);
    }
    let mut expected = pattern(4096, 3);
    expected[..2048].copy_from_slice(&pattern(2048, 9));
    assert!(sink.to_vec(0..4096).unwrap() == expected);
    // The Send arrived too, taken without waiting.
    let recv = s.try_completion().expect("the receive completed");
    assert_eq!((recv.wr_id, recv.byte_len), (1, 64));
}

/// A poller whose future is kept but no longer polled (a `select!` over `&mut` futures whose
/// other branch runs on) must not hold the stream: the client's RDMA Read of the server's memory
/// is answered while the server's poll_completion future, polled once, lies idle.
async fn a_poller_kept_but_not_polled_does_not_hold_the_stream() {
    let (c, s) = pair(&provider(false, true)).await;
    let target = s.register(pattern(4096, 5), Access::REMOTE_READ).unwrap();
    let rbuf = s.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    s.post_recv(RecvWr::new(1, Sge::whole(&rbuf))).unwrap();
    let mut idle = std::pin::pin!(s.poll_completion());
    // Polled once: it becomes the stream's reader.
    std::future::poll_fn(|cx| {
        assert!(idle.as_mut().poll(cx).is_pending());
        std::task::Poll::Ready(())
    })
    .await;
    let sink = c.register(vec![0; 4096], Access::LOCAL_WRITE).unwrap();
    let remote = RemoteAddr::new(target.rkey(), target.addr());
    c.post_send(SendWr::read(7, Sge::whole(&sink), remote))
        .unwrap();
    let done = tokio::time::timeout(Duration::from_secs(5), c.poll_completion())
        .await
        .expect("the server answers the Read without its idle poller");
    assert!(done.is_success() && done.wr_id == 7, "{done:?}");
    assert!(sink.to_vec(0..4096).unwrap() == pattern(4096, 5));
    // The idle future still works when polled again.
    let sbuf = c.register(vec![9; 64], Access::NONE).unwrap();
    c.post_send(SendWr::send(8, vec![Sge::whole(&sbuf)]))
        .unwrap();
    let recv = tokio::time::timeout(Duration::from_secs(5), idle)
        .await
        .expect("the kept future completes");
    assert!(recv.is_success() && recv.wr_id == 1, "{recv:?}");
}

#[test]
fn a_poller_kept_but_not_polled_does_not_hold_the_stream_on_both_runtimes() {
    on_both_runtimes(a_poller_kept_but_not_polled_does_not_hold_the_stream);
}

#[test]
fn a_poller_that_gives_up_hands_the_stream_back_on_both_runtimes() {
    on_both_runtimes(a_poller_that_gives_up_hands_the_stream_back);
}

/// Two tasks wait for completions on one connection at once, without giving up: only one can
/// be the stream's reader, the other waits on the completion list, and whichever the other
/// displaces as the reader must still be woken. Together they take each receive of a series
/// of Sends exactly once; a last Send for each tells it to stop.
async fn two_pollers_share_the_stream() {
    const SENDS: u64 = 40;
    const POLLERS: u64 = 2;
    let (c, s) = pair(&provider(false, true)).await;
    let s = std::sync::Arc::new(s);
    let total = (SENDS + POLLERS) as usize;
    let rbuf = s
        .register(vec![0; 64 * total], Access::LOCAL_WRITE)
        .unwrap();
    for i in 0..total {
        s.post_recv(RecvWr::new(
            i as u64,
            Sge::new(&rbuf, i * 64..(i + 1) * 64).unwrap(),
        ))
        .unwrap();
    }
    let pollers: Vec<_> = (0..POLLERS)
        .map(|_| {
            let s = s.clone();
            tokio::spawn(async move {
                let mut taken = Vec::new();
                loop {
                    // No timeout here: its timer would wake a poller nobody else wakes.
                    let done = s.poll_completion().await;
                    assert!(done.is_success(), "{done:?}");
                    if done.wr_id >= SENDS {
                        return taken;
                    }
                    taken.push(done.wr_id);
                }
            })
        })
        .collect();
    let sbuf = c.register(vec![7; 64], Access::NONE).unwrap();
    for i in 0..SENDS + POLLERS {
        c.post_send(SendWr::send(100 + i, vec![Sge::whole(&sbuf)]))
            .unwrap();
        if i % 3 == 0 {
            tokio::task::yield_now().await;
        }
    }
    for i in 0..SENDS + POLLERS {
        let done = tokio::time::timeout(Duration::from_secs(5), c.poll_completion())
            .await
            .expect("the Send is confirmed");
        assert!(done.is_success(), "{done:?}");
        assert_eq!(done.wr_id, 100 + i);
    }
    let mut got = Vec::new();
    for p in pollers {
        got.extend(
            tokio::time::timeout(Duration::from_secs(15), p)
                .await
                .expect("both pollers finish: a waiting poller is always woken")
                .unwrap(),
        );
    }
    got.sort_unstable();
    assert_eq!(got, (0..SENDS).collect::<Vec<_>>());
}

#[test]
fn two_pollers_share_the_stream_on_both_runtimes() {
    on_both_runtimes(two_pollers_share_the_stream);
}

/// A consumer with a completion hook reads the input in its own task (`poll_input`): a Send
/// that arrives while it waits there is taken in that task, the hook called in it, and the
/// receive is ready once `poll_input` says so; after `end_input` the receive task reads again
/// and calls the hook itself for the next Send.
async fn a_hooked_consumer_reads_the_input_itself() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let (c, s) = pair(&provider(false, true)).await;
    let rbuf = s.register(vec![0; 128], Access::LOCAL_WRITE).unwrap();
    for i in 0..2 {
        s.post_recv(RecvWr::new(
            i,
            Sge::new(&rbuf, i as usize * 64..(i as usize + 1) * 64).unwrap(),
        ))
        .unwrap();
    }
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let (hooked_tx, mut hooked_rx) = tokio::sync::mpsc::unbounded_channel();
    assert!(s.set_completion_hook(Box::new(move || {
        counted.fetch_add(1, Ordering::SeqCst);
        let _ = hooked_tx.send(std::thread::current().id());
    })));
    let sbuf = c.register(vec![7; 64], Access::NONE).unwrap();
    let s = Arc::new(s);
    let reader = {
        let s = s.clone();
        tokio::spawn(async move {
            let mut waker = None;
            std::future::poll_fn(|cx| {
                waker = Some(cx.waker().clone());
                s.poll_input(cx)
            })
            .await;
            let recv = s
                .try_completion()
                .expect("the receive is ready when poll_input is");
            s.end_input(&waker.unwrap());
            (recv, std::thread::current().id())
        })
    };
    // The reader waits in poll_input before anything is sent.
    tokio::time::sleep(Duration::from_millis(20)).await;
    c.post_send(SendWr::send(10, vec![Sge::whole(&sbuf)]))
        .unwrap();
    let (recv, reader_thread) = tokio::time::timeout(Duration::from_secs(5), reader)
        .await
        .expect("the reader takes the Send")
        .unwrap();
    assert!(recv.is_success() && recv.wr_id == 0, "{recv:?}");
    let hook_thread = hooked_rx.recv().await.unwrap();
    assert_eq!(
        hook_thread, reader_thread,
        "the hook ran in the reading task"
    );
    // Nobody reads in poll_input any more: the receive task takes the next Send.
    c.post_send(SendWr::send(11, vec![Sge::whole(&sbuf)]))
        .unwrap();
    let mut second = None;
    for _ in 0..50 {
        tokio::time::timeout(Duration::from_secs(5), hooked_rx.recv())
            .await
            .expect("the receive task calls the hook")
            .unwrap();
        second = s.try_completion();
        if second.is_some() {
            break;
        }
    }
    let second = second.expect("the second receive completes");
    assert!(second.is_success() && second.wr_id == 1, "{second:?}");
    assert!(calls.load(Ordering::SeqCst) >= 2);
}

#[test]
fn a_hooked_consumer_reads_the_input_itself_on_both_runtimes() {
    on_both_runtimes(a_hooked_consumer_reads_the_input_itself);
}

/// Several threads outside the runtime post Sends on one connection at once, while a task
/// polls its completions (and, with confirmed completions, reads the peer's confirmations and
/// sends its own): a poster that finds another writer on the stream leaves its message to the
/// transmit task, which, finding the stream still taken, waits to be told when it is free
/// instead of sleeping on the lock. Every Send arrives exactly once, each thread's in the
/// order it posted them, and completes.
async fn posters_on_several_threads(confirm: bool) {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 64;
    const ROUNDS: usize = 20;
    const SLOT: usize = 8192;
    const SENDS: usize = THREADS * PER_THREAD;
    let (c, s) = pair(&provider(false, confirm)).await;
    let c = std::sync::Arc::new(c);
    let inbox = s
        .register(vec![0; SENDS * SLOT], Access::LOCAL_WRITE)
        .unwrap();
    for round in 0..ROUNDS {
        for slot in 0..SENDS {
            let sge = Sge::new(&inbox, slot * SLOT..(slot + 1) * SLOT).unwrap();
            s.post_recv(RecvWr::new(slot as u64, sge)).unwrap();
        }
        // Every fourth message is 8 KiB, so that writes take long enough to meet.
        let len = |k: usize| if k % 4 == 0 { SLOT } else { 64 };
        let message = |t: usize, k: usize| {
            let mut m = pattern(len(k), t * PER_THREAD + k + round);
            m[..3].copy_from_slice(&[t as u8, k as u8, round as u8]);
            m
        };
        let start = std::sync::Arc::new(std::sync::Barrier::new(THREADS));
        let posters: Vec<_> = (0..THREADS)
            .map(|t| {
                let (c, start) = (c.clone(), start.clone());
                let outbox = c
                    .register(vec![0; PER_THREAD * SLOT], Access::NONE)
                    .unwrap();
                for k in 0..PER_THREAD {
                    outbox.write(k * SLOT, &message(t, k)).unwrap();
                }
                std::thread::spawn(move || {
                    start.wait();
                    for k in 0..PER_THREAD {
                        let sge = Sge::new(&outbox, k * SLOT..k * SLOT + len(k)).unwrap();
                        c.post_send(SendWr::send((t * PER_THREAD + k) as u64, vec![sge]))
                            .unwrap();
                    }
                    outbox
                })
            })
            .collect();
        let mut sent = [0usize; THREADS];
        for _ in 0..SENDS {
            let done = tokio::time::timeout(Duration::from_secs(10), c.poll_completion())
                .await
                .expect("send completion in time");
            assert!(done.is_success(), "{done:?}");
            assert_eq!(done.opcode, WcOpcode::Send);
            let (t, k) = (
                done.wr_id as usize / PER_THREAD,
                done.wr_id as usize % PER_THREAD,
            );
            assert_eq!(
                k, sent[t],
                "thread {t}'s Sends complete in the order posted"
            );
            sent[t] += 1;
        }
        let mut seen = [0usize; THREADS];
        for slot in 0..SENDS {
            let done = tokio::time::timeout(Duration::from_secs(10), s.poll_completion())
                .await
                .expect("receive completion in time");
            assert!(done.is_success(), "{done:?}");
            assert_eq!((done.opcode, done.wr_id), (WcOpcode::Recv, slot as u64));
            let head = inbox.to_vec(slot * SLOT..slot * SLOT + 3).unwrap();
            let (t, k) = (head[0] as usize, head[1] as usize);
            assert_eq!(
                head[2] as usize, round,
                "slot {slot} holds this round's message"
            );
            assert_eq!(k, seen[t], "thread {t}'s Sends arrive in the order posted");
            seen[t] += 1;
            assert_eq!(done.byte_len as usize, len(k));
            let got = inbox.to_vec(slot * SLOT..slot * SLOT + len(k)).unwrap();
            assert!(got == message(t, k), "payload of thread {t}'s Send {k}");
        }
        assert_eq!(seen, [PER_THREAD; THREADS]);
        for p in posters {
            drop(p.join().unwrap());
        }
    }
    assert!(c.is_connected() && s.is_connected());
}

#[test]
fn posters_on_several_threads_lose_no_send() {
    for confirm in [false, true] {
        on_both_runtimes(|| posters_on_several_threads(confirm));
    }
}

/// A stream of small RDMA Writes with a window of work requests in flight, each completion
/// taken before the next Write is posted, as an application streams data: the confirmation
/// probe waits while completions are left to take, and goes out when the taker finds none,
/// whether it waits in `poll_completion` or spins on `try_completion`. Every Write completes,
/// in order, and every byte lands.
async fn a_window_of_writes(spin: bool) {
    const SIZE: usize = 4096;
    const WINDOW: usize = 8;
    const WRITES: usize = 300;
    let (c, s) = pair(&provider(false, true)).await;
    let target = s
        .register(vec![0; WRITES * SIZE], Access::REMOTE_WRITE)
        .unwrap();
    let data = c.register(pattern(WRITES * SIZE, 3), Access::NONE).unwrap();
    let write = |i: usize| {
        let at = RemoteAddr::new(target.rkey(), target.addr() + (i * SIZE) as u64);
        let sge = Sge::new(&data, i * SIZE..(i + 1) * SIZE).unwrap();
        c.post_send(SendWr::write(i as u64, vec![sge], at)).unwrap();
    };
    let mut posted = 0;
    while posted < WINDOW {
        write(posted);
        posted += 1;
    }
    for want in 0..WRITES as u64 {
        let done = tokio::time::timeout(Duration::from_secs(10), async {
            if spin {
                loop {
                    if let Some(done) = c.try_completion() {
                        return done;
                    }
                    tokio::task::yield_now().await;
                }
            } else {
                c.poll_completion().await
            }
        })
        .await
        .unwrap_or_else(|_| panic!("Write {want} completes (spinning: {spin})"));
        assert!(done.is_success(), "{done:?}");
        assert_eq!(done.wr_id, want);
        if posted < WRITES {
            write(posted);
            posted += 1;
        }
    }
    assert!(target.to_vec(0..WRITES * SIZE).unwrap() == pattern(WRITES * SIZE, 3));
}

#[test]
fn a_window_of_writes_completes_whether_the_taker_waits_or_spins() {
    for spin in [false, true] {
        on_both_runtimes(|| a_window_of_writes(spin));
    }
}

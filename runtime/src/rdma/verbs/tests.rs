//! Tests of the verbs provider.
//!
//! Without an RDMA device (the development machine, CI) they check the "no RDMA device" errors.
//! With `RPCRDMA_VERBS_ADDR` set to the address of an RDMA-capable interface (the Soft-RoCE
//! guest of `tests/vm/run provider`) they run the whole provider conformance suite and check
//! that no registration leaks.

use std::net::SocketAddr;

use super::*;
use crate::rdma::{Access, Connection, RecvWr, SendWr, Sge};

/// The rdma_cm address to test on, when the environment provides one.
fn test_addr() -> Option<SocketAddr> {
    let text = std::env::var("RPCRDMA_VERBS_ADDR").ok()?;
    let ip: std::net::IpAddr = text
        .parse()
        .unwrap_or_else(|e| panic!("RPCRDMA_VERBS_ADDR={text:?}: {e}"));
    Some(SocketAddr::new(ip, 0))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn without_a_device_connect_and_listen_fail_clearly() {
    if test_addr().is_some() || !device_names().is_empty() {
        // A device exists: the conformance test below covers this machine.
        assert!(!device_names().is_empty() || test_addr().is_some());
        return;
    }
    let rt = runtime();
    let provider = VerbsProvider::new();
    let addr: SocketAddr = "192.0.2.1:20049".parse().unwrap();
    let err = rt
        .block_on(provider.connect(addr, ConnectParams::new()))
        .unwrap_err();
    assert!(is_no_device(&err), "connect: {err}");
    assert!(err.to_string().contains("no RDMA device"), "{err}");
    let err = rt.block_on(provider.listen(addr)).unwrap_err();
    assert!(is_no_device(&err), "listen: {err}");
}

#[test]
fn status_and_access_mapping() {
    use crate::rdma::WcStatus;
    assert_eq!(
        conn::map_status(ibv_wc_status::IBV_WC_SUCCESS),
        WcStatus::Success
    );
    assert_eq!(
        conn::map_status(ibv_wc_status::IBV_WC_WR_FLUSH_ERR),
        WcStatus::Flushed
    );
    assert_eq!(
        conn::map_status(ibv_wc_status::IBV_WC_REM_ACCESS_ERR),
        WcStatus::RemoteAccessError
    );
    assert_eq!(
        conn::map_status(ibv_wc_status::IBV_WC_REM_INV_REQ_ERR),
        WcStatus::RemoteInvalidRequest
    );
    assert_eq!(
        conn::map_status(ibv_wc_status::IBV_WC_LOC_LEN_ERR),
        WcStatus::LocalLengthError
    );
    assert_eq!(conn::map_status(99), WcStatus::Other(99));
    // With windows, remote rights live on the window, never on the region's own rkey.
    let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    assert_eq!(
        conn::mr_access(rw, true) & ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0,
        0
    );
    assert_ne!(
        conn::mr_access(rw, true) & ibv_access_flags::IBV_ACCESS_MW_BIND.0,
        0
    );
    // Without (siw), they are the region's own, and no bind is asked for.
    assert_ne!(
        conn::mr_access(rw, false) & ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0,
        0
    );
    assert_eq!(
        conn::mr_access(rw, false) & ibv_access_flags::IBV_ACCESS_MW_BIND.0,
        0
    );
    assert_eq!(
        conn::mr_access(Access::REMOTE_READ, false) & ibv_access_flags::IBV_ACCESS_REMOTE_READ.0,
        ibv_access_flags::IBV_ACCESS_REMOTE_READ.0
    );
    assert_ne!(
        conn::mw_access(rw) & ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0,
        0
    );
    assert_eq!(conn::mw_access(Access::LOCAL_WRITE), 0);
    // Remote write needs local write on the region underneath.
    for windows in [true, false] {
        assert_ne!(
            conn::mr_access(Access::REMOTE_WRITE, windows)
                & ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0,
            0
        );
    }
}

/// A client connected to a new listener of `provider` on `addr`: (listener, client, server).
pub(super) async fn connected(
    provider: &VerbsProvider,
    addr: SocketAddr,
) -> (VerbsListener, VerbsConnection, VerbsConnection) {
    let listener = provider.listen(addr).await.unwrap();
    let at = listener.local_addr().unwrap();
    let (client, server) = tokio::join!(
        provider.connect(at, ConnectParams::new()),
        listener.accept(ConnectParams::new())
    );
    (listener, client.unwrap(), server.unwrap())
}

/// The process's live registrations and verbs or rdma_cm objects at the start of a test.
struct Baseline {
    registrations: usize,
    objects: usize,
}

impl Baseline {
    fn now() -> Baseline {
        Baseline {
            registrations: live_registrations(),
            objects: live_objects(),
        }
    }

    /// Everything made since [`Baseline::now`] is gone.
    fn assert_all_released(&self) {
        assert_eq!(
            live_registrations(),
            self.registrations,
            "registrations leaked"
        );
        assert_eq!(
            live_objects(),
            self.objects,
            "verbs or rdma_cm objects leaked: {}",
            live_objects_by_kind()
        );
    }
}

/// A small registered message on `conn`.
#[cfg(feature = "conformance")]
fn hello_of(conn: &VerbsConnection) -> crate::rdma::MemoryRegion {
    conn.register(vec![1; 8], Access::NONE).unwrap()
}

#[cfg(feature = "conformance")]
/// A Send posted before the peer's receive is delivered once the receive is posted (the
/// responder's "receiver not ready" answer and the sender's retry, on InfiniBand and RoCE).
async fn late_receive_is_retried(client: &VerbsConnection, server: &VerbsConnection) {
    let note = server.register(vec![7; 32], Access::NONE).unwrap();
    server
        .post_send(SendWr::send(1, vec![Sge::whole(&note)]))
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let rbuf = client.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    client.post_recv(RecvWr::new(2, Sge::whole(&rbuf))).unwrap();
    let c = tokio::time::timeout(std::time::Duration::from_secs(30), client.poll_completion())
        .await
        .expect("the late receive completes");
    assert!(c.is_success() && c.byte_len == 32, "{c:?}");
    assert_eq!(rbuf.to_vec(0..32).unwrap(), vec![7; 32]);
    let c = server.poll_completion().await;
    assert!(c.is_success(), "{c:?}");
}

#[test]
fn conformance_on_a_real_device() {
    use crate::rdma::conformance::{run_all, Harness};

    let Some(addr) = test_addr() else {
        // No device to test on here: the test above checks the error path instead.
        assert!(std::env::var_os("RPCRDMA_VERBS_ADDR").is_none());
        return;
    };
    let rt = runtime();
    let baseline = Baseline::now();
    let report = rt.block_on(async {
        // The device behind the address decides how a refused Send or Write shows, and
        // whether its keys can be invalidated by the peer.
        let (iwarp, windows, siw) = {
            let provider = VerbsProvider::new();
            let (_listener, client, _server) = connected(&provider, addr).await;
            println!("\nverbs: conformance on {}", client.device_name());
            let siw = client.device_name().starts_with("siw");
            (client.is_iwarp(), client.has_memory_windows(), siw)
        };
        let mut harness = Harness::new(VerbsProvider::new(), addr);
        if iwarp {
            harness = harness.with_local_requester_completions();
        }
        if !windows {
            harness = harness
                .without_remote_invalidation()
                .without_shared_receive_queues();
        }
        // A Send that finds the shared queue empty waits for a buffer (receiver not ready) on
        // InfiniBand and RoCE; no device bounds one connection's share.
        harness = harness.without_shared_receive_bounds();
        if siw {
            println!("verbs: siw does not refuse reads of regions without remote read rights");
            harness = harness.without_read_rights_check();
        }
        run_all(&harness).await
    });
    print!("{report}");
    assert!(
        report.passed(),
        "the verbs provider failed conformance:\n{report}"
    );

    // Registrations outlive nothing: after a connection with a remotely accessible region
    // (a window bound over a region) and a local one is dropped, the count is back.
    rt.block_on(async {
        let provider = VerbsProvider::new();
        let (listener, client, server) = connected(&provider, addr).await;
        let a = server
            .register(vec![0; 4096], Access::LOCAL_WRITE | Access::REMOTE_WRITE)
            .unwrap();
        let b = client.register(vec![1; 4096], Access::NONE).unwrap();
        if server.has_memory_windows() {
            assert_eq!(
                live_registrations(),
                baseline.registrations + 3,
                "region + window + region"
            );
            assert_ne!(a.rkey(), a.lkey(), "the advertised rkey is the window's");
        } else {
            assert_eq!(
                live_registrations(),
                baseline.registrations + 2,
                "region + region (no windows)"
            );
        }
        drop((a, b));

        // What the application keeps is released with the connection all the same (what lets
        // a removed device go, see `removal`): once both ends are dropped, regions still held
        // are registered nowhere, their memory stays readable, and the domains and
        // identifiers are gone too.
        let (kept_listener, kept_client, kept_server) = connected(&provider, addr).await;
        let device = kept_server.device_name();
        let kept = [
            kept_server
                .register(vec![7; 4096], Access::LOCAL_WRITE | Access::REMOTE_WRITE)
                .unwrap(),
            kept_server.register(vec![8; 65536], Access::NONE).unwrap(),
            kept_client
                .register(vec![9; 4096], Access::LOCAL_WRITE | Access::REMOTE_READ)
                .unwrap(),
        ];
        assert!(live_registrations_on(&device) >= 3, "{device}");
        kept_client.disconnect().await.unwrap();
        drop((kept_client, kept_server, kept_listener));
        assert_eq!(
            live_registrations_on(&device),
            0,
            "regions the application holds stay registered on {device}"
        );
        let before_kept = live_registrations();
        assert!(kept[0].to_vec(0..4096).unwrap().iter().all(|&b| b == 7));
        assert!(kept[1].to_vec(0..65536).unwrap().iter().all(|&b| b == 8));
        drop(kept);
        assert_eq!(
            live_registrations(),
            before_kept,
            "husks hold no registration"
        );

        // A Send that arrives before its receive is posted is not lost: the responder answers
        // "receiver not ready" and the sender retries (rnr_retry_count 7 = without limit).
        // Not on iWARP, which has no such retry: DDP's untagged message without a posted
        // buffer is an error that ends the stream.
        if client.is_iwarp() {
            println!(
                "\nverbs: no receiver-not-ready retry on iWARP ({})",
                client.device_name()
            );
        } else {
            late_receive_is_retried(&client, &server).await;
        }
        client.disconnect().await.unwrap();
        drop((client, server, listener));

        // connect_with/accept_with: a receive and a remotely writable region set up before
        // establishment; the server sends at once, the client writes into the region.
        let listener = provider.listen(addr).await.unwrap();
        let at = listener.local_addr().unwrap();
        let (mut client_rbuf, mut server_regions) = (None, None);
        let (client, server) = tokio::join!(
            provider.connect_with(at, ConnectParams::new(), |c: &VerbsConnection| {
                let r = c.register(vec![0; 64], Access::LOCAL_WRITE)?;
                c.post_recv(RecvWr::new(9, Sge::whole(&r)))?;
                client_rbuf = Some(r);
                Ok(())
            }),
            listener.accept_with(ConnectParams::new(), |c: &VerbsConnection| {
                let target = c.register(vec![0; 64], Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
                let r = c.register(vec![0; 64], Access::LOCAL_WRITE)?;
                c.post_recv(RecvWr::new(1, Sge::whole(&r)))?;
                server_regions = Some((target, r));
                Ok(())
            })
        );
        let (client, server) = (client.unwrap(), server.unwrap());
        let (client_rbuf, (target, server_rbuf)) = (client_rbuf.unwrap(), server_regions.unwrap());
        let hello = server.register(vec![5; 16], Access::NONE).unwrap();
        server
            .post_send(SendWr::send(2, vec![Sge::whole(&hello)]))
            .unwrap();
        let c = client.poll_completion().await;
        assert!(c.is_success() && c.wr_id == 9 && c.byte_len == 16, "{c:?}");
        let data = client.register(vec![3; 64], Access::NONE).unwrap();
        let remote = crate::rdma::RemoteAddr::new(target.rkey(), target.addr());
        client
            .post_send(SendWr::write(3, vec![Sge::whole(&data)], remote))
            .unwrap();
        client
            .post_send(SendWr::send(4, vec![Sge::whole(&hello_of(&client))]))
            .unwrap();
        for id in [3, 4] {
            let c = client.poll_completion().await;
            assert!(c.is_success() && c.wr_id == id, "{c:?}");
        }
        let mut got = Vec::new();
        while got.len() < 2 {
            let c = server.poll_completion().await;
            assert!(c.is_success(), "{c:?}");
            got.push(c.wr_id);
        }
        got.sort();
        assert_eq!(got, vec![1, 2]);
        assert_eq!(target.to_vec(0..64).unwrap(), vec![3; 64]);
        drop((client_rbuf, target, server_rbuf, hello, data));
        client.disconnect().await.unwrap();
        drop((client, server, listener));
    });
    // Dropping the runtime drops the connections' (aborted) event tasks, the last holders of
    // their rdma_cm identifiers.
    drop(rt);
    baseline.assert_all_released();
}

/// The next completion of `conn`, within 30 s.
async fn next_of(conn: &VerbsConnection, what: &str) -> crate::rdma::Completion {
    tokio::time::timeout(std::time::Duration::from_secs(30), conn.poll_completion())
        .await
        .unwrap_or_else(|_| panic!("{what}: no completion within 30 s"))
}

/// Posts an RDMA Write of `data` from `client` to `rkey` at `target`'s address and returns its
/// completion.
async fn write_via(
    client: &VerbsConnection,
    wr_id: u64,
    data: &crate::rdma::MemoryRegion,
    target: &crate::rdma::MemoryRegion,
    rkey: u32,
) -> crate::rdma::Completion {
    let remote = crate::rdma::RemoteAddr::new(rkey, target.addr());
    client
        .post_send(SendWr::write(wr_id, vec![Sge::whole(data)], remote))
        .unwrap();
    let c = next_of(client, "write").await;
    assert_eq!(c.wr_id, wr_id, "{c:?}");
    c
}

/// The live queue pairs of this process.
fn queue_pairs() -> usize {
    resources::LIVE_OBJECTS[resources::Object::QueuePair as usize].load(Ordering::SeqCst)
}

/// A connection dropped while a region it gave the peer lives on (its window still bound on
/// the queue pair, as a requester's is when its connection dies with a call in flight):
/// the connection deallocates that window before destroying its queue pair, so the key dies
/// with the connection and the teardown does not wait on the device (rxe holds a queue pair
/// for every window bound on it: destroying it first blocked the dropping thread ~51 s on
/// Linux 6.1). The region is deregistered with the connection too, and stays readable memory
/// for as long as it is held.
#[test]
fn a_dropped_connection_revokes_the_windows_still_bound_on_it() {
    let Some(addr) = test_addr() else {
        assert!(std::env::var_os("RPCRDMA_VERBS_ADDR").is_none());
        return;
    };
    let rt = runtime();
    let baseline = Baseline::now();
    rt.block_on(async {
        let provider = VerbsProvider::new();
        let (listener, client, server) = connected(&provider, addr).await;
        let target = server
            .register(vec![0; 64], Access::LOCAL_WRITE | Access::REMOTE_WRITE)
            .unwrap();
        let data = client.register(vec![0x3c; 16], Access::NONE).unwrap();
        let c = write_via(&client, 1, &data, &target, target.rkey()).await;
        assert!(c.is_success(), "a write through the bound window: {c:?}");

        let (count, qps) = (live_registrations(), queue_pairs());
        // Without windows (siw) the region's own key was given: nothing is bound on the
        // queue pair.
        let windows = usize::from(server.has_memory_windows());
        drop(server);
        assert_eq!(
            live_registrations(),
            count - windows - 1,
            "the window bound on the dropped connection is deallocated, and its region \
             deregistered though it is still held"
        );
        assert_eq!(
            queue_pairs(),
            qps - 1,
            "the connection's queue pair is gone"
        );
        assert_eq!(target.to_vec(0..16).unwrap(), vec![0x3c; 16]);
        drop(target);
        assert_eq!(
            live_registrations(),
            count - windows - 1,
            "dropping the husk releases nothing more"
        );
        drop((data, client, listener));
    });
    drop(rt);
    baseline.assert_all_released();
}

/// `rekey` on a device with memory windows (rxe in the guest): it must really rekey (a device
/// with windows answering Unsupported fails here), along each of its paths: while establishing,
/// a window that may be bound (replaced), one known free after a local invalidate or a peer's
/// Send with Invalidate (bound again at once), `Access::NONE`; old tags stop working; the
/// registration and object counts stay exact. On a device without windows (siw) `rekey` must
/// answer Unsupported, and the region keeps the key and rights it was registered with.
#[test]
fn rekey_on_a_real_device() {
    use crate::rdma::{Error, WcOpcode, WcStatus};
    use std::sync::atomic::Ordering;

    let Some(addr) = test_addr() else {
        assert!(std::env::var_os("RPCRDMA_VERBS_ADDR").is_none());
        return;
    };
    let rt = runtime();
    let baseline = Baseline::now();
    let replaced = || conn::WINDOW_REPLACEMENTS.load(Ordering::SeqCst);
    let all = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
    let mut rekeys = 0;
    let replaced_at_start = replaced();
    rt.block_on(async {
        let provider = VerbsProvider::new();
        let listener = provider.listen(addr).await.unwrap();
        let at = listener.local_addr().unwrap();
        // While establishing: the key and rights of the bind made at establishment change.
        let mut early = None;
        let (client, server) = tokio::join!(
            provider.connect(at, ConnectParams::new()),
            listener.accept_with(ConnectParams::new(), |c: &VerbsConnection| {
                let target = c.register(vec![0; 64], all)?;
                let first = target.rkey();
                match c.rekey(&target, Access::REMOTE_READ) {
                    Err(Error::Unsupported(why)) if c.has_memory_windows() => {
                        panic!("a device with memory windows answered Unsupported: {why}")
                    }
                    Err(Error::Unsupported(_)) => {
                        assert_eq!((target.rkey(), target.access()), (first, all));
                        early = Some(target);
                        return Ok(());
                    }
                    other => other?,
                }
                assert_ne!(target.rkey(), first);
                c.rekey(&target, Access::NONE)?;
                c.rekey(&target, Access::REMOTE_WRITE)?;
                early = Some(target);
                Ok(())
            })
        );
        let (client, server) = (client.unwrap(), server.unwrap());
        let target = early.unwrap();
        if !server.has_memory_windows() {
            // The region's own key is the remote key: a Write through it lands.
            let data = client.register(vec![0x5a; 16], Access::NONE).unwrap();
            let c = write_via(&client, 1, &data, &target, target.rkey()).await;
            assert!(c.is_success(), "write through the region's own key: {c:?}");
            assert_eq!(target.to_vec(0..16).unwrap(), vec![0x5a; 16]);
            println!(
                "\nverbs: rekey on {}: Unsupported (no memory windows), the region's own key works",
                server.device_name()
            );
            drop((target, data));
            let _ = client.disconnect().await;
            return;
        }
        rekeys += 3;
        assert_eq!(target.access(), Access::LOCAL_WRITE | Access::REMOTE_WRITE);
        let data = client.register(vec![0x5a; 16], Access::NONE).unwrap();
        let sink = client.register(vec![0; 16], Access::LOCAL_WRITE).unwrap();
        let rbuf = server.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
        let count = live_registrations();
        let mut keys = vec![target.rkey()];
        let c = write_via(&client, 1, &data, &target, target.rkey()).await;
        assert!(
            c.is_success(),
            "write after a rekey while establishing: {c:?}"
        );
        assert_eq!(target.to_vec(0..16).unwrap(), vec![0x5a; 16]);

        // A window that may be bound is replaced; the new tag reads.
        let r = replaced();
        server
            .rekey(&target, Access::REMOTE_READ | Access::REMOTE_WRITE)
            .unwrap();
        rekeys += 1;
        assert_eq!(replaced(), r + 1, "a bound window is replaced");
        assert_eq!(live_registrations(), count, "rekey changed the count");
        assert!(!keys.contains(&target.rkey()), "a tag came back");
        keys.push(target.rkey());
        let remote = crate::rdma::RemoteAddr::new(target.rkey(), target.addr());
        client
            .post_send(SendWr::read(2, Sge::whole(&sink), remote))
            .unwrap();
        let c = next_of(&client, "read").await;
        assert!(c.is_success() && c.opcode == WcOpcode::RdmaRead, "{c:?}");
        assert_eq!(sink.to_vec(0..16).unwrap(), vec![0x5a; 16]);

        // After a local invalidate the window is free: bound again at once, no replacement.
        let r = replaced();
        server
            .post_send(SendWr::local_invalidate(3, target.rkey()))
            .unwrap();
        // Rekeyed before the invalidate's completion is polled: it is ahead in the queue.
        server.rekey(&target, Access::REMOTE_WRITE).unwrap();
        rekeys += 1;
        let c = next_of(&server, "local invalidate").await;
        assert!(c.is_success() && c.wr_id == 3, "{c:?}");
        assert_eq!(replaced(), r, "a window invalidated locally is bound again");
        assert!(!keys.contains(&target.rkey()), "a tag came back");
        keys.push(target.rkey());
        let c = write_via(&client, 4, &data, &target, target.rkey()).await;
        assert!(c.is_success(), "write after rebinding: {c:?}");

        // After a peer's Send with Invalidate, likewise, even before the receive is polled.
        server.post_recv(RecvWr::new(5, Sge::whole(&rbuf))).unwrap();
        let invalidated = target.rkey();
        client
            .post_send(SendWr::send(6, vec![Sge::whole(&data)]).with_invalidate(invalidated))
            .unwrap();
        let c = next_of(&client, "send with invalidate").await;
        assert!(c.is_success() && c.wr_id == 6, "{c:?}");
        // rxe posts the receive completion before it acknowledges the Send.
        let r = replaced();
        server.rekey(&target, Access::REMOTE_WRITE).unwrap();
        rekeys += 1;
        assert_eq!(
            replaced(),
            r,
            "a window invalidated by the peer is bound again"
        );
        let c = next_of(&server, "receive with invalidate").await;
        assert!(
            c.is_success() && c.wr_id == 5,
            "rekey kept the receive: {c:?}"
        );
        assert_eq!(c.invalidated_rkey, Some(invalidated));
        assert!(!keys.contains(&target.rkey()), "a tag came back");
        keys.push(target.rkey());
        let c = write_via(&client, 7, &data, &target, target.rkey()).await;
        assert!(
            c.is_success(),
            "write after a remote invalidation and a rekey: {c:?}"
        );

        // NONE leaves the window free; the next rekey binds it without a replacement.
        server.rekey(&target, Access::NONE).unwrap();
        let r = replaced();
        server.rekey(&target, Access::REMOTE_WRITE).unwrap();
        rekeys += 2;
        assert_eq!(replaced(), r, "a window revoked by a rekey is bound again");
        assert_eq!(live_registrations(), count, "rekey changed the count");
        keys.push(target.rkey());
        let c = write_via(&client, 8, &data, &target, target.rkey()).await;
        assert!(c.is_success(), "write after NONE and a rekey: {c:?}");

        // Regions without remote rights: only NONE.
        let local = server.register(vec![0; 16], Access::LOCAL_WRITE).unwrap();
        server.rekey(&local, Access::NONE).unwrap();
        assert!(matches!(
            server.rekey(&local, Access::REMOTE_READ),
            Err(Error::InvalidWorkRequest(_))
        ));

        // An old tag is refused (which ends the connection).
        let old = keys[keys.len() - 2];
        let c = write_via(&client, 9, &data, &target, old).await;
        assert_eq!(
            c.status,
            WcStatus::RemoteAccessError,
            "write via an old tag"
        );
        // On a line of its own (after libtest's "test ... "), so tests/vm/guest.sh shows it.
        println!(
            "\nverbs: rekey on {}: {rekeys} rekeys, {} windows replaced, {} tags, old tag refused",
            server.device_name(),
            replaced() - replaced_at_start,
            keys.len()
        );
        drop((target, data, sink, rbuf, local));
        let _ = client.disconnect().await;
        drop((client, server, listener));
    });
    drop(rt);
    baseline.assert_all_released();
}

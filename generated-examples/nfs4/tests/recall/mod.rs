//! The delegation recall both transports' tests run (tests/server_rdma.rs over RPC-over-RDMA,
//! tests/server_tcp.rs over TCP): a reader holds a read delegation, a writer's OPEN makes the
//! server recall it over the reader's backchannel (RFC 5661 section 10.4.1), the reader
//! returns it, the writer's retried OPEN is granted and the reader sees its bytes.

use std::time::Duration;

use bytes::Bytes;
use rpcrdma_nfs4::client::{DelegationKind, DelegationWant, OpenOptions, Session};
use rpcrdma_nfs4::nfs4::StableHow4;

/// Runs the recall with `a`, the reader (sessions with a backchannel and
/// `RecallPolicy::Notify`), and `b`, the writer; destroys both.
pub async fn writer_after_recall(a: Session, b: Session) {
    let mut recalls = a.recalls().expect("the recall channel");
    let root = a.root_fh().await.expect("PUTROOTFH");
    let made = a
        .open(&root, "shared", OpenOptions::create(0o644))
        .await
        .expect("OPEN create");
    a.write(
        &made.fh,
        &made.stateid,
        0,
        Bytes::from_static(b"before"),
        StableHow4::FileSync4,
    )
    .await
    .expect("WRITE");
    a.close(&made.fh, &made.stateid).await.expect("CLOSE");
    let read = a
        .open(
            &root,
            "shared",
            OpenOptions::read().want(DelegationWant::Read),
        )
        .await
        .expect("OPEN for reading");
    let delegation = read.delegation.clone().expect("a read delegation");
    assert_eq!(delegation.kind, DelegationKind::Read);

    // Another client opens the file for writing: the server answers NFS4ERR_DELAY and recalls
    // the delegation over the reader's backchannel; the writer's session retries.
    let writer = tokio::spawn({
        let root = b.root_fh().await.expect("PUTROOTFH");
        async move {
            let opened = b.open(&root, "shared", OpenOptions::write()).await;
            (b, opened)
        }
    });
    let recall = tokio::time::timeout(Duration::from_secs(10), recalls.recv())
        .await
        .expect("a CB_RECALL within 10 s")
        .expect("the recall channel open");
    assert_eq!(recall.stateid, delegation.stateid);
    assert_eq!(recall.fh, read.fh);
    a.delegreturn(&recall.fh, &recall.stateid)
        .await
        .expect("DELEGRETURN");
    let (b, opened) = tokio::time::timeout(Duration::from_secs(10), writer)
        .await
        .expect("the writer's OPEN within 10 s")
        .expect("the writer's task");
    let w = opened.expect("the writer's OPEN after the delegation came back");
    assert!(w.delegation.is_none(), "no delegation for a writer");
    b.write(
        &w.fh,
        &w.stateid,
        0,
        Bytes::from_static(b"after!"),
        StableHow4::FileSync4,
    )
    .await
    .expect("WRITE");
    // The reader, no longer caching under a delegation, reads the new bytes.
    let (now, _) = a
        .read(&read.fh, &read.stateid, 0, 6)
        .await
        .expect("READ after the recall");
    assert_eq!(now, Bytes::from_static(b"after!"));
    b.close(&w.fh, &w.stateid).await.expect("CLOSE");
    a.close(&read.fh, &read.stateid).await.expect("CLOSE");
    b.destroy().await.expect("destroy writer");
    a.destroy().await.expect("destroy reader");
}

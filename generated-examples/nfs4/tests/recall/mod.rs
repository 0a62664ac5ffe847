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

/// A write delegation (RFC 5661 section 10.4.3) with `a` as its holder and `b` as another
/// client: `b` looking at the file's size, or opening it to read, recalls it; `a` returns it
/// after writing, and `b` then sees `a`'s bytes. Destroys both.
pub async fn reader_after_write_delegation(a: Session, b: Session) {
    use rpcrdma_nfs4::client::{basic_request, bitmap};
    use rpcrdma_nfs4::nfs4::FATTR4_TYPE;

    let mut recalls = a.recalls().expect("the recall channel");
    let root = a.root_fh().await.expect("PUTROOTFH");
    let held = a
        .open(
            &root,
            "written",
            OpenOptions::create(0o644).want(DelegationWant::Write),
        )
        .await
        .expect("OPEN create");
    let delegation = held.delegation.clone().expect("a write delegation");
    assert_eq!(delegation.kind, DelegationKind::Write);
    // The holder writes under its delegation's stateid.
    a.write(
        &held.fh,
        &delegation.stateid,
        0,
        Bytes::from_static(b"held!!"),
        StableHow4::Unstable4,
    )
    .await
    .expect("WRITE under the write delegation");
    // A filehandle is the file's for every client (b's LOOKUP would ask for the size).
    let fh = held.fh.clone();
    // Attributes a writer does not change do not recall it.
    b.getattr(&fh, bitmap(&[FATTR4_TYPE]))
        .await
        .expect("GETATTR of the type");
    assert!(
        recalls.try_recv().is_err(),
        "no recall for attributes the holder cannot change"
    );

    // The size does: the server recalls the delegation and answers NFS4ERR_DELAY, which b's
    // session retries until a has returned it.
    let looking = tokio::spawn({
        let fh = fh.clone();
        async move {
            let attrs = b.getattr(&fh, basic_request()).await;
            (b, attrs)
        }
    });
    let recall = tokio::time::timeout(Duration::from_secs(10), recalls.recv())
        .await
        .expect("a CB_RECALL within 10 s")
        .expect("the recall channel open");
    assert_eq!(recall.stateid, delegation.stateid);
    a.commit(&held.fh, 0, 0)
        .await
        .expect("COMMIT before returning");
    a.delegreturn(&recall.fh, &recall.stateid)
        .await
        .expect("DELEGRETURN");
    let (b, attrs) = tokio::time::timeout(Duration::from_secs(10), looking)
        .await
        .expect("the GETATTR within 10 s")
        .expect("the GETATTR's task");
    let attrs = rpcrdma_nfs4::client::decode_basic(&attrs.expect("GETATTR after the return"))
        .expect("basic attributes");
    assert_eq!(attrs.size, 6, "the holder's write is visible");

    // No delegation now: b opens to read at once and reads a's bytes.
    let root_b = b.root_fh().await.expect("PUTROOTFH");
    let reading = b
        .open(&root_b, "written", OpenOptions::read())
        .await
        .expect("OPEN for reading");
    let (got, _) = b
        .read(&reading.fh, &reading.stateid, 0, 6)
        .await
        .expect("READ");
    assert_eq!(got, Bytes::from_static(b"held!!"));
    b.close(&reading.fh, &reading.stateid).await.expect("CLOSE");
    a.close(&held.fh, &held.stateid).await.expect("CLOSE");
    b.destroy().await.expect("destroy b");
    a.destroy().await.expect("destroy a");
}

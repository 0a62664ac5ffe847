//! The conformance cases of protection: refused remote accesses, invalidated and rekeyed
//! steering tags. Each builds its own connections, so one failure does not cascade.

use super::util::{ensure, expect_ok, expect_refused, expect_status, pair, pattern, region, Step};
use super::{Failure, ProviderUnderTest};
use crate::rdma::{Access, Connection, Error, RecvWr, RemoteAddr, SendWr, Sge, WcOpcode, WcStatus};

/// One refused remote access on a fresh connection: the requester sees a remote access error
/// (or, on iWARP, its connection end) and the target registration is unchanged.
async fn refused_write<T: ProviderUnderTest>(
    put: &T,
    what: &str,
    access: Access,
    remote_of: impl Fn(&crate::rdma::MemoryRegion) -> RemoteAddr,
    len: usize,
) -> Result<(), Failure> {
    let (client, server) = pair(put).await?;
    let target = region(&server, 64, access, |_| 0)?;
    let data = region(&client, len, Access::NONE, pattern(1))?;
    client
        .post_send(SendWr::write(
            1,
            vec![Sge::whole(&data)],
            remote_of(&target),
        ))
        .step("post write")?;
    expect_refused(put, &client, 1, &[WcStatus::RemoteAccessError], what).await?;
    let after = target.to_vec(0..64).step("read back")?;
    ensure!(after.iter().all(|&b| b == 0), "{what}: target was written");
    Ok(())
}

pub(super) async fn access_violations<T: ProviderUnderTest>(put: &T) -> Result<(), Failure> {
    let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    refused_write(
        put,
        "write across the end of a registration",
        rw,
        |mr| RemoteAddr::new(mr.rkey(), mr.addr() + 48),
        32,
    )
    .await?;
    refused_write(
        put,
        "write below the start of a registration",
        rw,
        |mr| RemoteAddr::new(mr.rkey(), mr.addr().wrapping_sub(8)),
        16,
    )
    .await?;
    refused_write(
        put,
        "write without remote write access",
        Access::LOCAL_WRITE | Access::REMOTE_READ,
        |mr| RemoteAddr::new(mr.rkey(), mr.addr()),
        16,
    )
    .await?;
    refused_write(
        put,
        "write with an unknown tag",
        rw,
        |mr| RemoteAddr::new(mr.rkey() ^ 0x5a5a_5a00, mr.addr()),
        16,
    )
    .await?;

    // A read without remote read access, and a read past the end.
    let mut reads = vec![];
    if put.refuses_reads_without_read_rights() {
        reads.push((
            "read without remote read access",
            Access::REMOTE_WRITE,
            0u64,
            16usize,
        ));
    }
    reads.push((
        "read across the end of a registration",
        Access::REMOTE_READ,
        60,
        16,
    ));
    for (what, access, offset, len) in reads {
        let (client, server) = pair(put).await?;
        let source = region(&server, 64, access, pattern(2))?;
        let sink = region(&client, len, Access::LOCAL_WRITE, |_| 0)?;
        let remote = RemoteAddr::new(source.rkey(), source.addr() + offset);
        client
            .post_send(SendWr::read(1, Sge::whole(&sink), remote))
            .step("post read")?;
        // On iWARP the responder's refusal ends the stream, and siw flushes the Read.
        let refusals: &[WcStatus] = if put.requester_sees_refusals() {
            &[WcStatus::RemoteAccessError]
        } else {
            &[WcStatus::RemoteAccessError, WcStatus::Flushed]
        };
        expect_status(&client, 1, refusals, what).await?;
        ensure!(
            sink.to_vec(0..len)
                .step("read back")?
                .iter()
                .all(|&b| b == 0),
            "{what}: the sink was written"
        );
    }
    Ok(())
}

pub(super) async fn invalidated_tag<T: ProviderUnderTest>(put: &T) -> Result<(), Failure> {
    let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    // Local invalidate at the target.
    {
        let (client, server) = pair(put).await?;
        let target = region(&server, 64, rw, |_| 0)?;
        server
            .post_send(SendWr::local_invalidate(5, target.rkey()))
            .step("post local invalidate")?;
        expect_ok(&server, 5, WcOpcode::LocalInvalidate, "local invalidate").await?;
        let data = region(&client, 16, Access::NONE, pattern(4))?;
        let remote = RemoteAddr::new(target.rkey(), target.addr());
        client
            .post_send(SendWr::write(1, vec![Sge::whole(&data)], remote))
            .step("post write")?;
        expect_refused(
            put,
            &client,
            1,
            &[WcStatus::RemoteAccessError],
            "write to a locally invalidated tag",
        )
        .await?;
        ensure!(
            target
                .to_vec(0..64)
                .step("read back")?
                .iter()
                .all(|&b| b == 0),
            "an invalidated tag was written"
        );
    }
    // Remote invalidate with Send with Invalidate (RFC 5040 section 5.3).
    if put.remote_invalidation() {
        let (client, server) = pair(put).await?;
        let target = region(&server, 64, rw, |_| 0)?;
        let rbuf = region(&server, 64, Access::LOCAL_WRITE, |_| 0)?;
        server
            .post_recv(RecvWr::new(3, Sge::whole(&rbuf)))
            .step("post_recv")?;
        let note = region(&client, 8, Access::NONE, pattern(6))?;
        client
            .post_send(SendWr::send(1, vec![Sge::whole(&note)]).with_invalidate(target.rkey()))
            .step("post send with invalidate")?;
        expect_ok(&client, 1, WcOpcode::Send, "send with invalidate").await?;
        let c = expect_ok(&server, 3, WcOpcode::Recv, "receive with invalidate").await?;
        ensure!(
            c.invalidated_rkey == Some(target.rkey()),
            "receive completion names invalidated tag {:?}, expected {:#x}",
            c.invalidated_rkey,
            target.rkey()
        );
        let data = region(&client, 16, Access::NONE, pattern(4))?;
        let remote = RemoteAddr::new(target.rkey(), target.addr());
        client
            .post_send(SendWr::write(2, vec![Sge::whole(&data)], remote))
            .step("post write")?;
        expect_refused(
            put,
            &client,
            2,
            &[WcStatus::RemoteAccessError],
            "write to a remotely invalidated tag",
        )
        .await?;
        ensure!(
            target
                .to_vec(0..64)
                .step("read back")?
                .iter()
                .all(|&b| b == 0),
            "an invalidated tag was written"
        );
    }
    Ok(())
}

pub(super) async fn rekey<T: ProviderUnderTest>(put: &T) -> Result<(), Failure> {
    let rights = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
    let (client, server) = pair(put).await?;
    let target = region(&server, 64, rights, |_| 0)?;
    let data = region(&client, 16, Access::NONE, pattern(7))?;

    // Invalidate the tag, then rekey for remote write only.
    let first = target.rkey();
    server
        .post_send(SendWr::local_invalidate(1, first))
        .step("post invalidate")?;
    expect_ok(&server, 1, WcOpcode::LocalInvalidate, "local invalidate").await?;
    match server.rekey(&target, Access::REMOTE_WRITE) {
        // Allowed by the contract: such providers' callers register anew instead.
        Err(Error::Unsupported(_)) => return Ok(()),
        other => other.step("rekey")?,
    }
    let second = target.rkey();
    ensure!(second != first, "rekey kept the tag {first:#x}");
    let rights_now = target.access();
    ensure!(
        rights_now.contains(Access::REMOTE_WRITE | Access::LOCAL_WRITE)
            && !rights_now.contains(Access::REMOTE_READ),
        "rights after rekey: {rights_now:?}"
    );

    // Refused, leaving the region as it was: rights beyond the registration, local rights,
    // another connection's region.
    let narrow = region(
        &server,
        16,
        Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        |_| 0,
    )?;
    let (narrow_key, narrow_rights) = (narrow.rkey(), narrow.access());
    for (mr, remote, what) in [
        (
            &narrow,
            Access::REMOTE_READ,
            "rights beyond the registration",
        ),
        (&narrow, Access::LOCAL_WRITE, "a local right"),
        (&data, Access::NONE, "the peer's region"),
    ] {
        match server.rekey(mr, remote) {
            Err(Error::InvalidWorkRequest(_)) => {}
            other => ensure!(
                false,
                "rekey with {what}: {other:?}, expected an invalid request"
            ),
        }
    }
    ensure!(
        narrow.rkey() == narrow_key && narrow.access() == narrow_rights,
        "a refused rekey changed the region: {narrow:?}"
    );

    // The new tag works: a Write, then a Send that fences it.
    let recv = region(&server, 64, Access::LOCAL_WRITE, |_| 0)?;
    server
        .post_recv(RecvWr::new(2, Sge::whole(&recv)))
        .step("post recv")?;
    client
        .post_send(SendWr::write(
            3,
            vec![Sge::whole(&data)],
            RemoteAddr::new(second, target.addr() + 8),
        ))
        .step("post write, new tag")?;
    client
        .post_send(SendWr::send(4, vec![Sge::whole(&data)]))
        .step("post send")?;
    expect_ok(&client, 3, WcOpcode::RdmaWrite, "write, new tag").await?;
    expect_ok(&client, 4, WcOpcode::Send, "send").await?;
    expect_ok(&server, 2, WcOpcode::Recv, "recv").await?;
    ensure!(
        target.to_vec(8..24).step("read back")? == data.to_vec(0..16).step("data")?,
        "the write through the new tag did not land"
    );

    // The old tag does not (the refusal may end this connection).
    client
        .post_send(SendWr::write(
            5,
            vec![Sge::whole(&data)],
            RemoteAddr::new(first, target.addr()),
        ))
        .step("post write, old tag")?;
    expect_status(&client, 5, &[WcStatus::RemoteAccessError], "write, old tag").await?;

    // Revoking: a rekey to no remote rights leaves no tag that works.
    let (client, server) = pair(put).await?;
    let target = region(&server, 64, rights, |_| 0)?;
    let data = region(&client, 16, Access::NONE, pattern(9))?;
    server.rekey(&target, Access::NONE).step("rekey to none")?;
    ensure!(
        !target.access().is_remote(),
        "rights after revoking: {:?}",
        target.access()
    );
    client
        .post_send(SendWr::write(
            6,
            vec![Sge::whole(&data)],
            RemoteAddr::new(target.rkey(), target.addr()),
        ))
        .step("post write after revoke")?;
    expect_status(
        &client,
        6,
        &[WcStatus::RemoteAccessError],
        "write after revoke",
    )
    .await?;
    ensure!(
        target
            .to_vec(0..64)
            .step("read back")?
            .iter()
            .all(|&b| b == 0),
        "a revoked registration was written"
    );
    Ok(())
}

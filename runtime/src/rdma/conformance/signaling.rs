//! Conformance of unsignaled send-queue requests ([`SendWr::unsignaled`]): silent on success,
//! done once a later signaled request completes, heard from when they fail.

use super::util::{
    ensure, expect_connection_end, expect_ok, expect_quiet, next, pair, pattern, region, Step,
};
use super::{Failure, ProviderUnderTest};
use crate::rdma::{Access, Connection, RecvWr, RemoteAddr, SendWr, Sge, WcOpcode, WcStatus};

pub(super) async fn unsignaled_requests<T: ProviderUnderTest>(put: &T) -> Result<(), Failure> {
    let (client, server) = pair(put).await?;
    let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let target = region(&server, 8192, rw, |_| 0)?;
    let source = region(&server, 4096, rw, pattern(9))?;
    let rbuf = region(&server, 64, Access::LOCAL_WRITE, |_| 0)?;
    for id in [1, 2] {
        server
            .post_recv(RecvWr::new(id, Sge::whole(&rbuf)))
            .step("post_recv")?;
    }
    let data = region(&client, 8192, Access::NONE, pattern(3))?;
    let sink = region(&client, 4096, Access::LOCAL_WRITE, |_| 0)?;
    let note = region(&client, 8, Access::NONE, |_| b'!')?;

    // Two Writes, a Read and a Send, all unsignaled, then a signaled Send: one completion.
    let to = |at: u64| RemoteAddr::new(target.rkey(), target.addr() + at);
    let from = RemoteAddr::new(source.rkey(), source.addr());
    let requests = vec![
        SendWr::write(1, Sge::new(&data, 0..4096).step("sge")?, to(0)).unsignaled(),
        SendWr::write(2, Sge::new(&data, 4096..8192).step("sge")?, to(4096)).unsignaled(),
        SendWr::read(3, Sge::whole(&sink), from).unsignaled(),
        SendWr::send(4, Sge::whole(&note)).unsignaled(),
        SendWr::send(5, Sge::whole(&note)),
    ];
    for wr in requests {
        client.post_send(wr).step("post")?;
    }
    expect_ok(
        &client,
        5,
        WcOpcode::Send,
        "the signaled Send after four unsignaled",
    )
    .await?;
    expect_quiet(&client, "after the signaled Send").await?;
    // Completions come in posting order: the Read before the Send has filled its sink.
    ensure!(
        sink.to_vec(0..4096).step("read back")? == source.to_vec(0..4096).step("read back")?,
        "the unsignaled Read's sink differs from its source"
    );
    expect_ok(&server, 1, WcOpcode::Recv, "the unsignaled Send").await?;
    expect_ok(&server, 2, WcOpcode::Recv, "the signaled Send").await?;
    ensure!(
        target.to_vec(0..8192).step("read back")? == data.to_vec(0..8192).step("read back")?,
        "the unsignaled Writes' bytes differ"
    );

    // An unsignaled Write the responder refuses is heard of: its error completion, or on a
    // device that completes Writes once sent (iWARP), the end of the connection.
    let bad = RemoteAddr::new(target.rkey() ^ 0x5a5a_0000, target.addr());
    client
        .post_send(SendWr::write(6, Sge::new(&data, 0..16).step("sge")?, bad).unsignaled())
        .step("post refused write")?;
    if put.requester_sees_refusals() {
        let c = next(&client, "the refused unsignaled Write").await?;
        ensure!(
            c.wr_id == 6 && c.status != WcStatus::Success,
            "the refused unsignaled Write: expected its error completion, got {c:?}"
        );
    } else {
        expect_connection_end(&client, "the refused unsignaled Write").await?;
    }
    Ok(())
}

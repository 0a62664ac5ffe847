//! The conformance cases of connections and messages: setup, Sends, Writes and Reads that
//! succeed, lists, closing, many outstanding. Each builds its own connections, so one failure
//! does not cascade.

use super::util::{
    ensure, expect_ok, expect_quiet, expect_refused, expect_status, next, pair, pair_with, pattern,
    region, Step, STEP,
};
use super::{Failure, ProviderUnderTest};
use crate::rdma::{
    Access, ConnectParams, ConnectRequest, Connection, Error, Listener, Provider, RecvWr,
    RemoteAddr, SendWr, Sge, WcOpcode, WcStatus,
};

/// The statuses a sender may see when its peer refuses an operation.
const REMOTE_REFUSALS: &[WcStatus] = &[
    WcStatus::RemoteOperationError,
    WcStatus::RemoteInvalidRequest,
];

pub(super) async fn private_data<T: ProviderUnderTest>(put: &T) -> Result<(), Failure> {
    let provider = put.provider();
    let listener = provider.listen(put.listen_addr()).await.step("listen")?;
    let addr = listener.local_addr().step("listener address")?;

    let accepted = async {
        let request = listener.next_request().await.step("next request")?;
        ensure!(
            request.private_data() == b"hello from the client",
            "request private data: got {:?}",
            request.private_data()
        );
        request
            .accept(ConnectParams::new().private_data(&b"hello from the server"[..]))
            .await
            .step("accept")
    };
    let connect = provider.connect(
        addr,
        ConnectParams::new().private_data(&b"hello from the client"[..]),
    );
    let (client, server) = tokio::time::timeout(STEP, async { tokio::join!(connect, accepted) })
        .await
        .map_err(|_| Failure("connection setup timed out".into()))?;
    let (client, server) = (client.step("connect")?, server?);
    ensure!(
        client.peer_private_data() == b"hello from the server",
        "reply private data at the client: got {:?}",
        client.peer_private_data()
    );
    ensure!(
        server.peer_private_data() == b"hello from the client",
        "request private data at the server: got {:?}",
        server.peer_private_data()
    );
    ensure!(
        client.is_connected() && server.is_connected(),
        "both sides connected"
    );

    let rejected = async {
        let request = listener.next_request().await.step("next request")?;
        request.reject(b"go away").await.step("reject")
    };
    let connect = provider.connect(addr, ConnectParams::new().private_data(&b"again"[..]));
    let (outcome, rejected) = tokio::time::timeout(STEP, async { tokio::join!(connect, rejected) })
        .await
        .map_err(|_| Failure("rejection timed out".into()))?;
    rejected?;
    match outcome {
        Err(Error::Rejected { private_data }) => ensure!(
            private_data == b"go away",
            "rejection private data: got {private_data:?}"
        ),
        Err(other) => return Err(Failure(format!("expected a rejection, got error {other}"))),
        Ok(_) => return Err(Failure("a rejected connect succeeded".into())),
    }
    Ok(())
}

pub(super) async fn send_recv_ordering<T: ProviderUnderTest>(put: &T) -> Result<(), Failure> {
    const N: usize = 32;
    const SLOT: usize = 256;
    let (client, server) = pair(put).await?;
    let rbuf = region(&server, N * SLOT, Access::LOCAL_WRITE, |_| 0)?;
    for i in 0..N {
        let sge = Sge::new(&rbuf, i * SLOT..(i + 1) * SLOT).step("recv sge")?;
        server
            .post_recv(RecvWr::new(i as u64, sge))
            .step("post_recv")?;
    }
    // Message i is i+1 bytes long (plus 100 for every other one), filled with i.
    let lens: Vec<usize> = (0..N).map(|i| i + 1 + (i % 2) * 100).collect();
    let sbuf = region(&client, N * SLOT, Access::NONE, |b| (b / SLOT) as u8)?;
    for (i, &len) in lens.iter().enumerate() {
        let sge = Sge::new(&sbuf, i * SLOT..i * SLOT + len).step("send sge")?;
        client
            .post_send(SendWr::send(1000 + i as u64, vec![sge]))
            .step("post_send")?;
    }
    for i in 0..N {
        expect_ok(&client, 1000 + i as u64, WcOpcode::Send, "send").await?;
    }
    for (i, &len) in lens.iter().enumerate() {
        let c = expect_ok(&server, i as u64, WcOpcode::Recv, "receive").await?;
        ensure!(
            c.byte_len as usize == len,
            "receive {i}: byte_len {} != {len}",
            c.byte_len
        );
        let got = rbuf.to_vec(i * SLOT..i * SLOT + len).step("read back")?;
        ensure!(
            got.iter().all(|&b| b == i as u8),
            "receive {i}: payload of another message"
        );
    }
    Ok(())
}

pub(super) async fn preposted_receives<T: ProviderUnderTest>(put: &T) -> Result<(), Failure> {
    let provider = put.provider();
    let listener = provider.listen(put.listen_addr()).await.step("listen")?;
    let addr = listener.local_addr().step("listener address")?;
    let mut server_buf = None;
    let mut client_buf = None;
    // Both sides send their first message as soon as they can; only receives posted in the
    // setup callbacks can be in place in time.
    let accept = listener.accept_with(ConnectParams::new(), |conn| {
        let mr = conn.register(vec![0; 64], Access::LOCAL_WRITE)?;
        conn.post_recv(RecvWr::new(1, Sge::whole(&mr)))?;
        server_buf = Some(mr);
        Ok(())
    });
    let connect = provider.connect_with(addr, ConnectParams::new(), |conn| {
        let mr = conn.register(vec![0; 64], Access::LOCAL_WRITE)?;
        conn.post_recv(RecvWr::new(2, Sge::whole(&mr)))?;
        client_buf = Some(mr);
        Ok(())
    });
    let (client, server) = tokio::time::timeout(STEP, async { tokio::join!(connect, accept) })
        .await
        .map_err(|_| Failure("connection setup timed out".into()))?;
    let (client, server) = (client.step("connect_with")?, server.step("accept_with")?);
    let hello = region(&server, 5, Access::NONE, |i| b"hello"[i])?;
    let world = region(&client, 5, Access::NONE, |i| b"world"[i])?;
    server
        .post_send(SendWr::send(3, vec![Sge::whole(&hello)]))
        .step("server send")?;
    client
        .post_send(SendWr::send(4, vec![Sge::whole(&world)]))
        .step("client send")?;
    let mut client_seen = Vec::new();
    let mut server_seen = Vec::new();
    for _ in 0..2 {
        client_seen.push(next(&client, "client completions").await?);
        server_seen.push(next(&server, "server completions").await?);
    }
    for c in client_seen.iter().chain(&server_seen) {
        ensure!(c.status == WcStatus::Success, "completion {c:?}");
    }
    let (sb, cb) = (
        server_buf.ok_or_else(|| Failure("accept_with setup did not run".into()))?,
        client_buf.ok_or_else(|| Failure("connect_with setup did not run".into()))?,
    );
    ensure!(
        sb.to_vec(0..5).step("read back")? == b"world",
        "server received other bytes"
    );
    ensure!(
        cb.to_vec(0..5).step("read back")? == b"hello",
        "client received other bytes"
    );
    Ok(())
}

pub(super) async fn solicited_send<T: ProviderUnderTest>(put: &T) -> Result<(), Failure> {
    let (client, server) = pair(put).await?;
    let rbuf = region(&server, 64, Access::LOCAL_WRITE, |_| 0)?;
    server
        .post_recv(RecvWr::new(1, Sge::whole(&rbuf)))
        .step("post_recv")?;
    let sbuf = region(&client, 48, Access::NONE, pattern(3))?;
    client
        .post_send(SendWr::send(2, vec![Sge::whole(&sbuf)]).solicited())
        .step("post_send")?;
    expect_ok(&client, 2, WcOpcode::Send, "solicited send").await?;
    let c = expect_ok(&server, 1, WcOpcode::Recv, "solicited receive").await?;
    ensure!(c.byte_len == 48, "byte_len {}", c.byte_len);
    ensure!(
        rbuf.to_vec(0..48).step("read back")? == sbuf.to_vec(0..48).step("read back")?,
        "payload differs"
    );
    Ok(())
}

pub(super) async fn send_too_long<T: ProviderUnderTest>(put: &T) -> Result<(), Failure> {
    let (client, server) = pair(put).await?;
    let rbuf = region(&server, 16, Access::LOCAL_WRITE, |_| 0)?;
    server
        .post_recv(RecvWr::new(7, Sge::whole(&rbuf)))
        .step("post_recv")?;
    let sbuf = region(&client, 64, Access::NONE, pattern(9))?;
    client
        .post_send(SendWr::send(8, vec![Sge::whole(&sbuf)]))
        .step("post_send")?;
    // RFC 5041 section 7.2: a DDP message too long for the buffer is an error at the Data Sink.
    expect_status(
        &server,
        7,
        &[WcStatus::LocalLengthError],
        "receive of an oversized send",
    )
    .await?;
    expect_refused(put, &client, 8, REMOTE_REFUSALS, "oversized send").await
}

pub(super) async fn write_then_send<T: ProviderUnderTest>(put: &T) -> Result<(), Failure> {
    let (client, server) = pair(put).await?;
    let target = region(
        &server,
        16384,
        Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        |_| 0,
    )?;
    let rbuf = region(&server, 64, Access::LOCAL_WRITE, |_| 0)?;
    server
        .post_recv(RecvWr::new(1, Sge::whole(&rbuf)))
        .step("post_recv")?;

    let data = region(&client, 10000, Access::NONE, pattern(5))?;
    let note = region(&client, 4, Access::NONE, |_| b'!')?;
    // Two gather elements, to a remote offset that is not aligned.
    let sg = vec![
        Sge::new(&data, 0..3333).step("sge")?,
        Sge::new(&data, 3333..10000).step("sge")?,
    ];
    let remote = RemoteAddr::new(target.rkey(), target.addr() + 100);
    client
        .post_send(SendWr::write(10, sg, remote))
        .step("post write")?;
    client
        .post_send(SendWr::send(11, vec![Sge::whole(&note)]))
        .step("post send")?;
    expect_ok(&client, 10, WcOpcode::RdmaWrite, "write").await?;
    expect_ok(&client, 11, WcOpcode::Send, "send after write").await?;
    expect_ok(&server, 1, WcOpcode::Recv, "receive after write").await?;
    // RFC 5040 section 5.5: a Send placed after an RDMA Write sees the Write's data.
    let placed = target.to_vec(0..16384).step("read back")?;
    let expected = data.to_vec(0..10000).step("read back")?;
    ensure!(placed[100..10100] == expected[..], "written bytes differ");
    ensure!(
        placed[..100]
            .iter()
            .chain(&placed[10100..])
            .all(|&b| b == 0),
        "bytes outside the write changed"
    );
    Ok(())
}

pub(super) async fn posted_as_a_list<T: ProviderUnderTest>(put: &T) -> Result<(), Failure> {
    let (client, server) = pair(put).await?;
    let target = region(
        &server,
        8192,
        Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        |_| 0,
    )?;
    let rbufs: Vec<_> = (0..3)
        .map(|_| region(&server, 64, Access::LOCAL_WRITE, |_| 0))
        .collect::<Result<_, _>>()?;
    for (i, rbuf) in rbufs.iter().enumerate() {
        server
            .post_recv(RecvWr::new(i as u64, Sge::whole(rbuf)))
            .step("post_recv")?;
    }
    let data = region(&client, 8192, Access::NONE, pattern(13))?;
    let note = |byte: u8| region(&client, 4, Access::NONE, move |_| byte);
    let (first, second) = (note(b'1')?, note(b'2')?);
    let remote = |at: u64| RemoteAddr::new(target.rkey(), target.addr() + at);
    // Two Writes and a Send in one list: they complete in order, and the Send finds both
    // Writes' data placed (RFC 5040 section 5.5).
    client
        .post_sends(vec![
            SendWr::write(10, vec![Sge::new(&data, 0..4096).step("sge")?], remote(0)),
            SendWr::write(
                11,
                vec![Sge::new(&data, 4096..8192).step("sge")?],
                remote(4096),
            ),
            SendWr::send(12, vec![Sge::whole(&first)]),
        ])
        .step("post_sends")?;
    expect_ok(&client, 10, WcOpcode::RdmaWrite, "first write of the list").await?;
    expect_ok(&client, 11, WcOpcode::RdmaWrite, "second write of the list").await?;
    expect_ok(&client, 12, WcOpcode::Send, "send of the list").await?;
    expect_ok(&server, 0, WcOpcode::Recv, "receive of the list's send").await?;
    ensure!(
        target.to_vec(0..8192).step("read back")? == data.to_vec(0..8192).step("read back")?,
        "the list's written bytes differ"
    );
    // A list with a request the provider refuses (a region of another connection): the one
    // before it is posted, it and the one after are not.
    let foreign = region(&server, 4, Access::NONE, |_| b'x')?;
    let refused = client.post_sends(vec![
        SendWr::send(20, vec![Sge::whole(&second)]),
        SendWr::send(21, vec![Sge::whole(&foreign)]),
        SendWr::send(22, vec![Sge::whole(&second)]),
    ]);
    ensure!(
        matches!(refused, Err(Error::InvalidWorkRequest(_))),
        "a list with another connection's region: {refused:?}"
    );
    expect_ok(&client, 20, WcOpcode::Send, "send before the refused one").await?;
    expect_ok(&server, 1, WcOpcode::Recv, "receive of the send before it").await?;
    client
        .post_send(SendWr::send(23, vec![Sge::whole(&first)]))
        .step("post_send after the list")?;
    // The next completions are the later Send's: nothing of 21 or 22 was posted.
    expect_ok(&client, 23, WcOpcode::Send, "send after the refused list").await?;
    expect_ok(&server, 2, WcOpcode::Recv, "receive after the refused list").await?;
    ensure!(
        rbufs[2].to_vec(0..1).step("read back")? == b"1",
        "the receive after the refused list holds another message"
    );
    Ok(())
}

pub(super) async fn rdma_read<T: ProviderUnderTest>(put: &T) -> Result<(), Failure> {
    let (client, server) = pair(put).await?;
    let source = region(&server, 8192, Access::REMOTE_READ, pattern(11))?;
    let sink = region(&client, 8192, Access::LOCAL_WRITE, |_| 0)?;
    let remote = RemoteAddr::new(source.rkey(), source.addr());
    client
        .post_send(SendWr::read(1, Sge::whole(&sink), remote))
        .step("post read")?;
    let c = expect_ok(&client, 1, WcOpcode::RdmaRead, "read").await?;
    ensure!(c.byte_len == 8192, "byte_len {}", c.byte_len);
    ensure!(
        sink.to_vec(0..8192).step("read back")? == source.to_vec(0..8192).step("read back")?,
        "read bytes differ"
    );

    // A sub-range into the middle of a fresh sink.
    let sink2 = region(&client, 8192, Access::LOCAL_WRITE, |_| 0)?;
    client
        .post_send(SendWr::read(
            2,
            Sge::new(&sink2, 5000..8000).step("sge")?,
            remote.offset(1000),
        ))
        .step("post read")?;
    expect_ok(&client, 2, WcOpcode::RdmaRead, "partial read").await?;
    let got = sink2.to_vec(0..8192).step("read back")?;
    ensure!(
        got[5000..8000] == source.to_vec(1000..4000).step("read back")?[..],
        "partial read bytes differ"
    );
    ensure!(
        got[..5000].iter().chain(&got[8000..]).all(|&b| b == 0),
        "bytes outside the read sink changed"
    );
    expect_quiet(&server, "the read's source side").await?;
    Ok(())
}

/// An RDMA Read and a Send after it, posted one by one and as one list: the Read's completion
/// comes first and finds its sink filled, whatever order the device finishes them in (Linux
/// siw completes the Send as soon as it is on the wire, before the Read's response has come).
pub(super) async fn read_then_send<T: ProviderUnderTest>(put: &T) -> Result<(), Failure> {
    const LEN: usize = 1 << 20;
    let (client, server) = pair(put).await?;
    let source = region(&server, LEN, Access::REMOTE_READ, pattern(13))?;
    let rbuf = region(&server, 64, Access::LOCAL_WRITE, |_| 0)?;
    let note = region(&client, 4, Access::NONE, |_| b'!')?;
    let expected = source.to_vec(0..LEN).step("read back")?;
    let remote = RemoteAddr::new(source.rkey(), source.addr());
    for round in 0..4u64 {
        server
            .post_recv(RecvWr::new(round, Sge::whole(&rbuf)))
            .step("post_recv")?;
        let sink = region(&client, LEN, Access::LOCAL_WRITE, |_| 0)?;
        let (read, send) = (10 * round + 1, 10 * round + 2);
        let wrs = vec![
            SendWr::read(read, Sge::whole(&sink), remote),
            SendWr::send(send, vec![Sge::whole(&note)]),
        ];
        if round % 2 == 0 {
            for wr in wrs {
                client.post_send(wr).step("post")?;
            }
        } else {
            client.post_sends(wrs).step("post a list")?;
        }
        expect_ok(&client, read, WcOpcode::RdmaRead, "the read before a send").await?;
        // RFC 5040 section 7.2: the Read's data is placed before its completion says so.
        ensure!(
            sink.to_vec(0..LEN).step("read back")? == expected,
            "round {round}: the read's completion came before its data"
        );
        expect_ok(&client, send, WcOpcode::Send, "the send after a read").await?;
        expect_ok(&server, round, WcOpcode::Recv, "the receive of that send").await?;
    }
    Ok(())
}

pub(super) async fn disconnect_flushes<T: ProviderUnderTest>(put: &T) -> Result<(), Failure> {
    const N: u64 = 8;
    let (client, server) = pair(put).await?;
    let cbuf = region(&client, 64 * N as usize, Access::LOCAL_WRITE, |_| 0)?;
    let sbuf = region(&server, 64 * N as usize, Access::LOCAL_WRITE, |_| 0)?;
    for i in 0..N {
        let range = i as usize * 64..(i as usize + 1) * 64;
        client
            .post_recv(RecvWr::new(i, Sge::new(&cbuf, range.clone()).step("sge")?))
            .step("post_recv")?;
        server
            .post_recv(RecvWr::new(100 + i, Sge::new(&sbuf, range).step("sge")?))
            .step("post_recv")?;
    }
    tokio::time::timeout(STEP, client.disconnect())
        .await
        .map_err(|_| Failure("disconnect timed out".into()))?
        .step("disconnect")?;
    ensure!(!client.is_connected(), "connected after disconnect");
    for i in 0..N {
        expect_status(
            &client,
            i,
            &[WcStatus::Flushed],
            "local receive after disconnect",
        )
        .await?;
    }
    for i in 0..N {
        expect_status(
            &server,
            100 + i,
            &[WcStatus::Flushed],
            "peer receive after disconnect",
        )
        .await?;
    }
    // Posting after the disconnect is refused, or flushed.
    let note = region(&client, 8, Access::NONE, |_| 1)?;
    if client
        .post_send(SendWr::send(77, vec![Sge::whole(&note)]))
        .is_ok()
    {
        expect_status(&client, 77, &[WcStatus::Flushed], "send after disconnect").await?;
    }
    Ok(())
}

pub(super) async fn many_outstanding<T: ProviderUnderTest>(put: &T) -> Result<(), Failure> {
    const SENDS: usize = 300;
    const SLOT: usize = 64;
    let params = ConnectParams::new().read_depths(16, 16);
    let (client, server) = pair_with(put, params.clone(), params).await?;

    let rbuf = region(&server, SENDS * SLOT, Access::LOCAL_WRITE, |_| 0)?;
    let target = region(
        &server,
        SENDS * SLOT,
        Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        |_| 0,
    )?;
    let source = region(&server, SENDS * SLOT, Access::REMOTE_READ, pattern(8))?;
    for i in 0..SENDS {
        let sge = Sge::new(&rbuf, i * SLOT..(i + 1) * SLOT).step("sge")?;
        server
            .post_recv(RecvWr::new(i as u64, sge))
            .step("post_recv")?;
    }

    let sbuf = region(&client, SENDS * SLOT, Access::NONE, |b| (b / SLOT) as u8)?;
    let wbuf = region(&client, SENDS * SLOT, Access::NONE, pattern(12))?;
    let sink = region(&client, SENDS * SLOT, Access::LOCAL_WRITE, |_| 0)?;
    let mut expected = Vec::new();
    for i in 0..SENDS {
        let slot = i * SLOT..(i + 1) * SLOT;
        let id = expected.len() as u64;
        client
            .post_send(SendWr::send(
                id,
                vec![Sge::new(&sbuf, slot.clone()).step("sge")?],
            ))
            .step("post send")?;
        expected.push((id, WcOpcode::Send));
        if i % 3 == 0 {
            let id = expected.len() as u64;
            let remote = RemoteAddr::new(target.rkey(), target.addr() + (i * SLOT) as u64);
            client
                .post_send(SendWr::write(
                    id,
                    vec![Sge::new(&wbuf, slot.clone()).step("sge")?],
                    remote,
                ))
                .step("post write")?;
            expected.push((id, WcOpcode::RdmaWrite));
        }
        if i % 5 == 0 {
            let id = expected.len() as u64;
            let remote = RemoteAddr::new(source.rkey(), source.addr() + (i * SLOT) as u64);
            client
                .post_send(SendWr::read(
                    id,
                    Sge::new(&sink, slot.clone()).step("sge")?,
                    remote,
                ))
                .step("post read")?;
            expected.push((id, WcOpcode::RdmaRead));
        }
    }
    for &(id, opcode) in &expected {
        let c = next(&client, "outstanding request").await?;
        ensure!(
            c.wr_id == id && c.opcode == opcode && c.status == WcStatus::Success,
            "expected wr_id {id} {opcode:?} success in posting order, got {c:?}"
        );
    }
    for i in 0..SENDS {
        let c = expect_ok(&server, i as u64, WcOpcode::Recv, "outstanding receive").await?;
        ensure!(
            c.byte_len as usize == SLOT,
            "receive {i}: byte_len {}",
            c.byte_len
        );
    }
    let received = rbuf.to_vec(0..SENDS * SLOT).step("read back")?;
    ensure!(
        received
            .chunks(SLOT)
            .enumerate()
            .all(|(i, c)| c.iter().all(|&b| b == i as u8)),
        "receives out of order or corrupted"
    );
    let written = target.to_vec(0..SENDS * SLOT).step("read back")?;
    let wdata = wbuf.to_vec(0..SENDS * SLOT).step("read back")?;
    let read = sink.to_vec(0..SENDS * SLOT).step("read back")?;
    let sdata = source.to_vec(0..SENDS * SLOT).step("read back")?;
    for i in 0..SENDS {
        let slot = i * SLOT..(i + 1) * SLOT;
        if i % 3 == 0 {
            ensure!(
                written[slot.clone()] == wdata[slot.clone()],
                "write {i}: bytes differ"
            );
        } else {
            ensure!(
                written[slot.clone()].iter().all(|&b| b == 0),
                "slot {i} written"
            );
        }
        if i % 5 == 0 {
            ensure!(read[slot.clone()] == sdata[slot], "read {i}: bytes differ");
        } else {
            ensure!(read[slot].iter().all(|&b| b == 0), "sink slot {i} written");
        }
    }
    Ok(())
}

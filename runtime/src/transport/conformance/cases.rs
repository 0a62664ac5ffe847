//! The well-behaved cases: a generated client calls a generated server over the provider.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use super::program::*;
use crate::rdma::conformance::util::{ensure, Step, STEP};
use crate::rdma::conformance::{Failure, ProviderUnderTest};
use crate::rdma::{Listener, Provider, SharedReceiveParams};
use crate::rpc::{self, CallOptions, Client, TransportError};
use crate::transport::{serve, RdmaConfig, RdmaListener, RdmaTransport};

/// A server and a client of the suite's program on the provider under test.
pub(super) struct Setup<P: Provider> {
    pub(super) listener: Arc<RdmaListener<P>>,
    pub(super) transport: Arc<RdmaTransport<P>>,
    pub(super) client: TestversClient,
    pub(super) provider: Arc<P>,
    pub(super) addr: std::net::SocketAddr,
    accept: JoinHandle<()>,
}

impl<P: Provider> Drop for Setup<P> {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Client settings of the suite: a bounded wait for every call.
pub(super) fn client_config() -> RdmaConfig {
    RdmaConfig::default().timeout(Some(STEP))
}

pub(super) async fn setup_with<T>(
    put: &T,
    server_config: RdmaConfig,
    client: RdmaConfig,
) -> Result<Setup<T::P>, Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    let provider = Arc::new(put.provider().clone());
    let listener = provider.listen(put.listen_addr()).await.step("listen")?;
    let addr = listener.local_addr().step("listener address")?;
    let mut listener = serve::<T::P>(listener, server(), server_config.clone());
    if let Some(buffers) = put.shared_receive_buffers() {
        let queue = provider
            .shared_receive_queue(SharedReceiveParams::new(buffers, server_config.inline_size))
            .step("shared_receive_queue")?;
        listener = listener
            .with_shared_receive_queue(queue)
            .step("with_shared_receive_queue")?;
    }
    let listener = Arc::new(listener);
    let accept = tokio::spawn({
        let l = listener.clone();
        async move {
            if let Err(e) = l.run().await {
                tracing::debug!(error = %e, "the suite's listener stopped");
            }
        }
    });
    let transport =
        tokio::time::timeout(STEP, RdmaTransport::connect(provider.clone(), addr, client))
            .await
            .map_err(|_| Failure("connecting timed out".into()))?
            .step("connect")?;
    let transport = Arc::new(transport);
    let client = TestversClient::new(Client::from_arc(transport.clone()));
    Ok(Setup {
        listener,
        transport,
        client,
        provider,
        addr,
        accept,
    })
}

pub(super) async fn setup<T>(put: &T) -> Result<Setup<T::P>, Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    setup_with(put, RdmaConfig::default(), client_config()).await
}

/// The server's counters for the one connection it has.
pub(super) fn server_stats<P: Provider>(
    s: &Setup<P>,
) -> Result<
    (
        crate::transport::core::Stats,
        crate::transport::pool::PoolStats,
    ),
    Failure,
> {
    s.listener
        .stats()
        .first()
        .copied()
        .ok_or_else(|| Failure("the server has no connection".into()))
}

pub(super) async fn echo<P: Provider>(s: &Setup<P>, len: usize, seed: u8) -> Result<(), Failure> {
    let data = pattern(len, seed);
    let res = s
        .client
        .test_echo(EchoArgs {
            tag: len as u32,
            data: data.clone(),
        })
        .await
        .step(&format!("ECHO of {len} bytes"))?;
    ensure!(
        res.tag == len as u32 && res.data == data,
        "ECHO of {len} bytes came back different ({} bytes, tag {})",
        res.data.len(),
        res.tag
    );
    Ok(())
}

pub(super) async fn null_inline<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    let s = setup(put).await?;
    for _ in 0..10 {
        s.client.test_null().await.step("NULL")?;
    }
    let stats = s.transport.stats();
    ensure!(stats.calls_inline == 10, "calls: {stats:?}");
    let (server, _) = server_stats(&s)?;
    ensure!(server.replies_inline == 10, "replies: {server:?}");
    Ok(())
}

pub(super) async fn read_and_write_chunks<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    let s = setup(put).await?;
    echo(&s, 1 << 20, 1).await?;
    let stats = s.transport.stats();
    ensure!(stats.calls_read_chunks == 1, "calls: {stats:?}");
    let (server, _) = server_stats(&s)?;
    ensure!(server.replies_write_chunks == 1, "replies: {server:?}");
    Ok(())
}

pub(super) async fn sizes_around_thresholds<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    let s = setup(put).await?;
    for len in [0, 1, 3, 1023, 1024, 1025, 4000, 4096, 4097, 65_537, 300_001] {
        echo(&s, len, len as u8).await?;
    }
    Ok(())
}

/// A client whose registered buffers are at most 16 KiB: larger chunks take several segments.
fn small_buffers() -> RdmaConfig {
    client_config().pool(crate::transport::pool::PoolConfig {
        max_buffer: 16 << 10,
        ..Default::default()
    })
}

pub(super) async fn several_read_chunks<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    // 70,001 bytes in 16 KiB buffers: a Read chunk of five segments, then one of one.
    let s = setup_with(put, RdmaConfig::default(), small_buffers()).await?;
    let (a, b) = (pattern(70_001, 1), pattern(5_003, 2));
    let got = s
        .client
        .test_two(TwoArgs {
            first: a.clone(),
            middle: 99,
            second: b.clone(),
        })
        .await
        .step("TWO")?;
    ensure!(
        got == checksum(&a) ^ 99 ^ checksum(&b).rotate_left(7),
        "the server saw other bytes"
    );
    let stats = s.transport.stats();
    ensure!(stats.calls_read_chunks == 1, "calls: {stats:?}");
    Ok(())
}

pub(super) async fn long_call<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    // 100,000 bytes in 16 KiB buffers: a Position-Zero Read chunk of seven segments (seed 002
    // section 3.2).
    let s = setup_with(put, RdmaConfig::default(), small_buffers()).await?;
    let data = pattern(100_000, 4);
    let got = s
        .client
        .test_longargs(PlainArgs { data: data.clone() })
        .await
        .step("LONGARGS")?;
    ensure!(got == checksum(&data), "the server saw other bytes");
    let stats = s.transport.stats();
    ensure!(stats.calls_long == 1, "calls: {stats:?}");
    Ok(())
}

pub(super) async fn reply_chunk<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    // A Reply chunk of several segments too.
    let s = setup_with(put, RdmaConfig::default(), small_buffers()).await?;
    let res = s.client.test_big(50_000).await.step("BIG")?;
    ensure!(
        res.data.len() == 50_000 && res.data.iter().all(|&b| b == 0xb1),
        "the reply's bytes are wrong"
    );
    let (server, _) = server_stats(&s)?;
    ensure!(server.replies_long == 1, "replies: {server:?}");
    Ok(())
}

pub(super) async fn unused_write_chunk<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    let s = setup(put).await?;
    let none = s.client.test_maybe(0).await.step("MAYBE 0")?;
    ensure!(
        none == MaybeRes::Default { discriminant: 1 },
        "MAYBE 0: {none:?}"
    );
    match s.client.test_maybe(3000).await.step("MAYBE 3000")? {
        MaybeRes::Case0(r) => ensure!(r.data == pattern(3000, 3), "MAYBE 3000: wrong bytes"),
        other => return Err(Failure(format!("MAYBE 3000: {other:?}"))),
    }
    Ok(())
}

pub(super) async fn concurrent_calls<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    let s = setup_with(put, RdmaConfig::default().credits(4), client_config()).await?;
    let mut tasks = Vec::new();
    for i in 0..64u32 {
        let c = s.client.clone();
        tasks.push(tokio::spawn(async move {
            let data = pattern((i as usize) * 997, i as u8);
            let r = c
                .test_echo(EchoArgs {
                    tag: i,
                    data: data.clone(),
                })
                .await
                .map_err(|e| Failure(format!("call {i}: {e}")))?;
            ensure!(
                r.tag == i && r.data == data,
                "call {i} got another's result: {}",
                echo_mismatch(i, &data, &r)
            );
            Ok(())
        }));
    }
    for t in tasks {
        t.await
            .map_err(|e| Failure(format!("a call task: {e}")))??;
    }
    Ok(())
}

/// What differs between an ECHO's result and its argument (tag `tag`, bytes `sent`): the tag,
/// the length, or the first differing byte, how many bytes from there are zero (a buffer not
/// yet filled), and whether they are another call's of [`concurrent_calls`] at the same place
/// (call `j` sends `pattern(j * 997, j)`).
fn echo_mismatch(tag: u32, sent: &[u8], got: &EchoRes) -> String {
    if got.tag != tag {
        return format!("tag {} instead of {tag}", got.tag);
    }
    if got.data.len() != sent.len() {
        return format!("{} bytes instead of {}", got.data.len(), sent.len());
    }
    let Some(at) = sent.iter().zip(got.data.iter()).position(|(a, b)| a != b) else {
        return "no difference".into();
    };
    let wrong = got.data.iter().zip(sent).filter(|(a, b)| a != b).count();
    let zeros = got.data[at..].iter().filter(|&&b| b == 0).count();
    let rest = &got.data[at..];
    let whose = (0..64u32).find(|&j| {
        let other = pattern(j as usize * 997, j as u8);
        other.get(at..at + rest.len()) == Some(rest)
    });
    format!(
        "{wrong} of {} bytes differ, the first at offset {at}, {zeros} zero bytes from there{}",
        sent.len(),
        whose.map_or(String::new(), |j| format!("; from there call {j}'s bytes"))
    )
}

pub(super) async fn rpc_errors<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    struct Missing;
    impl crate::xdr::Procedure for Missing {
        const PROGRAM: u32 = testprog::PROGRAM;
        const VERSION: u32 = testvers::VERSION;
        const PROCEDURE: u32 = 42;
        const NAME: &'static str = "MISSING";
        type Args = ();
        type Result = ();
    }
    struct Elsewhere;
    impl crate::xdr::Procedure for Elsewhere {
        const PROGRAM: u32 = testprog::PROGRAM;
        const VERSION: u32 = 9;
        const PROCEDURE: u32 = 0;
        const NAME: &'static str = "ELSEWHERE";
        type Args = ();
        type Result = ();
    }
    /// Arguments that fail to encode halfway, after some bytes went into the encoder.
    struct HalfEncoded;
    impl crate::xdr::Encode for HalfEncoded {
        fn encode(&self, enc: &mut crate::xdr::Encoder) -> crate::xdr::Result<()> {
            enc.put_u32(0xdead_beef);
            enc.put_length(2, Some(1))
        }
    }
    impl crate::xdr::Decode for HalfEncoded {
        fn decode(_: &mut crate::xdr::Decoder) -> crate::xdr::Result<Self> {
            Ok(HalfEncoded)
        }
    }
    struct Unencodable;
    impl crate::xdr::Procedure for Unencodable {
        const PROGRAM: u32 = testprog::PROGRAM;
        const VERSION: u32 = testvers::VERSION;
        const PROCEDURE: u32 = testvers::TestNull::PROCEDURE;
        const NAME: &'static str = "UNENCODABLE";
        type Args = HalfEncoded;
        type Result = ();
    }
    let s = setup(put).await?;
    // The arguments' error comes back as such, and the bytes already encoded go nowhere: the
    // next call on the connection (whose encoder may be the same one) arrives intact.
    let err = s.client.rpc().call::<Unencodable>(&HalfEncoded).await.err();
    ensure!(
        matches!(err, Some(rpc::Error::Encode(_))),
        "arguments that do not encode: {err:?}"
    );
    echo(&s, 100, 9).await?;
    let err = s.client.rpc().call::<Missing>(&()).await.err();
    ensure!(
        matches!(err, Some(rpc::Error::ProcUnavail)),
        "an unknown procedure: {err:?}"
    );
    let err = s.client.rpc().call::<Elsewhere>(&()).await.err();
    ensure!(
        matches!(err, Some(rpc::Error::ProgMismatch { low: 1, high: 1 })),
        "an unknown version: {err:?}"
    );
    s.client.test_null().await.step("NULL after the errors")?;
    Ok(())
}

pub(super) async fn timeout<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    let s = setup(put).await?;
    let err = s
        .client
        .rpc()
        .call_with::<testvers::TestSleep>(
            &1000,
            CallOptions::new().timeout(Duration::from_millis(50)),
        )
        .await
        .err();
    ensure!(
        matches!(
            err,
            Some(rpc::Error::Transport(TransportError::TimedOut(_)))
        ),
        "a slow call: {err:?}"
    );
    echo(&s, 10_000, 2).await?;
    // Under the connection's default timeout a call has no timer of its own: the
    // connection's sweeper fails it (`rpc::deadlines`), and fences its memory at once, as a
    // dropped call's (seed 004 section 5.4.1).
    let limit = Duration::from_millis(100);
    let s = setup_with(
        put,
        RdmaConfig::default(),
        RdmaConfig::default().timeout(Some(limit)),
    )
    .await?;
    s.client.test_null().await.step("NULL")?;
    let before = s.transport.stats().revocations;
    // SLOWECHO holds its Write chunk for 300 ms.
    let err = s
        .client
        .test_slowecho(EchoArgs {
            tag: 300,
            data: pattern(50_000, 1),
        })
        .await
        .err();
    ensure!(
        matches!(
            err,
            Some(rpc::Error::Transport(TransportError::TimedOut(t))) if t == limit
        ),
        "a slow call under the default timeout: {err:?}"
    );
    let after = s.transport.stats().revocations;
    ensure!(
        after >= before + 2,
        "{} handles revoked for the timed-out call",
        after - before
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    echo(&s, 50_000, 9).await
}

pub(super) async fn retransmit<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    let s = setup(put).await?;
    let c = s.client.clone();
    let call = tokio::spawn(async move { c.test_sleep(300).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    s.transport.disconnect();
    let got = call
        .await
        .map_err(|e| Failure(format!("the call task: {e}")))?
        .step("the call whose connection dropped")?;
    ensure!(got == 300, "SLEEP returned {got}");
    echo(&s, 100_000, 3).await
}

pub(super) async fn backchannel<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    let s = setup_with(
        put,
        RdmaConfig::default().backward_credits(4),
        client_config().backchannel(callback_server(), 4),
    )
    .await?;
    let slow = {
        let c = s.client.clone();
        tokio::spawn(async move { c.test_sleep(200).await })
    };
    let mut callbacks = Vec::new();
    for n in 0..8u32 {
        let c = s.client.clone();
        callbacks.push(tokio::spawn(async move { c.test_callback(n).await }));
    }
    for (n, t) in callbacks.into_iter().enumerate() {
        let got = t
            .await
            .map_err(|e| Failure(format!("callback task: {e}")))?
            .step("CALLBACK")?;
        ensure!(got == n as u32 + 1, "callback {n} answered {got}");
    }
    let got = slow
        .await
        .map_err(|e| Failure(format!("the slow call: {e}")))?
        .step("SLEEP")?;
    ensure!(got == 200, "SLEEP returned {got}");
    Ok(())
}

pub(super) async fn zero_copy<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    let s = setup(put).await?;
    let len = 1 << 20;
    let buffer = s.client.rpc().buffer(len);
    ensure!(
        buffer.is_registered(),
        "the client's buffer is not registered"
    );
    let res = s
        .client
        .rpc()
        .call_with::<testvers::TestFill>(&(len as u32), CallOptions::new().reply_buffer(buffer))
        .await
        .step("FILL")?;
    let mut expected = vec![0; len];
    fill(&mut expected, 5);
    ensure!(res.data[..] == expected[..], "FILL: wrong bytes");
    let (_, server_pool) = server_stats(&s)?;
    ensure!(
        server_pool.copied_bytes == 0 && server_pool.zero_copy_bytes == len as u64,
        "the server copied: {server_pool:?}"
    );
    let client_pool = s.transport.pool_stats();
    ensure!(
        client_pool.copied_bytes == 0,
        "the client copied: {client_pool:?}"
    );
    Ok(())
}

async fn mixed_round<P: Provider>(s: &Setup<P>, i: u32) -> Result<(), Failure> {
    s.client.test_null().await.step("NULL")?;
    echo(s, 16_384 + i as usize % 7, i as u8).await?;
    let r = s.client.test_fill(16_384).await.step("FILL")?;
    ensure!(r.data.len() == 16_384, "FILL: {} bytes", r.data.len());
    Ok(())
}

pub(super) async fn flat_registrations<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    let s = setup(put).await?;
    for i in 0..50 {
        mixed_round(&s, i).await?;
    }
    let client0 = s.transport.pool_stats();
    let (_, server0) = server_stats(&s)?;
    for i in 0..333 {
        mixed_round(&s, i).await?;
    }
    let client1 = s.transport.pool_stats();
    let (_, server1) = server_stats(&s)?;
    // Registrations alive stay flat everywhere: over 1,000 calls that lend some 700 buffers,
    // at most two more are needed (a buffer still held by an operation whose completion has
    // not been taken yet when the next call needs one). Where the provider can rekey (soft,
    // verbs with memory windows) hardly any registration is made once warm; where it cannot
    // (Linux siw), memory a peer may reach is registered for one use and deregistered after.
    const SLACK: u64 = 2;
    for (side, before, after) in [("client", client0, client1), ("server", server0, server1)] {
        ensure!(
            after.checkouts >= before.checkouts + 300,
            "the {side} lent too few buffers to tell: {before:?} -> {after:?}"
        );
        ensure!(
            after.live <= before.live + SLACK,
            "the {side} holds more registrations: {before:?} -> {after:?}"
        );
        ensure!(
            after.registrations <= before.registrations + SLACK || after.rekeys == before.rekeys,
            "the {side} registered more memory although it rekeys: {before:?} -> {after:?}"
        );
    }
    Ok(())
}

pub(super) async fn cancelled_call<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    let s = setup(put).await?;
    s.client.test_null().await.step("NULL")?;
    let before = s.transport.stats().revocations;
    // SLOWECHO holds its Write chunk for 300 ms; the caller gives up after 50.
    let abandoned = {
        let c = s.client.clone();
        tokio::spawn(async move {
            c.test_slowecho(EchoArgs {
                tag: 300,
                data: pattern(50_000, 1),
            })
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    abandoned.abort();
    let _ = abandoned.await;
    // Seed 004 section 5.4.1: the abandoned call's memory is fenced at once, without waiting
    // for the reply: its Read chunk source and its Write chunk are revoked.
    let after = s.transport.stats().revocations;
    ensure!(
        after >= before + 2,
        "{} handles revoked for the abandoned call",
        after - before
    );
    // When the server then writes the result, the revoked handle refuses it: the connection
    // breaks as it would on an RNIC, and the next call reconnects.
    tokio::time::sleep(Duration::from_millis(400)).await;
    echo(&s, 50_000, 9).await
}

pub(super) async fn small_results_inline<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    let s = setup(put).await?;
    // The caller says the result is 100 bytes: the reply fits inline, so no Write chunk is
    // provided (as Linux's client does) and the result comes in the Send.
    let r = s
        .client
        .rpc()
        .call_with::<testvers::TestFill>(&100, CallOptions::new().reply_size(100))
        .await
        .step("FILL 100")?;
    ensure!(r.data == pattern_of(100, 5), "FILL 100: wrong bytes");
    let stats = s.transport.stats();
    ensure!(
        stats.replies_received_inline == 1 && stats.replies_received_write_chunks == 0,
        "a 100-byte result: {stats:?}"
    );
    // Without the size, the procedure's recent results decide: 100 bytes just now, so inline.
    s.client.test_fill(100).await.step("FILL")?;
    let stats = s.transport.stats();
    ensure!(
        stats.replies_received_inline == 2 && stats.replies_received_write_chunks == 0,
        "a result known to be small: {stats:?}"
    );
    // A procedure not seen before gets a Write chunk of the default size, which the server
    // must use however small the result (seed 002 section 3.7); once seen small, inline.
    let echo = |n: u32| EchoArgs {
        tag: n,
        data: pattern_of(100, n as u8),
    };
    let r = s.client.test_echo(echo(1)).await.step("ECHO")?;
    ensure!(r.data == pattern_of(100, 1), "ECHO: wrong bytes");
    let stats = s.transport.stats();
    ensure!(
        stats.replies_received_write_chunks == 1,
        "the first result of a procedure: {stats:?}"
    );
    let r = s.client.test_echo(echo(2)).await.step("ECHO again")?;
    ensure!(r.data == pattern_of(100, 2), "ECHO again: wrong bytes");
    let stats = s.transport.stats();
    ensure!(
        stats.replies_received_inline == 3 && stats.replies_received_write_chunks == 1,
        "a result since known to be small: {stats:?}"
    );
    Ok(())
}

/// Polls `done` every millisecond for up to [`STEP`]: the server's counters change on its own
/// threads.
async fn wait_until(what: &str, done: impl Fn() -> bool) -> Result<(), Failure> {
    let deadline = tokio::time::Instant::now() + STEP;
    while !done() {
        if tokio::time::Instant::now() > deadline {
            return Err(Failure(format!("gave up waiting: {what}")));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Ok(())
}

pub(super) async fn shutdown<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    let s = setup(put).await?;
    let idle = {
        let transport = RdmaTransport::connect(s.provider.clone(), s.addr, client_config());
        let transport = tokio::time::timeout(STEP, transport)
            .await
            .map_err(|_| Failure("connecting a second client timed out".into()))?
            .step("connect a second client")?;
        TestversClient::new(Client::new(transport))
    };
    idle.test_null()
        .await
        .step("NULL on the second connection")?;
    let received = || -> u64 {
        let stats = s.listener.stats();
        stats.iter().map(|(core, _)| core.calls_received).sum()
    };
    let slow = {
        let c = s.client.clone();
        tokio::spawn(async move { c.test_sleep(300).await })
    };
    wait_until("the server runs SLEEP", || received() == 2).await?;
    let shutdown = s.listener.shutdown();

    // No handler takes a call made from now on: its connection closes unanswered, and the
    // retransmission finds nothing listening.
    let late = s.client.test_null().await;
    ensure!(late.is_err(), "a call made after shutdown began: {late:?}");
    // The call being served is answered.
    let got = slow
        .await
        .map_err(|e| Failure(format!("the SLEEP task: {e}")))?
        .step("SLEEP running at shutdown")?;
    ensure!(got == 300, "SLEEP returned {got}");
    tokio::time::timeout(STEP, shutdown)
        .await
        .map_err(|_| Failure("shutdown did not complete".into()))?;
    wait_until("run returns", || s.accept.is_finished()).await?;

    ensure!(
        s.listener.stats().is_empty(),
        "connections left after shutdown: {}",
        s.listener.stats().len()
    );
    ensure!(
        idle.test_null().await.is_err(),
        "the idle connection still answers"
    );
    ensure!(
        s.listener.local_addr().is_err(),
        "the listener still has an address"
    );
    let again = tokio::time::timeout(
        STEP,
        RdmaTransport::connect(s.provider.clone(), s.addr, client_config()),
    )
    .await;
    ensure!(
        !matches!(again, Ok(Ok(_))),
        "a new connection was accepted after shutdown"
    );
    Ok(())
}

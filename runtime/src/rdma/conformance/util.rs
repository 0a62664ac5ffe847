//! Helpers shared by the conformance cases: connection pairs and bounded waits.

use std::fmt;
use std::time::Duration;

use super::ProviderUnderTest;
use crate::rdma::{
    Access, Completion, ConnectParams, Connection, Listener, MemoryRegion, Provider, WcOpcode,
    WcStatus,
};

/// Upper bound for any single wait, so a broken provider fails instead of hanging. Generous,
/// because the verbs provider runs the suite inside an emulated guest.
pub(crate) const STEP: Duration = Duration::from_secs(30);

/// How long to wait for something that must *not* happen.
pub(crate) const QUIET: Duration = Duration::from_millis(200);

/// Why a case failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure(pub String);

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failure {}

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err($crate::rdma::conformance::Failure(format!($($fmt)*)));
        }
    };
}
pub(crate) use ensure;

/// Converts a provider error into a failure naming the step.
pub(crate) trait Step<T> {
    fn step(self, what: &str) -> Result<T, Failure>;
}

impl<T, E: fmt::Display> Step<T> for Result<T, E> {
    fn step(self, what: &str) -> Result<T, Failure> {
        self.map_err(|e| Failure(format!("{what}: {e}")))
    }
}

/// The connection type of a provider under test.
pub(crate) type ConnOf<T> = <<T as ProviderUnderTest>::P as Provider>::Conn;

/// A connected pair: (active side, passive side).
pub(crate) async fn pair<T: ProviderUnderTest>(put: &T) -> Result<(ConnOf<T>, ConnOf<T>), Failure> {
    pair_with(put, ConnectParams::new(), ConnectParams::new()).await
}

/// A connected pair with explicit parameters for each side.
pub(crate) async fn pair_with<T: ProviderUnderTest>(
    put: &T,
    active: ConnectParams,
    passive: ConnectParams,
) -> Result<(ConnOf<T>, ConnOf<T>), Failure> {
    let provider = put.provider();
    let listener = provider.listen(put.listen_addr()).await.step("listen")?;
    let addr = listener.local_addr().step("listener address")?;
    let (client, server) = tokio::time::timeout(STEP, async {
        tokio::join!(provider.connect(addr, active), listener.accept(passive))
    })
    .await
    .map_err(|_| Failure("connection setup timed out".into()))?;
    Ok((client.step("connect")?, server.step("accept")?))
}

/// Registers a buffer of `len` bytes filled by `fill(i)`.
pub(crate) fn region<C: Connection>(
    conn: &C,
    len: usize,
    access: Access,
    fill: impl Fn(usize) -> u8,
) -> Result<MemoryRegion, Failure> {
    let buf: Vec<u8> = (0..len).map(fill).collect();
    conn.register(buf, access).step("register")
}

/// A fill of non-zero bytes that differs with `seed` (for [`region`]).
pub(crate) fn pattern(seed: u8) -> impl Fn(usize) -> u8 {
    move |i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1
}

/// The next completion, bounded by [`STEP`].
pub(crate) async fn next<C: Connection>(conn: &C, what: &str) -> Result<Completion, Failure> {
    tokio::time::timeout(STEP, conn.poll_completion())
        .await
        .map_err(|_| Failure(format!("no completion for {what} within {STEP:?}")))
}

/// The next completion, which must be `wr_id`/`opcode` with status success.
pub(crate) async fn expect_ok<C: Connection>(
    conn: &C,
    wr_id: u64,
    opcode: WcOpcode,
    what: &str,
) -> Result<Completion, Failure> {
    let c = next(conn, what).await?;
    ensure!(
        c.wr_id == wr_id && c.opcode == opcode && c.status == WcStatus::Success,
        "{what}: expected wr_id {wr_id} {opcode:?} success, got {c:?}"
    );
    Ok(c)
}

/// The next completion, which must be `wr_id` with a status in `allowed`.
pub(crate) async fn expect_status<C: Connection>(
    conn: &C,
    wr_id: u64,
    allowed: &[WcStatus],
    what: &str,
) -> Result<Completion, Failure> {
    let c = next(conn, what).await?;
    ensure!(
        c.wr_id == wr_id && allowed.contains(&c.status),
        "{what}: expected wr_id {wr_id} with one of {allowed:?}, got {c:?}"
    );
    Ok(c)
}

/// The requester's completion `wr_id` of a request its responder refused: a status in
/// `refusals` where the provider reports refusals to requesters; on a device that completes
/// Sends and Writes locally (iWARP), success or one of `refusals`, and then the connection
/// ends within [`STEP`] (the responder terminated the stream).
pub(crate) async fn expect_refused<T: ProviderUnderTest, C: Connection>(
    put: &T,
    conn: &C,
    wr_id: u64,
    refusals: &[WcStatus],
    what: &str,
) -> Result<(), Failure> {
    if put.requester_sees_refusals() {
        return expect_status(conn, wr_id, refusals, what).await.map(drop);
    }
    let mut allowed = refusals.to_vec();
    allowed.push(WcStatus::Success);
    expect_status(conn, wr_id, &allowed, what).await?;
    expect_connection_end(conn, what).await
}

/// The connection ends within [`STEP`] (the responder terminated the stream after a refusal).
pub(crate) async fn expect_connection_end<C: Connection>(
    conn: &C,
    what: &str,
) -> Result<(), Failure> {
    tokio::time::timeout(STEP, async {
        while conn.is_connected() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .map_err(|_| Failure(format!("{what}: the connection outlived the refusal")))
}

/// Fails if a completion shows up within [`QUIET`].
pub(crate) async fn expect_quiet<C: Connection>(conn: &C, what: &str) -> Result<(), Failure> {
    match tokio::time::timeout(QUIET, conn.poll_completion()).await {
        Ok(c) => Err(Failure(format!("{what}: unexpected completion {c:?}"))),
        Err(_) => Ok(()),
    }
}

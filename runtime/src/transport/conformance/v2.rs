//! Version 2 end to end (seed 003): negotiation with every kind of peer, the reconnect that
//! remembers, remote invalidation through `rdma_inv_handle`, and the backward direction.

use super::cases::{client_config, setup_with, Setup};
use super::program::*;
use crate::rdma::conformance::util::{ensure, Step};
use crate::rdma::conformance::{Failure, ProviderUnderTest};
use crate::rdma::Provider;
use crate::rpc::Client;
use crate::transport::{RdmaConfig, RdmaTransport};

/// NULL, a 1 MiB ECHO (Read and Write chunks) and a long reply (Reply chunk).
async fn workload<P: Provider>(s: &Setup<P>) -> Result<(), Failure> {
    s.client.test_null().await.step("NULL")?;
    let data = pattern(1 << 20, 9);
    let res = s
        .client
        .test_echo(EchoArgs {
            tag: 1,
            data: data.clone(),
        })
        .await
        .step("ECHO of 1 MiB")?;
    ensure!(res.data == data, "ECHO came back different");
    let big = s.client.test_big(100_000).await.step("BIG")?;
    ensure!(big.data.len() == 100_000, "BIG of {}", big.data.len());
    Ok(())
}

pub(super) async fn both_version_2<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    let s = setup_with(
        put,
        RdmaConfig::default().version_2(true),
        client_config().version_2(true),
    )
    .await?;
    workload(&s).await?;
    ensure!(
        s.transport.version() == 2,
        "version {}",
        s.transport.version()
    );
    let stats = s.transport.stats();
    ensure!(
        stats.replies_received_write_chunks >= 1 && stats.replies_received_long >= 1,
        "{stats:?}"
    );
    // Seed 003 section 3.3: the requester offered a handle in rdma_inv_handle and the
    // responder's Send With Invalidate took it; from a device that cannot take that, none
    // was offered and the requester invalidated its handles itself.
    if put.remote_invalidation() {
        ensure!(
            stats.remote_invalidations >= 2 && stats.unexpected_invalidations == 0,
            "{stats:?}"
        );
    } else {
        ensure!(
            stats.remote_invalidations == 0 && stats.local_invalidations >= 2,
            "{stats:?}"
        );
    }
    Ok(())
}

pub(super) async fn version_2_client_version_1_server<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    let client = client_config().version_2(true);
    let s = setup_with(put, RdmaConfig::default(), client.clone()).await?;
    workload(&s).await?;
    ensure!(
        s.transport.version() == 1,
        "version {}",
        s.transport.version()
    );
    ensure!(
        client.versions.get(s.addr) == Some(1),
        "the outcome is remembered"
    );
    // A second connection to the same server does not offer version 2 again (seed 003
    // section 7.2): the server sends no ERR_VERS on it.
    let again = RdmaTransport::connect(s.provider.clone(), s.addr, client)
        .await
        .step("connect again")?;
    let again = TestversClient::new(Client::new(again));
    again
        .test_null()
        .await
        .step("NULL on the second connection")?;
    let errors: u64 = s.listener.stats().iter().map(|(c, _)| c.errors_sent).sum();
    ensure!(
        errors == 1,
        "{errors} RDMA_ERRORs: one ERR_VERS, on the first only"
    );
    Ok(())
}

pub(super) async fn version_1_client_version_2_server<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    let s = setup_with(put, RdmaConfig::default().version_2(true), client_config()).await?;
    workload(&s).await?;
    ensure!(
        s.transport.version() == 1,
        "version {}",
        s.transport.version()
    );
    Ok(())
}

pub(super) async fn version_2_backchannel<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    let s = setup_with(
        put,
        RdmaConfig::default().version_2(true).backward_credits(4),
        client_config()
            .version_2(true)
            .backchannel(callback_server(), 4),
    )
    .await?;
    for n in 0..8u32 {
        let got = s.client.test_callback(n).await.step("CALLBACK")?;
        ensure!(got == n + 1, "callback {n} answered {got}");
    }
    ensure!(
        s.transport.version() == 2,
        "version {}",
        s.transport.version()
    );
    Ok(())
}

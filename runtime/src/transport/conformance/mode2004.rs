//! The 2004 protocol of seed 000 end to end: the configuration call, RDMA_MSGP, the Read-Read
//! model with RDMA_DONE, and each end meeting a peer in the default mode (seed 004 section
//! 5.7).

use std::time::Duration;

use super::cases::{client_config, echo, server_stats, setup_with, Setup};
use super::program::*;
use crate::rdma::conformance::util::{ensure, Step};
use crate::rdma::conformance::{Failure, ProviderUnderTest};
use crate::rdma::Provider;
use crate::transport::mode2004::Mode2004;
use crate::transport::RdmaConfig;

/// The server's receive buffers in these cases: larger than the client's, so that the client
/// sends calls this long inline only once the configuration call said so.
const SERVER_INLINE: usize = 8192;

/// The server's alignment: page size, which its 8 KiB receive buffers leave room for.
fn server_config(mode: Mode2004) -> RdmaConfig {
    RdmaConfig::default()
        .inline_size(SERVER_INLINE)
        .mode_2004(Mode2004 {
            receive_align: 4096,
            ..mode
        })
}

/// NULL, a 1 MiB ECHO (a Read chunk for the argument, a Read-Read result), a long reply, and
/// a plain argument of 2000 bytes that a padded call aligns.
async fn workload<P: Provider>(s: &Setup<P>) -> Result<(), Failure> {
    s.client.test_null().await.step("NULL")?;
    echo(s, 1 << 20, 4).await?;
    let big = s.client.test_big(100_000).await.step("BIG")?;
    ensure!(big.data.len() == 100_000, "BIG of {}", big.data.len());
    let data = pattern(2000, 6);
    let sum = s
        .client
        .test_longargs(PlainArgs { data: data.clone() })
        .await
        .step("LONGARGS of 2000 bytes")?;
    ensure!(sum == checksum(&data), "the server read other bytes");
    Ok(())
}

/// Waits until the server has released every exposed reply (RDMA_DONE travels after the
/// reply the client already has).
async fn released<P: Provider>(s: &Setup<P>) -> Result<crate::transport::core::Stats, Failure> {
    for _ in 0..200 {
        let (server, _) = server_stats(s)?;
        if server.dones_received + server.exposures_expired >= server.replies_read_chunks {
            return Ok(server);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (server, _) = server_stats(s)?;
    Err(Failure(format!(
        "exposed replies never released: {server:?}"
    )))
}

pub(super) async fn both_2004<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    let s = setup_with(
        put,
        server_config(Mode2004::default()),
        client_config().mode_2004(Mode2004::default()),
    )
    .await?;
    workload(&s).await?;
    // The configuration call raised the client's inline size from 1 KB to the server's 8 KiB:
    // a 6000-byte plain argument goes inline, not as a long call.
    let data = pattern(6000, 7);
    let sum = s
        .client
        .test_longargs(PlainArgs { data: data.clone() })
        .await
        .step("LONGARGS of 6000 bytes")?;
    ensure!(sum == checksum(&data), "the server read other bytes");
    let client = s.transport.stats();
    ensure!(
        client.calls_long == 0,
        "a long call after configuration: {client:?}"
    );
    // RDMA_MSGP both ways; Read-Read results pulled, each followed by RDMA_DONE.
    ensure!(
        client.padded_sent >= 1 && client.padding_bytes_sent > 0,
        "no padded RDMA_MSGP sent: {client:?}"
    );
    ensure!(
        client.replies_received_read_chunks >= 2 && client.dones_sent >= 2,
        "{client:?}"
    );
    ensure!(client.replies_received_write_chunks == 0, "{client:?}");
    let server = released(&s).await?;
    ensure!(server.padded_received >= 1, "{server:?}");
    ensure!(
        server.dones_received >= 2 && server.exposures_expired == 0,
        "{server:?}"
    );
    Ok(())
}

pub(super) async fn without_configuration<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    let mode = Mode2004 {
        config_program: None,
        ..Mode2004::default()
    };
    let s = setup_with(
        put,
        server_config(mode.clone()),
        client_config().mode_2004(mode),
    )
    .await?;
    workload(&s).await?;
    let client = s.transport.stats();
    ensure!(client.replies_received_read_chunks >= 2, "{client:?}");
    let server = released(&s).await?;
    ensure!(server.dones_received >= 2, "{server:?}");
    Ok(())
}

pub(super) async fn client_2004_default_server<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    // The configuration call, sent as RDMA_MSGP, is taken as RDMA_MSG (seed 004 section
    // 5.7.1) and gets PROG_UNAVAIL: the client goes on in RFC 8166, Write and Reply chunks
    // included, and sends no other RDMA_MSGP and no RDMA_DONE.
    let s = setup_with(
        put,
        RdmaConfig::default(),
        client_config().mode_2004(Mode2004::default()),
    )
    .await?;
    workload(&s).await?;
    let client = s.transport.stats();
    ensure!(
        client.padded_sent == 1 && client.dones_sent == 0,
        "{client:?}"
    );
    ensure!(client.replies_received_write_chunks >= 1, "{client:?}");
    Ok(())
}

pub(super) async fn default_client_2004_server<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    // No configuration call comes: the server never exposes a result the client could not
    // pull, and serves it the RFC 8166 way.
    let s = setup_with(put, server_config(Mode2004::default()), client_config()).await?;
    workload(&s).await?;
    let (server, _) = server_stats(&s)?;
    ensure!(
        server.replies_read_chunks == 0 && server.padded_sent == 0,
        "{server:?}"
    );
    ensure!(server.replies_write_chunks >= 1, "{server:?}");
    Ok(())
}

pub(super) async fn gave_up_mid_call<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    // A caller gives up while the server works on its call; the server's reply still exposes
    // the result, and the client, which no longer knows the XID, sends RDMA_DONE. (Without
    // remote invalidation: a Send With Invalidate of the cancelled call's revoked handle
    // would end the connection, as with any cancelled call.)
    let s = setup_with(
        put,
        server_config(Mode2004::default()),
        client_config()
            .remote_invalidate(false)
            .mode_2004(Mode2004::default()),
    )
    .await?;
    let call = s.client.test_slowecho(EchoArgs {
        tag: 300,
        data: pattern(64 << 10, 8),
    });
    ensure!(
        tokio::time::timeout(Duration::from_millis(50), call)
            .await
            .is_err(),
        "the slow call answered early"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let server = released(&s).await?;
    ensure!(
        server.replies_read_chunks >= 1 && server.dones_received >= 1,
        "{server:?}"
    );
    // The connection carries on.
    echo(&s, 100_000, 9).await?;
    Ok(())
}

//! Bulk data reaches registered memory straight from the socket on the software provider, with
//! many calls in flight too: results that come by RDMA Write into the caller's buffers, and
//! arguments the server pulls by RDMA Read. The providers' placement counters
//! ([`SoftConnection::placement_stats`]) show how many bytes they copied instead.
//!
//! [`SoftConnection::placement_stats`]: rpcrdma::rdma::soft::SoftConnection::placement_stats

use rpcrdma::rdma::soft::PlacementStats;
use rpcrdma::rpc::CallOptions;
use rpcrdma::transport::conformance::program::{testvers, EchoArgs};

#[path = "support/served.rs"]
mod served;
use served::{two_workers, Served};

/// Calls in flight at once, each task making `CALLS_PER_TASK` calls one after the other.
const IN_FLIGHT: usize = 16;
const CALLS_PER_TASK: usize = 100;

/// How the bulk data of a call moves.
#[derive(Clone, Copy, Debug)]
enum Bulk {
    /// A result filled by the server, written into a registered buffer of the caller's
    /// (Write chunk): placed by the client's provider.
    Result,
    /// An argument in a registered buffer of the caller's, pulled by the server (Read chunk):
    /// placed by the server's provider.
    Argument,
}

/// Bytes of tagged payload the receiving provider copied out of its receive buffer, and all of
/// them, over `IN_FLIGHT` x `CALLS_PER_TASK` calls moving `size` bytes each as `bulk`.
fn copied_with_calls_in_flight(bulk: Bulk, size: usize) -> (u64, u64) {
    two_workers().block_on(async {
        let served = Served::start().await;
        let client = served.client();
        let mut data = client.rpc().buffer(size);
        data.as_mut_slice().fill(7);
        let data = data.freeze(size);
        // The server's connection is there once a call has been answered.
        client.test_null().await.unwrap();
        let placement = || -> PlacementStats {
            match bulk {
                Bulk::Result => served.transport.connection().placement_stats(),
                Bulk::Argument => served.listener.connections()[0].placement_stats(),
            }
        };
        let before = placement();
        let tasks: Vec<_> = (0..IN_FLIGHT)
            .map(|_| {
                let (client, data) = (client.clone(), data.clone());
                tokio::spawn(async move {
                    for tag in 0..CALLS_PER_TASK as u32 {
                        match bulk {
                            Bulk::Result => {
                                let buffer = client.rpc().buffer(size);
                                let r = client
                                    .rpc()
                                    .call_with::<testvers::TestFill>(
                                        &(size as u32),
                                        CallOptions::new().reply_buffer(buffer),
                                    )
                                    .await
                                    .unwrap();
                                assert_eq!(r.data.len(), size);
                            }
                            Bulk::Argument => {
                                let data = data.clone();
                                let n = client.test_write(EchoArgs { tag, data }).await.unwrap();
                                assert_eq!(n as usize, size);
                            }
                        }
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let after = placement();
        let copied = after.copied - before.copied;
        let all = copied + after.direct - before.direct;
        println!("{bulk:?} of {size} bytes, {IN_FLIGHT} in flight: copied {copied} of {all} bytes");
        assert_eq!(all, (IN_FLIGHT * CALLS_PER_TASK * size) as u64);
        (copied, all)
    })
}

#[test]
fn bulk_data_of_calls_in_flight_is_placed_directly() {
    for bulk in [Bulk::Result, Bulk::Argument] {
        for size in [65_536, 1 << 20] {
            let (copied, all) = copied_with_calls_in_flight(bulk, size);
            assert!(
                copied * 20 <= all,
                "with {IN_FLIGHT} calls in flight the receiving provider copied {copied} of \
                 {all} bytes ({bulk:?}, {size} bytes each)"
            );
        }
    }
}

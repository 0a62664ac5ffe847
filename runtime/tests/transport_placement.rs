//! Results that come by RDMA Write reach the caller's registered buffers straight from the
//! socket on the software provider, with many calls in flight too: the provider's placement
//! counters ([`SoftConnection::placement_stats`]) show how many bytes it copied.
//!
//! [`SoftConnection::placement_stats`]: rpcrdma::rdma::soft::SoftConnection::placement_stats

use rpcrdma::rpc::CallOptions;
use rpcrdma::transport::conformance::program::testvers;

#[path = "support/served.rs"]
mod served;
use served::{two_workers, Served};

/// Calls in flight at once, each task making `CALLS_PER_TASK` calls one after the other.
const IN_FLIGHT: usize = 16;
const CALLS_PER_TASK: usize = 100;

/// Bytes of tagged payload the client's provider copied out of its receive buffer, and all of
/// them, over `IN_FLIGHT` x `CALLS_PER_TASK` calls whose `size`-byte results come by RDMA Write
/// into registered buffers of the caller's.
fn copied_with_calls_in_flight(size: usize) -> (u64, u64) {
    two_workers().block_on(async {
        let served = Served::start().await;
        let (transport, client) = (&served.transport, served.client());
        let before = transport.connection().placement_stats();
        let tasks: Vec<_> = (0..IN_FLIGHT)
            .map(|_| {
                let client = client.clone();
                tokio::spawn(async move {
                    for _ in 0..CALLS_PER_TASK {
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
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let after = transport.connection().placement_stats();
        let copied = after.copied - before.copied;
        let all = copied + after.direct - before.direct;
        println!("{size}-byte results, {IN_FLIGHT} in flight: copied {copied} of {all} bytes");
        assert_eq!(all, (IN_FLIGHT * CALLS_PER_TASK * size) as u64);
        (copied, all)
    })
}

#[test]
fn results_of_calls_in_flight_are_placed_directly() {
    for size in [65_536, 1 << 20] {
        let (copied, all) = copied_with_calls_in_flight(size);
        assert!(
            copied * 20 <= all,
            "with {IN_FLIGHT} calls in flight the client's provider copied {copied} of {all} \
             bytes of {size}-byte results"
        );
    }
}

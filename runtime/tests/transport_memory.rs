//! Memory stays bounded and flat over 10,000 calls: registrations come from the pool and are
//! reused, and the heap does not grow (a counting allocator measures live bytes and blocks).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};

use rpcrdma::rpc::CallOptions;
use rpcrdma::transport::conformance::program::*;

#[path = "support/served.rs"]
mod served;
use served::{two_workers, Served};

struct Counting;

static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);
static LIVE_BLOCKS: AtomicI64 = AtomicI64::new(0);

// SAFETY: forwards to the system allocator and only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size() as i64, Ordering::Relaxed);
        LIVE_BLOCKS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        LIVE_BLOCKS.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE_BYTES.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live() -> (i64, i64) {
    (
        LIVE_BYTES.load(Ordering::Relaxed),
        LIVE_BLOCKS.load(Ordering::Relaxed),
    )
}

/// One call of each kind: NULL inline, a 64 KiB echo (Read chunk out, Write chunk back), a
/// 64 KiB result filled into a registered buffer, and a result received into the caller's
/// registered buffer.
async fn mixed_round(client: &TestversClient, payload: &bytes::Bytes, i: u32) {
    client.test_null().await.unwrap();
    let r = client
        .test_echo(EchoArgs {
            tag: i,
            data: payload.clone(),
        })
        .await
        .unwrap();
    assert_eq!(r.data.len(), payload.len());
    assert_eq!(r.tag, i);
    let r = client.test_fill(65_536).await.unwrap();
    assert_eq!(r.data.len(), 65_536);
    let buffer = client.rpc().buffer(65_536);
    let r = client
        .rpc()
        .call_with::<testvers::TestFill>(&65_536, CallOptions::new().reply_buffer(buffer))
        .await
        .unwrap();
    assert_eq!(r.data.len(), 65_536);
}

#[test]
fn registrations_and_heap_stay_flat_over_10_000_calls() {
    two_workers().block_on(async {
        let served = Served::start().await;
        let (listener, transport, client) = (&served.listener, &served.transport, served.client());
        let payload = pattern(65_536, 9);

        // Warm up: pools, send buffers and every lazily allocated structure reach their size.
        for i in 0..250 {
            mixed_round(&client, &payload, i).await;
        }
        let (bytes0, blocks0) = live();
        let client_pool0 = transport.pool_stats();
        let placed0 = transport.connection().placement_stats();
        let (_, server_pool0) = listener.stats()[0];

        // 2,500 rounds of four calls: 10,000 calls.
        for i in 0..2500 {
            mixed_round(&client, &payload, i).await;
        }
        let (bytes1, blocks1) = live();
        let client_pool1 = transport.pool_stats();
        let (core, server_pool1) = listener.stats()[0];
        let placed1 = transport.connection().placement_stats();

        println!(
            "heap: {bytes0} -> {bytes1} bytes, {blocks0} -> {blocks1} blocks; client pool \
             {client_pool0:?} -> {client_pool1:?}; server pool {server_pool0:?} -> \
             {server_pool1:?}; server core {core:?}; client placement {placed0:?} -> \
             {placed1:?}"
        );
        assert_eq!(
            client_pool1.registrations, client_pool0.registrations,
            "the client registered more memory"
        );
        assert_eq!(
            server_pool1.registrations, server_pool0.registrations,
            "the server registered more memory"
        );
        assert!(client_pool1.checkouts >= client_pool0.checkouts + 7_500);
        // Everything the server sent was already in registered memory: the filled results in
        // its buffers, the echoed data in the Read chunk's sink it landed in. No copy.
        assert_eq!(server_pool1.copied_bytes, 0);
        assert_eq!(
            server_pool1.zero_copy_bytes - server_pool0.zero_copy_bytes,
            2500 * 3 * 65_536
        );
        // The client's only copy: the echo's argument, which is ordinary memory (once per call).
        assert_eq!(
            client_pool1.copied_bytes - client_pool0.copied_bytes,
            2500 * 65_536
        );
        // Nor does the client's provider copy what came for it: the three 64 KiB results of
        // a round (the echo's and both fills') go from the socket straight into the Write
        // chunks' registrations (without the announcement of the Write chunk, all of it was
        // copied). What is copied is the last 550 bytes of each result, which come as a
        // small segment of their own (0.8 %), plus room for a read sized just before a call
        // announced its Write chunk and run after the write had come (a thread preempted for
        // a whole round trip).
        let direct = placed1.direct - placed0.direct;
        let copied = placed1.copied - placed0.copied;
        assert_eq!(direct + copied, 2500 * 3 * 65_536);
        assert!(
            copied * 50 <= direct + copied,
            "the client's provider copied {copied} of {} bytes written into its registrations",
            direct + copied
        );
        assert!(
            bytes1 - bytes0 < 256 << 10,
            "the heap grew by {} bytes over 10,000 calls",
            bytes1 - bytes0
        );
        assert!(
            blocks1 - blocks0 < 256,
            "{} more heap blocks after 10,000 calls",
            blocks1 - blocks0
        );
    });
}

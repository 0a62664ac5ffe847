//! The pool over the software provider: reuse, revocation, zero-copy lookup.

use std::sync::Arc;

use bytes::Bytes;

use super::*;
use crate::transport::core::{Memory, MemoryErrorKind};

fn unlimited() -> MemoryBudget {
    MemoryBudget::new(usize::MAX)
}

async fn connection() -> (
    Arc<crate::rdma::soft::SoftConnection>,
    crate::rdma::soft::SoftConnection,
) {
    let (a, b) = crate::rdma::soft::connected_pair().await;
    (Arc::new(a), b)
}

#[tokio::test]
async fn buffers_are_reused_not_registered_again() {
    let (conn, _peer) = connection().await;
    let pool = Pool::new(conn, PoolConfig::default(), unlimited());
    for _ in 0..100 {
        let mut mem = &pool;
        let slices = mem.alloc(10_000, Access::REMOTE_WRITE).unwrap();
        assert_eq!(slices.len(), 1);
        assert!(slices[0]
            .buf
            .region()
            .access()
            .contains(Access::REMOTE_WRITE));
        slices[0].buf.mark_invalidated();
    }
    let s = pool.stats();
    assert_eq!(s.registrations, 1, "{s:?}");
    assert_eq!(s.live, 1);
    assert_eq!(s.checkouts, 100);
}

#[tokio::test]
async fn a_returned_buffer_with_a_live_tag_is_revoked() {
    let (conn, _peer) = connection().await;
    let pool = Pool::new(conn, PoolConfig::default(), unlimited());
    let mut mem = &pool;
    let slices = mem.alloc(100, Access::REMOTE_READ).unwrap();
    let region = slices[0].buf.region().clone();
    assert!(region.access().is_remote());
    drop(slices);
    assert!(!region.access().is_remote(), "revoked on return");
}

#[tokio::test]
async fn large_requests_take_several_buffers() {
    let (conn, _peer) = connection().await;
    let pool = Pool::new(
        conn,
        PoolConfig {
            max_buffer: 64 << 10,
            ..Default::default()
        },
        unlimited(),
    );
    let mut mem = &pool;
    let slices = mem.alloc(200 << 10, Access::NONE).unwrap();
    assert_eq!(
        slices.iter().map(|s| s.len).collect::<Vec<_>>(),
        vec![65536, 65536, 65536, 8192]
    );
}

#[tokio::test]
async fn data_in_a_lent_buffer_moves_without_a_copy() {
    let (conn, _peer) = connection().await;
    let pool = Pool::new(conn, PoolConfig::default(), unlimited());
    let mut lease = pool.lease(5000).unwrap();
    lease.as_mut_slice().fill(0x42);
    let frozen = Box::new(lease).freeze(4000);
    let part = frozen.slice(100..3000);
    let mut mem = &pool;
    let slices = mem
        .source(std::slice::from_ref(&part), Access::NONE)
        .unwrap();
    assert_eq!(slices.len(), 1);
    assert_eq!((slices[0].offset, slices[0].len), (100, 2900));
    let s = pool.stats();
    assert_eq!((s.copied_bytes, s.zero_copy_bytes), (0, 2900));
    // Ordinary memory is copied once.
    let plain = Bytes::from(vec![7u8; 3000]);
    let slices = mem
        .source(std::slice::from_ref(&plain), Access::NONE)
        .unwrap();
    assert_eq!(slices[0].freeze(3000), plain);
    assert_eq!(pool.stats().copied_bytes, 3000);
    // Gathered parts too, in order.
    let parts = [Bytes::from_static(b"abc"), Bytes::from_static(b"defgh")];
    let slices = mem.source(&parts, Access::NONE).unwrap();
    assert_eq!(&slices[0].freeze(8)[..], b"abcdefgh");
}

#[tokio::test]
async fn a_buffer_advertised_for_one_message_is_copied_for_another() {
    let (conn, _peer) = connection().await;
    let pool = Pool::new(conn, PoolConfig::default(), unlimited());
    let lease = pool.lease(100).unwrap();
    let data = Box::new(lease).freeze(100);
    let mut mem = &pool;
    let first = mem
        .source(std::slice::from_ref(&data), Access::REMOTE_READ)
        .unwrap();
    let second = mem
        .source(std::slice::from_ref(&data), Access::REMOTE_READ)
        .unwrap();
    assert!(!Arc::ptr_eq(&first[0].buf.0, &second[0].buf.0));
    assert_ne!(first[0].buf.handle(), second[0].buf.handle());
    assert_eq!(pool.stats().copied_bytes, 100);
}

#[tokio::test]
async fn a_lease_comes_back_out_of_a_registered_buffer() {
    let (conn, _peer) = connection().await;
    let pool = Pool::new(conn, PoolConfig::default(), unlimited());
    let source = pool.buffer_source();
    let buffer = source.buffer(1000);
    assert!(buffer.is_registered());
    let lease = pool.take_lease(buffer).expect("our own lease");
    assert_eq!(lease.len, 1000);
    assert!(pool.take_lease(RegisteredBuffer::heap(10)).is_none());
}

#[tokio::test]
async fn read_chunk_sinks_are_taken_within_the_budget_and_charged_by_class() {
    let (conn, _peer) = connection().await;
    let server = MemoryBudget::new(3 << 20);
    let pool = Pool::new(conn, PoolConfig::default(), server.child(2 << 20));
    let mut mem = &pool;
    // 600 KiB takes a 1 MiB buffer: the charge is what is registered, not what was asked.
    let first = mem.alloc_sinks(&[600 << 10]).unwrap();
    assert_eq!(pool.stats().lent_bytes, 1 << 20);
    assert_eq!(server.used(), 1 << 20);
    let second = mem.alloc_sinks(&[4096, 4096]).unwrap();
    assert_eq!(second.len(), 2);
    assert_eq!(pool.stats().lent_bytes, (1 << 20) + 8192);
    let refused = mem.alloc_sinks(&[1 << 20]).unwrap_err();
    assert_eq!(refused.kind(), MemoryErrorKind::Exhausted);
    let never = mem.alloc_sinks(&[3 << 20]).unwrap_err();
    assert_eq!(never.kind(), MemoryErrorKind::TooLarge);
    // Nothing of a refused request stays charged.
    assert_eq!(pool.stats().lent_bytes, (1 << 20) + 8192);
    drop((first, second));
    assert_eq!(pool.stats().lent_bytes, 0);
    assert_eq!(server.used(), 0);
    mem.alloc_sinks(&[1 << 20]).unwrap();
}

#[tokio::test]
async fn data_is_kept_registered_only_below_half_of_every_budget() {
    let (conn, _peer) = connection().await;
    let server = MemoryBudget::new(8 << 20);
    let pool = Pool::new(conn, PoolConfig::default(), server.child(4 << 20));
    let mut mem = &pool;
    let held = mem.alloc_sinks(&[1 << 20]).unwrap();
    assert!(mem.keep_received(1 << 20));
    let more = mem.alloc_sinks(&[1 << 20, 4096]).unwrap();
    assert!(!mem.keep_received(1 << 20), "past half of the connection's");
    drop(more);
    // Another connection of the same server fills the server's half.
    let other = server.child(8 << 20).try_charge(4 << 20).unwrap();
    assert!(!mem.keep_received(1 << 20), "past half of the server's");
    drop((other, held));
    assert!(mem.keep_received(1 << 20));
    mem.copied_out(1000);
    assert_eq!(pool.stats().copied_out_bytes, 1000);
}

#[tokio::test]
async fn buffers_handlers_keep_count_until_their_bytes_are_dropped() {
    let (conn, _peer) = connection().await;
    let pool = Pool::new(conn, PoolConfig::default(), MemoryBudget::new(1 << 30));
    let mut mem = &pool;
    let sink = mem.alloc_sinks(&[64 << 10]).unwrap().remove(0).remove(0);
    let kept = sink.freeze(100);
    drop(sink);
    assert_eq!(
        pool.stats().lent_bytes,
        64 << 10,
        "the frozen bytes keep the buffer lent"
    );
    drop(kept);
    assert_eq!(pool.stats().lent_bytes, 0);
}

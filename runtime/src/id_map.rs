//! Hash maps keyed by numbers this side hands out: call and operation ids, XIDs.
//!
//! The standard library's SipHash resists keys chosen to collide, which these maps do not
//! need: every key is inserted by this side (a peer's message only looks one up), and the
//! ids are consecutive. SipHash was 8.6% of the instructions of an RPC-over-RDMA NULL call
//! (callgrind); one multiplication (the Fx hash of rustc) does the job here.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// A map keyed by ids this side assigns.
pub(crate) type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// A set of ids this side assigns.
#[cfg_attr(not(feature = "transport"), allow(dead_code))] // only the transport's requester
pub(crate) type IdSet<K> = HashSet<K, BuildHasherDefault<IdHasher>>;

/// Fx hashing: each word is mixed in with a rotation, an exclusive or and a multiplication
/// by an odd constant (a bijection, so consecutive ids land in distinct buckets; the high
/// bits hashbrown uses as tags are well mixed).
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

const K: u64 = 0x517c_c1b7_2722_0a95;

impl IdHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
    }
}

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(n.into());
    }

    fn write_u16(&mut self, n: u16) {
        self.add(n.into());
    }

    fn write_u32(&mut self, n: u32) {
        self.add(n.into());
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_ids_spread_over_buckets_and_tags() {
        let hash = |n: u64| {
            let mut h = IdHasher::default();
            h.write_u64(n);
            h.finish()
        };
        // hashbrown takes the bucket from the low bits and a 7-bit tag from the top ones.
        let buckets: IdSet<u64> = (0..1024).map(|n| hash(n) & 1023).collect();
        assert_eq!(buckets.len(), 1024);
        let tags: IdSet<u64> = (0..1024).map(|n| hash(n) >> 57).collect();
        assert!(tags.len() > 100, "{} tags", tags.len());
        let mut m: IdMap<u32, u32> = IdMap::default();
        for n in 0..10_000 {
            m.insert(n, n * 2);
        }
        assert!((0..10_000).all(|n| m[&n] == n * 2));
    }
}

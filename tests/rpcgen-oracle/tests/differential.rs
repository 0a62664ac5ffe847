//! Differential decoding of damaged messages: valid messages drawn by the C side, then
//! bytes flipped, words overwritten, cut or extended. Whenever the generated Rust decoder
//! accepts such input, rpcgen's decoder must accept it too and both must re-encode it to
//! the same bytes. The converse does not hold, by design: rpcgen takes any non-zero word as
//! TRUE for a present flag and any value for an enum that is not a union discriminant,
//! which RFC 4506 sections 4.3, 4.4 and 4.19 do not allow.
//!
//! rpcgen only sees the inputs we accept: given a damaged count, its `xdr_array` allocates
//! and zeroes count x element size bytes (up to 4 GiB) before it finds the input too short,
//! which made this test take minutes. Our decoder refuses such a count up front.

mod common;

use common::adapt;
use rpcgen_oracle::*;
use rpcrdma::xdr::{from_bytes, to_bytes, Bytes, Decode, Encode};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// One random damage to `msg`.
fn damage(rng: &mut Rng, msg: &[u8]) -> Vec<u8> {
    let mut m = msg.to_vec();
    match rng.below(5) {
        0 if !m.is_empty() => {
            let i = rng.below(m.len());
            m[i] ^= 1 << rng.below(8);
        }
        1 if m.len() >= 4 => {
            // Overwrite an aligned word with a small value: counts, flags, discriminants.
            let i = rng.below(m.len() / 4) * 4;
            let v = [0u32, 1, 2, 3, 4, 5, 7, 0xffff_ffff][rng.below(8)];
            m[i..i + 4].copy_from_slice(&v.to_be_bytes());
        }
        2 => m.truncate(rng.below(m.len() + 1)),
        3 => m.extend_from_slice(&(rng.next() as u32).to_be_bytes()),
        _ => {
            let i = rng.below(m.len() + 1);
            m.insert(i, rng.next() as u8);
        }
    }
    m
}

struct Tally {
    accepted: usize,
    rejected: usize,
}

fn check<T: Decode + Encode>(
    name: &str,
    random: fn(u64) -> Result<Vec<u8>, OracleError>,
    reencode: fn(&[u8]) -> Result<Vec<u8>, OracleError>,
) -> Tally {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut tally = Tally {
        accepted: 0,
        rejected: 0,
    };
    for seed in 0..400 {
        let valid = random(seed).unwrap();
        for _ in 0..25 {
            let input = damage(&mut rng, &valid);
            match from_bytes::<T>(Bytes::from(input.clone())) {
                Ok(value) => {
                    let c_bytes = reencode(&input).unwrap_or_else(|e| {
                        panic!("{name}: we accept what rpcgen rejects ({e}): {input:02x?}")
                    });
                    let rust_bytes = to_bytes(&value).unwrap();
                    assert_eq!(&rust_bytes[..], &c_bytes[..], "{name}: re-encodings differ");
                    tally.accepted += 1;
                }
                Err(_) => tally.rejected += 1,
            }
        }
    }
    println!(
        "{name}: damaged inputs accepted by both {}, rejected by us {}",
        tally.accepted, tally.rejected
    );
    tally
}

#[test]
fn v1_we_never_accept_what_rpcgen_rejects() {
    if !require() {
        return;
    }
    let t = check::<adapt::V1Gen>("rpcrdma1_msg", v1_random, v1_reencode);
    assert!(
        t.accepted > 0 && t.rejected > 0,
        "the damage exercised both outcomes"
    );
}

#[test]
fn rpc_msg_we_never_accept_what_rpcgen_rejects() {
    if !require() {
        return;
    }
    let t = check::<adapt::RpcGen>("rpc_msg", rpc_random, rpc_reencode);
    assert!(
        t.accepted > 0 && t.rejected > 0,
        "the damage exercised both outcomes"
    );
}

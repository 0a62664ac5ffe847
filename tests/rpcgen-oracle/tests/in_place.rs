//! `Decode::decode_in_place` on generated types gives exactly what `Decode::decode` gives,
//! whatever value it decodes over (every arm of `rpcrdma1_msg` and `rpc_msg`, lists of any
//! length growing and shrinking), and on damaged input fails exactly when `decode` fails.
//! Needs no rpcgen: the flat descriptions only feed the generated types.

mod common;

use common::adapt;
use proptest::prelude::*;
use rpcrdma::xdr::{from_bytes, from_bytes_in_place, to_bytes, Bytes, Decode, Encode};

/// Decodes `wire` both ways over `held` and checks they agree.
fn agree<T: Decode + Clone + PartialEq + std::fmt::Debug>(
    wire: Bytes,
    mut held: T,
) -> Result<(), TestCaseError> {
    let fresh = from_bytes::<T>(wire.clone());
    let in_place = from_bytes_in_place(wire, &mut held);
    match (fresh, in_place) {
        (Ok(v), Ok(())) => prop_assert_eq!(v, held),
        (Err(a), Err(b)) => prop_assert_eq!(a, b),
        (a, b) => prop_assert!(false, "decode {a:?} but decode_in_place {b:?}"),
    }
    Ok(())
}

/// `wire` cut short at `cut` (modulo its length) with one byte flipped at `flip`.
fn damaged(wire: &Bytes, cut: usize, flip: usize, bits: u8) -> Bytes {
    let mut v = wire.to_vec();
    v.truncate(cut % (v.len() + 1));
    if !v.is_empty() {
        let at = flip % v.len();
        v[at] ^= bits;
    }
    Bytes::from(v)
}

fn check<T: Decode + Encode + Clone + PartialEq + std::fmt::Debug>(
    old: T,
    new: T,
    cut: usize,
    flip: usize,
    bits: u8,
) -> Result<(), TestCaseError> {
    let wire = to_bytes(&new).unwrap();
    agree(wire.clone(), old.clone())?;
    agree(damaged(&wire, cut, flip, bits), old)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1024,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn v1_in_place_equals_fresh(
        old in common::v1_msg(),
        new in common::v1_msg(),
        cut in any::<usize>(),
        flip in any::<usize>(),
        bits in 1u8..,
    ) {
        check(adapt::v1_to_gen(&old), adapt::v1_to_gen(&new), cut, flip, bits)?;
    }

    #[test]
    fn rpc_msg_in_place_equals_fresh(
        old in common::rpc_msg(),
        new in common::rpc_msg(),
        cut in any::<usize>(),
        flip in any::<usize>(),
        bits in 1u8..,
    ) {
        check(adapt::rpc_to_gen(&old), adapt::rpc_to_gen(&new), cut, flip, bits)?;
    }
}

#[test]
fn decoding_in_place_keeps_the_vectors() {
    let msg = |n: usize| {
        let seg = rpcgen_oracle::Segment {
            handle: 1,
            length: 2,
            offset: 3,
        };
        adapt::v1_to_gen(&rpcgen_oracle::V1Msg {
            xid: 1,
            vers: 1,
            credit: 1,
            body: rpcgen_oracle::V1Body::Chunks {
                proc_: 0,
                chunks: rpcgen_oracle::V1Chunks {
                    reads: vec![],
                    writes: vec![vec![seg; n]],
                    reply: None,
                },
            },
        })
    };
    let mut held = msg(8);
    let targets = |m: &adapt::V1Gen| match &m.rdma_body {
        rpcrdma_specs::v1::Rpcrdma1Body::RdmaMsg(c) => {
            let t = &c.rdma_writes[0].rdma_entry.rdma_target;
            (t.as_ptr(), t.len())
        }
        other => panic!("unexpected arm {other:?}"),
    };
    let (before, _) = targets(&held);
    from_bytes_in_place(to_bytes(&msg(3)).unwrap(), &mut held).unwrap();
    assert_eq!(held, msg(3));
    assert_eq!(targets(&held), (before, 3), "the segment vector was reused");
}

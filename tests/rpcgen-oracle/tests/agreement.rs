//! Byte-for-byte agreement between the xdrgen-generated Rust codecs and rpcgen + libtirpc,
//! in both directions, for `rpcrdma1_msg` (every body arm, read/write lists, reply chunk,
//! both RDMA_ERROR arms), `rpc_msg` (calls, every reply arm) and `authsys_parms`:
//!
//! 1. proptest draws a value in Rust; our bytes must equal the bytes rpcgen's encoder makes
//!    from the same value (passed through the flat FFI description), rpcgen must decode our
//!    bytes and re-encode them identically, and we must decode them back to the value;
//! 2. the C side draws a value from a seed; we decode rpcgen's bytes, re-encode them
//!    identically, and the decoded value, handed back to C, encodes to the same bytes.

mod common;

use common::adapt;
use proptest::prelude::*;
use rpcgen_oracle::*;
use rpcrdma::xdr::{from_bytes, to_bytes, Bytes};

fn skip() -> bool {
    !require()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        // Test files have no lib.rs to store regressions next to; failures print the case.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn v1_rust_values_agree_with_rpcgen(flat in common::v1_msg()) {
        if !skip() {
            let ours = to_bytes(&adapt::v1_to_gen(&flat)).unwrap();
            prop_assert_eq!(&ours[..], &v1_encode(&flat).unwrap()[..], "encoders disagree");
            prop_assert_eq!(&v1_reencode(&ours).unwrap()[..], &ours[..], "rpcgen re-encode");
            let back: adapt::V1Gen = from_bytes(ours).unwrap();
            prop_assert_eq!(adapt::v1_from_gen(&back), flat);
        }
    }

    #[test]
    fn rpc_msg_rust_values_agree_with_rpcgen(flat in common::rpc_msg()) {
        if !skip() {
            let ours = to_bytes(&adapt::rpc_to_gen(&flat)).unwrap();
            prop_assert_eq!(&ours[..], &rpc_encode(&flat).unwrap()[..], "encoders disagree");
            prop_assert_eq!(&rpc_reencode(&ours).unwrap()[..], &ours[..], "rpcgen re-encode");
            let back: adapt::RpcGen = from_bytes(ours).unwrap();
            prop_assert_eq!(adapt::rpc_from_gen(&back), flat);
        }
    }

    #[test]
    fn authsys_rust_values_agree_with_rpcgen(flat in common::authsys()) {
        if !skip() {
            let ours = to_bytes(&adapt::authsys_to_gen(&flat)).unwrap();
            prop_assert_eq!(&ours[..], &authsys_encode(&flat).unwrap()[..], "encoders disagree");
            prop_assert_eq!(&authsys_reencode(&ours).unwrap()[..], &ours[..]);
            let back: adapt::AuthSysGen = from_bytes(ours).unwrap();
            prop_assert_eq!(adapt::authsys_from_gen(&back), flat);
        }
    }
}

#[test]
fn v1_c_drawn_values_decode_and_reencode_identically() {
    if skip() {
        return;
    }
    for seed in 0..3000 {
        let theirs = v1_random(seed).unwrap();
        let decoded: adapt::V1Gen =
            from_bytes(Bytes::from(theirs.clone())).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(&to_bytes(&decoded).unwrap()[..], &theirs[..], "seed {seed}");
        let flat = adapt::v1_from_gen(&decoded);
        assert_eq!(v1_encode(&flat).unwrap(), theirs, "seed {seed}");
    }
}

#[test]
fn rpc_msg_c_drawn_values_decode_and_reencode_identically() {
    if skip() {
        return;
    }
    for seed in 0..3000 {
        let theirs = rpc_random(seed).unwrap();
        let decoded: adapt::RpcGen =
            from_bytes(Bytes::from(theirs.clone())).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(&to_bytes(&decoded).unwrap()[..], &theirs[..], "seed {seed}");
        let flat = adapt::rpc_from_gen(&decoded);
        assert_eq!(rpc_encode(&flat).unwrap(), theirs, "seed {seed}");
    }
}

/// Both decoders refuse every truncation of the same message.
#[test]
fn both_reject_truncations() {
    if skip() {
        return;
    }
    for seed in 0..40 {
        let v1 = v1_random(seed).unwrap();
        for cut in 0..v1.len() {
            let prefix = &v1[..cut];
            assert!(
                v1_reencode(prefix).is_err(),
                "rpcgen, v1 seed {seed} cut {cut}"
            );
            let ours = from_bytes::<adapt::V1Gen>(Bytes::copy_from_slice(prefix));
            assert!(ours.is_err(), "xdrgen, v1 seed {seed} cut {cut}");
        }
        let rpc = rpc_random(seed).unwrap();
        for cut in 0..rpc.len() {
            let prefix = &rpc[..cut];
            assert!(
                rpc_reencode(prefix).is_err(),
                "rpcgen, rpc_msg seed {seed} cut {cut}"
            );
            let ours = from_bytes::<adapt::RpcGen>(Bytes::copy_from_slice(prefix));
            assert!(ours.is_err(), "xdrgen, rpc_msg seed {seed} cut {cut}");
        }
    }
}

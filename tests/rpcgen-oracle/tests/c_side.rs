//! The rpcgen side on its own: hand-computed bytes from the RFCs, C-drawn values that
//! survive rpcgen's own decode/encode, truncations rejected, and the specs accepted by
//! rpcgen (specs/check-with-rpcgen.sh).

use rpcgen_oracle::*;
use std::path::Path;
use std::process::Command;

fn skip() -> bool {
    !require()
}

fn words(ws: &[u32]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_be_bytes()).collect()
}

#[test]
fn v1_rdma_msg_without_chunks_is_seven_words() {
    if skip() {
        return;
    }
    let msg = V1Msg {
        xid: 0x0102_0304,
        vers: 1,
        credit: 32,
        body: V1Body::Chunks {
            proc_: 0,
            chunks: V1Chunks::default(),
        },
    };
    // rfc5666bis section 4.2 / 5.6: xid, vers, credit, proc, three absent lists.
    assert_eq!(
        v1_encode(&msg).unwrap(),
        words(&[0x0102_0304, 1, 32, 0, 0, 0, 0])
    );
}

#[test]
fn v1_chunk_lists_encode_as_optional_data_and_counted_arrays() {
    if skip() {
        return;
    }
    let seg = |h: u32| Segment {
        handle: h,
        length: 0x100 + h,
        offset: 0x1_0000_0002,
    };
    let msg = V1Msg {
        xid: 7,
        vers: 1,
        credit: 2,
        body: V1Body::Chunks {
            proc_: 1,
            chunks: V1Chunks {
                reads: vec![ReadSegment {
                    position: 8,
                    target: seg(1),
                }],
                writes: vec![vec![seg(2), seg(3)]],
                reply: Some(vec![]),
            },
        },
    };
    let expected = words(&[
        7, 1, 2, 1, // header, RDMA_NOMSG
        1, 8, 1, 0x101, 1, 2, 0, // read list: one entry, then "no next"
        1, 2, 2, 0x102, 1, 2, 3, 0x103, 1, 2, 0, // write list: one chunk of 2 segments
        1, 0, // reply chunk present, 0 segments
    ]);
    assert_eq!(v1_encode(&msg).unwrap(), expected);
    assert_eq!(v1_reencode(&expected).unwrap(), expected);
}

#[test]
fn v1_error_arms() {
    if skip() {
        return;
    }
    let vers = V1Msg {
        xid: 9,
        vers: 1,
        credit: 0,
        body: V1Body::ErrVers { low: 1, high: 1 },
    };
    assert_eq!(v1_encode(&vers).unwrap(), words(&[9, 1, 0, 4, 1, 1, 1]));
    let chunk = V1Msg {
        body: V1Body::ErrChunk,
        ..vers
    };
    assert_eq!(v1_encode(&chunk).unwrap(), words(&[9, 1, 0, 4, 2]));
}

#[test]
fn c_drawn_values_survive_rpcgens_decode_and_encode() {
    if skip() {
        return;
    }
    for seed in 0..2000 {
        let v1 = v1_random(seed).unwrap();
        assert_eq!(v1_reencode(&v1).unwrap(), v1, "v1 seed {seed}");
        let rpc = rpc_random(seed).unwrap();
        assert_eq!(rpc_reencode(&rpc).unwrap(), rpc, "rpc_msg seed {seed}");
    }
}

#[test]
fn rejects_every_truncation() {
    if skip() {
        return;
    }
    for seed in 0..50 {
        let v1 = v1_random(seed).unwrap();
        for cut in 0..v1.len() {
            assert!(v1_reencode(&v1[..cut]).is_err(), "v1 seed {seed} cut {cut}");
        }
        let rpc = rpc_random(seed).unwrap();
        for cut in 0..rpc.len() {
            assert!(
                rpc_reencode(&rpc[..cut]).is_err(),
                "rpc seed {seed} cut {cut}"
            );
        }
    }
    let mut longer = v1_random(1).unwrap();
    longer.extend_from_slice(&[0; 4]);
    assert_eq!(v1_reencode(&longer), Err(OracleError::Trailing));
}

#[test]
fn rpc_call_with_auth_sys_credential() {
    if skip() {
        return;
    }
    let sys = AuthSys {
        stamp: 5,
        machinename: b"host".to_vec(),
        uid: 1000,
        gid: 100,
        gids: vec![4, 24],
    };
    let body = authsys_encode(&sys).unwrap();
    // RFC 5531 appendix A: stamp, string<255> (length + padded bytes), uid, gid, gids<16>.
    let mut expected = words(&[5, 4]);
    expected.extend_from_slice(b"host");
    expected.extend(words(&[1000, 100, 2, 4, 24]));
    assert_eq!(body, expected);
    assert_eq!(authsys_reencode(&body).unwrap(), body);

    let call = RpcMsg::Call {
        xid: 0xdead_beef,
        rpcvers: 2,
        prog: 100003,
        vers: 3,
        proc_: 0,
        cred: Auth {
            flavor: 1,
            body: body.clone(),
        },
        verf: Auth::default(),
    };
    let mut expected = words(&[0xdead_beef, 0, 2, 100003, 3, 0, 1, body.len() as u32]);
    expected.extend_from_slice(&body);
    expected.extend(words(&[0, 0]));
    assert_eq!(rpc_encode(&call).unwrap(), expected);
}

#[test]
fn rpc_reply_arms() {
    if skip() {
        return;
    }
    let accepted = RpcMsg::Accepted {
        xid: 1,
        verf: Auth::default(),
        stat: 2, // PROG_MISMATCH
        low: 2,
        high: 4,
    };
    assert_eq!(
        rpc_encode(&accepted).unwrap(),
        words(&[1, 1, 0, 0, 0, 2, 2, 4])
    );
    let success = RpcMsg::Accepted {
        xid: 1,
        verf: Auth::default(),
        stat: 0,
        low: 0,
        high: 0,
    };
    assert_eq!(rpc_encode(&success).unwrap(), words(&[1, 1, 0, 0, 0, 0]));
    let mismatch = RpcMsg::RpcMismatch {
        xid: 3,
        low: 2,
        high: 2,
    };
    assert_eq!(rpc_encode(&mismatch).unwrap(), words(&[3, 1, 1, 0, 2, 2]));
    let auth = RpcMsg::AuthError { xid: 4, stat: 5 };
    assert_eq!(rpc_encode(&auth).unwrap(), words(&[4, 1, 1, 1, 5]));
}

#[test]
fn bench_pair_round_trips() {
    if skip() {
        return;
    }
    let msg = V1Msg {
        xid: 1,
        vers: 1,
        credit: 1,
        body: V1Body::Done,
    };
    let mut bench = V1Bench::new(&msg).unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(bench.encode_decode(&mut buf).unwrap(), 16);
    assert_eq!(&buf[..16], &words(&[1, 1, 1, 3])[..]);
}

/// Every corrected spec passes rpcgen and its C compiles; every raw extract is rejected.
#[test]
fn specs_pass_rpcgen_and_raw_extracts_do_not() {
    if skip() {
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../specs/check-with-rpcgen.sh");
    let ok = Command::new("bash").arg(&script).output().unwrap();
    let out = String::from_utf8_lossy(&ok.stdout);
    assert!(
        ok.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert_eq!(
        out.lines().filter(|l| l.starts_with("ok ")).count(),
        10, // the v1, 2004, v2, common, common+baseops, ietf-07 common+baseops, rpc_msg, nfs3,
        // mount3 and nfs4 units
        "{out}"
    );
    let raw = Command::new("bash")
        .arg(&script)
        .arg("--raw")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&raw.stdout);
    assert!(!raw.status.success());
    assert_eq!(
        out.lines().filter(|l| l.starts_with("FAIL")).count(),
        4, // raw v1, 2004, v2 and ietf-07
        "{out}"
    );
}

mod common;

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        failure_persistence: None,
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// Values drawn on the Rust side: rpcgen encodes them and decodes its own bytes back to
    /// the same bytes (a consistency check of the flat FFI description itself).
    #[test]
    fn rust_drawn_values_survive_rpcgen(
        v1 in common::v1_msg(),
        rpc in common::rpc_msg(),
        sys in common::authsys(),
    ) {
        if require() {
            let bytes = v1_encode(&v1).unwrap();
            proptest::prop_assert_eq!(v1_reencode(&bytes).unwrap(), bytes);
            let bytes = rpc_encode(&rpc).unwrap();
            proptest::prop_assert_eq!(rpc_reencode(&bytes).unwrap(), bytes);
            let bytes = authsys_encode(&sys).unwrap();
            proptest::prop_assert_eq!(authsys_reencode(&bytes).unwrap(), bytes);
        }
    }
}

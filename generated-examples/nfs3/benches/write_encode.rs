//! Encoding an NFSv3 WRITE call whose payload moves to a Read chunk costs the same whatever
//! the payload's size: the encoder references the payload, it never copies it.
//!
//! Prints the time per encode for payloads from 4 KiB to 16 MiB and the ratio of the largest
//! to the smallest (target: at most 1.1). A bench binary (`harness = false`) timing with
//! `Instant`: best of several rounds, each many encodes.

use std::hint::black_box;
use std::time::Instant;

use bytes::Bytes;
use rpcrdma::xdr::{Encode, Encoder, ThresholdPolicy};
use rpcrdma_nfs3::nfs3::{NfsFh3, StableHow, Write3args};
use rpcrdma_nfs3::rpc_msg::{AuthFlavor, CallBody, OpaqueAuth, RpcMsg, RpcMsgBody};

const SIZES: [usize; 5] = [4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20];
const ROUNDS: usize = 15;
const ITERS: u32 = 20_000;

fn encode_once(header: &RpcMsg, args: &Write3args) -> usize {
    let mut enc = Encoder::for_call(ThresholdPolicy {
        inline_threshold: 1024,
        min_ddp_size: 1024,
    });
    header.encode(&mut enc).unwrap();
    args.encode(&mut enc).unwrap();
    let (inline, moved) = enc.finish_with_chunks();
    inline.len() + moved.len()
}

/// Best time per encode, in nanoseconds.
fn best_per_encode(header: &RpcMsg, args: &Write3args) -> f64 {
    (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..ITERS {
                black_box(encode_once(black_box(header), black_box(args)));
            }
            start.elapsed().as_secs_f64() * 1e9 / f64::from(ITERS)
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let none = OpaqueAuth {
        flavor: AuthFlavor::AuthNone,
        body: Bytes::new(),
    };
    let header = RpcMsg {
        xid: 1,
        body: RpcMsgBody::Call(CallBody {
            rpcvers: 2,
            prog: 100_003,
            vers: 3,
            proc: 7,
            cred: none.clone(),
            verf: none,
        }),
    };
    let mut times = Vec::new();
    for size in SIZES {
        let args = Write3args {
            file: NfsFh3 {
                data: Bytes::from_static(&[1; 32]),
            },
            offset: 0,
            count: size as u32,
            stable: StableHow::Unstable,
            data: Bytes::from(vec![0xa5u8; size]),
        };
        let t = best_per_encode(&header, &args);
        println!(
            "nfs3 WRITE call encode, {:>8} KiB payload in a Read chunk: {t:>7.1} ns",
            size >> 10
        );
        times.push(t);
    }
    let ratio = times[times.len() - 1] / times[0];
    println!("ratio 16 MiB / 4 KiB = {ratio:.3} (target <= 1.1)");
}

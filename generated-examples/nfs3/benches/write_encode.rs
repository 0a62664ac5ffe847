//! Encoding an NFSv3 WRITE call whose payload moves to a Read chunk costs the same whatever
//! the payload's size: the encoder references the payload, it never copies it.
//!
//! Prints the time per encode for payloads from 4 KiB to 16 MiB and the ratio of the largest
//! to the smallest (target: at most 1.1). Next to it, as a reference line for the plot, the
//! time to copy the payload once into a buffer (what an encoder that copies would pay at
//! least). A bench binary (`harness = false`) timing with `Instant`: best of several rounds,
//! each many encodes. Writes its records for `scripts/bench` (`bench_report`; short rounds
//! with `BENCH_QUICK=1`).

use std::hint::black_box;
use std::time::Instant;

use bench_report::{Recorder, Target};
use bytes::{Bytes, BytesMut};
use rpcrdma::xdr::{Encode, Encoder, ThresholdPolicy};
use rpcrdma_nfs3::nfs3::{NfsFh3, StableHow, Write3args};
use rpcrdma_nfs3::rpc_msg::{AuthFlavor, CallBody, OpaqueAuth, RpcMsg, RpcMsgBody};

const SIZES: [usize; 7] = [
    4 << 10,
    16 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
    16 << 20,
];
/// The ratio of the largest payload's encode time to the smallest's may not exceed this.
const FLAT_TARGET: f64 = 1.1;

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

/// Best time per call of `f` over `rounds` rounds of `iters` calls, in nanoseconds.
fn best_ns(rounds: usize, iters: u32, mut f: impl FnMut()) -> f64 {
    (0..rounds)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..iters {
                f();
            }
            start.elapsed().as_secs_f64() * 1e9 / f64::from(iters)
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let quick = bench_report::quick();
    let (rounds, iters) = if quick { (9, 5_000) } else { (45, 20_000) };
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
    let mut rec = Recorder::new("write_encode");
    let args: Vec<Write3args> = SIZES
        .iter()
        .map(|&size| Write3args {
            file: NfsFh3 {
                data: Bytes::from_static(&[1; 32]),
            },
            offset: 0,
            count: size as u32,
            stable: StableHow::Unstable,
            data: Bytes::from(vec![0xa5u8; size]),
        })
        .collect();
    // The sizes take turns within each round (each round starting at the next size), so that
    // every size sees the same machine over the run: measured one size after the other, a
    // slow minute at the start or the end of the run made the ratio 0.76 or 1.17 on a
    // machine where the sizes take turns measured 0.98-1.00.
    let mut times = vec![f64::INFINITY; SIZES.len()];
    for round in 0..rounds {
        for k in 0..SIZES.len() {
            let i = (round + k) % SIZES.len();
            let t = best_ns(1, iters, || {
                black_box(encode_once(black_box(&header), black_box(&args[i])));
            });
            times[i] = times[i].min(t);
        }
    }
    // The copies after the encodes: each evicts the caches the encodes use.
    let mut sink = BytesMut::with_capacity(SIZES[SIZES.len() - 1]);
    let mut copies = Vec::new();
    for (i, &size) in SIZES.iter().enumerate() {
        // A copy moves bytes: fewer of them per round keep the rounds short.
        let copy_iters = (iters / (size as u32 >> 12).max(1)).max(20);
        let c = best_ns(rounds, copy_iters, || {
            sink.clear();
            sink.extend_from_slice(black_box(&args[i].data));
            black_box(&sink);
        });
        println!(
            "nfs3 WRITE call encode, {:>8} KiB payload in a Read chunk: {:>7.1} ns \
             (copying the payload once: {c:>10.1} ns)",
            size >> 10,
            times[i]
        );
        copies.push(c);
    }
    let ratio = times[times.len() - 1] / times[0];
    println!("ratio 16 MiB / 4 KiB = {ratio:.3} (target <= {FLAT_TARGET})");

    let group = "DDP encode";
    rec.figure(
        group,
        "NFSv3 WRITE call encode, 16 MiB payload in a Read chunk",
        times[times.len() - 1],
        "ns",
    )
    .baseline("the same call with a 4 KiB payload", times[0])
    .ratio(ratio, "value / baseline")
    .target(Target::at_most(FLAT_TARGET));
    rec.figure(
        group,
        "NFSv3 WRITE call encode, 1 MiB payload in a Read chunk",
        times[4],
        "ns",
    )
    .baseline("copying the 1 MiB payload once", copies[4])
    .ratio(times[4] / copies[4], "value / baseline");
    rec.note(
        group,
        format!(
            "Best of {rounds} rounds of {iters} encodes per payload size, the sizes taking \
             turns within each round (RPC header + WRITE arguments, the payload moved to a \
             Read chunk by reference). The copy line is \
             one `memcpy` of the payload into a reused buffer, what an encoder that copies \
             pays at least. The encode line should be flat."
        ),
    );
    let title = "NFSv3 WRITE encode time vs payload size (payload in a Read chunk)";
    let line = rec.series("ddp_encode", title, "xdrgen encoder (payload by reference)");
    line.axes("payload (bytes)", "ns per call (log)")
        .log_x()
        .log_y();
    for (s, t) in SIZES.iter().zip(&times) {
        line.point(*s as f64, *t);
    }
    let line = rec.series("ddp_encode", title, "copying the payload once (reference)");
    for (s, c) in SIZES.iter().zip(&copies) {
        line.point(*s as f64, *c);
    }
    if let Err(e) = rec.save() {
        eprintln!("write_encode: records not written: {e}");
    }
}

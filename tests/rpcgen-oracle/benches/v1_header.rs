//! Encode + decode of an RPC-over-RDMA version 1 RDMA_MSG header (a read list of two
//! segments, a write list of one chunk of two segments): the xdrgen-generated Rust codec
//! against rpcgen + libtirpc (`xdrmem_create` + `xdr_rpcrdma1_msg` encode, then decode and
//! `xdr_free`), in the same run. Ours runs twice: a fresh encoder and a fresh decoded value
//! each time, and the steady state of a transport (one encoder reused through
//! `Encoder::take`, decoding in place into a held value with `Decode::decode_in_place`: no
//! allocation per message). After criterion's report, each is sampled again in alternation with
//! rpcgen (so both see the same machine load) and the median ratios are printed:
//! `ratio rpcgen/ours (...) = X.Yx`. Run with `cargo bench -p rpcgen-oracle --bench v1_header`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use rpcgen_oracle::{ReadSegment, Segment, V1Bench, V1Body, V1Chunks, V1Msg};
use rpcrdma::xdr::{Bytes, Decode, Decoder, Encode, Encoder};

#[path = "../tests/common/adapt.rs"]
mod adapt;

fn header() -> V1Msg {
    let seg = |handle: u32, offset: u64| Segment {
        handle,
        length: 8192,
        offset,
    };
    V1Msg {
        xid: 0x1234_5678,
        vers: 1,
        credit: 128,
        body: V1Body::Chunks {
            proc_: 0,
            chunks: V1Chunks {
                reads: vec![
                    ReadSegment {
                        position: 120,
                        target: seg(0x1001, 0x7f00_0000_0000),
                    },
                    ReadSegment {
                        position: 120,
                        target: seg(0x1002, 0x7f00_0000_2000),
                    },
                ],
                writes: vec![vec![
                    seg(0x2001, 0x7f00_1000_0000),
                    seg(0x2002, 0x7f00_1000_2000),
                ]],
                reply: None,
            },
        },
    }
}

/// Calls per sample so that one sample of `f` takes about 20 ms.
fn calls_per_sample(f: &mut impl FnMut()) -> u32 {
    let mut calls = 1u32;
    loop {
        let start = Instant::now();
        for _ in 0..calls {
            f();
        }
        if start.elapsed() > Duration::from_millis(20) || calls >= 1 << 24 {
            return calls;
        }
        calls *= 2;
    }
}

fn sample(f: &mut impl FnMut(), calls: u32) -> Duration {
    let start = Instant::now();
    for _ in 0..calls {
        f();
    }
    start.elapsed() / calls
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Samples `ours` and `theirs` alternately (so both see the same machine load) and returns
/// the median time per call of each and the median of the per-pair ratios theirs/ours.
fn interleaved(mut ours: impl FnMut(), mut theirs: impl FnMut()) -> (f64, f64, f64) {
    let (n_ours, n_theirs) = (calls_per_sample(&mut ours), calls_per_sample(&mut theirs));
    let (mut o, mut t, mut r) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..31 {
        let a = sample(&mut ours, n_ours).as_secs_f64() * 1e9;
        let b = sample(&mut theirs, n_theirs).as_secs_f64() * 1e9;
        o.push(a);
        t.push(b);
        r.push(b / a);
    }
    (median(o), median(t), median(r))
}

fn main() {
    let flat = header();
    let ours = adapt::v1_to_gen(&flat);
    let mut theirs = V1Bench::new(&flat).expect("rpcgen oracle (run scripts/setup)");
    let mut buf = vec![0u8; 512];

    // Same bytes on both sides before timing anything.
    let ours_bytes = rpcrdma::xdr::to_bytes(&ours).unwrap();
    let len = theirs.encode_decode(&mut buf).unwrap();
    assert_eq!(&buf[..len], &ours_bytes[..], "xdrgen and rpcgen disagree");

    let mut ours_pair = || {
        let mut enc = Encoder::with_capacity(256);
        black_box(&ours).encode(&mut enc).unwrap();
        let wire: Bytes = enc.finish().into_bytes();
        let mut dec = Decoder::new(wire);
        let back = adapt::V1Gen::decode(&mut dec).unwrap();
        black_box(back);
    };
    // The steady state of a transport: one encoder kept across messages (`take` hands out
    // each message and the buffer is reclaimed once they are dropped, like rpcgen's fixed
    // `xdrmem` buffer) and a receive loop that decodes every header into the same value (its
    // vectors keep their capacity). No allocation per message.
    let mut held = ours.clone();
    let mut send = Encoder::with_capacity(4096);
    let mut ours_reuse_pair = || {
        black_box(&ours).encode(&mut send).unwrap();
        let wire: Bytes = send.take().into_bytes();
        let mut dec = Decoder::new(wire);
        held.decode_in_place(&mut dec).unwrap();
        black_box(&held);
    };
    let mut theirs_pair = || {
        black_box(theirs.encode_decode(black_box(&mut buf)).unwrap());
    };

    let mut c = Criterion::default().configure_from_args();
    {
        let mut group = c.benchmark_group("rpcrdma1_msg_encode_decode");
        group.bench_function("xdrgen", |b| b.iter(&mut ours_pair));
        group.bench_function("xdrgen_steady_state", |b| b.iter(&mut ours_reuse_pair));
        group.bench_function("rpcgen_libtirpc", |b| b.iter(&mut theirs_pair));
        group.finish();
    }
    c.final_summary();

    // `cargo test --benches` runs each function once; the ratio is for `cargo bench`.
    if std::env::args().any(|a| a == "--bench") {
        let (ours_ns, theirs_ns, ratio) = interleaved(&mut ours_pair, &mut theirs_pair);
        println!(
            "encode+decode RDMA_MSG (2 read segments, 1 write chunk of 2 segments, {} bytes), \
             31 interleaved samples: ours {ours_ns:.1} ns, rpcgen+libtirpc {theirs_ns:.1} ns",
            ours_bytes.len()
        );
        println!("ratio rpcgen/ours (fresh value per decode) = {ratio:.1}x");
        let (ours_ns, theirs_ns, ratio) = interleaved(&mut ours_reuse_pair, &mut theirs_pair);
        println!(
            "same, steady state (one encoder reused with `take`, decoding in place into a held \
             value): ours {ours_ns:.1} ns, rpcgen+libtirpc {theirs_ns:.1} ns"
        );
        println!("ratio rpcgen/ours (steady state, no allocation) = {ratio:.1}x");
    }
}

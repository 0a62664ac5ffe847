//! Encode + decode of an RPC-over-RDMA version 1 RDMA_MSG header (a read list of two
//! segments, a write list of one chunk of two segments): the xdrgen-generated Rust codec
//! against rpcgen + libtirpc, in the same run, two ways, each like for like:
//!
//! * **new value**: rpcgen encodes into a fixed buffer (`xdrmem_create` +
//!   `xdr_rpcrdma1_msg`), decodes those bytes into a zeroed structure (its lists and arrays
//!   `malloc`ed) and `xdr_free`s it; ours encodes into one reused `Encoder` (`clear` after
//!   each message), decodes those bytes where they are (`Encoder::as_contiguous`,
//!   `Decoder::from_slice`) into a new `Rpcrdma1Msg` (its `Vec`s allocated) and drops it.
//! * **steady state**: rpcgen decodes into one structure kept across calls (`xdr_reference`
//!   and `xdr_array` reuse the memory of non-NULL pointers: no `malloc`, no `xdr_free`); ours
//!   decodes in place into one kept value (`Decode::decode_in_place`: the `Vec`s keep their
//!   capacity). Neither allocates per message. rpcgen's reuse is only safe because every
//!   message here has the same shape: `xdr_array` writes into the old array without checking
//!   its size, so a message with more elements than the last one overruns it.
//! * **safe receive loops**: ours in place against rpcgen's decode + `xdr_free`, the loop
//!   rpcgen code needs when messages differ.
//!
//!
//! rpcgen's side is built from the same `.x` and runs its pairs in a loop in C
//! (`oracle_v1_bench_run`): one call from Rust per sample, none per message.
//!
//! The new-value pair is also run against the `xdr-codec` crate (jsgf's rust-xdr runtime,
//! types in `xdr_codec_v1.rs` shaped as its code generator shapes them): it packs into one
//! reused `Vec<u8>` (cleared after each message) and unpacks a new `Msg` from those bytes.
//!
//! After criterion's report, each pair is sampled again in alternation (so both see the same
//! machine load) and the median ratios are printed: `ratio rpcgen/ours (...) = X.Yx`. The
//! new-value ratios have targets (at least [`TARGET_VS_RPCGEN`] against rpcgen,
//! [`TARGET_VS_XDR_CODEC`] against xdr-codec), each marked `met` or `MISSED`; with `--check`
//! (or `BENCH_CHECK=1`) a miss makes the bench exit non-zero; `--check` skips criterion's
//! report (criterion refuses arguments it does not know) and runs the ratios only.
//! Run with `cargo bench -p rpcgen-oracle --bench v1_header [-- --check]`.
//!
//! The ratios are also written as records for `scripts/bench`'s report (`bench_report`);
//! `BENCH_QUICK=1` skips criterion's report and takes 11 shorter samples instead of 31.

use std::hint::black_box;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use bench_report::{Recorder, Target};
use criterion::Criterion;
use rpcgen_oracle::{ReadSegment, Segment, V1Bench, V1Body, V1Chunks, V1Msg};
use rpcrdma::xdr::{Decode, Decoder, Encode, Encoder};

#[path = "../tests/common/adapt.rs"]
mod adapt;
mod xdr_codec_v1;

use xdr_codec::{Pack, Unpack};

/// The least rpcgen/ours time ratio for a new value that counts as met.
const TARGET_VS_RPCGEN: f64 = 6.0;
/// The least xdr-codec/ours time ratio for a new value that counts as met.
const TARGET_VS_XDR_CODEC: f64 = 2.5;

/// Prints a ratio with its target's verdict; true when it is missed.
fn report_target(what: &str, ratio: f64, target: f64) -> bool {
    let met = ratio >= target;
    println!(
        "ratio {what} = {ratio:.1}x (target {target:.1}x: {})",
        if met { "met" } else { "MISSED" }
    );
    !met
}

/// The report group of these rows.
const GROUP: &str = "XDR codec";

/// Records one interleaved comparison: ours as the value, theirs as the baseline, the
/// speed-up (theirs / ours) as the ratio.
fn record(rec: &mut Recorder, name: &str, baseline: &str, cmp: &Interleaved, target: Option<f64>) {
    let f = rec
        .figure(GROUP, name, cmp.ours_ns, "ns")
        .baseline(baseline, cmp.theirs_ns)
        .ratio(cmp.ratio, "baseline / value")
        .ratio_range(cmp.ratio_range.0, cmp.ratio_range.1);
    if let Some(t) = target {
        f.target(Target::at_least(t));
    }
}

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

/// Runs a benchmarked operation `n` times in a row: a Rust loop around our closure, one
/// call into C (which loops there) for rpcgen.
trait Runs {
    fn run(&mut self, n: u32);
}

impl<R: Runs + ?Sized> Runs for &mut R {
    fn run(&mut self, n: u32) {
        (**self).run(n);
    }
}

/// Our side: the closure once per message.
struct Each<F>(F);

impl<F: FnMut()> Runs for Each<F> {
    fn run(&mut self, n: u32) {
        for _ in 0..n {
            (self.0)();
        }
    }
}

/// rpcgen's side: `n` pairs looped in C (`reuse`: the steady-state pair).
struct InC<'a> {
    bench: &'a mut V1Bench,
    buf: Vec<u8>,
    reuse: bool,
}

impl Runs for InC<'_> {
    fn run(&mut self, n: u32) {
        self.bench
            .run(black_box(&mut self.buf), n, self.reuse)
            .expect("rpcgen pair");
    }
}

/// Calls per sample so that one sample of `f` takes about 20 ms (5 ms when quick).
fn calls_per_sample(f: &mut impl Runs) -> u32 {
    let sample = Duration::from_millis(if bench_report::quick() { 5 } else { 20 });
    let mut calls = 1u32;
    loop {
        let start = Instant::now();
        f.run(calls);
        if start.elapsed() > sample || calls >= 1 << 24 {
            return calls;
        }
        calls *= 2;
    }
}

/// Time per call in ns (as a float: `Duration / calls` would truncate to whole ns, 3% of a
/// 32 ns call).
fn sample_ns(f: &mut impl Runs, calls: u32) -> f64 {
    let start = Instant::now();
    f.run(calls);
    start.elapsed().as_secs_f64() * 1e9 / f64::from(calls)
}

/// Criterion's timing of `iters` runs of `f` (in chunks a `u32` can count).
fn timed(f: &mut impl Runs, iters: u64) -> Duration {
    let start = Instant::now();
    let mut left = iters;
    while left > 0 {
        let n = left.min(u64::from(u32::MAX));
        f.run(n as u32);
        left -= n;
    }
    start.elapsed()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One interleaved comparison.
struct Interleaved {
    /// Median time per call of ours, ns.
    ours_ns: f64,
    /// Median time per call of theirs, ns.
    theirs_ns: f64,
    /// Median of the per-pair ratios theirs/ours.
    ratio: f64,
    /// Least and greatest per-pair ratio.
    ratio_range: (f64, f64),
}

/// Samples `ours` and `theirs` alternately (so both see the same machine load) and returns
/// the median time per call of each and the median of the per-pair ratios theirs/ours.
fn interleaved(mut ours: impl Runs, mut theirs: impl Runs) -> Interleaved {
    let (n_ours, n_theirs) = (calls_per_sample(&mut ours), calls_per_sample(&mut theirs));
    let (mut o, mut t, mut r) = (Vec::new(), Vec::new(), Vec::new());
    let samples = if bench_report::quick() { 11 } else { 31 };
    for _ in 0..samples {
        let a = sample_ns(&mut ours, n_ours);
        let b = sample_ns(&mut theirs, n_theirs);
        o.push(a);
        t.push(b);
        r.push(b / a);
    }
    let range = (
        r.iter().copied().fold(f64::INFINITY, f64::min),
        r.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    );
    Interleaved {
        ours_ns: median(o),
        theirs_ns: median(t),
        ratio: median(r),
        ratio_range: range,
    }
}

fn main() -> ExitCode {
    let flat = header();
    let ours = adapt::v1_to_gen(&flat);
    let mut theirs = V1Bench::new(&flat).expect("rpcgen oracle (run scripts/setup)");
    let mut buf = vec![0u8; 512];

    // Same bytes on both sides before timing anything.
    let ours_bytes = rpcrdma::xdr::to_bytes(&ours).unwrap();
    let len = theirs.encode_decode(&mut buf).unwrap();
    assert_eq!(&buf[..len], &ours_bytes[..], "xdrgen and rpcgen disagree");

    let codec_msg = xdr_codec_v1::from_flat(&flat);
    let mut codec_buf: Vec<u8> = Vec::with_capacity(512);
    codec_msg.pack(&mut codec_buf).unwrap();
    assert_eq!(codec_buf, &ours_bytes[..], "xdrgen and xdr-codec disagree");
    let (back, _) = xdr_codec_v1::Msg::unpack(&mut &codec_buf[..]).unwrap();
    assert_eq!(
        back, codec_msg,
        "xdr-codec does not read back its own bytes"
    );
    codec_buf.clear();

    // One encoder kept across messages and cleared after each, like rpcgen's fixed `xdrmem`
    // buffer; the decoder reads the encoded bytes where they are, as it reads a received
    // message where the transport put it.
    let mut send = Encoder::with_capacity(512);
    let mut ours_new = Each(|| {
        black_box(&ours).encode(&mut send).unwrap();
        let wire = send.as_contiguous().unwrap();
        let back = adapt::V1Gen::decode(&mut Decoder::from_slice(wire)).unwrap();
        black_box(back);
        send.clear();
    });
    let mut theirs_bench = V1Bench::new(&flat).expect("rpcgen oracle (run scripts/setup)");
    let mut theirs_new = InC {
        bench: &mut theirs_bench,
        buf: vec![0u8; 512],
        reuse: false,
    };
    let mut codec_new = Each(|| {
        black_box(&codec_msg).pack(&mut codec_buf).unwrap();
        let (back, _) = xdr_codec_v1::Msg::unpack(&mut &codec_buf[..]).unwrap();
        black_box(back);
        codec_buf.clear();
    });
    let mut held = ours.clone();
    let mut send_steady = Encoder::with_capacity(512);
    let mut ours_steady = Each(|| {
        black_box(&ours).encode(&mut send_steady).unwrap();
        let wire = send_steady.as_contiguous().unwrap();
        held.decode_in_place(&mut Decoder::from_slice(wire))
            .unwrap();
        black_box(&held);
        send_steady.clear();
    });
    let mut theirs_held = V1Bench::new(&flat).expect("rpcgen oracle (run scripts/setup)");
    let mut theirs_steady = InC {
        bench: &mut theirs_held,
        buf: vec![0u8; 512],
        reuse: true,
    };

    // Criterion refuses arguments it does not know: with `--check` only the ratios run.
    let check_arg = std::env::args().any(|a| a == "--check");
    if !check_arg && !bench_report::quick() {
        let mut c = Criterion::default().configure_from_args();
        {
            let mut group = c.benchmark_group("rpcrdma1_msg_encode_decode");
            group.bench_function("xdrgen_new_value", |b| {
                b.iter_custom(|iters| timed(&mut ours_new, iters))
            });
            group.bench_function("rpcgen_libtirpc_new_value", |b| {
                b.iter_custom(|iters| timed(&mut theirs_new, iters))
            });
            group.bench_function("xdr_codec_new_value", |b| {
                b.iter_custom(|iters| timed(&mut codec_new, iters))
            });
            group.bench_function("xdrgen_steady_state", |b| {
                b.iter_custom(|iters| timed(&mut ours_steady, iters))
            });
            group.bench_function("rpcgen_libtirpc_steady_state", |b| {
                b.iter_custom(|iters| timed(&mut theirs_steady, iters))
            });
            group.finish();
        }
        c.final_summary();
    }

    // `cargo test --benches` runs each function once; the ratios are for `cargo bench`.
    if !check_arg && !std::env::args().any(|a| a == "--bench") {
        return ExitCode::SUCCESS;
    }
    let check = check_arg || std::env::var("BENCH_CHECK").is_ok_and(|v| v == "1");
    let samples = if bench_report::quick() { 11 } else { 31 };
    println!(
        "encode+decode RDMA_MSG (2 read segments, 1 write chunk of 2 segments, {} bytes), \
         medians of {samples} interleaved samples:",
        ours_bytes.len()
    );
    let mut rec = Recorder::new("v1_header");
    let mut missed = false;
    let new_rpcgen = interleaved(&mut ours_new, &mut theirs_new);
    println!(
        "new value:    ours {:.1} ns, rpcgen+libtirpc {:.1} ns",
        new_rpcgen.ours_ns, new_rpcgen.theirs_ns
    );
    missed |= report_target(
        "rpcgen/ours (new value)",
        new_rpcgen.ratio,
        TARGET_VS_RPCGEN,
    );
    let new_codec = interleaved(&mut ours_new, &mut codec_new);
    println!(
        "new value:    ours {:.1} ns, xdr-codec {:.1} ns",
        new_codec.ours_ns, new_codec.theirs_ns
    );
    missed |= report_target(
        "xdr-codec/ours (new value)",
        new_codec.ratio,
        TARGET_VS_XDR_CODEC,
    );
    let steady = interleaved(&mut ours_steady, &mut theirs_steady);
    println!(
        "steady state: ours {:.1} ns, rpcgen+libtirpc {:.1} ns",
        steady.ours_ns, steady.theirs_ns
    );
    println!("ratio rpcgen/ours (steady state) = {:.1}x", steady.ratio);
    let safe = interleaved(&mut ours_steady, &mut theirs_new);
    println!(
        "safe receive loops (ours in place; rpcgen decode + xdr_free, since its reuse \
         overruns an array that grows): ours {:.1} ns, rpcgen+libtirpc {:.1} ns",
        safe.ours_ns, safe.theirs_ns
    );
    println!(
        "ratio rpcgen/ours (safe receive loops) = {:.1}x",
        safe.ratio
    );

    let msg = "RDMA_MSG encode+decode";
    record(
        &mut rec,
        &format!("{msg}, new value"),
        "rpcgen + libtirpc, new value (decode + xdr_free)",
        &new_rpcgen,
        Some(TARGET_VS_RPCGEN),
    );
    record(
        &mut rec,
        &format!("{msg}, new value"),
        "xdr-codec 0.4 (jsgf), new value",
        &new_codec,
        Some(TARGET_VS_XDR_CODEC),
    );
    record(
        &mut rec,
        &format!("{msg}, in place (decode_in_place)"),
        "rpcgen + libtirpc, decoding into a kept structure",
        &steady,
        None,
    );
    record(
        &mut rec,
        &format!("{msg}, in place (decode_in_place)"),
        "rpcgen + libtirpc, decode + xdr_free (safe when messages differ)",
        &safe,
        None,
    );
    rec.note(
        GROUP,
        format!(
            "An RPC-over-RDMA v1 RDMA_MSG header ({} bytes: 2 read segments, a write chunk of \
             2 segments) encoded and decoded by the xdrgen codec against rpcgen + libtirpc \
             (C, looped in C) and the `xdr-codec` crate; medians of {samples} alternating \
             samples, the ratio being how many times faster ours is. A new value allocates \
             its lists on every side; in place reuses one value's memory. rpcgen's in-place \
             reuse is only safe when every message has the same shape.",
            ours_bytes.len()
        ),
    );
    if let Err(e) = rec.save() {
        eprintln!("v1_header: records not written: {e}");
    }
    if missed && check {
        eprintln!("v1_header: a target was missed (--check)");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

//! The pair the `v1_header` bench times (encode + decode of an RDMA_MSG header with two read
//! segments and one write chunk of two segments), in a plain loop, for instruction-level
//! profiles that wall-clock noise cannot blur:
//!
//! ```text
//! cargo build --release -p rpcgen-oracle --example v1_header_loop
//! valgrind --tool=callgrind target/release/examples/v1_header_loop 100000 steady
//! callgrind_annotate callgrind.out.*
//! ```
//!
//! Arguments: iterations (default 1,000,000) and `fresh` (a new encoder and decoded value
//! each time, the default), `new` (one encoder cleared after each message, a new decoded
//! value: the bench's new-value pair), `enc` (that pair's encode only), `dec` (its decode
//! only, of bytes encoded once), `steady` (one encoder, decoding in place),
//! `steady-take` (one encoder reused with `take`) or `allocs` (only the allocations a new
//! value needs: its three vectors, allocated and freed).

use std::hint::black_box;
use std::time::Instant;

use rpcrdma::xdr::{Bytes, Decode, Decoder, Encode, Encoder};
use rpcrdma_specs::v1::{
    Rpcrdma1Body, Rpcrdma1Chunks, Rpcrdma1Msg, Rpcrdma1ReadList, Rpcrdma1ReadSegment,
    Rpcrdma1Segment, Rpcrdma1WriteChunk, Rpcrdma1WriteList,
};

fn header() -> Rpcrdma1Msg {
    let seg = |rdma_handle, rdma_offset| Rpcrdma1Segment {
        rdma_handle,
        rdma_length: 8192,
        rdma_offset,
    };
    let read = |rdma_target| Rpcrdma1ReadList {
        rdma_entry: Rpcrdma1ReadSegment {
            rdma_position: 120,
            rdma_target,
        },
    };
    Rpcrdma1Msg {
        rdma_xid: 0x1234_5678,
        rdma_vers: 1,
        rdma_credit: 128,
        rdma_body: Rpcrdma1Body::RdmaMsg(Rpcrdma1Chunks {
            rdma_reads: vec![
                read(seg(0x1001, 0x7f00_0000_0000)),
                read(seg(0x1002, 0x7f00_0000_2000)),
            ],
            rdma_writes: vec![Rpcrdma1WriteList {
                rdma_entry: Rpcrdma1WriteChunk {
                    rdma_target: vec![seg(0x2001, 0x7f00_1000_0000), seg(0x2002, 0x7f00_1000_2000)],
                },
            }],
            rdma_reply: None,
        }),
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u32 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let mode = args.next().unwrap_or_else(|| "fresh".into());
    let msg = header();
    let mut send = Encoder::with_capacity(4096);
    let mut held = msg.clone();
    // The bytes `dec` decodes, encoded once.
    let wire0 = rpcrdma::xdr::to_bytes(&msg).expect("encodes").to_vec();
    let start = Instant::now();
    for _ in 0..n {
        match mode.as_str() {
            "steady" => {
                black_box(&msg).encode(&mut send).expect("encodes");
                let wire = send.as_contiguous().expect("one buffer");
                held.decode_in_place(&mut Decoder::from_slice(wire))
                    .expect("decodes");
                black_box(&held);
                send.clear();
            }
            "steady-take" => {
                black_box(&msg).encode(&mut send).expect("encodes");
                let wire: Bytes = send.take().into_bytes();
                held.decode_in_place(&mut Decoder::new(&wire))
                    .expect("decodes");
                black_box(&held);
            }
            "allocs" => {
                // The floor under any new value of this header: its three vectors (read
                // list, write list, the write chunk's segments) allocated and freed.
                let reads: Vec<Rpcrdma1ReadList> = Vec::with_capacity(4);
                let writes: Vec<Rpcrdma1WriteList> = Vec::with_capacity(4);
                let segments: Vec<Rpcrdma1Segment> = Vec::with_capacity(2);
                black_box((reads, writes, segments));
            }
            "enc" => {
                black_box(&msg).encode(&mut send).expect("encodes");
                black_box(send.as_contiguous().expect("one buffer"));
                send.clear();
            }
            "dec" => {
                black_box(
                    Rpcrdma1Msg::decode(&mut Decoder::from_slice(black_box(&wire0)))
                        .expect("decodes"),
                );
            }
            "new" => {
                black_box(&msg).encode(&mut send).expect("encodes");
                let wire = send.as_contiguous().expect("one buffer");
                black_box(Rpcrdma1Msg::decode(&mut Decoder::from_slice(wire)).expect("decodes"));
                send.clear();
            }
            _ => {
                let mut enc = Encoder::with_capacity(256);
                black_box(&msg).encode(&mut enc).expect("encodes");
                let wire: Bytes = enc.finish().into_bytes();
                black_box(Rpcrdma1Msg::decode(&mut Decoder::new(&wire)).expect("decodes"));
            }
        }
    }
    let per_pair = start.elapsed().as_secs_f64() * 1e9 / f64::from(n.max(1));
    println!("{mode}: {per_pair:.1} ns per iteration");
}

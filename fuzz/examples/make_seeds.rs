//! Writes the seed corpus of every fuzz target into `fuzz/seeds/<target>/`: small, real
//! messages made by the project's own encoders (headers, FPDUs, startup frames, records),
//! the NFSv3 test vectors with their DDP items moved to chunks, and the project's `.x`
//! files. Deterministic: running it again rewrites the same files.
//!
//!     cargo run --manifest-path fuzz/Cargo.toml --example make_seeds

use std::fs;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use rpcrdma::rdma::soft::negotiate::ReadDepths;
use rpcrdma::rdma::soft::wire::ddp::{Buffer, DdpHeader, QN_READ_REQUEST, QN_SEND, QN_TERMINATE};
use rpcrdma::rdma::soft::wire::mpa::{FpduWriter, Framing};
use rpcrdma::rdma::soft::wire::rdmap::{Opcode, ReadRequest, TermCode, Terminate};
use rpcrdma::rdma::soft::{MpaConfig, RnicKind};
use rpcrdma::rpc::record::RecordWriter;
use rpcrdma::transport::header::{self, Body, Chunks, Header, RdmaError, ReadChunk, Segment};
use rpcrdma::xdr::{Encode, Encoder, ThresholdPolicy};
use rpcrdma_fuzz::cases::{Chunk, Flagged, Nfs3Case};
use rpcrdma_nfs3::nfs3::*;

/// The repository root (this file is `fuzz/examples/make_seeds.rs`).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Writes one seed file.
fn put(target: &str, name: &str, bytes: &[u8]) {
    let dir = repo().join("fuzz/seeds").join(target);
    fs::create_dir_all(&dir).expect("create the seed folder");
    fs::write(dir.join(name), bytes).expect("write a seed");
}

/// Big-endian XDR words.
fn words(ws: &[u32]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_be_bytes()).collect()
}

fn seg(handle: u32, length: u32, offset: u64) -> Segment {
    Segment {
        rdma_handle: handle,
        rdma_length: length,
        rdma_offset: offset,
    }
}

/// A NULL call (RFC 5531, AUTH_NONE): what follows an RDMA_MSG header.
const NULL_CALL: [u32; 10] = [0x1234, 0, 2, 100_003, 3, 0, 0, 0, 0, 0];

fn xdrgen_seeds() {
    const T: &str = "xdrgen_frontend";
    // (file, options: bit 0 lenient, bit 1 services, bit 2 the @ddp mark, bit 3 render the
    // diagnostics): the project's files that fit the target's -max_len of 512 bytes (longer
    // ones run to a few milliseconds each; the snippets below cover what they hold).
    let files: [(&str, u8); 1] = [("xdrgen/tests/torture/lenient.x", 9)];
    for (file, flags) in files {
        let text = fs::read(repo().join(file)).expect("read a .x file");
        let name = Path::new(file).file_name().unwrap().to_str().unwrap();
        put(T, name, &Flagged::compose(flags, &text));
    }
    // Small files, one shape each: the fuzzer's inputs stay short (fast runs) and every
    // stage, generation included, is reached from a seed.
    let snippets: [(&str, u8, &str); 10] = [
        (
            "consts-enums.x",
            0,
            "const NEG = -7;\nconst BIG = 0x1FFFFFFFF;\nconst OCT = 017;\nconst S = \"hi\";\n\
             enum color { RED = 1, GREEN = 2, BLUE = NEG };\n\
             enum implicit { FIRST, SECOND, TENTH = 10, ELEVENTH };\n",
        ),
        (
            "typedefs.x",
            0,
            "const N = 3;\ntypedef opaque fh[4];\ntypedef string name<10>;\n\
             typedef unsigned bare;\ntypedef bool flag;\ntypedef double real;\n\
             typedef name names<N>;\ntypedef fh *maybe;\ntypedef quadruple q;\n",
        ),
        (
            "struct-lists.x",
            0,
            "struct seg { unsigned int len; hyper off; };\n\
             struct rl { seg entry; rl *next; };\n\
             struct tree { int v; tree *left; tree *right; };\n\
             struct holder { rl *reads; rl one; rl pair[2]; seg segs<>; tree *t;\n\
             struct { int a; enum { IN_A = 1 } w; } inner; };\n",
        ),
        (
            "unions.x",
            0,
            "enum kind { A = 1, B = 2, C = 3 };\n\
             union by_enum switch (kind k) { case A: case B: int x; case C: void; };\n\
             union by_int switch (int n) { case -1: float f; case 0: void;\n\
             default: string why<>; };\n\
             union by_bool switch (bool b) { case TRUE: by_int *next; case FALSE: void; };\n",
        ),
        (
            "program.x",
            2,
            "struct args { unsigned hyper off; opaque data<>; };\n\
             union res switch (int status) { case 0: opaque data<>; default: void; };\n\
             program PROG { version V1 { void NULL(void) = 0; res READ(args) = 1;\n\
             int ADD(int, int) = 2; } = 1; version V2 { res READ(args) = 1; } = 2; }\n\
             = 0x20000001;\n",
        ),
        (
            "names.x",
            2,
            "enum Self { SELF = 0, SUPER = 1 };\n\
             struct type { int self; int type; int fn; int crate; int r#x; int _; int 9; };\n\
             program loop { version async { type match(Self) = 1; } = 1; } = 7;\n",
        ),
        (
            "preprocessor.x",
            8,
            "%#include <rpc/types.h>\n#ifdef RPC_HDR\n%extern int x;\n#endif\n\
             #define LIMIT 4\nconst LIM = 4;\ntypedef opaque blob<LIM>;\n",
        ),
        (
            "lenient-quirks.x",
            9,
            "const uint32 LIMIT = 4;\nstruct s { uint32 a; uint64 b; int32 c; };\n\
             union u switch (uint32) { case 1: uint32 x; uint64 y; case 2 void; };\n\
             enum e { X = 1, Y 2 };\nstruct t s2 { int z; };\n",
        ),
        (
            "ddp-marks.x",
            6,
            "struct w { unsigned hyper off; opaque data<> /* @ddp */; };\n\
             struct r { string path<> /* @ddp */; opaque fixed[8]; };\n\
             program P { version V { r GET(w) = 1; } = 1; } = 0x20000002;\n",
        ),
        (
            "errors.x",
            8,
            "const A = B;\nconst B = A;\nstruct dup { int x; int x; };\n\
             typedef opaque too_big[4294967296];\nunion u switch (float f) { case 1: void; };\n\
             struct self_ref { self_ref inner; };\nenum e { X = 1, Y = 1 };\n",
        ),
    ];
    for (name, flags, text) in snippets {
        put(T, name, &Flagged::compose(flags, text.as_bytes()));
    }
    let ddp = "/* RFC 8267 style: a DDP-eligible item marked in place */\n\
               struct write_args { unsigned hyper offset; opaque data<> /* @ddp */; };\n\
               union read_res switch (int status) { case 0: opaque data<>; default: void; };\n\
               program P { version V { read_res READ(write_args) = 1; } = 1; } = 0x20000001;\n";
    put(T, "ddp-program.x", &Flagged::compose(6, ddp.as_bytes()));
}

fn v1_seeds() {
    const T: &str = "v1_header";
    let msg = |name: &str, body: Body, payload: &[u32]| {
        let h = Header::v1(0x1234, 32, body);
        let mut enc = Encoder::new();
        header::encode(&h, &mut enc).expect("encode a header");
        let mut bytes = enc.finish().to_bytes().to_vec();
        bytes.extend_from_slice(&words(payload));
        put(T, name, &bytes);
    };
    msg(
        "msg-inline-null-call",
        Body::Msg(Chunks::default()),
        &NULL_CALL,
    );
    msg(
        "msg-read-chunk",
        Body::Msg(Chunks {
            reads: vec![ReadChunk {
                position: 96,
                segments: vec![seg(7, 4096, 0x1000), seg(8, 100, 0x8000)],
            }],
            ..Chunks::default()
        }),
        &NULL_CALL,
    );
    msg(
        "msg-write-list-reply",
        Body::Msg(Chunks {
            writes: vec![vec![seg(9, 8192, 0)], vec![seg(10, 16, 4), seg(11, 16, 8)]],
            reply: Some(vec![seg(12, 1024, 0)]),
            ..Chunks::default()
        }),
        &NULL_CALL,
    );
    msg(
        "nomsg-position-zero",
        Body::NoMsg(Chunks {
            reads: vec![ReadChunk {
                position: 0,
                segments: vec![seg(3, 200, 0)],
            }],
            reply: Some(vec![seg(4, 4096, 0)]),
            ..Chunks::default()
        }),
        &[],
    );
    msg("done", Body::Done, &[]);
    msg("err-vers", Body::Error(RdmaError::Vers { low: 1, high: 1 }), &[]);
    msg("err-chunk", Body::Error(RdmaError::BadXdr), &[]);
    // A version 2 peer talking to us: ERR_VERS territory.
    put(T, "version-2", &words(&[0x1234, 2, 32, 0, 0, 0, 0]));
    // RDMA_MSGP (RFC 5666): alignment, threshold, then chunk lists.
    put(T, "msgp", &words(&[0x1234, 1, 32, 2, 4096, 1024, 0, 0, 0]));
}

fn v2_seeds() {
    const T: &str = "v2_header";
    // Selector (v2_header.rs): 0 prefix, 1 RDMA2_MSG, 2 RDMA2_NOMSG, 3 RDMA2_ERROR,
    // 4 RDMA2_CONNPROP.
    let v2 = |name: &str, selector: u8, ws: &[u32]| {
        put(T, name, &Flagged::compose(selector, &words(ws)))
    };
    v2("prefix-call", 0, &[0x1234, 2, 32, 0, 0]);
    v2("prefix-response", 0, &[0x1234, 2, 32, 0, 1]);
    // inv_handle, read list (one entry), no write list, reply chunk of one segment, first word.
    v2(
        "msg-read-and-reply",
        1,
        &[
            0, 1, 96, 7, 4096, 0, 0x1000, 0, 0, 1, 1, 9, 1024, 0, 0, 0x1234,
        ],
    );
    // Write list of two chunks, no reply chunk.
    v2(
        "nomsg-write-list",
        2,
        &[
            5, 0, 1, 1, 9, 8192, 0, 0, 1, 2, 10, 16, 0, 4, 11, 16, 0, 8, 0, 0,
        ],
    );
    v2("error-vers", 3, &[1, 2, 2]);
    v2("error-read-chunks", 3, &[4, 8]);
    v2("error-write-resource", 3, &[7, 0, 65536]);
    v2("error-system", 3, &[9]);
    // Two properties: the receive buffer size and reverse-request support.
    v2("connprop", 4, &[2, 1, 4, 4096, 2, 4, 1]);
}

/// Parses a `.hex` test vector of generated-examples/nfs3 (`#` comments, whitespace).
fn hex_vector(name: &str) -> Vec<u8> {
    let path = repo()
        .join("generated-examples/nfs3/tests/vectors")
        .join(name);
    let text = fs::read_to_string(path).expect("read a vector");
    let digits: String = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .flat_map(|l| l.chars().filter(|c| c.is_ascii_hexdigit()))
        .collect();
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).expect("hex digits"))
        .collect()
}

fn nfs3_seeds() {
    const T: &str = "nfs3_chunks";
    // Selectors (nfs3_chunks.rs): 0 WRITE3args, 1 SYMLINK3args, 2 a whole WRITE call,
    // 8 READ3res, 9 READLINK3res.
    for (file, selector) in [
        ("write3args.hex", 0),
        ("symlink3args.hex", 1),
        ("write3_call_msg.hex", 2),
        ("read3res_ok.hex", 8),
        ("read3res_fail.hex", 8),
        ("readlink3res_ok.hex", 9),
    ] {
        let inline = hex_vector(file);
        let case = Nfs3Case {
            selector,
            chunks: Vec::new(),
            inline: &inline,
        };
        put(T, &format!("inline-{file}"), &case.compose());
    }
    // The same items moved to chunks by the generated encoders (everything of 4 bytes and
    // more moves).
    let policy = ThresholdPolicy {
        inline_threshold: 1024,
        min_ddp_size: 4,
    };
    let write = Write3args {
        file: NfsFh3 {
            data: Bytes::from_static(&[0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 1]),
        },
        offset: 4096,
        count: 13,
        stable: StableHow::FileSync,
        data: Bytes::from_static(b"hello, chunks"),
    };
    let mut enc = Encoder::for_call(policy);
    write.encode(&mut enc).expect("encode WRITE3args");
    let (inline, moved) = enc.finish_with_chunks();
    chunked(T, "chunked-write3args", 0, &inline.to_bytes(), &moved, true);

    let read = Read3res::Nfs3Ok(Read3resok {
        file_attributes: PostOpAttr::False,
        count: 6,
        eof: true,
        data: Bytes::from_static(b"abcdef"),
    });
    let mut enc = Encoder::for_reply(policy, vec![4096]);
    read.encode(&mut enc).expect("encode READ3res");
    let (inline, moved) = enc.finish_with_chunks();
    chunked(T, "chunked-read3res", 8, &inline.to_bytes(), &moved, false);
}

/// Writes an NFSv3 case whose DDP items went to chunks.
fn chunked(
    target: &str,
    name: &str,
    selector: u8,
    inline: &[u8],
    moved: &[rpcrdma::xdr::MovedItem],
    call: bool,
) {
    let chunks = moved
        .iter()
        .map(|m| Chunk {
            position: match m.target {
                rpcrdma::xdr::ChunkTarget::Read { position } if call => position,
                _ => 0,
            },
            data: &m.data,
        })
        .collect();
    let case = Nfs3Case {
        selector,
        chunks,
        inline,
    };
    put(target, name, &case.compose());
}

fn iwarp_seeds() {
    const T: &str = "iwarp_frames";
    let untagged = |opcode: Opcode, qn: u32, msn: u32| DdpHeader {
        last: true,
        ddp_version: 1,
        rdmap_version: 1,
        opcode: opcode.into(),
        reserved: 0,
        buffer: Buffer::Untagged {
            rsvd_ulp: 0,
            qn,
            msn,
            mo: 0,
        },
    };
    let rpc_message = {
        let mut enc = Encoder::new();
        header::encode(
            &Header::v1(1, 32, Body::Msg(Chunks::default())),
            &mut enc,
        )
        .expect("encode a header");
        let mut m = enc.finish().to_bytes().to_vec();
        m.extend_from_slice(&words(&NULL_CALL));
        m
    };
    let send = untagged(Opcode::Send, QN_SEND, 1);
    let write = DdpHeader {
        opcode: Opcode::RdmaWrite.into(),
        buffer: Buffer::Tagged {
            stag: 0x100,
            to: 0x2000,
        },
        ..send
    };
    let read_response = DdpHeader {
        opcode: Opcode::ReadResponse.into(),
        ..write
    };
    let read_request = untagged(Opcode::ReadRequest, QN_READ_REQUEST, 1);
    let rr = ReadRequest {
        sink_stag: 0x100,
        sink_to: 0x2000,
        size: 600,
        src_stag: 0x200,
        src_to: 0,
    };
    let rr = rr.to_bytes();
    let terminate = untagged(Opcode::Terminate, QN_TERMINATE, 1);
    let mut term = Vec::new();
    Terminate {
        ddp: Some((64, write.to_bytes()[..write.len()].to_vec())),
        ..Terminate::new(TermCode::DDP_INVALID_STAG)
    }
    .emit(&mut term);
    let payload = vec![0xabu8; 600];
    // (name, FPDUs as (DDP header, payload)); each framed four ways below.
    type Fpdus<'a> = Vec<(DdpHeader, &'a [u8])>;
    let streams: [(&str, Fpdus); 4] = [
        ("send-rpc-message", vec![(send, &rpc_message)]),
        (
            "read-request-and-response",
            vec![(read_request, &rr), (read_response, &payload)],
        ),
        (
            "write-then-send",
            vec![(write, &payload[..100]), (send, &rpc_message)],
        ),
        ("terminate", vec![(terminate, &term)]),
    ];
    for (name, fpdus) in &streams {
        // Options byte (iwarp_frames.rs): bit 0 markers, bit 1 CRC.
        for flags in 0u8..4 {
            let mut writer = FpduWriter::new(Framing {
                markers: flags & 1 != 0,
                crc: flags & 2 != 0,
            });
            let mut out = Vec::new();
            for (ddp, payload) in fpdus {
                writer.write(&[&ddp.to_bytes()[..ddp.len()], payload], &mut out);
            }
            put(
                T,
                &format!("{name}-{flags}"),
                &Flagged::compose(flags, &out),
            );
        }
    }
}

fn mpa_seeds() {
    const T: &str = "mpa_setup";
    let ulp = [0xf6, 0xf6, 0x01, 0x00, 0x00, 0x20, 0x00, 0x10];
    let depths = ReadDepths { ird: 8, ord: 8 };
    // The peers that send the frames, and the options byte of the side that receives them
    // (mpa_setup.rs: bits 0-1 kind, 2 markers, 3 CRC, 4 revision 2, 5 initiator).
    let peers = [
        ("rdmac", RnicKind::Rdmac, 1, 0b0_1000),
        ("ietf-rev1", RnicKind::Ietf, 1, 0b0_1010),
        ("ietf-rev2", RnicKind::IetfPermissive, 2, 0b1_1110),
        (
            "permissive-rev1-markers",
            RnicKind::IetfPermissive,
            1,
            0b0_0110,
        ),
    ];
    for (name, kind, revision, flags) in peers {
        let peer = MpaConfig {
            kind,
            markers: flags & 4 != 0,
            crc: true,
            revision,
        };
        let request = peer.request(&ulp, depths);
        let mut out = Vec::new();
        request.emit(&mut out);
        put(
            T,
            &format!("request-{name}"),
            &Flagged::compose(flags, &out),
        );
        // What this peer answers to a request of ours (we are the initiator: bit 5).
        let ours = MpaConfig {
            kind: RnicKind::IetfPermissive,
            markers: false,
            crc: true,
            revision: 2,
        };
        let (reply, _) = peer.respond(&ours.request(&ulp, depths), &ulp, depths);
        let mut out = Vec::new();
        reply.emit(&mut out);
        put(
            T,
            &format!("reply-{name}"),
            &Flagged::compose(0b11_0010, &out),
        );
        let rejected = peer.reject(&ours.request(&ulp, depths), b"no");
        let mut out = Vec::new();
        rejected.emit(&mut out);
        put(
            T,
            &format!("reject-{name}"),
            &Flagged::compose(0b11_0010, &out),
        );
    }
}

fn record_seeds() {
    const T: &str = "rpc_record";
    let call = Bytes::from(words(&NULL_CALL));
    let framed = |fragment: usize, records: &[Bytes]| {
        let mut writer = RecordWriter::new(fragment);
        let mut parts = Vec::new();
        for r in records {
            writer.frame(std::slice::from_ref(r), &mut parts);
        }
        parts
            .iter()
            .flat_map(|p| p.iter().copied())
            .collect::<Vec<u8>>()
    };
    // Options byte (rpc_record.rs): bits 0-5 piece size - 1, bits 6-7 re-framing size.
    put(
        T,
        "one-call",
        &Flagged::compose(63, &framed(4096, std::slice::from_ref(&call))),
    );
    put(
        T,
        "two-calls-in-fragments",
        &Flagged::compose(0b1000_0011, &framed(12, &[call.clone(), call.clone()])),
    );
    put(
        T,
        "empty-record-then-call",
        &Flagged::compose(0b0100_0000, &framed(4096, &[Bytes::new(), call.clone()])),
    );
    // A zero-length fragment that is not the last, then the call in one last fragment.
    let mut stream = words(&[0]);
    stream.extend_from_slice(&framed(4096, &[call]));
    put(T, "empty-fragment-first", &Flagged::compose(7, &stream));
    // A header announcing more than the bound.
    put(T, "too-large", &Flagged::compose(3, &words(&[0xffff_ffff])));
}

fn main() {
    xdrgen_seeds();
    v1_seeds();
    v2_seeds();
    nfs3_seeds();
    iwarp_seeds();
    mpa_seeds();
    record_seeds();
    println!(
        "seeds written under {}",
        repo().join("fuzz/seeds").display()
    );
}

//! NFSv4.1 COMPOUNDs over RPC-over-RDMA: the generated codec moves the RFC 8267 section 5.1
//! DDP-eligible items to chunks wherever their operation sits in the COMPOUND (seed 002 section
//! 3.5: "An NFSv4 WRITE operation may occur as a middle operation in an NFSv4 COMPOUND"; section
//! 5.1: more than one DDP-eligible item in one COMPOUND).

use bytes::Bytes;
use rpcrdma::xdr::{
    ChunkTarget, Decode, Decoder, Encode, Encoder, MovedItem, ReceivedChunks, ThresholdPolicy,
};
use rpcrdma_nfs4::nfs4::*;

/// The RFC 8166 default inline threshold: items of 1 KiB and more move.
fn policy() -> ThresholdPolicy {
    ThresholdPolicy {
        inline_threshold: 1024,
        min_ddp_size: 1024,
    }
}

/// A policy that moves nothing: the whole XDR stream inline, to compare with.
fn inline_only() -> ThresholdPolicy {
    ThresholdPolicy {
        inline_threshold: u32::MAX as usize,
        min_ddp_size: usize::MAX,
    }
}

fn sequence() -> NfsArgop4 {
    NfsArgop4::OpSequence(Sequence4args {
        sa_sessionid: Sessionid4(Bytes::from_static(&[0x5e; 16])),
        sa_sequenceid: 7,
        sa_slotid: 0,
        sa_highest_slotid: 0,
        sa_cachethis: false,
    })
}

fn putfh() -> NfsArgop4 {
    NfsArgop4::OpPutfh(Putfh4args {
        object: NfsFh4(Bytes::from_static(&[0xfe; 36])),
    })
}

fn write(offset: u64, data: Bytes) -> NfsArgop4 {
    NfsArgop4::OpWrite(Write4args {
        stateid: Stateid4 {
            seqid: 1,
            other: Bytes::from_static(&[0xa1; 12]),
        },
        offset,
        stable: StableHow4::FileSync4,
        data,
    })
}

fn getattr() -> NfsArgop4 {
    NfsArgop4::OpGetattr(Getattr4args {
        attr_request: vec![1 << FATTR4_SIZE | 1 << FATTR4_CHANGE],
    })
}

fn compound(ops: Vec<NfsArgop4>) -> Compound4args {
    Compound4args {
        tag: Bytes::from_static(b"test"),
        minorversion: 1,
        argarray: ops,
    }
}

fn encode_call(args: &Compound4args, policy: ThresholdPolicy) -> (Bytes, Vec<MovedItem>) {
    let mut enc = Encoder::for_call(policy);
    args.encode(&mut enc).unwrap();
    let (inline, moved) = enc.finish_with_chunks();
    (inline.to_bytes(), moved)
}

/// Where `needle` starts in `haystack` (each payload in these tests is a distinct byte pattern).
fn offset_of(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("payload present in the inline-only stream")
}

/// The inline stream of a call whose items moved is the whole XDR stream with each moved item's
/// bytes (and XDR pad) taken out, and each Read chunk's position is where its bytes were (seed
/// 004 section 4.4.3: "the Position field ... the offset in the XDR stream").
fn assert_moved_out(full: &[u8], inline: &[u8], moved: &[MovedItem]) {
    let mut expected = Vec::new();
    let mut cursor = 0;
    for item in moved {
        let ChunkTarget::Read { position } = item.target else {
            panic!("a call moves items to Read chunks, not {:?}", item.target);
        };
        let position = position as usize;
        assert_eq!(
            position,
            offset_of(full, &item.data),
            "position of the item's bytes"
        );
        expected.extend_from_slice(&full[cursor..position]);
        cursor = position + item.data.len().div_ceil(4) * 4;
    }
    expected.extend_from_slice(&full[cursor..]);
    assert_eq!(inline, &expected[..], "inline = full stream minus chunks");
}

fn decode_call(inline: &Bytes, moved: &[MovedItem]) -> Compound4args {
    let chunks = moved.iter().map(|m| {
        let ChunkTarget::Read { position } = m.target else {
            unreachable!()
        };
        (position, m.data.clone())
    });
    let mut dec = Decoder::new(inline);
    dec.set_chunks(ReceivedChunks::for_call(chunks));
    let args = Compound4args::decode(&mut dec).unwrap();
    dec.take_chunks().unwrap().finish().unwrap();
    dec.finish().unwrap();
    args
}

#[test]
fn a_write_in_the_middle_of_a_compound_moves_and_the_stream_resumes_inline() {
    let payload = Bytes::from(vec![0x77; 1 << 20]);
    let args = compound(vec![
        sequence(),
        putfh(),
        write(4096, payload.clone()),
        getattr(),
    ]);
    let (full, none) = encode_call(&args, inline_only());
    assert!(none.is_empty());
    let (inline, moved) = encode_call(&args, policy());

    assert_eq!(moved.len(), 1, "one Read chunk");
    assert_eq!(
        moved[0].data.as_ptr(),
        payload.as_ptr(),
        "the chunk is the caller's buffer, not a copy"
    );
    assert_moved_out(&full, &inline, &moved);
    assert!(
        inline.len() < 300,
        "SEQUENCE, PUTFH, WRITE's header and GETATTR stay inline: {} bytes",
        inline.len()
    );
    assert_eq!(decode_call(&inline, &moved), args);
}

#[test]
fn two_writes_in_one_compound_make_two_read_chunks_at_their_own_positions() {
    let first = Bytes::from(vec![0x11; 5000]);
    let second = Bytes::from(vec![0x22; 70_001]); // odd length: the XDR pad is not in the chunk
    let args = compound(vec![
        sequence(),
        putfh(),
        write(0, first.clone()),
        write(5000, second.clone()),
        getattr(),
    ]);
    let (full, _) = encode_call(&args, inline_only());
    let (inline, moved) = encode_call(&args, policy());
    assert_eq!(moved.len(), 2);
    assert_eq!(moved[0].data, first);
    assert_eq!(moved[1].data, second);
    assert_moved_out(&full, &inline, &moved);
    assert_eq!(decode_call(&inline, &moved), args);
}

#[test]
fn a_small_write_stays_inline() {
    let args = compound(vec![
        sequence(),
        putfh(),
        write(0, Bytes::from_static(b"hello")),
    ]);
    let (inline, moved) = encode_call(&args, policy());
    assert!(moved.is_empty(), "{moved:?}");
    assert_eq!(inline, encode_call(&args, inline_only()).0);
}

#[test]
fn items_that_are_not_ddp_eligible_never_move() {
    // A large tag or attribute request is not DDP-eligible (RFC 8267 section 5.1): only WRITE's
    // data, CREATE's link text, READ's data and READLINK's link text move. A call this large
    // goes as a Long Call, which is the transport's business, not the codec's.
    let mut big_attrs = getattr();
    if let NfsArgop4::OpGetattr(g) = &mut big_attrs {
        g.attr_request = vec![0xffff_ffff; 600];
    }
    let args = Compound4args {
        tag: Bytes::from(vec![b't'; 2000]),
        minorversion: 1,
        argarray: vec![sequence(), putfh(), big_attrs],
    };
    let (inline, moved) = encode_call(&args, policy());
    assert!(moved.is_empty(), "{moved:?}");
    assert_eq!(inline, encode_call(&args, inline_only()).0);
}

#[test]
fn the_link_text_of_a_symlink_create_moves() {
    let target = Bytes::from(vec![b'l'; 3000]);
    let args = compound(vec![
        sequence(),
        putfh(),
        NfsArgop4::OpCreate(Create4args {
            objtype: Createtype4::Nf4lnk(target.clone()),
            objname: Bytes::from_static(b"link"),
            createattrs: Fattr4 {
                attrmask: vec![],
                attr_vals: Bytes::new(),
            },
        }),
    ]);
    let (full, _) = encode_call(&args, inline_only());
    let (inline, moved) = encode_call(&args, policy());
    assert_eq!(moved.len(), 1);
    assert_eq!(moved[0].data, target);
    assert_moved_out(&full, &inline, &moved);
    assert_eq!(decode_call(&inline, &moved), args);
}

fn seq_ok() -> NfsResop4 {
    NfsResop4::OpSequence(Sequence4res::Nfs4Ok(Sequence4resok {
        sr_sessionid: Sessionid4(Bytes::from_static(&[0x5e; 16])),
        sr_sequenceid: 7,
        sr_slotid: 0,
        sr_highest_slotid: 0,
        sr_target_highest_slotid: 0,
        sr_status_flags: 0,
    }))
}

fn putfh_ok() -> NfsResop4 {
    NfsResop4::OpPutfh(Putfh4res {
        status: Nfsstat4::Nfs4Ok,
    })
}

fn read_ok(data: Bytes) -> NfsResop4 {
    NfsResop4::OpRead(Read4res::Nfs4Ok(Read4resok { eof: false, data }))
}

fn reply(status: Nfsstat4, ops: Vec<NfsResop4>) -> Compound4res {
    Compound4res {
        status,
        tag: Bytes::from_static(b"test"),
        resarray: ops,
    }
}

fn encode_reply(res: &Compound4res, write_chunks: Vec<u64>) -> (Bytes, Vec<MovedItem>) {
    let mut enc = Encoder::for_reply(policy(), write_chunks);
    res.encode(&mut enc).unwrap();
    let (inline, moved) = enc.finish_with_chunks();
    (inline.to_bytes(), moved)
}

fn decode_reply(inline: &Bytes, chunks: Vec<Bytes>) -> (Compound4res, Vec<usize>) {
    let mut dec = Decoder::new(inline);
    dec.set_chunks(ReceivedChunks::for_reply(chunks));
    let res = Compound4res::decode(&mut dec).unwrap();
    let usage = dec.take_chunks().unwrap().finish().unwrap();
    dec.finish().unwrap();
    (res, usage.unused_write_chunks)
}

#[test]
fn a_read_reply_places_its_data_in_the_write_chunk_and_the_rest_inline() {
    let data = Bytes::from(vec![0x33; 1 << 20]);
    let res = reply(
        Nfsstat4::Nfs4Ok,
        vec![seq_ok(), putfh_ok(), read_ok(data.clone())],
    );
    let (inline, moved) = encode_reply(&res, vec![1 << 20]);
    assert_eq!(moved.len(), 1);
    assert_eq!(moved[0].target, ChunkTarget::Write { index: 0 });
    assert_eq!(moved[0].data.len(), 1 << 20);
    assert!(inline.len() < 200, "{} bytes inline", inline.len());
    let (back, unused) = decode_reply(&inline, vec![moved[0].data.clone()]);
    assert_eq!(back, res);
    assert!(unused.is_empty());
}

#[test]
fn a_compound_that_stops_before_its_read_leaves_the_write_chunk_unused() {
    // PUTFH failed: the COMPOUND stops there (RFC 5661 section 16.2.3) and the READ has no
    // result. The responder returns the Write chunk unused (seed 004 section 4.4.5.1).
    let res = reply(
        Nfsstat4::Nfs4errStale,
        vec![
            seq_ok(),
            NfsResop4::OpPutfh(Putfh4res {
                status: Nfsstat4::Nfs4errStale,
            }),
        ],
    );
    let (inline, moved) = encode_reply(&res, vec![1 << 20]);
    assert!(moved.is_empty());
    let (back, unused) = decode_reply(&inline, vec![Bytes::new()]);
    assert_eq!(back, res);
    assert_eq!(unused, vec![0]);
}

#[test]
fn two_reads_fill_two_write_chunks_in_order() {
    let a = Bytes::from(vec![0x44; 8192]);
    let b = Bytes::from(vec![0x55; 65_537]);
    let res = reply(
        Nfsstat4::Nfs4Ok,
        vec![seq_ok(), putfh_ok(), read_ok(a.clone()), read_ok(b.clone())],
    );
    let (inline, moved) = encode_reply(&res, vec![1 << 20, 1 << 20]);
    assert_eq!(
        moved.iter().map(|m| m.target).collect::<Vec<_>>(),
        vec![
            ChunkTarget::Write { index: 0 },
            ChunkTarget::Write { index: 1 }
        ]
    );
    assert_eq!(moved[0].data, a);
    assert_eq!(moved[1].data, b);
    let (back, unused) = decode_reply(&inline, vec![a, b]);
    assert_eq!(back, res);
    assert!(unused.is_empty());
}

#[test]
fn a_readlink_result_moves_to_a_write_chunk() {
    let link = Bytes::from(vec![b'p'; 2048]);
    let res = reply(
        Nfsstat4::Nfs4Ok,
        vec![
            seq_ok(),
            putfh_ok(),
            NfsResop4::OpReadlink(Readlink4res::Nfs4Ok(Readlink4resok { link: link.clone() })),
        ],
    );
    let (inline, moved) = encode_reply(&res, vec![4096]);
    assert_eq!(moved.len(), 1);
    assert_eq!(moved[0].data, link);
    assert_eq!(decode_reply(&inline, vec![link]).0, res);
}

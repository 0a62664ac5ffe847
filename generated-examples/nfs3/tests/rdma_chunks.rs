//! NFSv3 over RPC-over-RDMA: the generated codec moves the RFC 8267 DDP-eligible items to
//! chunks (seed 004 section 4.4, seed 002 sections 3.5-3.7).

use bytes::Bytes;
use rpcrdma::xdr::{
    ChunkTarget, Decode, Decoder, Encode, EncodedSize, Encoder, ErrorKind, MovedItem,
    ReceivedChunks, ThresholdPolicy,
};
use rpcrdma_nfs3::nfs3::*;
use rpcrdma_nfs3::rpc_msg::{AuthFlavor, CallBody, OpaqueAuth, RpcMsg, RpcMsgBody};

/// The RFC 8166 default inline threshold; items of 1 KiB and more move.
fn policy() -> ThresholdPolicy {
    ThresholdPolicy {
        inline_threshold: 1024,
        min_ddp_size: 1024,
    }
}

fn call_header(proc: u32) -> RpcMsg {
    let none = OpaqueAuth {
        flavor: AuthFlavor::AuthNone,
        body: Bytes::new(),
    };
    RpcMsg {
        xid: 0x1234_5678,
        body: RpcMsgBody::Call(CallBody {
            rpcvers: 2,
            prog: 100_003,
            vers: 3,
            proc,
            cred: none.clone(),
            verf: none,
        }),
    }
}

fn write_args(data: Bytes) -> Write3args {
    Write3args {
        file: NfsFh3 {
            data: Bytes::from_static(&[0xfe; 32]),
        },
        offset: 1 << 20,
        count: data.len() as u32,
        stable: StableHow::FileSync,
        data,
    }
}

/// Encodes an RPC call message carrying WRITE3args, as a requester would.
fn encode_write_call(args: &Write3args) -> (Bytes, Vec<MovedItem>, usize) {
    let mut enc = Encoder::for_call(policy());
    call_header(7).encode(&mut enc).unwrap();
    args.encode(&mut enc).unwrap();
    let copied = enc.copied_opaque_bytes();
    let (inline, moved) = enc.finish_with_chunks();
    (inline.to_bytes(), moved, copied)
}

fn decode_write_call(inline: Bytes, chunks: ReceivedChunks) -> (RpcMsg, Write3args) {
    let mut dec = Decoder::new(&inline);
    dec.set_chunks(chunks);
    let msg = RpcMsg::decode(&mut dec).unwrap();
    let args = Write3args::decode(&mut dec).unwrap();
    dec.take_chunks().unwrap().finish().unwrap();
    dec.finish().unwrap();
    (msg, args)
}

#[test]
fn a_1mib_write_call_leaves_the_payload_out_of_the_inline_stream() {
    let payload = Bytes::from(vec![0x5a; 1 << 20]);
    let args = write_args(payload.clone());
    let (inline, moved, copied) = encode_write_call(&args);

    // RPC call header: xid, mtype, rpcvers, prog, vers, proc, cred (8), verf (8) = 40 bytes.
    // WRITE3args: fh (4 + 32), offset (8), count (4), stable (4), data length (4) = 56 bytes.
    assert_eq!(inline.len(), 40 + 56, "no payload byte and no pad inline");
    assert_eq!(
        &inline[92..96],
        &(1u32 << 20).to_be_bytes(),
        "the byte count stays inline"
    );
    assert_eq!(moved.len(), 1, "one Read chunk");
    // The Read chunk's Position: the XDR offset of the data from the start of the RPC message.
    assert_eq!(moved[0].target, ChunkTarget::Read { position: 96 });
    assert_eq!(
        moved[0].data.as_ptr(),
        payload.as_ptr(),
        "the chunk is the caller's buffer"
    );
    assert_eq!(
        copied, 32,
        "the encoder copied the file handle, none of the payload"
    );

    let (msg, back) = decode_write_call(inline, ReceivedChunks::for_call([(96, payload)]));
    assert_eq!(msg, call_header(7));
    assert_eq!(back, args);
}

#[test]
fn a_small_write_stays_inline() {
    let args = write_args(Bytes::from_static(b"hello"));
    let (inline, moved, _) = encode_write_call(&args);
    assert!(moved.is_empty());
    assert_eq!(inline.len(), 96 + 8);
    assert_eq!(decode_write_call(inline, ReceivedChunks::default()).1, args);
}

fn read_ok(data: Bytes) -> Read3res {
    Read3res::Nfs3Ok(Read3resok {
        file_attributes: PostOpAttr::False,
        count: data.len() as u32,
        eof: true,
        data,
    })
}

/// A responder encodes a READ reply into the Write chunk the requester provided.
fn encode_read_reply(res: &Read3res, write_chunk: u64) -> (Bytes, Vec<MovedItem>) {
    let mut enc = Encoder::for_reply(policy(), vec![write_chunk]);
    res.encode(&mut enc).unwrap();
    let (inline, moved) = enc.finish_with_chunks();
    (inline.to_bytes(), moved)
}

#[test]
fn a_read_reply_places_its_data_in_the_provided_write_chunk() {
    let data = Bytes::from(vec![7u8; 300_000]);
    let res = read_ok(data.clone());
    let (inline, moved) = encode_read_reply(&res, 1 << 20);
    // status, post_op_attr flag, count, eof, data length: 20 bytes inline.
    assert_eq!(inline.len(), 20);
    assert_eq!(moved.len(), 1);
    assert_eq!(moved[0].target, ChunkTarget::Write { index: 0 });
    // The actual length the responder reports in the reply's Write list.
    assert_eq!(moved[0].data.len(), 300_000);

    let mut dec = Decoder::new(&inline);
    dec.set_chunks(ReceivedChunks::for_reply([moved[0].data.clone()]));
    assert_eq!(Read3res::decode(&mut dec).unwrap(), res);
    let usage = dec.take_chunks().unwrap().finish().unwrap();
    assert!(usage.unused_write_chunks.is_empty());
}

#[test]
fn a_failed_read_leaves_the_write_chunk_unused() {
    let res = Read3res::Default {
        discriminant: Nfsstat3::Nfs3errIo,
        value: Read3resfail {
            file_attributes: PostOpAttr::False,
        },
    };
    let (inline, moved) = encode_read_reply(&res, 1 << 20);
    assert!(moved.is_empty(), "no result to write");
    assert_eq!(inline.len(), 8);
    // The responder returns the chunk with every segment length zero (seed 004 4.4.5.1).
    let mut dec = Decoder::new(&inline);
    dec.set_chunks(ReceivedChunks::for_reply([Bytes::new()]));
    assert_eq!(Read3res::decode(&mut dec).unwrap(), res);
    let usage = dec.take_chunks().unwrap().finish().unwrap();
    assert_eq!(usage.unused_write_chunks, vec![0]);
}

#[test]
fn odd_lengths_round_trip_with_and_without_pad_bytes() {
    for len in [4097usize, 4098, 4099, 4100] {
        let payload = Bytes::from((0..len).map(|i| (i % 251) as u8).collect::<Vec<_>>());
        let padded = {
            let mut v = payload.to_vec();
            v.resize(len.div_ceil(4) * 4, 0);
            Bytes::from(v)
        };
        // Call: Read chunk with and without round-up (seed 004 section 4.4.4.1).
        let args = write_args(payload.clone());
        let (inline, moved, _) = encode_write_call(&args);
        assert_eq!(inline.len() % 4, 0);
        let ChunkTarget::Read { position } = moved[0].target else {
            panic!()
        };
        for chunk in [payload.clone(), padded.clone()] {
            let (_, back) = decode_write_call(
                inline.clone(),
                ReceivedChunks::for_call([(position, chunk)]),
            );
            assert_eq!(back.data, payload, "len {len}");
        }
        // Reply: Write chunk with and without round-up (section 4.4.5.2).
        let res = read_ok(payload.clone());
        let (inline, _) = encode_read_reply(&res, 8192);
        for chunk in [payload.clone(), padded.clone()] {
            let mut dec = Decoder::new(&inline);
            dec.set_chunks(ReceivedChunks::for_reply([chunk]));
            assert_eq!(Read3res::decode(&mut dec).unwrap(), res, "len {len}");
        }
    }
}

#[test]
fn a_chunk_that_disagrees_with_the_inline_count_is_a_chunk_error() {
    let payload = Bytes::from(vec![1u8; 8192]);
    let (inline, _, _) = encode_write_call(&write_args(payload.clone()));
    let mut dec = Decoder::new(&inline);
    dec.set_chunks(ReceivedChunks::for_call([(96, payload.slice(..8000))]));
    RpcMsg::decode(&mut dec).unwrap();
    let err = Write3args::decode(&mut dec).unwrap_err();
    assert!(err.kind().is_chunk_error(), "{err}");
    assert!(matches!(
        err.kind(),
        ErrorKind::ChunkLengthMismatch {
            inline_count: 8192,
            chunk_len: 8000
        }
    ));
}

#[test]
fn readlink_and_symlink_paths_move_too() {
    let path = Nfspath3::from(String::from_utf8(vec![b'p'; 2000]).unwrap());
    let res = Readlink3res::Nfs3Ok(Readlink3resok {
        symlink_attributes: PostOpAttr::False,
        data: path.clone(),
    });
    let mut enc = Encoder::for_reply(policy(), vec![4096]);
    res.encode(&mut enc).unwrap();
    let (_, moved) = enc.finish_with_chunks();
    assert_eq!(moved.len(), 1);
    assert_eq!(moved[0].data, path.as_bytes_ref().clone());
}

#[test]
fn maximum_inline_sizes_let_a_requester_decide_on_a_reply_chunk() {
    // READ3res is unbounded inline (data<> has no maximum) but bounded once the data moves.
    assert_eq!(Read3res::MAX_LEN, None);
    let inline = Read3res::MAX_INLINE_LEN.expect("bounded with the data in a Write chunk");
    // status + post_op_attr (4 + fattr3 84) + count + eof + data length
    assert_eq!(inline, 4 + 4 + 84 + 4 + 4 + 4);
    // GETATTR's reply has no DDP-eligible item: both bounds agree.
    assert_eq!(Getattr3res::MAX_LEN, Getattr3res::MAX_INLINE_LEN);
    assert!(Getattr3res::MAX_LEN.is_some());
}

/// The same WRITE3args written by hand with `#[derive(Xdr, DdpEligible)]`.
mod hand_written {
    use bytes::Bytes;
    use rpcrdma::{DdpEligible, Xdr};

    #[derive(Debug, Clone, PartialEq, Xdr, DdpEligible)]
    pub struct Write3Args {
        #[xdr(max = 64)]
        pub file: Bytes,
        pub offset: u64,
        pub count: u32,
        pub stable: i32,
        #[xdr(ddp)]
        pub data: Bytes,
    }
}

#[test]
fn hand_written_and_generated_types_give_identical_bytes_and_chunks() {
    for len in [3usize, 1000, 5000, 1 << 20] {
        let payload = Bytes::from(vec![9u8; len]);
        let generated = write_args(payload.clone());
        let hand = hand_written::Write3Args {
            file: generated.file.data.clone(),
            offset: generated.offset,
            count: generated.count,
            stable: generated.stable as i32,
            data: payload,
        };
        let encode = |v: &dyn Fn(&mut Encoder)| {
            let mut enc = Encoder::for_call(policy());
            enc.set_base_offset(40);
            v(&mut enc);
            let (inline, moved) = enc.finish_with_chunks();
            (inline.to_bytes(), moved)
        };
        let a = encode(&|e| generated.encode(e).unwrap());
        let b = encode(&|e| hand.encode(e).unwrap());
        assert_eq!(a, b, "len {len}");
    }
}

//! Chunk-aware encoding and decoding of DDP-eligible items (seed 004 section 4.4,
//! seed 002 sections 3.5-3.7), at the codec level.

use bytes::Bytes;
use rpcrdma::xdr::{ChunkTarget, Decoder, Encoder, ErrorKind, ReceivedChunks, ThresholdPolicy};

fn policy() -> ThresholdPolicy {
    ThresholdPolicy {
        inline_threshold: 1024,
        min_ddp_size: 16,
    }
}

/// Encodes `u32 a; opaque data<>; u32 b;` as a call with chunking.
fn encode_call(data: &Bytes, base: usize) -> (Bytes, Vec<rpcrdma::xdr::MovedItem>) {
    let mut enc = Encoder::for_call(policy());
    enc.set_base_offset(base);
    enc.put_u32(0xaaaa_aaaa);
    enc.put_ddp_opaque(data, None).unwrap();
    enc.put_u32(0xbbbb_bbbb);
    let (inline, moved) = enc.finish_with_chunks();
    (inline.to_bytes(), moved)
}

fn decode_call(inline: Bytes, base: usize, chunks: ReceivedChunks) -> (u32, Bytes, u32) {
    let mut dec = Decoder::new(&inline);
    dec.set_base_offset(base);
    dec.set_chunks(chunks);
    let a = dec.get_u32().unwrap();
    let data = dec.get_ddp_opaque(None).unwrap();
    let b = dec.get_u32().unwrap();
    dec.take_chunks().unwrap().finish().unwrap();
    dec.finish().unwrap();
    (a, data, b)
}

#[test]
fn a_moved_item_leaves_its_count_inline_and_its_bytes_in_a_read_chunk() {
    let data = Bytes::from(vec![7u8; 4096]);
    let (inline, moved) = encode_call(&data, 40);
    // count stays inline; no bytes, no pad (seed 004 section 4.4.3.1, 4.4.4.1)
    assert_eq!(
        &inline[..],
        &[0xaa, 0xaa, 0xaa, 0xaa, 0, 0, 0x10, 0, 0xbb, 0xbb, 0xbb, 0xbb]
    );
    assert_eq!(moved.len(), 1);
    // Position: XDR offset from the start of the RPC message, a multiple of four.
    assert_eq!(moved[0].target, ChunkTarget::Read { position: 40 + 8 });
    assert_eq!(
        moved[0].data.as_ptr(),
        data.as_ptr(),
        "chunk data is the caller's buffer"
    );
    let (a, back, b) = decode_call(
        inline,
        40,
        ReceivedChunks::for_call([(48, moved[0].data.clone())]),
    );
    assert_eq!((a, b), (0xaaaa_aaaa, 0xbbbb_bbbb));
    assert_eq!(back, data);
}

#[test]
fn small_items_stay_inline() {
    let data = Bytes::from_static(b"tiny");
    let (inline, moved) = encode_call(&data, 0);
    assert!(moved.is_empty());
    assert_eq!(inline.len(), 16);
    let (_, back, _) = decode_call(inline, 0, ReceivedChunks::default());
    assert_eq!(back, data);
}

#[test]
fn odd_lengths_round_trip_with_and_without_pad_in_the_chunk() {
    for len in [17usize, 18, 19, 20, 4097] {
        let data = Bytes::from((0..len).map(|i| i as u8).collect::<Vec<_>>());
        let (inline, moved) = encode_call(&data, 0);
        // Items after a chunk stay 4-byte aligned in the inline stream (seed 002 section 3.5).
        assert_eq!(inline.len(), 12);
        let position = match moved[0].target {
            ChunkTarget::Read { position } => position,
            other => panic!("{other:?}"),
        };
        assert_eq!(position % 4, 0);
        let without_pad = moved[0].data.clone();
        let mut with_pad = without_pad.to_vec();
        with_pad.resize(len.div_ceil(4) * 4, 0);
        for chunk in [without_pad, Bytes::from(with_pad)] {
            let (_, back, b) = decode_call(
                inline.clone(),
                0,
                ReceivedChunks::for_call([(position, chunk)]),
            );
            assert_eq!(back, data);
            assert_eq!(b, 0xbbbb_bbbb);
        }
    }
}

#[test]
fn a_second_chunk_position_counts_the_first_chunks_reinserted_bytes() {
    let one = Bytes::from(vec![1u8; 101]);
    let two = Bytes::from(vec![2u8; 200]);
    let mut enc = Encoder::for_call(policy());
    enc.put_ddp_opaque(&one, None).unwrap();
    enc.put_u32(5);
    enc.put_ddp_opaque(&two, None).unwrap();
    let (inline, moved) = enc.finish_with_chunks();
    // The reconstructed stream: len(4) one(101+3) 5(4) len(4) two; positions are offsets in it.
    assert_eq!(moved[0].target, ChunkTarget::Read { position: 4 });
    assert_eq!(
        moved[1].target,
        ChunkTarget::Read {
            position: 4 + 104 + 4 + 4
        }
    );
    let chunks = ReceivedChunks::for_call([(4, one.clone()), (116, two.clone())]);
    let inline = inline.to_bytes();
    let mut dec = Decoder::new(&inline);
    dec.set_chunks(chunks);
    assert_eq!(dec.get_ddp_opaque(None).unwrap(), one);
    assert_eq!(dec.get_u32().unwrap(), 5);
    assert_eq!(dec.get_ddp_opaque(None).unwrap(), two);
    dec.take_chunks().unwrap().finish().unwrap();
}

#[test]
fn rejects_a_chunk_whose_length_disagrees_with_the_inline_count() {
    let data = Bytes::from(vec![7u8; 100]);
    let (inline, _) = encode_call(&data, 0);
    let short = ReceivedChunks::for_call([(8, data.slice(..96))]);
    let mut dec = Decoder::new(&inline);
    dec.set_chunks(short);
    dec.get_u32().unwrap();
    let err = dec.get_ddp_opaque(None).unwrap_err();
    assert!(matches!(
        err.kind(),
        ErrorKind::ChunkLengthMismatch {
            inline_count: 100,
            chunk_len: 96
        }
    ));
    assert!(err.kind().is_chunk_error());
}

#[test]
fn rejects_read_chunks_that_match_no_item_or_are_misaligned() {
    let (inline, _) = encode_call(&Bytes::from_static(b"tiny"), 0);
    for (pos, want_misaligned) in [(24u32, false), (6, true)] {
        let mut dec = Decoder::new(&inline);
        dec.set_chunks(ReceivedChunks::for_call([(pos, Bytes::from_static(b"zz"))]));
        dec.get_u32().unwrap();
        dec.get_ddp_opaque(None).unwrap();
        dec.get_u32().unwrap();
        let err = dec.take_chunks().unwrap().finish().unwrap_err();
        assert!(err.kind().is_chunk_error());
        assert_eq!(
            matches!(err.kind(), ErrorKind::MisalignedReadChunk { .. }),
            want_misaligned
        );
    }
}

#[test]
fn replies_fill_write_chunks_in_order_and_report_unused_ones() {
    let data = Bytes::from(vec![3u8; 10]);
    let mut enc = Encoder::for_reply(policy(), vec![4096, 4096]);
    enc.put_u32(0);
    enc.put_ddp_opaque(&data, None).unwrap();
    let (inline, moved) = enc.finish_with_chunks();
    assert_eq!(moved.len(), 1);
    assert_eq!(moved[0].target, ChunkTarget::Write { index: 0 });
    assert_eq!(inline.len(), 8);

    // The requester gets back the first chunk with its data and the second unused (length 0).
    let chunks = ReceivedChunks::for_reply([data.clone(), Bytes::new()]);
    let inline = inline.to_bytes();
    let mut dec = Decoder::new(&inline);
    dec.set_chunks(chunks);
    dec.get_u32().unwrap();
    assert_eq!(dec.get_ddp_opaque(None).unwrap(), data);
    let usage = dec.take_chunks().unwrap().finish().unwrap();
    assert_eq!(usage.unused_write_chunks, vec![1]);
}

#[test]
fn reply_items_larger_than_their_write_chunk_are_refused() {
    let mut enc = Encoder::for_reply(policy(), vec![8]);
    let err = enc
        .put_ddp_opaque(&Bytes::from(vec![0u8; 9]), None)
        .unwrap_err();
    assert!(matches!(
        err.kind(),
        ErrorKind::WriteChunkTooSmall {
            index: 0,
            needed: 9,
            capacity: 8
        }
    ));
}

#[test]
fn arrays_move_whole_elements_and_keep_the_count_inline() {
    let items: Vec<u64> = (0..100).collect();
    let mut enc = Encoder::for_call(policy());
    enc.put_ddp_array(&items, Some(1000)).unwrap();
    let (inline, moved) = enc.finish_with_chunks();
    assert_eq!(&inline.to_bytes()[..], &[0, 0, 0, 100]);
    assert_eq!(moved[0].data.len(), 800);
    let inline = inline.to_bytes();
    let mut dec = Decoder::new(&inline);
    dec.set_chunks(ReceivedChunks::for_call([(4, moved[0].data.clone())]));
    assert_eq!(dec.get_ddp_array::<u64>(Some(1000)).unwrap(), items);
}

#[test]
fn without_chunking_ddp_items_encode_as_plain_xdr() {
    let data = Bytes::from(vec![9u8; 5000]);
    let mut plain = Encoder::new();
    plain.put_opaque(&data, None).unwrap();
    let mut ddp = Encoder::new();
    ddp.put_ddp_opaque(&data, None).unwrap();
    assert_eq!(plain.finish().to_bytes(), ddp.finish().to_bytes());
}

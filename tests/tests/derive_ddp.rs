//! `#[xdr(ddp)]` fields of derived types move to chunks exactly as the codec core moves them.

use bytes::Bytes;
use rpcrdma::xdr::{
    self, ChunkTarget, DdpEligible, Decode, Decoder, Encode, Encoder, ReceivedChunks,
    ThresholdPolicy, XdrString,
};
use rpcrdma::{DdpEligible, Xdr};

/// NFSv3 WRITE3args as a user would write it by hand (RFC 1813 section 3.3.7).
#[derive(Debug, Clone, PartialEq, Xdr, DdpEligible)]
struct Write3Args {
    #[xdr(max = 64)]
    file: Bytes,
    offset: u64,
    count: u32,
    stable: i32,
    #[xdr(ddp)]
    data: Bytes,
}

#[derive(Debug, Clone, PartialEq, Xdr, DdpEligible)]
struct Symlink {
    #[xdr(ddp, max = 1024)]
    path: XdrString,
    #[xdr(ddp)]
    extra: Option<Bytes>,
    tail: u32,
}

fn policy() -> ThresholdPolicy {
    ThresholdPolicy {
        inline_threshold: 1024,
        min_ddp_size: 8,
    }
}

#[test]
fn derived_ddp_field_moves_to_a_read_chunk_at_its_xdr_position() {
    let payload = Bytes::from(vec![0xabu8; 1 << 20]);
    let args = Write3Args {
        file: Bytes::from_static(&[1; 32]),
        offset: 4096,
        count: 1 << 20,
        stable: 2,
        data: payload.clone(),
    };
    assert_eq!(Write3Args::DDP_FIELDS, &["data"]);

    let mut enc = Encoder::for_call(policy());
    enc.set_base_offset(100);
    args.encode(&mut enc).unwrap();
    assert_eq!(
        enc.copied_opaque_bytes(),
        32,
        "only the file handle is copied"
    );
    let (inline, moved) = enc.finish_with_chunks();
    // file(4+32) offset(8) count(4) stable(4) data-count(4): no payload inline.
    assert_eq!(inline.len(), 56);
    assert_eq!(moved.len(), 1);
    assert_eq!(moved[0].target, ChunkTarget::Read { position: 156 });
    assert_eq!(moved[0].data.as_ptr(), payload.as_ptr());

    let inline = inline.to_bytes();
    let mut dec = Decoder::new(&inline);
    dec.set_base_offset(100);
    dec.set_chunks(ReceivedChunks::for_call([(156, payload.clone())]));
    let back = Write3Args::decode(&mut dec).unwrap();
    dec.take_chunks().unwrap().finish().unwrap();
    assert_eq!(back, args);
}

#[test]
fn without_a_chunking_policy_derived_ddp_fields_are_plain_xdr() {
    let args = Symlink {
        path: XdrString::from("a/long/enough/path"),
        extra: Some(Bytes::from_static(b"0123456789")),
        tail: 7,
    };
    let wire = xdr::to_bytes(&args).unwrap();
    assert_eq!(wire.len(), 4 + 20 + 4 + 4 + 12 + 4);
    assert_eq!(xdr::from_bytes::<Symlink>(wire).unwrap(), args);
}

#[test]
fn optional_ddp_data_keeps_its_present_flag_inline() {
    let args = Symlink {
        path: XdrString::from("short"),
        extra: Some(Bytes::from_static(b"0123456789")),
        tail: 7,
    };
    let mut enc = Encoder::for_reply(policy(), vec![64, 64]);
    args.encode(&mut enc).unwrap();
    let (inline, moved) = enc.finish_with_chunks();
    // path count, present flag, extra count, tail: 16 bytes inline; both items in Write chunks.
    assert_eq!(inline.len(), 16);
    assert_eq!(
        moved.iter().map(|m| m.target).collect::<Vec<_>>(),
        [
            ChunkTarget::Write { index: 0 },
            ChunkTarget::Write { index: 1 }
        ]
    );
    let inline = inline.to_bytes();
    let mut dec = Decoder::new(&inline);
    dec.set_chunks(ReceivedChunks::for_reply(
        moved.iter().map(|m| m.data.clone()),
    ));
    assert_eq!(Symlink::decode(&mut dec).unwrap(), args);
}

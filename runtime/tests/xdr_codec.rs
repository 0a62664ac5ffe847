//! The codec core: known encodings, zero copy, bounds, and hostile input.

use bytes::Bytes;
use proptest::prelude::*;
use rpcrdma::xdr::{
    self, decode_array, decode_list, encode_array, encode_list, Decode, Decoder, Encode, Encoder,
    ErrorKind, Limits, XdrString,
};

#[test]
fn encodes_rfc4506_primitives() {
    let wire = xdr::to_bytes(&(-1i32, 0x0102_0304_0506_0708u64, true)).unwrap();
    assert_eq!(
        &wire[..],
        &[0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 1]
    );
}

/// RFC 4506 section 7: the encoding of the "file" example, the string parts.
#[test]
fn encodes_strings_with_length_and_padding() {
    let wire = xdr::to_bytes(&XdrString::from("sillyprog")).unwrap();
    assert_eq!(&wire[..4], &[0, 0, 0, 9]);
    assert_eq!(&wire[4..13], b"sillyprog");
    assert_eq!(&wire[13..], &[0, 0, 0]);
}

#[test]
fn decoding_a_large_opaque_copies_none_of_it() {
    let payload = vec![0x5au8; 1 << 20];
    let mut enc = Encoder::new();
    enc.put_u32(7);
    enc.put_opaque(&Bytes::from(payload), None).unwrap();
    let wire = enc.finish().to_bytes();

    let mut dec = Decoder::new(&wire);
    assert_eq!(dec.get_u32().unwrap(), 7);
    let data = dec.get_opaque(None).unwrap();
    dec.finish().unwrap();

    let input = wire.as_ptr_range();
    let out = data.as_ptr_range();
    assert_eq!(data.len(), 1 << 20);
    assert!(
        input.start <= out.start && out.end <= input.end,
        "decoded slice points into the input"
    );
    assert_eq!(out.start as usize - input.start as usize, 8);
}

#[test]
fn decoding_from_a_plain_slice_copies_opaque_data_out() {
    let v = (7u32, Bytes::from_static(b"hello"), XdrString::from("xdr"));
    let wire = xdr::to_bytes(&v).unwrap();
    let mut dec = Decoder::from_slice(&wire);
    let back = <(u32, Bytes, XdrString)>::decode(&mut dec).unwrap();
    dec.finish().unwrap();
    assert_eq!(back, v);
    // Equal, but not a view of the input: the slice has no owner to share.
    let range = wire.as_ptr_range();
    assert!(!range.contains(&back.1.as_ptr()));
    // Over the `Bytes` itself, the same item is a view of the input.
    let shared = <(u32, Bytes, XdrString)>::decode(&mut Decoder::new(&wire)).unwrap();
    assert!(range.contains(&shared.1.as_ptr()));
}

#[test]
fn a_cleared_encoder_writes_the_next_message_from_the_start() {
    let mut enc = Encoder::with_capacity(64);
    1u32.encode(&mut enc).unwrap();
    assert_eq!(enc.as_contiguous(), Some(&[0, 0, 0, 1][..]));
    let buf = enc.as_contiguous().unwrap().as_ptr();
    enc.clear();
    assert!(enc.is_empty());
    2u32.encode(&mut enc).unwrap();
    assert_eq!(enc.as_contiguous(), Some(&[0, 0, 0, 2][..]));
    assert_eq!(
        enc.as_contiguous().unwrap().as_ptr(),
        buf,
        "the buffer is reused"
    );
    // Gathered parts are not contiguous.
    enc.put_opaque(&Bytes::from(vec![9; xdr::DEFAULT_GATHER_THRESHOLD]), None)
        .unwrap();
    assert_eq!(enc.as_contiguous(), None);
    enc.clear();
    assert_eq!(enc.as_contiguous(), Some(&[][..]));
}

#[test]
fn encoding_a_large_opaque_gathers_it_by_reference() {
    let payload = Bytes::from(vec![1u8; 64 * 1024 + 3]);
    let mut enc = Encoder::new();
    enc.put_u32(1);
    enc.put_opaque(&payload, None).unwrap();
    enc.put_u32(2);
    assert_eq!(enc.copied_opaque_bytes(), 0);
    let out = enc.finish();
    assert_eq!(out.parts().len(), 3);
    assert_eq!(
        out.parts()[1].as_ptr(),
        payload.as_ptr(),
        "payload part is the caller's buffer"
    );
    assert_eq!(out.len(), 4 + 4 + payload.len() + 1 + 4);
    let whole = out.to_bytes();
    let mut dec = Decoder::new(&whole);
    assert_eq!(dec.get_u32().unwrap(), 1);
    assert_eq!(dec.get_opaque(None).unwrap(), payload);
    assert_eq!(dec.get_u32().unwrap(), 2);
}

#[test]
fn rejects_values_over_declared_maximum_on_encode_and_decode() {
    let mut enc = Encoder::new();
    let err = enc
        .put_opaque(&Bytes::from_static(b"12345"), Some(4))
        .unwrap_err();
    assert!(matches!(
        err.kind(),
        ErrorKind::ExceedsDeclaredMaximum {
            length: 5,
            maximum: 4
        }
    ));
    let err = encode_array(&mut enc, &[1u32, 2, 3], Some(2)).unwrap_err();
    assert!(matches!(
        err.kind(),
        ErrorKind::ExceedsDeclaredMaximum { .. }
    ));

    let wire = xdr::to_bytes(&Bytes::from_static(b"12345")).unwrap();
    let err = Decoder::new(&wire).get_opaque(Some(4)).unwrap_err();
    assert!(matches!(
        err.kind(),
        ErrorKind::ExceedsDeclaredMaximum { .. }
    ));
    assert_eq!(err.offset(), 0);
}

#[test]
fn rejects_fixed_opaque_of_wrong_length() {
    let mut enc = Encoder::new();
    let err = enc
        .put_fixed_opaque(&Bytes::from_static(b"abc"), 4)
        .unwrap_err();
    assert!(matches!(
        err.kind(),
        ErrorKind::WrongFixedLength {
            expected: 4,
            actual: 3
        }
    ));
}

#[test]
fn rejects_counts_the_input_cannot_hold_before_allocating() {
    let wire = Bytes::from_static(&[0xff, 0xff, 0xff, 0xf0, 0, 0, 0, 1]);
    let err = decode_array::<u32>(&mut Decoder::new(&wire), None).unwrap_err();
    assert!(matches!(
        err.kind(),
        ErrorKind::LimitExceeded { .. } | ErrorKind::CountExceedsInput { .. }
    ));
}

#[test]
fn rejects_invalid_booleans_and_trailing_bytes() {
    let err = xdr::from_bytes::<bool>(Bytes::from_static(&[0, 0, 0, 2])).unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::InvalidBool(2));
    let err = xdr::from_bytes::<u32>(Bytes::from_static(&[0, 0, 0, 2, 0, 0, 0, 0])).unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::TrailingBytes(4));
    assert_eq!(err.offset(), 4);
}

#[test]
fn rejects_every_truncation() {
    let value = (7u32, XdrString::from("abcde"), vec![1u64, 2, 3], Some(9i32));
    let wire = xdr::to_bytes(&value).unwrap();
    for cut in 0..wire.len() {
        let r = xdr::from_bytes::<(u32, XdrString, Vec<u64>, Option<i32>)>(wire.slice(..cut));
        assert!(r.is_err(), "prefix of {cut} bytes decoded");
    }
    assert_eq!(
        xdr::from_bytes::<(u32, XdrString, Vec<u64>, Option<i32>)>(wire).unwrap(),
        value
    );
}

#[test]
fn rejects_non_zero_padding_by_default_and_accepts_it_when_asked() {
    // RFC 4506 section 4.10: one byte of data, then three residual zero bytes.
    let zero = Bytes::from_static(&[0, 0, 0, 1, b'x', 0, 0, 0]);
    assert!(Decoder::new(&zero).get_opaque(None).is_ok());
    let wire = Bytes::from_static(&[0, 0, 0, 1, b'x', 1, 0, 0]);
    assert!(Limits::default().strict_padding);
    let err = Decoder::new(&wire).get_opaque(None).unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::NonZeroPadding);
    assert_eq!(err.offset(), 5);
    assert!(err.to_string().contains("Limits::strict_padding"), "{err}");
    // Fixed-length opaque data and strings are held to the same rule; the offset is where
    // the padding starts.
    let fixed = Bytes::from_static(&[b'a', b'b', 0, 7]);
    let err = Decoder::new(&fixed).get_fixed_opaque(2).unwrap_err();
    assert_eq!((err.kind(), err.offset()), (&ErrorKind::NonZeroPadding, 2));
    let err = xdr::from_bytes::<XdrString>(wire.clone()).unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::NonZeroPadding);
    let lax = Limits {
        strict_padding: false,
        ..Limits::default()
    };
    let data = Decoder::with_limits(&wire, lax)
        .unwrap()
        .get_opaque(None)
        .unwrap();
    assert_eq!(&data[..], b"x");
}

#[test]
fn default_depth_is_500_levels_of_boxes() {
    #[derive(Debug)]
    #[allow(dead_code)] // the chain is only decoded, never inspected
    struct Node(Option<Box<Node>>);
    impl Decode for Node {
        fn decode(dec: &mut Decoder) -> xdr::Result<Self> {
            Option::<Box<Node>>::decode(dec).map(Node)
        }
    }
    assert_eq!(Limits::default().max_depth, 500);
    // 500 present flags and the final absent one: each Box is a level.
    let chain = |boxes: usize| {
        let mut w = [0, 0, 0, 1].repeat(boxes);
        w.extend_from_slice(&[0, 0, 0, 0]);
        Bytes::from(w)
    };
    let decoded = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            (
                xdr::from_bytes::<Node>(chain(500)).is_ok(),
                xdr::from_bytes::<Node>(chain(501)).map(|_| ()),
            )
        })
        .unwrap()
        .join()
        .unwrap();
    assert!(decoded.0, "500 levels decode");
    let err = decoded.1.unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::TooDeep { maximum: 500 });
    assert!(err.to_string().contains("Limits::max_depth"), "{err}");
}

#[test]
fn recursion_depth_is_bounded() {
    // Option<Box<..>> nests; a chain of present flags deeper than max_depth must stop.
    #[derive(Debug)]
    #[allow(dead_code)] // the chain is only decoded, never inspected
    struct Node(Option<Box<Node>>);
    impl Decode for Node {
        fn decode(dec: &mut Decoder) -> xdr::Result<Self> {
            Option::<Box<Node>>::decode(dec).map(Node)
        }
    }
    let wire = Bytes::from([0, 0, 0, 1].repeat(10_000));
    let limits = Limits {
        max_depth: 100,
        ..Limits::default()
    };
    let err = xdr::from_bytes_with_limits::<Node>(wire, limits).unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::TooDeep { maximum: 100 });
}

/// A linked-list element as generated for `struct L { unsigned x; L *next; }`.
#[derive(Debug, Clone, PartialEq)]
struct Entry(u32);
impl Encode for Entry {
    fn encode(&self, enc: &mut Encoder) -> xdr::Result<()> {
        self.0.encode(enc)
    }
}
impl Decode for Entry {
    fn decode(dec: &mut Decoder) -> xdr::Result<Self> {
        u32::decode(dec).map(Entry)
    }
}

#[test]
fn a_million_entry_linked_list_round_trips_iteratively() {
    let items: Vec<Entry> = (0..1_000_000).map(Entry).collect();
    let mut enc = Encoder::with_capacity(8 << 20);
    encode_list(&mut enc, &items).unwrap();
    let wire = enc.finish().to_bytes();
    assert_eq!(wire.len(), 8 * 1_000_000 + 4);
    let limits = Limits {
        max_elements: 2_000_000,
        ..Limits::default()
    };
    let mut dec = Decoder::with_limits(&wire, limits).unwrap();
    let back: Vec<Entry> = decode_list(&mut dec).unwrap();
    dec.finish().unwrap();
    assert_eq!(back, items);
}

#[test]
fn linked_list_length_is_bounded_by_limits() {
    let items: Vec<Entry> = (0..100).map(Entry).collect();
    let mut enc = Encoder::new();
    encode_list(&mut enc, &items).unwrap();
    let limits = Limits {
        max_elements: 10,
        ..Limits::default()
    };
    let wire = enc.finish().to_bytes();
    let mut dec = Decoder::with_limits(&wire, limits).unwrap();
    let err = decode_list::<Entry>(&mut dec).unwrap_err();
    assert!(matches!(
        err.kind(),
        ErrorKind::LimitExceeded {
            limit: "list length",
            ..
        }
    ));
}

proptest! {
    /// The fused read of a present flag and a block gives what reading them one after the
    /// other gives, on any input: the same value, the same error, the same position.
    #[test]
    fn present_block_reads_like_flag_then_block(bytes in prop::collection::vec(any::<u8>(), 0..16), flag in 0u32..3) {
        let mut wire = flag.to_be_bytes().to_vec();
        wire.extend_from_slice(&bytes);
        let wire = Bytes::from(wire);
        let mut fused = Decoder::new(&wire);
        let got = fused.get_present_block::<8>();
        let mut apart = Decoder::new(&wire);
        let want = apart
            .get_present()
            .and_then(|p| if p { apart.get_block::<8>().map(Some) } else { Ok(None) });
        prop_assert_eq!(&got, &want);
        if got.is_ok() {
            prop_assert_eq!(fused.offset(), apart.offset());
        }
    }
}

type Composite = (Vec<XdrString>, Option<Vec<u64>>, Bytes, Vec<Vec<u32>>);

fn composite() -> impl Strategy<Value = Composite> {
    (
        prop::collection::vec(".{0,12}".prop_map(|s: String| XdrString::from(s)), 0..5),
        prop::option::of(prop::collection::vec(any::<u64>(), 0..5)),
        prop::collection::vec(any::<u8>(), 0..40).prop_map(Bytes::from),
        prop::collection::vec(prop::collection::vec(any::<u32>(), 0..4), 0..4),
    )
}

proptest! {
    #[test]
    fn round_trips_composites(v in composite()) {
        let wire = xdr::to_bytes(&v).unwrap();
        prop_assert_eq!(wire.len() % 4, 0);
        prop_assert_eq!(xdr::from_bytes::<Composite>(wire).unwrap(), v);
    }

    #[test]
    fn decoding_random_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = xdr::from_bytes::<Composite>(Bytes::from(bytes.clone()));
        let bytes = Bytes::from(bytes);
        let mut dec = Decoder::new(&bytes);
        let _ = decode_list::<Entry>(&mut dec);
    }

    #[test]
    fn decoding_mutated_messages_never_panics(v in composite(), flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
        let mut wire = xdr::to_bytes(&v).unwrap().to_vec();
        if !wire.is_empty() {
            for (i, b) in flips {
                let i = i.index(wire.len());
                wire[i] = b;
            }
        }
        let _ = xdr::from_bytes::<Composite>(Bytes::from(wire));
    }
}

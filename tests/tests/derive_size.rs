//! `EncodedSize` from `#[derive(Xdr)]`: the largest encoding, inline and with DDP-eligible
//! items moved to chunks (seed 002 sections 4.1 and 4.3), matching what `xdrgen` emits.

use bytes::Bytes;
use proptest::prelude::*;
use rpcrdma::xdr::{self, Encode, EncodedSize, Encoder, ThresholdPolicy, XdrString};
use rpcrdma::{DdpEligible, Xdr};

#[derive(Xdr, Debug, Clone, Copy, PartialEq)]
enum Kind {
    Regular = 1,
    Directory = 2,
}

/// Every bounded field shape once.
#[derive(Xdr, Debug, Clone, PartialEq)]
struct Attrs {
    kind: Kind, // 4
    size: u64,  // 8
    #[xdr(fixed = 5)]
    verifier: Bytes, // 5 + 3 padding = 8
    #[xdr(max = 10)]
    name: XdrString, // 4 + 10 + 2 padding = 16
    #[xdr(max = 3)]
    ids: Vec<u32>, // 4 + 3 * 4 = 16
    times: [u32; 2], // 8
    parent: Option<u64>, // 4 + 8 = 12
    #[xdr(fixed = 2)]
    pair: Vec<i64>, // 2 * 8 = 16
} // 88

#[derive(Xdr, Debug, Clone, PartialEq)]
#[xdr(switch = u32)]
enum Reply {
    #[xdr(case = 0)]
    Ok(Attrs), // 88
    #[xdr(case = 1)]
    Busy, // void: 0
    #[xdr(default)]
    Other {
        #[xdr(discriminant)]
        code: u32, // the discriminant itself, not counted again
        #[xdr(max = 100)]
        detail: Bytes, // 4 + 100 = 104
    },
} // 4 + max(88, 0, 104) = 108

/// A union whose largest arm is a case arm, and whose default arm is void.
#[derive(Xdr, Debug, Clone, PartialEq)]
enum Small {
    #[xdr(case = 0)]
    Pair(u32, u64), // 12
    #[xdr(default)]
    Nothing(#[xdr(discriminant)] i32), // void: only the discriminant, 0
} // 4 + 12 = 16

#[test]
fn bounded_types_have_exact_maximums() {
    assert_eq!(Kind::MAX_LEN, Some(4));
    assert_eq!(Attrs::MAX_LEN, Some(88));
    assert_eq!(Reply::MAX_LEN, Some(108));
    assert_eq!(Small::MAX_LEN, Some(16));
    // Nothing DDP-eligible: inline is everything.
    assert_eq!(Attrs::MAX_INLINE_LEN, Attrs::MAX_LEN);
    assert_eq!(Reply::MAX_INLINE_LEN, Reply::MAX_LEN);
}

#[test]
fn the_largest_values_reach_the_maximum_exactly() {
    let attrs = Attrs {
        kind: Kind::Directory,
        size: u64::MAX,
        verifier: Bytes::from_static(b"12345"),
        name: XdrString::from("0123456789"),
        ids: vec![1, 2, 3],
        times: [4, 5],
        parent: Some(6),
        pair: vec![7, 8],
    };
    assert_eq!(xdr::to_bytes(&attrs).unwrap().len(), 88);
    assert_eq!(xdr::to_bytes(&Reply::Ok(attrs)).unwrap().len(), 92);
    let other = Reply::Other {
        code: 9,
        detail: Bytes::from(vec![0; 100]),
    };
    assert_eq!(xdr::to_bytes(&other).unwrap().len(), 108);
    assert_eq!(xdr::to_bytes(&Small::Pair(1, 2)).unwrap().len(), 16);
}

#[derive(Xdr)]
struct NoMaxOpaque {
    id: u32,
    data: Bytes,
}

#[derive(Xdr)]
struct NoMaxString {
    name: XdrString,
}

#[derive(Xdr)]
struct NoMaxArray {
    ids: Vec<u32>,
}

#[derive(Xdr)]
struct Entry {
    id: u32,
}

#[derive(Xdr)]
struct Listing {
    #[xdr(list)]
    entries: Vec<Entry>,
}

/// `Option<Box<Self>>`: recursion, unbounded (and no cycle of constants).
#[derive(Xdr)]
struct Chain {
    value: u32,
    next: Option<Box<Chain>>,
}

/// Recursion through a bounded array: still unbounded in depth.
#[derive(Xdr)]
struct Tree {
    value: u32,
    #[xdr(max = 4)]
    children: Vec<Tree>,
}

/// A bounded count of unbounded elements.
#[derive(Xdr)]
struct Names {
    #[xdr(max = 4)]
    names: Vec<NoMaxString>,
}

/// One unbounded arm makes the union unbounded.
#[derive(Xdr)]
enum OneUnbounded {
    #[xdr(case = 0)]
    Small(u32),
    #[xdr(case = 1)]
    Big(Bytes),
}

#[test]
fn unbounded_types_say_so() {
    assert_eq!(NoMaxOpaque::MAX_LEN, None);
    assert_eq!(NoMaxString::MAX_LEN, None);
    assert_eq!(NoMaxArray::MAX_LEN, None);
    assert_eq!(Listing::MAX_LEN, None);
    assert_eq!(Chain::MAX_LEN, None);
    assert_eq!(Tree::MAX_LEN, None);
    assert_eq!(Names::MAX_LEN, None);
    assert_eq!(OneUnbounded::MAX_LEN, None);
    assert_eq!(Chain::MAX_INLINE_LEN, None);
    assert_eq!(Tree::MAX_INLINE_LEN, None);
}

/// Every kind of movable item, each bounded.
#[derive(Xdr, DdpEligible, Debug, Clone, PartialEq)]
struct WriteArgs {
    offset: u64, // 8
    #[xdr(ddp, max = 4096)]
    data: Bytes, // 4 + 4096; 4 once moved (its length)
    #[xdr(ddp, fixed = 6)]
    tag: Bytes, // 6 + 2 = 8; nothing once moved
    #[xdr(ddp, max = 8)]
    values: Vec<u64>, // 4 + 64 = 68; 4 once moved (its count)
    #[xdr(ddp, max = 5)]
    label: XdrString, // 4 + 8 = 12; 4 once moved
} // 8 + 4100 + 8 + 68 + 12 = 4196; inline 8 + 4 + 0 + 4 + 4 = 20

/// DDP items inside fields, arrays of them, and optional moved data.
#[derive(Xdr, DdpEligible)]
struct Batch {
    first: WriteArgs, // 4196; 20
    #[xdr(max = 2)]
    more: Vec<WriteArgs>, // 4 + 2 * 4196 = 8396; 4 + 2 * 20 = 44
    #[xdr(ddp)]
    extra: Option<Bytes>, // unbounded; 4 (present) + 4 (length) = 8
} // None; 20 + 44 + 8 = 72

#[test]
fn ddp_fields_lower_the_inline_bound() {
    assert_eq!(WriteArgs::MAX_LEN, Some(4196));
    assert_eq!(WriteArgs::MAX_INLINE_LEN, Some(20));
    assert_eq!(Batch::MAX_LEN, None);
    assert_eq!(Batch::MAX_INLINE_LEN, Some(72));
}

/// `post_op_attr` (RFC 1813 section 2.6): optional `fattr3`, 21 words.
type PostOpAttr = Option<[u32; 21]>; // 4 + 84 = 88

/// READ3resok (RFC 1813 section 3.3.6), written by hand.
#[derive(Xdr, DdpEligible, Debug, Clone, PartialEq)]
struct Read3ResOk {
    file_attributes: PostOpAttr, // 88
    count: u32,                  // 4
    eof: bool,                   // 4
    #[xdr(ddp)]
    data: Bytes,  // unbounded (opaque data<>); its length stays inline once moved: 4
} // None; 100 inline

#[derive(Xdr, Debug, Clone, PartialEq)]
struct Read3ResFail {
    file_attributes: PostOpAttr, // 88
}

/// READ3res: `union switch (nfsstat3 status) { case NFS3_OK: READ3resok; default: READ3resfail; }`.
#[derive(Xdr, DdpEligible, Debug, Clone, PartialEq)]
enum Read3Res {
    #[xdr(case = 0)]
    Ok(Read3ResOk),
    #[xdr(default)]
    Fail(#[xdr(discriminant)] i32, Read3ResFail),
} // None; 4 + max(100, 88) = 104 inline

#[test]
fn nfs3_read_reply_is_unbounded_but_its_inline_part_is_not() {
    assert_eq!(Read3ResOk::MAX_LEN, None);
    assert_eq!(Read3ResOk::MAX_INLINE_LEN, Some(100));
    assert_eq!(Read3Res::MAX_LEN, None);
    assert_eq!(Read3Res::MAX_INLINE_LEN, Some(104));
    assert_eq!(Read3ResFail::MAX_LEN, Some(88));

    // A requester that reserves MAX_INLINE_LEN for the reply and a Write chunk for the data
    // receives the largest reply inline in exactly that much space.
    let reply = Read3Res::Ok(Read3ResOk {
        file_attributes: Some([7; 21]),
        count: 1 << 20,
        eof: true,
        data: Bytes::from(vec![0x5a; 1 << 20]),
    });
    let mut enc = Encoder::for_reply(ThresholdPolicy::default(), vec![1 << 20]);
    reply.encode(&mut enc).unwrap();
    let (inline, moved) = enc.finish_with_chunks();
    assert_eq!(moved.len(), 1);
    assert_eq!(Some(inline.len()), Read3Res::MAX_INLINE_LEN);
}

fn bytes(max: usize) -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..=max).prop_map(Bytes::from)
}

fn string(max: usize) -> impl Strategy<Value = XdrString> {
    bytes(max).prop_map(XdrString::from_bytes)
}

fn attrs() -> impl Strategy<Value = Attrs> {
    (
        prop_oneof![Just(Kind::Regular), Just(Kind::Directory)],
        any::<u64>(),
        proptest::collection::vec(any::<u8>(), 5).prop_map(Bytes::from),
        string(10),
        proptest::collection::vec(any::<u32>(), 0..=3),
        any::<([u32; 2], Option<u64>)>(),
        proptest::collection::vec(any::<i64>(), 2),
    )
        .prop_map(
            |(kind, size, verifier, name, ids, (times, parent), pair)| Attrs {
                kind,
                size,
                verifier,
                name,
                ids,
                times,
                parent,
                pair,
            },
        )
}

fn reply() -> impl Strategy<Value = Reply> {
    prop_oneof![
        attrs().prop_map(Reply::Ok),
        Just(Reply::Busy),
        (2u32.., bytes(100)).prop_map(|(code, detail)| Reply::Other { code, detail }),
    ]
}

fn write_args() -> impl Strategy<Value = WriteArgs> {
    (
        any::<u64>(),
        bytes(4096),
        proptest::collection::vec(any::<u8>(), 6).prop_map(Bytes::from),
        proptest::collection::vec(any::<u64>(), 0..=8),
        string(5),
    )
        .prop_map(|(offset, data, tag, values, label)| WriteArgs {
            offset,
            data,
            tag,
            values,
            label,
        })
}

/// Moves every DDP-eligible item, whatever its size.
fn move_everything() -> ThresholdPolicy {
    ThresholdPolicy {
        inline_threshold: 0,
        min_ddp_size: 0,
    }
}

proptest! {
    #[test]
    fn encodings_never_exceed_max_len(value in reply()) {
        let len = xdr::to_bytes(&value).unwrap().len();
        prop_assert!(len <= Reply::MAX_LEN.unwrap(), "{len} bytes for {value:?}");
    }

    #[test]
    fn with_every_item_moved_the_inline_stream_is_max_inline_len(value in write_args()) {
        let len = xdr::to_bytes(&value).unwrap().len();
        prop_assert!(len <= WriteArgs::MAX_LEN.unwrap());
        let mut enc = Encoder::for_call(move_everything());
        value.encode(&mut enc).unwrap();
        let (inline, _) = enc.finish_with_chunks();
        prop_assert_eq!(Some(inline.len()), WriteArgs::MAX_INLINE_LEN);
    }
}

#[derive(Xdr)]
struct Tagged<T> {
    tag: u32,
    #[xdr(max = 3)]
    items: Vec<T>,
}

#[test]
fn generic_types_bound_through_their_parameters() {
    // 4 + (4 + 3 * 8)
    assert_eq!(<Tagged<u64>>::MAX_LEN, Some(32));
    // 4 + (4 + 3 * 20)
    assert_eq!(<Tagged<WriteArgs>>::MAX_INLINE_LEN, Some(68));
    assert_eq!(<Tagged<Bytes>>::MAX_LEN, None);
}

/// A fixed-length array kept in a `Vec` is always encoded inline, even when marked.
#[derive(Xdr, Debug)]
struct FixedArray {
    #[xdr(ddp, fixed = 2)]
    pair: Vec<u32>, // 8, inline either way
    #[xdr(ddp, max = 4)]
    data: Bytes, // 4 + 4 = 8; 4 once moved
}

#[test]
fn only_items_the_encoder_moves_leave_the_inline_bound() {
    assert_eq!(FixedArray::MAX_LEN, Some(16));
    assert_eq!(FixedArray::MAX_INLINE_LEN, Some(12));
    let value = FixedArray {
        pair: vec![1, 2],
        data: Bytes::from_static(b"abcd"),
    };
    let mut enc = Encoder::for_call(move_everything());
    value.encode(&mut enc).unwrap();
    let (inline, moved) = enc.finish_with_chunks();
    assert_eq!(moved.len(), 1);
    assert_eq!(Some(inline.len()), FixedArray::MAX_INLINE_LEN);
}

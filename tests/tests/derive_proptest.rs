//! Property tests: any value of a derived type survives encode/decode, its encoding is a whole
//! number of XDR units no shorter than `MIN_ENCODED_LEN`, no strict prefix decodes, and
//! decoding in place over any old value gives what a fresh decode gives.

use bytes::Bytes;
use proptest::prelude::*;
use rpcrdma::xdr::{self, Decode, XdrString};
use rpcrdma::Xdr;

#[derive(Xdr, Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Regular = 1,
    Directory = 2,
    Symlink = -3,
}

#[derive(Xdr, Debug, Clone, PartialEq)]
#[xdr(switch = Kind)]
enum Body {
    #[xdr(case = Kind::Regular)]
    Regular {
        #[xdr(max = 64)]
        data: Bytes,
    },
    #[xdr(case = Kind::Symlink)]
    Symlink(#[xdr(max = 32)] XdrString),
    #[xdr(default)]
    Other(#[xdr(discriminant)] Kind),
}

#[derive(Xdr, Debug, Clone, PartialEq)]
enum Status {
    #[xdr(case = 0)]
    Ok(u64),
    #[xdr(case = 1, case = 2, case = 3)]
    Retry(#[xdr(discriminant)] i32),
    #[xdr(default)]
    Unknown {
        #[xdr(discriminant)]
        code: i32,
        detail: Option<u32>,
    },
}

#[derive(Xdr, Debug, Clone, PartialEq)]
struct Item {
    id: u32,
    name: XdrString,
}

#[derive(Xdr, Debug, Clone, PartialEq)]
struct Record {
    flag: bool,
    small: i32,
    big: i64,
    ratio: f64,
    #[xdr(fixed = 3)]
    tag: Bytes,
    #[xdr(max = 8)]
    values: Vec<u32>,
    triple: [i32; 3],
    body: Body,
    status: Status,
    parent: Option<Box<Item>>,
    #[xdr(list)]
    items: Vec<Item>,
}

fn bytes(max: usize) -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..=max).prop_map(Bytes::from)
}

fn item() -> impl Strategy<Value = Item> {
    (any::<u32>(), bytes(12)).prop_map(|(id, n)| Item {
        id,
        name: XdrString::from_bytes(n),
    })
}

fn body() -> impl Strategy<Value = Body> {
    prop_oneof![
        bytes(64).prop_map(|data| Body::Regular { data }),
        bytes(32).prop_map(|s| Body::Symlink(XdrString::from_bytes(s))),
        Just(Body::Other(Kind::Directory)),
    ]
}

fn status() -> impl Strategy<Value = Status> {
    prop_oneof![
        any::<u64>().prop_map(Status::Ok),
        (1..=3i32).prop_map(Status::Retry),
        (any::<i32>(), any::<Option<u32>>())
            .prop_filter("explicit cases", |(c, _)| !(0..=3).contains(c))
            .prop_map(|(code, detail)| Status::Unknown { code, detail }),
    ]
}

fn record() -> impl Strategy<Value = Record> {
    (
        (any::<bool>(), any::<i32>(), any::<i64>(), any::<f64>()),
        proptest::collection::vec(any::<u8>(), 3).prop_map(Bytes::from),
        proptest::collection::vec(any::<u32>(), 0..=8),
        any::<[i32; 3]>(),
        body(),
        status(),
        proptest::option::of(item().prop_map(Box::new)),
        proptest::collection::vec(item(), 0..6),
    )
        .prop_map(
            |((flag, small, big, ratio), tag, values, triple, body, status, parent, items)| {
                Record {
                    flag,
                    small,
                    big,
                    ratio,
                    tag,
                    values,
                    triple,
                    body,
                    status,
                    parent,
                    items,
                }
            },
        )
}

/// Equality that treats NaN as equal to itself, bit for bit.
fn same(a: &Record, b: &Record) -> bool {
    a.ratio.to_bits() == b.ratio.to_bits()
        && Record {
            ratio: 0.0,
            ..a.clone()
        } == Record {
            ratio: 0.0,
            ..b.clone()
        }
}

proptest! {
    #[test]
    fn record_round_trips(value in record()) {
        let wire = xdr::to_bytes(&value).unwrap();
        prop_assert_eq!(wire.len() % 4, 0);
        prop_assert!(wire.len() >= <Record as Decode>::MIN_ENCODED_LEN);
        let back: Record = xdr::from_bytes(wire).unwrap();
        prop_assert!(same(&back, &value), "{:?} != {:?}", back, value);
    }

    #[test]
    fn no_strict_prefix_decodes(value in record(), cut in any::<prop::sample::Index>()) {
        let wire = xdr::to_bytes(&value).unwrap();
        let len = cut.index(wire.len());
        prop_assert!(xdr::from_bytes::<Record>(wire.slice(..len)).is_err());
    }

    #[test]
    fn decode_in_place_equals_fresh_decode(
        old in record(),
        new in record(),
        cut in any::<prop::sample::Index>(),
    ) {
        let wire = xdr::to_bytes(&new).unwrap();
        let mut held = old.clone();
        xdr::from_bytes_in_place(wire.clone(), &mut held).unwrap();
        prop_assert!(same(&held, &new), "{:?} != {:?}", held, new);
        // A cut message fails in place exactly where a fresh decode fails.
        let cut = wire.slice(..cut.index(wire.len()));
        let fresh = xdr::from_bytes::<Record>(cut.clone()).unwrap_err();
        let mut held = old;
        let in_place = xdr::from_bytes_in_place(cut, &mut held).unwrap_err();
        prop_assert_eq!(fresh, in_place);
    }

    #[test]
    fn arbitrary_input_never_panics(input in proptest::collection::vec(any::<u8>(), 0..256)) {
        // Errors are fine; panics and over-allocation are not.
        let _ = xdr::from_bytes::<Record>(Bytes::from(input));
    }
}

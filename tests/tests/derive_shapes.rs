//! Round trips and exact encodings for every shape `#[derive(Xdr)]` supports.

use std::fmt::Debug;

use bytes::Bytes;
use rpcrdma::xdr::{self, DdpEligible, Decode, Encode, ErrorKind, Limits, XdrString};
use rpcrdma::{DdpEligible, Xdr};

fn round_trip<T: Encode + Decode + PartialEq + Debug>(value: &T) -> Bytes {
    let wire = xdr::to_bytes(value).unwrap();
    let back: T = xdr::from_bytes(wire.clone()).unwrap();
    assert_eq!(&back, value);
    assert!(
        wire.len() >= T::MIN_ENCODED_LEN,
        "MIN_ENCODED_LEN overestimates"
    );
    wire
}

fn words(ws: &[u32]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_be_bytes()).collect()
}

#[derive(Xdr, Debug, Clone, PartialEq)]
struct Scalars {
    a: u32,
    b: i32,
    c: u64,
    d: i64,
    e: f32,
    f: f64,
    g: bool,
}

#[test]
fn scalars_in_declaration_order() {
    let v = Scalars {
        a: 1,
        b: -2,
        c: 3 << 32,
        d: -4,
        e: 1.5,
        f: -0.25,
        g: true,
    };
    let wire = round_trip(&v);
    let mut expected = vec![];
    expected.extend(1u32.to_be_bytes());
    expected.extend((-2i32).to_be_bytes());
    expected.extend((3u64 << 32).to_be_bytes());
    expected.extend((-4i64).to_be_bytes());
    expected.extend(1.5f32.to_be_bytes());
    expected.extend((-0.25f64).to_be_bytes());
    expected.extend(1u32.to_be_bytes());
    assert_eq!(&wire[..], &expected[..]);
    assert_eq!(
        <Scalars as Decode>::MIN_ENCODED_LEN,
        4 + 4 + 8 + 8 + 4 + 8 + 4
    );
}

#[derive(Xdr, Debug, Clone, PartialEq)]
struct Pair(u32, #[xdr(max = 8)] XdrString);

#[derive(Xdr, Debug, Clone, PartialEq)]
struct Nothing;

#[test]
fn tuple_and_unit_structs() {
    let wire = round_trip(&Pair(9, "ok".into()));
    assert_eq!(&wire[..], &[0, 0, 0, 9, 0, 0, 0, 2, b'o', b'k', 0, 0][..]);
    assert_eq!(round_trip(&Nothing).len(), 0);
    assert_eq!(<Nothing as Decode>::MIN_ENCODED_LEN, 0);
}

#[derive(Xdr, Debug, Clone, Copy, PartialEq, Eq)]
enum Signed {
    Low = -1,
    Zero = 0,
    High = 0x7fff_ffff,
}

const FROM_CONST: isize = 42;

#[derive(Xdr, Debug, Clone, Copy, PartialEq, Eq)]
enum ByConst {
    Answer = FROM_CONST,
}

#[test]
fn enums_are_signed_32_bit() {
    assert_eq!(&round_trip(&Signed::Low)[..], &[0xff; 4][..]);
    assert_eq!(
        &round_trip(&Signed::High)[..],
        &[0x7f, 0xff, 0xff, 0xff][..]
    );
    round_trip(&Signed::Zero);
    assert_eq!(&round_trip(&ByConst::Answer)[..], &words(&[42])[..]);
}

#[test]
fn rejects_unknown_enum_value() {
    let err = xdr::from_bytes::<Signed>(Bytes::from(words(&[5]))).unwrap_err();
    assert_eq!(
        err.kind(),
        &ErrorKind::UnknownDiscriminant {
            type_name: "Signed",
            value: 5
        }
    );
    assert_eq!(err.offset(), 0);
}

/// `union switch (int x) { case 0: unsigned int ok; case 1: case 2: void; default: opaque d<>; }`
#[derive(Xdr, Debug, Clone, PartialEq)]
enum IntUnion {
    #[xdr(case = 0)]
    Ok(u32),
    #[xdr(case = 1, case = 2)]
    Refused,
    #[xdr(case = -5)]
    Negative { x: i64, y: bool },
    #[xdr(default)]
    Other {
        #[xdr(discriminant)]
        code: i32,
        data: Bytes,
    },
}

#[test]
fn int_union_arms() {
    assert_eq!(&round_trip(&IntUnion::Ok(7))[..], &words(&[0, 7])[..]);
    // Several cases without a discriminant field encode the first.
    assert_eq!(&round_trip(&IntUnion::Refused)[..], &words(&[1])[..]);
    let two: IntUnion = xdr::from_bytes(Bytes::from(words(&[2]))).unwrap();
    assert_eq!(two, IntUnion::Refused);
    let neg = round_trip(&IntUnion::Negative { x: -1, y: false });
    assert_eq!(&neg[..4], &(-5i32).to_be_bytes());
    // The default arm keeps its discriminant.
    let other = IntUnion::Other {
        code: 99,
        data: Bytes::from_static(b"xyz"),
    };
    assert_eq!(
        &round_trip(&other)[..],
        &[0, 0, 0, 99, 0, 0, 0, 3, b'x', b'y', b'z', 0][..]
    );
    // discriminant + smallest arm (the void arm).
    assert_eq!(<IntUnion as Decode>::MIN_ENCODED_LEN, 4);
}

#[test]
fn rejects_default_arm_holding_an_explicit_case() {
    let err = xdr::to_bytes(&IntUnion::Other {
        code: 1,
        data: Bytes::new(),
    })
    .unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Invalid(msg) if msg.contains("IntUnion::Other")));
}

/// `union switch (unsigned int v) { case 1: case 3: hyper n; case 0x80000000: void; }`
#[derive(Xdr, Debug, Clone, PartialEq)]
#[xdr(switch = u32)]
enum UintUnion {
    #[xdr(case = 1, case = 3)]
    Odd(#[xdr(discriminant)] u32, i64),
    #[xdr(case = 0x8000_0000)]
    High,
}

#[test]
fn uint_union_keeps_which_case_selected_it() {
    let three = round_trip(&UintUnion::Odd(3, -9));
    assert_eq!(&three[..4], &[0, 0, 0, 3]);
    assert_eq!(&round_trip(&UintUnion::High)[..], &[0x80, 0, 0, 0][..]);
    // Holding a value that is not one of the arm's cases is refused.
    assert!(xdr::to_bytes(&UintUnion::Odd(2, 0)).is_err());
    let err = xdr::from_bytes::<UintUnion>(Bytes::from(words(&[0xffff_fffe]))).unwrap_err();
    assert_eq!(
        err.kind(),
        &ErrorKind::UnknownDiscriminant {
            type_name: "UintUnion",
            value: 0xffff_fffe
        }
    );
    assert_eq!(<UintUnion as Decode>::MIN_ENCODED_LEN, 4);
}

#[derive(Xdr, Debug, Clone, PartialEq)]
#[xdr(switch = bool)]
enum MaybeCookie {
    #[xdr(case = true)]
    Yes(u64),
    #[xdr(case = false)]
    No,
}

#[test]
fn bool_union() {
    assert_eq!(
        &round_trip(&MaybeCookie::Yes(1))[..],
        &words(&[1, 0, 1])[..]
    );
    assert_eq!(&round_trip(&MaybeCookie::No)[..], &words(&[0])[..]);
    assert!(xdr::from_bytes::<MaybeCookie>(Bytes::from(words(&[2]))).is_err());
}

#[derive(Xdr, Debug, Clone, Copy, PartialEq, Eq)]
enum Color {
    Red = 1,
    Green = 2,
    Blue = 3,
}

/// A union on an enum that names only some of the constants, with a default arm.
#[derive(Xdr, Debug, Clone, PartialEq)]
#[xdr(switch = Color)]
enum Paint {
    #[xdr(case = Color::Red)]
    Red(u32),
    #[xdr(default)]
    Other(#[xdr(discriminant)] Color),
}

/// A union on an enum with no arm for one constant and no default.
#[derive(Xdr, Debug, Clone, PartialEq)]
#[xdr(switch = Color)]
enum Partial {
    #[xdr(case = Color::Red, case = Color::Green)]
    Warm(#[xdr(discriminant)] Color),
}

#[test]
fn enum_switched_unions() {
    assert_eq!(&round_trip(&Paint::Red(5))[..], &words(&[1, 5])[..]);
    assert_eq!(
        &round_trip(&Paint::Other(Color::Blue))[..],
        &words(&[3])[..]
    );
    assert!(xdr::to_bytes(&Paint::Other(Color::Red)).is_err());
    round_trip(&Partial::Warm(Color::Green));
    let err = xdr::from_bytes::<Partial>(Bytes::from(words(&[3]))).unwrap_err();
    assert_eq!(
        err.kind(),
        &ErrorKind::UnknownDiscriminant {
            type_name: "Partial",
            value: 3
        }
    );
    // A value outside the enum fails in the enum's own decoder.
    let err = xdr::from_bytes::<Paint>(Bytes::from(words(&[9]))).unwrap_err();
    assert!(matches!(
        err.kind(),
        ErrorKind::UnknownDiscriminant {
            type_name: "Color",
            ..
        }
    ));
}

#[derive(Xdr, Debug, Clone, PartialEq)]
struct Containers {
    maybe: Option<u32>,
    boxed: Box<i32>,
    fixed_array: [u32; 3],
    #[xdr(max = 4)]
    bounded: Vec<u32>,
    unbounded: Vec<XdrString>,
    #[xdr(fixed = 2)]
    fixed_vec: Vec<u64>,
    #[xdr(fixed = 5)]
    fixed_opaque: Bytes,
    opaque: Bytes,
}

fn containers() -> Containers {
    Containers {
        maybe: Some(1),
        boxed: Box::new(-1),
        fixed_array: [1, 2, 3],
        bounded: vec![4, 5],
        unbounded: vec!["a".into()],
        fixed_vec: vec![6, 7],
        fixed_opaque: Bytes::from_static(b"12345"),
        opaque: Bytes::new(),
    }
}

#[test]
fn containers_round_trip_with_exact_layout() {
    let wire = round_trip(&containers());
    let mut expected = words(&[1, 1, 0xffff_ffff, 1, 2, 3, 2, 4, 5, 1, 1]);
    expected.extend(b"a\0\0\0");
    expected.extend(words(&[0, 6, 0, 7]));
    expected.extend(b"12345\0\0\0");
    expected.extend(words(&[0]));
    assert_eq!(&wire[..], &expected[..]);
    let none = Containers {
        maybe: None,
        ..containers()
    };
    round_trip(&none);
    // flag + box(0: recursion-safe) + 12 + count + count + 16 + 8 + length
    assert_eq!(
        <Containers as Decode>::MIN_ENCODED_LEN,
        4 + 12 + 4 + 4 + 16 + 8 + 4
    );
}

#[test]
fn fixed_lengths_are_enforced_on_encode() {
    let short = Containers {
        fixed_opaque: Bytes::from_static(b"1234"),
        ..containers()
    };
    assert_eq!(
        xdr::to_bytes(&short).unwrap_err().kind(),
        &ErrorKind::WrongFixedLength {
            expected: 5,
            actual: 4
        }
    );
    let long = Containers {
        fixed_vec: vec![1, 2, 3],
        ..containers()
    };
    assert_eq!(
        xdr::to_bytes(&long).unwrap_err().kind(),
        &ErrorKind::WrongFixedLength {
            expected: 2,
            actual: 3
        }
    );
}

#[test]
fn array_maximum_is_enforced_both_ways() {
    let over = Containers {
        bounded: vec![0; 5],
        ..containers()
    };
    assert_eq!(
        xdr::to_bytes(&over).unwrap_err().kind(),
        &ErrorKind::ExceedsDeclaredMaximum {
            length: 5,
            maximum: 4
        }
    );
    let mut wire = xdr::to_bytes(&containers()).unwrap().to_vec();
    // bounded's count is the 7th word; claim 5 elements.
    wire[27] = 5;
    let err = xdr::from_bytes::<Containers>(Bytes::from(wire)).unwrap_err();
    assert_eq!(
        err.kind(),
        &ErrorKind::ExceedsDeclaredMaximum {
            length: 5,
            maximum: 4
        }
    );
    assert_eq!(err.offset(), 24);
}

/// `struct node { int value; node *next; }` written the direct way: recursion through
/// `Option<Box<_>>`.
#[derive(Xdr, Debug, Clone, PartialEq)]
struct Node {
    value: i32,
    next: Option<Box<Node>>,
}

/// A recursive union: `Neg` holds another expression.
#[derive(Xdr, Debug, Clone, PartialEq)]
enum Expr {
    #[xdr(case = 0)]
    Lit(i32),
    #[xdr(case = 1)]
    Neg(Box<Expr>),
}

#[test]
fn recursive_types_round_trip_and_are_depth_bounded() {
    let list = Node {
        value: 1,
        next: Some(Box::new(Node {
            value: 2,
            next: None,
        })),
    };
    assert_eq!(&round_trip(&list)[..], &words(&[1, 1, 2, 0])[..]);
    let mut e = Expr::Lit(3);
    for _ in 0..10 {
        e = Expr::Neg(Box::new(e));
    }
    round_trip(&e);
    // 1,000 nested negations exceed the default depth limit of 500 without touching the
    // stack.
    let mut deep = words(&[1; 1000]);
    deep.extend(words(&[0, 3]));
    let err = xdr::from_bytes::<Expr>(Bytes::from(deep)).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::TooDeep { .. }));
}

/// `struct entry { string name<>; unsigned hyper cookie; entry *nextentry; };`
#[derive(Xdr, Debug, Clone, PartialEq)]
struct Entry {
    name: XdrString,
    cookie: u64,
}

/// `struct dirlist { entry *entries; bool eof; };`
#[derive(Xdr, Debug, Clone, PartialEq)]
struct DirList {
    #[xdr(list)]
    entries: Vec<Entry>,
    eof: bool,
}

#[test]
fn linked_list_matches_the_pointer_chain_encoding() {
    let dir = DirList {
        entries: vec![
            Entry {
                name: "a".into(),
                cookie: 1,
            },
            Entry {
                name: "b".into(),
                cookie: 2,
            },
        ],
        eof: true,
    };
    let wire = round_trip(&dir);
    let mut expected = words(&[1, 1]);
    expected.extend(b"a\0\0\0");
    expected.extend(words(&[0, 1, 1, 1]));
    expected.extend(b"b\0\0\0");
    expected.extend(words(&[0, 2, 0, 1]));
    assert_eq!(&wire[..], &expected[..]);
    assert_eq!(
        &round_trip(&DirList {
            entries: vec![],
            eof: false
        })[..],
        &words(&[0, 0])[..]
    );
}

#[derive(Xdr, Debug, Clone, PartialEq)]
struct Cell {
    value: u32,
}

#[derive(Xdr, Debug, Clone, PartialEq)]
struct Chain {
    #[xdr(list)]
    cells: Vec<Cell>,
}

#[test]
fn million_entry_list_round_trips_without_recursion() {
    let chain = Chain {
        cells: (0..1_000_000).map(|value| Cell { value }).collect(),
    };
    let wire = xdr::to_bytes(&chain).unwrap();
    assert_eq!(wire.len(), 1_000_000 * 8 + 4);
    let back: Chain = xdr::from_bytes(wire).unwrap();
    assert_eq!(back.cells.len(), 1_000_000);
    assert_eq!(back, chain);
}

#[test]
fn list_length_is_bounded_by_limits() {
    let chain = Chain {
        cells: (0..10).map(|value| Cell { value }).collect(),
    };
    let wire = xdr::to_bytes(&chain).unwrap();
    let limits = Limits {
        max_elements: 9,
        ..Limits::DEFAULT
    };
    let err = xdr::from_bytes_with_limits::<Chain>(wire, limits).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::LimitExceeded { .. }));
}

#[derive(Xdr, Debug, Clone, PartialEq)]
struct Tagged<T> {
    tag: u32,
    #[xdr(max = 3)]
    items: Vec<T>,
}

#[test]
fn generic_structs_bound_their_parameters() {
    round_trip(&Tagged {
        tag: 1,
        items: vec![Signed::Low, Signed::High],
    });
    round_trip(&Tagged::<u64> {
        tag: 2,
        items: vec![],
    });
    assert_eq!(<Tagged<u64> as Decode>::MIN_ENCODED_LEN, 8);
}

mod renamed {
    pub use rpcrdma as runtime;
}

#[derive(Xdr, Debug, Clone, PartialEq)]
#[xdr(crate = "crate::renamed::runtime")]
struct ThroughAnotherPath {
    x: u32,
}

#[test]
fn crate_attribute_overrides_the_runtime_path() {
    assert_eq!(
        &round_trip(&ThroughAnotherPath { x: 3 })[..],
        &words(&[3])[..]
    );
}

#[derive(Xdr, DdpEligible, Debug, Clone, PartialEq)]
struct WriteArgs {
    offset: u64,
    #[xdr(ddp)]
    data: Bytes,
    #[xdr(ddp, max = 16)]
    pages: Vec<u32>,
    #[xdr(ddp)]
    label: Option<XdrString>,
}

#[derive(Xdr, DdpEligible, Debug, Clone, PartialEq)]
enum ReadRes {
    #[xdr(case = 0)]
    Ok {
        eof: bool,
        #[xdr(ddp)]
        data: Bytes,
    },
    #[xdr(default)]
    Fail(#[xdr(discriminant)] i32),
}

#[derive(Xdr, DdpEligible)]
struct NoMarks(u32);

#[test]
fn ddp_marks_are_listed_and_do_not_change_the_encoding() {
    assert_eq!(WriteArgs::DDP_FIELDS, &["data", "pages", "label"]);
    assert_eq!(ReadRes::DDP_FIELDS, &["Ok.data"]);
    assert!(NoMarks::DDP_FIELDS.is_empty());
    let args = WriteArgs {
        offset: 0,
        data: Bytes::from_static(b"abcd"),
        pages: vec![1],
        label: None,
    };
    assert_eq!(
        &round_trip(&args)[..],
        &[
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, b'a', b'b', b'c', b'd', 0, 0, 0, 1, 0, 0, 0, 1, 0,
            0, 0, 0
        ][..]
    );
    round_trip(&ReadRes::Fail(-3));
}

#[test]
fn large_opaque_fields_are_gathered_not_copied() {
    use rpcrdma::xdr::Encoder;
    let payload = Bytes::from(vec![7u8; 4096]);
    let args = WriteArgs {
        offset: 1,
        data: payload.clone(),
        pages: vec![],
        label: None,
    };
    let mut enc = Encoder::new();
    args.encode(&mut enc).unwrap();
    assert_eq!(enc.copied_opaque_bytes(), 0);
    let encoded = enc.finish();
    assert!(encoded
        .parts()
        .iter()
        .any(|p| p.as_ptr() == payload.as_ptr()));
    let back: WriteArgs = xdr::from_bytes(encoded.to_bytes()).unwrap();
    assert_eq!(back, args);
}

/// A generic union: `union maybe switch (int present) { case 0: void; case 1: T value; }`.
#[derive(Xdr, DdpEligible, Debug, Clone, PartialEq)]
enum Maybe<T> {
    #[xdr(case = 0)]
    Nothing,
    #[xdr(case = 1)]
    Just(#[xdr(ddp, max = 2)] Vec<T>),
}

#[test]
fn generic_unions_and_raw_identifiers() {
    assert_eq!(
        &round_trip(&Maybe::Just(vec![5u32]))[..],
        &words(&[1, 1, 5])[..]
    );
    round_trip(&Maybe::<u64>::Nothing);
    assert!(xdr::to_bytes(&Maybe::Just(vec![1u32, 2, 3])).is_err());
    assert_eq!(<Maybe<u32> as DdpEligible>::DDP_FIELDS, &["Just.0"]);

    #[derive(Xdr, DdpEligible, Debug, Clone, PartialEq)]
    struct Keywords {
        r#type: u32,
        #[xdr(ddp)]
        r#match: Bytes,
    }
    round_trip(&Keywords {
        r#type: 1,
        r#match: Bytes::from_static(b"m"),
    });
    assert_eq!(Keywords::DDP_FIELDS, &["match"]);
}

#[test]
fn min_encoded_len_refuses_counts_the_input_cannot_hold() {
    // Each Scalars takes 40 bytes; a count of 3 with 100 bytes left is refused up front.
    let mut wire = words(&[3]);
    wire.extend([0u8; 100]);
    let err = xdr::from_bytes::<Vec<Scalars>>(Bytes::from(wire)).unwrap_err();
    assert_eq!(
        err.kind(),
        &ErrorKind::CountExceedsInput {
            count: 3,
            remaining: 100
        }
    );
}

#[test]
fn types_declared_inside_functions() {
    #[derive(Xdr, Debug, Clone, Copy, PartialEq, Eq)]
    enum Local {
        One = 1,
    }
    #[derive(Xdr, Debug, Clone, PartialEq)]
    #[xdr(switch = Local)]
    enum LocalUnion {
        #[xdr(case = Local::One)]
        One(u32),
    }
    assert_eq!(&round_trip(&LocalUnion::One(4))[..], &words(&[1, 4])[..]);
    round_trip(&Local::One);
}

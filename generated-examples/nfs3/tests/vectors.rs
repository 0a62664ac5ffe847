//! The annotated NFSv3 vectors in `tests/vectors/` are well formed, equal the committed rpcgen
//! output, and their `[DDP]` lines follow the chunk rules they are meant to exercise.

mod common;

use common::{load_vector, vector_bytes, vector_names, VectorLine};

/// The XDR unit (RFC 4506 section 3).
const UNIT: usize = 4;

#[test]
fn the_expected_vectors_are_present() {
    let names = vector_names();
    for name in [
        "read3res_fail",
        "read3res_ok",
        "readlink3res_ok",
        "symlink3args",
        "write3_call_msg",
        "write3args",
    ] {
        assert!(
            names.iter().any(|n| n == name),
            "tests/vectors/{name}.hex is missing"
        );
    }
}

#[test]
fn every_vector_equals_the_rpcgen_output() {
    for name in vector_names() {
        let hand = vector_bytes(&load_vector("", &name));
        let oracle = vector_bytes(&load_vector("rpcgen", &name));
        assert_eq!(hand, oracle, "{name}.hex differs from rpcgen/{name}.hex");
    }
}

#[test]
fn every_line_is_one_xdr_unit() {
    for name in vector_names() {
        for line in load_vector("", &name) {
            assert_eq!(line.bytes.len(), UNIT, "{name}.hex line {}", line.lineno);
        }
    }
}

/// The `[DDP]` lines of a vector: a length word, then the bytes and their zero pad
/// (seed 004 sections 4.4.3.1 and 4.4.4.1). Returns (offset of the data, data length).
fn ddp_item(name: &str, lines: &[VectorLine]) -> Option<(usize, usize)> {
    let first = lines.iter().position(|l| l.ddp)?;
    let run = lines[first..].iter().take_while(|l| l.ddp).count();
    assert!(
        lines[first + run..].iter().all(|l| !l.ddp),
        "{name}: [DDP] lines must be contiguous"
    );
    let count_word: [u8; UNIT] = lines[first].bytes[..].try_into().expect("one unit");
    let count = u32::from_be_bytes(count_word) as usize;
    let data: Vec<u8> = vector_bytes(&lines[first + 1..first + run]);
    assert_eq!(
        data.len(),
        count.div_ceil(UNIT) * UNIT,
        "{name}: data + pad size"
    );
    assert!(
        data[count..].iter().all(|&b| b == 0),
        "{name}: XDR pad bytes must be zero"
    );
    let offset = vector_bytes(&lines[..first + 1]).len();
    Some((offset, count))
}

#[test]
fn ddp_items_are_a_length_word_then_padded_bytes() {
    let expected = [
        ("read3res_ok", Some((20, 6))),
        ("readlink3res_ok", Some((12, 3))),
        ("symlink3args", Some((52, 3))),
        ("write3args", Some((32, 5))),
        ("write3_call_msg", Some((72, 5))),
        // The failure arm carries no DDP-eligible item (its Write chunk stays unused).
        ("read3res_fail", None),
    ];
    for (name, item) in expected {
        let lines = load_vector("", name);
        assert_eq!(ddp_item(name, &lines), item, "{name}");
    }
}

/// A Read chunk's Position is a byte offset in the RPC message and "MUST be a multiple of
/// four" (seed 004 section 4.4.4.1).
#[test]
fn read_chunk_position_in_the_call_message_is_aligned() {
    let lines = load_vector("", "write3_call_msg");
    let (position, _) = ddp_item("write3_call_msg", &lines).expect("WRITE data is marked");
    assert_eq!(position % UNIT, 0);
    // The call message is the 40-byte AUTH_NONE call header followed by WRITE3args.
    let args = load_vector("", "write3args");
    let (args_offset, _) = ddp_item("write3args", &args).expect("WRITE data is marked");
    assert_eq!(position, 40 + args_offset);
    assert_eq!(vector_bytes(&lines)[40..], vector_bytes(&args)[..]);
}

//! The two forms of the NFSv3 DDP binding (`specs/nfs3.ddp` and the `/* @ddp */` marks in
//! `specs/nfs3.x`) agree with each other and with RFC 8267 section 4.

mod common;

use common::{field_type, marks_in_spec, parse_binding, typedef_base, Mark};
use rpcrdma_nfs3::{BINDING, RFC8267_DDP_ELIGIBLE, SPEC};

fn rfc8267() -> Vec<Mark> {
    RFC8267_DDP_ELIGIBLE
        .iter()
        .map(|(t, f)| (t.to_string(), f.to_string()))
        .collect()
}

fn sorted(mut marks: Vec<Mark>) -> Vec<Mark> {
    marks.sort();
    marks
}

#[test]
fn binding_file_lists_exactly_the_rfc8267_items() {
    let marks = parse_binding(BINDING).expect("specs/nfs3.ddp parses");
    assert_eq!(marks, rfc8267());
}

#[test]
fn spec_annotations_match_the_binding_file() {
    let in_spec = marks_in_spec(SPEC).expect("specs/nfs3.x marks are well placed");
    let in_binding = parse_binding(BINDING).expect("specs/nfs3.ddp parses");
    assert_eq!(sorted(in_spec), sorted(in_binding));
}

/// RFC 8267 section 4 marks file data (`opaque<>`) and pathnames (`nfspath3`, a `string<>`):
/// every mark must name a variable-length byte array, the only shape a chunk can carry whole.
#[test]
fn every_mark_names_a_variable_length_byte_array() {
    for (ty, field) in RFC8267_DDP_ELIGIBLE {
        let (type_name, variable) = field_type(SPEC, ty, field)
            .unwrap_or_else(|| panic!("{ty}.{field} is not declared in specs/nfs3.x"));
        let (base, variable) = match type_name.as_str() {
            "opaque" | "string" => (type_name.clone(), variable),
            other => typedef_base(SPEC, other)
                .unwrap_or_else(|| panic!("{ty}.{field}: typedef {other} not found")),
        };
        assert!(
            (base == "opaque" || base == "string") && variable,
            "{ty}.{field} has type {type_name} (base {base}), not opaque<> or string<>"
        );
    }
}

#[test]
fn rejects_binding_lines_that_are_not_type_dot_field() {
    assert!(parse_binding("WRITE3args\n").is_err());
    assert!(parse_binding("WRITE3args.data extra\n").is_err());
    assert!(parse_binding("WRITE3args.data\nWRITE3args.data\n").is_err());
    assert_eq!(
        parse_binding("# only a comment\n\nREAD3resok.data # trailing\n").unwrap(),
        vec![("READ3resok".to_string(), "data".to_string())]
    );
}

#[test]
fn rejects_misplaced_spec_annotations() {
    let outside = "/* @ddp */\ntypedef opaque x<>;\n";
    assert!(marks_in_spec(outside).is_err());
    let dangling = "struct s {\n    int a;\n    /* @ddp */\n};\n";
    assert!(marks_in_spec(dangling).is_err());
    let good = "struct s {\n    /* why */\n    /* @ddp */\n    opaque payload<>;\n};\n";
    assert_eq!(
        marks_in_spec(good).unwrap(),
        vec![("s".to_string(), "payload".to_string())]
    );
}

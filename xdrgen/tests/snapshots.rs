//! Snapshot tests (insta): generated code for the specs and some rpcsvc files, and the
//! rendered diagnostic for each defect of the drafts' XDR. New or changed snapshots must be
//! reviewed and accepted (`cargo insta review`); nothing is rewritten silently.

use std::path::Path;

use rpcrdma_xdrgen::diag::Severity;
use rpcrdma_xdrgen::Config;

fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/drafts")
            .join(name),
    )
    .unwrap()
}

/// Renders, from checking `files` strictly, the diagnostics whose message contains `needle`.
fn diag(files: &[&str], needle: &str) -> String {
    let texts: Vec<String> = files.iter().map(|f| fixture(f)).collect();
    let inputs: Vec<(&str, &str)> = files
        .iter()
        .zip(&texts)
        .map(|(f, t)| (*f, t.as_str()))
        .collect();
    let comp = Config::new().check_sources(&inputs);
    let picked: Vec<_> = comp
        .diagnostics
        .items
        .iter()
        .filter(|d| d.message.contains(needle))
        .cloned()
        .collect();
    assert!(
        !picked.is_empty(),
        "no diagnostic mentions {needle:?}:\n{}",
        comp.render()
    );
    comp.sources.render(&picked)
}

const V2: &[&str] = &["003-common.x", "003-baseops.x"];
const V1: &[&str] = &["004-rfc5666bis-01-s5.6.x"];
const V0: &[&str] = &["000-rpcrdma-00-s4.2.x"];
const V0_CCP: &[&str] = &["000-rpcrdma-00-s6.2.x"];

#[test]
fn diag_missing_brace() {
    insta::assert_snapshot!(diag(V2, "missing `{`"));
}

#[test]
fn diag_missing_equals() {
    insta::assert_snapshot!(diag(V2, "missing `=`"));
}

#[test]
fn diag_reversed_typedef() {
    insta::assert_snapshot!(diag(V2, "operands look reversed"));
}

#[test]
fn diag_typed_constant() {
    insta::assert_snapshot!(diag(V2, "typed constant `RDMA2_PROPID_RBSIZ`"));
}

#[test]
fn diag_undefined_type_used_as_discriminant() {
    insta::assert_snapshot!(diag(V2, "unknown type `rpcrdma2_errcode`"));
}

#[test]
fn diag_undefined_type_of_typed_constant() {
    insta::assert_snapshot!(diag(V2, "unknown type `rpcrdma2_proc`"));
}

#[test]
fn diag_union_arm_declared_twice() {
    insta::assert_snapshot!(diag(V2, "union arm `rdma_max_chunks` is declared twice"));
}

#[test]
fn diag_uint32_without_typedef() {
    insta::assert_snapshot!(diag(V1, "unknown type `uint32`"));
}

#[test]
fn diag_union_named_differently() {
    insta::assert_snapshot!(diag(V1, "unknown type `rpcrdma1_body`"));
}

#[test]
fn diag_multi_declaration_arm() {
    insta::assert_snapshot!(diag(V1, "union arm has 3 declarations"));
}

#[test]
fn diag_unnamed_discriminant() {
    insta::assert_snapshot!(diag(V0, "discriminant has no name"));
}

#[test]
fn diag_placeholder_program_number() {
    insta::assert_snapshot!(diag(V0_CCP, "nnnnnn"));
}

#[test]
fn diag_text_after_program_definition() {
    insta::assert_snapshot!(diag(V0_CCP, "expected a definition"));
}

/// What lenient mode reports for each draft: warnings only, and the code it generates.
#[test]
fn lenient_drafts() {
    for (name, files) in [("v0_s4_2", V0), ("v1", V1), ("v2", V2)] {
        let texts: Vec<String> = files.iter().map(|f| fixture(f)).collect();
        let inputs: Vec<(&str, &str)> = files
            .iter()
            .zip(&texts)
            .map(|(f, t)| (*f, t.as_str()))
            .collect();
        let comp = Config::new().lenient(true).check_sources(&inputs);
        assert!(
            comp.diagnostics
                .items
                .iter()
                .all(|d| d.severity != Severity::Error),
            "{}",
            comp.render()
        );
        let headlines: Vec<String> = comp
            .diagnostics
            .items
            .iter()
            .map(|d| format!("{:?}: {}", d.severity, d.message))
            .collect();
        insta::assert_snapshot!(format!("lenient_{name}_warnings"), headlines.join("\n"));
        insta::assert_snapshot!(format!("lenient_{name}_code"), comp.generate().unwrap());
    }
}

#[test]
fn rpcsvc_outputs() {
    for f in ["mount.x", "rquota.x", "yp.x"] {
        let path = Path::new("/usr/include/rpcsvc").join(f);
        if !path.exists() {
            eprintln!("skipped: {} is missing", path.display());
            continue;
        }
        let comp = Config::new().check_files(&[&path]).unwrap();
        insta::assert_snapshot!(format!("rpcsvc_{f}"), comp.generate().unwrap());
    }
}

/// Every `.x` under the workspace's `specs/` (filled by the spec extraction work).
#[test]
fn specs() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs");
    let any = std::fs::read_dir(&dir)
        .map(|d| {
            d.flatten()
                .any(|e| e.path().extension().is_some_and(|x| x == "x"))
        })
        .unwrap_or(false);
    if !any {
        eprintln!("skipped: no .x files in {}", dir.display());
        return;
    }
    insta::glob!("../../specs", "*.x", |path| {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(path).unwrap();
        let mut inputs = vec![(name.clone(), text)];
        // Extensions of RPC-over-RDMA v2 build on common.x (draft 003 section 6.2).
        let common = dir.join("common.x");
        if name != "common.x" && common.exists() {
            let alone = Config::new()
                .lenient(true)
                .check_sources(&[(name.as_str(), inputs[0].1.as_str())]);
            if alone.has_errors() {
                inputs.insert(
                    0,
                    ("common.x".into(), std::fs::read_to_string(&common).unwrap()),
                );
            }
        }
        let refs: Vec<(&str, &str)> = inputs
            .iter()
            .map(|(n, t)| (n.as_str(), t.as_str()))
            .collect();
        let comp = Config::new().lenient(true).check_sources(&refs);
        let out = match comp.generate() {
            Ok(code) => format!("{}\n{code}", comp.render()),
            Err(e) => e.to_string(),
        };
        insta::assert_snapshot!(out);
    });
}

#[test]
fn torture_output() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/torture/torture.x");
    let comp = Config::new().check_files(&[&path]).unwrap();
    insta::assert_snapshot!(comp.generate().unwrap());
}

/// The services of a small program: a client, a server trait and its registration, with
/// procedures taking no, one and several arguments, a void result, and a result carrying a
/// DDP-eligible item (`RESULT_DDP_ITEMS`).
#[test]
fn services_output() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/services/calc.x");
    let comp = Config::new().check_files(&[&path]).unwrap();
    insta::assert_snapshot!(comp.generate().unwrap());
}

/// Renders the diagnostics of checking `src` strictly as `t.x`.
fn diag_of(src: &str) -> String {
    let comp = Config::new().check_sources(&[("t.x", src)]);
    assert!(comp.has_errors());
    comp.render()
}

#[test]
fn diag_infinite_type() {
    insta::assert_snapshot!(diag_of(
        "struct a { int v; b inner; };\nstruct b { a back; };\n"
    ));
}

#[test]
fn diag_case_label_not_in_enum() {
    insta::assert_snapshot!(diag_of(
        "enum color { RED = 1, GREEN = 2 };\nenum other { BLUE = 3 };\nunion u switch (color c) {\n    case BLUE: void;\n    case GREN: int x;\n};\n"
    ));
}

#[test]
fn diag_duplicates() {
    insta::assert_snapshot!(diag_of(
        "struct a { int x; int x; };\nenum e { A = 1, B = 1 };\nunion u switch (int d) { case 1: void; case 1: void; };\nstruct a { int y; };\n"
    ));
}

#[test]
fn diag_union_arm_names_repeated_in_other_arms() {
    // A different type: rename; the same declaration in `default`: share the arm.
    insta::assert_snapshot!(diag_of(
        "union u switch (int d) {\ncase 1: int x;\ncase 2: hyper x;\ndefault: int x;\n};\n"
    ));
}

#[test]
fn diag_exact_repeats_reported_once() {
    // `B` is evaluated at each use of `A`; the error is the same each time.
    insta::assert_snapshot!(diag_of(
        "const A = B;\nconst C = A;\nstruct s { int x[A]; int y[A]; };\n"
    ));
}

#[test]
fn diag_in_file_and_position_order() {
    // A lexer error, a parser error and checker errors, found in that order, shown in
    // reading order.
    insta::assert_snapshot!(diag_of(
        "struct s { foo x; };\nconst N = 0x1ffffffffffffffffffff;\ntypedef int a[M];\n"
    ));
}

#[test]
fn diag_keyword_as_field_name_does_not_cascade() {
    insta::assert_snapshot!(diag_of("struct s { int opaque; };\n"));
}

#[test]
fn diag_case_label_undefined_under_enum_discriminant() {
    insta::assert_snapshot!(diag_of(
        "enum color { RED = 1, GREEN = 2 };\nunion u switch (color c) {\n    case RED: void;\n    case BLUE: int x;\n};\n"
    ));
}

#[test]
fn diag_needs_a_sibling_file() {
    // Run from the crate directory (cargo's default), so the paths in the report are stable.
    let comp = Config::new()
        .check_files(&["tests/drafts/003-baseops.x"])
        .unwrap();
    let picked: Vec<_> = comp
        .diagnostics
        .items
        .iter()
        .filter(|d| d.severity == Severity::Note && d.message.contains("not passed"))
        .cloned()
        .collect();
    assert_eq!(picked.len(), 1, "{}", comp.render());
    insta::assert_snapshot!(comp.sources.render(&picked));
    // With both files passed, no such note.
    let both = Config::new()
        .lenient(true)
        .check_files(&["tests/drafts/003-common.x", "tests/drafts/003-baseops.x"])
        .unwrap();
    assert!(!both.render().contains("not passed"));
}

#[test]
fn diag_unknown_constant_names_define() {
    insta::assert_snapshot!(diag_of("typedef opaque fhandle[FHSIZE];\n"));
}

#[test]
fn diag_define_malformed_and_shadowed() {
    let comp = Config::new()
        .define("1X", "2")
        .define("N", "two")
        .define("M", "5")
        .check_sources(&[(
            "t.x",
            "const M = 4;\ntypedef int a[M];\ntypedef int b[N];\n",
        )]);
    assert!(comp.has_errors());
    insta::assert_snapshot!(comp.render());
}

#[test]
fn diag_namespace_without_name_or_closing_brace() {
    insta::assert_snapshot!(diag_of(
        "namespace { struct a { int x; }; }\nnamespace n {\nstruct b { int y; };\n"
    ));
}

#[test]
fn diag_infinite_union_without_a_way_out() {
    insta::assert_snapshot!(diag_of(
        "union chain switch (int d) {\ncase 1:\n    chain again;\n};\n"
    ));
}

/// Renders the diagnostics of checking `src` in lenient mode as `t.x`.
fn lenient_diag_of(src: &str) -> String {
    let comp = Config::new().lenient(true).check_sources(&[("t.x", src)]);
    assert!(comp.has_errors(), "{}", comp.render());
    comp.render()
}

#[test]
fn diag_lenient_no_guess_of_another_kind() {
    // The one unused definition whose name matches is a credential union; the unknown name
    // is a procedure's argument.
    insta::assert_snapshot!(lenient_diag_of(
        "union auth_cred switch (int flavor) { case 1: int uid; default: void; };\n\
         struct getattr_res { int x; };\n\
         program P { version V { getattr_res GETATTR(getattr_cred) = 1; } = 1; } = 0x20000001;\n"
    ));
}

#[test]
fn diag_lenient_no_guess_when_ambiguous() {
    insta::assert_snapshot!(lenient_diag_of(
        "struct read_body { int a; };\nstruct write_body { int b; };\nstruct msg { int xid; call_body body; };\n"
    ));
}

#[test]
fn diag_lenient_no_reading_by_resemblance() {
    // RFC 2203's shapes: the credential union is carried in the RPC header, unused here;
    // `proc_req_arg_t` (a procedure's arguments) shares only its `_t` with it.
    insta::assert_snapshot!(lenient_diag_of(
        "union rpc_gss_cred_t switch (unsigned int vers) { case 1: opaque handle<>; };\n\
         struct rpc_gss_data_t {\n    unsigned int seq_num;\n    proc_req_arg_t arg;\n};\n"
    ));
}

#[test]
fn diag_lenient_field_named_after_a_definition_of_another_kind() {
    // The field names the struct, but `union` is written before the unknown name.
    insta::assert_snapshot!(lenient_diag_of(
        "struct rdma_body { int x; };\nstruct msg { union rpcrdma1_body rdma_body; };\n"
    ));
}

#[test]
fn diag_lenient_fields_named_after_different_definitions() {
    insta::assert_snapshot!(lenient_diag_of(
        "struct read_body { int a; };\nstruct write_body { int b; };\nstruct msg {\n    any_body read_body;\n    any_body write_body;\n};\n"
    ));
}

#[test]
fn diag_lenient_keyword_says_the_kind() {
    // `struct rpc_body` needs a struct; the matching unused definition is a union.
    insta::assert_snapshot!(lenient_diag_of(
        "union rdma_body switch (int d) { case 1: int x; };\nstruct msg { struct rpc_body body; };\n"
    ));
}

#[test]
fn diag_zcopaque_names_lenient_mode() {
    insta::assert_snapshot!(diag_of(
        "struct write_args {\n    unsigned hyper offset;\n    zcopaque data<MAXDATA>;\n};\nconst MAXDATA = 65536;\n"
    ));
}

#[test]
fn diag_annotation_on_a_typedef_is_ignored_with_a_warning() {
    let comp = Config::new()
        .lenient(true)
        .check_sources(&[("t.x", "typedef zcopaque buf<>;\nstruct s { buf b; };\n")]);
    assert!(!comp.has_errors(), "{}", comp.render());
    insta::assert_snapshot!(comp.render());
}

/// Comments that look like a DDP mark: each defect named at the `@`, with the mark meant.
const DDP_LOOKALIKES: &str = "struct write_args {\n    /* @DDP */ opaque data<>;\n    // @ ddp\n    string name<>;\n    /** @ddp: the payload */\n    opaque more<>;\n    /* @dpd */ opaque last<>;\n};\n";

#[test]
fn diag_ddp_mark_lookalikes() {
    insta::assert_snapshot!(diag_of(DDP_LOOKALIKES));
}

#[test]
fn diag_ddp_mark_lookalikes_lenient() {
    let comp = Config::new()
        .lenient(true)
        .check_sources(&[("t.x", DDP_LOOKALIKES)]);
    assert!(!comp.has_errors(), "{}", comp.render());
    insta::assert_snapshot!(comp.render());
}

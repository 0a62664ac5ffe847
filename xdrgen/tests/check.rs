//! One test per checking rule and per grammar feature, through the public API.

use rpcrdma_xdrgen::diag::Severity;
use rpcrdma_xdrgen::ir::{ItemKind, Payload, Prim, Repr};
use rpcrdma_xdrgen::{Compilation, Config};

fn strict(src: &str) -> Compilation {
    Config::new().check_sources(&[("t.x", src)])
}

fn lenient(src: &str) -> Compilation {
    Config::new().lenient(true).check_sources(&[("t.x", src)])
}

fn errors(c: &Compilation) -> Vec<String> {
    c.diagnostics
        .items
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| d.message.clone())
        .collect()
}

fn gen(src: &str) -> String {
    let c = strict(src);
    c.generate().unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn accepts_all_of_rfc4506_section_6() {
    let out = gen(r#"
        const DEC = 10; const HEX = 0x1F; const OCT = 017; const NEG = -5;
        typedef int i; typedef unsigned int u; typedef unsigned bare; typedef hyper h;
        typedef unsigned hyper uh; typedef float f; typedef double d; typedef bool b;
        typedef opaque fixed[HEX]; typedef opaque var<DEC>; typedef opaque any<>;
        typedef string s<DEC>; typedef string sany<>;
        typedef int fa[4]; typedef int va<OCT>; typedef int vany<>; typedef int *opt;
        enum color { RED = 1, GREEN = 2, BLUE = NEG };
        struct point { int x; int y; };
        struct anon { struct { int a; } inner; enum { E1 = 100, E2 = 101 } tag; };
        union u1 switch (color c) {
            case RED: case GREEN: point p;
            case BLUE: void;
        };
        union u2 switch (int n) { case 0: int a; case -1: void; default: string msg<>; };
        union u3 switch (bool b) { case TRUE: struct point p; case FALSE: void; };
        struct uses { struct point p; enum color c; union u2 un; };
    "#);
    for needle in [
        "pub const HEX: u32 = 31;",
        "pub const OCT: u32 = 15;",
        "pub const NEG: i32 = -5;",
        "pub type Bare = u32;",
        "pub struct Fixed(pub ::rpcrdma::xdr::Bytes);",
        "put_fixed_opaque(&self.0, 31)",
        "pub type Fa = [i32; 4];",
        "pub type Opt = ::core::option::Option<i32>;",
        "Blue = -5,",
        "Red(Point)",
        "Green(Point)",
        "CaseMinus1,",
        "Default {",
        "pub struct AnonInner",
        "pub enum AnonTag",
        "True(Point)",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in\n{out}");
    }
}

#[test]
fn rejects_quadruple_with_a_clear_message() {
    let c = strict("struct q { quadruple x; };");
    assert_eq!(errors(&c), vec!["`quadruple` is not supported"]);
}

#[test]
fn files_form_one_namespace_in_either_order() {
    let c = Config::new().check_sources(&[
        (
            "common.x",
            "typedef unsigned int uint32; struct a { later b; };",
        ),
        (
            "ext.x",
            "struct later { uint32 x; }; struct c { a inner; };",
        ),
    ]);
    assert!(errors(&c).is_empty(), "{}", c.render());
    let out = c.generate().unwrap();
    assert!(out.contains("from common.x, ext.x"));
}

#[test]
fn undefined_names_get_did_you_mean() {
    let c = strict(
        "struct point { int x; }; struct s { pointt p; opaque d<MAXLEN>; }; const MAXLEM = 4;",
    );
    let r = c.render();
    assert!(r.contains("unknown type `pointt`"), "{r}");
    assert!(r.contains("did you mean `point`?"), "{r}");
    assert!(r.contains("unknown constant `MAXLEN`"), "{r}");
    assert!(r.contains("did you mean `MAXLEM`?"), "{r}");
}

#[test]
fn duplicates_are_errors() {
    let c = strict(
        "struct a { int x; int x; }; struct a { int y; }; const K = 1; const K = 2;
         enum e { A = 1, B = 1 };
         union u switch (int d) { case 1: int p; case 1: int q; };",
    );
    let e = errors(&c);
    assert!(
        e.contains(&"field `x` is declared twice".to_string()),
        "{e:?}"
    );
    assert!(
        e.contains(&"type `a` is defined twice".to_string()),
        "{e:?}"
    );
    assert!(
        e.contains(&"constant `K` is defined twice".to_string()),
        "{e:?}"
    );
    assert!(
        e.iter().any(|m| m.contains("repeats the value of `A`")),
        "{e:?}"
    );
    assert!(
        e.contains(&"case value 1 appears twice".to_string()),
        "{e:?}"
    );
}

#[test]
fn duplicate_enum_values_become_aliases_in_lenient_mode() {
    let c = lenient("enum e { A = 1, B = 1 };");
    assert!(errors(&c).is_empty());
    let out = c.generate().unwrap();
    assert!(out.contains("pub const B: Self = Self::A;"), "{out}");
}

#[test]
fn case_labels_must_fit_the_discriminant() {
    let c = strict(
        "enum color { RED = 1, GREEN = 2 }; enum other { BLUE = 3 };
         union u switch (color c) { case BLUE: void; case GREN: void; };
         union v switch (bool b) { case 2: void; };
         union w switch (unsigned int n) { case -1: void; };
         struct x { int a; };
         union y switch (x d) { case 1: void; };",
    );
    let r = c.render();
    assert!(
        r.contains("case label `BLUE` is not a member of enum `color`"),
        "{r}"
    );
    assert!(
        r.contains("case label `GREN` is not a member of enum `color`"),
        "{r}"
    );
    assert!(r.contains("did you mean `GREEN`?"), "{r}");
    assert!(r.contains("case value 2 is not a bool"), "{r}");
    assert!(
        r.contains("case value -1 does not fit in an `unsigned int`"),
        "{r}"
    );
    assert!(r.contains("a union discriminant must be"), "{r}");
}

#[test]
fn sizes_must_be_constant_and_in_range() {
    let c = strict(r#"const S = "text"; struct s { opaque a[-1]; int b<S>; string c<NOPE>; };"#);
    let e = errors(&c);
    assert!(
        e.iter().any(|m| m.contains("size -1 is out of range")),
        "{e:?}"
    );
    assert!(
        e.iter()
            .any(|m| m.contains("expected an integer, found a string literal")),
        "{e:?}"
    );
    assert!(
        e.iter().any(|m| m.contains("unknown constant `NOPE`")),
        "{e:?}"
    );
}

#[test]
fn infinite_recursion_is_rejected_and_indirect_recursion_boxed() {
    let c = strict("struct a { int v; b inner; }; struct b { a back; };");
    assert!(errors(&c)
        .iter()
        .any(|m| m.contains("its size would be infinite")));
    let out = gen("struct tree { int v; tree *left; tree *right; int after; };
                   struct node { node children<>; };");
    // `*right` is not the last field, so `tree` is no list: recursion is boxed.
    assert!(
        out.contains("pub left: ::core::option::Option<::std::boxed::Box<Tree>>"),
        "{out}"
    );
    assert!(out.contains("dec.enter()?"), "{out}");
    assert!(out.contains("pub children: ::std::vec::Vec<Node>"), "{out}");
}

#[test]
fn self_referential_lists_become_vecs() {
    let c = strict(
        "struct seg { unsigned int len; };
         struct rl { seg entry; rl *next; };
         typedef struct ml *mlist;
         struct ml { int v; mlist next; };
         struct hdr { rl *reads; rl direct; mlist all; };",
    );
    assert!(errors(&c).is_empty(), "{}", c.render());
    let rl = c.model.get("rl").unwrap();
    assert!(
        matches!(&rl.kind, ItemKind::Struct { fields, list_next: Some(n) } if fields.len() == 1 && n == "next")
    );
    let ItemKind::Struct { fields, .. } = &c.model.get("hdr").unwrap().kind else {
        panic!()
    };
    assert_eq!(fields[0].repr, Repr::List("rl".into()));
    assert_eq!(fields[1].repr, Repr::NonEmptyList("rl".into()));
    let out = c.generate().unwrap();
    assert!(out.contains("encode_list(enc, &self.reads)"), "{out}");
    assert!(
        out.contains("encode_nonempty_list(enc, &self.direct, \"rl\")"),
        "{out}"
    );
    assert!(
        out.contains("pub struct Mlist(pub ::std::vec::Vec<Ml>);"),
        "{out}"
    );
}

#[test]
fn constants_take_the_type_they_are_used_at() {
    let c = strict(
        "const MAX = 16; const SMALL = 2; const BIG = 0x100000000; const NEG = -1;
         typedef opaque o<MAX>;
         union u switch (int d) { case SMALL: void; };",
    );
    let ty = |n: &str| match &c.model.get(n).unwrap().kind {
        ItemKind::Const { ty, .. } => *ty,
        _ => panic!(),
    };
    assert_eq!(ty("MAX"), Prim::UInt);
    assert_eq!(ty("SMALL"), Prim::Int);
    assert_eq!(ty("BIG"), Prim::UHyper);
    assert_eq!(ty("NEG"), Prim::Int);
    let out = c.generate().unwrap();
    assert!(out.contains("Some(MAX)"), "{out}");
}

#[test]
fn programs_with_several_arguments_and_void() {
    let out = gen("struct a { int x; };
         program P { version V1 { void NULLPROC(void) = 0; a TWO(a, int) = 1;
                                  int FIVE(int, int, int, int, int) = 2; } = 1; } = 0x20000001;");
    // Written in hex, generated in hex, with the decimal value in the doc.
    assert!(
        out.contains("pub const PROGRAM: u32 = 0x20000001;"),
        "{out}"
    );
    assert!(out.contains("= 0x20000001 (536870913)"), "{out}");
    assert!(out.contains("type Args = (super::super::A, i32);"), "{out}");
    // More than four arguments nest to the right; the wire order is unchanged.
    assert!(
        out.contains("type Args = (i32, (i32, i32, i32, i32));"),
        "{out}"
    );
    assert!(out.contains("type Result = ();"), "{out}");
}

#[test]
fn ddp_annotations_are_kept_on_declarations() {
    let c = strict(
        "struct w { /* @ddp */ opaque data<>; int len; };
         union u switch (int d) { case 1: //@ddp
             opaque payload<>; default: void; };",
    );
    assert!(errors(&c).is_empty(), "{}", c.render());
    let ItemKind::Struct { fields, .. } = &c.model.get("w").unwrap().kind else {
        panic!()
    };
    assert_eq!(fields[0].annotations.len(), 1);
    assert_eq!(fields[0].annotations[0].name, "ddp");
    assert!(fields[1].annotations.is_empty());
    let ItemKind::Union(u) = &c.model.get("u").unwrap().kind else {
        panic!()
    };
    let Payload::One(f) = &u.arms[0].payload else {
        panic!()
    };
    assert_eq!(f.annotations[0].name, "ddp");
    // The annotation's span covers the comment.
    let span = f.annotations[0].loc.span.clone();
    assert_eq!(&c.sources.text(f.annotations[0].loc.file)[span], "//@ddp");
}

#[test]
fn rpcgen_extensions() {
    let c = strict(
        "%#include <stdio.h>\n#ifdef RPC_HDR\nbogus;\n#else\nstruct s { u_int a; uint32_t b; char c; unsigned char d; };\n#endif\n\
         const STR = \"abc\";\nenum e { A, B, C = 7, D };\ntypedef struct s s;\n",
    );
    assert!(errors(&c).is_empty(), "{}", c.render());
    let out = c.generate().unwrap();
    assert!(out.contains("pub const STR: &str = \"abc\";"), "{out}");
    assert!(out.contains("D = 8,"), "{out}");
    assert!(c.render().contains("ignored 1 `%` pass-through line(s)"));
}

#[test]
fn identifiers_are_escaped() {
    let out =
        gen("struct type { int self; int type; int fn; int loop1; }; enum Self { SELF = 1 };");
    assert!(out.contains("pub struct Type {"), "{out}");
    assert!(out.contains("pub self_: i32"), "{out}");
    assert!(out.contains("pub r#type: i32"), "{out}");
    assert!(out.contains("pub r#fn: i32"), "{out}");
    assert!(out.contains("pub enum Self_ {"), "{out}");
}

#[test]
fn derives_follow_the_fields() {
    let out = gen("struct f { float x; }; struct c { int a; hyper b; }; struct v { opaque d<>; };");
    assert!(
        out.contains("#[derive(Debug, Clone, PartialEq, Copy, Default)]\npub struct F"),
        "{out}"
    );
    assert!(
        out.contains("#[derive(Debug, Clone, PartialEq, Eq, Hash, Copy, Default)]\npub struct C"),
        "{out}"
    );
    assert!(
        out.contains("#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]\npub struct V"),
        "{out}"
    );
    assert!(out.contains("const MIN_ENCODED_LEN: usize = 12;"), "{out}");
}

#[test]
fn program_numbers_written_in_decimal_stay_decimal() {
    let out = gen("program P { version V1 { void NULLPROC(void) = 0; } = 1; } = 100003;");
    assert!(out.contains("pub const PROGRAM: u32 = 100003;"), "{out}");
}

#[test]
fn enums_default_to_their_zero_member_else_the_first() {
    let out = gen("enum z { A = 2, B = 0 }; enum n { C = 5, D = 1 };");
    assert!(out.contains("#[default]\n    B = 0,"), "{out}");
    assert!(out.contains("#[default]\n    C = 5,"), "{out}");
}

#[test]
fn unions_default_only_where_zero_selects_an_arm() {
    let out = gen("enum e { ONE = 1, TWO = 2 };
         union by_enum switch (e d) { case ONE: void; case TWO: int x; };
         union by_int switch (int d) { case 0: int x; default: void; };
         union no_zero switch (int d) { case 1: void; };
         union by_default switch (unsigned int d) { case 1: void; default: hyper h; };");
    assert!(!out.contains("Default for ByEnum"), "{out}");
    assert!(!out.contains("Default for NoZero"), "{out}");
    assert!(
        out.contains("Self::Case0(::core::default::Default::default())"),
        "{out}"
    );
    assert!(
        out.contains("Self::Default {\n            discriminant: 0,\n            value: ::core::default::Default::default(),"),
        "{out}"
    );
}

#[test]
fn defaults_never_recurse_and_fixed_sizes_are_filled() {
    let out = gen("union t switch (int d) { case 0: t *inner; case 1: void; };
         struct tree { int v; tree *left; tree *right; };
         struct s { opaque fixed[6]; s_list *l; int a[3]; };
         struct s_list { int v; s_list *next; };
         struct holds { s_list one; };");
    // `t`'s zero case holds an optional `t`: `None`, so it has a default.
    assert!(out.contains("Default for T {"), "{out}");
    // Recursion goes through `*` (XDR rejects any other cycle), whose default is `None`.
    assert!(out.contains("Default)]\npub struct Tree"), "{out}");
    assert!(
        out.contains("::rpcrdma::xdr::Bytes::from(::std::vec![0u8; 6])"),
        "{out}"
    );
    assert!(
        out.contains("::core::array::from_fn(|_| ::core::default::Default::default())"),
        "{out}"
    );
    // A bare list is one element or more.
    assert!(
        out.contains("one: ::std::vec![::core::default::Default::default()]"),
        "{out}"
    );
    assert!(out.contains("pub type SListItem = SList;"), "{out}");
    assert!(out.contains("pub l: ::std::vec::Vec<SListItem>"), "{out}");
}

#[test]
fn output_is_deterministic() {
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/drafts/004-rfc5666bis-01-s5.6.x"
    ))
    .unwrap();
    let a = Config::new()
        .lenient(true)
        .check_sources(&[("v1.x", &src)])
        .generate()
        .unwrap();
    let b = Config::new()
        .lenient(true)
        .check_sources(&[("v1.x", &src)])
        .generate()
        .unwrap();
    assert_eq!(a, b);
    assert!(a.starts_with("// @generated by xdrgen"));
}

#[test]
fn names_that_clash_in_rust_are_errors() {
    let c =
        strict("struct foo_bar { int a; }; struct fooBar { int b; }; const x = 1; const X = 2;");
    let r = c.render();
    assert!(
        r.contains("`foo_bar` and `fooBar` both become the Rust type FooBar"),
        "{r}"
    );
    assert!(
        r.contains("`x` and `X` both become the Rust const X"),
        "{r}"
    );
}

#[test]
fn misplaced_annotations_are_warned_about() {
    let c = strict("/* @ddp */ struct a { int x; /* @ddp */ };");
    let r = c.render();
    assert_eq!(
        r.matches("annotation `@ddp` is not before a declaration")
            .count(),
        2,
        "{r}"
    );
    assert!(!c.has_errors());
}

#[test]
fn literal_labels_of_an_enum_switch_must_be_member_values() {
    let c =
        strict("enum e { A = 1, B = 2 }; union u switch (e d) { case 1: void; case 2: int x; };");
    assert!(!c.has_errors(), "{}", c.render());
    let out = c.generate().unwrap();
    assert!(out.contains("E::A =>"), "{out}");
    let c = strict("enum e { A = 1 }; union u switch (e d) { case 7: void; };");
    assert!(
        c.render()
            .contains("case label `7` is not a member of enum `e`"),
        "{}",
        c.render()
    );
}

#[test]
fn a_missing_semicolon_does_not_swallow_the_next_definition() {
    let c = strict("struct a { int x; }\nstruct b { int y; };\nstruct c { b inner; };");
    assert_eq!(errors(&c), vec!["expected `;` after the definition"]);
    assert!(c.model.get("b").is_some());
}

#[test]
fn percent_define_constants_fill_in_undefined_names() {
    let c = strict("%#define MAXLEN 16\n%#define MAXLEN2 MAXLEN+1\n%#define UNUSED 3\nstruct s { opaque d<MAXLEN2>; };");
    assert!(!c.has_errors(), "{}", c.render());
    let out = c.generate().unwrap();
    assert!(out.contains("pub const MAXLEN2: u32 = 17;"), "{out}");
    assert!(out.contains("pub const MAXLEN: "), "{out}");
    assert!(!out.contains("UNUSED"), "{out}");
    // A real definition wins over a `%#define`.
    let c = strict("%#define N 16\nconst N = 4;\nstruct s { opaque d<N>; };");
    assert!(c.generate().unwrap().contains("pub const N: u32 = 4;"));
}

#[test]
fn misspelled_keywords_get_suggestions() {
    let r = strict("strcut a { int x; };\nstruct b { unsinged int y; };").render();
    assert!(r.contains("did you mean `struct`?"), "{r}");
    assert!(r.contains("did you mean `unsigned`?"), "{r}");
}

#[test]
fn recursion_through_a_union_with_a_way_out_is_finite() {
    let c = strict(
        "union opt switch (bool p) { case TRUE: node n; case FALSE: void; };
         struct node { int v; opt next; };
         union e switch (int op) { case 1: e pair[2]; default: void; };",
    );
    assert!(!c.has_errors(), "{}", c.render());
    let out = c.generate().unwrap();
    assert!(out.contains("True(::std::boxed::Box<Node>)"), "{out}");
    assert!(out.contains("Case1([::std::boxed::Box<E>; 2])"), "{out}");
}

#[test]
fn recursion_with_no_way_out_stays_an_error_once_per_cycle() {
    for src in [
        "union u switch (int d) { case 1: u again; }; struct outer { u x; };",
        "struct a { int v; b inner; }; struct b { a back; };",
        "union u switch (bool b) { case TRUE: s x; case FALSE: s y; }; struct s { u z; };",
    ] {
        let c = strict(src);
        let r = c.render();
        assert_eq!(
            r.matches("contains itself: its size would be infinite")
                .count(),
            1,
            "{src}\n{r}"
        );
        assert!(r.contains("changes the wire format"), "{r}");
    }
}

#[test]
fn lenient_reads_an_unknown_type_only_as_the_definition_its_field_is_named_after() {
    // The field is named after the one unused union, as in the rfc5666bis draft: read as it
    // (a warning).
    let c = lenient(
        "union rdma_body switch (int d) { case 1: int x; }; struct msg { rpcrdma1_body rdma_body; };",
    );
    assert!(!c.has_errors(), "{}", c.render());
    assert!(c
        .render()
        .contains("lenient mode reads `rpcrdma1_body` as `rdma_body`"));
    // The same with `struct` written before the name: not a union, no reading.
    let c = lenient(
        "union rdma_body switch (int d) { case 1: int x; }; struct msg { struct rpcrdma1_body rdma_body; };",
    );
    assert!(c.has_errors());
    assert!(c
        .render()
        .contains("`rdma_body` is a union, and `rpcrdma1_body` is written `struct`"));
    // A field named otherwise: the names only resemble each other (same last `_` segment),
    // which is a suggestion, not a reading.
    let c = lenient(
        "union rdma_body switch (int d) { case 1: int x; }; struct msg { rpcrdma1_body body; };",
    );
    let r = c.render();
    assert_eq!(errors(&c), ["unknown type `rpcrdma1_body`"], "{r}");
    assert!(
        r.contains("did you mean `rdma_body`? write that name here, or define `rpcrdma1_body`"),
        "{r}"
    );
    assert!(c.generate().is_err());
    // Two candidates: no reading, both listed.
    let c = lenient(
        "struct read_body { int a; }; struct write_body { int b; }; struct msg { call_body body; };",
    );
    let r = c.render();
    assert!(c.has_errors(), "{r}");
    assert!(
        r.contains("did you mean one of `read_body`, `write_body`?"),
        "{r}"
    );
}

/// The shapes of RFC 2203 section 5: the credential union travels in the RPC header (so the
/// file never uses it), and `proc_req_arg_t`, the procedure's own arguments, is defined by
/// each program, not here.
const RPCSEC_GSS: &str = "\
enum rpc_gss_proc_t { RPCSEC_GSS_DATA = 0, RPCSEC_GSS_INIT = 1, RPCSEC_GSS_CONTINUE_INIT = 2, RPCSEC_GSS_DESTROY = 3 };
enum rpc_gss_service_t { rpc_gss_svc_none = 1, rpc_gss_svc_integrity = 2, rpc_gss_svc_privacy = 3 };
struct rpc_gss_cred_vers_1_t { rpc_gss_proc_t gss_proc; unsigned int seq_num; rpc_gss_service_t service; opaque handle<>; };
const RPCSEC_GSS_VERS_1 = 1;
union rpc_gss_cred_t switch (unsigned int vers) { case RPCSEC_GSS_VERS_1: rpc_gss_cred_vers_1_t rpc_gss_cred_vers_1_t; };
struct rpc_gss_data_t { unsigned int seq_num; proc_req_arg_t arg; };
";

#[test]
fn lenient_never_reads_rpcsec_gss_arguments_as_the_credential_union() {
    // `proc_req_arg_t` and the unused `rpc_gss_cred_t` share their last `_` segment; reading
    // one as the other would decode a procedure's arguments as a credential.
    for c in [lenient(RPCSEC_GSS), strict(RPCSEC_GSS)] {
        let r = c.render();
        assert_eq!(errors(&c), ["unknown type `proc_req_arg_t`"], "{r}");
        assert!(r.contains("did you mean `rpc_gss_cred_t`?"), "{r}");
        assert!(!r.contains("reads `proc_req_arg_t` as"), "{r}");
        assert!(c.generate().is_err());
    }
    // Defined, it is what it says.
    let defined = format!("{RPCSEC_GSS}typedef opaque proc_req_arg_t<>;\n");
    let out = lenient(&defined).generate().unwrap();
    assert!(out.contains("pub arg: ProcReqArgT"), "{out}");
}

#[test]
fn zcopaque_is_ddp_opaque_in_lenient_mode_and_an_error_otherwise() {
    let src = "struct w { unsigned hyper off; zcopaque data<>; };";
    let c = lenient(src);
    assert!(!c.has_errors(), "{}", c.render());
    let out = c.generate().unwrap();
    assert!(
        out.contains("enc.put_ddp_opaque(&self.data, ::core::option::Option::None)?;"),
        "{out}"
    );
    // The same as the standard spelling with a mark.
    let marked = lenient("struct w { unsigned hyper off; /* @ddp */ opaque data<>; };")
        .generate()
        .unwrap();
    let body = |s: &str| s[s.find("pub struct W").unwrap()..].to_string();
    assert_eq!(body(&out).replace("zcopaque", "opaque"), body(&marked));
    let strict = strict(src);
    assert!(strict.has_errors());
    assert!(strict.render().contains("lenient mode (`--lenient`"));
}

#[test]
fn sibling_hint_only_when_the_siblings_define_every_missing_type() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    write(
        "types.x",
        "namespace stellar { typedef opaque Hash[32]; typedef unsigned int uint32; }",
    );
    let uses = write("uses.x", "struct s { Hash h; uint32 n; };");
    let c = Config::new().check_files(&[&uses]).unwrap();
    let r = c.render();
    assert!(
        r.contains("needs `Hash`, `uint32` from") && r.contains("types.x`, which was not passed"),
        "{r}"
    );
    // A type defined nowhere: no hint.
    let more = write("more.x", "struct t { Hash h; Nowhere n; };");
    let r = Config::new().check_files(&[&more]).unwrap().render();
    assert!(!r.contains("not passed"), "{r}");
}

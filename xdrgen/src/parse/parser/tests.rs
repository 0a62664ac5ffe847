//! The grammar's unit tests.

use super::*;
use crate::parse::lexer::lex;

fn parse(src: &str, lenient: bool) -> (Specification, Diagnostics) {
    let lexed = lex(src);
    assert!(lexed.errors.is_empty(), "{:?}", lexed.errors);
    let toks = lexed.tokens;
    let mut diags = Diagnostics::default();
    let spec = super::parse(&toks, FileId(0), lenient, &mut diags);
    (spec, diags)
}

fn one(src: &str) -> Definition {
    let (spec, diags) = parse(src, false);
    assert!(!diags.has_errors(), "{diags:?}");
    assert_eq!(spec.definitions.len(), 1);
    spec.definitions[0].0.clone()
}

#[test]
fn constants() {
    let Definition::Const { value, ty, .. } = one("const X = -0x10;") else {
        panic!()
    };
    assert!(ty.is_none());
    assert!(matches!(value, Value::Lit { value: -16, .. }));
}

#[test]
fn declarations() {
    let Definition::Struct(_, body) =
        one("struct s { opaque a[4]; opaque b<>; string c<10>; int d[2]; int e<>; int *f; struct t g; };")
    else {
        panic!()
    };
    let kinds: Vec<&DeclKind> = body.fields.iter().map(|f| &f.kind).collect();
    assert!(matches!(kinds[0], DeclKind::FixedOpaque(_)));
    assert!(matches!(kinds[1], DeclKind::VarOpaque(None)));
    assert!(matches!(kinds[2], DeclKind::String(Some(_))));
    assert!(matches!(kinds[3], DeclKind::FixedArray(..)));
    assert!(matches!(kinds[4], DeclKind::VarArray(_, None)));
    assert!(matches!(kinds[5], DeclKind::Optional(_)));
    assert!(
        matches!(kinds[6], DeclKind::Plain(Type { kind: TypeKind::Named(n), .. }) if n.name == "t")
    );
}

#[test]
fn unions_with_shared_arms_and_default() {
    let Definition::Union(_, u) =
        one("union u switch (int d) { case 1: case 2: int a; case 3: void; default: void; };")
    else {
        panic!()
    };
    assert_eq!(u.arms.len(), 2);
    assert_eq!(u.arms[0].labels.len(), 2);
    assert!(u.arms[1].decls.is_empty());
    assert!(u.default.is_some());
}

#[test]
fn programs() {
    let Definition::Program(p) = one(
        "program P { version V { void NUL(void) = 0; int ADD(int, int) = 1; } = 2; } = 0x20000000;",
    ) else {
        panic!()
    };
    assert_eq!(p.versions[0].procedures.len(), 2);
    assert_eq!(p.versions[0].procedures[1].args.len(), 2);
    assert!(p.versions[0].procedures[0].result.is_none());
}

#[test]
fn quirks_are_errors_unless_lenient() {
    let src =
        "const uint32 X 1; struct s int a; }; union u switch (int) { case 1: int a; int b; };";
    let (strict, d) = parse(src, false);
    assert_eq!(d.error_count(), 5, "{d:?}");
    let (lenient, d) = parse(src, true);
    assert!(!d.has_errors(), "{d:?}");
    // Both modes repair the same way, so checking can go on.
    assert_eq!(strict, lenient);
    assert_eq!(lenient.definitions.len(), 3);
}

/// Every defect of a file in one run, in source order, at the positions the hand-written
/// parser reported (this list was taken from it).
#[test]
fn diagnostics_in_order_with_positions() {
    use crate::diag::Severity::{Error, Warning};
    let src = "const uint32 A 1;\nconst B = ;\nstrcut s { int a; };\n\
        struct t int x; string s[4]; opaque o; };\n\
        union u switch (int) { case 1: int a; int b; default: void; default: void; };\n\
        enum e { X = 1, Y, };\ntypedef int z /* @ddp */;\n\
        /* @ddp */ typedef struct { } empty;\n\
        program P { version V { void F(int, ) = 1; } = 1; } = 1;\n\
        program Q { version W { void G(void) = 1; } = 1; } = 2\n\
        struct after { unsinged int x; int y };\n";
    let definition = "a definition (`const`, `typedef`, `enum`, `struct`, `union` or `program`)";
    let expected = [
        (
            Error,
            "typed constant `A`: XDR constants have no type".to_string(),
            6..14,
        ),
        (
            Error,
            "missing `=` in the definition of constant `A`".into(),
            14..14,
        ),
        (
            Error,
            "expected the constant's value, found `;`".into(),
            28..29,
        ),
        (
            Error,
            format!("expected {definition}, found `strcut`"),
            30..36,
        ),
        (Error, "missing `{` after `struct t`".into(), 59..59),
        (Error, "a string cannot have a fixed length".into(), 67..78),
        (Error, "`opaque` needs a length".into(), 88..88),
        (
            Error,
            "the union's discriminant has no name".into(),
            112..112,
        ),
        (
            Error,
            "union arm has 2 declarations; XDR allows one per arm".into(),
            131..136,
        ),
        (
            Error,
            "a union has at most one `default` arm".into(),
            153..167,
        ),
        (
            Warning,
            "annotation `@ddp` is not before a declaration in a struct or union arm".into(),
            207..217,
        ),
        (
            Warning,
            "annotation `@ddp` is not before a declaration in a struct or union arm".into(),
            219..229,
        ),
        (Error, "a struct needs at least one field".into(), 247..248),
        (Error, "expected a type, found `)`".into(), 292..293),
        (
            Error,
            format!("expected {definition}, found `}}`"),
            299..300,
        ),
        (
            Error,
            format!("expected {definition}, found `}}`"),
            306..307,
        ),
        (Error, "expected `;` after the definition".into(), 367..367),
        (
            Error,
            "expected a name, found keyword `int`".into(),
            392..395,
        ),
        (
            Error,
            "expected `;` after the field, found `}`".into(),
            404..404,
        ),
    ];
    let (spec, d) = parse(src, false);
    let got: Vec<_> = d
        .items
        .iter()
        .map(|d| {
            let span = d.primary.as_ref().map(|(loc, _)| loc.span.clone());
            (d.severity, d.message.clone(), span.unwrap_or(0..0))
        })
        .collect();
    assert_eq!(got, expected);
    assert_eq!(d.items[3].help, ["did you mean `struct`?"]);
    assert_eq!(d.items[17].help, ["did you mean `unsigned`?"]);
    let spans: Vec<_> = spec
        .definitions
        .iter()
        .map(|(_, l)| l.span.clone())
        .collect();
    assert_eq!(
        spans,
        [
            0..17,
            51..92,
            93..170,
            171..192,
            193..218,
            230..255,
            313..367,
            368..407
        ]
    );
}

#[test]
fn nesting_is_bounded_and_the_bound_fits_an_ordinary_thread() {
    let nest = |levels: usize| {
        [
            format!(
                "typedef {} int x; {} t;",
                "struct { ".repeat(levels),
                "} y; ".repeat(levels)
            ),
            format!(
                "typedef {} int x; {} t;",
                "union switch (int d) { case 1: ".repeat(levels),
                "} y; ".repeat(levels)
            ),
            format!("typedef {} int d) t;", "union switch (".repeat(levels)),
        ]
    };
    // A spawned thread's default stack holds MAX_NESTING levels, even unoptimised.
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            for (levels, refused) in [(MAX_NESTING, false), (MAX_NESTING + 1, true), (500, true)] {
                for src in nest(levels) {
                    let (_, d) = parse(&src, false);
                    let too_deep = d
                        .items
                        .iter()
                        .any(|d| d.message.contains("nested deeper than 32"));
                    assert_eq!(too_deep, refused, "{levels} levels: {d:?}");
                }
            }
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn recovers_after_errors() {
    let (spec, d) = parse(
        "struct a { int ; }; struct b { int x; }; garbage here; enum e { A = 1 };",
        false,
    );
    assert!(d.error_count() >= 2);
    let names: Vec<String> = spec
        .definitions
        .iter()
        .filter_map(|(def, _)| match def {
            Definition::Struct(n, _) | Definition::Enum(n, _) => Some(n.name.clone()),
            _ => None,
        })
        .collect();
    assert!(
        names.contains(&"b".to_string()) && names.contains(&"e".to_string()),
        "{names:?}"
    );
}

#[test]
fn namespaces_are_flattened_and_nested_ones_too() {
    let (spec, d) = parse(
        "namespace a { typedef int x; namespace b { struct s { x f; }; } const C = 1; };\nenum e { E = 0 };",
        false,
    );
    assert!(!d.has_errors(), "{d:?}");
    let names: Vec<String> = spec
        .definitions
        .iter()
        .map(|(def, _)| match def {
            Definition::Typedef(t) => t.name.name.clone(),
            Definition::Struct(n, _) | Definition::Enum(n, _) => n.name.clone(),
            Definition::Const { name, .. } => name.name.clone(),
            _ => String::new(),
        })
        .collect();
    assert_eq!(names, ["x", "s", "C", "e"]);
    let notes: Vec<&str> = d.items.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(
        notes,
        [
            "namespace `a`: its definitions join the inputs' one namespace",
            "namespace `b`: its definitions join the inputs' one namespace"
        ]
    );
}

#[test]
fn malformed_namespaces_are_reported_and_the_rest_kept() {
    // No name; an unclosed body at the end of the file, with a bad definition inside.
    let (spec, d) = parse(
        "namespace { struct a { int x; }; }\nnamespace n {\nstruct b { int y; };\njunk;\nstruct c { int z; };\n",
        false,
    );
    let errors: Vec<&str> = d
        .items
        .iter()
        .filter(|d| d.severity == crate::diag::Severity::Error)
        .map(|d| d.message.as_str())
        .collect();
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(errors[0].starts_with("expected the namespace's name"));
    assert!(errors[1].contains("found `junk`"));
    assert_eq!(
        errors[2],
        "expected `}` to close namespace `n`, found end of file"
    );
    assert_eq!(spec.definitions.len(), 2, "b and c are kept");
}

#[test]
fn namespaces_nest_only_to_the_bound() {
    let src = format!(
        "{} typedef int x; {}",
        "namespace n { ".repeat(MAX_NESTING + 1),
        "} ".repeat(MAX_NESTING + 1)
    );
    let (_, d) = parse(&src, false);
    assert!(
        d.items
            .iter()
            .any(|d| d.message == "namespaces nested deeper than 32"),
        "{d:?}"
    );
}

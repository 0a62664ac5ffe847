//! DDP-eligibility marks: accepted on opaque, string and array items in structs and union arms
//! (written in the `.x` or outside it), refused elsewhere with a precise diagnostic.

const SPEC: &str = "\
typedef string nfspath3<>;
typedef opaque fh<64>;
struct write_args {
    fh file;
    unsigned hyper offset;
    /* @ddp */ opaque data<>;
};
struct readlink_ok { nfspath3 data; unsigned count; };
union readlink_res switch (int status) {
case 0: readlink_ok ok;
default: void;
};
struct holder { readlink_res r; fh h; fh *maybe; unsigned nums<16>; };
";

fn generate(marks: &[&str]) -> Result<String, String> {
    let mut cfg = rpcrdma_xdrgen::Config::new();
    for m in marks {
        cfg.ddp(*m);
    }
    let comp = cfg.check_sources(&[("nfs.x", SPEC)]);
    comp.generate().map_err(|_| comp.render())
}

#[test]
fn accepts_marks_on_opaque_string_and_array_items() {
    let out = generate(&[
        "readlink_ok.data",
        "holder.h",
        "holder.maybe",
        "holder.nums",
    ])
    .unwrap();
    assert!(out.contains("enc.put_ddp_opaque(&self.data, ::core::option::Option::None)?;"));
    assert!(out.contains("enc.put_ddp_string(&self.data, ::core::option::Option::None)?;"));
    assert!(out.contains("put_ddp_opaque(&(&self.h).0, ::core::option::Option::Some(64))"));
    assert!(out.contains("enc.put_ddp_array(&self.nums, ::core::option::Option::Some(16))?;"));
}

#[test]
fn the_annotation_in_the_file_is_a_mark() {
    let out = generate(&[]).unwrap();
    assert_eq!(
        out.matches("put_ddp_").count(),
        1,
        "only write_args.data is marked"
    );
}

#[test]
fn rejects_a_mark_on_a_scalar() {
    let err = generate(&["readlink_ok.count"]).unwrap_err();
    assert!(
        err.contains("`readlink_ok.count` is a scalar (unsigned int)"),
        "{err}"
    );
    assert!(err.contains("<--ddp>:1:1"), "{err}");
    assert!(
        err.contains("nfs.x:8:37"),
        "points at the declaration: {err}"
    );
}

#[test]
fn rejects_a_mark_on_a_union_and_suggests_the_data_in_an_arm() {
    let err = generate(&["holder.r"]).unwrap_err();
    assert!(
        err.contains("is a union (`readlink_res`), and a union is never DDP-eligible"),
        "{err}"
    );
    assert!(err.contains("section 4.4.3.2"), "{err}");
    assert!(err.contains("e.g. `readlink_ok.data`"), "{err}");
}

#[test]
fn rejects_a_mark_on_a_struct_and_suggests_its_bulk_data() {
    let err = generate(&["readlink_res.ok"]).unwrap_err();
    assert!(err.contains("is a struct (`readlink_ok`)"), "{err}");
    assert!(err.contains("e.g. `readlink_ok.data`"), "{err}");
}

#[test]
fn rejects_marks_naming_nothing_with_did_you_mean() {
    let err = generate(&["write_arg.data"]).unwrap_err();
    assert!(
        err.contains("no struct or union named `write_arg`"),
        "{err}"
    );
    assert!(err.contains("did you mean `write_args.data`?"), "{err}");
    let err = generate(&["write_args.dat"]).unwrap_err();
    assert!(
        err.contains("`write_args` has no member named `dat`"),
        "{err}"
    );
    assert!(err.contains("did you mean `write_args.data`?"), "{err}");
    let err = generate(&["fh.x"]).unwrap_err();
    assert!(err.contains("`fh` is not a struct or a union"), "{err}");
}

#[test]
fn rejects_malformed_marks_and_reads_binding_files() {
    let err = generate(&["nodot"]).unwrap_err();
    assert!(err.contains("not of the form `Type.member`"), "{err}");

    let dir = std::env::temp_dir().join(format!("xdrgen-binding-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let binding = dir.join("nfs.ddp");
    std::fs::write(
        &binding,
        "# RFC 8267\nreadlink_ok.data\n  holder.r  # wrong\n",
    )
    .unwrap();
    let comp = rpcrdma_xdrgen::Config::new()
        .binding_file(&binding)
        .check_sources(&[("nfs.x", SPEC)]);
    let err = comp.render();
    assert!(comp.has_errors());
    assert!(
        err.contains("nfs.ddp:3:3"),
        "points into the binding file: {err}"
    );
    std::fs::write(&binding, "readlink_ok.data\n").unwrap();
    let out = rpcrdma_xdrgen::Config::new()
        .binding_file(&binding)
        .check_sources(&[("nfs.x", SPEC)])
        .generate()
        .unwrap();
    assert!(out.contains("put_ddp_string"));
}

#[test]
fn unknown_annotations_far_from_ddp_warn() {
    let spec = "struct s { /* @deprecated */ opaque data<>; };";
    let comp = rpcrdma_xdrgen::Config::new().check_sources(&[("s.x", spec)]);
    assert!(!comp.has_errors(), "{}", comp.render());
    let text = comp.render();
    assert!(
        text.contains("warning: unknown annotation `@deprecated`")
            && text.contains("the only annotation xdrgen reads is the DDP mark"),
        "{text}"
    );
}

/// `struct s` with `comment` on the line before its opaque field, checked in either mode.
fn with_comment(comment: &str, lenient: bool) -> rpcrdma_xdrgen::Compilation {
    let spec =
        format!("struct s {{\n    unsigned count;\n    {comment}\n    opaque data<>;\n}};\n");
    rpcrdma_xdrgen::Config::new()
        .lenient(lenient)
        .check_sources(&[("s.x", &spec)])
}

#[test]
fn rejects_a_mark_written_off_form_and_lenient_mode_reads_it_as_the_mark() {
    for (comment, fix) in [
        ("/* @DDP */", "/* @ddp */"),
        ("/* @Ddp */", "/* @ddp */"),
        ("/* @ ddp */", "/* @ddp */"),
        ("/** @ddp */", "/* @ddp */"),
        ("/* @ddp: the bulk data */", "/* @ddp */"),
        ("// @DDP", "// @ddp"),
        ("/// @ddp", "// @ddp"),
    ] {
        let strict = with_comment(comment, false);
        let text = strict.render();
        assert_eq!(strict.diagnostics.error_count(), 1, "{comment}: {text}");
        assert!(
            text.contains("looks like a DDP mark but is not one")
                && text.contains("s.x:3:")
                && text.contains(&format!("did you mean `{fix}`?")),
            "{comment}: {text}"
        );
        assert!(strict.generate().is_err());
        let lenient = with_comment(comment, true);
        assert!(!lenient.has_errors(), "{comment}: {}", lenient.render());
        assert!(lenient.render().contains("warning:"), "{comment}");
        let out = lenient.generate().unwrap();
        assert!(
            out.contains("enc.put_ddp_opaque(&self.data, ::core::option::Option::None)?;"),
            "{comment}: the field is marked"
        );
    }
}

#[test]
fn rejects_a_misspelled_mark_and_lenient_mode_reads_no_mark() {
    for comment in [
        "/* @dpd */",
        "/* @dp */",
        "// @ddpp",
        "/* @ dpd */",
        "/* @DPD */",
    ] {
        let strict = with_comment(comment, false);
        let text = strict.render();
        assert_eq!(strict.diagnostics.error_count(), 1, "{comment}: {text}");
        assert!(
            text.contains("looks like a DDP mark but is not one") && text.contains("did you mean"),
            "{comment}: {text}"
        );
        let lenient = with_comment(comment, true);
        let text = lenient.render();
        assert!(!lenient.has_errors(), "{comment}: {text}");
        assert!(
            text.contains("warning:") && text.contains("not DDP-eligible"),
            "{comment}: {text}"
        );
        let out = lenient.generate().unwrap();
        assert!(!out.contains("put_ddp_"), "{comment}: no mark guessed");
    }
}

#[test]
fn accepts_ordinary_comments_that_contain_an_at_sign() {
    for comment in [
        "/* mail nfs-maint@example.org about this field */",
        "/* @(#)nfs.x 1.2 88/08/01 */",
        "/* @param data the payload */",
        "/** @return the file's bytes */",
        "// see @ddp in specs/nfs3.x",
        "/* @udp: the port it came on */",
        "/* @ */",
    ] {
        let c = with_comment(comment, false);
        assert!(c.diagnostics.items.is_empty(), "{comment}: {}", c.render());
        assert!(!c.generate().unwrap().contains("put_ddp_"), "{comment}");
    }
}

#[test]
fn the_mark_itself_is_accepted_in_every_documented_form() {
    for comment in [
        "/* @ddp */",
        "/*@ddp*/",
        "// @ddp",
        "//@ddp",
        "/*\t@ddp\t*/",
    ] {
        let c = with_comment(comment, false);
        assert!(c.diagnostics.items.is_empty(), "{comment}: {}", c.render());
        assert!(
            c.generate().unwrap().contains("put_ddp_opaque"),
            "{comment}: marked"
        );
    }
}

#[test]
fn maximum_sizes_count_what_stays_inline_when_items_move() {
    let out = generate(&["readlink_ok.data", "holder.h"]).unwrap();
    let block = |ty: &str| {
        let start = out.find(&format!("EncodedSize for {ty} ")).unwrap();
        out[start..(start + 400).min(out.len())]
            .split_whitespace()
            .collect::<String>()
    };
    // write_args: fh (4+64) + hyper (8) + data: unbounded inline, 4 (its length) when moved.
    assert!(block("WriteArgs")
        .contains("MAX_LEN:::core::option::Option<usize>=::core::option::Option::None"));
    assert!(
        block("WriteArgs").contains("Some(80"),
        "{}",
        block("WriteArgs")
    );
    // readlink_res: discriminant + (string length + count) when the path moves.
    assert!(
        block("ReadlinkRes").contains("Some(12"),
        "{}",
        block("ReadlinkRes")
    );
    // holder: r (12) + h moved (4) + maybe (4 + 68) + nums<16> (4 + 64).
    assert!(block("Holder").contains("Some(156"), "{}", block("Holder"));
}

/// `RESULT_DDP_ITEMS` of each procedure of `program`, by procedure struct, from the generated
/// code (absent when zero).
fn result_ddp_items(spec: &str) -> Vec<(String, usize)> {
    let comp = rpcrdma_xdrgen::Config::new()
        .services(false)
        .check_sources(&[("r.x", spec)]);
    let out = comp.generate().unwrap_or_else(|e| panic!("{e}"));
    let mut found = Vec::new();
    for line in out.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("impl ::rpcrdma::xdr::Procedure for ") {
            found.push((rest.trim_end_matches(" {").to_string(), 0));
        } else if let Some(n) = line.strip_prefix("const RESULT_DDP_ITEMS: usize = ") {
            let n = n.trim_end_matches(';').parse().unwrap();
            found.last_mut().unwrap().1 = n;
        }
    }
    found
}

#[test]
fn result_ddp_items_count_marked_members_through_structs_unions_arrays_and_recursion() {
    let spec = "\
struct item { /* @ddp */ opaque data<>; unsigned n; };
struct two { item a; item b; /* @ddp */ string s<>; };
union either switch (int d) { case 0: two t; case 1: item i; default: void; };
struct node { item v; node *next; };
typedef node *nodes;
struct rec { item v; rec *left; rec *right; };
struct maybe { item *opt; };
struct fixed { item x[3]; };
struct many { item xs<8>; item ys<>; };
program P {
    version V {
        void NONE(item) = 0;
        int PLAIN(void) = 1;
        item ONE(void) = 2;
        two THREE(void) = 3;
        either UNION_MAX(void) = 4;
        nodes LIST(void) = 5;
        rec TREE(void) = 6;
        maybe OPTIONAL(void) = 7;
        fixed FIXED(void) = 8;
        many ARRAYS(void) = 9;
    } = 1;
} = 0x20000001;
";
    let counts = result_ddp_items(spec);
    let counts: Vec<(&str, usize)> = counts.iter().map(|(p, n)| (p.as_str(), *n)).collect();
    assert_eq!(
        counts,
        [
            // Arguments do not count.
            ("None", 0),
            ("Plain", 0),
            ("One", 1),
            // A struct adds its members'.
            ("Three", 3),
            // A union takes its largest arm.
            ("UnionMax", 3),
            // A list counts one element.
            ("List", 1),
            // A recursive type counts itself once.
            ("Tree", 1),
            ("Optional", 1),
            // A fixed-length array: N times its element.
            ("Fixed", 3),
            // A variable-length array: one element, bounded or not.
            ("Arrays", 2),
        ]
    );
}

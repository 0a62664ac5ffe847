//! Tests of the draft-text extractor on the real seeds and on small synthetic drafts.

#[path = "../src/extract.rs"]
#[allow(dead_code)]
mod extract;

use extract::{extract, split_file_ends, triple_slash, ExtractError, ExtractedFile, Mode};
use std::path::{Path, PathBuf};
use std::process::Command;

const SEED_V2: &str = "003_0371366eb900be45.txt";
const SEED_V1: &str = "004_2fcfab15be214340.txt";
const SEED_2004: &str = "000_664de2f2ebfb11ef.txt";

/// The seeds directory, or `None` (with a message) when this checkout has none.
fn seeds() -> Option<PathBuf> {
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/seeds");
    for dir in [local, PathBuf::from("/work/shared/seeds")] {
        if dir.join(SEED_V2).is_file() {
            return Some(dir);
        }
    }
    println!("seeds not found (../../shared/seeds or /work/shared/seeds): skipping");
    None
}

fn seed(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).expect("read seed")
}

fn fixture_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/extract")
        .join(name)
}

fn fixture(name: &str) -> String {
    let path = fixture_path(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Compares with a reviewed golden file; `XDRGEN_BLESS=1` rewrites it (review the diff).
fn assert_golden(name: &str, actual: &str) {
    if std::env::var_os("XDRGEN_BLESS").is_some() {
        std::fs::write(fixture_path(name), actual).expect("bless");
        return;
    }
    assert_eq!(actual, fixture(name), "golden file tests/extract/{name}");
}

/// A fresh scratch directory under the target's temp dir.
fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xdrgen-extract-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn one(files: Vec<ExtractedFile>) -> String {
    assert_eq!(files.len(), 1, "expected one file, got {files:?}");
    files.into_iter().next().unwrap().contents
}

fn has(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

// ----- `///` convention (seed 003 section 6.2) --------------------------------------------

/// Runs the draft's own sed recipe (taken from the draft's section 6.2 code blocks) on the
/// draft and compares byte for byte.
#[test]
fn accepts_triple_slash_exactly_as_the_drafts_sed_recipe() {
    let Some(dir) = seeds() else { return };
    // The judge: the draft's recipe run by sed. Missing fails under CI=true.
    if !test_judge::require("sed (Debian package sed)", has("sed")) {
        return;
    }
    let text = seed(&dir, SEED_V2);
    // The recipe is the second code block of section 6.2: `sed ... < spec.txt > rpcrdma-v2.x`.
    let blocks = extract(&text, &Mode::CodeBlocks, "block").expect("code blocks");
    let recipe = &blocks[0].contents;
    let recipe = recipe
        .split("\n\n")
        .find(|b| b.contains("< spec.txt > rpcrdma-v2.x"))
        .unwrap_or_else(|| panic!("the sed recipe is not in the code blocks: {recipe}"));
    let work = scratch("sed");
    std::fs::write(work.join("spec.txt"), &text).unwrap();
    let status = Command::new("sh")
        .arg("-c")
        .arg(recipe)
        .current_dir(&work)
        .status()
        .expect("run sh");
    assert!(status.success(), "recipe failed: {recipe}");
    let expected = std::fs::read_to_string(work.join("rpcrdma-v2.x")).unwrap();
    let ours = one(extract(&text, &Mode::TripleSlash { split: false }, "rpcrdma-v2.x").unwrap());
    assert_eq!(ours, expected);
    assert_eq!(triple_slash(&text), expected);
    // What the recipe yields: the licence of section 6.1, then 6.3 and 6.4 with the markers.
    assert!(ours.starts_with("/*\n * Copyright (c) 2010-2018 IETF Trust"));
    assert!(ours.contains("/* FILE ENDS: common.x; */\n"));
    assert!(ours.ends_with("/* FILE ENDS: baseops.x; */\n"));
    let _ = std::fs::remove_dir_all(&work);
}

/// The draft's Perl split script, as printed, captures `common.x; */` as the file name; the
/// rename fails and the next `open` truncates the file: nothing survives. With the name
/// fixed to end at `;` the script gives exactly our split.
#[test]
fn accepts_file_ends_split_as_the_drafts_perl_script_intends() {
    let Some(dir) = seeds() else { return };
    // The judge: the draft's script run by perl. Missing fails under CI=true.
    if !test_judge::require("perl (Debian package perl-base)", has("perl")) {
        return;
    }
    let text = seed(&dir, SEED_V2);
    let blocks = extract(&text, &Mode::CodeBlocks, "block").expect("code blocks");
    let script = blocks[0]
        .contents
        .split("\n\n")
        .find(|b| b.contains("FILE ENDS"))
        .expect("the perl script")
        .to_owned();
    let whole = triple_slash(&text);

    // As printed: every output is lost.
    let work = scratch("perl-verbatim");
    std::fs::write(work.join("rpcrdma-v2.x"), &whole).unwrap();
    std::fs::write(work.join("split.pl"), &script).unwrap();
    let status = Command::new("perl")
        .arg("split.pl")
        .current_dir(&work)
        .status()
        .unwrap();
    assert!(status.success());
    assert!(!work.join("common.x").exists());
    assert!(!work.join("baseops.x").exists());
    assert_eq!(std::fs::read_to_string(work.join("temp.x")).unwrap(), "");

    // With the erratum applied.
    let fixed = script.replace("m/FILE ENDS: (.*)$/", "m/FILE ENDS: ([^; ]+)/");
    assert_ne!(fixed, script, "the script's marker regex changed");
    let work2 = scratch("perl-fixed");
    std::fs::write(work2.join("rpcrdma-v2.x"), &whole).unwrap();
    std::fs::write(work2.join("split.pl"), &fixed).unwrap();
    let status = Command::new("perl")
        .arg("split.pl")
        .current_dir(&work2)
        .status()
        .unwrap();
    assert!(status.success());
    let files = extract(&text, &Mode::TripleSlash { split: true }, "rest.x").unwrap();
    let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["common.x", "baseops.x"]);
    for f in &files {
        let perl = std::fs::read_to_string(work2.join(&f.name)).unwrap();
        assert_eq!(f.contents, perl, "{}", f.name);
    }
    assert_eq!(std::fs::read_to_string(work2.join("temp.x")).unwrap(), "");
    // Auto picks the same split.
    assert_eq!(extract(&text, &Mode::Auto, "rest.x").unwrap(), files);
    let _ = std::fs::remove_dir_all(&work);
    let _ = std::fs::remove_dir_all(&work2);
}

#[test]
fn accepts_triple_slash_sed_corner_cases() {
    // Leading spaces only (no tabs), `///` alone, the second substitution sees the result of
    // the first, unterminated last line.
    let text = "prose\n  /// a\n\t/// tab\n///\n   ///   \n/// ///\n/// last";
    assert_eq!(triple_slash(text), "a\n\n  \n///\n\nlast");
    assert_eq!(triple_slash("/// x\n"), "x\n");
    assert_eq!(triple_slash("no marks\n"), "");
}

#[test]
fn rejects_bad_file_ends_names() {
    for bad in [
        "/* FILE ENDS: ; */\n",
        "/* FILE ENDS: ../x; */\n",
        "FILE ENDS:\n",
    ] {
        let text = format!("const A = 1;\n{bad}");
        let err = split_file_ends(&text, "rest.x").unwrap_err();
        assert!(
            matches!(err, ExtractError::BadFileName { line: 2, .. }),
            "{bad}: {err:?}"
        );
        assert!(err.to_string().starts_with("line 2:"), "{err}");
    }
}

#[test]
fn accepts_file_ends_with_trailing_text() {
    let text = "a\n/* FILE ENDS: one.x; */\nb\n/* FILE ENDS: two.x */\nc\n";
    let files = split_file_ends(text, "rest.x").unwrap();
    let got: Vec<(&str, &str)> = files
        .iter()
        .map(|f| (f.name.as_str(), f.contents.as_str()))
        .collect();
    assert_eq!(got, [("one.x", "a\n"), ("two.x", "b\n"), ("rest.x", "c\n")]);
}

// ----- <CODE BEGINS> (seed 004 section 5.6) ----------------------------------------------

#[test]
fn accepts_code_blocks_of_rfc5666bis_without_page_breaks() {
    let Some(dir) = seeds() else { return };
    let text = seed(&dir, SEED_V1);
    let x = one(extract(&text, &Mode::CodeBlocks, "rpcrdma-v1.x").unwrap());
    assert_golden("rfc5666bis-5.6.x", &x);
    for gone in ["[Page", "Internet-Draft", "Expires", "\u{c}"] {
        assert!(!x.contains(gone), "{gone} left in the output");
    }
    // The page break inside the union arm joins the two declarations.
    assert!(x.contains("  uint32 rdma_vers_low;\n          uint32 rdma_vers_high;\n"));
    // Common indentation removed.
    assert!(x.starts_with("/*\n * Copyright (c) 2010, 2015 IETF Trust"));
    assert!(x.ends_with("};\n"));
    assert_eq!(
        extract(&text, &Mode::Auto, "rpcrdma-v1.x").unwrap()[0].contents,
        x
    );
}

#[test]
fn accepts_code_blocks_with_form_feeds_and_file_names() {
    let text = fixture("synthetic-pages.txt");
    let files = extract(&text, &Mode::CodeBlocks, "default.x").unwrap();
    let got: Vec<(&str, &str)> = files
        .iter()
        .map(|f| (f.name.as_str(), f.contents.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (
                "default.x",
                "struct a {\n    int x;\n    int y;\n};\n\nconst B = 2;\n"
            ),
            ("named.x", "typedef int c;\n"),
        ]
    );
}

#[test]
fn rejects_malformed_code_blocks() {
    let cases: [(&str, ExtractError); 5] = [
        (
            "x\n<CODE BEGINS>\n  const A = 1;\n",
            ExtractError::UnterminatedCodeBlock { line: 2 },
        ),
        (
            "<CODE BEGINS>\n<CODE BEGINS>\n<CODE ENDS>\n",
            ExtractError::NestedCodeBegins {
                line: 2,
                open_line: 1,
            },
        ),
        (
            "a\n<CODE ENDS>\n",
            ExtractError::UnmatchedCodeEnds { line: 2 },
        ),
        (
            "<CODE BEGINS>\n\n<CODE ENDS>\n",
            ExtractError::NothingExtracted {
                mode: "`<CODE BEGINS>`",
            },
        ),
        (
            "<CODE BEGINS> file \"../etc\"\n a\n<CODE ENDS>\n",
            ExtractError::BadFileName {
                line: 1,
                name: "\"../etc\"".into(),
            },
        ),
    ];
    for (text, want) in cases {
        let err = extract(text, &Mode::CodeBlocks, "x.x").unwrap_err();
        assert_eq!(err, want, "{text:?}");
        assert!(!err.to_string().is_empty());
    }
}

#[test]
fn rejects_empty_and_markerless_input() {
    assert_eq!(
        extract("", &Mode::Auto, "x").unwrap_err(),
        ExtractError::EmptyInput
    );
    assert_eq!(
        extract(" \n\n", &Mode::CodeBlocks, "x").unwrap_err(),
        ExtractError::EmptyInput
    );
    let err = extract("just prose\n", &Mode::Auto, "x").unwrap_err();
    assert_eq!(err, ExtractError::NoXdrFound);
    assert!(err.to_string().contains("--section"));
    assert_eq!(
        extract("prose\n", &Mode::TripleSlash { split: true }, "x").unwrap_err(),
        ExtractError::NothingExtracted { mode: "`///`" }
    );
}

// ----- numbered sections (seed 000 sections 4.2 and 6.2) --------------------------------

#[test]
fn accepts_sections_of_the_2004_draft() {
    let Some(dir) = seeds() else { return };
    let text = seed(&dir, SEED_2004);
    let mode = Mode::Sections(vec!["4.2".into(), "6.2".into()]);
    let x = one(extract(&text, &mode, "rpcrdma-2004.x").unwrap());
    assert_golden("rpcrdma-00-4.2-6.2.x", &x);
    for gone in [
        "[Page",
        "Internet-Draft",
        "Expires",
        "Here is the message",
        "maxcallsize argument",
    ] {
        assert!(!x.contains(gone), "{gone} left in the output");
    }
    assert!(x.starts_with("struct xdr_rdma_segment {\n"));
    assert!(x.contains("union rpc_rdma_error switch (rpc_rdma_errcode) {"));
    assert!(x.contains("typedef unsigned int uint32;"));
    assert!(x.ends_with("} = nnnnnn;  <-- Need program number assigned\n"));
}

#[test]
fn rejects_unknown_and_empty_sections() {
    let Some(dir) = seeds() else { return };
    let text = seed(&dir, SEED_2004);
    let err = extract(&text, &Mode::Sections(vec!["4.9".into()]), "x").unwrap_err();
    match &err {
        ExtractError::SectionNotFound { section, available } => {
            assert_eq!(section, "4.9");
            assert!(available.iter().any(|s| s == "4.2"), "{available:?}");
        }
        other => panic!("{other:?}"),
    }
    assert!(err
        .to_string()
        .starts_with("section 4.9 not found; sections present: 1, 2, 3"));
    let err = extract(&text, &Mode::Sections(vec!["1".into()]), "x").unwrap_err();
    assert!(
        matches!(err, ExtractError::SectionHasNoCode { line: 105, .. }),
        "{err:?}"
    );
    let err = extract(&text, &Mode::Sections(vec!["4.x".into()]), "x").unwrap_err();
    assert!(
        matches!(err, ExtractError::BadSectionNumber { .. }),
        "{err:?}"
    );
}

#[test]
fn accepts_synthetic_sections_with_subsections_and_lists() {
    let text = fixture("synthetic-sections.txt");
    let x = one(extract(&text, &Mode::Sections(vec!["2".into()]), "s.x").unwrap());
    assert_eq!(
        x,
        "const A = 1;\n\nstruct s {\n    int a;\n\n    int b;\n};\n\nconst C = 3;\n"
    );
}

#[test]
fn never_panics_on_arbitrary_prefixes_of_the_seeds() {
    let Some(dir) = seeds() else { return };
    for name in [SEED_V2, SEED_V1, SEED_2004] {
        let text = seed(&dir, name);
        let modes = [
            Mode::Auto,
            Mode::CodeBlocks,
            Mode::TripleSlash { split: true },
            Mode::Sections(vec!["4.2".into(), "6.2".into()]),
        ];
        // Cut the text at many line boundaries: unterminated blocks, missing sections, ...
        let cuts: Vec<usize> = text
            .match_indices('\n')
            .map(|(i, _)| i)
            .step_by(17)
            .collect();
        for cut in cuts {
            for mode in &modes {
                let _ = extract(&text[..cut], mode, "x.x");
            }
        }
    }
}

// ----- specs/ stays in step with the extractor ------------------------------------------

fn specs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs")
}

fn spec(name: &str) -> String {
    let path = specs_dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `specs/raw/` is exactly what extraction yields (the defects kept for the diagnostics).
#[test]
fn raw_specs_are_what_extract_yields() {
    let Some(dir) = seeds() else { return };
    let v1 = one(extract(&seed(&dir, SEED_V1), &Mode::CodeBlocks, "rpcrdma-v1.x").unwrap());
    assert_eq!(v1, spec("raw/rpcrdma-v1.x"));
    let sections = Mode::Sections(vec!["4.2".into(), "6.2".into()]);
    let old = one(extract(&seed(&dir, SEED_2004), &sections, "rpcrdma-2004.x").unwrap());
    assert_eq!(old, spec("raw/rpcrdma-2004.x"));
    let v2_text = seed(&dir, SEED_V2);
    let v2 = one(extract(
        &v2_text,
        &Mode::TripleSlash { split: false },
        "rpcrdma-v2.x",
    )
    .unwrap());
    assert_eq!(v2, spec("raw/rpcrdma-v2.x"));
    for f in extract(&v2_text, &Mode::TripleSlash { split: true }, "rest.x").unwrap() {
        assert_eq!(f.contents, spec(&format!("raw/{}", f.name)), "{}", f.name);
    }
}

/// The corrected single file has the recipe's shape and splits into the corrected parts.
#[test]
fn corrected_v2_splits_into_common_and_baseops() {
    let whole = spec("rpcrdma-v2.x");
    let files = split_file_ends(&whole, "rest.x").unwrap();
    let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["common.x", "baseops.x"]);
    for f in &files {
        assert_eq!(f.contents, spec(&f.name), "{}", f.name);
    }
}

/// Random texts over an alphabet of markers, page furniture, indentation and multi-byte
/// characters: extraction returns `Ok` or `Err`, never panics.
#[test]
fn never_panics_on_random_texts() {
    const PIECES: [&str; 16] = [
        "<CODE BEGINS>",
        "<CODE ENDS>",
        "/// ",
        "///",
        "FILE ENDS: ",
        "[Page 3]",
        "Internet-Draft",
        "\u{c}",
        "\n",
        "\n\n",
        "      ",
        "4.2.  Title",
        "struct s {",
        "};",
        "é€😀",
        "file \"a.x\"",
    ];
    let mut state: u64 = 0x243f_6a88_85a3_08d3;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let modes = [
        Mode::Auto,
        Mode::CodeBlocks,
        Mode::TripleSlash { split: true },
        Mode::TripleSlash { split: false },
        Mode::Sections(vec!["4.2".into()]),
    ];
    for _ in 0..3000 {
        let mut text = String::new();
        for _ in 0..(next() % 40) {
            text.push_str(PIECES[(next() % PIECES.len() as u64) as usize]);
        }
        for mode in &modes {
            if let Err(e) = extract(&text, mode, "x.x") {
                assert!(!e.to_string().is_empty());
            }
        }
    }
}

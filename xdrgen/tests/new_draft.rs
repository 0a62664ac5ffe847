//! README "When a new draft comes out", on a later revision of the version 2 draft:
//! draft-ietf-nfsv4-rpcrdma-version-two-07 (`tests/fixtures/drafts/`; where the text comes
//! from is in the README there).
//!
//! * extract: the committed `specs/raw/ietf-07/` files, exactly what the draft's own sed
//!   recipe prints, split at its markers;
//! * check: strict mode reports each defect of the draft's XDR, the exact list is a snapshot;
//!   lenient mode reads each as a warning and generates code (`generated_build.rs` builds that
//!   code against the runtime);
//! * the corrected `specs/ietf-07/` files (`specs/ERRATA.md`, I7-*) compile strictly without
//!   a diagnostic (`generated-examples/rpcrdma-specs` builds them, `specs/check-with-rpcgen.sh`
//!   runs rpcgen on them).

use std::path::{Path, PathBuf};
use std::process::Command;

use rpcrdma_xdrgen::diag::Severity;
use rpcrdma_xdrgen::extract::{extract, Mode};
use rpcrdma_xdrgen::{Compilation, Config};

const DRAFT: &str = "tests/fixtures/drafts/draft-ietf-nfsv4-rpcrdma-version-two-07.txt";

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn draft() -> String {
    read(manifest().join(DRAFT))
}

/// A file of the workspace's `specs/`.
fn spec(name: &str) -> String {
    read(manifest().join("../specs").join(name))
}

/// Checks `common.x` and `baseops.x` of `dir` (under `specs/`) together, as one namespace.
fn check(dir: &str, lenient: bool) -> Compilation {
    let common = spec(&format!("{dir}/common.x"));
    let baseops = spec(&format!("{dir}/baseops.x"));
    Config::new()
        .lenient(lenient)
        .check_sources(&[("common.x", &common), ("baseops.x", &baseops)])
}

/// `severity: message` of every diagnostic, in reading order.
fn headlines(comp: &Compilation) -> Vec<String> {
    comp.diagnostics
        .items
        .iter()
        .map(|d| format!("{:?}: {}", d.severity, d.message))
        .collect()
}

/// The draft's defects, in reading order (`specs/ERRATA.md` I7-1 to I7-4; I7-5, `struct X`
/// as a type, is an rpcgen extension xdrgen accepts).
const DEFECTS: [&str; 5] = [
    "unknown type `uint32`",
    "unknown type `uint64`",
    "typedef names the known type `uint32` after the unknown `rpcrdma2_propid`: the operands look reversed",
    "unknown type `rpcrdma2_errcode`",
    "union arm `rdma_max_chunks` is declared twice",
];

#[test]
fn extracts_the_committed_raw_files() {
    let files = extract(&draft(), &Mode::Auto, "rest.x").unwrap();
    let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
    // The licence of section 8.1 heads common.x; nothing follows the last marker.
    assert_eq!(names, ["common.x", "baseops.x"]);
    for f in &files {
        assert_eq!(
            f.contents,
            spec(&format!("raw/ietf-07/{}", f.name)),
            "{}",
            f.name
        );
    }
    assert!(files[0]
        .contents
        .starts_with("/*\n * Copyright (c) 2010, 2020 IETF Trust"));
}

/// The `<CODE BEGINS>` blocks of sections 5 and 6 repeat definitions with other defects
/// (typed constants, `RDMA_RVRSDIR_*`): only the `///` lines are the XDR (section 8.2).
#[test]
fn extracts_only_the_triple_slash_lines_of_a_draft_that_also_has_code_blocks() {
    let text = draft();
    let blocks = extract(&text, &Mode::CodeBlocks, "blocks.x").unwrap();
    assert!(blocks[0]
        .contents
        .contains("const uint32 RDMA_RVRSDIR_NONE = 0;"));
    let files = extract(&text, &Mode::Auto, "rest.x").unwrap();
    assert!(files
        .iter()
        .all(|f| !f.contents.contains("RDMA_RVRSDIR_") && !f.contents.contains("const uint32")));
}

/// The draft's recipe (section 8.2), run by sed, prints what `--no-split` extraction gives.
#[test]
fn extracts_what_the_drafts_sed_recipe_prints() {
    let has_sed = Command::new("sed")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    // The judge: missing, this fails under CI=true.
    if !test_judge::require("sed (Debian package sed)", has_sed) {
        return;
    }
    let text = draft();
    let blocks = extract(&text, &Mode::CodeBlocks, "blocks.x").unwrap();
    let recipe = blocks[0]
        .contents
        .split("\n\n")
        .find(|b| b.contains("< spec.txt > rpcrdma-v2.x"))
        .expect("the sed recipe of section 8.2");
    let work = std::env::temp_dir().join(format!("xdrgen-new-draft-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("spec.txt"), &text).unwrap();
    let status = Command::new("sh")
        .arg("-c")
        .arg(recipe)
        .current_dir(&work)
        .status()
        .unwrap();
    assert!(status.success(), "{recipe}");
    let printed = std::fs::read_to_string(work.join("rpcrdma-v2.x")).unwrap();
    let ours = extract(&text, &Mode::TripleSlash { split: false }, "rpcrdma-v2.x").unwrap();
    assert_eq!(ours[0].contents, printed);
    let _ = std::fs::remove_dir_all(&work);
}

/// Strict mode: one error per defect, each at its line with a hint; nothing generated.
#[test]
fn rejects_the_drafts_xdr_with_one_error_per_defect() {
    let comp = check("raw/ietf-07", false);
    let want: Vec<String> = DEFECTS.iter().map(|m| format!("Error: {m}")).collect();
    assert_eq!(headlines(&comp), want, "{}", comp.render());
    assert!(comp.generate().is_err());
    insta::assert_snapshot!("strict_ietf07", comp.render());
}

/// Lenient mode: the same defects as warnings, and code.
#[test]
fn accepts_the_drafts_xdr_in_lenient_mode_with_one_warning_per_defect() {
    let comp = check("raw/ietf-07", true);
    let want: Vec<String> = DEFECTS.iter().map(|m| format!("Warning: {m}")).collect();
    assert_eq!(headlines(&comp), want, "{}", comp.render());
    let code = comp.generate().unwrap();
    for item in [
        "pub struct Rpcrdma2HdrCallMiddle",
        "pub enum Rpcrdma2HdrError",
        "pub const RDMA2_PROPID_HOSTAUTH",
    ] {
        assert!(code.contains(item), "{item}");
    }
}

/// The corrected files: no diagnostic at all in strict mode.
#[test]
fn accepts_the_corrected_files_strictly() {
    let comp = check("ietf-07", false);
    let shown: Vec<_> = comp
        .diagnostics
        .items
        .iter()
        .filter(|d| d.severity >= Severity::Warning)
        .collect();
    assert!(shown.is_empty(), "{}", comp.render());
    comp.generate().unwrap();
}

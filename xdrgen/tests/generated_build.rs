//! Generates Rust for every `/usr/include/rpcsvc/*.x` (Debian rpcsvc-proto), for the drafts'
//! XDR (lenient; seeds 000, 003, 004 and the later draft-ietf-nfsv4-rpcrdma-version-two-07) and
//! for the real-world dialect files of `tests/real/`, writes it into a temporary crate that
//! depends on the runtime, and runs `cargo test` there: every generated file must build
//! without warnings, with docs on every public item, services included (the runtime's `rpc`
//! feature), and the round trips in `tests/support/roundtrip.rs` must pass.

use std::path::{Path, PathBuf};
use std::process::Command;

const RPCSVC: &str = "/usr/include/rpcsvc";

/// (module, lenient, inputs). Files not listed here are compiled alone, strictly (key_prot.x
/// and nlm_prot.x included: their C-header constants come from the built-in prelude and
/// from `%#define` lines).
fn special_groups() -> Vec<(&'static str, bool, Vec<PathBuf>)> {
    let r = |f: &str| Path::new(RPCSVC).join(f);
    vec![
        // zotypes repeats values (BOGUS_OBJ = 0, NIS_BOGUS_OBJ = 0): aliases in lenient mode.
        ("nis_object", true, vec![r("nis_object.x")]),
        ("nis", true, vec![r("nis.x")]),
        // nis_callback.x uses nis.x's types (rpcgen gets them through nis.h).
        ("nis_callback", true, vec![r("nis.x"), r("nis_callback.x")]),
    ]
}

fn draft_groups() -> Vec<(&'static str, bool, Vec<PathBuf>)> {
    let d = |f: &str| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/drafts")
            .join(f)
    };
    vec![
        ("draft_000_s4_2", true, vec![d("000-rpcrdma-00-s4.2.x")]),
        (
            "draft_003_v2",
            true,
            vec![d("003-common.x"), d("003-baseops.x")],
        ),
        ("draft_004_v1", true, vec![d("004-rfc5666bis-01-s5.6.x")]),
        // What `xdrgen extract` takes from a later revision (README "When a new draft comes
        // out"; `tests/new_draft.rs` checks these are the extraction of the draft's text).
        (
            "draft_ietf07_v2",
            true,
            ["common.x", "baseops.x"]
                .iter()
                .map(|f| {
                    Path::new(env!("CARGO_MANIFEST_DIR"))
                        .join("../specs/raw/ietf-07")
                        .join(f)
                })
                .collect(),
        ),
        (
            "torture_lenient",
            true,
            vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/torture/lenient.x")],
        ),
        (
            "torture",
            false,
            vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/torture/torture.x")],
        ),
    ]
}

/// (module, settings, inputs) for the dialects and habits of `.x` files in the wild
/// (`tests/real/`), each with its own settings.
fn real_world_groups() -> Vec<(&'static str, rpcrdma_xdrgen::Config, Vec<PathBuf>)> {
    let r = |f: &str| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/real")
            .join(f)
    };
    let mut defines = rpcrdma_xdrgen::Config::new();
    defines
        .define("FHSIZE", "32")
        .define("MAXNAMLEN", "255")
        .define("COOKIE64", "1");
    let mut lenient = rpcrdma_xdrgen::Config::new();
    lenient.lenient(true);
    vec![
        ("real_defines", defines, vec![r("defines.x")]),
        (
            "real_namespace",
            rpcrdma_xdrgen::Config::new(),
            vec![r("namespace.x")],
        ),
        (
            "real_recursion",
            rpcrdma_xdrgen::Config::new(),
            vec![r("recursion.x")],
        ),
        ("real_zcopaque", lenient, vec![r("zcopaque.x")]),
        (
            "real_stellar",
            rpcrdma_xdrgen::Config::new(),
            vec![r("stellar.x")],
        ),
    ]
}

#[test]
fn rpcsvc_and_drafts_generate_code_that_builds_and_round_trips() {
    // scripts/setup installs rpcsvc-proto: missing, this fails under CI=true.
    let judge = format!("{RPCSVC}/*.x (Debian package rpcsvc-proto)");
    if !test_judge::require(&judge, Path::new(RPCSVC).is_dir()) {
        return;
    }
    let mut groups = special_groups();
    let covered: Vec<PathBuf> = groups.iter().flat_map(|g| g.2.clone()).collect();
    let mut files: Vec<PathBuf> = std::fs::read_dir(RPCSVC)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "x"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 17,
        "expected the 17 rpcsvc-proto files, found {}",
        files.len()
    );
    let mut leaked: Vec<&'static str> = Vec::new();
    for f in &files {
        if !covered.contains(f) {
            let stem = f.file_stem().unwrap().to_string_lossy().replace('-', "_");
            let stem: &'static str = Box::leak(stem.into_boxed_str());
            leaked.push(stem);
            groups.push((stem, false, vec![f.clone()]));
        }
    }
    groups.extend(draft_groups());

    let krate = Path::new(env!("CARGO_TARGET_TMPDIR")).join("xdrgen-generated");
    std::fs::create_dir_all(krate.join("src")).unwrap();
    let mut lib = String::from(
        "//! Code generated by xdrgen from rpcsvc-proto and the drafts.\n#![deny(warnings, missing_docs)]\n",
    );
    for (module, lenient, inputs) in &groups {
        let comp = rpcrdma_xdrgen::Config::new()
            .lenient(*lenient)
            .check_files(inputs)
            .unwrap();
        let code = comp
            .generate()
            .unwrap_or_else(|e| panic!("{module}: {inputs:?} failed:\n{e}"));
        rpcrdma_xdrgen::write_if_changed(&krate.join(format!("src/{module}.rs")), &code).unwrap();
        lib.push_str(&format!(
            "/// Generated from {inputs:?}.\npub mod {module};\n"
        ));
    }
    for (module, config, inputs) in real_world_groups() {
        let code = config
            .check_files(&inputs)
            .unwrap()
            .generate()
            .unwrap_or_else(|e| panic!("{module}: {inputs:?} failed:\n{e}"));
        rpcrdma_xdrgen::write_if_changed(&krate.join(format!("src/{module}.rs")), &code).unwrap();
        lib.push_str(&format!(
            "/// Generated from {inputs:?}.\npub mod {module};\n"
        ));
    }
    lib.push_str("#[cfg(test)]\nmod roundtrip;\n");
    let support = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/roundtrip.rs"),
    )
    .unwrap();
    rpcrdma_xdrgen::write_if_changed(&krate.join("src/roundtrip.rs"), &support).unwrap();
    rpcrdma_xdrgen::write_if_changed(&krate.join("src/lib.rs"), &lib).unwrap();
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let manifest = format!(
        "[package]\nname = \"xdrgen-generated\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
         [workspace]\n\n[dependencies]\nrpcrdma = {{ path = {:?}, default-features = false, features = [\"rpc\"] }}\n\n\
         [dev-dependencies]\ntokio = {{ version = \"1\", features = [\"rt\", \"macros\"] }}\n",
        workspace.join("runtime")
    );
    rpcrdma_xdrgen::write_if_changed(&krate.join("Cargo.toml"), &manifest).unwrap();
    if let Ok(lock) = std::fs::read_to_string(workspace.join("Cargo.lock")) {
        if !krate.join("Cargo.lock").exists() {
            std::fs::write(krate.join("Cargo.lock"), lock).unwrap();
        }
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["test", "--offline", "--quiet"])
        .current_dir(&krate)
        .env("CARGO_TARGET_DIR", krate.join("target"))
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo test on the generated crate failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

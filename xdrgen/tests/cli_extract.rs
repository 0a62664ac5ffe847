//! `xdrgen extract` on the seed drafts gives what the drafts' own recipes give
//! (the committed `specs/raw/` files, checked against the recipes in `tests/extract.rs`), and
//! on a later revision (`tests/fixtures/drafts/`) what the README's worked example shows.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn seed(prefix: &str) -> Option<PathBuf> {
    let dirs = [
        repo().join("../shared/seeds"),
        PathBuf::from("/work/shared/seeds"),
    ];
    for dir in dirs {
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().starts_with(prefix) {
                    return Some(e.path());
                }
            }
        }
    }
    None
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_xdrgen"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("xdrgen-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn extracts_each_seed_as_its_recipe_does() {
    let cases: [(&str, &[&str], &[&str]); 3] = [
        (
            "003_",
            &["--no-split", "--name", "rpcrdma-v2.x"],
            &["rpcrdma-v2.x"],
        ),
        ("003_", &[], &["common.x", "baseops.x"]),
        ("004_", &["--name", "rpcrdma-v1.x"], &["rpcrdma-v1.x"]),
    ];
    for (prefix, extra, files) in cases {
        let Some(draft) = seed(prefix) else {
            eprintln!("SKIPPED: seed {prefix} not found next to the repository");
            return;
        };
        let out = temp_dir(prefix);
        let mut args = vec![
            "extract",
            draft.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let (code, _, err) = run(&args);
        assert_eq!(code, 0, "{err}");
        for f in files {
            let got = std::fs::read_to_string(out.join(f)).unwrap();
            let want = std::fs::read_to_string(repo().join("specs/raw").join(f)).unwrap();
            assert_eq!(got, want, "{prefix} {f}");
        }
    }
}

#[test]
fn extracts_sections_of_the_2004_draft() {
    let Some(draft) = seed("000_") else {
        eprintln!("SKIPPED: seed 000 not found");
        return;
    };
    let out = temp_dir("000");
    let args = [
        "extract",
        draft.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--section",
        "4.2",
        "--section",
        "6.2",
        "--name",
        "rpcrdma-2004.x",
    ];
    let (code, _, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    let got = std::fs::read_to_string(out.join("rpcrdma-2004.x")).unwrap();
    let want = std::fs::read_to_string(repo().join("specs/raw/rpcrdma-2004.x")).unwrap();
    assert_eq!(got, want);
}

#[test]
fn reports_unusable_input_with_an_exit_code() {
    let dir = temp_dir("bad");
    std::fs::create_dir_all(&dir).unwrap();
    let empty = dir.join("empty.txt");
    std::fs::write(&empty, "just prose, no XDR at all\n").unwrap();
    let (code, _, err) = run(&[
        "extract",
        empty.to_str().unwrap(),
        "-o",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("error"), "{err}");
    let (code, _, _) = run(&["extract", "/nonexistent/draft.txt"]);
    assert_eq!(code, 2);
}

/// README "When a new draft comes out", steps 1 and 2, as commands: extraction of a later
/// revision writes its two files, strict checking fails with one error per defect (exit 1),
/// lenient mode generates (exit 0).
#[test]
fn extracts_and_checks_a_later_revision() {
    let draft =
        repo().join("xdrgen/tests/fixtures/drafts/draft-ietf-nfsv4-rpcrdma-version-two-07.txt");
    let out = temp_dir("ietf-07");
    let (code, stdout, err) = run(&[
        "extract",
        draft.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let written: Vec<&str> = stdout.lines().collect();
    let common = out.join("common.x");
    let baseops = out.join("baseops.x");
    assert_eq!(
        written,
        [common.to_str().unwrap(), baseops.to_str().unwrap()]
    );
    let files = [common.to_str().unwrap(), baseops.to_str().unwrap()];
    let (code, _, err) = run(&["check", files[0], files[1]]);
    assert_eq!(code, 1, "{err}");
    // Five diagnostics and the summary line.
    let errors = err.lines().filter(|l| l.starts_with("error: ")).count();
    assert_eq!(errors, 6, "{err}");
    assert!(
        err.ends_with("error: 5 error(s); no output generated\n"),
        "{err}"
    );
    let rust = out.join("v2.rs");
    let (code, _, err) = run(&[
        "--lenient",
        files[0],
        files[1],
        "-o",
        rust.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(err.matches("warning: ").count(), 5, "{err}");
    assert!(std::fs::read_to_string(&rust)
        .unwrap()
        .contains("pub struct Rpcrdma2HdrCallMiddle"));
    let _ = std::fs::remove_dir_all(&out);
}

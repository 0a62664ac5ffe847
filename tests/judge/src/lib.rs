//! What a test does when its judge is missing.
//!
//! Some tests are judged by a program outside the project (tshark dissects our frames, rpcgen
//! and libtirpc decode our bytes, the rpcsvc-proto `.x` files are compiled). `scripts/setup`
//! installs every one of them. A developer without them gets a loud skip; CI (`CI=true`, which
//! runs `scripts/setup` first) gets a failure, so a judge that never ran cannot look like a
//! pass.
#![warn(missing_docs)]

use std::ffi::OsStr;
use std::process::{Command, Stdio};

/// Whether this is a CI run: `CI` is `true` or `1` (any case), as CI services set it.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// `present`, or, when the judge named `judge` is missing: a panic under CI ([`in_ci`]) and a
/// loud skip otherwise (then `false`: the caller returns without checking anything).
///
/// `judge` names what is missing and how to get it, e.g. "tshark (Debian package tshark)".
pub fn require(judge: &str, present: bool) -> bool {
    require_under(judge, present, in_ci())
}

/// [`require`] with the CI decision passed in (what the tests of this behaviour call).
pub fn require_under(judge: &str, present: bool, ci: bool) -> bool {
    if present {
        return true;
    }
    if ci {
        panic!(
            "the judge of this test is missing: {judge}. Under CI a test whose judge is \
             missing fails instead of passing; run scripts/setup (it installs every judge)"
        );
    }
    eprintln!(
        "\n*** SKIPPING: the judge of this test is missing: {judge} (run scripts/setup; \
         under CI=true this fails) ***\n"
    );
    false
}

/// Whether `program args` runs and exits 0 with `PATH` set to `path` (`None`: the
/// environment's own `PATH`).
pub fn program_runs(program: &str, args: &[&str], path: Option<&OsStr>) -> bool {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    cmd.status().is_ok_and(|s| s.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_present_judge_runs_the_test_under_ci_or_not() {
        assert!(require_under("anything", true, true));
        assert!(require_under("anything", true, false));
    }

    #[test]
    fn a_missing_judge_skips_outside_ci() {
        assert!(!require_under(
            "tshark (Debian package tshark)",
            false,
            false
        ));
    }

    #[test]
    fn a_missing_judge_fails_under_ci_naming_it_and_setup() {
        let err = std::panic::catch_unwind(|| {
            require_under("tshark (Debian package tshark)", false, true)
        })
        .expect_err("must fail under CI");
        let msg = err.downcast_ref::<String>().expect("a formatted message");
        assert!(msg.contains("tshark (Debian package tshark)"), "{msg}");
        assert!(msg.contains("scripts/setup"), "{msg}");
    }

    #[test]
    fn a_program_not_on_path_does_not_run() {
        assert!(!program_runs(
            "sh",
            &["-c", "exit 0"],
            Some(OsStr::new("/nonexistent"))
        ));
        assert!(program_runs("sh", &["-c", "exit 0"], None));
        assert!(!program_runs("sh", &["-c", "exit 3"], None));
    }
}

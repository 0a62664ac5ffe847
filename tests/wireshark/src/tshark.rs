//! Running tshark on a capture: the fields of each frame, the verbose tree, expert infos.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What names the judge when it is missing.
pub const JUDGE: &str = "tshark (Debian package tshark)";

/// Whether `tshark -v` runs with `PATH` set to `path` (`None`: the environment's).
fn runs_on(path: Option<&std::ffi::OsStr>) -> bool {
    test_judge::program_runs("tshark", &["-v"], path)
}

/// Whether tshark runs; when it does not, a loud skip, or a failure under `CI=true`.
pub fn present() -> bool {
    test_judge::require(JUDGE, runs_on(None))
}

/// Separates the values of a field that occurs several times in a frame.
const AGGREGATOR: &str = "|";

/// tshark on one capture, with or without a Lua dissector, some protocols disabled.
#[derive(Debug, Clone)]
pub struct Tshark {
    capture: PathBuf,
    lua: Option<PathBuf>,
    disabled: Vec<String>,
}

/// One frame's field values, as `-T fields` prints them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Frame {
    /// The frame number.
    pub number: u32,
    values: HashMap<String, Vec<String>>,
}

/// Parses a number as tshark prints it: decimal or `0x` hexadecimal; a boolean as 1 or 0.
pub fn number(s: &str) -> u64 {
    let s = s.trim();
    match s {
        "True" | "TRUE" | "true" => return 1,
        "False" | "FALSE" | "false" => return 0,
        _ => {}
    }
    match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    }
    .unwrap_or_else(|e| panic!("`{s}` is not a number: {e}"))
}

impl Frame {
    /// Every value of `field` in the frame, in order.
    pub fn all(&self, field: &str) -> &[String] {
        self.values.get(field).map_or(&[], Vec::as_slice)
    }

    /// Every value of `field` as a number.
    pub fn numbers(&self, field: &str) -> Vec<u64> {
        self.all(field).iter().map(|s| number(s)).collect()
    }

    /// The one value of `field` as a number.
    pub fn one(&self, field: &str) -> u64 {
        match self.numbers(field).as_slice() {
            [v] => *v,
            other => panic!(
                "frame {}: {field} occurs {} times: {other:?}",
                self.number,
                other.len()
            ),
        }
    }

    /// Whether `field` occurs in the frame.
    pub fn has(&self, field: &str) -> bool {
        !self.all(field).is_empty()
    }
}

/// The expert infos of a capture (`-z expert`), by severity.
#[derive(Debug, Clone, Default)]
pub struct Experts {
    /// Errors (`Group Protocol Summary` lines).
    pub errors: Vec<String>,
    /// Warnings.
    pub warnings: Vec<String>,
    /// Notes.
    pub notes: Vec<String>,
    /// The whole report.
    pub report: String,
}

impl Tshark {
    /// tshark on `capture`, with only Wireshark's own dissectors.
    pub fn new(capture: impl Into<PathBuf>) -> Tshark {
        Tshark {
            capture: capture.into(),
            lua: None,
            disabled: Vec::new(),
        }
    }

    /// Also loads the Lua dissector at `path` (`-X lua_script:`).
    pub fn lua(mut self, path: impl AsRef<Path>) -> Tshark {
        self.lua = Some(path.as_ref().to_path_buf());
        self
    }

    /// Disables a protocol (`--disable-protocol`), e.g. Wireshark's own `rpcordma`.
    pub fn disable(mut self, protocol: &str) -> Tshark {
        self.disabled.push(protocol.to_string());
        self
    }

    /// Runs tshark with `args` after the capture and the options; fails the test when tshark
    /// fails or reports a Lua error.
    pub fn run(&self, args: &[&str]) -> String {
        let mut cmd = Command::new("tshark");
        cmd.arg("-r").arg(&self.capture);
        if let Some(lua) = &self.lua {
            cmd.arg("-X").arg(format!("lua_script:{}", lua.display()));
        }
        for p in &self.disabled {
            cmd.args(["--disable-protocol", p]);
        }
        cmd.args(args);
        let out = cmd.output().expect("running tshark");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "tshark {args:?} failed: {stderr}\n{stdout}"
        );
        for text in [stdout.as_str(), &*stderr] {
            assert!(
                !text.contains("Lua Error") && !text.contains("Lua: Error"),
                "tshark {args:?} reports a Lua error:\n{stderr}\n{stdout}"
            );
        }
        stdout
    }

    /// The values of `fields` in every frame that matches `filter`.
    pub fn fields(&self, filter: &str, fields: &[&str]) -> Vec<Frame> {
        let mut args = vec![
            "-Y",
            filter,
            "-T",
            "fields",
            "-E",
            "occurrence=a",
            "-E",
            "separator=/t",
        ];
        let aggregator = format!("aggregator={AGGREGATOR}");
        args.extend(["-E", &aggregator, "-e", "frame.number"]);
        for f in fields {
            args.extend(["-e", f]);
        }
        let out = self.run(&args);
        out.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|line| {
                let cols: Vec<&str> = line.split('\t').collect();
                let mut frame = Frame {
                    number: number(cols[0]) as u32,
                    values: HashMap::new(),
                };
                for (f, v) in fields.iter().zip(&cols[1..]) {
                    if !v.is_empty() {
                        frame.values.insert(
                            f.to_string(),
                            v.split(AGGREGATOR).map(str::to_string).collect(),
                        );
                    }
                }
                frame
            })
            .collect()
    }

    /// Every frame's whole tree (`-V`).
    pub fn verbose(&self) -> String {
        self.run(&["-V"])
    }

    /// The expert infos (`-q -z expert`).
    pub fn experts(&self) -> Experts {
        let report = self.run(&["-q", "-z", "expert"]);
        let mut ex = Experts {
            report: report.clone(),
            ..Experts::default()
        };
        let mut section = "";
        for line in report.lines() {
            let t = line.trim();
            for s in ["Errors", "Warns", "Notes", "Chats"] {
                if t.starts_with(s) {
                    section = s;
                }
            }
            if t.is_empty()
                || t.starts_with("Frequency")
                || t.starts_with('=')
                || t.starts_with("---")
                || ["Errors", "Warns", "Notes", "Chats"]
                    .iter()
                    .any(|s| t.starts_with(s))
            {
                continue;
            }
            match section {
                "Errors" => ex.errors.push(t.to_string()),
                "Warns" => ex.warnings.push(t.to_string()),
                "Notes" => ex.notes.push(t.to_string()),
                _ => {}
            }
        }
        ex
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without tshark, a CI run fails naming it and scripts/setup; elsewhere it skips.
    #[test]
    fn a_missing_tshark_fails_under_ci() {
        let found = runs_on(Some(std::ffi::OsStr::new("/nonexistent")));
        assert!(!found, "no tshark runs from an empty PATH");
        assert!(
            !test_judge::require_under(JUDGE, found, false),
            "skips outside CI"
        );
        let err = std::panic::catch_unwind(|| test_judge::require_under(JUDGE, found, true))
            .expect_err("fails under CI");
        let msg = err.downcast_ref::<String>().expect("a formatted message");
        assert!(
            msg.contains("tshark") && msg.contains("scripts/setup"),
            "{msg}"
        );
    }

    #[test]
    fn numbers_as_tshark_prints_them() {
        assert_eq!(number("0x0000001f"), 31);
        assert_eq!(number("42"), 42);
        assert_eq!(number("True"), 1);
    }
}

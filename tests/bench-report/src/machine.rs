//! What the report says about the machine the figures come from.

use std::process::Command;

use serde::{Deserialize, Serialize};

/// The machine and the build, as the report's first table shows them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// CPU model (`/proc/cpuinfo`'s `model name`).
    pub cpu: String,
    /// CPUs this process may use.
    pub cores: usize,
    /// Kernel release.
    pub kernel: String,
    /// `rustc -V`.
    pub rustc: String,
    /// When the report was written (UTC).
    pub date: String,
    /// `git describe --always --dirty` of the work tree.
    pub commit: String,
    /// The load average when the run started (`/proc/loadavg`), when known.
    pub load: Option<String>,
}

impl Machine {
    /// Describes this machine; what cannot be found reads `unknown`.
    pub fn probe() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| {
                let (key, value) = l.split_once(':')?;
                (key.trim() == "model name").then(|| value.trim().to_string())
            })
            .unwrap_or_else(unknown);
        Machine {
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| unknown()),
            rustc: output("rustc", &["-V"]),
            date: output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
            commit: output("git", &["describe", "--always", "--dirty"]),
            load: None,
        }
    }
}

fn unknown() -> String {
    "unknown".into()
}

/// The first line `program args` prints, or `unknown`.
fn output(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| {
            String::from_utf8(o.stdout)
                .ok()?
                .lines()
                .next()
                .map(str::to_string)
        })
        .unwrap_or_else(unknown)
}

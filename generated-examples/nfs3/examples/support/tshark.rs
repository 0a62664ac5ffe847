//! Running tshark for the wire judges (`nfs-wire` here, `nfs4-wire` in rpcrdma-nfs4, which
//! includes this file by path): fields of the frames a display filter selects, and the numbers
//! in them.

use std::process::Command;

/// Runs tshark on `capture` with `options` (`-X lua_script:...`, `--disable-protocol ...`) and
/// the display filter `filter`: one row per frame, its `fields` in order (several occurrences of
/// a field joined by commas). A Lua error in a dissector fails it, as a crash of the judge.
pub fn tshark(
    capture: &str,
    options: &[String],
    filter: &str,
    fields: &[&str],
) -> Result<Vec<Vec<String>>, String> {
    let mut cmd = Command::new("tshark");
    cmd.args(options);
    cmd.args(["-r", capture, "-Y", filter, "-T", "fields"])
        .args([
            "-E",
            "separator=\t",
            "-E",
            "occurrence=a",
            "-E",
            "aggregator=,",
        ]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd
        .output()
        .map_err(|e| format!("tshark: {e} (scripts/setup installs it)"))?;
    if !out.status.success() {
        return Err(format!(
            "tshark failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("Lua: Error") {
        return Err(format!("tshark reports a Lua error: {stderr}"));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect())
}

/// A field's number, decimal or `0x` hexadecimal; `u64::MAX` when it is not one.
pub fn num(text: &str) -> u64 {
    let t = text.trim();
    match t.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).unwrap_or(u64::MAX),
        None => t.parse().unwrap_or(u64::MAX),
    }
}

/// The numbers of a field that occurs several times (joined by commas).
pub fn list(text: &str) -> Vec<u64> {
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(num)
        .collect()
}

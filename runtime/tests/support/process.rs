//! What this test process holds, read from /proc and the tokio runtime, and a wait for a
//! condition with a safety net: for tests that check resources come back.

use std::time::Duration;

/// The resident set of this process, in bytes.
pub fn rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status");
    kib << 10
}

/// Open descriptors of this process.
pub fn descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Tasks alive on the current runtime.
pub fn tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

/// Waits (up to `safety`) until `done` holds, looking every 20 ms.
pub async fn until(what: &str, safety: Duration, done: impl Fn() -> bool) {
    tokio::time::timeout(safety, async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{what}: not within the {safety:?} safety net"));
}

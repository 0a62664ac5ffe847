//! iperf3 as a baseline measured in the bench's own run: the single TCP stream people quote
//! for a machine's loopback, between two processes pinned to two CPUs.

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::Duration;

/// Why iperf3 gave no figure.
#[derive(Debug)]
pub struct Iperf3Error(pub String);

impl std::fmt::Display for Iperf3Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Iperf3Error {}

/// Bytes per second of one iperf3 TCP stream on loopback moving `total` bytes in writes of
/// `write_size`, as the receiver counted them; the server pinned to `server_cpu` and the
/// client to `client_cpu` with `taskset` when given (on two CPUs this is the fastest
/// placement: each end copies on its own CPU).
pub fn stream_rate(
    total: usize,
    write_size: usize,
    cpus: Option<(usize, usize)>,
) -> Result<f64, Iperf3Error> {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| Iperf3Error(format!("no free port: {e}")))?
        .port()
        .to_string();
    let pinned = |cpu: Option<usize>| {
        let mut c = match cpu {
            Some(cpu) => {
                let mut c = Command::new("taskset");
                c.args(["-c", &cpu.to_string(), "iperf3"]);
                c
            }
            None => Command::new("iperf3"),
        };
        c.stdin(Stdio::null());
        c
    };
    let mut server = pinned(cpus.map(|c| c.1))
        .args(["-s", "-1", "-p", &port])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| {
            Iperf3Error(format!(
                "cannot start iperf3 (install it: scripts/setup): {e}"
            ))
        })?;
    let (total, len) = (total.to_string(), write_size.to_string());
    // The server needs a moment to listen: the client retries a refused connection.
    let mut last = String::new();
    let mut result = Err(Iperf3Error(String::new()));
    for _ in 0..100 {
        let out = pinned(cpus.map(|c| c.0))
            .args([
                "-c",
                "127.0.0.1",
                "-p",
                &port,
                "-l",
                &len,
                "-n",
                &total,
                "-J",
            ])
            .output()
            .map_err(|e| Iperf3Error(format!("cannot run iperf3: {e}")))?;
        let json = String::from_utf8_lossy(&out.stdout).into_owned();
        match received_rate(&json) {
            Some(rate) if out.status.success() => {
                result = Ok(rate);
                break;
            }
            _ if json.contains("unable to connect") || json.contains("Connection refused") => {
                last = json;
                sleep(Duration::from_millis(20));
            }
            _ => {
                last = json;
                break;
            }
        }
    }
    if result.is_err() {
        let _ = server.kill();
        result = Err(Iperf3Error(format!("iperf3 failed: {}", last.trim())));
    }
    let _ = server.wait();
    result
}

/// The receiver's bytes per second in iperf3's JSON report (`end.sum_received`).
fn received_rate(json: &str) -> Option<f64> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let bits = v["end"]["sum_received"]["bits_per_second"].as_f64()?;
    (bits > 0.0).then_some(bits / 8.0)
}

#[cfg(test)]
mod tests {
    use super::received_rate;

    #[test]
    fn reads_the_receivers_rate_from_iperf3_json() {
        let json = r#"{"start":{},"end":{"sum_sent":{"bits_per_second":9e9},
            "sum_received":{"bytes":1073741824,"bits_per_second":4.8e10}}}"#;
        assert_eq!(received_rate(json), Some(6e9));
        assert_eq!(
            received_rate(r#"{"error":"unable to connect to server"}"#),
            None
        );
        assert_eq!(received_rate("not json"), None);
    }
}

//! The coordinator's handles on the processes of a point: the server (ours, this binary in
//! its server role, or libtirpc's C server) and the client processes, each spoken to a line
//! at a time over its standard input and output.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use tirpc_interop::c::{self, CServer};

use crate::client::ClientArgs;
use crate::probe::{self, Footprint};
use crate::tuning::Tuning;
use crate::Transport;

/// `cpus` as `--cpus` takes them.
fn cpu_list(cpus: &[usize]) -> String {
    let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
    list.join(",")
}

/// A child process spoken to a line at a time; killed when dropped.
pub struct Piped {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Piped {
    fn start(mut command: Command) -> io::Result<Piped> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdin = child.stdin.take();
        let stdout = child
            .stdout
            .take()
            .map(BufReader::new)
            .ok_or_else(|| io::Error::other("no standard output"))?;
        Ok(Piped {
            child,
            stdin,
            stdout,
        })
    }

    fn send(&mut self, line: &str) -> io::Result<()> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| io::Error::other("standard input already closed"))?;
        writeln!(stdin, "{line}")?;
        stdin.flush()
    }

    fn read_line(&mut self) -> io::Result<String> {
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            let status = self.child.wait()?;
            return Err(io::Error::other(format!(
                "exited ({status}) without a word"
            )));
        }
        Ok(line.trim_end().to_string())
    }

    /// Closes standard input (the process's signal to finish) and waits for the process.
    fn finish(mut self) -> io::Result<bool> {
        self.stdin.take();
        Ok(self.child.wait()?.success())
    }
}

impl Drop for Piped {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// What our server reports of itself (libtirpc's cannot).
#[derive(Debug, Clone, Copy, Default)]
pub struct SelfReport {
    /// Heap held, bytes.
    pub heap: i64,
    /// Tasks alive on its runtime.
    pub tasks: u64,
    /// Connections it serves.
    pub connections: u64,
}

/// A sample of the server: what /proc says of it, and what it says of itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct ServerSample {
    /// From /proc.
    pub footprint: Footprint,
    /// From the server (ours only).
    pub report: Option<SelfReport>,
}

/// The server of a point.
pub enum ServerProc {
    /// This binary in its server role.
    Ours { process: Piped, port: u16 },
    /// libtirpc's server (`csrc/server.c`).
    Libtirpc(CServer),
}

impl ServerProc {
    /// Starts the server for `transport`.
    pub fn start(
        exe: &Path,
        transport: Transport,
        tuning: Tuning,
        cpus: Option<&[usize]>,
        shared_buffers: usize,
    ) -> io::Result<ServerProc> {
        if transport == Transport::Libtirpc {
            let programs = c::programs().map_err(io::Error::other)?;
            let server = CServer::start(&programs)?;
            if let Some(cpus) = cpus {
                probe::pin_process(server.pid(), cpus)?;
            }
            return Ok(ServerProc::Libtirpc(server));
        }
        let mut command = Command::new(exe);
        command.args(["--role", "server", "--transport", transport.arg()]);
        command.args(tuning.args());
        if transport == Transport::RdmaShared {
            command
                .arg("--shared-buffers")
                .arg(shared_buffers.to_string());
        }
        if let Some(cpus) = cpus {
            command.arg("--cpus").arg(cpu_list(cpus));
        }
        let mut process = Piped::start(command)?;
        let line = process.read_line()?;
        let port = line
            .strip_prefix("port ")
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| io::Error::other(format!("the server said {line:?}")))?;
        Ok(ServerProc::Ours { process, port })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        let port = match self {
            ServerProc::Ours { port, .. } => *port,
            ServerProc::Libtirpc(c) => c.port(),
        };
        (Ipv4Addr::LOCALHOST, port).into()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        match self {
            ServerProc::Ours { process, .. } => process.child.id(),
            ServerProc::Libtirpc(c) => c.pid(),
        }
    }

    /// Samples it now.
    pub fn sample(&mut self) -> io::Result<ServerSample> {
        let footprint = Footprint::of(self.pid())?;
        let report = match self {
            ServerProc::Ours { process, .. } => {
                process.send("sample")?;
                let line = process.read_line()?;
                Some(parse_report(&line)?)
            }
            ServerProc::Libtirpc(_) => None,
        };
        Ok(ServerSample { footprint, report })
    }
}

fn parse_report(line: &str) -> io::Result<SelfReport> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let bad = || io::Error::other(format!("the server's sample {line:?}"));
    match words[..] {
        ["heap", heap, "tasks", tasks, "connections", connections] => Ok(SelfReport {
            heap: heap.parse().map_err(|_| bad())?,
            tasks: tasks.parse().map_err(|_| bad())?,
            connections: connections.parse().map_err(|_| bad())?,
        }),
        _ => Err(bad()),
    }
}

/// A client process.
pub struct ClientProc {
    process: Piped,
}

/// What a client process measured between `record` and `stop`.
#[derive(Debug, Clone)]
pub struct ClientResult {
    /// Calls completed.
    pub calls: u64,
    /// The recording's length, seconds.
    pub seconds: f64,
    /// Workers that stopped on a failed call.
    pub failures: u64,
    /// The latencies, as the client wrote its histogram.
    pub histogram: String,
    /// The first failure.
    pub error: Option<String>,
}

impl ClientProc {
    /// Starts a client process with `args`.
    pub fn start(exe: &Path, args: &ClientArgs) -> io::Result<ClientProc> {
        let mut command = Command::new(exe);
        command.args(["--role", "client", "--transport", args.transport.arg()]);
        command.arg("--addr").arg(args.addr.to_string());
        for (flag, value) in [
            ("--connections", args.connections),
            ("--workers", args.workers),
            ("--connects-at-once", args.connects_at_once),
            ("--echo", args.echo),
        ] {
            command.arg(flag).arg(value.to_string());
        }
        command.args(args.tuning.args());
        if let Some(cpus) = &args.cpus {
            command.arg("--cpus").arg(cpu_list(cpus));
        }
        Ok(ClientProc {
            process: Piped::start(command)?,
        })
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.process.child.id()
    }

    /// Waits until its connections are up: the seconds they took, or why they are not.
    pub fn ready(&mut self) -> Result<f64, String> {
        let line = self.process.read_line().map_err(|e| e.to_string())?;
        if let Some(reason) = line.strip_prefix("failed ") {
            return Err(reason.to_string());
        }
        line.strip_prefix("ready ")
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("the client said {line:?}"))
    }

    /// Sends a command (`run`, `record`, `stop`).
    pub fn send(&mut self, command: &str) -> io::Result<()> {
        self.process.send(command)
    }

    /// Reads the result it prints after `stop`.
    pub fn result(&mut self) -> io::Result<ClientResult> {
        let line = self.process.read_line()?;
        let bad = || io::Error::other(format!("the client's result {line:?}"));
        let (head, error) = match line.split_once(" error ") {
            Some((h, e)) => (h, Some(e.to_string())),
            None => (line.as_str(), None),
        };
        let words: Vec<&str> = head.split_whitespace().collect();
        match words[..] {
            ["result", "calls", calls, "seconds", seconds, "failures", failures, "hist", hist] => {
                Ok(ClientResult {
                    calls: calls.parse().map_err(|_| bad())?,
                    seconds: seconds.parse().map_err(|_| bad())?,
                    failures: failures.parse().map_err(|_| bad())?,
                    histogram: hist.to_string(),
                    error,
                })
            }
            _ => Err(bad()),
        }
    }

    /// Lets it disconnect and exit; whether it exited successfully.
    pub fn finish(self) -> io::Result<bool> {
        self.process.finish()
    }
}

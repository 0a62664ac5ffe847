//! Peers that stall connection setup, written as raw bytes on a tokio `TcpStream` (no project
//! code builds or reads what they send), and the process's resource figures, for the hostile
//! handshake tests (included with `#[path]`).

#![allow(dead_code)] // Each test file uses its own part.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The safety net of every wait that ends on an event. Never what a test asserts; far below
/// the 60 s handshake timeouts the tests configure, so a client that got in within it was not
/// held up by a stalled peer's timeout.
pub const SAFETY: Duration = Duration::from_secs(20);

/// An MPA Request (RFC 5044 section 7.1), revision 1, no markers, no CRC, carrying
/// `private_data`: the key "MPA ID Req Frame", the flags octet, the revision, the private
/// data length (big-endian), the private data.
pub fn mpa_request(private_data: &[u8]) -> Vec<u8> {
    let mut out = b"MPA ID Req Frame".to_vec();
    out.push(0x00); // M, C, R, S and Res all clear.
    out.push(1); // Rev
    out.extend_from_slice(&(private_data.len() as u16).to_be_bytes());
    out.extend_from_slice(private_data);
    out
}

/// The key of an MPA Reply.
pub const MPA_REPLY_KEY: &[u8; 16] = b"MPA ID Rep Frame";
/// The Reject bit of the flags octet of an MPA Reply (RFC 5044 section 7.1).
pub const MPA_REJECT: u8 = 0x20;

/// What a peer reading its connection saw.
#[derive(Debug, PartialEq, Eq)]
pub enum Seen {
    /// The server closed the connection (EOF or a reset) before sending anything more.
    Closed,
    /// An MPA Reply: its flags octet.
    Reply {
        /// The flags octet (M, C, R, S, Res).
        flags: u8,
    },
    /// Bytes that are not an MPA Reply.
    Other(Vec<u8>),
    /// Nothing within [`SAFETY`].
    Nothing,
}

/// Reads the fixed part of an MPA Reply, or the close, within [`SAFETY`].
pub async fn read_mpa_answer(stream: &mut TcpStream) -> Seen {
    let mut head = [0u8; 20];
    let mut got = 0;
    let read = tokio::time::timeout(SAFETY, async {
        while got < head.len() {
            match stream.read(&mut head[got..]).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got += n,
            }
        }
    })
    .await;
    if read.is_err() {
        return Seen::Nothing;
    }
    match got {
        0 => Seen::Closed,
        20 if &head[..16] == MPA_REPLY_KEY => Seen::Reply { flags: head[16] },
        _ => Seen::Other(head[..got].to_vec()),
    }
}

/// Waits up to [`SAFETY`] for the server to close `stream`: true on EOF or a reset.
pub async fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    tokio::time::timeout(SAFETY, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return true,
                Ok(_) => {}
            }
        }
    })
    .await
    .unwrap_or(false)
}

/// True when the server has not closed `stream` (nothing to read, no EOF): a look that does
/// not wait.
pub fn still_open(stream: &TcpStream) -> bool {
    let mut buf = [0u8; 64];
    matches!(stream.try_read(&mut buf), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
}

/// Connects and sends nothing.
pub async fn silent(addr: SocketAddr) -> TcpStream {
    TcpStream::connect(addr).await.unwrap()
}

/// Connects and sends the first `len` bytes of `message`, then neither reads, writes nor
/// closes: a peer whose host vanished mid-handshake leaves the server this (half-open).
pub async fn partial(addr: SocketAddr, message: &[u8], len: usize) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&message[..len]).await.unwrap();
    s
}

/// Resets `stream` (SO_LINGER 0, then close): the peer vanishes with an RST.
pub fn reset(stream: TcpStream) {
    stream.set_zero_linger().unwrap();
    drop(stream);
}

/// A peer that sends `message` one byte at a time, a byte every `interval`, in a task of its
/// own; [`Trickle::sent`] counts what went out, and the task ends when the server closes the
/// connection (or the whole message went, which the tests make take far longer than they
/// wait).
pub struct Trickle {
    sent: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    closed: tokio::sync::watch::Receiver<bool>,
    task: tokio::task::JoinHandle<()>,
    /// The message's length.
    pub len: usize,
}

impl Trickle {
    /// Connects to `addr` and starts trickling `message`.
    pub async fn start(addr: SocketAddr, message: Vec<u8>, interval: Duration) -> Trickle {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let sent = std::sync::Arc::new(AtomicUsize::new(0));
        let (tell, closed) = tokio::sync::watch::channel(false);
        let len = message.len();
        let task = tokio::spawn({
            let sent = sent.clone();
            async move {
                let mut probe = [0u8; 64];
                for byte in message {
                    if stream.write_all(&[byte]).await.is_err() {
                        break;
                    }
                    sent.fetch_add(1, Ordering::SeqCst);
                    // Wait out the interval, watching for the server's close meanwhile.
                    let waited = tokio::time::timeout(interval, stream.read(&mut probe)).await;
                    if let Ok(Ok(0) | Err(_)) = waited {
                        break;
                    }
                }
                tell.send_replace(true);
                // Held until the task is dropped or the server closes it.
                let _ = stream.read(&mut probe).await;
            }
        });
        Trickle {
            sent,
            closed,
            task,
            len,
        }
    }

    /// Bytes sent so far.
    pub fn sent(&self) -> usize {
        self.sent.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits up to [`SAFETY`] for the trickle to stop (the server closed the connection, or
    /// the message went out): true if it stopped.
    pub async fn stopped(&mut self) -> bool {
        tokio::time::timeout(SAFETY, self.closed.wait_for(|c| *c))
            .await
            .is_ok()
    }
}

impl Drop for Trickle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The process's resources that a connection holds: open descriptors, the runtime's live
/// tasks, resident memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Figures {
    /// Entries in `/proc/self/fd`.
    pub fds: usize,
    /// `num_alive_tasks` of the current runtime.
    pub tasks: usize,
    /// `VmRSS` of `/proc/self/status`, in KiB.
    pub rss_kib: usize,
}

impl Figures {
    /// The figures now (inside a tokio runtime).
    pub fn now() -> Figures {
        let fds = std::fs::read_dir("/proc/self/fd").unwrap().count();
        let tasks = tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks();
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let rss_kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap();
        Figures {
            fds,
            tasks,
            rss_kib,
        }
    }

    /// True when `self` is back to `baseline`: descriptors and tasks exactly, resident memory
    /// within `rss_slack_kib` (the allocator keeps some of what was freed).
    pub fn back_to(&self, baseline: &Figures, rss_slack_kib: usize) -> bool {
        self.fds <= baseline.fds
            && self.tasks <= baseline.tasks
            && self.rss_kib <= baseline.rss_kib.saturating_add(rss_slack_kib)
    }
}

/// Waits (up to [`SAFETY`]) for the figures to return to `baseline` and asserts they did:
/// descriptors and tasks close asynchronously once the peers are gone.
pub async fn assert_back_to(baseline: &Figures, rss_slack_kib: usize) {
    let mut now = Figures::now();
    let deadline = tokio::time::Instant::now() + SAFETY;
    while !now.back_to(baseline, rss_slack_kib) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
        now = Figures::now();
    }
    eprintln!("resources: before {baseline:?}, after {now:?}");
    assert!(
        now.back_to(baseline, rss_slack_kib),
        "resources not back to the baseline: before {baseline:?}, after {now:?} \
         (RSS slack {rss_slack_kib} KiB); sockets open: {}",
        open_sockets()
    );
}

/// The TCP sockets this process holds, as `local -> remote state` lines of `/proc/net/tcp`,
/// for a failure's message.
fn open_sockets() -> String {
    let inodes: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect();
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let port =
        |hex: &str| u16::from_str_radix(hex.rsplit(':').next().unwrap_or("0"), 16).unwrap_or(0);
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            (f.len() > 9 && inodes.iter().any(|i| i == f[9]))
                .then(|| format!("{} -> {} state {}", port(f[1]), port(f[2]), f[3]))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Runs `test` on a two-worker runtime of its own, one test of the binary at a time (the
/// descriptors and memory measured are the process's), the runtime gone before the next test
/// starts.
pub fn one_at_a_time(test: impl std::future::Future<Output = ()>) {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(test);
    drop(runtime);
}

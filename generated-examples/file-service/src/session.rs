//! The scripted session `file-demo` runs and the tests check: one call of each kind, each
//! measured ([`Movement`]) and its result verified against what the directory must hold.
//!
//! The server's directory starts as [`populate`] leaves it: `hello.txt` and [`LOGS`] small log
//! files. The session reads `hello.txt`, creates `big.bin` and writes and reads it back in
//! every way a transfer can move, lists the directory, removes the logs in one call and lists
//! it again.

use std::future::Future;
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rpcrdma::rdma::Provider;
use rpcrdma::xdr::{Encode, Encoder};

use crate::client::{self, Files};
use crate::movement::{Meter, Movement, Snapshot};
use crate::proto::*;

/// The small text file the directory starts with.
pub const HELLO: &str = "hello.txt";
/// Its contents.
pub const HELLO_TEXT: &[u8] =
    b"Hello over RPC-over-RDMA: this file was read straight into a registered buffer.\n";
/// The file the session creates.
pub const BIG: &str = "big.bin";
/// The size of its first WRITE (a Read chunk) and READ (a Write chunk).
pub const BIG_LEN: usize = 1 << 20;
/// The size of the WRITE that stays inline (DDP-eligible, but it fits the server's receive
/// buffer and is under the transport's `min_ddp_size`).
pub const SMALL_LEN: usize = 512;
/// The log files the directory starts with: enough that a listing is longer than the
/// client's receive buffer and that removing them all is a long call.
pub const LOGS: usize = 400;

/// The name of log file `i`.
pub fn log_name(i: usize) -> String {
    format!("log-{i:03}.txt")
}

/// The contents of log file `i`.
pub fn log_text(i: usize) -> String {
    format!("entry {i}\n")
}

/// Deterministic bytes that notice shifts and reordering.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u8)
                .wrapping_mul(31)
                .wrapping_add(seed)
                .wrapping_add((i >> 8) as u8)
        })
        .collect()
}

/// Fills `dir` (empty) as the session expects it.
pub fn populate(dir: &Path) -> io::Result<()> {
    std::fs::write(dir.join(HELLO), HELLO_TEXT)?;
    for i in 0..LOGS {
        std::fs::write(dir.join(log_name(i)), log_text(i))?;
    }
    Ok(())
}

/// One call of the session.
#[derive(Debug, Clone)]
pub struct Step {
    /// A stable name for the step (`"read-1m"`), for tests.
    pub key: &'static str,
    /// The procedure.
    pub procedure: &'static str,
    /// What the call did, for people.
    pub detail: String,
    /// XDR size of the arguments.
    pub call_bytes: usize,
    /// XDR size of the results.
    pub reply_bytes: usize,
    /// How the call and the reply moved.
    pub movement: Movement,
    /// Call to reply.
    pub elapsed: Duration,
    /// The result checked against the expected one: `Err` says what differs.
    pub check: Result<(), String>,
}

/// A call that failed outright.
#[derive(Debug)]
pub struct SessionError {
    /// The step.
    pub key: &'static str,
    /// Why.
    pub error: client::Error,
}

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "step {}: {}", self.key, self.error)
    }
}

impl std::error::Error for SessionError {}

/// Runs the session, calling `each` with every step as soon as it is verified.
pub async fn run<P: Provider>(
    files: &Files,
    meter: &Meter<P>,
    each: impl FnMut(&Step),
) -> Result<Vec<Step>, SessionError> {
    let mut s = Session {
        meter,
        each,
        steps: Vec::new(),
    };

    s.call("null", "NULL", String::new(), &(), files.null(), |_| 0)
        .await?;
    s.done(Ok(()));

    let args = LookupArgs { name: HELLO.into() };
    let hello = s
        .call(
            "lookup",
            "LOOKUP",
            HELLO.into(),
            &args,
            files.lookup(&args),
            len,
        )
        .await?;
    s.done(equal("size", hello.attr.size, HELLO_TEXT.len() as u64));

    let attr = s
        .call(
            "getattr",
            "GETATTR",
            HELLO.into(),
            &hello.handle,
            files.getattr(hello.handle),
            len,
        )
        .await?;
    s.done(equal("size", attr.size, HELLO_TEXT.len() as u64));

    // Up to 4 KiB of data and the reply's header fit the client's 5 KiB receive buffer, so
    // the client provides no Write chunk and the reply comes back in one Send, as over TCP.
    let args = read_args(hello.handle, 0, 4096);
    let ok = s
        .call(
            "read-small",
            "READ",
            format!("{HELLO} 4 KiB @0"),
            &args,
            files.read(&args),
            len,
        )
        .await?;
    s.done(data_and_eof(&ok, HELLO_TEXT, true));

    let args = LookupArgs { name: BIG.into() };
    let big = s
        .call(
            "create",
            "CREATE",
            BIG.into(),
            &args,
            files.create(&args),
            len,
        )
        .await?;
    s.done(equal("size", big.attr.size, 0));

    // From the connection's registered memory: the server reads it by RDMA Read, no copy.
    let content = pattern(BIG_LEN, 7);
    let mut buf = files.buffer(BIG_LEN);
    buf.as_mut_slice().copy_from_slice(&content);
    let args = WriteArgs {
        handle: big.handle,
        offset: 0,
        data: buf.freeze(BIG_LEN),
    };
    let detail = format!("{BIG} {} @0", size(BIG_LEN));
    let ok = s
        .call("write-1m", "WRITE", detail, &args, files.write(&args), len)
        .await?;
    s.done(written(&ok, BIG_LEN, BIG_LEN as u64));

    let args = read_args(big.handle, 0, BIG_LEN as u32);
    let detail = format!("{BIG} {} @0", size(BIG_LEN));
    let ok = s
        .call("read-1m", "READ", detail, &args, files.read(&args), len)
        .await?;
    s.done(data_and_eof(&ok, &content, true));

    // DDP-eligible, but under min_ddp_size: it stays in the Send.
    let tail = pattern(SMALL_LEN, 9);
    let args = WriteArgs {
        handle: big.handle,
        offset: BIG_LEN as u64,
        data: Bytes::from(tail.clone()),
    };
    let total = BIG_LEN + SMALL_LEN;
    let detail = format!("{BIG} {} @{}", size(SMALL_LEN), size(BIG_LEN));
    let ok = s
        .call(
            "write-small",
            "WRITE",
            detail,
            &args,
            files.write(&args),
            len,
        )
        .await?;
    s.done(written(&ok, SMALL_LEN, total as u64));

    // Nothing to return: the Write chunk provided (64 KiB do not fit the client's receive
    // buffer) stays unused and the reply is inline.
    let args = read_args(big.handle, total as u64, 64 * 1024);
    let detail = format!("{BIG} 64 KiB @{total} (at the end)");
    let ok = s
        .call("read-eof", "READ", detail, &args, files.read(&args), len)
        .await?;
    s.done(data_and_eof(&ok, b"", true));

    // Into the client's own registered buffer: the server's RDMA Write lands in it and the
    // result is a view of it.
    let args = read_args(big.handle, 0, total as u32);
    let detail = format!("{BIG} {total} B @0 into a client buffer");
    let read = files.read_into(&args, files.buffer(total));
    let ok = s
        .call("read-into", "READ", detail, &args, read, len)
        .await?;
    let whole: Vec<u8> = content.iter().chain(&tail).copied().collect();
    s.done(data_and_eof(&ok, &whole, true));

    let mut expected: Vec<(String, u64)> = (0..LOGS)
        .map(|i| (log_name(i), log_text(i).len() as u64))
        .collect();
    expected.push((HELLO.into(), HELLO_TEXT.len() as u64));
    expected.push((BIG.into(), total as u64));
    expected.sort();
    let args = ListArgs {
        cookie: 0,
        count: FILES_MAXLIST,
    };
    let detail = format!("{} files", expected.len());
    let ok = s
        .call("list", "LIST", detail, &args, files.list(&args), len)
        .await?;
    s.done(listing(&ok, &expected));

    // Names are not DDP-eligible: a call this long goes whole, by a Position-Zero Read chunk.
    let args = RemoveArgs {
        names: (0..LOGS).map(|i| log_name(i).as_str().into()).collect(),
    };
    let detail = format!("{LOGS} names");
    let removed = s
        .call(
            "remove",
            "REMOVE",
            detail,
            &args,
            files.remove(&args),
            |_| 8,
        )
        .await?;
    s.done(equal("removed", removed, LOGS as u32));

    expected.retain(|(name, _)| !name.starts_with("log-"));
    let detail = format!("{} files", expected.len());
    let args = ListArgs {
        cookie: 0,
        count: FILES_MAXLIST,
    };
    let ok = s
        .call("list-after", "LIST", detail, &args, files.list(&args), len)
        .await?;
    s.done(listing(&ok, &expected));

    Ok(s.steps)
}

fn read_args(handle: Fhandle, offset: u64, count: u32) -> ReadArgs {
    ReadArgs {
        handle,
        offset,
        count,
    }
}

/// The XDR size of a `FILES_OK` result: the status word and the arm.
fn len<T: Encode>(ok: &T) -> usize {
    4 + xdr_len(ok)
}

/// The XDR size of `value` (large opaque data is gathered, not copied).
pub fn xdr_len<T: Encode + ?Sized>(value: &T) -> usize {
    let mut enc = Encoder::new();
    match value.encode(&mut enc) {
        Ok(()) => enc.len(),
        Err(_) => 0,
    }
}

/// `n` bytes for people: `1 MiB` and `4 KiB` when round, `512 B` and `1049088 B` otherwise.
pub fn size(n: usize) -> String {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * KIB;
    match n {
        0 => "0 B".into(),
        n if n % MIB == 0 => format!("{} MiB", n / MIB),
        n if n % KIB == 0 => format!("{} KiB", n / KIB),
        n => format!("{n} B"),
    }
}

struct Session<'a, P: Provider, F> {
    meter: &'a Meter<P>,
    each: F,
    steps: Vec<Step>,
}

impl<P: Provider, F: FnMut(&Step)> Session<'_, P, F> {
    /// Runs one call between two snapshots; [`Session::done`] records its check.
    async fn call<A: Encode + ?Sized, R>(
        &mut self,
        key: &'static str,
        procedure: &'static str,
        detail: String,
        args: &A,
        call: impl Future<Output = Result<R, client::Error>>,
        reply_len: impl Fn(&R) -> usize,
    ) -> Result<R, SessionError> {
        let before: Snapshot = self.meter.snapshot();
        let start = Instant::now();
        let result = call.await;
        let elapsed = start.elapsed();
        let movement = before.movement(&self.meter.snapshot());
        let result = result.map_err(|error| SessionError { key, error })?;
        self.steps.push(Step {
            key,
            procedure,
            detail,
            call_bytes: xdr_len(args),
            reply_bytes: reply_len(&result),
            movement,
            elapsed,
            check: Err("not checked".into()),
        });
        Ok(result)
    }

    fn done(&mut self, check: Result<(), String>) {
        if let Some(step) = self.steps.last_mut() {
            step.check = check;
            (self.each)(step);
        }
    }
}

fn equal<T: PartialEq + std::fmt::Debug>(what: &str, got: T, expected: T) -> Result<(), String> {
    if got == expected {
        Ok(())
    } else {
        Err(format!("{what} is {got:?}, expected {expected:?}"))
    }
}

fn data_and_eof(ok: &ReadOk, expected: &[u8], eof: bool) -> Result<(), String> {
    equal("eof", ok.eof, eof)?;
    equal("length", ok.data.len(), expected.len())?;
    match ok.data.iter().zip(expected).position(|(a, b)| a != b) {
        Some(at) => Err(format!("data differs at byte {at}")),
        None => Ok(()),
    }
}

fn written(ok: &WriteOk, count: usize, file_size: u64) -> Result<(), String> {
    equal("count", ok.count as usize, count)?;
    equal("file size", ok.attr.size, file_size)
}

fn listing(ok: &ListOk, expected: &[(String, u64)]) -> Result<(), String> {
    let got: Vec<(String, u64)> = ok
        .entries
        .iter()
        .map(|e| (e.name.as_str().unwrap_or("<not UTF-8>").to_owned(), e.size))
        .collect();
    equal("eof", ok.eof, true)?;
    if got == expected {
        return Ok(());
    }
    let missing = expected.iter().find(|e| !got.contains(e));
    let extra = got.iter().find(|e| !expected.contains(e));
    Err(format!(
        "{} entries, expected {}; first missing {missing:?}, first unexpected {extra:?}",
        got.len(),
        expected.len()
    ))
}

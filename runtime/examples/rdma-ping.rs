//! rdma-ping: Send/receive, RDMA Write or RDMA Read round trips between two endpoints.
//!
//! ```text
//! cargo run -p rpcrdma --example rdma-ping -- --listen 127.0.0.1:7471
//! cargo run -p rpcrdma --example rdma-ping -- --connect 127.0.0.1:7471 --op write --size 65536 --count 100
//! ```
//!
//! The client tells the server the size and operation in its connection private data; the
//! server answers with the steering tag, address and length of a buffer it registered for
//! remote access. Sends are echoed back by the server; Writes and Reads target that buffer.
//! A zero-length Send ends the session.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use rpcrdma::rdma::soft::{
    MpaConfig, PcapTap, RnicKind, SoftConfig, SoftConnection, SoftProvider, WireTap,
};
use rpcrdma::rdma::{
    Access, ConnectParams, ConnectRequest, Connection, Listener, Provider, RecvWr, RemoteAddr,
    SendWr, Sge, WcOpcode,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ProviderKind {
    Soft,
    Verbs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Rnic {
    Rdmac,
    Ietf,
    IetfPermissive,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Op {
    Send,
    Write,
    Read,
}

/// RDMA ping over the software iWARP provider (or verbs).
#[derive(Parser, Debug)]
#[command(name = "rdma-ping")]
struct Args {
    /// Listen on this address and serve one session.
    #[arg(long, conflicts_with = "connect", required_unless_present = "connect")]
    listen: Option<SocketAddr>,
    /// Connect to this address.
    #[arg(long)]
    connect: Option<SocketAddr>,
    /// Which provider to use.
    #[arg(long, value_enum, default_value = "soft")]
    provider: ProviderKind,
    /// RNIC flavour of this endpoint (draft-carrier-rddp-rnic-interop).
    #[arg(long, value_enum, default_value = "ietf-permissive")]
    rnic: Rnic,
    /// Ask for MPA markers in the data this endpoint receives.
    #[arg(long)]
    markers: bool,
    /// Ask for MPA CRC32c.
    #[arg(long)]
    crc: bool,
    /// MPA revision (1: RFC 5044, 2: RFC 6581 enhanced connection establishment).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=2))]
    mpa_rev: u8,
    /// Bytes per operation.
    #[arg(long, default_value_t = 64)]
    size: u32,
    /// Number of operations.
    #[arg(long, default_value_t = 10)]
    count: u32,
    /// Operation to time.
    #[arg(long, value_enum, default_value = "send")]
    op: Op,
    /// Software provider: write what went over the connection to this pcap file at the end
    /// (also when the session failed), for Wireshark or tshark.
    #[arg(long)]
    pcap: Option<std::path::PathBuf>,
}

const OP_SEND: u8 = 0;
const OP_WRITE: u8 = 1;
const OP_READ: u8 = 2;
const TIMEOUT: Duration = Duration::from_secs(30);

/// The bytes of the server's buffer (what Reads fetch).
fn server_pattern(size: usize) -> Vec<u8> {
    (0..size).map(|i| i as u8).collect()
}

/// The bytes the client sends and writes.
fn client_pattern(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i * 7) as u8).collect()
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = match args.provider {
        ProviderKind::Soft => runtime.block_on(run_soft(&args)),
        ProviderKind::Verbs => runtime.block_on(run_verbs(&args)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rdma-ping: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The verbs provider (feature `verbs`): rdma_cm + libibverbs, e.g. Soft-RoCE.
#[cfg(feature = "verbs")]
async fn run_verbs(args: &Args) -> Result<(), String> {
    let provider = rpcrdma::rdma::verbs::VerbsProvider::new();
    if let Some(addr) = args.listen {
        serve(&provider, addr).await
    } else if let Some(addr) = args.connect {
        ping(&provider, addr, args).await
    } else {
        Err("give --listen or --connect".into())
    }
}

/// Without the `verbs` feature.
#[cfg(not(feature = "verbs"))]
async fn run_verbs(_args: &Args) -> Result<(), String> {
    Err(
        "the verbs provider is not available in this build (rebuild with `--features verbs`)"
            .into(),
    )
}

/// What the session code needs to explain a connection, per provider.
trait PingConn: Connection {
    /// Prints what was negotiated.
    fn describe(&self) {}
    /// Explains why the connection went down.
    fn explain(&self, e: String) -> String {
        e
    }
}

impl PingConn for SoftConnection {
    fn describe(&self) {
        describe_soft(self)
    }
    fn explain(&self, e: String) -> String {
        why_soft(self, e)
    }
}

#[cfg(feature = "verbs")]
impl PingConn for rpcrdma::rdma::verbs::VerbsConnection {}

fn describe<C: PingConn>(conn: &C) {
    conn.describe()
}

fn why<C: PingConn>(conn: &C, e: impl std::fmt::Display) -> String {
    conn.explain(e.to_string())
}

async fn run_soft(args: &Args) -> Result<(), String> {
    let kind = match args.rnic {
        Rnic::Rdmac => RnicKind::Rdmac,
        Rnic::Ietf => RnicKind::Ietf,
        Rnic::IetfPermissive => RnicKind::IetfPermissive,
    };
    let capture = args.pcap.as_ref().map(|_| Arc::new(PcapTap::new()));
    let provider = SoftProvider::new(SoftConfig {
        mpa: MpaConfig {
            kind,
            markers: args.markers,
            crc: args.crc,
            revision: args.mpa_rev,
        },
        tap: capture.clone().map(|c| c as Arc<dyn WireTap>),
        ..SoftConfig::default()
    });
    let result = if let Some(addr) = args.listen {
        serve(&provider, addr).await
    } else if let Some(addr) = args.connect {
        ping(&provider, addr, args).await
    } else {
        Err("give --listen or --connect".into())
    };
    if let (Some(path), Some(capture)) = (&args.pcap, capture) {
        std::fs::write(path, capture.pcap())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    result
}

fn describe_soft(conn: &SoftConnection) {
    let n = conn.negotiated();
    let onoff = |b: bool| if b { "on" } else { "off" };
    println!(
        "negotiated: MPA revision sent {} / peer {}, DDP/RDMAP version {} ({}), \
         markers receive {} / send {}, CRC {}",
        n.local_revision,
        n.peer_revision,
        n.version,
        if n.version == 0 { "RDMAC" } else { "IETF" },
        onoff(n.rx_markers),
        onoff(n.tx_markers),
        onoff(n.crc)
    );
    if let Some(e) = n.peer_enhanced {
        println!("peer IRD {} ORD {}", e.ird, e.ord);
    }
}

async fn next<C: Connection>(conn: &C) -> Result<rpcrdma::rdma::Completion, String> {
    tokio::time::timeout(TIMEOUT, conn.poll_completion())
        .await
        .map_err(|_| "timed out waiting for a completion".to_string())
}

/// Explains why a connection went down.
fn why_soft(conn: &SoftConnection, e: impl std::fmt::Display) -> String {
    if let Some(t) = conn.terminate_received() {
        format!("{e} (the peer sent Terminate {:?})", t.code)
    } else if let Some(t) = conn.terminate_sent() {
        format!("{e} (this side sent Terminate {:?})", t.code)
    } else {
        e.to_string()
    }
}

async fn serve<P: Provider>(provider: &P, addr: SocketAddr) -> Result<(), String>
where
    P::Conn: PingConn,
{
    let listener = provider.listen(addr).await.map_err(|e| e.to_string())?;
    println!(
        "listening on {}",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    let request = listener.next_request().await.map_err(|e| e.to_string())?;
    let pd = request.private_data().to_vec();
    if pd.len() != 5 {
        let _ = request.reject(b"rdma-ping: bad request").await;
        return Err(format!("bad request private data ({} bytes)", pd.len()));
    }
    let size = u32::from_be_bytes([pd[0], pd[1], pd[2], pd[3]]) as usize;
    let op = pd[4];
    if size > 64 << 20 {
        let _ = request.reject(b"rdma-ping: size above 64 MiB").await;
        return Err(format!("refused size {size}"));
    }
    // Registrations live on the connection, so the buffer's keys go in a first Send after
    // accepting; the receives are posted before the peer's data is processed.
    let slot = size.max(16);
    let mut regions = None;
    let conn = request
        .accept_with(ConnectParams::new(), |conn: &P::Conn| {
            let buf = conn.register(
                server_pattern(size),
                Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
            )?;
            let rbuf = conn.register(vec![0; slot * 2], Access::LOCAL_WRITE)?;
            for i in 0..2 {
                let sge = Sge::new(&rbuf, i * slot..(i + 1) * slot)?;
                conn.post_recv(RecvWr::new(i as u64, sge))?;
            }
            regions = Some((buf, rbuf));
            Ok(())
        })
        .await
        .map_err(|e| e.to_string())?;
    let (buf, rbuf) = regions.ok_or("setup did not run")?;
    println!("session from {}", conn.peer_addr());
    describe(&conn);
    let mut keys = Vec::with_capacity(16);
    keys.extend_from_slice(&buf.rkey().to_be_bytes());
    keys.extend_from_slice(&buf.addr().to_be_bytes());
    keys.extend_from_slice(&(size as u32).to_be_bytes());
    let keys = conn
        .register(keys, Access::NONE)
        .map_err(|e| why(&conn, e))?;
    conn.post_send(SendWr::send(100, vec![Sge::whole(&keys)]))
        .map_err(|e| why(&conn, e))?;
    let echo = conn
        .register(vec![0; slot], Access::NONE)
        .map_err(|e| why(&conn, e))?;
    let mut served = 0u64;
    loop {
        let c = next(&conn).await?;
        if !c.is_success() {
            return Err(why(&conn, format!("completion failed: {c:?}")));
        }
        if c.opcode != WcOpcode::Recv {
            continue;
        }
        if c.byte_len == 0 {
            break;
        }
        let i = c.wr_id as usize;
        let data = rbuf
            .to_vec(i * slot..i * slot + c.byte_len as usize)
            .map_err(|e| why(&conn, e))?;
        echo.write(0, &data).map_err(|e| why(&conn, e))?;
        let sge = Sge::new(&rbuf, i * slot..(i + 1) * slot).map_err(|e| why(&conn, e))?;
        conn.post_recv(RecvWr::new(i as u64, sge))
            .map_err(|e| why(&conn, e))?;
        let reply = Sge::new(&echo, 0..data.len()).map_err(|e| why(&conn, e))?;
        conn.post_send(SendWr::send(200 + served, vec![reply]))
            .map_err(|e| why(&conn, e))?;
        served += 1;
    }
    println!("session ended after {served} echoed messages");
    // After RDMA Writes the buffer holds the client's pattern; after Reads (or Sends) it is
    // untouched.
    let expected = if op == OP_WRITE {
        client_pattern(size)
    } else {
        server_pattern(size)
    };
    if size > 0 && buf.to_vec(0..size).map_err(|e| why(&conn, e))? != expected {
        let _ = conn.disconnect().await;
        return Err("the target buffer does not hold the expected bytes".into());
    }
    println!("target buffer checked: {size} bytes as expected");
    let _ = conn.disconnect().await;
    Ok(())
}

async fn ping<P: Provider>(provider: &P, addr: SocketAddr, args: &Args) -> Result<(), String>
where
    P::Conn: PingConn,
{
    let size = args.size as usize;
    let op = match args.op {
        Op::Send => OP_SEND,
        Op::Write => OP_WRITE,
        Op::Read => OP_READ,
    };
    let mut pd = args.size.to_be_bytes().to_vec();
    pd.push(op);
    let slot = size.max(16);
    let mut receive = None;
    let conn = provider
        .connect_with(
            addr,
            ConnectParams::new().private_data(pd),
            |conn: &P::Conn| {
                // Posted before the server's first Send can arrive.
                let rbuf = conn.register(vec![0; slot * 2], Access::LOCAL_WRITE)?;
                conn.post_recv(RecvWr::new(0, Sge::new(&rbuf, 0..slot)?))?;
                receive = Some(rbuf);
                Ok(())
            },
        )
        .await
        .map_err(|e| format!("connection to {addr} refused: {e}"))?;
    let rbuf = receive.ok_or("setup did not run")?;
    println!("connected to {}", conn.peer_addr());
    describe(&conn);
    // The server's buffer keys arrive in its first Send.
    let c = next(&conn).await?;
    if !c.is_success() || c.byte_len != 16 {
        return Err(format!("no buffer keys from the server: {c:?}"));
    }
    let k = rbuf.to_vec(0..16).map_err(|e| why(&conn, e))?;
    let rkey = u32::from_be_bytes([k[0], k[1], k[2], k[3]]);
    let raddr = u64::from_be_bytes(k[4..12].try_into().expect("8 bytes"));
    let remote = RemoteAddr::new(rkey, raddr);

    let data = conn
        .register(client_pattern(size), Access::LOCAL_WRITE)
        .map_err(|e| why(&conn, e))?;
    let mut times = Vec::with_capacity(args.count as usize);
    let mut failures = 0u32;
    let started = Instant::now();
    for i in 0..args.count as u64 {
        let t0 = Instant::now();
        let result = match args.op {
            Op::Send => {
                conn.post_recv(RecvWr::new(
                    1000 + i,
                    Sge::new(&rbuf, slot..2 * slot).map_err(|e| why(&conn, e))?,
                ))
                .map_err(|e| why(&conn, e))?;
                conn.post_send(SendWr::send(i, vec![Sge::whole(&data)]))
                    .map_err(|e| why(&conn, e))?;
                let mut ok = true;
                let mut got_recv = false;
                let mut got_send = false;
                while !(got_recv && got_send) {
                    let c = next(&conn).await?;
                    ok &= c.is_success();
                    got_recv |= c.opcode == WcOpcode::Recv;
                    got_send |= c.opcode == WcOpcode::Send;
                    if !c.is_success() {
                        break;
                    }
                }
                let echoed = rbuf.to_vec(slot..slot + size).map_err(|e| why(&conn, e))?;
                ok && echoed == data.to_vec(0..size).map_err(|e| why(&conn, e))?
            }
            Op::Write => {
                conn.post_send(SendWr::write(i, vec![Sge::whole(&data)], remote))
                    .map_err(|e| why(&conn, e))?;
                next(&conn).await?.is_success()
            }
            Op::Read => {
                // The sink starts as this side's pattern each time; a Read must replace it
                // with the server's.
                data.write(0, &client_pattern(size))
                    .map_err(|e| why(&conn, e))?;
                conn.post_send(SendWr::read(i, Sge::whole(&data), remote))
                    .map_err(|e| why(&conn, e))?;
                next(&conn).await?.is_success()
                    && data.to_vec(0..size).map_err(|e| why(&conn, e))? == server_pattern(size)
            }
        };
        let dt = t0.elapsed();
        times.push(dt);
        if result {
            println!(
                "{:?} {} bytes: seq={} time={:.1} us",
                args.op,
                size,
                i,
                dt.as_secs_f64() * 1e6
            );
        } else {
            failures += 1;
            println!("{:?} {} bytes: seq={} FAILED", args.op, size, i);
            break;
        }
    }
    let total = started.elapsed();
    // End of session: a zero-length Send.
    conn.post_send(SendWr::send(u64::MAX, vec![]))
        .map_err(|e| why(&conn, e))?;
    let _ = next(&conn).await;
    let _ = conn.disconnect().await;
    times.sort();
    let n = times.len().max(1);
    let avg = times.iter().sum::<Duration>() / n as u32;
    println!(
        "--- {addr} rdma-ping: {} {:?} of {} bytes, {} ok, {} failed, min/avg/max = {:.1}/{:.1}/{:.1} us, {:.1} MB/s",
        times.len(),
        args.op,
        size,
        times.len() as u32 - failures,
        failures,
        times.first().map_or(0.0, |t| t.as_secs_f64() * 1e6),
        avg.as_secs_f64() * 1e6,
        times.last().map_or(0.0, |t| t.as_secs_f64() * 1e6),
        (size as f64 * times.len() as f64) / total.as_secs_f64() / 1e6
    );
    if failures > 0 {
        Err(format!("{failures} operation(s) failed"))
    } else {
        Ok(())
    }
}

//! Soft iWARP provider against raw TCP on loopback, measured in the same run:
//!
//! * 64-byte Send/receive round trip vs. a 64-byte TCP ping-pong (target: at most 1.3x);
//! * 1 MiB RDMA Write and RDMA Read throughput with CRC off vs. 1 MiB TCP writes
//!   (target: at least 80 % of raw TCP).
//!
//! Run with `cargo bench -p rpcrdma --bench rdma_soft`. Prints the numbers and the ratios.

use std::time::{Duration, Instant};

use rpcrdma::rdma::soft::{MpaConfig, RnicKind, SoftConfig, SoftConnection, SoftProvider};
use rpcrdma::rdma::{
    Access, ConnectParams, Connection, Listener, Provider, RecvWr, RemoteAddr, SendWr, Sge,
    WcOpcode,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const MIB: usize = 1 << 20;

fn provider(confirm: bool) -> SoftProvider {
    SoftProvider::new(SoftConfig {
        mpa: MpaConfig {
            kind: RnicKind::Ietf,
            markers: false,
            crc: false,
            revision: 2,
        },
        mulpdu: 65000,
        confirm_completions: confirm,
        ..SoftConfig::default()
    })
}

async fn pair(p: &SoftProvider) -> (SoftConnection, SoftConnection) {
    let listener = p.listen("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (c, s) = tokio::join!(
        p.connect(addr, ConnectParams::new()),
        listener.accept(ConnectParams::new())
    );
    (c.unwrap(), s.unwrap())
}

async fn tcp_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let (c, s) = tokio::join!(TcpStream::connect(addr), l.accept());
    let (c, s) = (c.unwrap(), s.unwrap().0);
    c.set_nodelay(true).unwrap();
    s.set_nodelay(true).unwrap();
    (c, s)
}

async fn tcp_round_trip(iters: usize) -> Duration {
    let (mut c, mut s) = tcp_pair().await;
    let server = tokio::spawn(async move {
        let mut buf = [0u8; 64];
        for _ in 0..iters {
            s.read_exact(&mut buf).await.unwrap();
            s.write_all(&buf).await.unwrap();
        }
    });
    let msg = [7u8; 64];
    let mut buf = [0u8; 64];
    let t = Instant::now();
    for _ in 0..iters {
        c.write_all(&msg).await.unwrap();
        c.read_exact(&mut buf).await.unwrap();
    }
    let dt = t.elapsed();
    server.await.unwrap();
    dt / iters as u32
}

async fn soft_round_trip(iters: usize, confirm: bool) -> Duration {
    let (c, s) = pair(&provider(confirm)).await;
    // The server's receive is posted before the client can send.
    let rbuf = s.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    let sbuf = s.register(vec![1; 64], Access::NONE).unwrap();
    s.post_recv(RecvWr::new(0, Sge::whole(&rbuf))).unwrap();
    let srv = s;
    let server = tokio::spawn(async move {
        let mut echoed = 0;
        while echoed < iters {
            let done = srv.poll_completion().await;
            assert!(done.is_success(), "{done:?}");
            if done.opcode == WcOpcode::Recv {
                srv.post_recv(RecvWr::new(0, Sge::whole(&rbuf))).unwrap();
                srv.post_send(SendWr::send(1, vec![Sge::whole(&sbuf)]))
                    .unwrap();
                echoed += 1;
            }
        }
        // Drain the last send completions.
        tokio::time::sleep(Duration::from_millis(50)).await;
    });
    let rbuf = c.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
    let sbuf = c.register(vec![7; 64], Access::NONE).unwrap();
    let t = Instant::now();
    for i in 0..iters as u64 {
        c.post_recv(RecvWr::new(i, Sge::whole(&rbuf))).unwrap();
        c.post_send(SendWr::send(i, vec![Sge::whole(&sbuf)]))
            .unwrap();
        loop {
            let done = c.poll_completion().await;
            assert!(done.is_success(), "{done:?}");
            if done.opcode == WcOpcode::Recv {
                break;
            }
        }
    }
    let dt = t.elapsed();
    server.await.unwrap();
    dt / iters as u32
}

async fn tcp_throughput(total: usize) -> f64 {
    let (mut c, mut s) = tcp_pair().await;
    let reader = tokio::spawn(async move {
        let mut buf = vec![0u8; MIB];
        let mut got = 0;
        while got < total {
            s.read_exact(&mut buf).await.unwrap();
            got += MIB;
        }
    });
    let data = vec![5u8; MIB];
    let t = Instant::now();
    let mut sent = 0;
    while sent < total {
        c.write_all(&data).await.unwrap();
        sent += MIB;
    }
    reader.await.unwrap();
    total as f64 / t.elapsed().as_secs_f64()
}

async fn soft_throughput(total: usize, read: bool) -> f64 {
    let (c, s) = pair(&provider(true)).await;
    let target = s
        .register(
            vec![3u8; MIB],
            Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
        )
        .unwrap();
    let remote = RemoteAddr::new(target.rkey(), target.addr());
    let local = c.register(vec![5u8; MIB], Access::LOCAL_WRITE).unwrap();
    const WINDOW: usize = 4;
    let ops = total / MIB;
    let t = Instant::now();
    let (mut posted, mut done) = (0, 0);
    while done < ops {
        while posted < ops && posted - done < WINDOW {
            let wr = if read {
                SendWr::read(posted as u64, Sge::whole(&local), remote)
            } else {
                SendWr::write(posted as u64, vec![Sge::whole(&local)], remote)
            };
            c.post_send(wr).unwrap();
            posted += 1;
        }
        let comp = c.poll_completion().await;
        assert!(comp.is_success(), "{comp:?}");
        done += 1;
    }
    let rate = total as f64 / t.elapsed().as_secs_f64();
    drop(s);
    rate
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    v[v.len() / 2]
}

/// Rounds of interleaved measurements: the machine is shared, so baseline and provider are
/// measured alternately and the medians compared.
const ROUNDS: usize = 5;

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let iters = 10_000;
        // Warm up both paths once.
        tcp_round_trip(1000).await;
        soft_round_trip(1000, true).await;
        let (mut tcp, mut soft, mut soft_local) = (vec![], vec![], vec![]);
        for _ in 0..ROUNDS {
            tcp.push(tcp_round_trip(iters).await.as_secs_f64() * 1e6);
            soft.push(soft_round_trip(iters, true).await.as_secs_f64() * 1e6);
            soft_local.push(soft_round_trip(iters, false).await.as_secs_f64() * 1e6);
        }
        let (tcp, soft, soft_local) = (median(tcp), median(soft), median(soft_local));
        println!("64-byte round trip, median of {ROUNDS} rounds of {iters}:");
        println!("  raw TCP ping-pong                         {tcp:8.2} us");
        println!(
            "  soft Send/recv (confirmed completions)    {soft:8.2} us   ratio {:.2}x (target <= 1.3x)",
            soft / tcp
        );
        println!(
            "  soft Send/recv (local completions)        {soft_local:8.2} us   ratio {:.2}x",
            soft_local / tcp
        );

        let total = 512 * MIB;
        let (mut tcp, mut write, mut read) = (vec![], vec![], vec![]);
        for _ in 0..ROUNDS {
            tcp.push(tcp_throughput(total).await / 1e6);
            write.push(soft_throughput(total, false).await / 1e6);
            read.push(soft_throughput(total, true).await / 1e6);
        }
        let (tcp, write, read) = (median(tcp), median(write), median(read));
        println!(
            "1 MiB transfers, {} MiB per round, median of {ROUNDS} rounds, CRC off, markers off:",
            total / MIB
        );
        println!("  raw TCP        {tcp:8.0} MB/s");
        println!(
            "  RDMA Write     {write:8.0} MB/s   {:.0}% of raw TCP (target >= 80%)",
            100.0 * write / tcp
        );
        println!(
            "  RDMA Read      {read:8.0} MB/s   {:.0}% of raw TCP (target >= 80%)",
            100.0 * read / tcp
        );
    });
}

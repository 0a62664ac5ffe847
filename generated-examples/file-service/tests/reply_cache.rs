//! A call whose reply is lost with its connection, over TCP and over RPC-over-RDMA: the
//! server ran it, the connection drops before the reply reaches the client, the client sends
//! the call again (same XID) on a new connection, and the server's duplicate request cache
//! answers with the first reply instead of running the call again.
//!
//! The loss is made where it cannot race: over TCP a proxy between client and server drops
//! the connection instead of passing the REMOVE's reply on; over RPC-over-RDMA the client's
//! provider ([`FaultyProvider::lose_next_receive`]) loses the message that carries the reply,
//! with its connection. Either way the server's handler had finished, and its reply been
//! kept, before the reply was sent.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use file_service::client::Files;
use file_service::server::FileServer;
use file_service::{files_v1, LookupArgs, ReadArgs, RemoveArgs};
use rpcrdma::rdma::faults::{FaultPlan, FaultyProvider};
use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::tcp::{TcpConfig, TcpServer, TcpTransport};
use rpcrdma::rpc::{AuthSys, Client, Credentials, ReplyCacheConfig, ReplyCacheStats, Server};
use rpcrdma::transport::{serve, RdmaConfig, RdmaTransport};
use rpcrdma::xdr::Procedure;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

const DOOMED: &str = "doomed.txt";

fn populate(dir: &Path) {
    std::fs::write(dir.join(DOOMED), b"removed once").unwrap();
}

fn remove_doomed() -> RemoveArgs {
    RemoveArgs {
        names: vec![DOOMED.into()],
    }
}

/// A client that calls with AUTH_SYS: the cache keys on the credential too, so its
/// retransmission must carry the same one.
fn with_auth_sys(client: Client) -> Client {
    let mut sys = AuthSys::new("drc-client", 1000, 100);
    sys.stamp = 0x5eed;
    client
        .with_credentials(&Credentials::Sys(sys))
        .expect("AUTH_SYS encodes")
}

fn stats(server: &Server) -> ReplyCacheStats {
    server.reply_cache_stats().expect("the cache is on")
}

/// What the proxy saw and did.
#[derive(Debug, Default)]
struct ProxyState {
    /// The XID of the call whose reply is to be lost, once seen.
    target: Option<u32>,
    /// A call of the procedure was seen: later ones (its retransmission) pass.
    armed: bool,
    /// Replies lost.
    lost: usize,
}

/// A TCP proxy that passes records both ways, except that it drops both connections
/// instead of passing on the reply to the first call of procedure `P` (record marking, RFC
/// 5531 section 11, read to find the records' XIDs).
struct LossyProxy {
    addr: SocketAddr,
    state: Arc<Mutex<ProxyState>>,
    connections: Arc<AtomicUsize>,
}

impl LossyProxy {
    async fn start<P: Procedure>(server: SocketAddr) -> LossyProxy {
        let procedure = (P::PROGRAM, P::PROCEDURE);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(ProxyState::default()));
        let connections = Arc::new(AtomicUsize::new(0));
        let (st, count) = (state.clone(), connections.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let server = TcpStream::connect(server).await.unwrap();
                tokio::spawn(relay(client, server, procedure, st.clone()));
            }
        });
        LossyProxy {
            addr,
            state,
            connections,
        }
    }

    fn lost(&self) -> usize {
        self.state.lock().unwrap().lost
    }
}

/// Relays one connection until either side closes or a reply is lost; both close then.
async fn relay(
    client: TcpStream,
    server: TcpStream,
    (program, procedure): (u32, u32),
    state: Arc<Mutex<ProxyState>>,
) {
    let (from_client, to_client) = client.into_split();
    let (from_server, to_server) = server.into_split();
    let calls = state.clone();
    let note_call = move |call: &[u8]| {
        // xid, msg_type, rpcvers, prog, vers, proc (RFC 5531 section 9).
        let word = |i: usize| {
            call.get(4 * i..4 * i + 4)
                .map(|w| u32::from_be_bytes(w.try_into().unwrap()))
        };
        let mut st = calls.lock().unwrap();
        if !st.armed && word(3) == Some(program) && word(5) == Some(procedure) {
            st.armed = true;
            st.target = word(0);
        }
        true
    };
    let pass_reply = move |reply: &[u8]| {
        let xid = reply
            .get(..4)
            .map(|w| u32::from_be_bytes(w.try_into().unwrap()));
        let mut st = state.lock().unwrap();
        if xid.is_some() && st.target == xid {
            st.target = None;
            st.lost += 1;
            return false;
        }
        true
    };
    tokio::select! {
        () = pump(from_client, to_server, note_call) => {}
        () = pump(from_server, to_client, pass_reply) => {}
    }
}

/// The largest fragment the proxy reads (the test's records are small).
const MAX_FRAGMENT: usize = 1 << 20;

/// Copies record fragments from `from` to `to`; `pass` sees the first fragment of each
/// record and stops the copy by answering false.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut pass: impl FnMut(&[u8]) -> bool,
) {
    let mut first = true;
    loop {
        let mut mark = [0u8; 4];
        if from.read_exact(&mut mark).await.is_err() {
            return;
        }
        let mark_word = u32::from_be_bytes(mark);
        let len = (mark_word & 0x7fff_ffff) as usize;
        assert!(len <= MAX_FRAGMENT, "a fragment of {len} bytes");
        let mut fragment = vec![0; len];
        if from.read_exact(&mut fragment).await.is_err() {
            return;
        }
        if first && !pass(&fragment) {
            return;
        }
        first = mark_word & 0x8000_0000 != 0;
        if to.write_all(&mark).await.is_err() || to.write_all(&fragment).await.is_err() {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tcp_a_remove_whose_reply_was_lost_returns_the_first_ok_and_removes_once() {
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path());
    let files = Arc::new(FileServer::new(dir.path()));
    let server = files.rpc_server();
    let tcp = TcpServer::bind("127.0.0.1:0", server.clone(), TcpConfig::new())
        .await
        .unwrap();
    let proxy = LossyProxy::start::<files_v1::FilesRemove>(tcp.local_addr()).await;
    let transport = TcpTransport::connect(proxy.addr, TcpConfig::new())
        .await
        .unwrap();
    let client = Files::new(with_auth_sys(Client::new(transport)));

    // The first REMOVE's reply is lost with its connection; the retransmission's answer is
    // the original one: one file removed, FILES_OK.
    assert_eq!(client.remove(&remove_doomed()).await.unwrap(), 1);
    assert_eq!(proxy.lost(), 1);
    assert_eq!(proxy.connections.load(Ordering::SeqCst), 2, "a reconnect");
    assert_eq!(files.removed(), 1);
    assert!(!dir.path().join(DOOMED).exists());
    let st = stats(&server);
    assert_eq!((st.misses, st.hits, st.in_progress), (1, 1, 0), "{st:?}");
    tcp.shutdown().await;
}

/// `server` over RPC-over-RDMA, and a client of it whose provider can lose a message it
/// receives (the side that speaks first is the one to wrap: see `rdma::faults`).
struct Rdma {
    faulty: Arc<FaultyProvider<SoftProvider>>,
    transport: Arc<RdmaTransport<FaultyProvider<SoftProvider>>>,
    files: Files,
}

async fn serve_rdma(server: Server) -> Rdma {
    let provider = SoftProvider::default();
    let listener = provider
        .listen("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let listener = Arc::new(serve::<SoftProvider>(
        listener,
        server,
        RdmaConfig::default(),
    ));
    tokio::spawn(async move { listener.run().await });
    let faulty = Arc::new(FaultyProvider::new(
        SoftProvider::default(),
        FaultPlan::none(1),
    ));
    let transport = Arc::new(
        RdmaTransport::connect(faulty.clone(), addr, RdmaConfig::default())
            .await
            .unwrap(),
    );
    let files = Files::new(with_auth_sys(Client::from_arc(transport.clone())));
    // A round trip first: the connection is up and nothing else is in flight when the next
    // message received is lost.
    files.null().await.unwrap();
    Rdma {
        faulty,
        transport,
        files,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_rdma_a_remove_whose_reply_was_lost_returns_the_first_ok_and_removes_once() {
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path());
    let files = Arc::new(FileServer::new(dir.path()));
    let server = files.rpc_server();
    let rdma = serve_rdma(server.clone()).await;

    rdma.faulty.lose_next_receive();
    assert_eq!(rdma.files.remove(&remove_doomed()).await.unwrap(), 1);
    assert_eq!(rdma.faulty.counts().lost_receives.load(Ordering::SeqCst), 1);
    assert_eq!(files.removed(), 1);
    assert!(!dir.path().join(DOOMED).exists());
    let st = stats(&server);
    assert_eq!((st.misses, st.hits, st.in_progress), (1, 1, 0), "{st:?}");
    // The client is on its second connection, and it works.
    assert_eq!(rdma.files.null().await.ok(), Some(()));
}

/// A cached READ whose reply was lost: the first reply had moved its data by RDMA Write into
/// the first call's Write chunk, which went with the connection; the replay moves it into
/// the retransmission's own Write chunk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_rdma_a_replayed_read_fills_the_retransmissions_own_write_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..64 * 1024u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.path().join("data.bin"), &data).unwrap();
    let files = Arc::new(FileServer::new(dir.path()));
    // No list: every procedure but NULL is cached, READ included.
    let mut builder = Server::builder();
    files_v1::register_arc(&mut builder, files.clone());
    builder.reply_cache(ReplyCacheConfig::new());
    let server = builder.build();
    let rdma = serve_rdma(server.clone()).await;
    let handle = rdma
        .files
        .lookup(&LookupArgs {
            name: "data.bin".into(),
        })
        .await
        .unwrap()
        .handle;

    rdma.faulty.lose_next_receive();
    let read = ReadArgs {
        handle,
        offset: 0,
        count: data.len() as u32,
    };
    let ok = rdma.files.read(&read).await.unwrap();
    assert!(ok.eof);
    assert!(ok.data == data, "the replayed data differs");
    assert_eq!(rdma.faulty.counts().lost_receives.load(Ordering::SeqCst), 1);
    let st = stats(&server);
    // LOOKUP and READ ran once each; the READ's retransmission replayed.
    assert_eq!((st.misses, st.hits), (2, 1), "{st:?}");
    // The replay's data came by RDMA Write into the Write chunk of the new connection's
    // call (the transport's counters are the current connection's).
    let now = rdma.transport.stats();
    assert_eq!(now.replies_received_write_chunks, 1, "{now:?}");
}

//! The cache as the server uses it: calls dispatched, their handlers run, their replies
//! encoded as a transport would.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::watch;

use super::{ReplyCacheConfig, ReplyCacheStats};
use crate::rpc::msg::{AuthFlavor, OpaqueAuth};
use crate::rpc::{
    decode_args, encode_call_header, encode_reply, handler, run_handler, CallContext, Dispatch,
    DispatchError, HandlerFuture, HandlerResult, HeapBuffers, Incoming, ReplyError, Server,
    Service, TransportKind,
};
use crate::xdr::{self, Decoder, Encode, Encoder, ThresholdPolicy};

const PROG: u32 = 0x2000_0100;
const NULL: u32 = 0;
/// Removes a name (a u32): counts its executions; waits for the gate first.
const REMOVE: u32 = 1;
/// Panics.
const PANIC: u32 = 2;
/// Returns DDP-eligible data.
const READ: u32 = 3;

/// What the service saw.
struct Seen {
    started: AtomicUsize,
    removed: AtomicUsize,
    gate: watch::Receiver<bool>,
}

struct Files(Arc<Seen>);

/// A READ result: a flag and DDP-eligible data, as generated code encodes `read_ok`.
struct ReadOk(Bytes);

impl Encode for ReadOk {
    fn encode(&self, enc: &mut Encoder) -> xdr::Result<()> {
        enc.put_bool(true);
        enc.put_ddp_opaque(&self.0, None)
    }
}

impl Service for Files {
    fn program(&self) -> u32 {
        PROG
    }

    fn version(&self) -> u32 {
        1
    }

    fn call(
        &self,
        _ctx: CallContext,
        procedure: u32,
        args: &mut Decoder<'_>,
    ) -> Result<HandlerFuture, DispatchError> {
        let seen = self.0.clone();
        match procedure {
            NULL => Ok(handler(async { Ok(()) })),
            REMOVE => {
                let name: u32 = decode_args(args)?;
                Ok(handler(async move {
                    seen.started.fetch_add(1, Ordering::SeqCst);
                    let mut gate = seen.gate.clone();
                    let _ = gate.wait_for(|open| *open).await;
                    let n = seen.removed.fetch_add(1, Ordering::SeqCst) + 1;
                    Ok(name * 100 + n as u32)
                }))
            }
            PANIC => Ok(handler(async move {
                seen.started.fetch_add(1, Ordering::SeqCst);
                if seen.started.load(Ordering::SeqCst) > 0 {
                    panic!("a handler bug");
                }
                Ok(())
            })),
            READ => Ok(handler(async move {
                seen.started.fetch_add(1, Ordering::SeqCst);
                Ok(ReadOk(Bytes::from(vec![0xab; 3000])))
            })),
            _ => Err(DispatchError::ProcUnavail),
        }
    }
}

struct Setup {
    server: Server,
    seen: Arc<Seen>,
    gate: watch::Sender<bool>,
}

/// A server with the cache on; `list` lists REMOVE and READ as the non-idempotent ones
/// (else the default applies).
fn setup(config: ReplyCacheConfig, list: bool, open: bool) -> Setup {
    let (gate, rx) = watch::channel(open);
    let seen = Arc::new(Seen {
        started: AtomicUsize::new(0),
        removed: AtomicUsize::new(0),
        gate: rx,
    });
    let mut builder = Server::builder();
    builder.add(Files(seen.clone())).reply_cache(config);
    if list {
        builder.non_idempotent(PROG, 1, &[REMOVE, READ]);
    }
    Setup {
        server: builder.build(),
        seen,
        gate,
    }
}

fn call(xid: u32, procedure: u32, args: &dyn Encode) -> Bytes {
    call_to(PROG, xid, procedure, args)
}

fn call_to(program: u32, xid: u32, procedure: u32, args: &dyn Encode) -> Bytes {
    let none = OpaqueAuth {
        flavor: AuthFlavor::AuthNone,
        body: Bytes::new(),
    };
    let mut enc = Encoder::new();
    encode_call_header(&mut enc, xid, program, 1, procedure, &none, &none).unwrap();
    args.encode(&mut enc).unwrap();
    enc.finish().into_bytes()
}

/// Dispatches `message` from `peer`; the handler to run.
fn dispatch(server: &Server, message: Bytes, peer: &str) -> HandlerFuture {
    let peer: SocketAddr = peer.parse().unwrap();
    match server.dispatch(Incoming {
        message,
        chunks: None,
        transport: TransportKind::Tcp,
        peer: Some(peer),
        buffers: Arc::new(HeapBuffers),
        backchannel: None,
        caller: None,
        deadline: None,
    }) {
        Dispatch::Run { future, .. } => future,
        other => panic!("{other:?}"),
    }
}

/// The reply as a transport encodes it, without Write chunks.
fn reply(xid: u32, result: &HandlerResult) -> Bytes {
    let mut enc = Encoder::new();
    encode_reply(&mut enc, xid, result).unwrap();
    enc.finish().into_bytes()
}

async fn run(future: HandlerFuture, xid: u32) -> Bytes {
    reply(xid, &run_handler(future).await)
}

fn stats(s: &Setup) -> ReplyCacheStats {
    s.server.reply_cache_stats().unwrap()
}

#[tokio::test]
async fn a_retransmission_from_a_new_port_gets_the_first_reply_and_runs_nothing() {
    let s = setup(ReplyCacheConfig::new(), true, true);
    let first = run(
        dispatch(&s.server, call(7, REMOVE, &3u32), "10.1.1.1:900"),
        7,
    )
    .await;
    let again = run(
        dispatch(&s.server, call(7, REMOVE, &3u32), "10.1.1.1:901"),
        7,
    )
    .await;
    assert_eq!(first, again);
    assert_eq!(s.seen.removed.load(Ordering::SeqCst), 1);
    // The reply says the first removal (3 * 100 + 1), not a second one.
    assert_eq!(&first[first.len() - 4..], &301u32.to_be_bytes());
    let st = stats(&s);
    assert_eq!((st.misses, st.hits, st.entries), (1, 1, 1));
}

#[tokio::test]
async fn other_arguments_or_another_client_with_the_same_xid_run() {
    let s = setup(ReplyCacheConfig::new(), true, true);
    run(
        dispatch(&s.server, call(7, REMOVE, &3u32), "10.1.1.1:900"),
        7,
    )
    .await;
    run(
        dispatch(&s.server, call(7, REMOVE, &4u32), "10.1.1.1:900"),
        7,
    )
    .await;
    run(
        dispatch(&s.server, call(7, REMOVE, &3u32), "10.1.1.2:900"),
        7,
    )
    .await;
    assert_eq!(s.seen.removed.load(Ordering::SeqCst), 3);
    assert_eq!((stats(&s).misses, stats(&s).hits), (3, 0));
}

#[tokio::test]
async fn a_duplicate_of_a_running_call_waits_for_it_and_is_not_executed_twice() {
    let s = setup(ReplyCacheConfig::new(), true, false);
    let first = tokio::spawn(run(
        dispatch(&s.server, call(9, REMOVE, &5u32), "10.1.1.1:900"),
        9,
    ));
    while s.seen.started.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    let duplicate = tokio::spawn(run(
        dispatch(&s.server, call(9, REMOVE, &5u32), "10.1.1.1:950"),
        9,
    ));
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(!duplicate.is_finished(), "it waits for the first execution");
    assert_eq!(stats(&s).in_progress, 1);
    s.gate.send_replace(true);
    let (first, duplicate) = (first.await.unwrap(), duplicate.await.unwrap());
    assert_eq!(first, duplicate);
    assert_eq!(s.seen.started.load(Ordering::SeqCst), 1);
    assert_eq!(s.seen.removed.load(Ordering::SeqCst), 1);
    let st = stats(&s);
    assert_eq!(
        (st.misses, st.in_progress, st.hits, st.running),
        (1, 1, 0, 0)
    );
}

/// Starts REMOVE 5 (xid 9) from one port and, once its handler runs (held at the gate), a
/// retransmission from another port; then the first one's connection goes away: its future is
/// dropped unfinished.
async fn first_run_dropped(s: &Setup) -> tokio::task::JoinHandle<Bytes> {
    let first = tokio::spawn(run(
        dispatch(&s.server, call(9, REMOVE, &5u32), "10.1.1.1:900"),
        9,
    ));
    while s.seen.started.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    let duplicate = tokio::spawn(run(
        dispatch(&s.server, call(9, REMOVE, &5u32), "10.1.1.1:950"),
        9,
    ));
    first.abort();
    assert!(first.await.unwrap_err().is_cancelled());
    duplicate
}

#[tokio::test]
async fn a_call_whose_caller_went_away_runs_on_and_its_duplicate_gets_that_reply() {
    let s = setup(ReplyCacheConfig::new(), true, false);
    let duplicate = first_run_dropped(&s).await;
    assert_eq!(stats(&s).orphans, 1, "the first execution runs on");
    s.gate.send_replace(true);
    let duplicate = duplicate.await.unwrap();
    assert_eq!(&duplicate[duplicate.len() - 4..], &501u32.to_be_bytes());
    assert_eq!(s.seen.started.load(Ordering::SeqCst), 1, "run once");
    assert_eq!(s.seen.removed.load(Ordering::SeqCst), 1);
    let st = stats(&s);
    assert_eq!(
        (st.misses, st.in_progress, st.entries, st.orphans),
        (1, 1, 1, 0)
    );
}

#[tokio::test]
async fn past_the_orphan_bound_a_duplicate_of_the_dropped_call_runs_it() {
    let s = setup(ReplyCacheConfig::new().max_orphans(0), true, false);
    let duplicate = first_run_dropped(&s).await;
    s.gate.send_replace(true);
    let duplicate = duplicate.await.unwrap();
    assert_eq!(&duplicate[duplicate.len() - 4..], &501u32.to_be_bytes());
    // The first execution stopped at the gate and removed nothing; the duplicate ran it.
    assert_eq!(s.seen.started.load(Ordering::SeqCst), 2);
    assert_eq!(s.seen.removed.load(Ordering::SeqCst), 1);
    let st = stats(&s);
    assert_eq!((st.misses, st.in_progress, st.entries), (2, 1, 1));
}

#[tokio::test]
async fn a_panic_is_kept_as_system_err_and_not_run_again() {
    let s = setup(ReplyCacheConfig::new(), false, true);
    let first = run_handler(dispatch(&s.server, call(3, PANIC, &()), "10.1.1.1:900")).await;
    assert!(matches!(first, Err(ReplyError::SystemErr)));
    let again = run_handler(dispatch(&s.server, call(3, PANIC, &()), "10.1.1.1:901")).await;
    assert!(matches!(again, Err(ReplyError::SystemErr)));
    assert_eq!(s.seen.started.load(Ordering::SeqCst), 1);
    assert_eq!(stats(&s).hits, 1);
}

#[tokio::test]
async fn only_the_listed_procedures_are_cached_and_null_never() {
    // Listed: REMOVE and READ; PANIC is not, so it runs each time.
    let s = setup(ReplyCacheConfig::new(), true, true);
    for _ in 0..2 {
        let _ = run_handler(dispatch(&s.server, call(3, PANIC, &()), "10.1.1.1:900")).await;
    }
    assert_eq!(s.seen.started.load(Ordering::SeqCst), 2);
    // The default (no list): every procedure but NULL.
    let d = setup(ReplyCacheConfig::new(), false, true);
    for _ in 0..2 {
        run(dispatch(&d.server, call(4, NULL, &()), "10.1.1.1:900"), 4).await;
        run(
            dispatch(&d.server, call(5, REMOVE, &1u32), "10.1.1.1:900"),
            5,
        )
        .await;
    }
    let st = stats(&d);
    assert_eq!((st.misses, st.hits, st.entries), (1, 1, 1));
    assert_eq!(d.seen.removed.load(Ordering::SeqCst), 1);
    // Without the cache, nothing is kept.
    assert!(Server::builder().build().reply_cache_stats().is_none());
}

/// Over RPC-over-RDMA the retransmission brings Write chunks of its own: the replay fills
/// them as the results would have, and an inline first reply replays inline.
#[tokio::test]
async fn a_replay_fills_the_retransmissions_own_write_chunks() {
    let s = setup(ReplyCacheConfig::new(), true, true);
    let encode = |result: &HandlerResult, chunks: Vec<u64>| {
        let mut enc = Encoder::for_reply(ThresholdPolicy::default(), chunks);
        encode_reply(&mut enc, 11, result).unwrap();
        let (encoded, moved) = enc.finish_with_chunks();
        let moved: Vec<(xdr::ChunkTarget, Bytes)> =
            moved.into_iter().map(|m| (m.target, m.data)).collect();
        (encoded.to_bytes(), moved)
    };
    let first = run_handler(dispatch(&s.server, call(11, READ, &()), "10.1.1.1:900")).await;
    let direct = encode(&first, vec![4096]);
    assert_eq!(direct.1.len(), 1, "the data moved to the Write chunk");
    for chunks in [vec![4096], vec![]] {
        let again = run_handler(dispatch(&s.server, call(11, READ, &()), "10.1.1.1:901")).await;
        assert_eq!(encode(&again, chunks.clone()), encode(&first, chunks));
    }
    assert_eq!(s.seen.started.load(Ordering::SeqCst), 1);
    assert_eq!(stats(&s).hits, 2);
}

#[tokio::test]
async fn the_bounds_hold_across_many_calls() {
    let config = ReplyCacheConfig::new().max_entries(4);
    let s = setup(config, true, true);
    for xid in 0..10 {
        run(
            dispatch(&s.server, call(xid, REMOVE, &xid), "10.1.1.1:900"),
            xid,
        )
        .await;
    }
    let st = stats(&s);
    assert_eq!((st.entries, st.evictions, st.misses), (4, 6, 10));
    // The oldest are gone: their retransmission runs again; the newest replays.
    run(
        dispatch(&s.server, call(0, REMOVE, &0u32), "10.1.1.1:900"),
        0,
    )
    .await;
    run(
        dispatch(&s.server, call(9, REMOVE, &9u32), "10.1.1.1:900"),
        9,
    )
    .await;
    assert_eq!(s.seen.removed.load(Ordering::SeqCst), 11);
    assert_eq!(stats(&s).hits, 1);
}

/// REMOVE as generated code describes it.
struct Remove;

impl crate::xdr::Procedure for Remove {
    const PROGRAM: u32 = PROG;
    const VERSION: u32 = 1;
    const PROCEDURE: u32 = REMOVE;
    const NAME: &'static str = "REMOVE";
    type Args = u32;
    type Result = u32;
}

#[tokio::test]
async fn a_list_given_by_procedure_type_follows_a_renumbered_program() {
    const LOCAL: u32 = 0x4000_0001;
    let (_gate, rx) = watch::channel(true);
    let seen = Arc::new(Seen {
        started: AtomicUsize::new(0),
        removed: AtomicUsize::new(0),
        gate: rx,
    });
    let mut builder = Server::builder();
    builder
        .add(Files(seen.clone()))
        .reply_cache(ReplyCacheConfig::new())
        .non_idempotent_procedure::<Remove>()
        .renumber(PROG, LOCAL);
    let server = builder.build();
    for port in [900, 901] {
        let peer = format!("10.1.1.1:{port}");
        let message = call_to(LOCAL, 7, REMOVE, &2u32);
        run(dispatch(&server, message, &peer), 7).await;
        let _ = run_handler(dispatch(&server, call_to(LOCAL, 8, PANIC, &()), &peer)).await;
    }
    // REMOVE ran once (listed); PANIC twice (not listed, though the default would cover it).
    assert_eq!(seen.removed.load(Ordering::SeqCst), 1);
    assert_eq!(seen.started.load(Ordering::SeqCst), 3);
    let st = server.reply_cache_stats().unwrap();
    assert_eq!((st.misses, st.hits), (1, 1));
}

//! The fast paths (`fast.rs`) against the general path: the same operations on two pairs of
//! cores, one pair with fast paths and one without, must put the same bytes on the wire and
//! produce the same completions, states and memory, for valid traffic and for the same
//! corrupted bytes.

use proptest::prelude::*;

use super::*;
use crate::rdma::RemoteAddr;

/// One side's registrations (the same on every pair: tags are assigned in order).
struct Side {
    core: Core,
    tags: Arc<TagTable>,
    /// Receive buffers.
    rbuf: MemoryRegion,
    /// Send sources.
    src: MemoryRegion,
    /// RDMA Read sinks.
    sink: MemoryRegion,
    /// The target of the peer's RDMA Writes and Reads.
    target: MemoryRegion,
}

impl Side {
    fn new(cfg: CoreConfig, fast: bool) -> Side {
        let tags = Arc::new(TagTable::default());
        let mut core = Core::new(cfg, tags.clone());
        core.fast_paths = fast;
        let reg = |len: usize, access| tags.register(vec![0; len], access).unwrap();
        let rbuf = reg(8192, Access::LOCAL_WRITE);
        let src = tags
            .register(
                (0..8192).map(|i| (i * 7 % 251) as u8).collect(),
                Access::NONE,
            )
            .unwrap();
        let sink = reg(8192, Access::LOCAL_WRITE);
        let target = reg(8192, Access::REMOTE_WRITE | Access::REMOTE_READ);
        Side {
            core,
            tags,
            rbuf,
            src,
            sink,
            target,
        }
    }
}

/// What a step left: everything a test compares between the fast and the general pair.
#[derive(Debug, PartialEq)]
struct Seen {
    wire: Vec<u8>,
    consumed: usize,
    completions: Vec<Completion>,
    state: State,
    terminate: Option<String>,
}

/// An operation on one side (`a`: false, `b`: true) of a pair.
#[derive(Clone, Debug)]
enum Op {
    Recv {
        b: bool,
        len: usize,
    },
    Send {
        b: bool,
        len: usize,
        solicited: bool,
        invalidate: bool,
        local: bool,
    },
    Write {
        b: bool,
        len: usize,
    },
    Read {
        b: bool,
        len: usize,
    },
    /// Moves what one side has to send to the other, the byte at `flip.0` (modulo the length)
    /// xored with `flip.1` if given, in pieces of `piece` bytes.
    Pass {
        b: bool,
        flip: Option<(usize, u8)>,
        piece: usize,
    },
    /// Sends `probes` zero-length RDMA Read Requests past the ORD, as a peer that ignores
    /// the IRD would.
    Flood {
        b: bool,
        probes: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    // Lengths around the fast paths' edges: empty, small, the gather threshold (2048) and a
    // MULPDU of 1024 (more than one segment).
    let len = prop_oneof![
        Just(0usize),
        1usize..200,
        990usize..1030,
        2000usize..2100,
        4000usize..5000
    ];
    prop_oneof![
        3 => (any::<bool>(), len.clone()).prop_map(|(b, len)| Op::Recv { b, len: len.max(1) }),
        4 => (any::<bool>(), len.clone(), any::<bool>(), any::<bool>(), any::<bool>()).prop_map(
            |(b, len, solicited, invalidate, local)| Op::Send { b, len, solicited, invalidate, local }
        ),
        1 => (any::<bool>(), len.clone()).prop_map(|(b, len)| Op::Write { b, len }),
        1 => (any::<bool>(), prop_oneof![Just(0usize), 1usize..3000]).prop_map(|(b, len)| Op::Read { b, len }),
        4 => (any::<bool>(), proptest::option::weighted(0.1, (any::<usize>(), 1u8..=255)), 1usize..400)
            .prop_map(|(b, flip, piece)| Op::Pass { b, flip, piece }),
        1 => (any::<bool>(), 1usize..5).prop_map(|(b, probes)| Op::Flood { b, probes }),
    ]
}

/// Applies `op` to the pair `(a, b)`; what came of it.
fn apply(a: &mut Side, b: &mut Side, op: &Op) -> Seen {
    let (me, peer) = match op {
        Op::Recv { b: true, .. }
        | Op::Send { b: true, .. }
        | Op::Write { b: true, .. }
        | Op::Read { b: true, .. }
        | Op::Pass { b: true, .. }
        | Op::Flood { b: true, .. } => (b, a),
        _ => (a, b),
    };
    let remote = RemoteAddr::new(peer.target.rkey(), peer.target.addr());
    let posted = match *op {
        Op::Recv { len, .. } => me
            .core
            .post_recv(RecvWr::new(1, Sge::new(&me.rbuf, 0..len).unwrap())),
        Op::Send {
            len,
            solicited,
            invalidate,
            local,
            ..
        } => {
            let mut wr = SendWr::send(2, Sge::new(&me.src, 0..len).unwrap());
            if solicited {
                wr = wr.solicited();
            }
            if invalidate {
                // The peer's target: invalidated once, then an error the peer reports.
                wr = wr.with_invalidate(peer.target.rkey());
            }
            if local {
                wr = wr.complete_locally();
            }
            me.core.post_send(wr)
        }
        Op::Write { len, .. } => {
            me.core
                .post_send(SendWr::write(3, Sge::new(&me.src, 0..len).unwrap(), remote))
        }
        Op::Read { len, .. } => {
            me.core
                .post_send(SendWr::read(4, Sge::new(&me.sink, 0..len).unwrap(), remote))
        }
        Op::Pass { .. } | Op::Flood { .. } => Ok(()),
    };
    let mut wire = Vec::new();
    let mut consumed = 0;
    let pass = match *op {
        Op::Pass { flip, piece, .. } => Some((flip, piece, 0)),
        Op::Flood { probes, .. } => Some((None, 4096, probes)),
        _ => None,
    };
    if let Some((flip, piece, probes)) = pass {
        let mut t = Transmit::new();
        if me.core.state() == State::Established {
            for _ in 0..probes {
                me.core.emit_probe(&mut t);
            }
        }
        me.core.poll_transmit(&mut t);
        t.write_all_to(&mut wire);
        me.core.transmitted(&mut t);
        if let (Some((at, x)), false) = (flip, wire.is_empty()) {
            let i = at % wire.len();
            wire[i] ^= x;
        }
        let mut buf = Vec::new();
        for p in wire.chunks(piece) {
            buf.extend_from_slice(p);
            let n = peer.core.handle_input(&buf);
            consumed += n;
            buf.drain(..n);
        }
    }
    let mut completions: Vec<Completion> =
        std::iter::from_fn(|| me.core.poll_completion()).collect();
    completions.extend(std::iter::from_fn(|| peer.core.poll_completion()));
    Seen {
        wire,
        consumed,
        completions,
        state: if posted.is_ok() {
            me.core.state()
        } else {
            State::Closed
        },
        terminate: me
            .core
            .terminate_sent()
            .or(peer.core.terminate_sent())
            .map(|t| format!("{t:?}")),
    }
}

/// Runs `ops` on a pair with fast paths and on one without, comparing every step and, at the
/// end, the memory both pairs wrote.
fn agree(cfg: CoreConfig, ops: &[Op]) -> Result<(), TestCaseError> {
    let (mut fa, mut fb) = (Side::new(cfg, true), Side::new(cfg, true));
    let (mut sa, mut sb) = (Side::new(cfg, false), Side::new(cfg, false));
    for (i, op) in ops.iter().enumerate() {
        let fast = apply(&mut fa, &mut fb, op);
        let slow = apply(&mut sa, &mut sb, op);
        prop_assert_eq!(fast, slow, "step {} ({:?})", i, op);
    }
    for (f, s) in [(&fa, &sa), (&fb, &sb)] {
        for (fm, sm) in [
            (&f.rbuf, &s.rbuf),
            (&f.sink, &s.sink),
            (&f.target, &s.target),
        ] {
            prop_assert_eq!(
                fm.to_vec(0..fm.len()).unwrap(),
                sm.to_vec(0..sm.len()).unwrap()
            );
        }
        // Sends with Invalidate: the same tags still resolve.
        prop_assert_eq!(
            f.tags.lookup(f.target.rkey()).is_ok(),
            s.tags.lookup(s.target.rkey()).is_ok()
        );
    }
    Ok(())
}

fn config(crc: bool, confirm: bool) -> CoreConfig {
    let framing = Framing {
        markers: false,
        crc,
    };
    CoreConfig {
        version: 1,
        tx: framing,
        rx: framing,
        mulpdu: 1024,
        sq_depth: 8,
        rq_depth: 8,
        ord: 2,
        ird: 2,
        confirm,
        gather_min: DEFAULT_GATHER_MIN,
    }
}

/// A confirmed ping-pong of small Sends, as the bench runs it: every message a fast-path
/// one, in both directions.
#[test]
fn fast_paths_agree_with_the_general_path_on_a_ping_pong() {
    let mut ops = Vec::new();
    for _ in 0..20 {
        for b in [false, true] {
            ops.push(Op::Recv { b: !b, len: 64 });
            ops.push(Op::Send {
                b,
                len: 64,
                solicited: false,
                invalidate: false,
                local: false,
            });
            ops.push(Op::Pass {
                b,
                flip: None,
                piece: 4096,
            });
        }
    }
    for crc in [false, true] {
        agree(config(crc, true), &ops).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn fast_paths_agree_with_the_general_path(
        ops in proptest::collection::vec(op(), 1..60),
        crc in any::<bool>(),
        confirm in any::<bool>(),
    ) {
        agree(config(crc, confirm), &ops)?;
    }
}

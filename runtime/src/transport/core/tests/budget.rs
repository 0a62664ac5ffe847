//! What a peer can make the responder commit: Read chunk sinks within a budget, calls that
//! wait for memory, RDMA Reads the peer never answers, a peer that never speaks.

use super::*;

/// A pair whose server limits Read chunk sinks to `limit` bytes, with the client holding
/// enough credits for several calls at once.
fn budgeted(limit: usize) -> Pair {
    let mut p = Pair::new();
    p.sides[SERVER].mem.limit_sinks(limit);
    // The first reply grants the server's credits (seed 004 section 4.3).
    p.call::<Null>(&(), vec![], None).unwrap();
    p
}

#[test]
fn a_call_over_the_memory_budget_waits_and_runs_once_memory_comes_back() {
    let mut p = budgeted(100 << 10);
    // Memory other connections hold.
    let used = p.sides[SERVER].mem.sink_budget.clone().unwrap().1;
    used.fetch_add(60 << 10, Ordering::SeqCst);
    let a = pattern(60 << 10, 1);
    let call = p
        .start::<Echo>(&DdpData(a.clone()), vec![WriteTarget::Size(60 << 10)], None)
        .unwrap();
    p.run();
    let server = &p.sides[SERVER];
    assert_eq!(server.mem.sinks_used(), 60 << 10, "no sink for the call");
    assert!(server.core.memory_waiting());
    assert_eq!(server.core.stats().memory_waits, 1);
    assert!(p.sides[CLIENT].replies.is_empty());

    // The others give their memory back; told so, the server takes the call.
    used.fetch_sub(60 << 10, Ordering::SeqCst);
    assert!(p.sides[SERVER].core.memory_waiting(), "nothing retried yet");
    let s = &mut p.sides[SERVER];
    s.core.retry_memory(&mut s.mem);
    p.run();
    assert!(!p.sides[SERVER].core.memory_waiting());
    assert_eq!(p.result::<Echo>(call).unwrap().0, a);
    assert_eq!(p.sides[SERVER].core.stats().memory_waits, 1);
}

#[test]
fn calls_over_the_budget_run_in_turn_as_earlier_ones_give_their_memory_back() {
    let mut p = budgeted(100 << 10);
    p.held_reads = Some(Vec::new());
    let (a, b) = (pattern(60 << 10, 1), pattern(60 << 10, 2));
    let first = p
        .start::<Echo>(&DdpData(a.clone()), vec![WriteTarget::Size(60 << 10)], None)
        .unwrap();
    let second = p
        .start::<Echo>(&DdpData(b.clone()), vec![WriteTarget::Size(60 << 10)], None)
        .unwrap();
    p.run();
    assert_eq!(
        p.sides[SERVER].mem.sinks_used(),
        60 << 10,
        "only the first's sink"
    );
    assert!(p.sides[SERVER].core.memory_waiting());
    // The first call's Reads complete: it is answered, its sink goes back, and the second
    // takes it.
    p.release_reads();
    assert_eq!(p.result::<Echo>(first).unwrap().0, a);
    assert_eq!(p.result::<Echo>(second).unwrap().0, b);
    assert!(!p.sides[SERVER].core.memory_waiting());
}

#[test]
fn calls_without_read_chunks_do_not_wait_behind_one_that_waits_for_memory() {
    let mut p = budgeted(64 << 10);
    p.held_reads = Some(Vec::new());
    p.start::<Echo>(
        &DdpData(pattern(40 << 10, 1)),
        vec![WriteTarget::Size(40 << 10)],
        None,
    )
    .unwrap();
    p.start::<Echo>(
        &DdpData(pattern(40 << 10, 2)),
        vec![WriteTarget::Size(40 << 10)],
        None,
    )
    .unwrap();
    let null = p.start::<Null>(&(), vec![], None).unwrap();
    p.run();
    assert!(p.sides[SERVER].core.memory_waiting());
    p.result::<Null>(null).unwrap();
}

#[test]
fn a_call_no_budget_could_take_gets_err_chunk() {
    let mut p = budgeted(16 << 10);
    let err = p
        .call::<Echo>(
            &DdpData(pattern(64 << 10, 3)),
            vec![WriteTarget::Size(64 << 10)],
            None,
        )
        .unwrap_err();
    assert!(
        matches!(err, rpc::Error::Transport(rpc::TransportError::RdmaChunk)),
        "{err:?}"
    );
    assert!(!p.sides[SERVER].core.memory_waiting());
    assert_eq!(p.sides[SERVER].mem.sinks_used(), 0);
    assert_eq!(p.sides[SERVER].core.stats().errors_sent, 1);
    // The connection carries on.
    p.call::<Null>(&(), vec![], None).unwrap();
}

#[test]
fn received_data_stays_registered_below_half_the_budget_and_is_copied_out_above() {
    let mut p = budgeted(100 << 10);
    let small = pattern(40 << 10, 4);
    let got = p
        .call::<Echo>(
            &DdpData(small.clone()),
            vec![WriteTarget::Size(40 << 10)],
            None,
        )
        .unwrap();
    assert_eq!(got.0, small);
    assert_eq!(p.sides[SERVER].mem.copied_out, 0);
    let large = pattern(60 << 10, 5);
    let got = p
        .call::<Echo>(
            &DdpData(large.clone()),
            vec![WriteTarget::Size(60 << 10)],
            None,
        )
        .unwrap();
    assert_eq!(got.0, large);
    assert_eq!(p.sides[SERVER].mem.copied_out, 60 << 10);
}

fn with_read_timeout(timeout: Duration) -> Pair {
    let mut server = config(Role::Server);
    server.read_timeout = Some(timeout);
    let mut p = Pair::with(config(Role::Client), server, 1 << 20);
    p.call::<Null>(&(), vec![], None).unwrap();
    p
}

#[test]
fn rdma_reads_the_peer_never_answers_close_the_connection() {
    let timeout = Duration::from_secs(30);
    let mut p = with_read_timeout(timeout);
    assert_eq!(p.sides[SERVER].core.connection_deadline(), None);
    p.held_reads = Some(Vec::new());
    let posted = Instant::now();
    p.start::<Echo>(
        &DdpData(pattern(8 << 10, 6)),
        vec![WriteTarget::Size(8 << 10)],
        None,
    )
    .unwrap();
    p.run();
    let deadline = p.sides[SERVER]
        .core
        .connection_deadline()
        .expect("a deadline while Reads are in flight");
    assert!(deadline >= posted + timeout);
    p.sides[SERVER].core.handle_timeout(deadline);
    p.run();
    let fatal = &p.sides[SERVER].fatal;
    assert_eq!(fatal.len(), 1, "{fatal:?}");
    assert!(fatal[0].contains("unanswered"), "{fatal:?}");
}

#[test]
fn rdma_reads_that_progress_keep_the_connection() {
    let timeout = Duration::from_secs(30);
    let mut p = with_read_timeout(timeout);
    p.held_reads = Some(Vec::new());
    p.start::<Echo>(
        &DdpData(pattern(8 << 10, 7)),
        vec![WriteTarget::Size(8 << 10)],
        None,
    )
    .unwrap();
    p.run();
    let first = p.sides[SERVER].core.connection_deadline().unwrap();
    // Those Reads complete; another call's are held.
    p.release_reads();
    p.held_reads = Some(Vec::new());
    p.start::<Echo>(
        &DdpData(pattern(8 << 10, 8)),
        vec![WriteTarget::Size(8 << 10)],
        None,
    )
    .unwrap();
    p.run();
    assert_eq!(
        p.sides[SERVER].core.connection_deadline(),
        Some(first),
        "the period does not move per Read"
    );
    p.sides[SERVER].core.handle_timeout(first);
    p.run();
    assert!(
        p.sides[SERVER].fatal.is_empty(),
        "a Read completed within the period"
    );
    let renewed = p.sides[SERVER].core.connection_deadline().unwrap();
    assert_eq!(renewed, first + timeout);
    p.sides[SERVER].core.handle_timeout(renewed);
    p.run();
    assert_eq!(
        p.sides[SERVER].fatal.len(),
        1,
        "no Read completed in the second period"
    );
}

#[test]
fn a_server_closes_a_connection_whose_peer_never_speaks() {
    let mut server = config(Role::Server);
    server.first_message_timeout = Some(Duration::from_secs(10));
    let mut p = Pair::with(config(Role::Client), server.clone(), 1 << 20);
    let opened = Instant::now();
    p.sides[SERVER].core.open(opened);
    let deadline = p.sides[SERVER].core.connection_deadline();
    assert_eq!(deadline, Some(opened + Duration::from_secs(10)));
    p.sides[SERVER]
        .core
        .handle_timeout(opened + Duration::from_secs(9));
    p.run();
    assert!(p.sides[SERVER].fatal.is_empty());
    p.sides[SERVER]
        .core
        .handle_timeout(opened + Duration::from_secs(10));
    p.run();
    assert_eq!(p.sides[SERVER].fatal.len(), 1);
    assert!(p.sides[SERVER].fatal[0].contains("no message"));

    // A peer that speaks in time has no such deadline.
    let mut p = Pair::with(config(Role::Client), server, 1 << 20);
    p.sides[SERVER].core.open(Instant::now());
    p.call::<Null>(&(), vec![], None).unwrap();
    assert_eq!(p.sides[SERVER].core.connection_deadline(), None);
}

#[test]
fn a_peer_that_does_not_answer_holds_one_window_of_memory_however_large_its_chunks() {
    let mut p = budgeted(1 << 30);
    p.held_reads = Some(Vec::new());
    let data: Vec<Bytes> = (0..3).map(|i| pattern(600 << 10, i)).collect();
    let calls: Vec<CallId> = data
        .iter()
        .map(|d| {
            p.start::<Echo>(
                &DdpData(d.clone()),
                vec![WriteTarget::Size(600 << 10)],
                None,
            )
            .unwrap()
        })
        .collect();
    p.run();
    // The window starts at 1 MiB: the first call's piece, not the second's; and nothing counts
    // as waiting for memory (there is plenty: the peer is what holds things up).
    assert_eq!(p.sides[SERVER].mem.sinks_used(), 600 << 10);
    assert!(!p.sides[SERVER].core.memory_waiting());
    // Answered, each piece makes room for the next, and the window grows.
    p.release_reads();
    for (call, d) in calls.into_iter().zip(&data) {
        assert_eq!(&p.result::<Echo>(call).unwrap().0, d);
    }
    assert_eq!(p.sides[SERVER].mem.sinks_used(), 0);
}

#[test]
fn a_chunk_larger_than_a_piece_takes_its_memory_piece_by_piece() {
    // 512 KiB buffers: a 2 MiB chunk is four pieces, two of which fit the first window.
    let mut p = Pair::with(config(Role::Client), config(Role::Server), 512 << 10);
    p.sides[SERVER].mem.limit_sinks(1 << 30);
    p.call::<Null>(&(), vec![], None).unwrap();
    p.held_reads = Some(Vec::new());
    let data = pattern(2 << 20, 4);
    let call = p
        .start::<Echo>(
            &DdpData(data.clone()),
            vec![WriteTarget::Size(2 << 20)],
            None,
        )
        .unwrap();
    p.run();
    assert_eq!(p.held_reads.as_ref().unwrap().len(), 2, "two pieces' Reads");
    assert_eq!(p.sides[SERVER].mem.sinks_used(), 1 << 20);
    p.release_reads();
    assert_eq!(p.result::<Echo>(call).unwrap().0, data);
}

#[test]
fn under_memory_pressure_stalled_reads_close_the_connection_sooner() {
    let mut p = with_read_timeout(Duration::from_secs(30));
    p.held_reads = Some(Vec::new());
    p.start::<Echo>(
        &DdpData(pattern(8 << 10, 9)),
        vec![WriteTarget::Size(8 << 10)],
        None,
    )
    .unwrap();
    p.run();
    let relaxed = p.sides[SERVER].core.connection_deadline().unwrap();
    assert!(p.sides[SERVER].core.reads_watched());
    p.sides[SERVER].core.set_memory_pressure(true);
    let pressed = p.sides[SERVER].core.connection_deadline().unwrap();
    assert_eq!(
        relaxed - pressed,
        Duration::from_secs(30) - pulling::PRESSURE_STALL
    );
    p.sides[SERVER].core.handle_timeout(pressed);
    p.run();
    assert_eq!(
        p.sides[SERVER].fatal.len(),
        1,
        "{:?}",
        p.sides[SERVER].fatal
    );
}

//! The 2004 protocol of seed 000 between two cores: RDMA_MSGP padding, the Read-Read model
//! with RDMA_DONE, and how a peer in the default mode takes both (seed 004 section 5.7).

use super::*;
use crate::transport::header::AlignPadding;
use crate::transport::mode2004::Mode2004;

/// A side in the 2004 mode with `padding`, Read-Read off, with 16 KiB receive buffers.
fn padded(role: Role, padding: Option<AlignPadding>) -> CoreConfig {
    CoreConfig {
        recv_size: 16 << 10,
        peer_recv_size: 16 << 10,
        mode_2004: Some(Mode2004 {
            padding,
            read_read: false,
            config_program: None,
            ..Mode2004::default()
        }),
        ..config(role)
    }
}

/// The default mode with 16 KiB receive buffers.
fn plain(role: Role) -> CoreConfig {
    CoreConfig {
        recv_size: 16 << 10,
        peer_recv_size: 16 << 10,
        ..config(role)
    }
}

/// The RPC call header of an AUTH_NONE call: ten words.
const CALL_HEADER: usize = 40;

/// An RDMA_MSGP header with no chunks: the four fixed words, align, thresh, three empty lists.
const MSGP_HEADER: usize = 36;

#[test]
fn rdma_msgp_lays_out_the_bytes_seed_000_describes() {
    // Seed 000 section 3.5: "XXXXXXXLLLLpppDDDDDDDDDDDDDD": prior bytes, the length, the
    // padding, the data, which then starts at a multiple of rdma_align in the receive buffer.
    let pad = AlignPadding::new(512, 1024);
    let mut p = Pair::with(
        padded(Role::Client, Some(pad)),
        padded(Role::Server, Some(pad)),
        1 << 20,
    );
    let data = pattern(1024, 0);
    assert_eq!(p.call::<LongArgs>(&data, vec![], None).unwrap(), 1024);
    let (from, sent) = &p.wire[0];
    assert_eq!(*from, CLIENT);
    let word = |i: usize| u32::from_be_bytes(sent[4 * i..4 * i + 4].try_into().unwrap());
    // xid, vers 1, credits, RDMA_MSGP (2), rdma_align, rdma_thresh, three empty lists.
    assert_eq!(word(1), 1);
    assert_eq!(word(3), 2, "RDMA_MSGP");
    assert_eq!((word(4), word(5)), (512, 1024));
    assert_eq!((word(6), word(7), word(8)), (0, 0, 0));
    // The RPC message follows, its XID mirroring the header's.
    assert_eq!(&sent[MSGP_HEADER..MSGP_HEADER + 4], &sent[..4]);
    let length_at = MSGP_HEADER + CALL_HEADER;
    assert_eq!(word(length_at / 4), 1024, "LLLL");
    let mut want = sent[..length_at + 4].to_vec();
    want.resize(512, 0); // ppp: zeros up to the next multiple of 512
    want.extend_from_slice(&data); // DDDD, already a multiple of four long
    assert_eq!(sent, &want);
}

#[test]
fn rdma_msgp_aligns_data_at_or_above_the_threshold_for_every_alignment() {
    for align in [0u32, 4, 512, 4096] {
        let pad = AlignPadding::new(align, 1024);
        for len in [1020usize, 1024, 1028, 5000] {
            let mut p = Pair::with(
                padded(Role::Client, Some(pad)),
                padded(Role::Server, Some(pad)),
                1 << 20,
            );
            let at = p.call::<Where>(&pattern(len, 0), vec![], None).unwrap();
            let sent = &p.wire[0].1;
            let data_at = sent
                .windows(len.min(64))
                .position(|w| w == &pattern(len, 0)[..len.min(64)])
                .unwrap();
            let after_length = MSGP_HEADER + CALL_HEADER + 4;
            let padded = len >= 1024 && align > 4;
            if padded {
                assert_eq!(data_at % align as usize, 0, "align {align}, len {len}");
                assert!(data_at - after_length < align as usize);
                assert!(sent[after_length..data_at].iter().all(|&b| b == 0));
                // The receiver decoded the data where it landed, aligned in memory too.
                assert_eq!(at % align, 0, "align {align}, len {len}: at {at}");
            } else {
                assert_eq!(
                    data_at, after_length,
                    "align {align}, len {len}: no padding"
                );
                assert_ne!(at, u32::MAX, "align {align}, len {len}: data misread");
            }
            // Every message of the mode is RDMA_MSGP, the reply too.
            for (_, m) in &p.wire {
                let (h, _) = hdr::parse_with(m, &Default::default(), true).unwrap();
                assert!(matches!(h.body, Body::MsgP(_, q) if q == pad), "{h:?}");
            }
        }
    }
}

#[test]
fn padded_replies_and_read_chunk_positions_after_padding_decode() {
    let pad = AlignPadding::new(4096, 1024);
    let mut client = padded(Role::Client, Some(pad));
    client.min_ddp_size = 4000;
    let mut p = Pair::with(client, padded(Role::Server, Some(pad)), 1 << 20);
    // The first item stays inline and is padded; the second moves to a Read chunk whose
    // Position counts the padding before it.
    let args = (DdpData(pattern(1100, 1)), 7u32, DdpData(pattern(8000, 2)));
    assert_eq!(p.call::<Two>(&args, vec![], None).unwrap(), 1100 + 7 + 8000);
    let (h, _) = hdr::parse_with(&p.wire[0].1, &Default::default(), true).unwrap();
    let Body::MsgP(chunks, _) = h.body else {
        panic!("{h:?}")
    };
    assert_eq!(chunks.reads.len(), 1);
    // 4096 (the padded first item's data start) + 1100 + 0 round-up + 4 (n) + 4 (length).
    assert_eq!(
        chunks.reads[0].position as usize,
        4096 - MSGP_HEADER - 24 + 1100 + 8
    );
    // A padded reply: a large non-DDP result.
    let big = p.call::<Big>(&3000, vec![], None).unwrap();
    assert_eq!(big, Bytes::from(vec![0xb1; 3000]));
    let reply = &p
        .wire
        .iter()
        .rev()
        .find(|(from, _)| *from == SERVER)
        .unwrap()
        .1;
    let (h, used) = hdr::parse_with(reply, &Default::default(), true).unwrap();
    assert!(matches!(h.body, Body::MsgP(..)));
    let data_at = reply.iter().skip(used).position(|&b| b == 0xb1).unwrap() + used;
    assert_eq!(data_at % 4096, 0);
}

#[test]
fn a_default_receiver_takes_rdma_msgp_as_rdma_msg() {
    // Seed 004 section 5.7.1: "Receivers MUST treat received RDMA_MSGP type messages as they
    // would treat RDMA_MSG type messages. The additional alignment information is an
    // optimization hint that may be ignored."
    let pad = AlignPadding::new(512, 1024);
    let mut p = Pair::with(
        padded(Role::Client, Some(pad)),
        plain(Role::Server),
        1 << 20,
    );
    // Below the threshold nothing is padded: the default server serves it as RDMA_MSG.
    assert_eq!(
        p.call::<LongArgs>(&pattern(1000, 0), vec![], None).unwrap(),
        1000
    );
    let (h, _) = hdr::parse_with(&p.wire[0].1, &Default::default(), true).unwrap();
    assert!(matches!(h.body, Body::MsgP(..)), "sent as RDMA_MSGP");
    assert_eq!(p.sides[SERVER].core.stats().replies_inline, 1);
    // Above it, the padding is not skipped, so the arguments do not decode: GARBAGE_ARGS,
    // the RPC layer's answer; the connection carries on.
    let err = p
        .call::<LongArgs>(&pattern(1024, 0), vec![], None)
        .unwrap_err();
    assert!(matches!(err, rpc::Error::GarbageArgs), "{err:?}");
    assert_eq!(p.call::<LongArgs>(&pattern(8, 0), vec![], None).unwrap(), 8);
    assert!(p.sides[SERVER].fatal.is_empty());
}

#[test]
fn a_receiver_in_the_mode_refuses_an_alignment_it_cannot_honour() {
    let mut p = Pair::with(
        padded(Role::Client, None),
        padded(Role::Server, None),
        1 << 20,
    );
    // Rewrite the call's RDMA_MSG into an RDMA_MSGP with rdma_align 6.
    p.tamper = Some(Box::new(|from, bytes: &mut Vec<u8>| {
        if from == CLIENT {
            bytes[12..16].copy_from_slice(&2u32.to_be_bytes());
            let rest = bytes.split_off(16);
            bytes.extend_from_slice(&6u32.to_be_bytes());
            bytes.extend_from_slice(&0u32.to_be_bytes());
            bytes.extend_from_slice(&rest);
        }
    }));
    let id = p.start::<Null>(&(), vec![], None).unwrap();
    p.run();
    // ERR_CHUNK (seed 000 section 5.3: "When other decoding errors are detected in the header
    // or chunks, ... the error code ERR_CHUNK").
    let err = p.sides[CLIENT].replies.remove(&id).unwrap().unwrap_err();
    assert!(matches!(err, rpc::TransportError::RdmaChunk), "{err:?}");
}

/// A side in the 2004 mode with the Read-Read model, no padding, no configuration call.
fn read_read(role: Role) -> CoreConfig {
    CoreConfig {
        mode_2004: Some(Mode2004 {
            padding: None,
            read_read: true,
            config_program: None,
            ..Mode2004::default()
        }),
        ..config(role)
    }
}

/// Every message that crossed from `side`, parsed as a receiver in the mode does.
fn sent_by(p: &Pair, side: usize) -> Vec<Header> {
    p.wire
        .iter()
        .filter(|(from, _)| *from == side)
        .map(|(_, m)| hdr::parse_with(m, &Default::default(), true).unwrap().0)
        .collect()
}

#[test]
fn read_read_results_are_pulled_then_released_by_rdma_done() {
    // Seed 000 section 3.8, "an RPC with read chunks in the reply message": Send of the
    // call; Send of the reply with a Read chunk list; the client's RDMA Reads; RPC Done.
    let mut p = Pair::with(read_read(Role::Client), read_read(Role::Server), 64 << 10);
    let data = pattern(200 << 10, 5);
    let back = p
        .call::<Echo>(&DdpData(data.clone()), vec![], None)
        .unwrap();
    assert_eq!(back.0, data);
    let from_server = sent_by(&p, SERVER);
    let Body::Msg(chunks) = &from_server[0].body else {
        panic!("{:?}", from_server[0])
    };
    assert_eq!(
        chunks.reads.len(),
        1,
        "the result exposed in one Read chunk"
    );
    assert_eq!(chunks.reads[0].len(), 200 << 10);
    assert!(chunks.writes.is_empty() && chunks.reply.is_none());
    let from_client = sent_by(&p, CLIENT);
    let done = from_client.last().unwrap();
    assert_eq!(done.body, Body::Done);
    assert_eq!(
        done.xid, from_server[0].xid,
        "RDMA_DONE carries the reply's XID"
    );
    // "it is only 16 bytes in length"
    assert_eq!(p.wire.last().unwrap().1.len(), 16);
    let (c, s) = (p.client().core.stats(), p.sides[SERVER].core.stats());
    assert_eq!((c.replies_received_read_chunks, c.dones_sent), (1, 1));
    assert_eq!((s.replies_read_chunks, s.dones_received), (1, 1));
    // The server's memory is released: the client can no longer reach any of it.
    assert_eq!(p.sides[SERVER].core.exposed_replies(), 0);
    assert_eq!(p.sides[SERVER].mem.reachable(), Vec::<u32>::new());
}

#[test]
fn a_long_reply_without_a_reply_chunk_is_exposed_at_position_zero() {
    // Seed 000 section 5.2: "If the client doesn't provide an rdma_reply chunk, or if it's
    // too small, then the message must be returned as a Read chunk" (section 5.1's long
    // message, RDMA_NOMSG with a Read chunk at position zero).
    let mut p = Pair::with(read_read(Role::Client), read_read(Role::Server), 1 << 20);
    let big = p.call::<Big>(&20_000, vec![], None).unwrap();
    assert_eq!(big, Bytes::from(vec![0xb1; 20_000]));
    let from_server = sent_by(&p, SERVER);
    let Body::NoMsg(chunks) = &from_server[0].body else {
        panic!("{:?}", from_server[0])
    };
    assert_eq!(chunks.reads[0].position, 0);
    assert_eq!(p.sides[SERVER].core.stats().dones_received, 1);
    assert_eq!(p.sides[SERVER].mem.reachable(), Vec::<u32>::new());
}

#[test]
fn a_requester_that_gave_up_still_sends_rdma_done_and_the_connection_survives() {
    let mut p = Pair::with(read_read(Role::Client), read_read(Role::Server), 1 << 20);
    let id = p.start::<Big>(&100_000, vec![], None).unwrap();
    // The call reaches the server; the caller gives up before the reply arrives.
    while let Some(op) = p.sides[CLIENT].core.poll_op() {
        p.apply(CLIENT, op);
    }
    p.sides[CLIENT].core.cancel(id);
    p.run();
    assert!(
        !p.sides[CLIENT].replies.contains_key(&id),
        "no reply for a cancelled call"
    );
    // Seed 000: a requester that no longer knows the XID still sends RDMA_DONE.
    assert_eq!(p.client().core.stats().dones_sent, 1);
    assert_eq!(
        p.client().core.stats().replies_received_read_chunks,
        0,
        "nothing pulled"
    );
    assert_eq!(p.sides[SERVER].core.stats().dones_received, 1);
    assert_eq!(p.sides[SERVER].mem.reachable(), Vec::<u32>::new());
    // The connection carries on.
    let back = p
        .call::<Echo>(&DdpData(pattern(5000, 2)), vec![], None)
        .unwrap();
    assert_eq!(back.0, pattern(5000, 2));
    assert!(p.sides[SERVER].fatal.is_empty() && p.sides[CLIENT].fatal.is_empty());
}

#[test]
fn a_vanished_requester_cannot_pin_memory_past_the_timeout() {
    let mut server = read_read(Role::Server);
    if let Some(m) = server.mode_2004.as_mut() {
        m.done_timeout = Duration::from_secs(5);
    }
    let mut p = Pair::with(read_read(Role::Client), server, 1 << 20);
    // The client's RDMA_DONE is lost on the way (its XID rewritten to one nobody used).
    p.tamper = Some(Box::new(|from, bytes: &mut Vec<u8>| {
        if from == CLIENT && bytes.len() == 16 {
            bytes[..4].copy_from_slice(&0xdead_beefu32.to_be_bytes());
        }
    }));
    let back = p
        .call::<Echo>(&DdpData(pattern(3000, 3)), vec![], None)
        .unwrap();
    assert_eq!(back.0, pattern(3000, 3));
    let server = &mut p.sides[SERVER];
    assert_eq!(server.core.exposed_replies(), 1);
    assert!(!server.mem.reachable().is_empty(), "still exposed");
    let deadline = server
        .core
        .poll_timeout()
        .expect("a deadline for the exposure");
    assert!(deadline <= Instant::now() + Duration::from_secs(5));
    server.core.handle_timeout(deadline);
    p.run();
    let server = &mut p.sides[SERVER];
    assert_eq!(server.core.exposed_replies(), 0);
    assert_eq!(server.core.stats().exposures_expired, 1);
    assert_eq!(server.mem.reachable(), Vec::<u32>::new());
}

#[test]
fn rdma_done_takes_its_own_credit_and_one_credit_never_deadlocks() {
    // Seed 000 section 3.8: "the RPC Done message consumes a credit at the server. The client
    // must account for this". With one credit, every call still completes.
    let mut client = read_read(Role::Client);
    client.credits = 1;
    let mut server = read_read(Role::Server);
    server.credits = 1;
    // A receive for the call, and two for RDMA_DONEs: one may still be unconfirmed when the
    // next goes, because the next call left before it.
    assert_eq!(server.receives(), 3);
    let mut p = Pair::with(client, server, 1 << 20);
    let ids: Vec<_> = (0..5)
        .map(|i| {
            p.start::<Echo>(&DdpData(pattern(2000 + i, i as u8)), vec![], None)
                .unwrap()
        })
        .collect();
    p.run();
    for (i, id) in ids.into_iter().enumerate() {
        assert_eq!(p.result::<Echo>(id).unwrap().0, pattern(2000 + i, i as u8));
    }
    assert_eq!(p.sides[SERVER].core.stats().dones_received, 5);
    assert!(p.sides[SERVER].fatal.is_empty());
}

#[test]
fn a_default_requester_refuses_a_read_read_reply_and_the_responder_times_it_out() {
    // A responder that uses the Read-Read model with a requester in the default mode (its
    // configuration trusted instead of checked): the requester cannot use the reply (seed
    // 004 section 5.7.2: version 1 "do[es] not use the Read-Read transfer model") and sends
    // no RDMA_DONE; the responder's timeout releases the memory.
    let mut p = Pair::with(config(Role::Client), read_read(Role::Server), 1 << 20);
    let err = p
        .call::<Echo>(&DdpData(pattern(3000, 3)), vec![], None)
        .unwrap_err();
    assert!(
        matches!(err, rpc::Error::Transport(rpc::TransportError::Protocol(_))),
        "{err:?}"
    );
    assert_eq!(p.client().core.stats().dones_sent, 0);
    let server = &mut p.sides[SERVER];
    assert_eq!(server.core.exposed_replies(), 1);
    let deadline = server.core.poll_timeout().unwrap();
    server.core.handle_timeout(deadline);
    p.run();
    assert_eq!(p.sides[SERVER].mem.reachable(), Vec::<u32>::new());
    // With Write chunks provided, the same pair works the RFC 8166 way.
    let back = p
        .call::<Echo>(
            &DdpData(pattern(3000, 3)),
            vec![WriteTarget::Size(3000)],
            None,
        )
        .unwrap();
    assert_eq!(back.0, pattern(3000, 3));
}

#[test]
fn a_default_responder_drops_rdma_done() {
    // Seed 004 section 5.7.2: "Receivers MUST drop RDMA_DONE type messages without
    // additional processing."
    let mut p = Pair::new();
    p.call::<Null>(&(), vec![], None).unwrap();
    let done = hdr::to_bytes(&Header::v1(0x1234, 1, Body::Done)).unwrap();
    let server = &mut p.sides[SERVER];
    let before = server.core.stats().dropped;
    server.core.handle_recv(&done, None, &mut server.mem);
    assert_eq!(server.core.stats().dropped, before + 1);
    assert!(server.core.poll_op().is_none(), "no answer to RDMA_DONE");
    p.call::<Null>(&(), vec![], None).unwrap();
}

#[test]
fn a_responder_with_the_configuration_call_on_waits_for_it_before_read_read() {
    // With the configuration call on, a responder exposes results only to a requester that
    // showed it speaks the 2004 protocol; a default requester gets the RFC 8166 behaviour.
    let mut server = CoreConfig {
        recv_size: 16 << 10,
        peer_recv_size: 16 << 10,
        ..read_read(Role::Server)
    };
    if let Some(m) = server.mode_2004.as_mut() {
        m.config_program = Some(crate::transport::mode2004::CONFIG_PROGRAM);
    }
    let mut p = Pair::with(plain(Role::Client), server, 1 << 20);
    let back = p
        .call::<Echo>(&DdpData(pattern(3000, 3)), vec![], None)
        .unwrap();
    assert_eq!(back.0, pattern(3000, 3));
    assert_eq!(
        p.sides[SERVER].core.stats().replies_read_chunks,
        0,
        "inline"
    );
    // Once confirmed (the driver does it when the configuration call is answered), the same
    // reply is exposed, which this default requester cannot use.
    p.sides[SERVER].core.confirm_mode_2004();
    let err = p
        .call::<Echo>(&DdpData(pattern(3000, 3)), vec![], None)
        .unwrap_err();
    assert!(matches!(err, rpc::Error::Transport(_)), "{err:?}");
    assert_eq!(p.sides[SERVER].core.stats().replies_read_chunks, 1);
}

#[test]
fn the_configuration_answer_sets_inline_size_read_depth_and_alignment() {
    // Seed 000 section 6.2: the answer's maxcallsize bounds inline calls, maxrdmaread the
    // RDMA Reads against the server, align the client's padding.
    let pad = AlignPadding::new(4096, 1024);
    let mut client = padded(Role::Client, Some(pad));
    client.peer_recv_size = 1024;
    if let Some(m) = client.mode_2004.as_mut() {
        m.read_read = true;
    }
    let mut p = Pair::with(client, padded(Role::Server, Some(pad)), 1 << 20);
    p.sides[CLIENT].core.configure(16 << 10, 4, Some(512));
    let config = p.sides[CLIENT].core.config().clone();
    assert_eq!((config.peer_recv_size, config.max_reads), (16 << 10, 4));
    assert_eq!(
        config.mode_2004.as_ref().unwrap().padding,
        Some(AlignPadding::new(512, 1024))
    );
    assert!(p.sides[CLIENT].core.read_read_requester());
    // A 3000-byte argument now goes inline (it would not have in 1 KB), padded to 512.
    assert_eq!(
        p.call::<Where>(&pattern(3000, 0), vec![], None).unwrap() % 512,
        0
    );
    let sent = &p.wire[0].1;
    let (h, _) = hdr::parse_with(sent, &Default::default(), true).unwrap();
    assert!(
        matches!(h.body, Body::MsgP(_, q) if q.align == 512),
        "{h:?}"
    );
    // An answer of 0 RDMA Reads turns the Read-Read model off; an alignment that cannot be
    // honoured turns padding off.
    let core = &mut p.sides[CLIENT].core;
    core.configure(16 << 10, 0, Some(6));
    assert!(!core.read_read_requester());
    assert_eq!(core.config().mode_2004.as_ref().unwrap().padding, None);
}

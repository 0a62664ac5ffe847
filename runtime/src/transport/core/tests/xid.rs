//! Seed 004 section 5.1.1 between two cores: a message whose RPC XID is not its transport
//! header's XID is malformed. A responder answers it with ERR_CHUNK (RDMA2_ERR_BAD_XDR in
//! version 2), however the call came (inline, in a Position-Zero Read chunk, in the backward
//! direction) and before the application sees it; a requester fails the call it answers
//! (inline reply, Reply chunk). Each case has a control: the same message with equal XIDs is
//! served.

use super::*;
use crate::transport::header::{F_RESPONSE, VERSION, VERSION_2};

/// Hands `message` to `side`'s core as if the other side had sent it; returns what `side`
/// sent back once everything settled.
fn inject_at(p: &mut Pair, side: usize, message: Vec<u8>) -> Vec<Header> {
    let before = p.wire.len();
    let s = &mut p.sides[side];
    s.core.handle_recv(&message, None, &mut s.mem);
    p.run();
    p.wire[before..]
        .iter()
        .filter(|(from, _)| *from == side)
        .map(|(_, m)| hdr::parse(m, &Default::default()).unwrap().0)
        .collect()
}

/// An RDMA_MSG without chunks in `version` (flags 0) carrying a NULL call of XID `rpc_xid`.
fn null_call(version: u32, xid: u32, rpc_xid: u32) -> Vec<u8> {
    let body = Body::Msg(Chunks::default());
    let header = if version == VERSION {
        Header::v1(xid, 1, body)
    } else {
        Header::v2(xid, 1, 0, body)
    };
    let mut m = header_bytes(&header);
    m.extend(rpc_null_call(rpc_xid));
    m
}

fn is_err_chunk(answers: &[Header], xid: u32, version: u32) -> bool {
    matches!(answers, [h] if h.xid == xid
        && h.version == version
        && h.body == Body::Error(RdmaError::BadXdr))
}

fn is_reply(answers: &[Header], xid: u32) -> bool {
    matches!(answers, [h] if h.xid == xid && matches!(h.body, Body::Msg(_)))
}

#[test]
fn rejects_an_rdma_msg_call_whose_rpc_xid_differs() {
    let mut p = Pair::new();
    let out = inject_at(&mut p, SERVER, null_call(VERSION, 21, 22));
    assert!(is_err_chunk(&out, 21, VERSION), "{out:?}");
    assert_eq!(p.sides[SERVER].core.stats().calls_received, 0, "dispatched");
    // The connection carries on, and the same call with equal XIDs is served.
    let out = inject_at(&mut p, SERVER, null_call(VERSION, 21, 21));
    assert!(is_reply(&out, 21), "{out:?}");
    p.call::<Null>(&(), vec![], None).unwrap();
}

#[test]
fn rejects_a_version_2_call_whose_rpc_xid_differs_with_bad_xdr() {
    let v2 = |role| CoreConfig {
        version_2: true,
        ..config(role)
    };
    let mut p = Pair::with(v2(Role::Client), v2(Role::Server), 1 << 20);
    p.call::<Null>(&(), vec![], None).unwrap();
    let out = inject_at(&mut p, SERVER, null_call(VERSION_2, 31, 32));
    assert!(is_err_chunk(&out, 31, VERSION_2), "{out:?}");
    // Seed 003 section 5.3.3: the error answers the requester's message.
    assert_eq!(out[0].flags, F_RESPONSE);
    let out = inject_at(&mut p, SERVER, null_call(VERSION_2, 31, 31));
    assert!(is_reply(&out, 31), "{out:?}");
}

/// An RDMA_NOMSG whose Position-Zero Read chunk holds `rpc` in the client's memory.
fn long_call(p: &mut Pair, xid: u32, rpc: &[u8]) -> Vec<u8> {
    let c = &mut p.sides[CLIENT];
    let buf = c.mem.new_buf(rpc.len(), Access::REMOTE_READ);
    buf.0.data.lock().unwrap().copy_from_slice(rpc);
    let body = Body::NoMsg(Chunks {
        reads: vec![ReadChunk {
            position: 0,
            segments: vec![Segment {
                rdma_handle: buf.handle(),
                rdma_length: rpc.len() as u32,
                rdma_offset: buf.addr(),
            }],
        }],
        ..Default::default()
    });
    header_bytes(&Header::v1(xid, 1, body))
}

#[test]
fn rejects_a_long_call_whose_rpc_xid_differs_once_it_is_read() {
    let mut p = Pair::new();
    let m = long_call(&mut p, 41, &rpc_null_call(42));
    let out = inject_at(&mut p, SERVER, m);
    assert!(is_err_chunk(&out, 41, VERSION), "{out:?}");
    assert_eq!(p.sides[SERVER].core.stats().calls_received, 0, "dispatched");
    // A chunk too short to hold an XID at all.
    let m = long_call(&mut p, 43, &rpc_null_call(43)[..3]);
    let out = inject_at(&mut p, SERVER, m);
    assert!(is_err_chunk(&out, 43, VERSION), "{out:?}");
    // The call counted against no credit: the same call with equal XIDs is served.
    let m = long_call(&mut p, 41, &rpc_null_call(41));
    let out = inject_at(&mut p, SERVER, m);
    assert!(is_reply(&out, 41), "{out:?}");
    assert_eq!(p.sides[SERVER].core.calls_in_progress(), 0);
}

#[test]
fn rejects_a_backward_call_whose_rpc_xid_differs() {
    let mut client = config(Role::Client);
    client.backward_credits = 2;
    let mut server = config(Role::Server);
    server.backward_credits = 2;
    let mut p = Pair::with(client, server, 1 << 20);
    // The server calls the client: the client is the responder.
    let out = inject_at(&mut p, CLIENT, null_call(VERSION, 51, 52));
    assert!(is_err_chunk(&out, 51, VERSION), "{out:?}");
    assert_eq!(p.sides[CLIENT].core.stats().calls_received, 0, "dispatched");
    let out = inject_at(&mut p, CLIENT, null_call(VERSION, 51, 51));
    assert!(is_reply(&out, 51), "{out:?}");
}

fn protocol_error(r: Result<impl std::fmt::Debug, rpc::Error>) -> String {
    match r {
        Err(rpc::Error::Transport(rpc::TransportError::Protocol(why))) => why,
        other => panic!("not a protocol error: {other:?}"),
    }
}

#[test]
fn fails_a_call_whose_inline_reply_carries_another_rpc_xid() {
    let mut p = Pair::new();
    p.tamper = Some(Box::new(|from, bytes| {
        if from == SERVER {
            // The RPC reply starts after the seven words of an RDMA_MSG without chunks.
            bytes[28] ^= 0x80;
        }
    }));
    let why = protocol_error(p.call::<Null>(&(), vec![], None));
    assert!(why.contains("RPC XID"), "{why}");
    // Nothing of the call stays reachable, and the connection carries on.
    assert!(p.sides[CLIENT].mem.reachable().is_empty());
    p.tamper = None;
    p.call::<Null>(&(), vec![], None).unwrap();
}

/// Starts BIG(`n`) with a Reply chunk, takes its Send off the client core without delivering
/// it, and answers it as a responder would through the Reply chunk, with an RPC reply of XID
/// `rpc_xid` (the call's own when `None`). The call's result.
fn long_reply(p: &mut Pair, n: u32, rpc_xid: Option<u32>) -> Result<Bytes, rpc::Error> {
    let id = p.start::<Big>(&n, vec![], Some(4096)).unwrap();
    let c = &mut p.sides[CLIENT];
    let mut sent = None;
    while let Some(op) = c.core.poll_op() {
        if let Op::Send {
            id: op, message, ..
        } = op
        {
            sent = Some(message.to_bytes().to_vec());
            c.core.handle_completion(op, WcStatus::Success, &mut c.mem);
        }
    }
    let (call, _) = hdr::parse(&sent.expect("the call's Send"), &Default::default()).unwrap();
    let Body::Msg(Chunks {
        reply: Some(reply), ..
    }) = call.body
    else {
        panic!("no Reply chunk: {call:?}")
    };
    let mut enc = Encoder::new();
    rpc::encode_reply_header(&mut enc, rpc_xid.unwrap_or(call.xid), Ok(())).unwrap();
    Bytes::from(vec![0xb1; n as usize])
        .encode(&mut enc)
        .unwrap();
    let message = enc.finish().into_bytes().to_vec();
    // The responder's RDMA Write into the first segment.
    let seg = reply[0];
    {
        let table = c.mem.table.lock().unwrap();
        let buf = table
            .get(&seg.rdma_handle)
            .expect("the Reply chunk's handle");
        let at = (seg.rdma_offset - buf.addr()) as usize;
        buf.0.data.lock().unwrap()[at..at + message.len()].copy_from_slice(&message);
    }
    let returned = Segment {
        rdma_length: message.len() as u32,
        ..seg
    };
    let answer = Header::v1(
        call.xid,
        1,
        Body::NoMsg(Chunks {
            reply: Some(vec![returned]),
            ..Default::default()
        }),
    );
    c.core.handle_recv(&header_bytes(&answer), None, &mut c.mem);
    p.run();
    p.result::<Big>(id)
}

#[test]
fn fails_a_call_whose_reply_chunk_carries_another_rpc_xid() {
    let mut p = Pair::new();
    let why = protocol_error(long_reply(&mut p, 2000, Some(0x0bad_0bad)));
    assert!(why.contains("RPC XID 0xbad0bad"), "{why}");
    assert!(p.sides[CLIENT].mem.reachable().is_empty());
    assert_eq!(long_reply(&mut p, 2000, None).unwrap().len(), 2000);
}

#[test]
fn fails_a_backward_call_whose_reply_carries_another_rpc_xid() {
    let mut client = config(Role::Client);
    client.backward_credits = 2;
    let mut server = config(Role::Server);
    server.backward_credits = 2;
    let mut p = Pair::with(client, server, 1 << 20);
    p.call::<Null>(&(), vec![], None).unwrap();
    let backward = |p: &mut Pair| {
        let s = &mut p.sides[SERVER];
        let xid = s.core.next_xid();
        let mut enc = Encoder::new();
        enc.put_gathered(Bytes::from(rpc_null_call(xid)));
        let id = s
            .core
            .start_call(
                OutgoingCall {
                    xid,
                    message: enc.finish(),
                    moved: vec![],
                    write_chunks: vec![],
                    reply_chunk: None,
                    timeout: None,
                    backward: true,
                    room: Vec::new(),
                },
                Instant::now(),
                &mut s.mem,
            )
            .unwrap();
        p.run();
        p.sides[SERVER].replies.remove(&id).expect("an answer")
    };
    p.tamper = Some(Box::new(|from, bytes| {
        if from == CLIENT {
            bytes[28] ^= 0x80;
        }
    }));
    match backward(&mut p) {
        Err(rpc::TransportError::Protocol(why)) => assert!(why.contains("RPC XID"), "{why}"),
        other => panic!("{other:?}"),
    }
    p.tamper = None;
    rpc::decode_reply::<()>(backward(&mut p).unwrap()).unwrap();
}

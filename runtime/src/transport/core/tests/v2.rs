//! Version 2 (seed 003) between two cores: negotiation with every kind of peer, transport
//! properties, the new error codes, and remote invalidation through `rdma_inv_handle`.

use super::*;
use crate::transport::header::v2::{Rpcrdma2Rvreqsup, RDMA2_PROPID_BRS, RDMA2_PROPID_RBSIZ};
use crate::transport::header::{Property, F_RESPONSE, VERSION, VERSION_2};

fn v2(role: Role) -> CoreConfig {
    CoreConfig {
        version_2: true,
        ..config(role)
    }
}

/// Every message that crossed from `side`, parsed.
fn sent_by(p: &Pair, side: usize) -> Vec<Header> {
    p.wire
        .iter()
        .filter(|(from, _)| *from == side)
        .map(|(_, m)| hdr::parse(m, &Default::default()).unwrap().0)
        .collect()
}

#[test]
fn two_version_2_peers_agree_and_exchange_properties() {
    let mut server = v2(Role::Server);
    server.recv_size = 2048;
    let mut client = v2(Role::Client);
    client.peer_recv_size = 2048;
    client.backward_credits = 2;
    let mut p = Pair::with(client, server, 1 << 20);
    let id = p
        .start::<Echo>(&DdpData(pattern(300, 3)), vec![], None)
        .unwrap();
    p.run();
    assert_eq!(p.result::<Echo>(id).unwrap(), DdpData(pattern(300, 3)));
    let from_client = sent_by(&p, CLIENT);
    let from_server = sent_by(&p, SERVER);
    // Seed 003 section 7: the first message offers version 2 within 1024 bytes; section
    // 5.3.4: it is the RDMA2_CONNPROP.
    let first = &p.wire[0];
    assert_eq!(first.0, CLIENT);
    assert!(first.1.len() <= 1024, "{} bytes", first.1.len());
    let Body::ConnProp(props) = &from_client[0].body else {
        panic!("the first message is {:?}", from_client[0])
    };
    assert_eq!(from_client[0].version, VERSION_2);
    assert!(!from_client[0].is_response());
    assert!(props.contains(&Property::receive_buffer_size(1024)));
    assert!(props.contains(&Property::reverse_request_support(
        Rpcrdma2Rvreqsup::Rdma2RvreqsupGenl
    )));
    // The server answers with its own, as a response to the offer's XID.
    assert_eq!(from_server[0].xid, from_client[0].xid);
    assert!(from_server[0].is_response());
    assert!(matches!(from_server[0].body, Body::ConnProp(_)));
    // Then the call and its reply, both version 2, the reply flagged as a response.
    assert_eq!(from_client[1].version, VERSION_2);
    assert!(!from_client[1].is_response());
    assert_eq!(from_server[1].version, VERSION_2);
    assert_eq!(from_server[1].flags, F_RESPONSE);
    assert_eq!(p.sides[CLIENT].negotiated, vec![VERSION_2]);
    assert_eq!(p.sides[CLIENT].core.version(), VERSION_2);
    // Seed 003 section 4.2.1: each side may now send what the other's RBSIZ says.
    assert_eq!(p.sides[SERVER].core.config().peer_recv_size, 1024);
    assert_eq!(p.sides[CLIENT].core.config().peer_recv_size, 2048);
    assert_eq!(
        p.sides[SERVER].core.peer_base_properties().reverse_requests,
        Rpcrdma2Rvreqsup::Rdma2RvreqsupGenl
    );
}

#[test]
fn a_version_2_client_carries_on_in_version_1_with_a_version_1_server() {
    let mut p = Pair::with(v2(Role::Client), config(Role::Server), 1 << 20);
    // Calls started before the answer wait for it: none is lost (seed 003 section 7.2).
    let ids: Vec<_> = (0..3)
        .map(|i| {
            p.start::<Echo>(&DdpData(pattern(100 + i, 1)), vec![], None)
                .unwrap()
        })
        .collect();
    p.run();
    for (i, id) in ids.into_iter().enumerate() {
        assert_eq!(p.result::<Echo>(id).unwrap(), DdpData(pattern(100 + i, 1)));
    }
    let from_client = sent_by(&p, CLIENT);
    let from_server = sent_by(&p, SERVER);
    assert!(matches!(from_client[0].body, Body::ConnProp(_)));
    assert_eq!(
        from_server[0].body,
        Body::Error(RdmaError::Vers { low: 1, high: 1 })
    );
    assert_eq!(from_server[0].xid, from_client[0].xid);
    assert!(from_client[1..].iter().all(|h| h.version == VERSION));
    assert_eq!(from_client.len(), 4, "the offer and three calls");
    assert_eq!(p.sides[CLIENT].negotiated, vec![VERSION]);
}

#[test]
fn a_version_1_client_is_answered_in_version_1_by_a_version_2_server() {
    let mut p = Pair::with(config(Role::Client), v2(Role::Server), 1 << 20);
    let echoed = p
        .call::<Echo>(
            &DdpData(pattern(5000, 2)),
            vec![WriteTarget::Size(5000)],
            None,
        )
        .unwrap();
    assert_eq!(echoed, DdpData(pattern(5000, 2)));
    assert!(p.wire.iter().all(|(_, m)| m[4..8] == 1u32.to_be_bytes()));
}

#[test]
fn a_remembered_version_1_skips_the_offer() {
    let mut client = v2(Role::Client);
    client.remembered_version = Some(VERSION);
    let mut p = Pair::with(client, v2(Role::Server), 1 << 20);
    p.call::<Null>(&(), vec![], None).unwrap();
    assert!(sent_by(&p, CLIENT).iter().all(|h| h.version == VERSION));
    assert!(p.sides[CLIENT].negotiated.is_empty());
}

#[test]
fn an_unanswered_offer_settles_on_version_1_at_its_deadline() {
    let mut c: Core<SimBuf> = Core::new(v2(Role::Client), 7);
    let mut mem = SimMemory::new(1 << 16, 1 << 20);
    let now = Instant::now();
    c.open(now);
    assert!(matches!(c.poll_op(), Some(Op::Send { .. })), "the offer");
    let mut enc = Encoder::new();
    let none = rpc::msg::OpaqueAuth {
        flavor: rpc::msg::AuthFlavor::AuthNone,
        body: Bytes::new(),
    };
    let xid = c.next_xid();
    rpc::encode_call_header(&mut enc, xid, PROG, 1, 0, &none, &none).unwrap();
    let call = OutgoingCall {
        xid,
        message: enc.finish(),
        moved: vec![],
        write_chunks: vec![],
        reply_chunk: None,
        timeout: None,
        backward: false,
        room: Vec::new(),
    };
    c.start_call(call, now, &mut mem).unwrap();
    assert!(c.poll_op().is_none(), "held until the version is settled");
    let deadline = c.poll_timeout().expect("the offer's deadline");
    assert_eq!(deadline, now + c.config().negotiation_timeout);
    c.handle_timeout(deadline);
    let Some(Op::Send { message, .. }) = c.poll_op() else {
        panic!("the held call goes")
    };
    assert_eq!(message.head()[4..8], 1u32.to_be_bytes());
    assert!(matches!(
        c.poll_event(),
        Some(Event::Negotiated { version: 1 })
    ));
}

/// A version 2 connection, settled.
fn settled() -> Pair {
    let mut p = Pair::with(v2(Role::Client), v2(Role::Server), 1 << 20);
    p.call::<Null>(&(), vec![], None).unwrap();
    assert_eq!(p.sides[CLIENT].core.version(), VERSION_2);
    p
}

fn v2_bytes(xid: u32, flags: u32, body: Body) -> Vec<u8> {
    header_bytes(&Header::v2(xid, 1, flags, body))
}

#[test]
fn an_unknown_header_type_gets_inval_htype_and_the_connection_carries_on() {
    let mut p = settled();
    let m = v2_bytes(
        44,
        0,
        Body::Other {
            htype: 77,
            body: Bytes::from_static(&[0, 0, 0, 9]),
        },
    );
    let out = inject(&mut p, m);
    let (h, _) = hdr::parse(&out[0], &Default::default()).unwrap();
    assert_eq!((h.xid, h.version, h.flags), (44, VERSION_2, F_RESPONSE));
    assert_eq!(h.body, Body::Error(RdmaError::InvalHtype));
    p.call::<Null>(&(), vec![], None).unwrap();
}

#[test]
fn an_unparsable_version_2_header_gets_bad_xdr() {
    let mut p = settled();
    // RDMA2_MSG whose Read list's present flag is 7.
    let mut m = v2_bytes(45, 0, Body::Msg(Chunks::default()));
    m[24..28].copy_from_slice(&7u32.to_be_bytes());
    m.extend(rpc_null_call(45));
    assert_eq!(answer(&inject(&mut p, m)), Body::Error(RdmaError::BadXdr));
}

#[test]
fn properties_unknown_are_ignored_and_malformed_known_ones_get_bad_xdr() {
    let mut p = settled();
    let unknown = Property {
        id: 0x7777,
        data: Bytes::from_static(b"anything"),
    };
    let m = v2_bytes(
        46,
        0,
        Body::ConnProp(vec![unknown.clone(), Property::receive_buffer_size(4096)]),
    );
    let out = inject(&mut p, m);
    assert!(
        matches!(answer(&out), Body::ConnProp(_)),
        "answered, not refused"
    );
    assert_eq!(p.sides[SERVER].core.peer_properties()[0], unknown);
    assert_eq!(p.sides[SERVER].core.config().peer_recv_size, 4096);
    // Seed 003 section 4.1: a value that does not conform to the property's type.
    for bad in [
        Property {
            id: RDMA2_PROPID_RBSIZ,
            data: Bytes::from_static(&[0, 1]),
        },
        Property {
            id: RDMA2_PROPID_RBSIZ,
            data: Bytes::from_static(&[0, 0, 16, 0, 0, 0, 0, 0]),
        },
        Property {
            id: RDMA2_PROPID_BRS,
            data: Bytes::from_static(&[0, 0, 0, 9]),
        },
    ] {
        let m = v2_bytes(47, 0, Body::ConnProp(vec![bad]));
        assert_eq!(answer(&inject(&mut p, m)), Body::Error(RdmaError::BadXdr));
    }
}

#[test]
fn limits_are_named_in_version_2_errors() {
    let mut server = v2(Role::Server);
    server.limits.max_chunks = 2;
    server.limits.max_segments = 3;
    let mut p = Pair::with(v2(Role::Client), server, 1 << 20);
    p.call::<Null>(&(), vec![], None).unwrap();
    let read = |position| ReadChunk {
        position,
        segments: vec![seg(1, 8)],
    };
    let cases = [
        (
            Chunks {
                reads: vec![read(40), read(52), read(64)],
                ..Chunks::default()
            },
            RdmaError::ReadChunks { max: 2 },
        ),
        (
            Chunks {
                writes: vec![vec![seg(1, 8)]; 3],
                ..Chunks::default()
            },
            RdmaError::WriteChunks { max: 2 },
        ),
        (
            Chunks {
                reply: Some(vec![seg(1, 8); 4]),
                ..Chunks::default()
            },
            RdmaError::Segments { max: 3 },
        ),
    ];
    for (chunks, expected) in cases {
        let mut m = v2_bytes(48, 0, Body::Msg(chunks));
        m.extend(rpc_null_call(48));
        assert_eq!(answer(&inject(&mut p, m)), Body::Error(expected));
    }
}

/// The errors the server sent, in order.
fn errors_sent(p: &Pair) -> Vec<RdmaError> {
    sent_by(p, SERVER)
        .into_iter()
        .filter_map(|h| match h.body {
            Body::Error(e) => Some(e),
            _ => None,
        })
        .collect()
}

#[test]
fn resource_errors_make_the_requester_send_again_with_more_room() {
    let mut p = settled();
    // A result longer than its Write chunk: WRITE_RESOURCE names the chunk (from 1) and the
    // bytes needed, and the call goes again with that much.
    let got = p
        .call::<MaybeData>(&5000, vec![WriteTarget::Size(100)], None)
        .unwrap();
    assert_eq!(got, Maybe::Data(DdpData(Bytes::from(vec![0x5d; 5000]))));
    // A reply longer than its Reply chunk: REPLY_RESOURCE, then a large enough one.
    let got = p.call::<Big>(&5000, vec![], Some(2048)).unwrap();
    assert_eq!(got, Bytes::from(vec![0xb1; 5000]));
    let errors = errors_sent(&p);
    assert_eq!(
        errors[0],
        RdmaError::WriteResource {
            chunk_index: 1,
            length_needed: 5000
        }
    );
    assert!(
        matches!(errors[1], RdmaError::ReplyResource { length_needed } if length_needed > 5000)
    );
    assert_eq!(p.client().core.stats().resent, 2);
    // Every handle of both attempts was fenced.
    assert!(p.client().mem.reachable().is_empty());
}

#[test]
fn a_resource_past_the_bound_or_a_second_refusal_fails_with_a_typed_error() {
    let mut client = v2(Role::Client);
    client.max_reply_size = 4096;
    let mut p = Pair::with(client, v2(Role::Server), 1 << 20);
    let err = p
        .call::<MaybeData>(&5000, vec![WriteTarget::Size(100)], None)
        .unwrap_err();
    // The error names what the reply needs and the bound.
    assert!(
        matches!(
            err,
            rpc::Error::Transport(rpc::TransportError::ReplyTooLarge {
                needed: Some(5000),
                limit: 4096
            })
        ),
        "{err}"
    );
    assert_eq!(p.client().core.stats().resent, 0);
    p.call::<Null>(&(), vec![], None).unwrap();
}

#[test]
fn read_chunks_refused_go_again_in_one_position_zero_chunk() {
    let mut server = v2(Role::Server);
    server.limits.max_chunks = 1;
    let mut p = Pair::with(v2(Role::Client), server, 1 << 20);
    let args = (DdpData(pattern(2001, 4)), 7, DdpData(pattern(3001, 5)));
    assert_eq!(p.call::<Two>(&args, vec![], None).unwrap(), 5009);
    assert_eq!(errors_sent(&p), vec![RdmaError::ReadChunks { max: 1 }]);
    let calls: Vec<Header> = sent_by(&p, CLIENT)
        .into_iter()
        .filter(|h| matches!(h.body, Body::Msg(_) | Body::NoMsg(_)))
        .collect();
    let Body::NoMsg(chunks) = &calls.last().unwrap().body else {
        panic!("sent again as a long call: {:?}", calls.last())
    };
    assert_eq!(chunks.reads.len(), 1);
    assert_eq!(chunks.reads[0].position, 0);
    assert_eq!(calls[0].xid, calls.last().unwrap().xid, "the same XID");
}

#[test]
fn write_chunks_refused_go_again_with_fewer_and_a_reply_chunk() {
    let mut server = v2(Role::Server);
    server.limits.max_chunks = 1;
    let mut p = Pair::with(v2(Role::Client), server, 1 << 20);
    let got = p
        .call::<Echo>(
            &DdpData(pattern(600, 6)),
            vec![WriteTarget::Size(600), WriteTarget::Size(600)],
            None,
        )
        .unwrap();
    assert_eq!(got, DdpData(pattern(600, 6)));
    assert_eq!(errors_sent(&p), vec![RdmaError::WriteChunks { max: 1 }]);
    let last = sent_by(&p, CLIENT).pop().unwrap();
    let Body::Msg(chunks) = &last.body else {
        panic!("{last:?}")
    };
    assert_eq!(chunks.writes.len(), 1);
    assert!(chunks.reply.is_some());
}

#[test]
fn the_responder_invalidates_the_handle_the_requester_offers() {
    let mut client = v2(Role::Client);
    client.remote_invalidate = true;
    let mut p = Pair::with(client, v2(Role::Server), 1 << 20);
    let id = p
        .start::<Echo>(
            &DdpData(pattern(5000, 1)),
            vec![WriteTarget::Size(5000)],
            None,
        )
        .unwrap();
    p.run();
    let call = sent_by(&p, CLIENT)
        .into_iter()
        .find(|h| matches!(h.body, Body::Msg(_)))
        .unwrap();
    let Body::Msg(chunks) = &call.body else {
        unreachable!()
    };
    assert_ne!(chunks.inv_handle, 0);
    assert!(chunks
        .segments()
        .any(|s| s.rdma_handle == chunks.inv_handle));
    let stats = p.client().core.stats();
    assert_eq!(stats.remote_invalidations, 1);
    assert_eq!(
        stats.local_invalidations, 1,
        "two handles, one invalidated by the peer"
    );
    assert_eq!(stats.unexpected_invalidations, 0);
    assert_eq!(p.client().reachable_at_reply[&id], Vec::<u32>::new());
    p.result::<Echo>(id).unwrap();
}

#[test]
fn an_inv_handle_that_names_no_handle_of_the_call_is_bad_xdr() {
    let mut p = settled();
    let mut m = v2_bytes(
        49,
        0,
        Body::Msg(Chunks {
            inv_handle: 999,
            writes: vec![vec![seg(5, 64)]],
            ..Chunks::default()
        }),
    );
    m.extend(rpc_null_call(49));
    assert_eq!(answer(&inject(&mut p, m)), Body::Error(RdmaError::BadXdr));
}

/// An extension that echoes its message's body.
struct EchoExtension;

impl crate::transport::Extension for EchoExtension {
    fn name(&self) -> &str {
        "echo"
    }
    fn header_types(&self) -> &[u32] {
        &[66]
    }
    fn properties(&self) -> Vec<Property> {
        vec![Property {
            id: 0x6563686f,
            data: Bytes::new(),
        }]
    }
    fn handle(
        &self,
        message: &crate::transport::ExtensionMessage,
    ) -> crate::transport::ExtensionAnswer {
        if message.body.is_empty() {
            return crate::transport::ExtensionAnswer::Error(0x6563);
        }
        crate::transport::ExtensionAnswer::Reply {
            flags: message.flags,
            body: message.body.clone(),
        }
    }
}

#[test]
fn extension_messages_are_answered_by_a_peer_that_knows_them() {
    let ext = crate::transport::Extensions::new().with(EchoExtension);
    let mut client = v2(Role::Client);
    client.recv_size = 4096;
    client.peer_recv_size = 4096;
    client.extensions = ext.clone();
    let mut server = v2(Role::Server);
    server.recv_size = 4096;
    server.peer_recv_size = 4096;
    server.extensions = ext;
    let mut p = Pair::with(client, server, 1 << 20);
    p.call::<Null>(&(), vec![], None).unwrap();
    assert_eq!(p.sides[SERVER].core.peer_properties().len(), 3);
    for len in [4, 3000] {
        let body = pattern(len, 1);
        let c = &mut p.sides[CLIENT];
        let id = c
            .core
            .start_extension(66, 0x10, body.clone(), Instant::now())
            .unwrap();
        p.run();
        let reply = p.sides[CLIENT].replies.remove(&id).unwrap().unwrap();
        let padded = len + crate::xdr::padding(len);
        assert_eq!(reply.message.len(), padded);
        assert_eq!(reply.message[..len], body[..]);
    }
    // The extension's own error code reaches the caller.
    let id = p.sides[CLIENT]
        .core
        .start_extension(66, 0, Bytes::new(), Instant::now())
        .unwrap();
    p.run();
    let err = p.sides[CLIENT].replies.remove(&id).unwrap().unwrap_err();
    assert!(matches!(
        err,
        rpc::TransportError::RdmaRefused(RdmaError::Other(0x6563))
    ));
    p.call::<Null>(&(), vec![], None).unwrap();
}

#[test]
fn reverse_direction_calls_carry_chunks_and_remote_invalidation_in_version_2() {
    // Seed 003 section 8.4.1: "When chunks are present in a reverse direction RPC request,
    // Remote Invalidation allows the responder to trigger invalidation of a requester's
    // STags", with the server as requester. The client advertised RDMA2_RVREQSUP_GENL.
    let mut client = v2(Role::Client);
    client.backward_credits = 2;
    let mut server = v2(Role::Server);
    server.backward_credits = 2;
    server.remote_invalidate = true;
    let mut p = Pair::with(client, server, 1 << 20);
    p.call::<Null>(&(), vec![], None).unwrap();
    let s = &mut p.sides[SERVER];
    let xid = s.core.next_xid();
    let mut enc = Encoder::for_call(s.core.call_policy());
    let none = rpc::msg::OpaqueAuth {
        flavor: rpc::msg::AuthFlavor::AuthNone,
        body: Bytes::new(),
    };
    rpc::encode_call_header(&mut enc, xid, PROG, 1, 1, &none, &none).unwrap();
    let data = DdpData(pattern(5000, 8));
    data.encode(&mut enc).unwrap();
    let (message, moved) = enc.finish_with_chunks();
    assert_eq!(moved.len(), 1, "the argument moves to a Read chunk");
    let id = s
        .core
        .start_call(
            OutgoingCall {
                xid,
                message,
                moved,
                write_chunks: vec![WriteTarget::Size(5000)],
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
    let reply = p.sides[SERVER].replies.remove(&id).unwrap().unwrap();
    assert_eq!(rpc::decode_reply::<DdpData>(reply).unwrap(), data);
    let stats = p.sides[SERVER].core.stats();
    assert_eq!(stats.remote_invalidations, 1, "{stats:?}");
    assert_eq!(stats.unexpected_invalidations, 0);
    assert!(p.sides[SERVER].mem.reachable().is_empty());
    // The server's call went as a reverse-direction call: version 2 without F_RESPONSE (its
    // XID may equal one of the client's own, which the flag tells apart, seed 003 section 3.2).
    assert!(sent_by(&p, SERVER).iter().any(|h| h.xid == xid
        && !h.is_response()
        && h.version == VERSION_2
        && matches!(h.body, Body::Msg(_))));
}

#[test]
fn the_linux_kernels_err_vers_with_the_offers_version_settles_at_once() {
    // svcrdma answers a version 2 offer with version 1's seven-word ERR_VERS but the offer's
    // rdma_vers (2) copied into the header (seen in tests/vm/run nfs).
    let mut c: Core<SimBuf> = Core::new(v2(Role::Client), 7);
    let mut mem = SimMemory::new(1 << 16, 1 << 20);
    c.open(Instant::now());
    let Some(Op::Send { message, .. }) = c.poll_op() else {
        panic!("the offer")
    };
    let xid = &message.head()[0..4];
    let mut answer = xid.to_vec();
    for w in [2u32, 128, 4, 1, 1, 1] {
        answer.extend(w.to_be_bytes());
    }
    c.handle_recv(&answer, None, &mut mem);
    assert_eq!(c.version(), VERSION);
    assert!(!c.negotiating());
    assert!(matches!(
        c.poll_event(),
        Some(Event::Negotiated { version: 1 })
    ));
    // Another XID in that shape is not taken as the answer.
    let mut c: Core<SimBuf> = Core::new(v2(Role::Client), 7);
    c.open(Instant::now());
    let mut other = 99u32.to_be_bytes().to_vec();
    for w in [2u32, 128, 4, 1, 1, 1] {
        other.extend(w.to_be_bytes());
    }
    c.handle_recv(&other, None, &mut mem);
    assert!(c.negotiating());
}

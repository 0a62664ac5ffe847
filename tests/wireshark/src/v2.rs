//! RPC-over-RDMA version 2 traffic. Until `rpcrdma::transport` speaks version 2, the headers
//! are built with the types xdrgen generates from `specs/common.x` + `specs/baseops.x`
//! (`rpcrdma_specs::v2`) and sent as RDMA Sends between two software providers on loopback.
//!
//! [`capture`] is the one source of traffic the tests use: it returns the pcap file and what
//! was sent ([`Sent`], from which the tests derive what tshark must show). A version 2
//! transport replaces it by running calls and returning its own Sends, decoded.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use rpcrdma::rdma::soft::PcapTap;
use rpcrdma::rdma::{Access, ConnectParams, Connection, Listener, Provider, RecvWr, SendWr, Sge};
use rpcrdma_specs::v2::{
    Rpcrdma2ChunkLists, Rpcrdma2Connprop, Rpcrdma2ErrVers, Rpcrdma2ErrWrite, Rpcrdma2Error,
    Rpcrdma2HdrPrefix, Rpcrdma2Propval, Rpcrdma2ReadList, Rpcrdma2ReadSegment, Rpcrdma2Segment,
    Rpcrdma2WriteChunk, Rpcrdma2WriteList, RpcrdmaCommon, RDMA2_CONNPROP, RDMA2_ERROR,
    RDMA2_ERR_READ_CHUNKS, RDMA2_ERR_VERS, RDMA2_ERR_WRITE_RESOURCE, RDMA2_MSG, RDMA2_NOMSG,
    RDMA2_PROPID_BRS, RDMA2_PROPID_RBSIZ, RPCRDMA2_F_RESPONSE,
};

/// The version number (the draft's section 3.1: version 2 keeps version 1's four words).
pub const VERSION: u32 = 2;

/// A property no XDR defines (the draft's section 5.3.4: receivers ignore it).
pub const UNKNOWN_PROPERTY: u32 = 0x7777;
/// An error code no XDR defines (section 9.3: the default arm, void).
pub const UNKNOWN_ERROR: u32 = 0x55;
/// A header type no XDR defines (section 5.2: OPTIONAL extensions).
pub const UNKNOWN_HTYPE: u32 = 0x99;

/// The ONC RPC program of the calls: NFS version 3 (RFC 1813), which Wireshark knows (its
/// RPC dissector, called as Wireshark's own RPC-over-RDMA dissector calls it, takes calls
/// of known programs only).
const NFS: (u32, u32) = (100_003, 3);

/// What follows the version 2 prefix.
#[derive(Debug, Clone)]
pub enum Body {
    /// RDMA2_MSG: the chunk lists, then the RPC message (its first word is the XID).
    Msg(Rpcrdma2ChunkLists, Bytes),
    /// RDMA2_NOMSG.
    Nomsg(Rpcrdma2ChunkLists),
    /// RDMA2_ERROR.
    Error(Rpcrdma2Error),
    /// RDMA2_CONNPROP.
    Connprop(Rpcrdma2Connprop),
    /// Any other header type: bytes.
    Other(Bytes),
}

/// One version 2 transport message as sent.
#[derive(Debug, Clone)]
pub struct Sent {
    /// The prefix (XID, version, credits, header type, flags).
    pub prefix: Rpcrdma2HdrPrefix,
    /// The body.
    pub body: Body,
    /// Sent by the client (else by the server).
    pub from_client: bool,
}

impl Sent {
    /// The Send's payload.
    pub fn encode(&self) -> Bytes {
        let x = |r: rpcrdma::xdr::Result<Bytes>| r.expect("the test's headers encode");
        let mut out = BytesMut::new();
        out.put(x(rpcrdma::xdr::to_bytes(&self.prefix)));
        match &self.body {
            Body::Msg(chunks, rpc) => {
                out.put(x(rpcrdma::xdr::to_bytes(chunks)));
                out.put(rpc.clone());
            }
            Body::Nomsg(chunks) => out.put(x(rpcrdma::xdr::to_bytes(chunks))),
            Body::Error(e) => out.put(x(rpcrdma::xdr::to_bytes(e))),
            Body::Connprop(p) => out.put(x(rpcrdma::xdr::to_bytes(p))),
            Body::Other(b) => out.put(b.clone()),
        }
        out.freeze()
    }

    /// The XID.
    pub fn xid(&self) -> u32 {
        self.prefix.rdma_start.rdma_xid
    }
}

/// What [`capture`] produced.
#[derive(Debug, Clone)]
pub struct Capture {
    /// The pcap file.
    pub pcap: Vec<u8>,
    /// The transport messages, in the order sent.
    pub sent: Vec<Sent>,
}

fn prefix(xid: u32, credit: u32, htype: u32, flags: u32) -> Rpcrdma2HdrPrefix {
    Rpcrdma2HdrPrefix {
        rdma_start: RpcrdmaCommon {
            rdma_xid: xid,
            rdma_vers: VERSION,
            rdma_credit: credit,
            rdma_htype: htype,
        },
        rdma_flags: flags,
    }
}

fn segment(handle: u32, length: u32, offset: u64) -> Rpcrdma2Segment {
    Rpcrdma2Segment {
        rdma_handle: handle,
        rdma_length: length,
        rdma_offset: offset,
    }
}

fn read(position: u32, target: Rpcrdma2Segment) -> Rpcrdma2ReadList {
    Rpcrdma2ReadList {
        rdma_entry: Rpcrdma2ReadSegment {
            rdma_position: position,
            rdma_target: target,
        },
    }
}

fn write(segments: Vec<Rpcrdma2Segment>) -> Rpcrdma2WriteList {
    Rpcrdma2WriteList {
        rdma_entry: Rpcrdma2WriteChunk {
            rdma_target: segments,
        },
    }
}

fn prop(which: u32, data: &[u8]) -> Rpcrdma2Propval {
    Rpcrdma2Propval {
        rdma_which: which,
        rdma_data: Bytes::copy_from_slice(data),
    }
}

/// An ONC RPC call (RFC 5531 section 9): AUTH_NONE, `args` after the header.
fn rpc_call(xid: u32, proc_: u32, args: &[u8]) -> Bytes {
    let mut b = BytesMut::new();
    for w in [xid, 0, 2, NFS.0, NFS.1, proc_, 0, 0, 0, 0] {
        b.put_u32(w);
    }
    b.put_slice(args);
    b.freeze()
}

/// An ONC RPC reply, accepted, SUCCESS, `results` after the header.
fn rpc_reply(xid: u32, results: &[u8]) -> Bytes {
    let mut b = BytesMut::new();
    for w in [xid, 1, 0, 0, 0, 0] {
        b.put_u32(w);
    }
    b.put_slice(results);
    b.freeze()
}

/// The messages of the test: both sides' RDMA2_CONNPROP (RBSIZ, BRS, an unknown property, a
/// default value); an RDMA2_MSG call with two Read chunks (one of two segments), two Write
/// chunks, a Reply chunk and rdma_inv_handle set; an RDMA2_MSG call without chunks and its
/// reply (RPCRDMA2_F_RESPONSE); an RDMA2_NOMSG long call; RDMA2_ERROR with RDMA2_ERR_VERS,
/// RDMA2_ERR_WRITE_RESOURCE, RDMA2_ERR_READ_CHUNKS and an unknown code; an unknown header type.
pub fn scenario() -> Vec<Sent> {
    let chunky = Rpcrdma2ChunkLists {
        rdma_inv_handle: 0x5a5a_0002,
        rdma_reads: vec![
            read(40, segment(0x1111_0001, 4096, 0x10000)),
            read(40, segment(0x1111_0002, 1000, 0x20000)),
            read(80, segment(0x1111_0003, 512, 0x3_0000_0000)),
        ],
        rdma_writes: vec![
            write(vec![segment(0x5a5a_0002, 8192, 0x40000)]),
            write(vec![
                segment(0x5a5a_0003, 4096, 0x50000),
                segment(0x5a5a_0004, 4096, 0x60000),
            ]),
        ],
        rdma_reply: Some(Rpcrdma2WriteChunk {
            rdma_target: vec![segment(0x7777_0001, 65536, 0x70000)],
        }),
    };
    let none = Rpcrdma2ChunkLists::default();
    let long = Rpcrdma2ChunkLists {
        rdma_reads: vec![read(0, segment(0x2222_0001, 20000, 0x80000))],
        ..Rpcrdma2ChunkLists::default()
    };
    let rsp = RPCRDMA2_F_RESPONSE;
    let client = |prefix, body| Sent {
        prefix,
        body,
        from_client: true,
    };
    let server = |prefix, body| Sent {
        prefix,
        body,
        from_client: false,
    };
    vec![
        client(
            prefix(0x0a00_0001, 32, RDMA2_CONNPROP, 0),
            Body::Connprop(Rpcrdma2Connprop {
                rdma_props: vec![
                    prop(RDMA2_PROPID_RBSIZ, &4096u32.to_be_bytes()),
                    prop(RDMA2_PROPID_BRS, &2u32.to_be_bytes()),
                    prop(UNKNOWN_PROPERTY, &[1, 2, 3]),
                ],
            }),
        ),
        server(
            prefix(0x0b00_0001, 16, RDMA2_CONNPROP, 0),
            Body::Connprop(Rpcrdma2Connprop {
                rdma_props: vec![
                    prop(RDMA2_PROPID_RBSIZ, &8192u32.to_be_bytes()),
                    prop(RDMA2_PROPID_BRS, &[]),
                ],
            }),
        ),
        client(
            prefix(0x0a00_0002, 32, RDMA2_MSG, 0),
            // NFSv3 WRITE (procedure 7), its data moved by the Read chunks (not in the frame).
            Body::Msg(chunky, rpc_call(0x0a00_0002, 7, &[0, 0, 0, 4, 1, 2, 3, 4])),
        ),
        client(
            prefix(0x0a00_0003, 32, RDMA2_MSG, 0),
            Body::Msg(none.clone(), rpc_call(0x0a00_0003, 0, &[])),
        ),
        server(
            prefix(0x0a00_0003, 16, RDMA2_MSG, rsp),
            Body::Msg(none, rpc_reply(0x0a00_0003, &[])),
        ),
        client(prefix(0x0a00_0004, 32, RDMA2_NOMSG, 0), Body::Nomsg(long)),
        server(
            prefix(0x0a00_0004, 16, RDMA2_ERROR, rsp),
            Body::Error(Rpcrdma2Error::Rdma2ErrVers(Rpcrdma2ErrVers {
                rdma_vers_low: 2,
                rdma_vers_high: 2,
            })),
        ),
        server(
            prefix(0x0a00_0002, 16, RDMA2_ERROR, rsp),
            Body::Error(Rpcrdma2Error::Rdma2ErrWriteResource(Rpcrdma2ErrWrite {
                rdma_chunk_index: 1,
                rdma_length_needed: 16384,
            })),
        ),
        server(
            prefix(0x0a00_0005, 16, RDMA2_ERROR, rsp),
            Body::Error(Rpcrdma2Error::Rdma2ErrReadChunks(1)),
        ),
        server(
            prefix(0x0a00_0006, 16, RDMA2_ERROR, rsp),
            Body::Error(Rpcrdma2Error::Default {
                discriminant: UNKNOWN_ERROR,
            }),
        ),
        client(
            prefix(0x0a00_0007, 32, UNKNOWN_HTYPE, 0),
            Body::Other(Bytes::from_static(&[0xde, 0xad, 0xbe, 0xef])),
        ),
    ]
}

// The error codes the scenario uses, named so a change of the spec shows here.
const _: () = assert!(RDMA2_ERR_VERS == 1 && RDMA2_ERR_WRITE_RESOURCE == 7);
const _: () = assert!(RDMA2_ERR_READ_CHUNKS == 4 && RDMA2_ERROR == 4 && RDMA2_NOMSG == 1);

/// Sends `messages` as RDMA Sends, each side's in turn, every one received before the next
/// is sent (so the capture has them in this order); returns the client's capture.
pub async fn send(messages: &[Sent]) -> Vec<u8> {
    let payloads: Vec<(bool, Bytes)> = messages
        .iter()
        .map(|m| (m.from_client, m.encode()))
        .collect();
    send_payloads(&payloads).await
}

/// [`send`] for payloads of any content: (sent by the client, the Send's bytes).
pub async fn send_payloads(messages: &[(bool, Bytes)]) -> Vec<u8> {
    const BUF: usize = 4096;
    let tap = Arc::new(PcapTap::new());
    let client = crate::v1::provider(Some(tap.clone()));
    let server = crate::v1::provider(None);
    let listener = server
        .listen("127.0.0.1:0".parse().unwrap())
        .await
        .expect("listen");
    let addr = listener.local_addr().expect("listener address");
    let (c, s) = tokio::join!(
        client.connect(addr, ConnectParams::new()),
        listener.accept(ConnectParams::new())
    );
    let (c, s) = (c.expect("connect"), s.expect("accept"));
    let n = messages.len();
    let crecv = c.register(vec![0; n * BUF], Access::LOCAL_WRITE).unwrap();
    let srecv = s.register(vec![0; n * BUF], Access::LOCAL_WRITE).unwrap();
    for i in 0..n {
        let range = i * BUF..(i + 1) * BUF;
        c.post_recv(RecvWr::new(
            i as u64,
            Sge::new(&crecv, range.clone()).unwrap(),
        ))
        .unwrap();
        s.post_recv(RecvWr::new(i as u64, Sge::new(&srecv, range).unwrap()))
            .unwrap();
    }
    for (i, (from_client, bytes)) in messages.iter().enumerate() {
        assert!(bytes.len() <= BUF, "a test message fits a receive buffer");
        let (from, to) = if *from_client { (&c, &s) } else { (&s, &c) };
        let mr = from.register(bytes.to_vec(), Access::LOCAL_WRITE).unwrap();
        from.post_send(SendWr::send(
            i as u64,
            vec![Sge::new(&mr, 0..bytes.len()).unwrap()],
        ))
        .unwrap();
        let sent = from.poll_completion().await;
        assert!(sent.is_success(), "{sent:?}");
        let got = to.poll_completion().await;
        assert!(got.is_success(), "{got:?}");
    }
    c.disconnect().await.expect("disconnect");
    drop(s);
    tap.pcap()
}

/// The version 2 traffic of the tests.
pub async fn capture() -> Capture {
    let sent = scenario();
    let pcap = send(&sent).await;
    Capture { pcap, sent }
}

//! The generated dissector is also a heuristic on InfiniBand payloads: RoCEv2 frames (UDP
//! port 4791) written by hand, Sends of a version 1 and a version 2 header, are dissected;
//! an RDMA Write whose payload looks like a header is not (RPC-over-RDMA travels in Sends).

use std::net::SocketAddrV4;

use bytes::{BufMut, BytesMut};
use rpcrdma::rdma::soft::pcap::PcapWriter;
use wireshark_tests::tshark::{self, Tshark};
use wireshark_tests::{save, shipped_dissector, v2};

/// RC SEND_ONLY and RDMA_WRITE_ONLY (InfiniBand Architecture Specification, table 38).
const SEND_ONLY: u8 = 0x04;
const RDMA_WRITE_ONLY: u8 = 0x0a;

/// A RoCEv2 packet: the Base Transport Header, an RDMA Extended Transport Header for a
/// Write, the payload (a multiple of 4 bytes, no pad), and an ICRC.
fn roce(opcode: u8, psn: u32, payload: &[u8]) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.put_u8(opcode);
    b.put_u8(0); // SE, M, pad count 0, transport version 0
    b.put_u16(0xffff); // P_Key
    b.put_u8(0);
    b.put_slice(&0x11u32.to_be_bytes()[1..]); // destination QP
    b.put_u8(0x80); // AckReq
    b.put_slice(&psn.to_be_bytes()[1..]);
    if opcode == RDMA_WRITE_ONLY {
        b.put_u64(0x1000); // virtual address
        b.put_u32(0x1234); // R_Key
        b.put_u32(payload.len() as u32); // DMA length
    }
    assert_eq!(payload.len() % 4, 0);
    b.put_slice(payload);
    b.put_u32(0); // ICRC (not checked by Wireshark)
    b.to_vec()
}

#[test]
fn sends_in_roce_frames_are_dissected() {
    if !tshark::present() {
        return;
    }
    let v2_header = v2::scenario()
        .into_iter()
        .find(|s| matches!(s.body, v2::Body::Connprop(_)))
        .unwrap()
        .encode();
    let mut v1_header = BytesMut::new();
    for w in [0x401u32, 1, 8, 1, 0, 0, 0] {
        v1_header.put_u32(w); // RDMA_NOMSG, no chunks
    }
    let a: SocketAddrV4 = "192.0.2.1:49152".parse().unwrap();
    let b: SocketAddrV4 = "192.0.2.2:4791".parse().unwrap();
    let mut w = PcapWriter::new();
    w.udp(a, b, &roce(SEND_ONLY, 1, &v2_header));
    w.udp(a, b, &roce(SEND_ONLY, 2, &v1_header));
    w.udp(a, b, &roce(RDMA_WRITE_ONLY, 3, &v2_header));
    let pcap = save("roce.pcap", &w.into_bytes());
    let ours = Tshark::new(&pcap)
        .lua(shipped_dissector())
        .disable("rpcordma");
    let frames = ours.fields(
        "rpcrdma.xid",
        &["rpcrdma.xid", "rpcrdma.vers", "infiniband"],
    );
    let got: Vec<(u32, u64)> = frames
        .iter()
        .map(|f| (f.number, f.one("rpcrdma.vers")))
        .collect();
    assert_eq!(got, [(1, 2), (2, 1)], "the two Sends, not the Write");
    let ex = ours.experts();
    assert!(ex.errors.is_empty(), "{}", ex.report);
}

//! The generated types' `Default`: a header is written with only the fields that matter,
//! the rest from `..Default::default()`, and default values encode to what a zeroed C
//! structure from rpcgen would send.

use rpcrdma::xdr::{from_bytes, to_bytes};
use rpcrdma_specs::{rpc_msg as rm, v1, v2004};

#[test]
fn v1_header_from_default_is_an_empty_rdma_msg() {
    let header = v1::Rpcrdma1Msg {
        rdma_xid: 7,
        rdma_vers: 1,
        rdma_credit: 32,
        ..Default::default()
    };
    assert_eq!(
        header.rdma_body,
        v1::Rpcrdma1Body::RdmaMsg(v1::Rpcrdma1Chunks {
            rdma_reads: Vec::new(),
            rdma_writes: Vec::new(),
            rdma_reply: None,
        })
    );
    let wire = to_bytes(&header).unwrap();
    // xid, vers, credit, RDMA_MSG, then three empty chunk lists.
    let words: [u32; 7] = [7, 1, 32, 0, 0, 0, 0];
    let expected: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
    assert_eq!(&wire[..], &expected[..]);
    assert_eq!(from_bytes::<v1::Rpcrdma1Msg>(wire).unwrap(), header);
}

#[test]
fn list_item_alias_names_one_element() {
    let read: v1::Rpcrdma1ReadListItem = v1::Rpcrdma1ReadListItem {
        rdma_entry: v1::Rpcrdma1ReadSegment {
            rdma_position: 0,
            rdma_target: v1::Rpcrdma1Segment {
                rdma_handle: 1,
                rdma_length: 4096,
                rdma_offset: 0x1000,
            },
        },
    };
    let chunks = v1::Rpcrdma1Chunks {
        rdma_reads: vec![read],
        ..Default::default()
    };
    assert_eq!(
        chunks.rdma_reads[0].rdma_entry.rdma_target.rdma_length,
        4096
    );
    assert!(chunks.rdma_writes.is_empty() && chunks.rdma_reply.is_none());
}

#[test]
fn enum_default_is_its_zero_member() {
    assert_eq!(v1::Rpcrdma1Proc::default(), v1::Rpcrdma1Proc::RdmaMsg);
    assert_eq!(rm::AuthFlavor::default().value(), 0);
}

#[test]
fn every_default_encodes_and_decodes_back() {
    let msg = rm::RpcMsg::default();
    assert_eq!(
        from_bytes::<rm::RpcMsg>(to_bytes(&msg).unwrap()).unwrap(),
        msg
    );
    let v2004_msg = v2004::RdmaMsg::default();
    let back = from_bytes::<v2004::RdmaMsg>(to_bytes(&v2004_msg).unwrap()).unwrap();
    assert_eq!(back, v2004_msg);
}

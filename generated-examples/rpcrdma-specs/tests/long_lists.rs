//! A read list of 1,000,000 entries round-trips: linked lists encode and decode
//! iteratively, never by recursion.

use rpcrdma::xdr::{from_bytes, to_bytes};
use rpcrdma_specs::v1;

#[test]
fn v1_read_list_of_a_million_entries_round_trips() {
    const N: u32 = 1_000_000;
    let reads = (0..N)
        .map(|i| v1::Rpcrdma1ReadList {
            rdma_entry: v1::Rpcrdma1ReadSegment {
                rdma_position: i,
                rdma_target: v1::Rpcrdma1Segment {
                    rdma_handle: i ^ 0x5555_5555,
                    rdma_length: 4096,
                    rdma_offset: u64::from(i) << 12,
                },
            },
        })
        .collect();
    let msg = v1::Rpcrdma1Msg {
        rdma_xid: 7,
        rdma_vers: 1,
        rdma_credit: 1,
        rdma_body: v1::Rpcrdma1Body::RdmaNomsg(v1::Rpcrdma1Chunks {
            rdma_reads: reads,
            rdma_writes: vec![],
            rdma_reply: None,
        }),
    };
    let wire = to_bytes(&msg).unwrap();
    // Header (4 words), per entry: present flag + position + segment (4 + 4 + 16), end of
    // list, empty write list, no reply chunk.
    assert_eq!(wire.len(), 16 + 24 * N as usize + 4 + 4 + 4);
    let back: v1::Rpcrdma1Msg = from_bytes(wire).unwrap();
    assert_eq!(back, msg);
}

//! Large opaque data is never copied: neither on decode (the decoded `Bytes` is a slice of
//! the receive buffer) nor on encode (it goes out as its own gather part).

use rpcrdma::xdr::{from_bytes, Bytes, Encode, Encoder};
use rpcrdma_specs::v2;

const MIB: usize = 1 << 20;

fn connprop(data: Bytes) -> v2::Rpcrdma2Connprop {
    v2::Rpcrdma2Connprop {
        rdma_props: vec![v2::Rpcrdma2Propval {
            rdma_which: 1,
            rdma_data: data,
        }],
    }
}

#[test]
fn decoding_a_1_mib_opaque_copies_none_of_it() {
    // count, rdma_which, length, then 1 MiB of data.
    let mut wire = Vec::with_capacity(12 + MIB);
    for w in [1u32, 1, MIB as u32] {
        wire.extend_from_slice(&w.to_be_bytes());
    }
    wire.extend((0..MIB).map(|i| (i % 251) as u8));
    let input = Bytes::from(wire);
    let range = input.as_ptr() as usize..input.as_ptr() as usize + input.len();

    let decoded: v2::Rpcrdma2Connprop = from_bytes(input.clone()).unwrap();
    let data = &decoded.rdma_props[0].rdma_data;
    assert_eq!(data.len(), MIB);
    assert_eq!(
        data.as_ptr() as usize,
        range.start + 12,
        "the slice starts after the header"
    );
    assert!(range.contains(&(data.as_ptr() as usize + data.len() - 1)));
    assert_eq!(&data[..], &input[12..]);
}

#[test]
fn encoding_a_1_mib_opaque_gathers_it_by_reference() {
    let payload = Bytes::from(vec![0x5a; MIB]);
    let mut enc = Encoder::new();
    connprop(payload.clone()).encode(&mut enc).unwrap();
    assert_eq!(enc.copied_opaque_bytes(), 0);
    let encoded = enc.finish();
    assert_eq!(encoded.len(), 12 + MIB);
    assert!(
        encoded
            .parts()
            .iter()
            .any(|p| p.as_ptr() == payload.as_ptr() && p.len() == MIB),
        "the payload is one part of the gather list, not a copy"
    );
}

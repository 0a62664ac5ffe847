//! `specs/nfs4.ddp` marks exactly the items RFC 8267 section 5.1 makes DDP-eligible, and the
//! generated procedures say how many Write chunks a reply can use.

use rpcrdma::xdr::Procedure;
use rpcrdma_nfs4::nfs4::{nfs4_callback::nfs_cb, nfs4_program::nfs_v4};
use rpcrdma_nfs4::{BINDING, RFC8267_DDP_ELIGIBLE};

/// The binding file's marks, in order: `Type.member` a line, `#` comments.
fn marks(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (t, m) = l.split_once('.').expect("Type.member");
            (t.to_string(), m.to_string())
        })
        .collect()
}

#[test]
fn the_binding_file_lists_exactly_rfc_8267_section_5_1() {
    let expected: Vec<(String, String)> = RFC8267_DDP_ELIGIBLE
        .iter()
        .map(|(t, m)| (t.to_string(), m.to_string()))
        .collect();
    assert_eq!(marks(BINDING), expected);
}

#[test]
fn compound_replies_may_carry_a_ddp_item_and_callbacks_none() {
    // A COMPOUND reply can hold READ or READLINK results; one element of the result array is
    // counted (the requester provides one Write chunk per READ it sends).
    assert_eq!(<nfs_v4::Nfsproc4Compound as Procedure>::RESULT_DDP_ITEMS, 1);
    // Nothing in CB_COMPOUND is DDP-eligible (RFC 8267 section 5.1 lists COMPOUND's items only).
    assert_eq!(<nfs_cb::CbCompound as Procedure>::RESULT_DDP_ITEMS, 0);
}

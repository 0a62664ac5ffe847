//! The one rule that ties a transport header to the RPC message it carries: both name the same
//! transaction.
//!
//! Seed 004 section 5.1.1: "This XID MUST be the same as the XID in the RPC header. The
//! receiver MAY perform its processing based solely on the XID in the RPC-over-RDMA header,
//! and thereby ignore the XID in the RPC header, if it so chooses."
//!
//! The MAY lets a receiver find a message's context from the transport XID alone; it does not
//! make a message whose two XIDs disagree well-formed. Such a message breaks a MUST of its
//! header, so it is one of the "other decoding errors in the header" of seed 004 section 5.5,
//! which a responder answers with ERR_CHUNK (version 2: RDMA2_ERR_BAD_XDR, the same value,
//! which seed 003 section 5.3.3 gives for a header that "cannot be parsed", and after which
//! "the responder MUST NOT process the request in any way except to send an error message").
//! A requester cannot send RDMA_ERROR (seed 003 section 5.3.3); for a reply it "cannot parse"
//! it "SHOULD drop the RPC request and return an error to the application" (seed 004 section
//! 5.5). Serving the call instead would answer with a reply that carries both XIDs, breaking
//! the same MUST in turn.

/// An RPC message that does not begin with its transport header's XID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XidMismatch {
    /// The transport header's XID.
    pub transport: u32,
    /// The RPC message's XID, `None` when the message is too short to hold one.
    pub rpc: Option<u32>,
}

impl std::fmt::Display for XidMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.rpc {
            Some(rpc) => write!(
                f,
                "transport XID {:#x} but RPC XID {rpc:#x} (seed 004 section 5.1.1)",
                self.transport
            ),
            None => write!(
                f,
                "transport XID {:#x} but an RPC message too short for an XID",
                self.transport
            ),
        }
    }
}

/// Checks that `rpc`, a whole RPC call or reply message, starts with the XID of the transport
/// header `xid` that carries it (see the module documentation).
pub fn check_rpc_xid(xid: u32, rpc: &[u8]) -> Result<(), XidMismatch> {
    let rpc_xid = rpc.first_chunk::<4>().map(|w| u32::from_be_bytes(*w));
    if rpc_xid == Some(xid) {
        Ok(())
    } else {
        Err(XidMismatch {
            transport: xid,
            rpc: rpc_xid,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_same_xid_and_rejects_another_or_none() {
        let rpc = [0xca, 0xfe, 0, 1, 0, 0, 0, 0];
        assert_eq!(check_rpc_xid(0xcafe_0001, &rpc), Ok(()));
        assert_eq!(
            check_rpc_xid(0xcafe_0002, &rpc),
            Err(XidMismatch {
                transport: 0xcafe_0002,
                rpc: Some(0xcafe_0001)
            })
        );
        for cut in 0..4 {
            assert_eq!(
                check_rpc_xid(0xcafe_0001, &rpc[..cut]),
                Err(XidMismatch {
                    transport: 0xcafe_0001,
                    rpc: None
                })
            );
        }
    }
}

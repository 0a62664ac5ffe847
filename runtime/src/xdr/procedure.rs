//! ONC RPC procedure descriptions (RFC 5531 section 12), implemented by code that `xdrgen`
//! generates from `program` definitions.

use super::{Decode, Encode};

/// One procedure of one version of an ONC RPC program, with its argument and result types.
///
/// `xdrgen` emits a unit struct per procedure implementing this trait, inside a module per
/// program and version: `nfs_program::nfs_version::NfsprocGetattr`.
pub trait Procedure {
    /// The program number.
    const PROGRAM: u32;
    /// The version number.
    const VERSION: u32;
    /// The procedure number.
    const PROCEDURE: u32;
    /// The procedure's name as written in the `.x` file.
    const NAME: &'static str;
    /// The arguments: `()` for `void`, a tuple for several.
    type Args: Encode + Decode;
    /// The result: `()` for `void`.
    type Result: Encode + Decode;
    /// How many DDP-eligible items the result can carry at most: over RPC-over-RDMA the
    /// requester provides that many Write chunks (seed 004 section 4.4.5). Zero when the
    /// result has none.
    const RESULT_DDP_ITEMS: usize = 0;
}

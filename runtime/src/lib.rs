//! `rpcrdma`: the runtime half of the RPC-over-RDMA toolchain.
//!
//! * [`xdr`] is the zero-copy XDR codec core (RFC 4506) that generated and hand-written types
//!   encode and decode through. It depends on `bytes` only.
//! * [`rdma`] is the RDMA provider contract with its providers (feature `rdma`, enabled by
//!   `soft` and `verbs`).
#![warn(missing_docs)]

#[cfg(feature = "rdma")]
pub mod rdma;
pub mod xdr;

/// `#[derive(Xdr)]` (Encode + Decode) and `#[derive(DdpEligible)]`; see the `xdr-derive` crate.
#[cfg(feature = "derive")]
pub use xdr_derive::{DdpEligible, Xdr};

//! `rpcrdma`: the runtime half of the RPC-over-RDMA toolchain.
//!
//! * [`xdr`] is the zero-copy XDR codec core (RFC 4506) that generated and hand-written types
//!   encode and decode through. It depends on `bytes` only.
//! * [`rdma`] is the RDMA provider contract with its providers (feature `rdma`, enabled by
//!   `soft` and `verbs`).
//! * [`rpc`] is ONC RPC (RFC 5531): a client and a server that run over any transport, and
//!   the TCP transport (feature `rpc`, enabled by `soft`).
#![warn(missing_docs)]

// Generated code names the runtime `::rpcrdma`; inside the runtime that is this crate.
extern crate self as rpcrdma;

#[cfg(feature = "rpc")]
mod admission;
#[cfg(feature = "rpc")]
mod id_map;
#[cfg(feature = "rdma")]
pub mod rdma;
#[cfg(feature = "rpc")]
pub mod rpc;
#[cfg(feature = "rpc")]
mod socket_send;
#[cfg(feature = "transport")]
pub mod transport;
pub mod xdr;

/// `#[derive(Xdr)]` (Encode + Decode) and `#[derive(DdpEligible)]`; see the `xdr-derive` crate.
#[cfg(feature = "derive")]
pub use rpcrdma_derive::{DdpEligible, Xdr};

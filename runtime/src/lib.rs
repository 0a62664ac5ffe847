//! `rpcrdma`: the runtime half of the RPC-over-RDMA toolchain.
//!
//! * [`xdr`] is the zero-copy XDR codec core (RFC 4506) that generated and hand-written types
//!   encode and decode through. It depends on `bytes` only.
#![warn(missing_docs)]

pub mod xdr;

//! RPC-over-RDMA version 1 (RFC 8166, seed 004): ONC RPC over any [`rdma::Provider`].
//!
//! * [`core`] is the protocol engine of one connection as a pure state machine: received
//!   messages, completions and time in; Sends, RDMA Reads and Writes, and invalidations out.
//! * [`header`] parses and builds transport headers with the types generated from
//!   `specs/rpcrdma-v1.x`.
//! * [`private_data`] is the RFC 8797 connection private data.
//!
//! [`rdma::Provider`]: crate::rdma::Provider

#[cfg(feature = "conformance")]
pub mod conformance;
pub mod core;
mod driver;
pub mod header;
pub mod pool;
pub mod private_data;

pub use driver::{connect, serve, RdmaConfig, RdmaListener, RdmaTransport};

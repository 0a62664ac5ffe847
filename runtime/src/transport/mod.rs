//! RPC-over-RDMA, version 1 (RFC 8166, seed 004) and version 2 (seed 003): ONC RPC over any
//! [`rdma::Provider`].
//!
//! * [`core`] is the protocol engine of one connection as a pure state machine: received
//!   messages, completions and time in; Sends, RDMA Reads and Writes, and invalidations out.
//! * [`header`] parses and builds transport headers of both versions with the types generated
//!   from `specs/rpcrdma-v1.x` and from `specs/common.x` + `specs/baseops.x`, and version 2's
//!   transport properties.
//! * [`private_data`] is the RFC 8797 connection private data.
//!
//! [`rdma::Provider`]: crate::rdma::Provider

pub mod budget;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod core;
mod driver;
pub mod extension;
pub mod header;
pub mod mode2004;
pub mod pool;
pub mod private_data;

pub use budget::{MemoryBudget, MemoryLimits};
pub use driver::{connect, serve, PeerVersions, RdmaConfig, RdmaListener, RdmaTransport};
pub use extension::{Extension, ExtensionAnswer, ExtensionMessage, Extensions};

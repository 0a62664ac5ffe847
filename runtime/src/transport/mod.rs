//! RPC-over-RDMA, version 1 (RFC 8166, seed 004) and version 2 (seed 003): ONC RPC over any
//! [`rdma::Provider`].
//!
//! * [`core`] is the protocol engine of one connection as a pure state machine: received
//!   messages, completions and time in; Sends, RDMA Reads and Writes, and invalidations out.
//! * [`header`] parses and builds transport headers of both versions with the types generated
//!   from `specs/rpcrdma-v1.x` and from `specs/common.x` + `specs/baseops.x`, and version 2's
//!   transport properties.
//! * [`private_data`] is the RFC 8797 connection private data.
//! * [`budget`] bounds what a peer can make a connection and a server commit: registered
//!   memory is lent within a per-connection and a per-server [`MemoryBudget`]; a call's Read
//!   chunks are pulled a piece at a time within it and within a window that grows as the peer
//!   answers ([`core`]'s `pulling`); [`pool`] says who owns which buffer and for how long.
//!
//! # Where results come back
//!
//! A client decides before a call goes out where its DDP-eligible results land: a Write chunk
//! it provides (which the server must then use, seed 002 section 3.7) or inline in the reply.
//! With a size or buffer from the caller ([`CallOptions`](crate::rpc::CallOptions)) that is
//! decided exactly, as Linux's client does for an NFS READ. Without, each connection
//! remembers how large the procedure's results were lately: small ones come back inline
//! (a 20-byte result costs what a result without DDP-eligible items does), large ones into a
//! Write chunk of about their size, the first into [`RdmaConfig::default_write_chunk`]. A
//! guess too small is put right by sending the call again, same XID, with more room, within
//! the result type's bound and [`RdmaConfig::max_reply_size`]: version 2 says how much it
//! needs (seed 003 section 5.3.3) and gets that; version 1 says only ERR_CHUNK, and gets
//! sixteen times the last offer each time (registering, and on a device pinning, the whole
//! bound for one reply is what the connection's pool would then keep). The server keeps the
//! result whose reply did not fit for the next attempt, so a procedure is never run twice.
//! A reply past the ceiling fails with
//! [`TransportError::ReplyTooLarge`](crate::rpc::TransportError::ReplyTooLarge), which names
//! the setting.
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

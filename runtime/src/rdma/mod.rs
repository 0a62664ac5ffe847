//! RDMA providers behind one contract.
//!
//! The contract ([`Provider`], [`Listener`], [`ConnectRequest`], [`Connection`], memory
//! registration with [`Access`] rights, [`SendWr`]/[`RecvWr`] work requests and typed
//! [`Completion`]s) follows verbs semantics, so upper layers run unchanged on
//!
//! * `soft`: the built-in software iWARP provider (RDMAP RFC 5040 over DDP RFC 5041 over MPA
//!   RFC 5044 over TCP, feature `soft`), and
//! * `verbs`: real RDMA hardware or Soft-RoCE through libibverbs and rdma_cm (feature `verbs`).
//!
//! Every provider passes the same `conformance` suite (feature `conformance`).
//!
//! # What every provider guarantees
//! * Each posted work request yields exactly one [`Completion`]; send-queue completions arrive
//!   in posting order, receive completions in the order the Sends arrived.
//! * A [`MemoryRegion`] named by a work request stays alive until its completion is delivered
//!   (requests hold clones); a remote access resolves the steering tag to a live region or is
//!   refused.
//! * RDMA Reads beyond the negotiated ORD are queued, not refused.
//! * A remote access outside a registration, without the needed [`Access`] right, or through an
//!   unknown or invalidated tag completes at the requester with
//!   [`WcStatus::RemoteAccessError`] and places nothing.
//! * A steering tag invalidated with [`SendWr::local_invalidate`] or by the peer's Send with
//!   Invalidate ([`SendWr::with_invalidate`]) refuses every later remote access.
//! * After [`Connection::disconnect`], or when the peer goes away, outstanding requests complete
//!   with [`WcStatus::Flushed`]; posting afterwards either fails with [`Error::Closed`] or
//!   yields a flushed completion.

mod access;
mod completion;
mod error;
mod mr;
mod provider;
mod region_memory;
pub mod shared_receive;
mod wr;

#[cfg(feature = "conformance")]
pub mod conformance;
#[cfg(feature = "conformance")]
pub mod faults;
#[cfg(feature = "soft")]
pub mod soft;
#[cfg(feature = "verbs")]
pub mod verbs;

pub use access::Access;
pub use completion::{Completion, WcOpcode, WcStatus};
pub use error::{Error, Result};
pub use mr::{MemoryRegion, RegionKeys, WeakRegion};
pub use provider::{
    CompletionHook, ConnectParams, ConnectRequest, Connection, Listener, Provider, MAX_PRIVATE_DATA,
};
pub use region_memory::{RegionMemory, MAPPED_FROM};
pub use shared_receive::{SharedReceiveParams, SharedReceiveQueue};
pub use wr::{RecvWr, RemoteAddr, SendOp, SendWr, SgList, Sge, WrId};

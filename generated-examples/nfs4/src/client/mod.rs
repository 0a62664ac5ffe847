//! An NFSv4.1 client session ([RFC 5661]) over the generated `NfsV4Client`, on any transport
//! of the runtime: RPC-over-RDMA or ONC RPC over TCP, with the backchannel on the same
//! connection (RFC 5661 section 2.10.3.1) when the transport serves it.
//!
//! - [`Session::establish`]: EXCHANGE_ID (section 18.35), CREATE_SESSION (section 18.36) and
//!   RECLAIM_COMPLETE (section 18.51), with what the server granted kept in [`Granted`].
//! - [`Session::compound`]: any operations after a SEQUENCE (section 18.46) on a slot of the
//!   fore channel (section 2.10.6.1: one request per slot, its sequence ID one more than the
//!   slot's last), the reply checked before use, `NFS4ERR_DELAY` retried ([`DelayPolicy`]),
//!   `sr_status_flags` kept ([`Session::status_flags`]).
//! - Typed helpers, one COMPOUND each: [`Session::root_fh`], [`lookup`](Session::lookup),
//!   [`getattr`](Session::getattr), [`open`](Session::open), [`read`](Session::read),
//!   [`write`](Session::write), [`commit`](Session::commit), [`close`](Session::close),
//!   [`delegreturn`](Session::delegreturn); [`Session::destroy`] (sections 18.37 and 18.50).
//! - The backchannel (section 20; section 2.10.3.1): [`CallbackService`] answers CB_NULL and
//!   CB_COMPOUND (CB_SEQUENCE, then CB_RECALL handed to the application as a [`Recall`]);
//!   [`CallbackService::server`] is the `rpc::Server` for the transport's
//!   `backchannel(server, credits)` (RPC-over-RDMA) or `TcpConfig::backchannel(server)`.
//!
//! Over RPC-over-RDMA on the software provider:
//!
//! ```no_run
//! # async fn example(addr: std::net::SocketAddr) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use rpcrdma::rdma::soft::SoftProvider;
//! use rpcrdma::rpc::Client;
//! use rpcrdma::transport::{RdmaConfig, RdmaTransport};
//! use rpcrdma_nfs4::client::{CallbackService, OpenOptions, Session, SessionConfig};
//! use rpcrdma_nfs4::nfs4::nfs4_program::nfs_v4::NfsV4Client;
//!
//! let callbacks = CallbackService::new();
//! let config = SessionConfig::new("host-a", *b"boot0001").backchannel(callbacks.clone());
//! let rdma = RdmaConfig::default().backchannel(callbacks.server(), config.back_channel.max_requests);
//! let transport = RdmaTransport::connect(Arc::new(SoftProvider::default()), addr, rdma).await?;
//! let session = Session::establish(NfsV4Client::new(Client::new(transport)), config).await?;
//! let root = session.root_fh().await?;
//! let file = session.open(&root, "notes.txt", OpenOptions::create(0o644)).await?;
//! session.close(&file.fh, &file.stateid).await?;
//! session.destroy().await?;
//! # Ok(()) }
//! ```
//!
//! [RFC 5661]: https://www.rfc-editor.org/rfc/rfc5661

mod attrs;
mod bounds;
mod callback;
mod config;
mod error;
mod establish;
mod ops;
mod reply;
mod session;
mod slots;

pub use attrs::{basic_request, bitmap, decode_basic, is_set, BasicAttrs};
pub use callback::{CallbackService, Recall, RECALL_QUEUE};
pub use config::{
    ChannelConfig, DelayPolicy, RecallPolicy, SessionConfig, CLIENT_EXCHANGE_FLAGS,
    COMPOUND_HEADROOM, DEFAULT_CB_PROGRAM, DEFAULT_IO_SIZE,
};
pub use error::ClientError;
pub use establish::establish;
pub use ops::{Delegation, DelegationKind, DelegationWant, Looked, OpenOptions, Opened, Written};
pub use reply::{check_shape, resop_status};
pub use session::{Granted, SequenceStatus, Session};

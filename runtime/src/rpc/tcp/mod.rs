//! ONC RPC over TCP with record marking (RFC 5531 section 11).
//!
//! The same [`Client`](crate::rpc::Client) and [`Server`](crate::rpc::Server) run over TCP
//! or RPC-over-RDMA: a program is written once, and the transport is picked when connecting.
//!
//! * Client: [`connect`] (or [`TcpTransport::connect`] with a [`TcpConfig`], then
//!   [`Client::new`](crate::rpc::Client::new)). Many calls in flight on one connection,
//!   replies matched by XID, a timeout per call, one retransmission on a new connection when
//!   the connection is lost.
//! * Server: [`TcpServer::bind`] / [`TcpServer::spawn`] (in the background, with a graceful
//!   shutdown), or [`serve`] as a future.
//! * Both directions on one connection (RFC 5661 section 2.10.3.1, an NFSv4.1 session's
//!   backchannel): a server's handler calls its client back on the caller's connection with
//!   [`CallContext::backchannel`](crate::rpc::CallContext::backchannel); a client answers
//!   such calls with the server of [`TcpConfig::backchannel`]. Each end tells the peer's
//!   CALLs from its REPLYs by the message's `msg_type` (RFC 5531 section 9).
//! * Bounds ([`TcpConfig`]): the size of a record, checked on each fragment header before
//!   its data is buffered; calls in flight per connection, both ends; on a server, the
//!   connections served at once and the time a new connection has to send its first record.
//!
//! The record marking itself is the sans-IO [`record`](crate::rpc::record) module.
//!
//! ```
//! use rpcrdma::rpc::tcp::{self, TcpConfig, TcpServer};
//! use rpcrdma::rpc::{
//!     decode_args, handler, CallContext, DispatchError, HandlerFuture, Server, Service,
//! };
//! use rpcrdma::xdr::{Decoder, Procedure};
//!
//! /// Procedure 1 of program 0x20000001 version 1: adds two numbers (xdrgen generates such
//! /// a struct for every procedure of a `.x` file).
//! struct Add;
//! impl Procedure for Add {
//!     const PROGRAM: u32 = 0x2000_0001;
//!     const VERSION: u32 = 1;
//!     const PROCEDURE: u32 = 1;
//!     const NAME: &'static str = "ADD";
//!     type Args = (u32, u32);
//!     type Result = u32;
//! }
//!
//! struct Calculator;
//! impl Service for Calculator {
//!     fn program(&self) -> u32 {
//!         Add::PROGRAM
//!     }
//!     fn version(&self) -> u32 {
//!         Add::VERSION
//!     }
//!     fn call(
//!         &self,
//!         _: CallContext,
//!         procedure: u32,
//!         args: &mut Decoder<'_>,
//!     ) -> Result<HandlerFuture, DispatchError> {
//!         match procedure {
//!             Add::PROCEDURE => {
//!                 let (a, b): (u32, u32) = decode_args(args)?;
//!                 Ok(handler(async move { Ok(a.wrapping_add(b)) }))
//!             }
//!             _ => Err(DispatchError::ProcUnavail),
//!         }
//!     }
//! }
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut server = Server::builder();
//! server.add(Calculator);
//! let listening = TcpServer::bind("127.0.0.1:0", server.build(), TcpConfig::new()).await?;
//!
//! let client = tcp::connect(listening.local_addr()).await?;
//! assert_eq!(client.call::<Add>(&(2, 40)).await?, 42);
//! listening.shutdown().await;
//! # Ok(()) }
//! ```

mod backward;
mod calls;
mod client;
mod config;
mod encoding;
mod replies;
mod server;
mod signal;
mod sink;
mod slots;
mod stream;

pub use client::{connect, connect_with, TcpTransport};
pub use config::{
    TcpConfig, DEFAULT_FIRST_RECORD_TIMEOUT, DEFAULT_MAX_BACKWARD_IN_FLIGHT,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_RECORD, DEFAULT_TIMEOUT,
};
pub use server::{serve, TcpServer};

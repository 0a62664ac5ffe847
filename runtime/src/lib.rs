//! ONC RPC programs written once in XDR, served and called over RPC-over-RDMA (RFC 8166, and
//! version 2 of draft-cel-nfsv4-rpcrdma-version-two) and over TCP, with zero-copy data paths.
//!
//! Three crates make the toolchain: `rpcrdma-xdrgen` compiles a `.x` file into Rust from your
//! `build.rs` (the types, a typed client and a server trait per program version; its command
//! line is `xdrgen`); this crate runs what it generates; `rpcrdma-derive` (feature `derive`)
//! gives hand-written types the same codecs. The [guide](#guide-a-key-value-store-from-x-to-served-and-called)
//! below takes one program from its `.x` file to a server and clients.
//!
//! * [`xdr`]: the XDR codec core (RFC 4506), on `bytes` alone: decoding hands out opaque data
//!   as slices of the received buffer, encoding keeps large items as their own buffers, and
//!   it knows which items may move by RDMA (DDP-eligibility).
//! * [`rpc`]: ONC RPC (RFC 5531): a [`Client`](rpc::Client) and a [`Server`](rpc::Server)
//!   that run unchanged over any transport, every reply status typed, a duplicate request
//!   cache, and the TCP transport ([`rpc::tcp`], record marking).
//! * [`transport`]: RPC-over-RDMA versions 1 and 2 on any provider: chunks, credits,
//!   registered memory, connection setup, errors and recovery.
//! * [`rdma`]: the RDMA provider contract, with the software iWARP provider
//!   ([`rdma::soft`]: MPA/DDP/RDMAP over TCP, runs anywhere) and the verbs provider
//!   (`rdma::verbs`, feature `verbs`: RDMA hardware and Soft-RoCE through libibverbs).
//!
//! # Features
//!
//! | feature | what it adds | needs |
//! |---|---|---|
//! | `soft` (default) | the software iWARP provider, with `transport` and `rpc` | |
//! | `transport` | RPC-over-RDMA ([`transport`]) on any provider, with `rpc` and `rdma` | |
//! | `rpc` | ONC RPC ([`rpc`]) and its TCP transport; what generated clients and server traits use | |
//! | `rdma` | the provider contract ([`rdma`]) alone | |
//! | `conformance` | the provider conformance suite (`rdma::conformance`) and the transport's (`transport::conformance`), to run against a provider of your own | |
//! | `derive` | `#[derive(Xdr, DdpEligible)]` (`rpcrdma::{Xdr, DdpEligible}`) | |
//! | `verbs` | the verbs provider (`rdma::verbs`) | libibverbs, librdmacm and libclang at build time (Debian: `libibverbs-dev librdmacm-dev libclang-dev`) |
//!
//! Without default features only [`xdr`] is built, for codecs alone. The documentation on
//! docs.rs covers every feature but `verbs`, whose bindings cannot be generated there (no
//! libibverbs headers); `cargo doc -p rpcrdma --features verbs --open` builds it locally.
//!
//! # Guide: a key-value store, from `.x` to served and called
//!
//! The program of this guide is a key-value store whose values move by RDMA. The repository's
//! `generated-examples/kv` is the same program grown a little (a large-result procedure, a
//! non-idempotent one) with tests that run one table of calls over TCP and over
//! RPC-over-RDMA versions 1 and 2.
//!
//! ## 1. Write the program in XDR
//!
//! `kv.x`, at the root of your crate:
//!
//! ```text
#![doc = include_str!("../guide/kv.x")]
//! ```
//!
//! A `/* @ddp */` comment directly above an item marks it DDP-eligible, in RFC 8166's terms:
//! over RPC-over-RDMA it may leave the message and move by RDMA, straight between the two
//! programs' buffers, while everything else travels inside the Send. The bounds
//! (`KV_MAXKEY`, `KV_MAXVALUE`) are enforced when encoding and when decoding, so a peer never
//! makes this side allocate more than the `.x` allows.
//!
//! ## 2. Generate Rust from `build.rs`
//!
//! `Cargo.toml`:
//!
//! ```toml
//! [dependencies]
//! rpcrdma = "0.1"
//! bytes = "1"
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//!
//! [build-dependencies]
//! rpcrdma-xdrgen = "0.1"
//! ```
//!
//! `build.rs`:
//!
//! ```no_run
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // Writes $OUT_DIR/kv.rs; reruns when kv.x changes; errors rendered rustc-style.
//!     rpcrdma_xdrgen::compile(&["kv.x"])?;
//!     Ok(())
//! }
//! ```
//!
//! And in `src/main.rs` (or `lib.rs`), the generated code as a module:
//!
//! ```
//! # mod kv { include!(concat!(env!("CARGO_MANIFEST_DIR"), "/guide/kv.rs")); }
//! # /*
//! mod kv {
//!     include!(concat!(env!("OUT_DIR"), "/kv.rs"));
//! }
//! # */
//! # fn main() { assert_eq!(kv::kv_prog::PROGRAM, 0x20000b0c); }
//! ```
//!
//! It holds, for `kv.x`:
//!
//! | XDR | Rust |
//! |---|---|
//! | `typedef string kv_key<KV_MAXKEY>` | `struct KvKey(pub XdrString)` |
//! | `enum kv_status` | `enum KvStatus { KvOk = 0, KvNoent = 2 }` |
//! | `struct kv_put_args` | `struct KvPutArgs { key: KvKey, value: Bytes }` |
//! | `union kv_get_res` | `enum KvGetRes { KvOk(Bytes), Default { discriminant: KvStatus } }` |
//! | `program KV_PROG`, `version KV_V1` | `mod kv_prog::kv_v1`: a struct per procedure (`KvPut`, ...), the typed client `KvV1Client`, the server trait `KvV1Server`, and `register` |
//!
//! The examples below compile the code xdrgen generates from this `kv.x`, kept in the
//! crate's `guide/` folder (a test checks that it is what xdrgen generates today).
//!
//! ## 3. Implement the server trait
//!
//! One `async fn` per procedure, given the call's [`CallContext`](rpc::CallContext) (caller,
//! credentials, transport, registered buffers) and the decoded arguments; it returns the
//! result, or the [`ReplyError`](rpc::ReplyError) to answer with.
//!
//! ```
//! # mod kv { include!(concat!(env!("CARGO_MANIFEST_DIR"), "/guide/kv.rs")); }
#![doc = include_str!("../guide/memory_kv.rs")]
//! # fn main() {}
//! ```
//!
//! ## 4. Serve it over RPC-over-RDMA and TCP at once, and call it over either
//!
//! A [`Server`](rpc::Server) hosts the programs registered on it; the transports only carry
//! its calls, so one server (one store) answers over both. The generated client takes an
//! ONC RPC [`Client`](rpc::Client) over any transport: the program is written once, the
//! transport is chosen when connecting.
//!
//! ```
//! # mod kv { include!(concat!(env!("CARGO_MANIFEST_DIR"), "/guide/kv.rs")); }
//! # mod store { include!(concat!(env!("CARGO_MANIFEST_DIR"), "/guide/memory_kv.rs")); }
//! # /*
//! mod kv {
//!     include!(concat!(env!("OUT_DIR"), "/kv.rs"));
//! }
//! mod store; // step 3
//! # */
//! use std::sync::Arc;
//!
//! use bytes::Bytes;
//! use rpcrdma::rdma::soft::SoftProvider;
//! use rpcrdma::rdma::{Listener, Provider};
//! use rpcrdma::rpc::tcp::{TcpConfig, TcpServer, TcpTransport};
//! use rpcrdma::rpc::{Client, Server};
//! use rpcrdma::transport::{self, RdmaConfig};
//!
//! use kv::kv_prog::kv_v1::{self, KvV1Client};
//! use kv::{KvGetRes, KvKey, KvPutArgs, KvStatus};
//! use store::MemoryKv;
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let mut builder = Server::builder();
//!     kv_v1::register(&mut builder, MemoryKv::default());
//!     let server = builder.build();
//!
//!     // RPC-over-RDMA on the software iWARP provider (on RDMA hardware, the verbs
//!     // provider: `rdma::verbs::VerbsProvider`, feature `verbs`; nothing else changes).
//!     let provider = SoftProvider::default();
//!     let listener = provider.listen("127.0.0.1:0".parse()?).await?;
//!     let rdma_addr = listener.local_addr()?;
//!     let rdma = Arc::new(transport::serve::<SoftProvider>(
//!         listener,
//!         server.clone(),
//!         RdmaConfig::default(),
//!     ));
//!     tokio::spawn({
//!         let rdma = rdma.clone();
//!         async move { rdma.run().await }
//!     });
//!     // ONC RPC over TCP, the same server behind it.
//!     let tcp = TcpServer::bind("127.0.0.1:0", server, TcpConfig::new()).await?;
//!
//!     // The same typed client over either transport.
//!     let over_rdma = KvV1Client::new(
//!         transport::connect(Arc::new(provider), rdma_addr, RdmaConfig::default()).await?,
//!     );
//!     let over_tcp = KvV1Client::new(Client::new(
//!         TcpTransport::connect(tcp.local_addr(), TcpConfig::new()).await?,
//!     ));
//!
//!     let key = KvKey("greeting".into());
//!     let value = Bytes::from(vec![42u8; 256 << 10]);
//!     let put = KvPutArgs { key: key.clone(), value: value.clone() };
//!     assert_eq!(over_rdma.kv_put(put).await?, KvStatus::KvOk);
//!     // Put over RDMA, read back over TCP: one store.
//!     match over_tcp.kv_get(key.clone()).await? {
//!         KvGetRes::KvOk(found) => assert_eq!(found, value),
//!         KvGetRes::Default { discriminant } => panic!("GET answered {discriminant:?}"),
//!     }
//!     assert_eq!(over_tcp.kv_remove(key.clone()).await?, KvStatus::KvOk);
//!     let gone = over_rdma.kv_get(key).await?;
//!     assert_eq!(gone.discriminant(), KvStatus::KvNoent);
//!
//!     // A graceful stop: no new connections or calls; the calls being run are answered.
//!     tokio::join!(rdma.shutdown(), tcp.shutdown());
//!     Ok(())
//! }
//! ```
//!
//! Version 2 of RPC-over-RDMA is one setting on both ends,
//! `RdmaConfig::default().version_2(true)`: a version 2 client falls back to version 1 with
//! a server that speaks only that (the Linux kernel's), with no call lost.
//!
//! ## 5. What moves how
//!
//! Over TCP a call is one record: arguments and results are copied into and out of the
//! socket. Over RPC-over-RDMA each message is a Send into a receive buffer the peer posted,
//! at most the peer's *inline threshold* long (5 KiB between two ends of this crate, room
//! for a page of data and its header; 4 KiB with the Linux kernel; 1 KiB, the least RFC 8166
//! allows, with a peer that does not say):
//!
//! * **Calls.** A DDP-eligible argument that does not fit the peer's receive buffer with the
//!   rest of the call, or of at least
//!   [`RdmaConfig::min_ddp_size`](transport::RdmaConfig::min_ddp_size) bytes (8 KiB), leaves
//!   the Send for a *Read chunk*: the call carries its address and the server pulls it with
//!   RDMA Reads into its registered memory (`calls_read_chunks`). Others stay inline
//!   (`calls_inline`). A call too large for a Send even so goes as a *long call*, the whole
//!   message in a Read chunk at position zero (`calls_long`).
//! * **Replies.** For a DDP-eligible result the client provides a *Write chunk*, memory the
//!   server RDMA Writes the data into before it Sends the rest (`replies_received_write_chunks`),
//!   and, when the reply might not fit the receive buffer, a *Reply chunk* for all of it
//!   (`replies_received_long`). The size of the Write chunk is the caller's
//!   ([`CallOptions::reply_size`](rpc::CallOptions::reply_size), or the length of a
//!   [`CallOptions::reply_buffer`](rpc::CallOptions::reply_buffer)); without one, how the
//!   procedure's last results came back decides: small results come back inline, large ones
//!   in a Write chunk of about their size, and the first call of a procedure offers
//!   [`RdmaConfig::default_write_chunk`](transport::RdmaConfig::default_write_chunk)
//!   (1 MiB). A guess too small costs one more round trip: the call goes again with room,
//!   once, and the server answers it with the result it kept, without running the procedure
//!   again.
//! * **Copies.** Data sent from this side's registered memory, a buffer from
//!   [`Client::buffer`](rpc::Client::buffer) or [`CallContext::buffer`](rpc::CallContext::buffer)
//!   (a file read straight into it), moves without any copy in user space; data in ordinary
//!   memory is copied once into a registered buffer. A result received into a
//!   `reply_buffer`, and an argument a server pulled from a Read chunk, are handed out as
//!   slices of the registered memory they landed in. [`RdmaTransport::stats`](transport::RdmaTransport::stats)
//!   and [`pool_stats`](transport::RdmaTransport::pool_stats) count all of it.
//! * **Budgets.** Credits bound the calls in flight on a connection (32 by default, requested
//!   by a client and granted by a server: [`RdmaConfig::credits`](transport::RdmaConfig::credits)). The
//!   registered memory a peer can make a server commit is bounded per connection (128 MiB)
//!   and per server (1 GiB, [`RdmaConfig::memory`](transport::RdmaConfig::memory)): a call
//!   whose Read chunks would go past it waits for memory to come back, and a handler that
//!   keeps received data once the budget is half spent gets a copy in ordinary memory, so
//!   what it keeps never pins more. A client offers at most
//!   [`RdmaConfig::max_reply_size`](transport::RdmaConfig::max_reply_size) (64 MiB and 64 KiB,
//!   as a TCP record's default bound) for one reply.
//!
//! ```
//! # mod kv { include!(concat!(env!("CARGO_MANIFEST_DIR"), "/guide/kv.rs")); }
//! # mod store { include!(concat!(env!("CARGO_MANIFEST_DIR"), "/guide/memory_kv.rs")); }
//! use std::sync::Arc;
//!
//! use bytes::Bytes;
//! use rpcrdma::rdma::soft::SoftProvider;
//! use rpcrdma::rdma::{Listener, Provider};
//! use rpcrdma::rpc::{CallOptions, Client, Server};
//! use rpcrdma::transport::{self, RdmaConfig, RdmaTransport};
//!
//! use kv::kv_prog::kv_v1::{self, KvV1Client};
//! use kv::{KvGetRes, KvKey, KvPutArgs};
//! # use store::MemoryKv;
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let mut builder = Server::builder();
//! # kv_v1::register(&mut builder, MemoryKv::default());
//! # let listener = SoftProvider::default().listen("127.0.0.1:0".parse()?).await?;
//! # let addr = listener.local_addr()?;
//! # let rdma = Arc::new(transport::serve::<SoftProvider>(listener, builder.build(), RdmaConfig::default()));
//! # tokio::spawn({ let rdma = rdma.clone(); async move { rdma.run().await } });
//! // The transport itself, to read its counters.
//! let rdma_client = Arc::new(
//!     RdmaTransport::connect(Arc::new(SoftProvider::default()), addr, RdmaConfig::default())
//!         .await?,
//! );
//! let client = KvV1Client::new(Client::from_arc(rdma_client.clone()));
//!
//! // 16 bytes: inline, in the Send.
//! let small = KvPutArgs { key: KvKey("small".into()), value: Bytes::from_static(&[1; 16]) };
//! let before = rdma_client.stats();
//! client.kv_put(small).await?;
//! assert_eq!(rdma_client.stats().calls_inline, before.calls_inline + 1);
//!
//! // 256 KiB written straight into registered memory: a Read chunk, no copy.
//! let len = 256 << 10;
//! let mut buffer = client.rpc().buffer(len);
//! buffer.as_mut_slice().fill(7);
//! let large = KvPutArgs { key: KvKey("large".into()), value: buffer.freeze(len) };
//! let (before, pool) = (rdma_client.stats(), rdma_client.pool_stats());
//! client.kv_put(large).await?;
//! assert_eq!(rdma_client.stats().calls_read_chunks, before.calls_read_chunks + 1);
//! assert_eq!(rdma_client.pool_stats().copied_bytes, pool.copied_bytes);
//!
//! // The same 256 KiB from ordinary memory: a Read chunk too, after one copy.
//! let copied = KvPutArgs { key: KvKey("copied".into()), value: Bytes::from(vec![7; len]) };
//! let pool = rdma_client.pool_stats();
//! client.kv_put(copied).await?;
//! assert_eq!(rdma_client.pool_stats().copied_bytes, pool.copied_bytes + len as u64);
//!
//! // Read back into this side's registered memory: a Write chunk the server fills by RDMA
//! // Write, the value a slice of the buffer (per-call options: the procedure's struct).
//! let into = client.rpc().buffer(len);
//! let before = rdma_client.stats();
//! let options = CallOptions::new().reply_buffer(into);
//! let found = client.rpc().call_with::<kv_v1::KvGet>(&KvKey("large".into()), options).await?;
//! assert!(matches!(found, KvGetRes::KvOk(v) if v.len() == len && v.iter().all(|&b| b == 7)));
//! let after = rdma_client.stats();
//! assert_eq!(after.replies_received_write_chunks, before.replies_received_write_chunks + 1);
//!
//! // A caller that knows the result is small gets it inline, with no Write chunk.
//! let options = CallOptions::new().reply_size(16);
//! let found = client.rpc().call_with::<kv_v1::KvGet>(&KvKey("small".into()), options).await?;
//! assert!(matches!(found, KvGetRes::KvOk(v) if v.len() == 16));
//! assert_eq!(rdma_client.stats().replies_received_inline, after.replies_received_inline + 1);
//! # rdma.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! ## 6. Errors
//!
//! Every call returns `Result<_, `[`rpc::Error`]`>`, the same over every transport:
//!
//! * What the server answered other than SUCCESS, typed: a handler's
//!   `Err(ReplyError::ProcUnavail)` (or `GarbageArgs`, `SystemErr`, `AuthError`, ...) is
//!   [`rpc::Error::ProcUnavail`] at the caller; the server itself answers PROG_UNAVAIL,
//!   PROG_MISMATCH, PROC_UNAVAIL and GARBAGE_ARGS for calls it cannot route or decode, and
//!   SYSTEM_ERR for a handler that panicked. [`rpc::Error::is_reply`] tells these apart.
//! * What this side refused before sending: [`rpc::Error::Encode`], a value over a bound of
//!   the `.x`.
//! * What the transport reports, [`rpc::Error::Transport`] with a
//!   [`TransportError`](rpc::TransportError): the connection closed before the reply (after
//!   one retransmission on a new connection), no reply within the call's timeout
//!   ([`CallOptions::timeout`](rpc::CallOptions::timeout); by default 60 s over
//!   RPC-over-RDMA, 25 s over TCP as with libtirpc), a reply larger
//!   than this side accepts (`ReplyTooLarge`, naming the setting), or the peer's RDMA_ERROR
//!   (`RdmaVersion`, `RdmaChunk`, and version 2's codes in `RdmaRefused`).
//!
//! A peer's malformed or hostile input never panics this side: it gets the protocol's own
//! answer (RDMA_ERROR, GARBAGE_ARGS) or its connection is closed, and every size and count it
//! sends is checked against a bound before anything is allocated for it.
//!
//! ```
//! # mod kv { include!(concat!(env!("CARGO_MANIFEST_DIR"), "/guide/kv.rs")); }
//! # mod store { include!(concat!(env!("CARGO_MANIFEST_DIR"), "/guide/memory_kv.rs")); }
//! use std::sync::Arc;
//!
//! use bytes::Bytes;
//! use rpcrdma::rdma::soft::SoftProvider;
//! use rpcrdma::rdma::{Listener, Provider};
//! use rpcrdma::rpc::{self, Server, TransportError};
//! use rpcrdma::transport::{self, RdmaConfig};
//!
//! use kv::kv_prog::kv_v1::{self, KvV1Client};
//! use kv::{KvKey, KvPutArgs};
//! # use store::MemoryKv;
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let mut builder = Server::builder();
//! # kv_v1::register(&mut builder, MemoryKv::default());
//! # let listener = SoftProvider::default().listen("127.0.0.1:0".parse()?).await?;
//! # let addr = listener.local_addr()?;
//! # let rdma = Arc::new(transport::serve::<SoftProvider>(listener, builder.build(), RdmaConfig::default()));
//! # tokio::spawn({ let rdma = rdma.clone(); async move { rdma.run().await } });
//! let provider = Arc::new(SoftProvider::default());
//! let rpc = transport::connect(provider.clone(), addr, RdmaConfig::default()).await?;
//! let client = KvV1Client::new(rpc);
//!
//! // A key over KV_MAXKEY (256 bytes) is refused before anything is sent.
//! let err = client.kv_get(KvKey("k".repeat(300).into())).await.unwrap_err();
//! assert!(matches!(err, rpc::Error::Encode(_)), "{err}");
//!
//! // A client that accepts at most 64 KiB for one reply, asking for a 256 KiB value.
//! let value = Bytes::from(vec![1; 256 << 10]);
//! client.kv_put(KvPutArgs { key: KvKey("big".into()), value }).await?;
//! let limited = RdmaConfig::default().max_reply_size(64 << 10);
//! let small = KvV1Client::new(transport::connect(provider, addr, limited).await?);
//! let err = small.kv_get(KvKey("big".into())).await.unwrap_err();
//! let rpc::Error::Transport(TransportError::ReplyTooLarge { limit, .. }) = &err else {
//!     panic!("{err:?}");
//! };
//! assert_eq!(*limit, 64 << 10);
//! assert!(err.to_string().contains("max_reply_size"));
//! // The connection carries on.
//! small.kv_null().await?;
//! # rdma.shutdown().await;
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]
// On docs.rs (nightly, `--cfg docsrs`): each feature-gated item says which feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]

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

/// `#[derive(Xdr)]` (Encode + Decode) and `#[derive(DdpEligible)]`; see the `rpcrdma-derive`
/// crate.
#[cfg(feature = "derive")]
pub use rpcrdma_derive::{DdpEligible, Xdr};

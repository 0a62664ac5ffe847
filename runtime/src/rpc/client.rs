//! The transport-agnostic client: a [`Client`] sends typed calls through any
//! [`CallTransport`] and turns the reply into the procedure's result or a typed [`Error`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use tracing::Instrument;

use super::auth::Credentials;
use super::buffer::{BufferSource, RegisteredBuffer};
use super::error::{Error, TransportError};
use super::header::{decode_plain_reply_header, decode_reply_header, encode_call_header};
use super::intercept::{Intercepted, Interceptor};
use super::msg::{AuthFlavor, OpaqueAuth};
use super::observe::{self, CallCounters, CallStats, CallStatus, TransportStats};
use super::server::TransportKind;
use crate::xdr::{self, Decode, Decoder, Encode, EncodedSize, Encoder, Procedure, ReceivedChunks};

/// A boxed future, as object-safe transport traits return them.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The largest reply header: XID, msg_type, reply_stat, an AUTH_NONE..400-byte verifier,
/// accept_stat and a mismatch range (RFC 5531 section 9).
pub const MAX_REPLY_HEADER: usize = 4 * 3 + (8 + 400) + 4 + 8;

/// What a requester knows about a reply before it arrives, from the result type: enough to
/// provide Write chunks and a Reply chunk over RPC-over-RDMA (seed 002 section 4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyShape {
    /// The largest reply (header and results), or `None` when unbounded.
    pub max_len: Option<usize>,
    /// The largest reply with every DDP-eligible item moved to a chunk, or `None`.
    pub max_inline_len: Option<usize>,
    /// How many DDP-eligible items the results can carry (Write chunks to provide).
    pub ddp_items: usize,
}

impl ReplyShape {
    /// The shape of a reply carrying `R`, whose procedure declares `ddp_items`.
    pub fn of<R: EncodedSize>(ddp_items: usize) -> ReplyShape {
        let add = |n: Option<usize>| n.and_then(|n| n.checked_add(MAX_REPLY_HEADER));
        ReplyShape {
            max_len: add(R::MAX_LEN),
            max_inline_len: add(R::MAX_INLINE_LEN),
            ddp_items,
        }
    }
}

/// Per-call settings beyond the arguments.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct CallOptions {
    /// Where the DDP-eligible results land, in order: over RPC-over-RDMA each becomes the
    /// Write chunk for one result item, and the decoded result is a slice of it (no copy).
    /// Buffers from [`Client::buffer`]; ignored by transports without DDP.
    pub reply_buffers: Vec<RegisteredBuffer>,
    /// The expected size of each DDP-eligible result when no buffer is given (for example an
    /// NFS READ's `count`); the transport's configured default otherwise.
    pub reply_sizes: Vec<usize>,
    /// The largest reply expected, when the result type is unbounded: sizes the Reply chunk.
    pub max_reply: Option<usize>,
    /// The largest the results can be once their DDP-eligible items are in Write chunks,
    /// when the result type cannot say (see [`max_inline_results`](Self::max_inline_results)).
    pub max_inline_results: Option<usize>,
    /// How long to wait for the reply (the transport's default otherwise).
    pub timeout: Option<Duration>,
}

impl CallOptions {
    /// Default options.
    pub fn new() -> CallOptions {
        CallOptions::default()
    }

    /// Receive the next DDP-eligible result into `buffer`.
    pub fn reply_buffer(mut self, buffer: RegisteredBuffer) -> CallOptions {
        self.reply_buffers.push(buffer);
        self
    }

    /// Expect the next DDP-eligible result to be at most `len` bytes.
    pub fn reply_size(mut self, len: usize) -> CallOptions {
        self.reply_sizes.push(len);
        self
    }

    /// Expect no reply larger than `len` bytes.
    pub fn max_reply(mut self, len: usize) -> CallOptions {
        self.max_reply = Some(len);
        self
    }

    /// Promise that the results, with their DDP-eligible items in Write chunks, take at most
    /// `len` bytes, for a result type with no bound of its own (an NFSv4 COMPOUND4res whose
    /// operations the caller knows). Over RPC-over-RDMA a reply that then fits the inline
    /// threshold needs no Reply chunk and the call offers none (seed 002 section 4.3): the
    /// reply comes in a Send instead of an RDMA Write, and a call with Write chunks offers
    /// them alone, as the Linux kernel's client does. A server whose reply breaks the promise
    /// cannot send it (it answers ERR_CHUNK, which fails the call).
    pub fn max_inline_results(mut self, len: usize) -> CallOptions {
        self.max_inline_results = Some(len);
        self
    }

    /// Wait at most `timeout` for the reply.
    pub fn timeout(mut self, timeout: Duration) -> CallOptions {
        self.timeout = Some(timeout);
        self
    }

    /// Fail the call with [`TransportError::TimedOut`] if no reply came by `deadline` (the
    /// time left from now becomes its [`timeout`](Self::timeout); a deadline already past
    /// leaves none).
    pub fn deadline(self, deadline: std::time::Instant) -> CallOptions {
        self.timeout(deadline.saturating_duration_since(std::time::Instant::now()))
    }
}

/// One call as a transport sees it: routing, credentials, the arguments (encoded on demand,
/// into the transport's own encoder, again on retransmission) and what the reply may hold.
pub struct Call<'a> {
    /// The program number.
    pub prog: u32,
    /// The program version.
    pub vers: u32,
    /// The procedure number.
    pub proc: u32,
    /// The credential.
    pub cred: &'a OpaqueAuth,
    /// The verifier.
    pub verf: &'a OpaqueAuth,
    /// Encodes the arguments (not the header).
    pub args: &'a (dyn Fn(&mut Encoder) -> xdr::Result<()> + Sync),
    /// What the reply may hold.
    pub reply: ReplyShape,
    /// Per-call settings; the transport may take the buffers out.
    pub options: CallOptions,
}

impl Call<'_> {
    /// Encodes the whole call message (header with `xid`, then the arguments) into `enc`.
    pub fn encode(&self, xid: u32, enc: &mut Encoder) -> xdr::Result<()> {
        encode_call_header(
            enc, xid, self.prog, self.vers, self.proc, self.cred, self.verf,
        )?;
        (self.args)(enc)
    }
}

/// A reply as a transport delivers it: the whole RPC reply message (from its XID on) and,
/// over RPC-over-RDMA, the chunk data the results' DDP-eligible items moved in.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The reply message.
    pub message: Bytes,
    /// Chunk data for the results, if any.
    pub chunks: Option<ReceivedChunks>,
}

/// A way to send calls and receive their replies: TCP with record marking, RPC-over-RDMA.
///
/// The transport assigns XIDs, matches replies to calls, and owns retransmission.
pub trait CallTransport: Send + Sync + 'static {
    /// Sends `call` and waits for its reply.
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Reply, Error>>;

    /// Where buffers for DDP-eligible data come from on this transport.
    fn buffers(&self) -> Arc<dyn BufferSource>;

    /// Which kind of transport this is.
    fn kind(&self) -> TransportKind;

    /// The transport's counters, cumulative across its connections, if it keeps any (the
    /// default: it does not). Both of this crate's transports do.
    fn stats(&self) -> Option<TransportStats> {
        None
    }

    /// Whether this transport answers the calls its peer sends on its connections (the
    /// backward direction: an NFSv4.1 session's callbacks, RFC 5661 section 2.10.3.1), a
    /// server for them being configured: `TcpConfig::backchannel`, `RdmaConfig::backchannel`.
    /// The default: it does not.
    fn serves_backward(&self) -> bool {
        false
    }
}

/// An ONC RPC client over any transport. Cheap to clone; clones share the connection.
///
/// Generated clients (one per program version, from `xdrgen`) wrap one and offer a method per
/// procedure; [`Client::call`] is what they call.
///
/// Every call is counted by how it ended ([`Client::call_stats`]) and, when a `tracing`
/// subscriber wants it, has a span `rpc.call` (see [`observe`](crate::rpc::observe)).
#[derive(Clone)]
pub struct Client {
    transport: Arc<dyn CallTransport>,
    cred: OpaqueAuth,
    verf: OpaqueAuth,
    /// A program called by another number ([`Client::with_program_number`]).
    renumbered: Option<(u32, u32)>,
    /// The per-call hook ([`Client::with_interceptor`]).
    interceptor: Option<Arc<dyn Interceptor>>,
    /// The calls of this client and of every client derived from it, by status.
    counters: Arc<CallCounters>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("transport", &self.transport.kind())
            .field("flavor", &self.cred.flavor)
            .finish()
    }
}

fn none_auth() -> OpaqueAuth {
    OpaqueAuth {
        flavor: AuthFlavor::AuthNone,
        body: Bytes::new(),
    }
}

impl Client {
    /// A client sending AUTH_NONE calls through `transport`.
    pub fn new(transport: impl CallTransport) -> Client {
        Client::from_arc(Arc::new(transport))
    }

    /// A client over a shared transport.
    pub fn from_arc(transport: Arc<dyn CallTransport>) -> Client {
        Client {
            transport,
            cred: none_auth(),
            verf: none_auth(),
            renumbered: None,
            interceptor: None,
            counters: Arc::default(),
        }
    }

    /// The same connection, calling program `program` (the number its generated code has)
    /// as `number`: for a program whose number is assigned locally, such as the 2004
    /// protocol's `CONFIG_RDMA_PROG`, whose draft left it unassigned.
    pub fn with_program_number(&self, program: u32, number: u32) -> Client {
        Client {
            renumbered: Some((program, number)),
            ..self.clone()
        }
    }

    /// The same connection with other credentials.
    pub fn with_credentials(&self, credentials: &Credentials) -> Result<Client, Error> {
        Ok(Client {
            cred: credentials.to_opaque_auth().map_err(Error::Encode)?,
            verf: none_auth(),
            ..self.clone()
        })
    }

    /// The same connection with a per-call hook: `interceptor` sees every call (program,
    /// version, procedure) before it is sent, and may set its credentials or refuse it (the
    /// call then fails with [`Error::Refused`]). It replaces any earlier one.
    pub fn with_interceptor(&self, interceptor: impl Interceptor) -> Client {
        Client {
            interceptor: Some(Arc::new(interceptor)),
            ..self.clone()
        }
    }

    /// The calls made through this client and the clients derived from it (clones,
    /// [`with_credentials`](Self::with_credentials), ...), counted by how they ended.
    pub fn call_stats(&self) -> CallStats {
        self.counters.snapshot()
    }

    /// The transport's counters, cumulative across its connections ([`CallTransport::stats`];
    /// `None` for a transport that keeps none).
    pub fn transport_stats(&self) -> Option<TransportStats> {
        self.transport.stats()
    }

    /// The transport underneath.
    pub fn transport(&self) -> &Arc<dyn CallTransport> {
        &self.transport
    }

    /// A buffer of `len` bytes for DDP-eligible data: registered memory of the connection
    /// over RPC-over-RDMA (give it to [`CallOptions::reply_buffer`] to receive a result
    /// into it, or send it as an argument without a copy), ordinary memory otherwise.
    pub fn buffer(&self, len: usize) -> RegisteredBuffer {
        self.transport.buffers().buffer(len)
    }

    /// Calls procedure `P` with `args`.
    pub async fn call<P>(&self, args: &P::Args) -> Result<P::Result, Error>
    where
        P: Procedure,
        P::Args: Sync,
        P::Result: EncodedSize,
    {
        self.call_with::<P>(args, CallOptions::default()).await
    }

    /// Calls procedure `P` with `args` and per-call `options`.
    pub async fn call_with<P>(
        &self,
        args: &P::Args,
        options: CallOptions,
    ) -> Result<P::Result, Error>
    where
        P: Procedure,
        P::Args: Sync,
        P::Result: EncodedSize,
    {
        if options.timeout == Some(Duration::ZERO) {
            // A deadline already past: the call is not sent (a timer of zero could lose the
            // race against a quick reply).
            self.counters.count(CallStatus::TimedOut);
            return Err(TransportError::TimedOut(Duration::ZERO).into());
        }
        let prog = match self.renumbered {
            Some((program, number)) if program == P::PROGRAM => number,
            _ => P::PROGRAM,
        };
        let mut own_cred = None;
        if let Some(interceptor) = &self.interceptor {
            let mut seen = Intercepted::new(prog, P::VERSION, P::PROCEDURE);
            if let Err(refusal) = interceptor.intercept(&mut seen) {
                self.counters.count(CallStatus::Refused);
                return Err(Error::Refused(refusal));
            }
            own_cred = seen.into_credentials();
        }
        let encode = |enc: &mut Encoder| args.encode(enc);
        let call = Call {
            prog,
            vers: P::VERSION,
            proc: P::PROCEDURE,
            cred: own_cred.as_ref().unwrap_or(&self.cred),
            verf: &self.verf,
            args: &encode,
            reply: ReplyShape::of::<P::Result>(P::RESULT_DDP_ITEMS),
            options,
        };
        let span = observe::client_span(prog, P::VERSION, P::PROCEDURE, self.transport.kind());
        // Without a subscriber for the span (and without `metrics`), no clock is read.
        if span.is_disabled() && !cfg!(feature = "metrics") {
            // Not kept across the wait: a smaller future.
            drop(span);
            let result = match self.transport.call(call).await {
                Ok(reply) => decode_reply(reply),
                Err(e) => Err(e),
            };
            self.counters.count(CallStatus::of_call(&result));
            return result;
        }
        let started = std::time::Instant::now();
        let result = async {
            let reply = self.transport.call(call).await?;
            decode_reply(reply)
        }
        .instrument(span.clone())
        .await;
        let status = CallStatus::of_call(&result);
        self.counters.count(status);
        if !span.is_disabled() {
            observe::finish_client(&span, started, status);
        }
        #[cfg(feature = "metrics")]
        observe::metrics::call(
            observe::metrics::Side::Client,
            observe::transport_name(self.transport.kind()),
            prog,
            P::VERSION,
            P::PROCEDURE,
            status,
            started.elapsed().as_secs_f64(),
        );
        result
    }
}

/// Decodes a reply message into the procedure's result: the header's status first, then the
/// results with their chunk data, which must all be used.
pub fn decode_reply<R: Decode>(reply: Reply) -> Result<R, Error> {
    let mut dec = Decoder::new(&reply.message);
    // Before the header: an RDMA_MSGP reply's padding applies to the verifier too (seed 000
    // section 3.5).
    match reply.chunks {
        Some(chunks) => {
            dec.set_chunks(chunks);
            decode_reply_header(&mut dec)?;
        }
        None => {
            decode_plain_reply_header(&mut dec)?;
        }
    }
    let result = R::decode(&mut dec).map_err(Error::Decode)?;
    if let Some(chunks) = dec.take_chunks() {
        chunks.finish().map_err(Error::Decode)?;
    }
    dec.finish().map_err(Error::Decode)?;
    Ok(result)
}

impl From<xdr::Error> for TransportError {
    fn from(e: xdr::Error) -> TransportError {
        TransportError::Protocol(e.to_string())
    }
}

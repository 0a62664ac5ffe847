//! The provider traits: connection management, registration, posting, completions.
//!
//! They follow verbs semantics (one queue pair per [`Connection`], work requests identified by a
//! `wr_id`, one completion per request, a completion queue polled asynchronously) so that both
//! the software iWARP provider and a verbs provider (rdma-sys + rdma_cm) implement them directly.
//!
//! Posting is synchronous (like `ibv_post_send`): it validates the request, queues it, and
//! returns. The outcome arrives later as a [`Completion`]. Every posted request yields exactly
//! one completion, also when the connection goes down ([`WcStatus::Flushed`](super::WcStatus)),
//! except a send-queue request posted [unsignaled](super::SendWr::unsignaled) that succeeds.

use std::future::Future;
use std::net::SocketAddr;
use std::task::{Context, Poll, Waker};

use super::access::Access;
use super::completion::Completion;
use super::error::Result;
use super::mr::MemoryRegion;
use super::shared_receive::{SharedReceiveParams, SharedReceiveQueue};
use super::wr::{RecvWr, SendWr};

/// The largest private data every provider accepts (MPA allows 512 octets, RFC 5044 section
/// 7.1; rdma_cm on iWARP fewer once it adds its own header, so providers may refuse less).
pub const MAX_PRIVATE_DATA: usize = 512;

/// Parameters of an active or passive connection.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectParams {
    /// Private data for the peer (MPA Request/Reply private data, rdma_cm private data).
    pub private_data: Vec<u8>,
    /// Inbound RDMA Read queue depth: how many RDMA Reads the peer may have outstanding here.
    pub ird: u32,
    /// Outbound RDMA Read queue depth: how many RDMA Reads this side may have outstanding.
    pub ord: u32,
    /// Maximum outstanding send-queue requests.
    pub send_queue_depth: u32,
    /// Maximum outstanding receive-queue requests.
    pub recv_queue_depth: u32,
    /// The private data to send instead where this side's device cannot take the peer's Send
    /// With Invalidate of the keys it advertises (the verbs provider on a device without
    /// memory windows: a region's own key is not remotely invalidatable), for a protocol
    /// whose private data offers that (RFC 8797's Send With Invalidate bit).
    pub private_data_without_remote_invalidation: Option<Vec<u8>>,
}

impl Default for ConnectParams {
    fn default() -> ConnectParams {
        ConnectParams {
            private_data_without_remote_invalidation: None,
            private_data: Vec::new(),
            ird: 16,
            ord: 16,
            send_queue_depth: 1024,
            recv_queue_depth: 1024,
        }
    }
}

impl ConnectParams {
    /// Default parameters: no private data, IRD/ORD 16, queue depths 1024.
    pub fn new() -> ConnectParams {
        ConnectParams::default()
    }

    /// Sets the private data.
    pub fn private_data(mut self, data: impl Into<Vec<u8>>) -> ConnectParams {
        self.private_data = data.into();
        self
    }

    /// Sets [`ConnectParams::private_data_without_remote_invalidation`].
    pub fn private_data_without_remote_invalidation(
        mut self,
        data: impl Into<Vec<u8>>,
    ) -> ConnectParams {
        self.private_data_without_remote_invalidation = Some(data.into());
        self
    }

    /// The private data to send from a device that does (`true`) or does not take a peer's
    /// Send With Invalidate.
    pub fn private_data_for(&self, remote_invalidation: bool) -> &[u8] {
        match &self.private_data_without_remote_invalidation {
            Some(data) if !remote_invalidation => data,
            _ => &self.private_data,
        }
    }

    /// Sets the inbound and outbound RDMA Read depths.
    pub fn read_depths(mut self, ird: u32, ord: u32) -> ConnectParams {
        self.ird = ird;
        self.ord = ord;
        self
    }

    /// Sets the send and receive queue depths.
    pub fn queue_depths(mut self, send: u32, recv: u32) -> ConnectParams {
        self.send_queue_depth = send;
        self.recv_queue_depth = recv;
        self
    }
}

/// An RDMA provider: makes connections.
pub trait Provider: Send + Sync + 'static {
    /// A connected queue pair.
    type Conn: Connection;
    /// A passive endpoint.
    type Listener: Listener<
        Conn = Self::Conn,
        Request: ConnectRequest<SharedQueue = Self::SharedQueue>,
    >;
    /// A shared receive queue ([`Provider::shared_receive_queue`]).
    type SharedQueue: SharedReceiveQueue;

    /// A short name for logs ("soft", "verbs").
    fn name(&self) -> &'static str;

    /// Connects to `addr`, sending `params.private_data` with the request. Fails with
    /// [`Error::Rejected`](super::Error::Rejected) when the peer rejects.
    fn connect(
        &self,
        addr: SocketAddr,
        params: ConnectParams,
    ) -> impl Future<Output = Result<Self::Conn>> + Send;

    /// Listens on `addr` (port 0 picks a free port; see [`Listener::local_addr`]).
    fn listen(&self, addr: SocketAddr) -> impl Future<Output = Result<Self::Listener>> + Send;

    /// Creates a shared receive queue of `params.buffers` buffers of `params.buffer_size`
    /// bytes, posted by the provider, for connections accepted with
    /// [`ConnectRequest::accept_shared_with`] (see [`super::shared_receive`]). Providers
    /// without one answer [`Error::Unsupported`](super::Error::Unsupported).
    fn shared_receive_queue(&self, params: SharedReceiveParams) -> Result<Self::SharedQueue>;

    /// Like [`Provider::connect`], but runs `setup` on the new connection before any data from
    /// the peer is processed, so receives it posts there are in place for the peer's first
    /// Send (verbs: receives posted before `rdma_connect` completes). The default runs `setup`
    /// after `connect`, which is only race-free when the peer does not send first.
    fn connect_with<F>(
        &self,
        addr: SocketAddr,
        params: ConnectParams,
        setup: F,
    ) -> impl Future<Output = Result<Self::Conn>> + Send
    where
        F: FnOnce(&Self::Conn) -> Result<()> + Send,
    {
        async move {
            let conn = self.connect(addr, params).await?;
            setup(&conn)?;
            Ok(conn)
        }
    }
}

/// A passive endpoint that yields connection requests.
pub trait Listener: Send + Sync + 'static {
    /// The connection type produced.
    type Conn: Connection;
    /// A pending connection request.
    type Request: ConnectRequest<Conn = Self::Conn>;

    /// The address actually bound.
    fn local_addr(&self) -> Result<SocketAddr>;

    /// Waits for the next connection request (its private data is readable before deciding).
    fn next_request(&self) -> impl Future<Output = Result<Self::Request>> + Send;

    /// Waits for the next request and accepts it with `params`.
    fn accept(&self, params: ConnectParams) -> impl Future<Output = Result<Self::Conn>> + Send {
        async move { self.next_request().await?.accept(params).await }
    }

    /// Waits for the next request and accepts it, running `setup` before any data from the
    /// peer is processed (see [`ConnectRequest::accept_with`]).
    fn accept_with<F>(
        &self,
        params: ConnectParams,
        setup: F,
    ) -> impl Future<Output = Result<Self::Conn>> + Send
    where
        F: FnOnce(&Self::Conn) -> Result<()> + Send,
    {
        async move { self.next_request().await?.accept_with(params, setup).await }
    }
}

/// A connection request received by a [`Listener`], to accept or reject.
pub trait ConnectRequest: Send + 'static {
    /// The connection type produced.
    type Conn: Connection;
    /// The provider's shared receive queue.
    type SharedQueue: SharedReceiveQueue;

    /// The address of the requesting peer.
    fn peer_addr(&self) -> SocketAddr;

    /// The private data that came with the request.
    fn private_data(&self) -> &[u8];

    /// Accepts, sending `params.private_data` back.
    fn accept(self, params: ConnectParams) -> impl Future<Output = Result<Self::Conn>> + Send;

    /// Rejects, sending `private_data` back.
    fn reject(self, private_data: &[u8]) -> impl Future<Output = Result<()>> + Send;

    /// Accepts, running `setup` on the connection before any data from the peer is processed,
    /// so receives posted there are in place for the peer's first Send (verbs: receives
    /// posted before `rdma_accept`). The default runs `setup` after `accept`, which is only
    /// race-free when the peer does not send first.
    fn accept_with<F>(
        self,
        params: ConnectParams,
        setup: F,
    ) -> impl Future<Output = Result<Self::Conn>> + Send
    where
        Self: Sized,
        F: FnOnce(&Self::Conn) -> Result<()> + Send,
    {
        async move {
            let conn = self.accept(params).await?;
            setup(&conn)?;
            Ok(conn)
        }
    }

    /// Accepts as [`accept_with`](ConnectRequest::accept_with) does, the connection taking its
    /// receive buffers from `queue` instead of a receive queue of its own (see
    /// [`super::shared_receive`]); `params.recv_queue_depth` is the first bound of
    /// [`Connection::limit_shared_receives`]. `setup` must not post receives.
    fn accept_shared_with<F>(
        self,
        params: ConnectParams,
        queue: &Self::SharedQueue,
        setup: F,
    ) -> impl Future<Output = Result<Self::Conn>> + Send
    where
        Self: Sized,
        F: FnOnce(&Self::Conn) -> Result<()> + Send;
}

/// What a provider calls when completions may be ready ([`Connection::set_completion_hook`]).
pub type CompletionHook = Box<dyn Fn() + Send + Sync>;

/// A connected queue pair with its completion queue and its registrations.
///
/// All methods take `&self`; share a connection between tasks with an `Arc`.
pub trait Connection: Send + Sync + 'static {
    /// Registers `buf` with `access` for use on this connection (verbs: in its protection
    /// domain). The registration lives until the last clone of the region is dropped.
    fn register(&self, buf: Vec<u8>, access: Access) -> Result<MemoryRegion>;

    /// Registers `len` zeroed bytes with `access`, as [`Connection::register`] does a buffer.
    /// Providers register [`RegionMemory::zeroed`](super::RegionMemory::zeroed) memory: large
    /// buffers are mapped on their own and go back to the operating system with their
    /// registration. The default registers a heap buffer.
    fn register_zeroed(&self, len: usize, access: Access) -> Result<MemoryRegion> {
        self.register(vec![0; len], access)
    }

    /// Replaces the remote steering tag of `mr` with a new one that grants the remote rights
    /// in `remote` (`Access::REMOTE_READ` and/or `Access::REMOTE_WRITE`, within the rights the
    /// region was registered with; `Access::NONE` leaves it reachable by no tag). The old tag
    /// stops resolving at once, whether or not it was invalidated before.
    ///
    /// This is the memory-window bind of verbs done again: a registration from a pool is
    /// advertised for one RPC at a time and invalidated after it (seed 004 section 5.4.1),
    /// without registering memory again ("allocating chunk list data and RPC headers in a
    /// reusable way from pre-registered pools", section 5.4). Providers that cannot do it
    /// return [`Error::Unsupported`](super::Error::Unsupported); callers then register anew.
    ///
    /// Every provider refuses, before anything else and leaving the region as it was:
    /// * rights in `remote` other than `REMOTE_READ`/`REMOTE_WRITE`, or beyond the rights the
    ///   region was registered with (so a region registered without remote rights can only be
    ///   rekeyed to `Access::NONE`), with
    ///   [`Error::InvalidWorkRequest`](super::Error::InvalidWorkRequest) (the check is
    ///   [`MemoryRegion::check_remote_rights`]);
    /// * a region registered on another connection, with the same error.
    ///
    /// The new tag is in [`MemoryRegion::rkey`] and the rights in force in
    /// [`MemoryRegion::access`] once this returns. If it fails after that point (the connection
    /// failed), the region is left reachable by no tag and records `Access::NONE`.
    ///
    /// A tag being rekeyed must not be used concurrently by the same side (posting a local
    /// invalidate of it from another thread while the rekey runs): rekeying orders itself after
    /// requests posted before it. Providers: soft (any time), verbs on devices with memory
    /// windows (rxe and most adapters, also inside `connect_with`/`accept_with` setup); verbs on
    /// devices without (Linux siw) answers `Unsupported`.
    fn rekey(&self, mr: &MemoryRegion, remote: Access) -> Result<()> {
        let _ = (mr, remote);
        Err(super::Error::Unsupported("rekeying a registration".into()))
    }

    /// Revokes every steering tag of `mr` now: no tag the peer was given reaches it any more.
    /// By default [`rekey`](Self::rekey) to `Access::NONE`. A provider that cannot rekey may
    /// do it another way and leave the region unusable in work requests afterwards: the verbs
    /// provider on a device without memory windows deregisters the region (its memory stays
    /// readable through the region).
    fn revoke(&self, mr: &MemoryRegion) -> Result<()> {
        self.rekey(mr, Access::NONE)
    }

    /// Whether the peer's Send With Invalidate of the tags this side gives works. True by
    /// default; false for the verbs provider on a device without memory windows, whose tags
    /// are regions' own keys, which devices do not let a peer invalidate (Linux siw ends the
    /// stream).
    fn takes_remote_invalidation(&self) -> bool {
        true
    }

    /// A hint: the peer is about to write into `mr` (under its current tag) by RDMA Write,
    /// most likely before anything else it sends, as a responder fills the Write chunk of a
    /// call just sent. A provider that places tagged data from the wire itself may prepare to
    /// put it straight into `mr` (the soft provider does, for regions of 4 KiB or more);
    /// ignoring the hint (the default, and hardware, which places it anyway) is always
    /// correct, and a wrong hint costs at most a little time.
    fn expect_write(&self, mr: &MemoryRegion) {
        let _ = mr;
    }

    /// Posts a receive buffer for one incoming Send.
    ///
    /// The buffer is the provider's until the receive completes, and only the bytes the
    /// completion reports (`byte_len`) are the message: the rest of the buffer is not
    /// promised to keep its contents. The soft provider reads a Send of 32 KiB or more
    /// straight into its receive when the one before it was as large, before it knows the
    /// new one's length; a shorter one leaves stream bytes behind it in the buffer.
    fn post_recv(&self, wr: RecvWr) -> Result<()>;

    /// On a connection accepted with a shared receive queue: runs `f` on the message that
    /// receive completion `c` reports, in place, and gives its buffer back to the queue. Each
    /// successful receive completion is taken once; a completion that is not this
    /// connection's, or taken already, fails with
    /// [`Error::InvalidWorkRequest`](super::Error::InvalidWorkRequest) and `f` does not run.
    /// Connections without a shared queue answer
    /// [`Error::Unsupported`](super::Error::Unsupported).
    fn take_shared<R>(&self, c: &Completion, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        let _ = (c, f);
        Err(super::Error::Unsupported(
            "taking a shared receive on a connection without a shared queue".into(),
        ))
    }

    /// On a connection accepted with a shared receive queue: from now on it may hold at most
    /// `most` of the queue's buffers at once (arrived and not taken yet); a Send past that
    /// ends the connection as a Send finding no buffer does. Ignored elsewhere, and by a
    /// provider whose device cannot bound it (hardware retries a Send that finds no buffer).
    fn limit_shared_receives(&self, most: usize) {
        let _ = most;
    }

    /// Posts a send-queue request (Send, RDMA Write, RDMA Read, local invalidate).
    fn post_send(&self, wr: SendWr) -> Result<()>;

    /// Posts `wrs` in order, as [`post_send`](Connection::post_send) would one by one; a
    /// provider that can posts them as one list, which rings the device's doorbell once (on
    /// rxe and siw one system call instead of one per request; the soft provider writes their
    /// FPDUs to the socket together, a batch of 64 KiB or more per write). On an error, the requests
    /// before the one that failed are posted and those from it on are not.
    fn post_sends(&self, wrs: Vec<SendWr>) -> Result<()> {
        wrs.into_iter().try_for_each(|wr| self.post_send(wr))
    }

    /// Waits for the next completion of either queue.
    fn poll_completion(&self) -> impl Future<Output = Completion> + Send;

    /// The next completion if one is ready now.
    fn try_completion(&self) -> Option<Completion>;

    /// Asks the provider to call `hook` whenever completions may have become ready, in
    /// addition to waking [`poll_completion`](Connection::poll_completion)'s pollers, so that
    /// a consumer can take them with [`try_completion`](Connection::try_completion) where the
    /// provider learns of them instead of in a task the provider wakes (one task switch per
    /// completion fewer). Returns false, dropping `hook`, when the provider has no such path
    /// (the default) or a hook is already set; then poll as usual.
    ///
    /// The provider may call the hook from any thread and spuriously, but never with its own
    /// locks held and never from inside [`post_send`](Connection::post_send) or
    /// [`post_recv`](Connection::post_recv): completions that become ready while those run (a
    /// request that completes as it is written, [`SendWr::complete_locally`]) wake pollers
    /// but are otherwise the poster's to take, with `try_completion` once it has posted. The
    /// hook must not block: a consumer whose state is locked leaves the completions to a task
    /// of its own.
    fn set_completion_hook(&self, hook: CompletionHook) -> bool {
        let _ = hook;
        false
    }

    /// Lets the calling task read the connection's input itself, for a consumer with a
    /// [completion hook](Connection::set_completion_hook) that waits for something the input
    /// will bring (a reply to its call): what has arrived is processed now, in this task, and
    /// the hook called here for the completions it makes ready (`Ready`: look again); when
    /// nothing has, the connection wakes `cx`'s task when something does (`Pending`), until
    /// [`end_input`](Connection::end_input). The consumer's task is then woken by the
    /// connection directly instead of by the hook from a task of the provider's, one task
    /// switch per message fewer. One task reads at a time: while another does, and for a
    /// provider without such a path (the default), `Pending` without anything registered, and
    /// the hook comes from wherever the provider reads.
    fn poll_input(&self, cx: &mut Context<'_>) -> Poll<()> {
        let _ = cx;
        Poll::Pending
    }

    /// The task of `waker` no longer waits in [`poll_input`](Connection::poll_input): the
    /// provider reads its input on its own again.
    fn end_input(&self, waker: &Waker) {
        let _ = waker;
    }

    /// The private data the peer sent while connecting (its request or its reply).
    fn peer_private_data(&self) -> &[u8];

    /// The local address of the connection.
    fn local_addr(&self) -> SocketAddr;

    /// The peer's address.
    fn peer_addr(&self) -> SocketAddr;

    /// True until the connection is closed or enters the error state.
    fn is_connected(&self) -> bool;

    /// True once the device under the connection was removed (a verbs device unplugged or
    /// deleted): the connection is down for good, and the reason its calls failed.
    fn device_removed(&self) -> bool {
        false
    }

    /// Closes the connection. Outstanding and later-posted requests complete with
    /// [`WcStatus::Flushed`](super::WcStatus::Flushed); completions stay pollable.
    fn disconnect(&self) -> impl Future<Output = Result<()>> + Send;
}

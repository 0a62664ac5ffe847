//! [`SoftProvider`]: the contract's [`Provider`] on MPA/DDP/RDMAP over tokio TCP.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio::task::JoinHandle;

use super::core::{Core, CoreConfig, PlacementStats, State};
use super::driver::{self, Shared};
use super::listener::SoftListener;
use super::negotiate::{MpaConfig, Negotiated, ReadDepths, Refusal};
use super::shared_receive::{SharedHolder, SoftSharedQueue};
use super::tags::TagTable;
use super::tap::{ConnTap, Direction, WireTap};
use super::wire::mpa::{
    FrameKind, Framing, StartupFrame, ENHANCED_LEN, MAX_PRIVATE_DATA, STARTUP_HEADER_LEN,
};
use crate::rdma::{
    Access, Completion, CompletionHook, ConnectParams, ConnectRequest, Connection, Error,
    MemoryRegion, Provider, RecvWr, RegionMemory, Result, SendWr, SharedReceiveParams,
    SharedReceiveQueue,
};

/// Settings of the software provider.
#[derive(Clone)]
pub struct SoftConfig {
    /// MPA flavour, marker and CRC preferences, revision.
    pub mpa: MpaConfig,
    /// Largest DDP segment sent (MULPDU, RFC 5044 section 4.2), at most 65535; any length
    /// is accepted on receive. Default 65000: an FPDU that fits a loopback TCP segment (MTU
    /// 65536), so each is read into its registration directly; 16 KiB segments made 1 MiB
    /// RPC-over-RDMA READs and WRITEs between two processes 25-30 % slower (most of each read
    /// then landed after the segment being placed and was copied once more).
    pub mulpdu: usize,
    /// The deadline of the MPA startup exchange, counted from the TCP connection: an
    /// initiator's whole exchange (connect, Request, Reply), and the whole Request a listener
    /// reads, however slowly its bytes arrive (a peer that trickles it cannot stretch the
    /// deadline). Default 10 s: an initiator sends its Request as soon as TCP connects (RFC
    /// 5044 section 7.1) and it fits one segment, so even a lossy path delivers it well
    /// within that, and a silent peer holds a place among [`SoftConfig::max_handshakes`] no
    /// longer.
    pub handshake_timeout: Duration,
    /// The most connections a listener lets negotiate at once: from the TCP connection until
    /// the request is accepted or rejected (a request read but not yet taken by
    /// [`next_request`](crate::rdma::Listener::next_request), or taken but not yet answered,
    /// still counts). A connection beyond it is closed at once, with a rate-limited `warn`
    /// line naming the peer and the cap, so peers that never finish their Request cost a
    /// bounded number of sockets and tasks, and every other peer's handshake runs in a task of
    /// its own, never behind theirs.
    ///
    /// Default 1024: the listen backlog tokio (and Linux's `somaxconn` before 5.4) gives a
    /// listening socket, so a burst of reconnecting clients the kernel would have queued is
    /// not refused here, while silent peers can hold at most that many descriptors for
    /// [`SoftConfig::handshake_timeout`]. Values below 1 count as 1.
    pub max_handshakes: usize,
    /// Sees every byte of every connection (capture files, tests).
    pub tap: Option<Arc<dyn WireTap>>,
    /// Complete Sends and RDMA Writes once the peer confirmed them, so that a refusal shows
    /// in their completions as on verbs (see [`CoreConfig::confirm`]). Costs a zero-length
    /// RDMA Read per round of messages; the peer's Read Response usually shares a write with
    /// its next message (see the driver's module documentation). Without a completion hook,
    /// the probe waits while completions are left to take, so a window of RDMA Writes costs
    /// one per window rather than one per two messages. Either side may hold back the
    /// answer to such a probe (never a real RDMA Read's data) for the next message posted on
    /// the connection, while a task waits for its completions: until that post, the next
    /// input, or, when the connection goes quiet, about 10 ms. Without confirmation
    /// completions are local, as on Linux siw and iWARP RNICs (RFC 5040 section 5).
    pub confirm_completions: bool,
    /// Rekey registrations (the default). False imitates the verbs provider on a device
    /// without memory windows (Linux siw), for tests of what the transport does there:
    /// [`Connection::rekey`] answers `Unsupported` (while [`Connection::revoke`] still
    /// revokes), the peer's Send With Invalidate is not taken, and the private data sent is
    /// [`ConnectParams::private_data_for`]`(false)`.
    pub rekey: bool,
}

impl Default for SoftConfig {
    fn default() -> SoftConfig {
        SoftConfig {
            mpa: MpaConfig::default(),
            mulpdu: 65000,
            handshake_timeout: Duration::from_secs(10),
            max_handshakes: 1024,
            tap: None,
            confirm_completions: true,
            rekey: true,
        }
    }
}

/// `params` as the configured device takes them (see [`SoftConfig::rekey`]).
fn imitated(config: &SoftConfig, params: ConnectParams) -> ConnectParams {
    if config.rekey {
        return params;
    }
    let data = params.private_data_for(false).to_vec();
    params.private_data(data)
}

impl std::fmt::Debug for SoftConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SoftConfig")
            .field("mpa", &self.mpa)
            .field("mulpdu", &self.mulpdu)
            .field("handshake_timeout", &self.handshake_timeout)
            .field("max_handshakes", &self.max_handshakes)
            .field("rekey", &self.rekey)
            .field("tap", &self.tap.is_some())
            .field("confirm_completions", &self.confirm_completions)
            .finish()
    }
}

/// The software iWARP provider.
#[derive(Clone, Debug, Default)]
pub struct SoftProvider {
    config: SoftConfig,
}

impl SoftProvider {
    /// A provider with `config`.
    pub fn new(config: SoftConfig) -> SoftProvider {
        SoftProvider { config }
    }

    /// The configuration.
    pub fn config(&self) -> &SoftConfig {
        &self.config
    }
}

fn ulp_limit(config: &SoftConfig) -> usize {
    if config.mpa.revision() >= 2 {
        MAX_PRIVATE_DATA - ENHANCED_LEN
    } else {
        MAX_PRIVATE_DATA
    }
}

fn check_private_data(config: &SoftConfig, pd: &[u8]) -> Result<()> {
    let max = ulp_limit(config);
    if pd.len() > max {
        return Err(Error::PrivateDataTooLong { len: pd.len(), max });
    }
    Ok(())
}

fn depths(params: &ConnectParams) -> ReadDepths {
    ReadDepths {
        ird: params.ird.min(0x3fff) as u16,
        ord: params.ord.min(0x3fff) as u16,
    }
}

pub(super) async fn read_frame(stream: &mut TcpStream, kind: FrameKind) -> Result<StartupFrame> {
    let mut head = [0u8; STARTUP_HEADER_LEN];
    stream.read_exact(&mut head).await?;
    let (mut frame, pd_len) =
        StartupFrame::parse_header(kind, &head).map_err(|e| Error::Establishment(e.to_string()))?;
    let mut pd = vec![0u8; pd_len];
    stream.read_exact(&mut pd).await?;
    frame.private_data = pd;
    Ok(frame)
}

async fn write_frame(
    stream: &mut TcpStream,
    frame: &StartupFrame,
    tap: Option<&ConnTap>,
) -> Result<()> {
    let mut out = Vec::with_capacity(frame.len());
    frame.emit(&mut out);
    if let Some(tap) = tap {
        tap.record(Direction::Sent, &out);
    }
    stream.write_all(&out).await?;
    Ok(())
}

pub(super) fn record_frame(tap: Option<&ConnTap>, frame: &StartupFrame) {
    if let Some(tap) = tap {
        let mut out = Vec::with_capacity(frame.len());
        frame.emit(&mut out);
        tap.record(Direction::Received, &out);
    }
}

pub(super) fn conn_tap(config: &SoftConfig, stream: &TcpStream) -> Option<ConnTap> {
    let tap = config.tap.clone()?;
    Some(ConnTap::new(
        tap,
        stream.local_addr().ok()?,
        stream.peer_addr().ok()?,
    ))
}

fn refusal_error(r: Refusal) -> Error {
    match r {
        Refusal::Rejected { private_data } => Error::Rejected { private_data },
        other => Error::Establishment(other.to_string()),
    }
}

impl Provider for SoftProvider {
    type Conn = SoftConnection;
    type Listener = SoftListener;
    type SharedQueue = SoftSharedQueue;

    fn name(&self) -> &'static str {
        "soft"
    }

    async fn connect(&self, addr: SocketAddr, params: ConnectParams) -> Result<SoftConnection> {
        self.connect_with(addr, params, |_| Ok(())).await
    }

    async fn connect_with<F>(
        &self,
        addr: SocketAddr,
        params: ConnectParams,
        setup: F,
    ) -> Result<SoftConnection>
    where
        F: FnOnce(&SoftConnection) -> Result<()> + Send,
    {
        let params = imitated(&self.config, params);
        check_private_data(&self.config, &params.private_data)?;
        let config = self.config.clone();
        let work = async move {
            let mut stream = TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            let tap = conn_tap(&config, &stream);
            let request = config.mpa.request(&params.private_data, depths(&params));
            write_frame(&mut stream, &request, tap.as_ref()).await?;
            let reply = read_frame(&mut stream, FrameKind::Reply).await?;
            record_frame(tap.as_ref(), &reply);
            match config.mpa.complete(&request, &reply) {
                Ok(negotiated) => {
                    SoftConnection::start(stream, negotiated, &params, &config, tap, None, setup)
                }
                Err(refusal) => {
                    let _ = stream.shutdown().await;
                    Err(refusal_error(refusal))
                }
            }
        };
        tokio::time::timeout(self.config.handshake_timeout, work)
            .await
            .map_err(|_| Error::TimedOut("the MPA startup exchange".into()))?
    }

    async fn listen(&self, addr: SocketAddr) -> Result<SoftListener> {
        SoftListener::bind(addr, self.config.clone()).await
    }

    /// Native: buffers of the process's memory that every connection accepted with the queue
    /// places its Sends into.
    fn shared_receive_queue(&self, params: SharedReceiveParams) -> Result<SoftSharedQueue> {
        SoftSharedQueue::new(params)
    }
}

/// A received MPA Request.
pub struct SoftRequest {
    stream: TcpStream,
    peer: SocketAddr,
    request: StartupFrame,
    config: SoftConfig,
    tap: Option<ConnTap>,
    /// Its place among the listener's [`SoftConfig::max_handshakes`], given back when the
    /// request is answered or dropped.
    _handshake: OwnedSemaphorePermit,
}

impl SoftRequest {
    /// A request read by a listener's handshake task, holding its place `handshake`.
    pub(super) fn new(
        stream: TcpStream,
        peer: SocketAddr,
        request: StartupFrame,
        config: SoftConfig,
        tap: Option<ConnTap>,
        handshake: OwnedSemaphorePermit,
    ) -> SoftRequest {
        SoftRequest {
            stream,
            peer,
            request,
            config,
            tap,
            _handshake: handshake,
        }
    }

    /// The raw MPA Request frame.
    pub fn frame(&self) -> &StartupFrame {
        &self.request
    }

    fn ulp_private_data(&self) -> &[u8] {
        if self.request.revision >= 2
            && self.request.enhanced
            && self.request.private_data.len() >= ENHANCED_LEN
        {
            &self.request.private_data[ENHANCED_LEN..]
        } else {
            &self.request.private_data
        }
    }
}

impl ConnectRequest for SoftRequest {
    type Conn = SoftConnection;
    type SharedQueue = SoftSharedQueue;

    fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    fn private_data(&self) -> &[u8] {
        self.ulp_private_data()
    }

    async fn accept(self, params: ConnectParams) -> Result<SoftConnection> {
        self.accept_with(params, |_| Ok(())).await
    }

    async fn accept_with<F>(self, params: ConnectParams, setup: F) -> Result<SoftConnection>
    where
        F: FnOnce(&SoftConnection) -> Result<()> + Send,
    {
        self.answer(params, None, setup).await
    }

    async fn accept_shared_with<F>(
        self,
        params: ConnectParams,
        queue: &SoftSharedQueue,
        setup: F,
    ) -> Result<SoftConnection>
    where
        F: FnOnce(&SoftConnection) -> Result<()> + Send,
    {
        self.answer(params, Some(queue.clone()), setup).await
    }

    async fn reject(mut self, private_data: &[u8]) -> Result<()> {
        check_private_data(&self.config, private_data)?;
        let reply = self.config.mpa.reject(&self.request, private_data);
        write_frame(&mut self.stream, &reply, self.tap.as_ref()).await?;
        let _ = self.stream.shutdown().await;
        Ok(())
    }
}

impl SoftRequest {
    /// Accepts, the connection's receives coming from `queue` when there is one.
    async fn answer<F>(
        mut self,
        params: ConnectParams,
        queue: Option<SoftSharedQueue>,
        setup: F,
    ) -> Result<SoftConnection>
    where
        F: FnOnce(&SoftConnection) -> Result<()> + Send,
    {
        let params = imitated(&self.config, params);
        check_private_data(&self.config, &params.private_data)?;
        let (reply, outcome) =
            self.config
                .mpa
                .respond(&self.request, &params.private_data, depths(&params));
        write_frame(&mut self.stream, &reply, self.tap.as_ref()).await?;
        match outcome {
            Ok(negotiated) => SoftConnection::start(
                self.stream,
                negotiated,
                &params,
                &self.config,
                self.tap,
                queue,
                setup,
            ),
            Err(refusal) => {
                let _ = self.stream.shutdown().await;
                Err(refusal_error(refusal))
            }
        }
    }
}

/// A connection of the soft provider.
pub struct SoftConnection {
    shared: Arc<Shared>,
    tags: Arc<TagTable>,
    /// [`SoftConfig::rekey`].
    rekey: bool,
    negotiated: Negotiated,
    local: SocketAddr,
    peer: SocketAddr,
    rx_task: Mutex<Option<JoinHandle<()>>>,
    tx_task: Mutex<Option<JoinHandle<()>>>,
    /// The shared receive queue the connection takes its receives from, if any.
    shared_rx: Option<SharedHolder>,
}

/// A connected pair (client, server) of the default provider on a loopback port, for the
/// crate's own tests.
#[cfg(test)]
pub(crate) async fn connected_pair() -> (SoftConnection, SoftConnection) {
    use crate::rdma::{ConnectParams, Listener, Provider};
    let provider = SoftProvider::default();
    let listener = provider
        .listen("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let (c, s) = tokio::join!(
        provider.connect(addr, ConnectParams::new()),
        listener.accept(ConnectParams::new())
    );
    (c.unwrap(), s.unwrap())
}

impl SoftConnection {
    /// The state the connection shares with its driver, for the driver's tests.
    #[cfg(test)]
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Builds the connection, runs `setup` on it, and only then starts reading the stream.
    fn start(
        stream: TcpStream,
        negotiated: Negotiated,
        params: &ConnectParams,
        config: &SoftConfig,
        tap: Option<ConnTap>,
        queue: Option<SoftSharedQueue>,
        setup: impl FnOnce(&SoftConnection) -> Result<()>,
    ) -> Result<SoftConnection> {
        let local = stream.local_addr()?;
        let peer = stream.peer_addr()?;
        let peer_ird = negotiated
            .peer_enhanced
            .map(|e| e.ird as u32)
            .filter(|&ird| ird > 0)
            .unwrap_or(params.ord);
        let cfg = CoreConfig {
            version: negotiated.version,
            tx: Framing {
                markers: negotiated.tx_markers,
                crc: negotiated.crc,
            },
            rx: Framing {
                markers: negotiated.rx_markers,
                crc: negotiated.crc,
            },
            mulpdu: config.mulpdu.clamp(64, u16::MAX as usize),
            sq_depth: params.send_queue_depth.max(1) as usize,
            rq_depth: params.recv_queue_depth.max(1) as usize,
            ord: params.ord.min(peer_ird).max(1) as usize,
            ird: params.ird.max(1) as usize,
            confirm: config.confirm_completions,
            gather_min: super::core::DEFAULT_GATHER_MIN,
        };
        tracing::debug!(
            target: crate::rpc::observe::CONNECTIONS,
            event = "mpa_negotiated",
            %peer,
            revision = negotiated.local_revision.min(negotiated.peer_revision),
            markers_sent = negotiated.tx_markers,
            markers_received = negotiated.rx_markers,
            crc = negotiated.crc,
            "MPA Full Operation"
        );
        let tags = Arc::new(TagTable::default());
        let mut core = Core::new(cfg, tags.clone());
        let shared_rx = queue.map(|queue| {
            let holder = queue.holder();
            let handle = holder.handle();
            core.use_shared(
                holder,
                params.recv_queue_depth as usize,
                queue.params().buffer_size,
            );
            handle
        });
        let shared = Shared::new(core, tap);
        let conn = SoftConnection {
            shared: shared.clone(),
            tags,
            rekey: config.rekey,
            negotiated,
            local,
            peer,
            rx_task: Mutex::new(None),
            tx_task: Mutex::new(None),
            shared_rx,
        };
        setup(&conn)?;
        let (rx_task, tx_task) = driver::spawn(shared, stream);
        *conn.rx_task.lock().unwrap_or_else(|e| e.into_inner()) = Some(rx_task);
        *conn.tx_task.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx_task);
        Ok(conn)
    }

    /// What MPA negotiation decided: revisions, DDP/RDMAP version, markers per direction, CRC.
    pub fn negotiated(&self) -> &Negotiated {
        &self.negotiated
    }

    /// How the tagged payloads this side received (RDMA Writes into its registrations, the
    /// responses to its RDMA Reads) reached their registrations: straight from the socket or
    /// copied out of the receive buffer.
    pub fn placement_stats(&self) -> PlacementStats {
        self.shared.core().placement_stats()
    }

    /// The Terminate this side received, if the peer terminated the connection.
    pub fn terminate_received(&self) -> Option<super::wire::rdmap::Terminate> {
        self.shared.core().terminate_received().cloned()
    }

    /// The Terminate this side sent, if it terminated the connection.
    pub fn terminate_sent(&self) -> Option<super::wire::rdmap::Terminate> {
        self.shared.core().terminate_sent().cloned()
    }
}

impl Connection for SoftConnection {
    fn register(&self, buf: Vec<u8>, access: Access) -> Result<MemoryRegion> {
        self.tags.register(buf, access)
    }

    fn register_zeroed(&self, len: usize, access: Access) -> Result<MemoryRegion> {
        self.tags.register_memory(RegionMemory::zeroed(len), access)
    }

    fn rekey(&self, mr: &MemoryRegion, remote: Access) -> Result<()> {
        if !self.rekey {
            return Err(Error::Unsupported(
                "rekeying (SoftConfig::rekey is off, as on a device without memory windows)".into(),
            ));
        }
        self.tags.rekey(mr, remote)
    }

    fn revoke(&self, mr: &MemoryRegion) -> Result<()> {
        self.tags.rekey(mr, Access::NONE)
    }

    fn takes_remote_invalidation(&self) -> bool {
        self.rekey
    }

    fn expect_write(&self, mr: &MemoryRegion) {
        self.shared.expect_write(mr);
    }

    fn post_recv(&self, wr: RecvWr) -> Result<()> {
        self.shared.core().post_recv(wr)
    }

    fn take_shared<R>(&self, c: &Completion, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        match &self.shared_rx {
            Some(holder) => holder.take(c, f),
            None => Err(Error::Unsupported(
                "taking a shared receive on a connection without a shared queue".into(),
            )),
        }
    }

    fn limit_shared_receives(&self, most: usize) {
        self.shared.core().limit_shared(most);
    }

    fn post_send(&self, wr: SendWr) -> Result<()> {
        self.shared.post_send(wr)
    }

    fn post_sends(&self, wrs: Vec<SendWr>) -> Result<()> {
        self.shared.post_sends(wrs)
    }

    fn poll_completion(&self) -> impl std::future::Future<Output = Completion> + Send {
        self.shared.next_completion()
    }

    fn try_completion(&self) -> Option<Completion> {
        self.shared.take_completion()
    }

    /// The hook runs where the provider learns of completions: mostly in the connection's
    /// receive task, right after it fed the core.
    fn set_completion_hook(&self, hook: CompletionHook) -> bool {
        let set = self.shared.hook.set(hook).is_ok();
        if set {
            self.shared.core().set_hooked();
        }
        set
    }

    /// The calling task reads the stream itself (see the driver's `Receiver`).
    fn poll_input(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        self.shared.poll_input(cx)
    }

    fn end_input(&self, waker: &std::task::Waker) {
        self.shared.end_input(waker);
    }

    fn peer_private_data(&self) -> &[u8] {
        &self.negotiated.peer_private_data
    }

    fn local_addr(&self) -> SocketAddr {
        self.local
    }

    fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    fn is_connected(&self) -> bool {
        self.shared.core().state() == State::Established
    }

    async fn disconnect(&self) -> Result<()> {
        self.shared.core().close();
        self.shared.kick();
        let task = self
            .tx_task
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(task) = task {
            let _ = task.await;
        }
        Ok(())
    }
}

impl Drop for SoftConnection {
    fn drop(&mut self) {
        self.shared.core().close();
        self.shared.kick();
        if let Some(holder) = &self.shared_rx {
            // Closed under the core's lock: no Send takes a buffer from here on.
            holder.release_all();
        }
        if let Some(task) = self
            .rx_task
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            task.abort();
        }
    }
}

//! The verbs provider: real RDMA hardware or Soft-RoCE through libibverbs and rdma_cm
//! (feature `verbs`, on `rdma-sys`).
//!
//! * Connections are made with rdma_cm in the reliable-connected port space (`RDMA_PS_TCP`),
//!   carrying the contract's private data in the CM messages (see [`private_data`] for the
//!   one-byte length framing and the limits).
//! * Each connection owns a protection domain, a completion queue whose completion channel is
//!   driven by tokio's `AsyncFd` (every event is consumed until `EAGAIN`, every completion of a
//!   batch is kept), and an RC queue pair. Ownership mirrors the verbs object tree: each object
//!   holds an `Arc` of its parent and destroys itself in `Drop`.
//! * Remotely accessible registrations advertise the rkey of a type-2 memory window bound over
//!   the memory region, so a peer's Send with Invalidate and a local invalidate revoke it (a
//!   plain user memory region cannot be invalidated).
//! * Registering remotely accessible memory posts the window bind and waits for its completion
//!   (microseconds on rxe; the caller's thread spins meanwhile), so the returned rkey is usable
//!   at once. [`live_registrations`] and [`live_objects`] count what is alive, for leak checks.
//! * [`Connection::rekey`](crate::rdma::Connection::rekey) binds the region's window again with
//!   a new key and the requested rights, waiting likewise. A window is only bound again when
//!   it is known to be free (a local invalidate of its key was posted, a peer's Send with
//!   Invalidate of it was polled, or it was rekeyed to `Access::NONE`); one that may still be
//!   bound is replaced by a new window (the old one deallocated, its key revoked at once),
//!   because binding a bound type-2 window fails and invalidating a free one crashes Linux 6.1
//!   rxe. On devices without memory windows (siw) `rekey` answers `Unsupported`.
//! * Receive completions never report `solicited`: `ibv_wc` carries no such flag (verbs only
//!   offers solicited-only CQ notification).
//! * `connect_with`/`accept_with` run their setup on the queue pair before `rdma_connect` /
//!   `rdma_accept`, so receives are in place for the peer's first Send; a remotely accessible
//!   registration made there gets its key at once and its window bound at establishment (a
//!   bind is a send-queue operation). Besides, a Send that reaches a queue pair before its
//!   receive is posted draws a "receiver not ready" NAK and is retried without limit
//!   (`rnr_retry_count` 7), so it is never lost.
//! * Where no RDMA device exists, [`Provider::connect`] and [`Provider::listen`] fail at once
//!   with a [`VerbsError::NoDevice`] (wrapped in [`Error::Provider`]); see [`is_no_device`].
//!
//! `tests/vm/run provider` runs the conformance suite against this provider on Soft-RoCE in a
//! QEMU guest.

mod cm;
mod conn;
pub mod private_data;
mod removal;
mod resources;
mod shared_receive;

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use rdma_sys::*;

use self::cm::{std_to_sockaddr, CmEvent, CmId, EventChannel};
use self::conn::{Parts, Shape, SPARE_SEND_SLOTS};
use self::private_data::Framing;
use self::resources::{CompletionQueue, DeviceLimits, ProtectionDomain, QueuePair, QueuePairCaps};
use crate::rdma::{
    ConnectParams, ConnectRequest, Error, Listener, Provider, Result, SharedReceiveParams,
};

pub use self::conn::VerbsConnection;
pub use self::removal::live_registrations_on;
use self::shared_receive::DeviceQueue;
pub use self::shared_receive::VerbsSharedQueue;

/// rdma_cm address and route resolution timeout: 5 s, as the Linux kernel's RPC-over-RDMA
/// client and SMB Direct give it. A guest under load (TCG, many connections at once) can take
/// longer than the 2 s of rping and perftest.
const RESOLVE_TIMEOUT_MS: i32 = 5000;
/// How long connection establishment may take before it is abandoned.
const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(30);
/// Sends and RDMA Writes up to this many bytes are posted inline (copied into the work
/// request, as perftest does for small messages); the device may grant less.
const MAX_INLINE: u32 = 128;
/// Gather elements per send-queue request.
const MAX_SEND_SGE: u32 = conn::MAX_SGE as u32;

/// Failures specific to the verbs provider (carried in [`Error::Provider`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerbsError {
    /// libibverbs lists no RDMA device, or the kernel has no rdma_cm.
    #[error("no RDMA device: {0} (load a driver, e.g. `modprobe rdma_rxe` and `rdma link add rxe0 type rxe netdev IFACE`, or use the `soft` provider)")]
    NoDevice(String),
}

/// True when `err` is the verbs provider's "no RDMA device" error.
pub fn is_no_device(err: &Error) -> bool {
    matches!(err, Error::Provider(e) if matches!(e.downcast_ref::<VerbsError>(), Some(VerbsError::NoDevice(_))))
}

fn no_device(why: impl Into<String>) -> Error {
    Error::Provider(Box::new(VerbsError::NoDevice(why.into())))
}

/// The number of live memory registrations and memory windows made by this provider in this
/// process (for leak checks: it returns to its old value once every region is dropped).
pub fn live_registrations() -> usize {
    resources::LIVE_REGISTRATIONS.load(Ordering::SeqCst)
}

/// The number of live rdma_cm and verbs objects other than registrations (event channels,
/// identifiers, protection domains, completion queues, queue pairs) of this provider in this
/// process, for leak checks.
pub fn live_objects() -> usize {
    resources::LIVE_OBJECTS
        .iter()
        .map(|n| n.load(Ordering::SeqCst))
        .sum()
}

/// [`live_objects`] by kind, for diagnostics.
#[cfg(test)]
fn live_objects_by_kind() -> String {
    use resources::Object::*;
    [
        EventChannel,
        CmId,
        ProtectionDomain,
        CompletionQueue,
        QueuePair,
    ]
    .iter()
    .map(|&k| {
        format!(
            "{k:?} {}",
            resources::LIVE_OBJECTS[k as usize].load(Ordering::SeqCst)
        )
    })
    .collect::<Vec<_>>()
    .join(", ")
}

/// The RDMA devices libibverbs sees, by name.
pub fn device_names() -> Vec<String> {
    let mut n = 0;
    // SAFETY: returns an array of `n` device pointers (or null), freed below.
    let list = unsafe { ibv_get_device_list(&mut n) };
    if list.is_null() {
        return Vec::new();
    }
    let mut names = Vec::new();
    for i in 0..n.max(0) as usize {
        // SAFETY: `i < n`; names are NUL-terminated strings owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ibv_get_device_name(*list.add(i))) };
        names.push(name.to_string_lossy().into_owned());
    }
    // SAFETY: the list came from ibv_get_device_list and is not used afterwards.
    unsafe { ibv_free_device_list(list) };
    names
}

/// Fails with [`VerbsError::NoDevice`] unless libibverbs lists a device.
fn ensure_device() -> Result<()> {
    if device_names().is_empty() {
        return Err(no_device("libibverbs lists no devices"));
    }
    Ok(())
}

/// Opens an event channel, reporting a missing rdma_cm as "no RDMA device".
fn open_channel() -> Result<Arc<EventChannel>> {
    EventChannel::new().map_err(|e| match e.raw_os_error() {
        Some(libc::ENODEV) | Some(libc::ENOENT) | Some(libc::ENXIO) => {
            no_device(format!("cannot open the rdma_cm device: {e}"))
        }
        _ => Error::Io(e),
    })
}

/// The verbs provider. Cheap to create; it holds no resources.
#[derive(Clone, Debug, Default)]
pub struct VerbsProvider {
    _private: (),
}

impl VerbsProvider {
    /// A provider on whatever RDMA device rdma_cm resolves the addresses to.
    pub fn new() -> VerbsProvider {
        VerbsProvider::default()
    }
}

/// Waits for the next event on `id`'s channel, bounded by [`ESTABLISH_TIMEOUT`].
async fn next_event(channel: &EventChannel, what: &str) -> Result<CmEvent> {
    match tokio::time::timeout(ESTABLISH_TIMEOUT, channel.next_event()).await {
        Ok(r) => r.map_err(Error::Io),
        Err(_) => Err(Error::TimedOut(format!("waiting for {what}"))),
    }
}

/// Waits for `want` on the channel, turning the failure events into errors (a reject's private
/// data decoded with `framing`).
async fn expect_event(
    channel: &EventChannel,
    want: rdma_cm_event_type::Type,
    what: &str,
    framing: Framing,
) -> Result<CmEvent> {
    use rdma_cm_event_type::*;
    loop {
        let ev = next_event(channel, what).await?;
        if ev.kind == want {
            return Ok(ev);
        }
        match ev.kind {
            RDMA_CM_EVENT_REJECTED if framing.consumer_reject(ev.status) => {
                return Err(Error::Rejected {
                    private_data: framing.decode(&ev.private_data).to_vec(),
                })
            }
            RDMA_CM_EVENT_REJECTED => {
                return Err(Error::Establishment(format!(
                    "{what}: connection refused (CM reject reason {})",
                    ev.status
                )))
            }
            RDMA_CM_EVENT_ADDR_ERROR
            | RDMA_CM_EVENT_ROUTE_ERROR
            | RDMA_CM_EVENT_CONNECT_ERROR
            | RDMA_CM_EVENT_UNREACHABLE
            | RDMA_CM_EVENT_DEVICE_REMOVAL => {
                let status = io::Error::from_raw_os_error(ev.status.saturating_abs());
                if ev.kind == RDMA_CM_EVENT_ADDR_ERROR && ev.status.saturating_abs() == libc::ENODEV
                {
                    return Err(no_device(format!(
                        "{what}: no RDMA device serves the address"
                    )));
                }
                return Err(Error::Establishment(format!(
                    "{what}: rdma_cm event {} ({status})",
                    ev.kind
                )));
            }
            // Stray events (e.g. for an earlier identifier) are ignored.
            _ => {}
        }
    }
}

/// Protection domain, completion queue and queue pair for an identifier bound to a device
/// whose `limits` were queried (once per connection: they also decide its private data).
fn build(
    id: &Arc<CmId>,
    params: &ConnectParams,
    limits: DeviceLimits,
    shared: Option<Arc<DeviceQueue>>,
) -> Result<(Parts, DeviceLimits)> {
    let cap = limits.max_qp_wr.saturating_sub(SPARE_SEND_SLOTS).max(1);
    let send_depth = params.send_queue_depth.clamp(1, cap);
    let recv_depth = params.recv_queue_depth.clamp(1, limits.max_qp_wr.max(1));
    let send_wr = send_depth + SPARE_SEND_SLOTS;
    let cqe = (send_wr + recv_depth).min(limits.max_cqe.max(1));
    let send_sge = MAX_SEND_SGE.min(limits.max_sge.max(1));
    let (pd, srq) = match &shared {
        Some(queue) => (queue.pd.clone(), queue.raw()),
        None => (ProtectionDomain::new(id)?, std::ptr::null_mut()),
    };
    let cq = CompletionQueue::new(id, cqe)?;
    let caps = QueuePairCaps {
        send_wr,
        recv_wr: recv_depth,
        send_sge,
        max_inline: MAX_INLINE,
        srq,
    };
    let qp = QueuePair::new(id, &pd, &cq, caps)?;
    let shape = Shape {
        send_depth: send_depth as usize,
        recv_depth: recv_depth as usize,
        max_send_sge: send_sge as usize,
        max_inline: qp.max_inline as usize,
        rxe: is_rxe(id),
        windows: limits.windows,
        iwarp: framing_of(id) == Framing::Exact,
    };
    let parts = Parts {
        id: id.clone(),
        pd,
        cq,
        qp,
        shape,
        shared,
    };
    Ok((parts, limits))
}

/// How private data travels on the identifier's device (see [`private_data`]); a length octet
/// before the identifier is bound to a device.
fn framing_of(id: &CmId) -> Framing {
    let ctx = id.context();
    if ctx.is_null() {
        return Framing::LengthOctet;
    }
    // SAFETY: a bound identifier has a live context and device.
    let transport = unsafe { (*(*ctx).device).transport_type };
    Framing::for_transport(transport == ibv_transport_type::IBV_TRANSPORT_IWARP)
}

/// True when the identifier's device is Soft-RoCE (`rxe*`).
fn is_rxe(id: &CmId) -> bool {
    let ctx = id.context();
    // SAFETY: a bound identifier has a live context whose device name is a C string.
    let name = unsafe { std::ffi::CStr::from_ptr(ibv_get_device_name((*ctx).device)) };
    name.to_bytes().starts_with(b"rxe")
}

/// The rdma_cm connection parameters (private data already framed into `framed`).
fn conn_param(params: &ConnectParams, limits: &DeviceLimits, framed: &[u8]) -> rdma_conn_param {
    // SAFETY: all-zero is a valid starting point.
    let mut p: rdma_conn_param = unsafe { std::mem::zeroed() };
    p.private_data = framed.as_ptr().cast();
    p.private_data_len = framed.len() as u8;
    // IRD: RDMA Reads the peer may have outstanding here; ORD: ours at the peer.
    p.responder_resources = params.ird.min(limits.max_qp_rd_atom).min(255) as u8;
    p.initiator_depth = params.ord.min(limits.max_qp_init_rd_atom).min(255) as u8;
    p.retry_count = 7;
    // 7 = retry forever while the peer has no receive posted.
    p.rnr_retry_count = 7;
    p
}

fn addr_of(id: &CmId, fallback: SocketAddr) -> SocketAddr {
    id.local_addr().unwrap_or(fallback)
}

impl Provider for VerbsProvider {
    type Conn = VerbsConnection;
    type Listener = VerbsListener;
    type SharedQueue = VerbsSharedQueue;

    fn name(&self) -> &'static str {
        "verbs"
    }

    async fn connect(&self, addr: SocketAddr, params: ConnectParams) -> Result<VerbsConnection> {
        self.connect_with(addr, params, |_| Ok(())).await
    }

    /// Runs `setup` on the queue pair before `rdma_connect`: receives it posts are in place for
    /// the peer's first Send; remotely accessible registrations get their keys at once and
    /// their windows bound right after establishment (before this returns).
    async fn connect_with<F>(
        &self,
        addr: SocketAddr,
        params: ConnectParams,
        setup: F,
    ) -> Result<VerbsConnection>
    where
        F: FnOnce(&VerbsConnection) -> Result<()> + Send,
    {
        ensure_device()?;
        private_data::check(&params.private_data, private_data::MAX_CONNECT)?;
        let channel = open_channel()?;
        let id = Arc::new(CmId::new(&channel)?);
        let mut dst = std_to_sockaddr(addr);
        // SAFETY: the identifier is live; `dst` is a valid socket address.
        if unsafe {
            rdma_resolve_addr(
                id.raw(),
                std::ptr::null_mut(),
                (&mut dst as *mut libc::sockaddr_storage).cast(),
                RESOLVE_TIMEOUT_MS,
            )
        } != 0
        {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENODEV) {
                return Err(no_device(format!("no RDMA device routes to {addr}")));
            }
            return Err(Error::Io(e));
        }
        expect_event(
            &channel,
            rdma_cm_event_type::RDMA_CM_EVENT_ADDR_RESOLVED,
            "address resolution",
            Framing::LengthOctet,
        )
        .await?;
        // Bound to a device now: its transport decides the private data's framing, and its
        // memory windows whether the peer may invalidate our keys.
        let framing = framing_of(&id);
        let device = DeviceLimits::query(&id)?;
        let windows = device.windows;
        let data = params.private_data_for(windows);
        private_data::check(data, private_data::MAX_CONNECT)?;
        let framed = framing.encode(data, private_data::MAX_CONNECT)?;
        // SAFETY: the address is resolved.
        if unsafe { rdma_resolve_route(id.raw(), RESOLVE_TIMEOUT_MS) } != 0 {
            return Err(Error::Io(io::Error::last_os_error()));
        }
        expect_event(
            &channel,
            rdma_cm_event_type::RDMA_CM_EVENT_ROUTE_RESOLVED,
            "route resolution",
            framing,
        )
        .await?;
        let (parts, limits) = build(&id, &params, device, None)?;
        let mut conn = VerbsConnection::new(parts, addr_of(&id, addr), addr);
        setup(&conn)?;
        {
            let mut param = conn_param(&params, &limits, &framed);
            // SAFETY: the identifier has a queue pair; `param` points at `framed`, alive here.
            if unsafe { rdma_connect(id.raw(), &mut param) } != 0 {
                return Err(Error::Io(io::Error::last_os_error()));
            }
        }
        let ev = expect_event(
            &channel,
            rdma_cm_event_type::RDMA_CM_EVENT_ESTABLISHED,
            "connection establishment",
            framing,
        )
        .await?;
        let peer_data = framing.decode(&ev.private_data).to_vec();
        let local = addr_of(&id, addr);
        let peer = id.peer_addr().unwrap_or(addr);
        conn.established(peer_data, local, peer)?;
        Ok(conn)
    }

    /// One `ibv_create_srq` per device, made with the first connection accepted with the
    /// queue on that device (see [`VerbsSharedQueue`]).
    fn shared_receive_queue(&self, params: SharedReceiveParams) -> Result<VerbsSharedQueue> {
        VerbsSharedQueue::new(params)
    }

    async fn listen(&self, addr: SocketAddr) -> Result<VerbsListener> {
        ensure_device()?;
        let channel = open_channel()?;
        let id = bind_and_listen(&channel, addr)?;
        let local = addr_of(&id, addr);
        Ok(VerbsListener {
            id: std::sync::Mutex::new(Some(id)),
            channel,
            addr,
            local,
        })
    }
}

/// A listening identifier on `channel`, bound to `addr`.
fn bind_and_listen(channel: &Arc<EventChannel>, addr: SocketAddr) -> Result<CmId> {
    let id = CmId::new(channel)?;
    let mut sa = std_to_sockaddr(addr);
    // SAFETY: the identifier is live; `sa` is a valid socket address.
    if unsafe { rdma_bind_addr(id.raw(), (&mut sa as *mut libc::sockaddr_storage).cast()) } != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENODEV) {
            return Err(no_device(format!("no RDMA device has the address {addr}")));
        }
        return Err(Error::Io(e));
    }
    // SAFETY: bound identifier.
    if unsafe { rdma_listen(id.raw(), 128) } != 0 {
        return Err(Error::Io(io::Error::last_os_error()));
    }
    Ok(id)
}

/// How often a listener whose device was removed tries its address again.
const LISTEN_AGAIN_EVERY: Duration = Duration::from_secs(1);

/// A listening rdma_cm identifier.
pub struct VerbsListener {
    /// The listening identifier; `None` while its device is gone.
    id: std::sync::Mutex<Option<CmId>>,
    channel: Arc<EventChannel>,
    /// The address asked for, to listen on again after a device removal.
    addr: SocketAddr,
    local: SocketAddr,
}

impl VerbsListener {
    /// The listening identifier's handle (null while there is none).
    fn listening(&self) -> *mut rdma_cm_id {
        let id = self.id.lock().unwrap_or_else(|e| e.into_inner());
        id.as_ref().map_or(std::ptr::null_mut(), |id| id.raw())
    }

    /// The device under a listener bound to one of its addresses was removed: the identifier
    /// is dead, and the address may come back with a device (`rdma link add`, a NIC plugged
    /// back in). Listens again as soon as it can; a wildcard listener never gets here, as
    /// rdma_cm keeps it listening on every device, present and future.
    async fn listen_again(&self) {
        drop(self.id.lock().unwrap_or_else(|e| e.into_inner()).take());
        tracing::warn!(
            target: crate::rpc::observe::CONNECTIONS,
            event = "device_removed",
            local = %self.local,
            "the RDMA device under this listener was removed: listening again when the address \
             has a device"
        );
        loop {
            tokio::time::sleep(LISTEN_AGAIN_EVERY).await;
            match bind_and_listen(&self.channel, self.addr) {
                Ok(id) => {
                    *self.id.lock().unwrap_or_else(|e| e.into_inner()) = Some(id);
                    tracing::info!(
                        target: crate::rpc::observe::CONNECTIONS,
                        event = "listening_again",
                        local = %self.local,
                        "listening again after a device removal"
                    );
                    return;
                }
                Err(e) => tracing::debug!(error = %e, addr = %self.addr, "not yet"),
            }
        }
    }
}

impl std::fmt::Debug for VerbsListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsListener")
            .field("local", &self.local)
            .finish()
    }
}

impl Listener for VerbsListener {
    type Conn = VerbsConnection;
    type Request = VerbsRequest;

    fn local_addr(&self) -> Result<SocketAddr> {
        Ok(self.local)
    }

    /// The next connect request, as soon as rdma_cm delivers it: the kernel's connection
    /// manager has already received the whole request (an IB CM REQ, or the MPA Request under
    /// iWARP), so nothing here waits on the peer, and the caller can answer in a task of its
    /// own (the RPC-over-RDMA server does). A request is answered on an event channel of its
    /// own (see [`VerbsRequest::accept_with`]); until then its identifier's events arrive here
    /// and are skipped, which loses nothing: an initiator that vanishes before the answer
    /// leaves a REJ (IB CM) or a closed stream (iWARP) behind, and `rdma_accept` then fails at
    /// once; one that vanishes later is seen on the request's own channel, or at worst when
    /// the establishment timeout (30 s) ends the wait and destroys the identifier.
    async fn next_request(&self) -> Result<VerbsRequest> {
        loop {
            let ev = self.channel.next_event().await?;
            if ev.kind == rdma_cm_event_type::RDMA_CM_EVENT_DEVICE_REMOVAL
                && !ev.id.is_null()
                && ev.id == self.listening()
            {
                self.listen_again().await;
                continue;
            }
            if ev.kind != rdma_cm_event_type::RDMA_CM_EVENT_CONNECT_REQUEST {
                continue;
            }
            // SAFETY: a CONNECT_REQUEST hands us a new identifier on the listener's channel;
            // the request owns it from here on.
            let id = unsafe { CmId::adopt(ev.id, &self.channel) };
            let peer = id.peer_addr().unwrap_or(self.local);
            let framing = framing_of(&id);
            let private_data = framing.decode(&ev.private_data).to_vec();
            // On InfiniBand and RoCE the connection manager hands the request's depths over
            // from this side's point of view (ib_cm swaps them): `initiator_depth` is the
            // peer's responder resources, what this side may initiate. The Linux kernel's
            // client asks for initiator depth 0 and offers its device's full IRD; read as
            // written, that left this server no RDMA Read at all and its first Read chunk
            // hung. Under iWARP (Linux siw, tested in the guest) `responder_resources` carries
            // the peer's IRD.
            let (peer_ird, peer_ord) = match framing {
                Framing::LengthOctet => (ev.initiator_depth, ev.responder_resources),
                Framing::Exact => (ev.responder_resources, ev.initiator_depth),
            };
            return Ok(VerbsRequest {
                id: Some(id),
                peer,
                private_data,
                peer_ird,
                peer_ord,
            });
        }
    }
}

/// A connection request received by a [`VerbsListener`].
pub struct VerbsRequest {
    id: Option<CmId>,
    peer: SocketAddr,
    private_data: Vec<u8>,
    /// The requester's inbound RDMA Read depth: bounds our outbound depth.
    peer_ird: u8,
    /// The requester's outbound RDMA Read depth: our inbound depth need not exceed it.
    peer_ord: u8,
}

impl std::fmt::Debug for VerbsRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsRequest")
            .field("peer", &self.peer)
            .field("private_data", &self.private_data)
            .finish()
    }
}

impl ConnectRequest for VerbsRequest {
    type Conn = VerbsConnection;
    type SharedQueue = VerbsSharedQueue;

    fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    fn private_data(&self) -> &[u8] {
        &self.private_data
    }

    async fn accept(self, params: ConnectParams) -> Result<VerbsConnection> {
        self.accept_with(params, |_| Ok(())).await
    }

    /// Runs `setup` on the queue pair before `rdma_accept` (see
    /// [`VerbsProvider::connect_with`](Provider::connect_with)).
    async fn accept_with<F>(self, params: ConnectParams, setup: F) -> Result<VerbsConnection>
    where
        Self: Sized,
        F: FnOnce(&VerbsConnection) -> Result<()> + Send,
    {
        self.answer(params, None, setup).await
    }

    /// As [`accept_with`](ConnectRequest::accept_with), on the device's queue of `queue`
    /// (made by the first connection from that device; see [`VerbsSharedQueue`]). A device
    /// without memory windows is refused with [`Error::Unsupported`].
    async fn accept_shared_with<F>(
        self,
        params: ConnectParams,
        queue: &VerbsSharedQueue,
        setup: F,
    ) -> Result<VerbsConnection>
    where
        F: FnOnce(&VerbsConnection) -> Result<()> + Send,
    {
        self.answer(params, Some(queue), setup).await
    }

    async fn reject(mut self, data: &[u8]) -> Result<()> {
        private_data::check(data, private_data::MAX_REJECT)?;
        let id = self.id.take().ok_or(Error::Closed)?;
        let framed = framing_of(&id).encode(data, private_data::MAX_REJECT)?;
        // SAFETY: live identifier of a pending request; `framed` outlives the call.
        if unsafe { rdma_reject(id.raw(), framed.as_ptr().cast(), framed.len() as u8) } != 0 {
            return Err(Error::Io(io::Error::last_os_error()));
        }
        Ok(())
    }
}

impl VerbsRequest {
    /// Accepts, the connection's receives coming from `queue` when there is one.
    async fn answer<F>(
        mut self,
        params: ConnectParams,
        queue: Option<&VerbsSharedQueue>,
        setup: F,
    ) -> Result<VerbsConnection>
    where
        F: FnOnce(&VerbsConnection) -> Result<()> + Send,
    {
        private_data::check(&params.private_data, private_data::MAX_ACCEPT)?;
        let id = self.id.take().ok_or(Error::Closed)?;
        let framing = framing_of(&id);
        let device = DeviceLimits::query(&id)?;
        let windows = device.windows;
        let data = params.private_data_for(windows);
        private_data::check(data, private_data::MAX_ACCEPT)?;
        let framed = framing.encode(data, private_data::MAX_ACCEPT)?;
        // The connection gets its own event channel, so its events (establishment, the peer's
        // disconnect) never mix with the listener's.
        let channel = open_channel()?;
        let id = Arc::new(id.migrate(&channel)?);
        let shared = match queue {
            // The connections on a device's queue share its protection domain: only windows
            // keep each peer to its own keys (see `shared_receive`).
            Some(_) if !windows => {
                return Err(Error::Unsupported(
                    "a shared receive queue on a device without memory windows (a region's \
                     own key would reach every connection on the queue)"
                        .into(),
                ))
            }
            Some(queue) => Some(queue.on_device_of(&id)?),
            None => None,
        };
        let (parts, limits) = build(&id, &params, device, shared)?;
        let mut conn = VerbsConnection::new(parts, addr_of(&id, self.peer), self.peer);
        setup(&conn)?;
        {
            let mut param = conn_param(&params, &limits, &framed);
            // The accepting side settles the depths (rdma_cm: responder_resources at most the
            // requester's initiator_depth, initiator_depth at most its responder_resources).
            // An iWARP request reports 0 for a depth it does not carry: MPA revision 1 has no
            // IRD/ORD (RFC 6581 section 4 added them), and clamping to that 0 would leave this
            // side unable to answer (or issue) any RDMA Read: Linux siw terminates the first.
            let unknown = |depth: u8| framing == Framing::Exact && depth == 0;
            if !unknown(self.peer_ord) {
                param.responder_resources = param.responder_resources.min(self.peer_ord);
            }
            if !unknown(self.peer_ird) {
                param.initiator_depth = param.initiator_depth.min(self.peer_ird);
            }
            // SAFETY: the identifier has a queue pair; `param` points at `framed`, alive here.
            if unsafe { rdma_accept(id.raw(), &mut param) } != 0 {
                return Err(Error::Io(io::Error::last_os_error()));
            }
        }
        expect_event(
            &channel,
            rdma_cm_event_type::RDMA_CM_EVENT_ESTABLISHED,
            "connection establishment",
            framing,
        )
        .await?;
        let local = addr_of(&id, self.peer);
        let peer_data = std::mem::take(&mut self.private_data);
        conn.established(peer_data, local, self.peer)?;
        Ok(conn)
    }
}

impl Drop for VerbsRequest {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            // A request dropped undecided is rejected without private data.
            // SAFETY: live identifier of a pending request.
            unsafe { rdma_reject(id.raw(), std::ptr::null(), 0) };
        }
    }
}

#[cfg(all(test, feature = "conformance", feature = "transport"))]
mod handshake_tests;
#[cfg(test)]
mod tests;
#[cfg(all(test, feature = "conformance", feature = "transport"))]
mod transport_tests;

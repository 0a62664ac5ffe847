//! rdma_cm objects: the event channel (driven by tokio `AsyncFd`) and the connection identifier.

use std::io;
use std::mem::ManuallyDrop;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, RawFd};
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Arc;

use rdma_sys::*;
use tokio::io::unix::AsyncFd;

use super::resources::{track, untrack, Object};
use tokio::io::Interest;

/// A raw file descriptor owned by someone else (the channel closes it).
struct BorrowedFd(RawFd);

impl AsRawFd for BorrowedFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// Puts `fd` into non-blocking mode so that reads return `EAGAIN` instead of sleeping.
pub(super) fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor we were handed by libibverbs/librdmacm; no memory involved.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A readiness source for a descriptor of libibverbs or librdmacm. It can be given up while
/// shared ([`Readiness::stop`]): a completion channel must be closed when its device goes
/// away, and the reactor must let go of the descriptor before it is closed.
pub(super) struct Readiness(tokio::sync::RwLock<Option<AsyncFd<BorrowedFd>>>);

impl Readiness {
    /// Registers `fd` (made non-blocking) with the tokio reactor of the current runtime.
    pub(super) fn new(fd: RawFd) -> io::Result<Readiness> {
        set_nonblocking(fd)?;
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(io::Error::other(
                "the verbs provider must run inside a tokio runtime",
            ));
        }
        // SAFETY: the descriptor belongs to a channel that outlives this registration: owners
        // call `release` or `stop` before closing it.
        let fd = unsafe { AsyncFd::register_with_interest(BorrowedFd(fd), Interest::READABLE) }
            .map_err(|e| io::Error::other(e.to_string()))?;
        Ok(Readiness(tokio::sync::RwLock::new(Some(fd))))
    }

    /// Calls `op` until it stops returning `WouldBlock`, waiting for readability in between;
    /// fails once the readiness was given up.
    pub(super) async fn read_with<T>(
        &self,
        mut op: impl FnMut() -> io::Result<T>,
    ) -> io::Result<T> {
        self.until_done(|| match op() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            other => other.map(|value| Some((value, false))),
        })
        .await
    }

    /// Calls `op`, which reads the descriptor until `EAGAIN` and says how many events it
    /// read, until it read one, waiting for readability in between; fails once the readiness
    /// was given up. The readiness is cleared with the read that found the descriptor empty,
    /// so that the next wait sleeps at once instead of first reading an empty descriptor (a
    /// system call per wake-up). An event that came in since the wait stays ready: tokio
    /// clears only the readiness that wait saw.
    pub(super) async fn drain_with(
        &self,
        mut op: impl FnMut() -> io::Result<u32>,
    ) -> io::Result<()> {
        self.until_done(|| Ok((op()? > 0).then_some(((), true))))
            .await
    }

    /// Waits for readability and calls `op` until it gives a value (`None`: the descriptor is
    /// empty, wait again) and whether it left the descriptor empty (clear the readiness).
    async fn until_done<T>(
        &self,
        mut op: impl FnMut() -> io::Result<Option<(T, bool)>>,
    ) -> io::Result<T> {
        let guard = self.0.read().await;
        let fd = guard.as_ref().ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotConnected, "the descriptor was given up")
        })?;
        loop {
            let mut ready = fd.readable().await?;
            match op()? {
                Some((value, emptied)) => {
                    if emptied {
                        ready.clear_ready();
                    }
                    return Ok(value);
                }
                None => ready.clear_ready(),
            }
        }
    }

    /// Deregisters from the reactor; call before the descriptor is closed.
    pub(super) fn release(&mut self) {
        drop(self.0.get_mut().take());
    }

    /// Deregisters from the reactor while shared, once every `read_with` running has returned
    /// (their callers must be woken some other way); later ones fail.
    pub(super) async fn stop(&self) {
        drop(self.0.write().await.take());
    }

    /// [`Readiness::stop`] if no `read_with` is running; false otherwise.
    pub(super) fn try_stop(&self) -> bool {
        match self.0.try_write() {
            Ok(mut fd) => {
                drop(fd.take());
                true
            }
            Err(_) => false,
        }
    }
}

/// An rdma_cm event channel (`rdma_create_event_channel`): the descriptor on which the events of
/// the identifiers bound to it arrive.
pub(super) struct EventChannel {
    raw: *mut rdma_event_channel,
    readiness: Readiness,
}

// SAFETY: librdmacm event channels may be used from any thread; `raw` is never aliased mutably.
unsafe impl Send for EventChannel {}
// SAFETY: as above; reading events is serialised by the kernel.
unsafe impl Sync for EventChannel {}

/// The parts of an rdma_cm event this provider uses, copied out before the event is acknowledged.
#[derive(Debug)]
pub(super) struct CmEvent {
    pub(super) kind: rdma_cm_event_type::Type,
    pub(super) status: i32,
    pub(super) id: *mut rdma_cm_id,
    pub(super) private_data: Vec<u8>,
    pub(super) responder_resources: u8,
    pub(super) initiator_depth: u8,
}

// SAFETY: the identifier is only a handle copied out of the event (every use of it is an
// unsafe call whose caller owns the identifier); the rest is owned data.
unsafe impl Send for CmEvent {}

impl EventChannel {
    /// Opens a channel (fails with `ENODEV`/`ENOENT` when the kernel has no rdma_cm).
    pub(super) fn new() -> io::Result<Arc<EventChannel>> {
        // SAFETY: plain constructor; null means failure with errno set.
        let raw = unsafe { rdma_create_event_channel() };
        if raw.is_null() {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a live channel.
        let fd = unsafe { (*raw).fd };
        match Readiness::new(fd) {
            Ok(readiness) => {
                track(Object::EventChannel);
                Ok(Arc::new(EventChannel { raw, readiness }))
            }
            Err(e) => {
                // SAFETY: no identifier was created on the channel yet.
                unsafe { rdma_destroy_event_channel(raw) };
                Err(e)
            }
        }
    }

    pub(super) fn raw(&self) -> *mut rdma_event_channel {
        self.raw
    }

    /// The next event; it is acknowledged (released) before this returns.
    pub(super) async fn next_event(&self) -> io::Result<CmEvent> {
        self.readiness
            .read_with(|| {
                let mut event = ptr::null_mut();
                // SAFETY: the channel is live and non-blocking; `event` receives an event we
                // acknowledge below after copying what we need.
                if unsafe { rdma_get_cm_event(self.raw, &mut event) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                // SAFETY: `event` is valid until rdma_ack_cm_event.
                let ev = unsafe { &*event };
                // SAFETY: the `conn` member is the active one for the connected port space.
                let conn = unsafe { &ev.param.conn };
                let private_data = if conn.private_data.is_null() {
                    Vec::new()
                } else {
                    // SAFETY: librdmacm guarantees `private_data_len` readable bytes.
                    unsafe {
                        std::slice::from_raw_parts(
                            conn.private_data as *const u8,
                            conn.private_data_len as usize,
                        )
                    }
                    .to_vec()
                };
                let out = CmEvent {
                    kind: ev.event,
                    status: ev.status,
                    id: ev.id,
                    private_data,
                    responder_resources: conn.responder_resources,
                    initiator_depth: conn.initiator_depth,
                };
                // SAFETY: acknowledging the event we own; nothing refers to it afterwards.
                unsafe { rdma_ack_cm_event(event) };
                Ok(out)
            })
            .await
    }
}

impl Drop for EventChannel {
    fn drop(&mut self) {
        self.readiness.release();
        // SAFETY: every identifier on the channel holds an Arc of it, so none is left.
        unsafe { rdma_destroy_event_channel(self.raw) };
        untrack(Object::EventChannel);
    }
}

/// An rdma_cm identifier (`rdma_create_id`, port space `RDMA_PS_TCP`): the root of one
/// connection's verbs objects. It keeps its event channel alive and is destroyed last, by its
/// connection ([`CmId::release`]) or its last holder.
pub(super) struct CmId {
    /// Null once released.
    raw: AtomicPtr<rdma_cm_id>,
    channel: Arc<EventChannel>,
}

// SAFETY: rdma_cm identifiers may be used from any thread.
unsafe impl Send for CmId {}
// SAFETY: as above.
unsafe impl Sync for CmId {}

impl CmId {
    /// A new identifier on `channel` in the reliable-connected (TCP) port space.
    pub(super) fn new(channel: &Arc<EventChannel>) -> io::Result<CmId> {
        let mut raw = ptr::null_mut();
        // SAFETY: the channel is live; `raw` receives the identifier.
        if unsafe {
            rdma_create_id(
                channel.raw(),
                &mut raw,
                ptr::null_mut(),
                rdma_port_space::RDMA_PS_TCP,
            )
        } != 0
        {
            return Err(io::Error::last_os_error());
        }
        track(Object::CmId);
        Ok(CmId {
            raw: AtomicPtr::new(raw),
            channel: channel.clone(),
        })
    }

    /// Adopts an identifier delivered by a `CONNECT_REQUEST` on `channel`.
    ///
    /// # Safety
    /// `raw` must be a live identifier bound to `channel` that nothing else will destroy.
    pub(super) unsafe fn adopt(raw: *mut rdma_cm_id, channel: &Arc<EventChannel>) -> CmId {
        track(Object::CmId);
        CmId {
            raw: AtomicPtr::new(raw),
            channel: channel.clone(),
        }
    }

    /// Moves the identifier's events to `channel` (`rdma_migrate_id`).
    pub(super) fn migrate(self, channel: &Arc<EventChannel>) -> io::Result<CmId> {
        // SAFETY: both live; every event of this identifier was acknowledged by next_event.
        if unsafe { rdma_migrate_id(self.raw(), channel.raw()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // The identifier lives on under the new channel: skip our Drop (which would destroy
        // it), but release the old channel's Arc.
        let this = ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again, so the Arc is moved out exactly once.
        drop(unsafe { ptr::read(&this.channel) });
        Ok(CmId {
            raw: AtomicPtr::new(this.raw()),
            channel: channel.clone(),
        })
    }

    /// The identifier (null once released).
    pub(super) fn raw(&self) -> *mut rdma_cm_id {
        self.raw.load(Ordering::Acquire)
    }

    /// Destroys the identifier now (its queue pair and protection domain are gone): with the
    /// last identifier on a device, librdmacm puts that device's context.
    pub(super) fn release(&self) {
        let raw = self.raw.swap(ptr::null_mut(), Ordering::AcqRel);
        if !raw.is_null() {
            // SAFETY: the identifier is live and no longer named by this object; all its
            // events were acknowledged.
            unsafe { rdma_destroy_id(raw) };
            untrack(Object::CmId);
        }
    }

    pub(super) fn channel(&self) -> &Arc<EventChannel> {
        &self.channel
    }

    /// The device context the identifier is bound to (null before address resolution).
    pub(super) fn context(&self) -> *mut ibv_context {
        let raw = self.raw();
        if raw.is_null() {
            return ptr::null_mut();
        }
        // SAFETY: the identifier is live.
        unsafe { (*raw).verbs }
    }

    /// The bound local address.
    pub(super) fn local_addr(&self) -> Option<SocketAddr> {
        let raw = self.raw();
        // SAFETY: the identifier is live; the address lives inside it.
        (!raw.is_null()).then(|| sockaddr_to_std(unsafe { rdma_get_local_addr(&*raw) }))?
    }

    /// The peer's address.
    pub(super) fn peer_addr(&self) -> Option<SocketAddr> {
        let raw = self.raw();
        // SAFETY: as above.
        (!raw.is_null()).then(|| sockaddr_to_std(unsafe { rdma_get_peer_addr(&*raw) }))?
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        // The queue pair (if any) holds an Arc of this identifier and was destroyed first.
        self.release();
    }
}

/// A `sockaddr_storage` for `addr`, with its length.
pub(super) fn std_to_sockaddr(addr: SocketAddr) -> libc::sockaddr_storage {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in, sin) };
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in6, sin6) };
        }
    }
    storage
}

/// The address in `sa`, if it is IPv4 or IPv6.
pub(super) fn sockaddr_to_std(sa: &libc::sockaddr) -> Option<SocketAddr> {
    match sa.sa_family as i32 {
        libc::AF_INET => {
            // SAFETY: the family says this is a sockaddr_in (rdma_cm stores a full storage).
            let sin = unsafe { &*(sa as *const _ as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes()),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 = unsafe { &*(sa as *const _ as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn socket_addresses_round_trip_through_sockaddr() {
        for text in ["192.0.2.1:20049", "[2001:db8::1]:7471", "0.0.0.0:0"] {
            let addr: SocketAddr = text.parse().unwrap();
            let storage = std_to_sockaddr(addr);
            // SAFETY: storage starts with a sockaddr header.
            let sa = unsafe { &*(&storage as *const _ as *const libc::sockaddr) };
            assert_eq!(sockaddr_to_std(sa), Some(addr));
        }
    }

    /// Reads what `fd` holds until `EAGAIN`, counting the calls; how many bytes it read.
    fn drain(fd: RawFd, calls: &std::cell::Cell<u32>) -> io::Result<u32> {
        let mut read = 0;
        loop {
            calls.set(calls.get() + 1);
            let mut byte = 0u8;
            // SAFETY: reads at most one byte into `byte`.
            match unsafe { libc::read(fd, (&mut byte as *mut u8).cast(), 1) } {
                1 => read += 1,
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                _ => match io::Error::last_os_error() {
                    e if e.kind() == io::ErrorKind::WouldBlock => return Ok(read),
                    e => return Err(e),
                },
            }
        }
    }

    /// A completion channel's wait, on a pipe: once drained, the next wait sleeps until
    /// something comes without reading the empty descriptor first, and wakes for what comes.
    #[tokio::test]
    async fn a_drained_descriptor_is_not_read_again_before_it_is_readable() {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let [rx, tx] = fds;
        let send = |n: usize| {
            // SAFETY: writes `n` bytes of a buffer of 4 to the pipe.
            assert_eq!(
                unsafe { libc::write(tx, [7u8; 4].as_ptr().cast(), n) },
                n as isize
            );
        };
        let mut readiness = Readiness::new(rx).unwrap();
        let calls = std::cell::Cell::new(0);
        send(2);
        readiness.drain_with(|| drain(rx, &calls)).await.unwrap();
        // Two bytes and the EAGAIN that said the pipe was empty.
        assert_eq!(calls.get(), 3);
        let idle = tokio::time::timeout(
            Duration::from_millis(100),
            readiness.drain_with(|| drain(rx, &calls)),
        )
        .await;
        assert!(idle.is_err(), "the wait returned with nothing to read");
        assert_eq!(calls.get(), 3, "the empty descriptor was read again");
        send(1);
        readiness.drain_with(|| drain(rx, &calls)).await.unwrap();
        assert_eq!(calls.get(), 5);
        readiness.release();
        // SAFETY: both ends are ours; the reactor let go of `rx` above.
        unsafe {
            libc::close(rx);
            libc::close(tx);
        }
    }
}

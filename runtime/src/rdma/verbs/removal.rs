//! A device going away under live connections (`RDMA_CM_EVENT_DEVICE_REMOVAL`: a NIC unplugged,
//! `rdma link delete`).
//!
//! The kernel finishes removing a device only once every user context on it is closed when
//! the driver cannot take them away itself (no `disassociate_ucontext`, as rxe): until then
//! `rdma link delete` blocks, and the device cannot come back. Each connection on the device
//! sees the event (its queue pair is flushed, its calls fail) and, when the transport drops
//! it, releases everything it registered, even what the application still holds
//! ([`Registered`]), then its domain and identifier. librdmacm still keeps its own context of
//! the device open until it notices the device is gone, which it does only when asked for the
//! device list: a watcher asks once the device has left the list and its last connection has
//! gone.
//!
//! Listeners bound to the wildcard address keep listening through a removal: rdma_cm listens
//! on every device, the ones added later included. A listener bound to one of the device's
//! addresses gets the event too and listens again once the address has a device
//! ([`super::VerbsListener`]).

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rdma_sys::{rdma_free_devices, rdma_get_devices};

use super::resources::Registered;
use crate::rpc::observe::CONNECTIONS;

/// How long the watcher waits for a removed device's connections to go and for the device to
/// leave the device list before it gives up (and logs that it did).
const WATCH_FOR: Duration = Duration::from_secs(120);
/// How often the watcher looks.
const WATCH_EVERY: Duration = Duration::from_millis(100);

/// The registrations of every connection, by device name, kept while the connection is open
/// or a registration of it (a husk, once it went) is still held.
fn connections() -> &'static Mutex<Vec<(String, Arc<Registered>)>> {
    type ByDevice = Mutex<Vec<(String, Arc<Registered>)>>;
    static CONNECTIONS: OnceLock<ByDevice> = OnceLock::new();
    CONNECTIONS.get_or_init(|| Mutex::new(Vec::new()))
}

/// Devices whose removal is being watched.
fn watched() -> &'static Mutex<HashSet<String>> {
    static WATCHED: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    WATCHED.get_or_init(|| Mutex::new(HashSet::new()))
}

/// Records a new connection's registrations on `device`. Sets whose connection went and
/// whose registrations are all gone are dropped now and then (when the list has doubled since
/// the last time), so that a connection costs O(1) here however many are open.
pub(super) fn track(device: &str, registered: &Arc<Registered>) {
    static PRUNED_AT: AtomicUsize = AtomicUsize::new(0);
    let mut all = connections().lock().unwrap_or_else(|e| e.into_inner());
    if all.len() >= 2 * PRUNED_AT.load(Ordering::Relaxed).max(64) {
        all.retain(|(_, set)| !set.is_closed() || set.any_alive());
        PRUNED_AT.store(all.len(), Ordering::Relaxed);
    }
    all.push((device.to_string(), registered.clone()));
}

/// Connections on `device` not yet dropped, and the registrations and memory windows still
/// registered there (by open connections, or by gone ones whose regions the application
/// holds: none, as a connection releases them when it goes).
fn on(device: &str) -> (usize, usize) {
    let sets: Vec<Arc<Registered>> = {
        let all = connections().lock().unwrap_or_else(|e| e.into_inner());
        all.iter()
            .filter(|(name, _)| name == device)
            .map(|(_, set)| set.clone())
            .collect()
    };
    sets.iter().fold((0, 0), |(conns, regs), set| {
        (conns + usize::from(!set.is_closed()), regs + set.live())
    })
}

/// The live memory registrations and memory windows of this process on `device` (`rxe0`),
/// counting regions the application still holds: zero once every connection on a removed
/// device has gone, whatever the application kept.
pub fn live_registrations_on(device: &str) -> usize {
    on(device).1
}

/// A connection on `device` saw the device removed: watches, once per device, for its last
/// connection to go and the device to leave the list, then lets librdmacm close its context.
pub(super) fn device_removed(device: &str) {
    if !watched()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(device.to_string())
    {
        return;
    }
    let device = device.to_string();
    let spawned = std::thread::Builder::new()
        .name("rdma-removal".into())
        .spawn(move || watch(&device));
    if let Err(e) = spawned {
        tracing::warn!(target: CONNECTIONS, error = %e, "cannot watch a removed device");
    }
}

/// The watcher of one removed device (a thread: it sleeps, and must not hold a runtime up).
fn watch(device: &str) {
    let started = Instant::now();
    let released = loop {
        let (conns, regs) = on(device);
        let listed = super::device_names().iter().any(|name| name == device);
        if conns == 0 && !listed {
            break true;
        }
        if started.elapsed() > WATCH_FOR {
            tracing::warn!(
                target: CONNECTIONS,
                event = "device_removal_stuck",
                device,
                connections = conns,
                registrations = regs,
                listed,
                "a removed device's connections are still open after {} s (their owners have \
                 not dropped them): the kernel cannot finish removing it",
                WATCH_FOR.as_secs()
            );
            break false;
        }
        std::thread::sleep(WATCH_EVERY);
    };
    if released {
        // librdmacm compares the device list with its own when asked for it, and closes the
        // context of a device that left it (at once, as nothing of ours holds it any more).
        // SAFETY: the list returned is handed back at once; a null count pointer is allowed.
        unsafe {
            let list = rdma_get_devices(std::ptr::null_mut());
            if !list.is_null() {
                rdma_free_devices(list);
            }
        }
        tracing::info!(
            target: CONNECTIONS,
            event = "device_released",
            device,
            registrations = live_registrations_on(device),
            after_ms = started.elapsed().as_millis() as u64,
            "every connection on the removed device was released"
        );
    }
    watched()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(device);
}

/// A connection on a removed device was released (dropped).
pub(super) fn connection_released(device: &str) {
    tracing::debug!(
        target: CONNECTIONS,
        event = "connection_released",
        device,
        "a connection on a removed device released its registrations"
    );
}

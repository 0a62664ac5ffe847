//! The connection's rdma_cm events.

use super::*;

/// Watches the connection's rdma_cm events: when the peer disconnects (or the device goes
/// away), moves the queue pair to the error state so outstanding work is flushed.
pub(super) async fn watch_events(inner: Arc<Inner>, peer: SocketAddr) {
    let (id, state, device) = (&inner.id, &inner.state, &inner.device);
    loop {
        let Ok(event) = id.channel().next_event().await else {
            return;
        };
        match event.kind {
            rdma_cm_event_type::RDMA_CM_EVENT_DISCONNECTED
            | rdma_cm_event_type::RDMA_CM_EVENT_DEVICE_REMOVAL => {
                if event.kind == rdma_cm_event_type::RDMA_CM_EVENT_DEVICE_REMOVAL {
                    state.device_removed.store(true, Ordering::SeqCst);
                    tracing::warn!(
                        target: crate::rpc::observe::CONNECTIONS,
                        event = "device_removed",
                        device = %device,
                        %peer,
                        "the RDMA device under this connection was removed: the connection \
                         fails its calls and releases its registrations"
                    );
                    removal::device_removed(device);
                    // Everything on the device goes now, whoever holds the connection: the
                    // kernel cannot finish removing the device before.
                    inner.release_removed().await;
                    return;
                }
                state.connected.store(false, Ordering::SeqCst);
                let alive = state.qp_alive.lock().unwrap_or_else(|e| e.into_inner());
                if *alive {
                    // SAFETY: the identifier is live (we hold an Arc) and so is its queue pair
                    // (the flag, under its lock). Answering the peer's disconnect moves our
                    // queue pair to the error state, flushing it.
                    unsafe { rdma_disconnect(id.raw()) };
                }
                drop(alive);
                if inner.shared.is_some() {
                    // No receive of its own is flushed to tell the consumer: the close is
                    // told after the messages that came before it.
                    let mut q = inner.lock();
                    if !inner.cq.is_destroyed() {
                        inner.drain(&mut q);
                    }
                    inner.tell_shared_closed(&mut q, WcStatus::Flushed);
                    drop(q);
                    inner.notify.notify_waiters();
                }
            }
            _ => {}
        }
    }
}

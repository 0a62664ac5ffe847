//! A hook that sees every byte a connection sends and receives (for capture files and tests).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

/// Which way bytes went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// From this side to the peer.
    Sent,
    /// From the peer to this side.
    Received,
}

/// Receives copies of a connection's stream bytes, including the MPA startup frames, in order
/// per direction. Called from the driver tasks; keep it cheap.
pub trait WireTap: Send + Sync + 'static {
    /// `bytes` went in `direction` on the connection from `local` to `peer`.
    fn record(&self, local: SocketAddr, peer: SocketAddr, direction: Direction, bytes: &[u8]);
}

/// A tap bound to one connection.
#[derive(Clone)]
pub(crate) struct ConnTap {
    tap: Arc<dyn WireTap>,
    local: SocketAddr,
    peer: SocketAddr,
    /// Held while bytes are written and recorded, so that the peer's answer to them, read
    /// by another task, is recorded after them (a capture shows a reply after its call).
    order: Arc<Mutex<()>>,
}

impl ConnTap {
    pub(crate) fn new(tap: Arc<dyn WireTap>, local: SocketAddr, peer: SocketAddr) -> ConnTap {
        ConnTap {
            tap,
            local,
            peer,
            order: Arc::new(Mutex::new(())),
        }
    }

    /// Shows `bytes` to the tap, after any write in progress ([`ConnTap::order`]).
    pub(crate) fn record(&self, direction: Direction, bytes: &[u8]) {
        let _order = self.order();
        self.record_held(direction, bytes);
    }

    /// The tap's order: hold it from before a write until its bytes are recorded with
    /// [`ConnTap::record_held`].
    pub(crate) fn order(&self) -> MutexGuard<'_, ()> {
        self.order.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Shows `bytes` to the tap; the caller holds [`ConnTap::order`].
    pub(crate) fn record_held(&self, direction: Direction, bytes: &[u8]) {
        self.tap.record(self.local, self.peer, direction, bytes);
    }
}

//! A hook that sees every byte a connection sends and receives (for capture files and tests).

use std::net::SocketAddr;
use std::sync::Arc;

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
    pub(crate) tap: Arc<dyn WireTap>,
    pub(crate) local: SocketAddr,
    pub(crate) peer: SocketAddr,
}

impl ConnTap {
    pub(crate) fn record(&self, direction: Direction, bytes: &[u8]) {
        self.tap.record(self.local, self.peer, direction, bytes);
    }
}

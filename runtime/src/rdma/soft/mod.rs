//! The software iWARP provider: RDMAP (RFC 5040) over DDP (RFC 5041) over MPA (RFC 5044,
//! RFC 6581) over TCP.
//!
//! * [`wire`]: header formats (parse/emit), no state.
//! * [`negotiate`]: the MPA startup negotiation between RDMAC and IETF RNICs
//!   (draft-carrier-rddp-rnic-interop-00).
//! * [`core`]: the sans-IO connection core (bytes and work requests in, bytes and
//!   completions out).
//! * `driver`: the tokio tasks that move bytes between a TCP stream and the core.
//! * [`SoftProvider`]: the [`Provider`](crate::rdma::Provider) built from them; its
//!   [`SoftListener`] reads every connection's MPA Request in a task of its own.
//! * [`pcap`]: capture files of its traffic (a [`WireTap`] written as pcap) for Wireshark.

pub mod core;
mod driver;
mod listener;
pub mod negotiate;
pub mod pcap;
mod provider;
mod shared_receive;
pub mod tags;
pub mod tap;
pub mod wire;

pub use self::core::PlacementStats;
pub use listener::SoftListener;
pub use negotiate::{MpaConfig, Negotiated, Refusal, RnicKind};
pub use pcap::PcapTap;
#[cfg(test)]
pub(crate) use provider::connected_pair;
pub use provider::{SoftConfig, SoftConnection, SoftProvider, SoftRequest};
pub use shared_receive::SoftSharedQueue;
pub use tags::live_registrations;
pub use tap::{Direction, WireTap};

//! The software iWARP provider: RDMAP (RFC 5040) over DDP (RFC 5041) over MPA (RFC 5044,
//! RFC 6581) over TCP.
//!
//! * [`wire`]: header formats (parse/emit), no state.
//! * [`negotiate`]: the MPA startup negotiation between RDMAC and IETF RNICs.

pub mod negotiate;
pub mod wire;

pub use negotiate::{MpaConfig, Negotiated, Refusal, RnicKind};

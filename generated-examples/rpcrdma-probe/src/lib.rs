//! The probe extension of RPC-over-RDMA version 2 (`specs/extensions/probe.x`), written the
//! way a user adds an extension: its XDR compiled with the base protocol by xdrgen, its
//! behaviour an [`Extension`] registered with the transport
//! ([`RdmaConfig::extension`](rpcrdma::transport::RdmaConfig::extension)), nothing in the
//! runtime edited.
//!
//! A probe checks that a connection carries a message of a given size without an RPC: the
//! requester sends RDMA2_PROBE with a cookie and a payload; the responder answers with the
//! cookie and, when RPCRDMA2_F_PROBE_ECHO is set, the payload. A responder that knows the
//! extension advertises the longest payload it echoes (RDMA2_PROPID_PROBE_MAX) and refuses a
//! longer one with RDMA2_ERR_PROBE_TOO_LONG; one that does not know it answers
//! RDMA2_ERR_INVAL_HTYPE (seed 003 section 5.2).

#![warn(missing_docs)]

use bytes::Bytes;
use rpcrdma::rdma::Provider;
use rpcrdma::rpc::{RdmaError, TransportError};
use rpcrdma::transport::header::Property;
use rpcrdma::transport::{Extension, ExtensionAnswer, ExtensionMessage, RdmaTransport};
use rpcrdma::xdr::{self, Decode, Decoder};

/// The types xdrgen generates from `common.x`, `baseops.x` and `extensions/probe.x`.
#[allow(missing_docs, clippy::all)]
pub mod v2 {
    include!(concat!(env!("OUT_DIR"), "/rpcrdma_v2_probe.rs"));
}

use v2::{
    Rpcrdma2Probe, RDMA2_ERR_BAD_XDR, RDMA2_ERR_PROBE_TOO_LONG, RDMA2_PROBE,
    RDMA2_PROPID_PROBE_MAX, RPCRDMA2_F_PROBE_ECHO,
};

/// The probe extension, answering payloads of up to `max_payload` bytes.
#[derive(Debug, Clone)]
pub struct Probe {
    max_payload: u32,
}

impl Probe {
    /// The extension, echoing payloads of up to `max_payload` bytes.
    pub fn new(max_payload: u32) -> Probe {
        Probe { max_payload }
    }
}

impl Extension for Probe {
    fn name(&self) -> &str {
        "probe"
    }

    fn header_types(&self) -> &[u32] {
        &[RDMA2_PROBE]
    }

    fn properties(&self) -> Vec<Property> {
        vec![Property::new(RDMA2_PROPID_PROBE_MAX, &self.max_payload).expect("a u32 always encodes")]
    }

    fn check_property(&self, property: &Property) -> Option<Result<(), String>> {
        (property.id == RDMA2_PROPID_PROBE_MAX).then(|| {
            property
                .value::<v2::Rpcrdma2PropProbeMax>()
                .map(|_| ())
                .map_err(|e| format!("RDMA2_PROPID_PROBE_MAX: {e}"))
        })
    }

    fn handle(&self, message: &ExtensionMessage) -> ExtensionAnswer {
        let Ok(probe) = decode_probe(&message.body) else {
            return ExtensionAnswer::Error(RDMA2_ERR_BAD_XDR);
        };
        if probe.rdma_probe_payload.len() > self.max_payload as usize {
            return ExtensionAnswer::Error(RDMA2_ERR_PROBE_TOO_LONG);
        }
        let echo = message.flags & RPCRDMA2_F_PROBE_ECHO != 0;
        let answer = Rpcrdma2Probe {
            rdma_probe_cookie: probe.rdma_probe_cookie,
            rdma_probe_payload: if echo {
                probe.rdma_probe_payload
            } else {
                Bytes::new()
            },
        };
        match xdr::to_bytes(&answer) {
            Ok(body) => ExtensionAnswer::Reply {
                flags: message.flags & RPCRDMA2_F_PROBE_ECHO,
                body,
            },
            Err(_) => ExtensionAnswer::Error(RDMA2_ERR_BAD_XDR),
        }
    }
}

fn decode_probe(body: &Bytes) -> xdr::Result<Rpcrdma2Probe> {
    let mut dec = Decoder::new(body);
    let probe = Rpcrdma2Probe::decode(&mut dec)?;
    dec.finish()?;
    Ok(probe)
}

/// The longest payload the server echoes, if it advertised the probe extension (section
/// 9.2: an implementation that knows an extension advertises its properties).
pub fn peer_max_payload<P: Provider>(transport: &RdmaTransport<P>) -> Option<u32> {
    transport
        .peer_properties()
        .iter()
        .find(|p| p.id == RDMA2_PROPID_PROBE_MAX)
        .and_then(|p| p.value::<u32>().ok().flatten())
}

/// Why a probe failed.
#[derive(Debug)]
pub enum ProbeError {
    /// The server does not know the extension (RDMA2_ERR_INVAL_HTYPE).
    Unknown,
    /// The payload is longer than the server echoes (RDMA2_ERR_PROBE_TOO_LONG).
    TooLong,
    /// The answer does not decode or carries another cookie.
    BadAnswer(String),
    /// The transport failed otherwise.
    Transport(TransportError),
}

impl std::fmt::Display for ProbeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProbeError::Unknown => f.write_str("the server does not know the probe extension"),
            ProbeError::TooLong => f.write_str("the payload is longer than the server echoes"),
            ProbeError::BadAnswer(why) => write!(f, "a bad probe answer: {why}"),
            ProbeError::Transport(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ProbeError {}

/// Probes the connection: sends `payload` with `cookie` and returns the payload echoed (empty
/// unless `echo`).
pub async fn probe<P: Provider>(
    transport: &RdmaTransport<P>,
    cookie: u64,
    payload: Bytes,
    echo: bool,
) -> Result<Bytes, ProbeError> {
    let body = xdr::to_bytes(&Rpcrdma2Probe {
        rdma_probe_cookie: cookie,
        rdma_probe_payload: payload,
    })
    .map_err(|e| ProbeError::BadAnswer(e.to_string()))?;
    let flags = if echo { RPCRDMA2_F_PROBE_ECHO } else { 0 };
    let answer = match transport.extension_call(RDMA2_PROBE, flags, body).await {
        Ok(answer) => answer,
        Err(TransportError::RdmaRefused(RdmaError::InvalHtype)) => return Err(ProbeError::Unknown),
        Err(TransportError::RdmaRefused(RdmaError::Other(RDMA2_ERR_PROBE_TOO_LONG))) => {
            return Err(ProbeError::TooLong)
        }
        Err(e) => return Err(ProbeError::Transport(e)),
    };
    let answer = decode_probe(&answer).map_err(|e| ProbeError::BadAnswer(e.to_string()))?;
    if answer.rdma_probe_cookie != cookie {
        return Err(ProbeError::BadAnswer(format!(
            "cookie {:#x} for {cookie:#x}",
            answer.rdma_probe_cookie
        )));
    }
    Ok(answer.rdma_probe_payload)
}

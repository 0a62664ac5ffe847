//! MPA startup negotiation between RDMAC, non-permissive IETF and permissive IETF RNICs
//! (draft-carrier-rddp-rnic-interop-00, figures 1-4), with the enhanced connection
//! establishment of MPA revision 2 (RFC 6581).
//!
//! Pure functions: the initiator builds a Request ([`MpaConfig::request`]), the responder
//! answers it ([`MpaConfig::respond`]), and the initiator reads the Reply
//! ([`MpaConfig::complete`]). Each side learns a [`Negotiated`] outcome or a [`Refusal`].

use super::wire::mpa::{EnhancedParams, FrameKind, StartupFrame, ENHANCED_LEN};

/// The three RNIC flavours of the interop draft (section 5.1, figure 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RnicKind {
    /// An (upgraded) RDMAC RNIC: MPA revision 0, DDP/RDMAP version 0, markers and CRC always.
    Rdmac,
    /// A non-permissive IETF RNIC: revision 1 (or 2), version 1 only.
    Ietf,
    /// A permissive IETF RNIC: version 1, or version 0 when the peer is an RDMAC RNIC.
    IetfPermissive,
}

/// The local side's MPA settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MpaConfig {
    /// The RNIC flavour.
    pub kind: RnicKind,
    /// Marker preference: markers wanted in the data this side receives (M bit). Ignored for
    /// RDMAC, which always uses markers.
    pub markers: bool,
    /// CRC preference (C bit). Ignored for RDMAC, which always uses CRC.
    pub crc: bool,
    /// MPA revision spoken by an IETF RNIC: 1 (RFC 5044) or 2 (RFC 6581). Ignored for RDMAC.
    pub revision: u8,
}

impl Default for MpaConfig {
    /// A permissive IETF RNIC speaking revision 2 (like Linux siw), no markers, CRC on.
    ///
    /// CRC on is a choice for integrity, not speed: Linux siw asks for none unless told to
    /// (and complies when the peer asks), and TCP's 16-bit checksum is all that then guards the
    /// data. CRC costs the 1 MiB transfers of `benches/rdma_soft.rs` 10-20 points of TCP's
    /// throughput on a 2-vCPU VM; set `crc: false` where TCP's checksum is judged enough.
    fn default() -> MpaConfig {
        MpaConfig {
            kind: RnicKind::IetfPermissive,
            markers: false,
            crc: true,
            revision: 2,
        }
    }
}

/// What the ULP learns once the startup frames are exchanged (interop draft section 6.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// The MPA revision this side sent.
    pub local_revision: u8,
    /// The MPA revision the peer sent.
    pub peer_revision: u8,
    /// The DDP and RDMAP version, the same in both directions (0 RDMAC, 1 IETF).
    pub version: u8,
    /// Markers in the data this side receives.
    pub rx_markers: bool,
    /// Markers in the data this side sends.
    pub tx_markers: bool,
    /// CRCs in both directions.
    pub crc: bool,
    /// The peer's RFC 6581 IRD/ORD, when both sides spoke revision 2.
    pub peer_enhanced: Option<EnhancedParams>,
    /// The ULP private data the peer sent (without the revision 2 words).
    pub peer_private_data: Vec<u8>,
}

/// Why a side closes instead of entering Full Operation.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The peer's MPA revision (and so its DDP/RDMAP version) cannot interoperate with this
    /// RNIC (interop draft sections 5.2.1, 5.2.2).
    #[error("cannot interoperate with MPA revision {peer_revision} as a {local:?} RNIC")]
    Revision {
        /// The peer's revision.
        peer_revision: u8,
        /// This side's flavour.
        local: RnicKind,
    },
    /// The responder rejected the connection (R bit).
    #[error("the responder rejected the connection")]
    Rejected {
        /// The reply's private data.
        private_data: Vec<u8>,
    },
    /// The startup frame was malformed.
    #[error("malformed MPA startup frame: {0}")]
    Malformed(String),
}

/// Read queue depths to advertise with revision 2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ReadDepths {
    /// Inbound RDMA Read depth.
    pub ird: u16,
    /// Outbound RDMA Read depth.
    pub ord: u16,
}

impl MpaConfig {
    /// The revision this side puts in its frames when the peer does not force another.
    pub fn revision(&self) -> u8 {
        match self.kind {
            RnicKind::Rdmac => 0,
            _ => self.revision.clamp(1, 2),
        }
    }

    /// The M bit this side sends by preference.
    pub fn wants_markers(&self) -> bool {
        self.kind == RnicKind::Rdmac || self.markers
    }

    /// The C bit this side sends.
    pub fn wants_crc(&self) -> bool {
        self.kind == RnicKind::Rdmac || self.crc
    }

    fn private_data(enhanced: bool, depths: ReadDepths, ulp: &[u8]) -> Vec<u8> {
        let mut pd = Vec::with_capacity(ENHANCED_LEN + ulp.len());
        if enhanced {
            EnhancedParams {
                ird: depths.ird,
                ord: depths.ord,
                ..EnhancedParams::default()
            }
            .emit(&mut pd);
        }
        pd.extend_from_slice(ulp);
        pd
    }

    /// Splits received private data into the revision 2 words and the ULP part.
    fn split(enhanced: bool, pd: &[u8]) -> Result<(Option<EnhancedParams>, Vec<u8>), Refusal> {
        if enhanced {
            let (params, ulp) =
                EnhancedParams::parse(pd).map_err(|e| Refusal::Malformed(e.to_string()))?;
            Ok((Some(params), ulp.to_vec()))
        } else {
            Ok((None, pd.to_vec()))
        }
    }

    /// The MPA Request this side sends as initiator.
    pub fn request(&self, ulp_private_data: &[u8], depths: ReadDepths) -> StartupFrame {
        let revision = self.revision();
        // RFC 6581 section 9: revision 2 requests carry the S bit and the IRD/ORD words.
        let enhanced = revision >= 2;
        StartupFrame {
            kind: FrameKind::Request,
            markers: self.wants_markers(),
            crc: self.wants_crc(),
            reject: false,
            enhanced,
            reserved: 0,
            revision,
            private_data: MpaConfig::private_data(enhanced, depths, ulp_private_data),
        }
    }

    /// The responder's answer to `request`: the Reply to send (always sent, also when this
    /// side then closes, interop draft section 5.2.1) and the outcome.
    ///
    /// A revision 2 request whose enhanced private data is malformed gets a Reply with the
    /// Reject bit, never an accepting one (see [`MpaConfig::malformed`]).
    pub fn respond(
        &self,
        request: &StartupFrame,
        ulp_private_data: &[u8],
        depths: ReadDepths,
    ) -> (StartupFrame, Result<Negotiated, Refusal>) {
        if let Some(refusal) = MpaConfig::malformed(request) {
            // The application's private data was meant for an accepted connection.
            return (self.reject(request, &[]), Err(refusal));
        }
        let peer_rev = request.revision;
        let rdmac_peer = peer_rev == 0;
        // The revision of the reply and the DDP/RDMAP version this side will use.
        let (revision, version, refuse) = match self.kind {
            // An RDMAC responder knows nothing else: revision 0, version 0 (figure 2, 3).
            RnicKind::Rdmac => (0, 0, false),
            // Section 5.2.1: the non-permissive responder replies with its own revision and
            // closes.
            RnicKind::Ietf if rdmac_peer => (1, 1, true),
            // Section 5.3.1: the permissive responder downgrades to revision/version 0.
            RnicKind::IetfPermissive if rdmac_peer => (0, 0, false),
            _ => (self.revision().min(peer_rev), 1, false),
        };
        // Version 0 means RDMAC MPA: markers and CRC in both directions (section 5.3.1; the
        // permissive responder never answers M=0 to an RDMAC initiator, figure 3 "N/A").
        let rdmac_mode = version == 0;
        let markers = rdmac_mode || self.wants_markers();
        let crc = rdmac_mode || self.wants_crc();
        let request_enhanced = request.revision >= 2 && request.enhanced;
        let enhanced = revision >= 2 && request_enhanced;
        let reply = StartupFrame {
            kind: FrameKind::Reply,
            markers,
            crc,
            reject: false,
            enhanced,
            reserved: 0,
            revision,
            private_data: MpaConfig::private_data(enhanced, depths, ulp_private_data),
        };
        if refuse {
            let local = self.kind;
            return (
                reply,
                Err(Refusal::Revision {
                    peer_revision: peer_rev,
                    local,
                }),
            );
        }
        let outcome =
            MpaConfig::split(request_enhanced, &request.private_data).map(|(params, ulp)| {
                Negotiated {
                    local_revision: revision,
                    peer_revision: peer_rev,
                    version,
                    rx_markers: markers,
                    tx_markers: rdmac_mode || request.markers,
                    // RFC 5044 section 7.1: CRC is used when either side asks for it.
                    crc: crc || request.crc,
                    peer_enhanced: if enhanced { params } else { None },
                    peer_private_data: ulp,
                }
            });
        (reply, outcome)
    }

    /// Why `request` cannot be accepted whatever this side's settings, if it cannot.
    ///
    /// RFC 6581 section 9: with revision 2 and the S bit the first four octets of the private
    /// data are the IRD and ORD words (and their control bits); private data shorter than
    /// that is malformed. RFC 6581 asks the responder to reject such a request, which it does
    /// with the Reject bit of the Reply (RFC 5044 section 7.1), before anything is accepted.
    pub fn malformed(request: &StartupFrame) -> Option<Refusal> {
        let enhanced = request.revision >= 2 && request.enhanced;
        MpaConfig::split(enhanced, &request.private_data).err()
    }

    /// The Reply this side sends to reject a request with `ulp_private_data`.
    pub fn reject(&self, request: &StartupFrame, ulp_private_data: &[u8]) -> StartupFrame {
        let revision = match self.kind {
            RnicKind::Rdmac => 0,
            _ => self.revision().min(request.revision.max(1)),
        };
        let enhanced = revision >= 2 && request.revision >= 2 && request.enhanced;
        StartupFrame {
            kind: FrameKind::Reply,
            markers: self.wants_markers(),
            crc: self.wants_crc(),
            reject: true,
            enhanced,
            reserved: 0,
            revision,
            private_data: MpaConfig::private_data(
                enhanced,
                ReadDepths::default(),
                ulp_private_data,
            ),
        }
    }

    /// The initiator's outcome after reading `reply` to its `request`.
    ///
    /// A revision 2 Reply with the S bit whose private data is too short for the IRD/ORD
    /// words (RFC 6581 section 9) is [`Refusal::Malformed`]: the initiator has no Reject of
    /// its own to send and closes the connection.
    pub fn complete(
        &self,
        request: &StartupFrame,
        reply: &StartupFrame,
    ) -> Result<Negotiated, Refusal> {
        let peer_rev = reply.revision;
        if reply.reject {
            let (_, ulp) = MpaConfig::split(peer_rev >= 2 && reply.enhanced, &reply.private_data)
                .unwrap_or((None, reply.private_data.clone()));
            return Err(Refusal::Rejected { private_data: ulp });
        }
        let version = match (self.kind, peer_rev) {
            // Section 5.2: an RDMAC initiator cannot talk to a revision 1 responder, and a
            // non-permissive IETF initiator closes on revision 0 (section 5.2.2).
            (RnicKind::Rdmac, 0) => 0,
            (RnicKind::Rdmac, _) | (RnicKind::Ietf, 0) => {
                return Err(Refusal::Revision {
                    peer_revision: peer_rev,
                    local: self.kind,
                })
            }
            // Section 5.3.2: the permissive initiator downgrades.
            (RnicKind::IetfPermissive, 0) => 0,
            (_, rev) if rev > request.revision => {
                // RFC 6581 section 9: a responder never answers with a higher revision.
                return Err(Refusal::Malformed(format!(
                    "reply revision {rev} above request revision {}",
                    request.revision
                )));
            }
            _ => 1,
        };
        let rdmac_mode = version == 0;
        let (enhanced, ulp) =
            MpaConfig::split(peer_rev >= 2 && reply.enhanced, &reply.private_data)?;
        Ok(Negotiated {
            local_revision: request.revision,
            peer_revision: peer_rev,
            version,
            rx_markers: rdmac_mode || request.markers,
            tx_markers: rdmac_mode || reply.markers,
            crc: rdmac_mode || request.crc || reply.crc,
            peer_enhanced: enhanced,
            peer_private_data: ulp,
        })
    }
}

#[cfg(test)]
mod tests;

//! Received messages: the transport header parsed and checked, then each message type taken
//! as seed 004 section 5 (and seed 003 for version 2) says, the RPC message handed to the
//! requester (a reply) or the responder (a call).

use bytes::Bytes;

use super::{Buf, Core, Event, Memory, Negotiation, Owner, Role};
use crate::rpc::TransportError;
use crate::transport::extension::{ExtensionAnswer, ExtensionMessage};
use crate::transport::header::{
    self, AlignPadding, Body, Header, HeaderError, RdmaError, F_RESPONSE, VERSION, VERSION_2,
};

impl<B: Buf> Core<B> {
    /// Takes a received message. `invalidated` is the local handle the peer invalidated with
    /// Send With Invalidate, if any.
    pub fn handle_recv<M: Memory<Buf = B>>(
        &mut self,
        message: &[u8],
        invalidated: Option<u32>,
        mem: &mut M,
    ) {
        if self.closed {
            return;
        }
        self.heard = true;
        self.first_message = None;
        if invalidated.is_some() {
            self.stats.remote_invalidations += 1;
        }
        if !self.config.version_2 && message.len() >= header::FIXED_LEN {
            if let (Some(xid), Some(VERSION_2)) =
                (header::word(message, 0), header::word(message, 1))
            {
                // A version 1 endpoint answers as every version 1 implementation does (seed
                // 003 section 7.2: "it MUST send ... the error code RDMA2_ERR_VERS").
                let e = HeaderError::Version {
                    xid,
                    version: VERSION_2,
                };
                return self.header_error(e, message);
            }
        }
        if let Some((xid, low, high)) = self.version_1_refusal(message) {
            let header = Header::v1(xid, 1, Body::Error(RdmaError::Vers { low, high }));
            return self.error_received(&header, RdmaError::Vers { low, high }, None, mem);
        }
        // Only a receiver in the 2004 mode honours RDMA_MSGP's padding (seed 004 section
        // 5.7.1: others "MUST treat received RDMA_MSGP type messages as they would treat
        // RDMA_MSG type messages").
        let keep_padding = self.config.mode_2004.is_some();
        let (mut header, used) =
            match header::parse_with(message, &self.config.limits, keep_padding) {
                Ok(h) => h,
                Err(HeaderError::Short) => {
                    tracing::debug!(
                        len = message.len(),
                        "dropping a message shorter than a header"
                    );
                    self.stats.dropped += 1;
                    return;
                }
                Err(e) => return self.header_error(e, message),
            };
        let rpc = &message[used..];
        if self.config.mode_2004.is_some() && matches!(header.body, Body::MsgP(..) | Body::Done) {
            self.peer_in_mode_2004 = true;
        }
        // The padding counts from the Send's first byte: the message starts at `used`.
        let alignment = match std::mem::replace(&mut header.body, Body::Done) {
            Body::MsgP(chunks, pad) => {
                self.stats.padded_received += 1;
                header.body = Body::Msg(chunks);
                Some((pad, used))
            }
            body => {
                header.body = body;
                None
            }
        };
        match header.body {
            Body::Done if self.config.mode_2004.is_some() => {
                if !self
                    .responder
                    .done(header.xid, &mut self.out, &mut self.stats)
                {
                    tracing::debug!(xid = header.xid, "an RDMA_DONE for no exposed reply");
                    self.stats.dropped += 1;
                }
            }
            Body::Done => {
                // Seed 004 section 5.7.2: "Receivers MUST drop RDMA_DONE type messages".
                self.stats.dropped += 1;
            }
            Body::MsgP(..) => unreachable!("taken as RDMA_MSG above"),
            Body::Error(error) => self.error_received(&header, error, invalidated, mem),
            Body::ConnProp(_) => self.connprop(header),
            Body::Other { .. } => self.other_type(header, invalidated, mem),
            Body::NoMsg(_) if header.version == VERSION => match self.config.role {
                // A client gets long replies; a server gets long calls.
                Role::Client => self.reply(header, Bytes::new(), None, invalidated, mem),
                Role::Server => self.call(header, Bytes::new(), None, false, mem),
            },
            Body::NoMsg(_) => {
                // Seed 003 section 3.2: RPCRDMA2_F_RESPONSE tells a reply from a call, so a
                // reverse-direction call needs no XID lookup.
                if header.is_response() {
                    self.reply(header, Bytes::new(), None, invalidated, mem)
                } else {
                    let backward = self.config.role == Role::Client;
                    self.call(header, Bytes::new(), None, backward, mem)
                }
            }
            Body::Msg(_) => {
                let Some(mtype) = rpc.get(4..8) else {
                    tracing::debug!(xid = header.xid, "an RDMA_MSG without an RPC header");
                    return self.refuse(
                        header.xid,
                        header.version,
                        RdmaError::BadXdr,
                        "no RPC message",
                    );
                };
                // Version 1: the RPC msg_type (its second word) tells a call from a reply
                // (seed 004 sections 8.3.4 and 8.3.5); version 2: the flag does.
                let is_call = if header.version == VERSION {
                    mtype == [0, 0, 0, 0]
                } else {
                    !header.is_response()
                };
                let inline = match alignment {
                    Some((pad, _)) => aligned_copy(rpc, used, pad.align as usize),
                    None => Bytes::copy_from_slice(rpc),
                };
                let a = alignment;
                match (self.config.role, is_call) {
                    (Role::Server, true) => self.call(header, inline, a, false, mem),
                    (Role::Client, false) => self.reply(header, inline, a, invalidated, mem),
                    (Role::Client, true) => self.call(header, inline, a, true, mem),
                    (Role::Server, false) => self.reply(header, inline, a, invalidated, mem),
                }
            }
        }
    }

    /// The answer of a version 1 server to this side's version 2 offer, in the form the Linux
    /// kernel's svcrdma sends it: version 1's RDMA_ERROR / ERR_VERS body (seven words), but with
    /// the offer's `rdma_vers` copied into the header (seed 003 section 5.3.3: the responder
    /// "copies the values of the rdma_xid and rdma_vers fields"), so that it reads as a
    /// version 2 header one word short. Only the offer's XID and exactly that shape are taken.
    fn version_1_refusal(&self, message: &[u8]) -> Option<(u32, u32, u32)> {
        let Negotiation::Offered { xid, .. } = self.negotiation else {
            return None;
        };
        if message.len() != 28 {
            return None;
        }
        let word = |i| header::word(message, i).unwrap_or(0);
        // xid, vers, credit, RDMA_ERROR (4), ERR_VERS (1), low, high.
        (word(0) == xid && word(1) == VERSION_2 && word(3) == 4 && word(4) == 1)
            .then(|| (xid, word(5), word(6)))
    }

    fn reply<M: Memory<Buf = B>>(
        &mut self,
        header: Header,
        inline: Bytes,
        alignment: Option<(AlignPadding, usize)>,
        invalidated: Option<u32>,
        mem: &mut M,
    ) {
        if self.negotiating() {
            // Nothing was sent but the offer: a reply now answers nothing of ours.
            self.stats.dropped += 1;
            return;
        }
        if !self.requester.reply(
            header,
            inline,
            alignment,
            invalidated,
            mem,
            &self.config,
            &mut self.out,
            &mut self.stats,
        ) {
            self.stats.dropped += 1;
        }
    }

    fn call<M: Memory<Buf = B>>(
        &mut self,
        header: Header,
        inline: Bytes,
        alignment: Option<(AlignPadding, usize)>,
        backward: bool,
        mem: &mut M,
    ) {
        if backward && self.config.backward_credits == 0 {
            // Seed 004 section 8.3.1: a peer must not send backward calls unless told it may;
            // nothing here can answer one.
            tracing::warn!(
                xid = header.xid,
                "a backward call, but the backward direction is off"
            );
            self.stats.dropped += 1;
            return;
        }
        if matches!(header.body, Body::Msg(_)) {
            // Seed 004 section 5.1.1: the XID "MUST be the same as the XID in the RPC header";
            // a call that breaks it gets ERR_CHUNK (RDMA2_ERR_BAD_XDR), before any of its Read
            // chunks is pulled (see `header::check_rpc_xid`). RDMA_NOMSG is checked once its
            // Position-Zero Read chunk has brought the message.
            if let Err(e) = header::check_rpc_xid(header.xid, &inline) {
                let why = e.to_string();
                return self.refuse(header.xid, header.version, RdmaError::BadXdr, &why);
            }
        }
        if self.config.role == Role::Server && !backward && header.version != self.version {
            // A server's own (backward) calls go in the version its client speaks.
            self.version = header.version;
            self.requester.set_version(header.version);
        }
        self.responder.receive(
            header,
            inline,
            alignment,
            backward,
            mem,
            &self.config,
            &mut self.out,
            &mut self.stats,
        );
    }

    /// An RDMA_ERROR / RDMA2_ERROR: the answer to a client's version offer, or to a call.
    fn error_received<M: Memory<Buf = B>>(
        &mut self,
        header: &Header,
        error: RdmaError,
        invalidated: Option<u32>,
        mem: &mut M,
    ) {
        if let Negotiation::Offered { xid, .. } = self.negotiation {
            if header.xid == xid {
                return match error {
                    // Seed 003 section 7.2: "the client selects a protocol version in the
                    // range of server-supported versions".
                    RdmaError::Vers { low, high } if (low..=high).contains(&VERSION) => {
                        self.settle(VERSION)
                    }
                    RdmaError::Vers { low, high } => {
                        self.requester
                            .fail_queued(TransportError::RdmaVersion { low, high }, &mut self.out);
                        self.out.events.push_back(Event::Fatal(format!(
                            "the server speaks RPC-over-RDMA versions {low}..={high} only"
                        )));
                    }
                    // A version 2 server that refuses the offer's properties or type still
                    // speaks version 2 (seed 003 section 5.3.3).
                    _ => {
                        tracing::warn!(%error, "the server refused our transport properties");
                        self.settle(VERSION_2)
                    }
                };
            }
        }
        let extra = self.header_extra();
        if !self.requester.error_reply(
            header,
            error,
            invalidated,
            mem,
            &self.config,
            extra,
            &mut self.out,
            &mut self.stats,
        ) {
            self.stats.dropped += 1;
        }
    }

    /// An RDMA2_CONNPROP: the answer to a client's offer, or a peer advertising its
    /// properties (seed 003 section 5.3.4).
    fn connprop(&mut self, header: Header) {
        let (xid, version, credit, response) = (
            header.xid,
            header.version,
            header.credit,
            header.is_response(),
        );
        let Body::ConnProp(props) = header.body else {
            return;
        };
        let answer = match self.negotiation {
            Negotiation::Offered { xid: offer, .. } if response && xid == offer => {
                // Seed 003 section 7.1: the server "sends RPC-over-RDMA messages back to the
                // client with the value two (2) in the rdma_vers field".
                if let Err(why) = self.apply_properties(props) {
                    // A requester sends no RDMA2_ERROR: the properties keep their defaults.
                    tracing::warn!(%why, "the server's transport properties are malformed");
                }
                self.requester.grant(credit);
                return self.settle(VERSION_2);
            }
            _ if response => {
                self.stats.dropped += 1;
                return;
            }
            _ => self.config.role == Role::Server,
        };
        if let Err(why) = self.apply_properties(props) {
            return self.refuse(xid, version, RdmaError::BadXdr, &why);
        }
        if answer {
            let own = self.own_properties();
            let reply = Header::v2(
                xid,
                self.config.credits.max(1),
                F_RESPONSE,
                Body::ConnProp(own),
            );
            if let Ok(send) = header::to_send(&reply) {
                self.out.send(Owner::Nobody, send, None);
            }
        }
    }

    /// A version 2 header type outside the base protocol: an extension's (seed 003 section
    /// 9.1), or one this side does not know. Seed 003 section 5.2: "implementations that
    /// receive an OPTIONAL operation that is not supported MUST respond with an RDMA2_ERROR
    /// message with an error code of RDMA2_ERR_INVAL_HTYPE".
    fn other_type<M: Memory<Buf = B>>(
        &mut self,
        header: Header,
        invalidated: Option<u32>,
        mem: &mut M,
    ) {
        if header.is_response() {
            // The answer to one of this side's extension requests (or to nothing).
            return self.reply(header, Bytes::new(), None, invalidated, mem);
        }
        let Body::Other { htype, body } = header.body else {
            return;
        };
        let Some(extension) = self.config.extensions.for_type(htype) else {
            return self.refuse(
                header.xid,
                header.version,
                RdmaError::InvalHtype,
                &format!("header type {htype}"),
            );
        };
        let message = ExtensionMessage {
            htype,
            xid: header.xid,
            flags: header.flags,
            body,
        };
        let credit = self.config.credits.max(1);
        match extension.handle(&message) {
            ExtensionAnswer::Reply { flags, body } => {
                let answer = Header::v2(
                    header.xid,
                    credit,
                    flags | F_RESPONSE,
                    Body::Other { htype, body },
                );
                match header::to_send(&answer) {
                    Ok(send) => self.out.send(Owner::Nobody, send, None),
                    Err(e) => tracing::warn!(htype, error = %e, "an extension's answer"),
                }
            }
            ExtensionAnswer::Error(code) => self.refuse(
                header.xid,
                header.version,
                RdmaError::Other(code),
                "the extension refused",
            ),
            ExtensionAnswer::Nothing => {}
        }
    }

    /// Answers a message this side cannot take with RDMA_ERROR in the message's version.
    fn refuse(&mut self, xid: u32, version: u32, error: RdmaError, why: &str) {
        tracing::debug!(xid, %error, why, "RDMA_ERROR");
        self.responder.send_error(
            xid,
            version,
            error,
            &self.config,
            &mut self.out,
            &mut self.stats,
        );
    }

    fn header_error(&mut self, e: HeaderError, message: &[u8]) {
        let (xid, version) = match &e {
            HeaderError::Short => {
                self.stats.dropped += 1;
                return;
            }
            HeaderError::Version { xid, .. } => {
                // Seed 004 section 5.5: the responder answers ERR_VERS with the versions it
                // speaks, in version 1's format, which any version reads (seed 003 section
                // 10.1 keeps the first four words).
                let high = if self.config.version_2 {
                    VERSION_2
                } else {
                    VERSION
                };
                if self.config.role == Role::Server {
                    let error = RdmaError::Vers { low: VERSION, high };
                    return self.refuse(*xid, VERSION, error, "a version this side does not speak");
                }
                (*xid, VERSION)
            }
            HeaderError::Malformed { xid, version, .. }
            | HeaderError::Limit { xid, version, .. } => (*xid, *version),
        };
        // Who answers: version 1 by role (a client's only calls are backward ones, which
        // cannot carry chunks); version 2 by the flag (seed 003 section 3.2).
        let is_response = if version == VERSION_2 {
            header::word(message, 4).is_some_and(|flags| flags & F_RESPONSE != 0)
        } else {
            self.config.role == Role::Client
        };
        if is_response || matches!(e, HeaderError::Version { .. }) {
            // Seed 004 section 5.5: "When a requester cannot parse a responder's reply, the
            // requester SHOULD drop the RPC request and return an error".
            if !self.requester.fail_xid(
                xid,
                TransportError::Protocol(format!("an unparsable reply: {e}")),
                &mut self.out,
                &mut self.stats,
            ) {
                self.stats.dropped += 1;
            }
            return;
        }
        let error = match (&e, version) {
            (HeaderError::Limit { limit, .. }, VERSION_2) => limit.error(),
            _ => RdmaError::BadXdr,
        };
        self.refuse(xid, version, error, &e.to_string());
    }
}

/// A received RDMA_MSGP's RPC message (at offset `origin` of the Send), copied out of the
/// receive buffer so that every byte keeps its offset modulo `align` (up to one page): data
/// the sender aligned in the receive buffer stays aligned in memory, and the decoder hands it
/// out as a slice of this copy, with no further copy (seed 000 section 3.5).
fn aligned_copy(rpc: &[u8], origin: usize, align: usize) -> Bytes {
    let align = align.clamp(1, 4096);
    let mut buf = vec![0u8; rpc.len() + align];
    let base = buf.as_ptr() as usize;
    // The first byte goes where its address is congruent to `origin` modulo `align`.
    let skip = (origin % align + align - base % align) % align;
    buf[skip..skip + rpc.len()].copy_from_slice(rpc);
    Bytes::from(buf).slice(skip..skip + rpc.len())
}

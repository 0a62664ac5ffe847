//! A raw iWARP peer for hostile tests (included with `#[path]`): MPA (RFC 5044 with RFC 6581's
//! revision 2), DDP (RFC 5041), RDMAP (RFC 5040) and RPC-over-RDMA version 1 headers (RFC 8166)
//! written and read byte by byte on a plain tokio `TcpStream`.
//!
//! Nothing here comes from the crate: not its wire formats (`rpcrdma::rdma::soft::wire`), not
//! its provider, not its transport headers. Every frame is built and parsed in this file, the
//! CRC32c included, so that an assumption shared by the crate's sender and its parser cannot
//! hide a hole: only the bytes on the wire count. Keep it that way when extending it.
//!
//! # Use
//!
//! As an initiator against a server:
//!
//! ```ignore
//! let pd = enhanced_private_data(4, 4, &rfc8797(4096, 4096));
//! let mut peer = RawPeer::connect(addr, &MpaFrame::request(pd)).await?;
//! assert!(!peer.peer_frame().reject());
//! peer.send_message(&rdma_msg(7, 4, &null_call(7, PROGRAM, VERSION))).await?;
//! match peer.next().await? {
//!     Inbound::Send(bytes) => { let h = RpcRdmaHeader::parse(&bytes).unwrap(); /* ... */ }
//!     Inbound::Terminate(t) => { /* t.layer, t.etype, t.code */ }
//!     other => panic!("{other:?}"),
//! }
//! ```
//!
//! As a responder to a client: [`RawPeer::accept`] reads the client's MPA Request, then
//! [`Accepted::reply`] sends any Reply (accepting, rejecting, malformed).
//!
//! [`RawPeer::send_ulpdu`] frames any bytes as one FPDU (for malformed DDP segments), and
//! [`RawPeer::write_raw`] writes bytes with no framing at all.
//!
//! # What the peer does by itself
//!
//! [`RawPeer::next`] answers a zero-length RDMA Read Request with a zero-length RDMA Read
//! Response and reads on: the software provider confirms its Sends with such Reads (see
//! `SoftConfig::confirm_completions`), and a peer that never answered would leave them pending.
//! Any other Read Request is handed to the caller, who may answer it with
//! [`RawPeer::send_read_response`].
//!
//! # Limits
//!
//! No markers: a peer that asks for them in its Reply or Request is refused with an error
//! (the software provider sends none unless asked). One Send is reassembled from its segments
//! in order; messages of other queues are returned whole per segment.

#![allow(dead_code)] // Each test uses the part it needs.

use std::io;
use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

// ---------------------------------------------------------------------------------------------
// CRC32c (RFC 3385 / iSCSI, as MPA uses it: RFC 5044 section 4.1).

/// CRC32c (Castagnoli, reflected polynomial 0x82f63b78) of `data`, bit by bit: slow and
/// obviously the textbook definition. The check value of "123456789" is 0xe3069283.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= byte as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82f6_3b78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// The CRC field as it goes on the wire: least significant byte first, the iSCSI convention
/// that Wireshark's MPA dissector checks (`/work/shared/notes/tshark.md`: the value sent
/// big-endian is reported as a bad CRC32).
pub fn crc_field(crc: u32) -> [u8; 4] {
    crc.to_le_bytes()
}

// ---------------------------------------------------------------------------------------------
// MPA Request and Reply frames (RFC 5044 section 7.1; RFC 6581 for revision 2).

/// "MPA ID Req Frame".
pub const REQUEST_KEY: &[u8; 16] = b"MPA ID Req Frame";
/// "MPA ID Rep Frame".
pub const REPLY_KEY: &[u8; 16] = b"MPA ID Rep Frame";
/// M: the sender wants markers in what it receives.
pub const FLAG_MARKERS: u8 = 0x80;
/// C: the sender wants CRCs.
pub const FLAG_CRC: u8 = 0x40;
/// R: the responder rejects the connection.
pub const FLAG_REJECT: u8 = 0x20;
/// S (RFC 6581): the private data starts with the IRD/ORD words.
pub const FLAG_ENHANCED: u8 = 0x10;

/// An MPA Request or Reply frame, as sent or as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpaFrame {
    /// True for a Reply ("MPA ID Rep Frame"), false for a Request.
    pub is_reply: bool,
    /// The flags byte: M, C, R, S and the four reserved bits.
    pub flags: u8,
    /// Rev.
    pub revision: u8,
    /// The private data, at most 512 bytes (RFC 5044 section 7.1).
    pub private_data: Vec<u8>,
}

impl MpaFrame {
    /// A revision 2 Request with the S and C bits and no markers.
    pub fn request(private_data: Vec<u8>) -> MpaFrame {
        MpaFrame {
            is_reply: false,
            flags: FLAG_CRC | FLAG_ENHANCED,
            revision: 2,
            private_data,
        }
    }

    /// A revision 2 accepting Reply with the S and C bits and no markers.
    pub fn reply(private_data: Vec<u8>) -> MpaFrame {
        MpaFrame {
            is_reply: true,
            ..MpaFrame::request(private_data)
        }
    }

    /// The frame's bytes: key, flags, revision, PD_Length, private data.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(20 + self.private_data.len());
        out.extend_from_slice(if self.is_reply {
            REPLY_KEY
        } else {
            REQUEST_KEY
        });
        out.push(self.flags);
        out.push(self.revision);
        out.extend_from_slice(&(self.private_data.len() as u16).to_be_bytes());
        out.extend_from_slice(&self.private_data);
        out
    }

    /// Reads one frame of the given kind from `stream`; an error for another key or a
    /// PD_Length above 512.
    pub async fn read_from(stream: &mut TcpStream, is_reply: bool) -> io::Result<MpaFrame> {
        let mut head = [0u8; 20];
        stream.read_exact(&mut head).await?;
        let key = if is_reply { REPLY_KEY } else { REQUEST_KEY };
        if &head[..16] != key {
            return Err(invalid(format!("not an MPA frame: {:02x?}", &head[..16])));
        }
        let pd_len = u16::from_be_bytes([head[18], head[19]]) as usize;
        if pd_len > 512 {
            return Err(invalid(format!("PD_Length {pd_len}")));
        }
        let mut private_data = vec![0; pd_len];
        stream.read_exact(&mut private_data).await?;
        Ok(MpaFrame {
            is_reply,
            flags: head[16],
            revision: head[17],
            private_data,
        })
    }

    /// R is set.
    pub fn reject(&self) -> bool {
        self.flags & FLAG_REJECT != 0
    }

    /// M is set.
    pub fn markers(&self) -> bool {
        self.flags & FLAG_MARKERS != 0
    }

    /// C is set.
    pub fn crc(&self) -> bool {
        self.flags & FLAG_CRC != 0
    }

    /// S is set (meaningful from revision 2).
    pub fn enhanced(&self) -> bool {
        self.flags & FLAG_ENHANCED != 0
    }
}

/// Revision 2 private data (RFC 6581): the IRD and ORD words (14 bits each, control bits
/// clear), then `ulp`.
pub fn enhanced_private_data(ird: u16, ord: u16, ulp: &[u8]) -> Vec<u8> {
    let mut pd = Vec::with_capacity(4 + ulp.len());
    pd.extend_from_slice(&(ird & 0x3fff).to_be_bytes());
    pd.extend_from_slice(&(ord & 0x3fff).to_be_bytes());
    pd.extend_from_slice(ulp);
    pd
}

/// RFC 8797 private data: format identifier 0xf6ab0e18, version 1, no remote invalidation,
/// the send and receive sizes as `size / 1024 - 1` (both between 1 KiB and 256 KiB).
pub fn rfc8797(send_size: usize, receive_size: usize) -> [u8; 8] {
    let byte = |size: usize| (size / 1024 - 1) as u8;
    let mut pd = [0u8; 8];
    pd[..4].copy_from_slice(&0xf6ab_0e18u32.to_be_bytes());
    pd[4] = 1;
    pd[6] = byte(send_size);
    pd[7] = byte(receive_size);
    pd
}

// ---------------------------------------------------------------------------------------------
// DDP and RDMAP (RFC 5041 section 4, RFC 5040 section 4).

/// RDMAP opcodes (RFC 5040 section 4.2).
pub mod opcode {
    /// RDMA Write (tagged).
    pub const RDMA_WRITE: u8 = 0;
    /// RDMA Read Request (untagged, queue 1).
    pub const READ_REQUEST: u8 = 1;
    /// RDMA Read Response (tagged).
    pub const READ_RESPONSE: u8 = 2;
    /// Send (untagged, queue 0).
    pub const SEND: u8 = 3;
    /// Send with Invalidate.
    pub const SEND_INVALIDATE: u8 = 4;
    /// Send with Solicited Event.
    pub const SEND_SE: u8 = 5;
    /// Send with Solicited Event and Invalidate.
    pub const SEND_SE_INVALIDATE: u8 = 6;
    /// Terminate (untagged, queue 2).
    pub const TERMINATE: u8 = 7;
}

/// DDP control byte: T (tagged).
const DDP_TAGGED: u8 = 0x80;
/// DDP control byte: L (last segment of a message).
const DDP_LAST: u8 = 0x40;
/// DDP and RDMAP version 1 (the IETF one; the software provider's revision 1 and 2).
const VERSION_1: u8 = 1;

/// An untagged DDP header (18 bytes) with its RDMAP control byte, version 1: the header of a
/// Send (`qn` 0), a Read Request (1) or a Terminate (2).
pub fn untagged_header(
    opcode: u8,
    last: bool,
    rsvd_ulp: u32,
    qn: u32,
    msn: u32,
    mo: u32,
) -> [u8; 18] {
    let mut h = [0u8; 18];
    h[0] = if last { DDP_LAST } else { 0 } | VERSION_1;
    h[1] = (VERSION_1 << 6) | (opcode & 0x0f);
    h[2..6].copy_from_slice(&rsvd_ulp.to_be_bytes());
    h[6..10].copy_from_slice(&qn.to_be_bytes());
    h[10..14].copy_from_slice(&msn.to_be_bytes());
    h[14..18].copy_from_slice(&mo.to_be_bytes());
    h
}

/// A tagged DDP header (14 bytes) with its RDMAP control byte, version 1.
pub fn tagged_header(opcode: u8, last: bool, stag: u32, to: u64) -> [u8; 14] {
    let mut h = [0u8; 14];
    h[0] = DDP_TAGGED | if last { DDP_LAST } else { 0 } | VERSION_1;
    h[1] = (VERSION_1 << 6) | (opcode & 0x0f);
    h[2..6].copy_from_slice(&stag.to_be_bytes());
    h[6..14].copy_from_slice(&to.to_be_bytes());
    h
}

/// A Terminate as received (RFC 5040 section 4.8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawTerminate {
    /// Layer: 0 RDMAP, 1 DDP, 2 LLP (MPA).
    pub layer: u8,
    /// Error type (its meaning depends on the layer).
    pub etype: u8,
    /// Error code.
    pub code: u8,
    /// The header control bits: M 0x80, D 0x40, R 0x20.
    pub hdrct: u8,
    /// Whatever follows the control word: the terminated DDP and RDMAP headers, when present.
    pub headers: Vec<u8>,
}

/// An RDMA Read Request as received (RFC 5040 section 4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawReadRequest {
    /// Data Sink STag.
    pub sink_stag: u32,
    /// Data Sink tagged offset.
    pub sink_to: u64,
    /// RDMA Read Message Size.
    pub size: u32,
    /// Data Source STag.
    pub src_stag: u32,
    /// Data Source tagged offset.
    pub src_to: u64,
}

/// What [`RawPeer::next`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound {
    /// A Send, of any of the four kinds, reassembled: its payload.
    Send(Vec<u8>),
    /// A Terminate.
    Terminate(RawTerminate),
    /// An RDMA Read Request of a nonzero size (zero-length ones are answered by `next`).
    ReadRequest(RawReadRequest),
    /// A segment of anything else: its whole ULPDU.
    Other(Vec<u8>),
    /// The peer closed the connection (end of stream or reset) between FPDUs.
    Closed,
}

// ---------------------------------------------------------------------------------------------
// The peer.

/// One raw connection in Full Operation (after the MPA exchange).
pub struct RawPeer {
    stream: TcpStream,
    /// The Reply (as initiator) or the Request (as responder) the other side sent.
    theirs: MpaFrame,
    /// CRCs in both directions (RFC 5044 section 7.1: when either side asks).
    crc: bool,
    /// The next MSN of this side's Sends (RFC 5041 section 5.1: queues start at 1).
    send_msn: u32,
    /// The next MSN of this side's Read Requests.
    read_msn: u32,
    /// Payload of a Send whose last segment has not come yet.
    partial: Vec<u8>,
}

/// A TCP connection whose MPA Request was read, waiting for this side's Reply.
pub struct Accepted {
    stream: TcpStream,
    /// The client's Request.
    pub request: MpaFrame,
}

impl Accepted {
    /// Sends `reply` as it is. An accepting Reply (R clear) enters Full Operation; a rejecting
    /// one leaves a peer that only reads (the other side closes).
    pub async fn reply(mut self, reply: &MpaFrame) -> io::Result<RawPeer> {
        self.stream.write_all(&reply.to_bytes()).await?;
        if reply.markers() || self.request.markers() {
            return Err(invalid("markers are not supported".into()));
        }
        let crc = reply.crc() || self.request.crc();
        Ok(RawPeer::new(self.stream, self.request, crc))
    }

    /// The socket, for reading or writing outside the protocol.
    pub fn stream(&mut self) -> &mut TcpStream {
        &mut self.stream
    }
}

impl RawPeer {
    /// Ends the connection with a reset (SO_LINGER 0), as a peer that crashed or was cut
    /// off, rather than an orderly close.
    pub fn reset(self) {
        // Deprecated for a linger that blocks the dropping thread; a zero linger never does.
        #[allow(deprecated)]
        let _ = self.stream.set_linger(Some(std::time::Duration::ZERO));
    }

    fn new(stream: TcpStream, theirs: MpaFrame, crc: bool) -> RawPeer {
        RawPeer {
            stream,
            theirs,
            crc,
            send_msn: 1,
            read_msn: 1,
            partial: Vec::new(),
        }
    }

    /// Connects to `addr`, sends `request`, reads the Reply. A rejecting Reply is returned as
    /// well (see [`RawPeer::peer_frame`]); markers in either direction are an error.
    pub async fn connect(addr: SocketAddr, request: &MpaFrame) -> io::Result<RawPeer> {
        let mut stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        stream.write_all(&request.to_bytes()).await?;
        let reply = MpaFrame::read_from(&mut stream, true).await?;
        if reply.markers() || request.markers() {
            return Err(invalid("markers are not supported".into()));
        }
        let crc = reply.crc() || request.crc();
        Ok(RawPeer::new(stream, reply, crc))
    }

    /// Accepts a TCP connection on `listener` and reads its MPA Request.
    pub async fn accept(listener: &TcpListener) -> io::Result<Accepted> {
        let (mut stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let request = MpaFrame::read_from(&mut stream, false).await?;
        Ok(Accepted { stream, request })
    }

    /// The other side's startup frame: the Reply to this side's Request, or the Request this
    /// side replied to.
    pub fn peer_frame(&self) -> &MpaFrame {
        &self.theirs
    }

    /// Whether FPDUs carry a checked CRC.
    pub fn crc(&self) -> bool {
        self.crc
    }

    /// Writes `bytes` to the socket with no framing.
    pub async fn write_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes).await
    }

    /// Frames `ulpdu` as one FPDU (RFC 5044 section 4.1): ULPDU_LENGTH, the ULPDU, pad to a
    /// multiple of four, and the CRC field (CRC32c of all before it, or zeros without CRCs),
    /// and writes it.
    pub async fn send_ulpdu(&mut self, ulpdu: &[u8]) -> io::Result<()> {
        let fpdu = fpdu(ulpdu, self.crc);
        self.stream.write_all(&fpdu).await
    }

    /// Sends `payload` as one RDMA Send message in a single segment (untagged, queue 0, the
    /// next MSN, MO 0, L set).
    pub async fn send_message(&mut self, payload: &[u8]) -> io::Result<()> {
        let msn = self.send_msn;
        self.send_msn = self.send_msn.wrapping_add(1);
        let mut ulpdu = untagged_header(opcode::SEND, true, 0, 0, msn, 0).to_vec();
        ulpdu.extend_from_slice(payload);
        self.send_ulpdu(&ulpdu).await
    }

    /// Sends an RDMA Read Request (queue 1, the next MSN) for `size` bytes of the peer's
    /// `src_stag`/`src_to` into this side's `sink_stag`/`sink_to`.
    pub async fn send_read_request(&mut self, request: RawReadRequest) -> io::Result<()> {
        let msn = self.read_msn;
        self.read_msn = self.read_msn.wrapping_add(1);
        let mut ulpdu = untagged_header(opcode::READ_REQUEST, true, 0, 1, msn, 0).to_vec();
        ulpdu.extend_from_slice(&request.sink_stag.to_be_bytes());
        ulpdu.extend_from_slice(&request.sink_to.to_be_bytes());
        ulpdu.extend_from_slice(&request.size.to_be_bytes());
        ulpdu.extend_from_slice(&request.src_stag.to_be_bytes());
        ulpdu.extend_from_slice(&request.src_to.to_be_bytes());
        self.send_ulpdu(&ulpdu).await
    }

    /// Answers `request` with `data` in one RDMA Read Response segment (tagged, to the
    /// request's Data Sink STag and TO, L set: RFC 5040 section 5.2).
    pub async fn send_read_response(
        &mut self,
        request: &RawReadRequest,
        data: &[u8],
    ) -> io::Result<()> {
        let mut ulpdu = tagged_header(
            opcode::READ_RESPONSE,
            true,
            request.sink_stag,
            request.sink_to,
        )
        .to_vec();
        ulpdu.extend_from_slice(data);
        self.send_ulpdu(&ulpdu).await
    }

    /// The next FPDU's ULPDU, its CRC checked; `None` when the stream ends (or is reset) at
    /// an FPDU boundary. A stream that ends inside an FPDU, or a CRC mismatch, is an error.
    pub async fn next_ulpdu(&mut self) -> io::Result<Option<Vec<u8>>> {
        let mut len = [0u8; 2];
        match self.stream.read_exact(&mut len).await {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset
                ) =>
            {
                return Ok(None)
            }
            Err(e) => return Err(e),
        }
        let ulpdu_len = u16::from_be_bytes(len) as usize;
        let mut rest = vec![0u8; ulpdu_len + pad_len(ulpdu_len) + 4];
        self.stream.read_exact(&mut rest).await?;
        let covered = ulpdu_len + pad_len(ulpdu_len);
        if self.crc {
            let mut all = len.to_vec();
            all.extend_from_slice(&rest[..covered]);
            let want = crc_field(crc32c(&all));
            if rest[covered..] != want {
                return Err(invalid(format!(
                    "CRC field {:02x?}, computed {want:02x?}",
                    &rest[covered..]
                )));
            }
        }
        rest.truncate(ulpdu_len);
        Ok(Some(rest))
    }

    /// The next RDMAP message: a Send reassembled from its segments, a Terminate, a nonzero
    /// Read Request, or another segment whole. Zero-length Read Requests are answered (see the
    /// module documentation) and skipped. A ULPDU too short for its DDP header is an error.
    pub async fn next(&mut self) -> io::Result<Inbound> {
        loop {
            let Some(ulpdu) = self.next_ulpdu().await? else {
                return Ok(Inbound::Closed);
            };
            let (&c0, &c1) = match (ulpdu.first(), ulpdu.get(1)) {
                (Some(c0), Some(c1)) => (c0, c1),
                _ => return Err(invalid(format!("a ULPDU of {} bytes", ulpdu.len()))),
            };
            let op = c1 & 0x0f;
            let last = c0 & DDP_LAST != 0;
            if c0 & DDP_TAGGED != 0 {
                if ulpdu.len() < 14 {
                    return Err(invalid(format!("a tagged ULPDU of {} bytes", ulpdu.len())));
                }
                return Ok(Inbound::Other(ulpdu));
            }
            if ulpdu.len() < 18 {
                return Err(invalid(format!(
                    "an untagged ULPDU of {} bytes",
                    ulpdu.len()
                )));
            }
            let payload = &ulpdu[18..];
            match op {
                opcode::SEND
                | opcode::SEND_INVALIDATE
                | opcode::SEND_SE
                | opcode::SEND_SE_INVALIDATE => {
                    self.partial.extend_from_slice(payload);
                    if last {
                        return Ok(Inbound::Send(std::mem::take(&mut self.partial)));
                    }
                }
                opcode::TERMINATE => {
                    if payload.len() < 4 {
                        return Err(invalid(format!("a Terminate of {} bytes", payload.len())));
                    }
                    return Ok(Inbound::Terminate(RawTerminate {
                        layer: payload[0] >> 4,
                        etype: payload[0] & 0x0f,
                        code: payload[1],
                        hdrct: payload[2],
                        headers: payload[4..].to_vec(),
                    }));
                }
                opcode::READ_REQUEST => {
                    let Ok(b) = <[u8; 28]>::try_from(payload) else {
                        return Err(invalid(format!(
                            "a Read Request of {} bytes",
                            payload.len()
                        )));
                    };
                    let be32 = |at: usize| u32::from_be_bytes(b[at..at + 4].try_into().unwrap());
                    let be64 = |at: usize| u64::from_be_bytes(b[at..at + 8].try_into().unwrap());
                    let request = RawReadRequest {
                        sink_stag: be32(0),
                        sink_to: be64(4),
                        size: be32(12),
                        src_stag: be32(16),
                        src_to: be64(20),
                    };
                    if request.size != 0 {
                        return Ok(Inbound::ReadRequest(request));
                    }
                    // RFC 5040 section 5.2: the Read Response goes to the Data Sink's STag and
                    // TO, here with no data.
                    let response = tagged_header(
                        opcode::READ_RESPONSE,
                        true,
                        request.sink_stag,
                        request.sink_to,
                    );
                    self.send_ulpdu(&response).await?;
                }
                _ => return Ok(Inbound::Other(ulpdu)),
            }
        }
    }

    /// Reads until the stream ends; the RDMAP messages read on the way (Sends, Terminates, ...).
    pub async fn drain(&mut self) -> io::Result<Vec<Inbound>> {
        let mut seen = Vec::new();
        loop {
            match self.next().await? {
                Inbound::Closed => return Ok(seen),
                other => seen.push(other),
            }
        }
    }
}

/// Pad after a ULPDU of `ulpdu_len` bytes: ULPDU_LENGTH, ULPDU and pad are a multiple of four
/// (RFC 5044 section 4.1).
pub fn pad_len(ulpdu_len: usize) -> usize {
    (4 - (2 + ulpdu_len) % 4) % 4
}

/// One FPDU carrying `ulpdu` (see [`RawPeer::send_ulpdu`]).
pub fn fpdu(ulpdu: &[u8], crc: bool) -> Vec<u8> {
    let mut out = (ulpdu.len() as u16).to_be_bytes().to_vec();
    out.extend_from_slice(ulpdu);
    out.resize(out.len() + pad_len(ulpdu.len()), 0);
    let field = if crc { crc_field(crc32c(&out)) } else { [0; 4] };
    out.extend_from_slice(&field);
    out
}

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

// ---------------------------------------------------------------------------------------------
// RPC-over-RDMA version 1 (RFC 8166 section 5) and ONC RPC (RFC 5531), as XDR words.

/// rdma_proc RDMA_MSG.
pub const RDMA_MSG: u32 = 0;
/// rdma_proc RDMA_NOMSG.
pub const RDMA_NOMSG: u32 = 1;
/// rdma_proc RDMA_ERROR.
pub const RDMA_ERROR: u32 = 4;
/// rdma_err ERR_VERS.
pub const ERR_VERS: u32 = 1;
/// rdma_err ERR_CHUNK.
pub const ERR_CHUNK: u32 = 2;

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|v| v.to_be_bytes()).collect()
}

/// A version 1 RDMA_MSG without chunks (three empty lists) followed by the RPC message.
pub fn rdma_msg(xid: u32, credits: u32, rpc: &[u8]) -> Vec<u8> {
    let mut m = words(&[xid, 1, credits, RDMA_MSG, 0, 0, 0]);
    m.extend_from_slice(rpc);
    m
}

/// An ONC RPC call (version 2) of procedure `proc` with AUTH_NONE credential and verifier,
/// followed by the argument words `args`.
pub fn rpc_call(xid: u32, prog: u32, vers: u32, proc: u32, args: &[u32]) -> Vec<u8> {
    let mut w = vec![xid, 0, 2, prog, vers, proc, 0, 0, 0, 0];
    w.extend_from_slice(args);
    words(&w)
}

/// An ONC RPC reply: MSG_ACCEPTED, AUTH_NONE verifier, SUCCESS, then the result words.
pub fn rpc_success(xid: u32, results: &[u32]) -> Vec<u8> {
    let mut w = vec![xid, 1, 0, 0, 0, 0];
    w.extend_from_slice(results);
    words(&w)
}

/// The body of a received RPC-over-RDMA version 1 header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RpcRdmaBody {
    /// RDMA_MSG without chunks: the RPC message.
    Msg(Vec<u8>),
    /// RDMA_ERROR: the error code and the words after it (ERR_VERS: low and high).
    Error {
        /// rdma_err.
        code: u32,
        /// The rest, raw.
        rest: Vec<u8>,
    },
    /// Anything else (chunks present, other types): the bytes after the fixed words.
    Other(Vec<u8>),
}

/// A received RPC-over-RDMA version 1 header, parsed by hand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcRdmaHeader {
    /// rdma_xid.
    pub xid: u32,
    /// rdma_vers.
    pub vers: u32,
    /// rdma_credit.
    pub credit: u32,
    /// rdma_proc.
    pub proc: u32,
    /// What follows.
    pub body: RpcRdmaBody,
}

impl RpcRdmaHeader {
    /// Parses `m`; `None` when it is shorter than the four fixed words.
    pub fn parse(m: &[u8]) -> Option<RpcRdmaHeader> {
        let word = |i: usize| {
            m.get(4 * i..4 * i + 4)
                .map(|w| u32::from_be_bytes(w.try_into().unwrap()))
        };
        let (xid, vers, credit, proc) = (word(0)?, word(1)?, word(2)?, word(3)?);
        let body = match (proc, word(4), word(5), word(6)) {
            (RDMA_MSG, Some(0), Some(0), Some(0)) => RpcRdmaBody::Msg(m[28..].to_vec()),
            (RDMA_ERROR, Some(code), ..) => RpcRdmaBody::Error {
                code,
                rest: m[20..].to_vec(),
            },
            _ => RpcRdmaBody::Other(m[16..].to_vec()),
        };
        Some(RpcRdmaHeader {
            xid,
            vers,
            credit,
            proc,
            body,
        })
    }
}

/// The XID (first word) of an RPC message, if it has one.
pub fn rpc_xid(rpc: &[u8]) -> Option<u32> {
    rpc.get(..4)
        .map(|w| u32::from_be_bytes(w.try_into().unwrap()))
}

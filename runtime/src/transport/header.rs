//! RPC-over-RDMA transport headers, versions 1 (seed 004 section 5.6) and 2 (seed 003 sections
//! 3 and 5), on the types xdrgen generates from `specs/rpcrdma-v1.x` and from `specs/common.x`
//! with `specs/baseops.x` when the crate is built: parsing with every check a responder or
//! requester makes before trusting a peer's header, and building headers to send.
//!
//! Both versions parse into one [`Header`]: the chunk machinery is the same (seed 003 section
//! 10.1: "Chunks are expressed using the same on-the-wire format and are used in the same way
//! in both versions"), and the core above decides what each version allows.

use bytes::Bytes;

use crate::transport::core::SendBytes;
use crate::xdr::{self, Encoder};

pub mod props;
pub mod v1;
pub mod v2;
mod xid;

pub use crate::rpc::RdmaError;
pub use crate::xdr::AlignPadding;
pub use props::{BaseProperties, PropSubset, Property};
pub use xid::{check_rpc_xid, XidMismatch};

/// Version 1 (RFC 8166; seed 004 section 5.1.2: "this field MUST contain the value 1").
pub const VERSION: u32 = 1;

/// Version 2 (seed 003).
pub const VERSION_2: u32 = 2;

/// The four fixed words: XID, version, credits, message type (seed 004 section 5.1; seed 003
/// section 3.1 keeps them).
pub const FIXED_LEN: usize = 16;

/// Version 2's prefix: the four fixed words and `rdma_flags` (seed 003 section 3.2).
pub const V2_PREFIX_LEN: usize = 20;

/// `rdma_flags`: the message carries an XID its receiver generated, that is, a reply (seed 003
/// section 3.2).
pub const F_RESPONSE: u32 = v2::RPCRDMA2_F_RESPONSE;

/// A remote buffer named in a chunk (seed 004 section 4.4.2): handle, length, offset.
pub type Segment = v1::Rpcrdma1Segment;

/// A Read chunk: segments sharing one XDR Position (seed 004 section 4.4.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadChunk {
    /// Where the chunk's data goes in the RPC message's XDR stream.
    pub position: u32,
    /// The segments, concatenated in order.
    pub segments: Vec<Segment>,
}

impl ReadChunk {
    /// The chunk's length: the sum of its segments'.
    pub fn len(&self) -> u64 {
        total_len(&self.segments)
    }

    /// True when the chunk's segments hold no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The sum of the segments' lengths.
pub fn total_len(segments: &[Segment]) -> u64 {
    segments.iter().map(|s| s.rdma_length as u64).sum()
}

/// The chunk lists of an RDMA_MSG or RDMA_NOMSG header (seed 004 section 5.2; seed 003 section
/// 3.3 for version 2's `rdma_inv_handle`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chunks {
    /// Version 2: the handle the requester lets the responder invalidate with Send With
    /// Invalidate, 0 for none (seed 003 section 3.3). Always 0 in version 1.
    pub inv_handle: u32,
    /// The Read list, grouped into chunks, in the order the requester sent them.
    pub reads: Vec<ReadChunk>,
    /// The Write list: one array of segments per Write chunk.
    pub writes: Vec<Vec<Segment>>,
    /// The Reply chunk.
    pub reply: Option<Vec<Segment>>,
}

impl Chunks {
    /// True when all three lists are empty.
    pub fn is_empty(&self) -> bool {
        self.reads.is_empty() && self.writes.is_empty() && self.reply.is_none()
    }

    /// Every segment the requester advertised, in header order.
    pub fn segments(&self) -> impl Iterator<Item = &Segment> {
        self.reads
            .iter()
            .flat_map(|c| &c.segments)
            .chain(self.writes.iter().flatten())
            .chain(self.reply.iter().flatten())
    }
}

/// The message type and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// RDMA_MSG / RDMA2_MSG: chunk lists, then the RPC message (RDMA_MSGP is taken as this,
    /// seed 004 section 5.7.1: "Receivers MUST treat received RDMA_MSGP type messages as they
    /// would treat RDMA_MSG type messages").
    Msg(Chunks),
    /// RDMA_MSGP, version 1 only: an RDMA_MSG whose RPC message is padded so that large
    /// opaque data lands aligned in the receiver's buffer (seed 000 sections 3.5 and 4.1).
    /// Parsed as this only for a receiver in the 2004 mode; others take it as
    /// [`Body::Msg`] (seed 004 section 5.7.1), see [`parse_with`].
    MsgP(Chunks, AlignPadding),
    /// RDMA_NOMSG / RDMA2_NOMSG: chunk lists only; the RPC message is in a Position-Zero Read
    /// chunk (call) or the Reply chunk (reply).
    NoMsg(Chunks),
    /// RDMA_DONE, version 1 only (seed 004 section 5.7.2: "Receivers MUST drop RDMA_DONE type
    /// messages").
    Done,
    /// RDMA_ERROR / RDMA2_ERROR.
    Error(RdmaError),
    /// RDMA2_CONNPROP: the sender's transport properties (seed 003 section 5.3.4), as sent:
    /// their values are checked by whoever knows the property.
    ConnProp(Vec<Property>),
    /// A version 2 header type this module does not know (seed 003 section 9.1: an
    /// extension's), with the bytes after the prefix.
    Other {
        /// `rdma_htype`.
        htype: u32,
        /// Everything after `rdma_flags`.
        body: Bytes,
    },
}

/// A parsed and checked header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The transaction id (seed 004 section 5.1.1).
    pub xid: u32,
    /// [`VERSION`] or [`VERSION_2`].
    pub version: u32,
    /// Credits requested (calls) or granted (replies) (seed 004 section 5.1.3; seed 003
    /// section 3.2: in version 2 [`F_RESPONSE`] says which).
    pub credit: u32,
    /// Version 2's `rdma_flags` (seed 003 section 3.2); 0 in version 1.
    pub flags: u32,
    /// The message type and body.
    pub body: Body,
}

impl Header {
    /// A version 1 header.
    pub fn v1(xid: u32, credit: u32, body: Body) -> Header {
        Header {
            xid,
            version: VERSION,
            credit,
            flags: 0,
            body,
        }
    }

    /// A version 2 header.
    pub fn v2(xid: u32, credit: u32, flags: u32, body: Body) -> Header {
        Header {
            xid,
            version: VERSION_2,
            credit,
            flags,
            body,
        }
    }

    /// True when the message answers one of its receiver's own (version 2: [`F_RESPONSE`]).
    pub fn is_response(&self) -> bool {
        self.flags & F_RESPONSE != 0
    }
}

/// Bounds on what a peer's header may ask for, checked before anything is allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderLimits {
    /// Most segments in one chunk.
    pub max_segments: usize,
    /// Most Read chunks, and most Write chunks.
    pub max_chunks: usize,
    /// Most bytes of all Read chunks of one call together (what the responder pulls);
    /// [`DEFAULT_MAX_MESSAGE`](crate::rpc::DEFAULT_MAX_MESSAGE) by default, the bound of a
    /// record over TCP.
    pub max_read_bytes: u64,
    /// Most transport properties in one RDMA2_CONNPROP.
    pub max_properties: usize,
}

impl Default for HeaderLimits {
    fn default() -> Self {
        HeaderLimits {
            max_segments: 64,
            max_chunks: 16,
            max_read_bytes: crate::rpc::DEFAULT_MAX_MESSAGE as u64,
            max_properties: 64,
        }
    }
}

/// Which of a responder's limits a header exceeds: version 2 names it in its error (seed 003
/// section 5.3.3), version 1 answers ERR_CHUNK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitExceeded {
    /// More Read chunks than [`HeaderLimits::max_chunks`].
    ReadChunks(u32),
    /// More Write chunks than [`HeaderLimits::max_chunks`].
    WriteChunks(u32),
    /// A chunk with more segments than [`HeaderLimits::max_segments`].
    Segments(u32),
    /// Read chunks longer together than [`HeaderLimits::max_read_bytes`].
    ReadBytes(u64),
}

impl LimitExceeded {
    /// The version 2 error that reports it.
    pub fn error(&self) -> RdmaError {
        match *self {
            LimitExceeded::ReadChunks(max) => RdmaError::ReadChunks { max },
            LimitExceeded::WriteChunks(max) => RdmaError::WriteChunks { max },
            LimitExceeded::Segments(max) => RdmaError::Segments { max },
            // No version 2 code names a byte budget: the request cannot be served as sent,
            // in any shape (a Position-Zero Read chunk would be as long).
            LimitExceeded::ReadBytes(_) => RdmaError::System,
        }
    }
}

/// Why a received header cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderError {
    /// Shorter than the fixed fields: nothing in it may be used (seed 004 section 8.3.3:
    /// "the receiver MUST NOT use any value in the fields that were transmitted ... the
    /// message dropped").
    Short,
    /// A version this module does not speak: a responder answers ERR_VERS (seed 004 section
    /// 5.5).
    Version {
        /// The header's XID.
        xid: u32,
        /// The version it carried.
        version: u32,
    },
    /// A malformed body or chunk list: a responder answers ERR_CHUNK (version 1) or
    /// RDMA2_ERR_BAD_XDR (version 2) (seed 004 section 5.5; seed 003 section 5.3.3).
    Malformed {
        /// The header's XID.
        xid: u32,
        /// The header's version.
        version: u32,
        /// What is wrong.
        reason: String,
    },
    /// A well-formed header that asks for more than [`HeaderLimits`] allow.
    Limit {
        /// The header's XID.
        xid: u32,
        /// The header's version.
        version: u32,
        /// Which limit.
        limit: LimitExceeded,
    },
}

impl HeaderError {
    /// The XID of the header, when it was long enough to have one.
    pub fn xid(&self) -> Option<u32> {
        match self {
            HeaderError::Short => None,
            HeaderError::Version { xid, .. }
            | HeaderError::Malformed { xid, .. }
            | HeaderError::Limit { xid, .. } => Some(*xid),
        }
    }
}

impl std::fmt::Display for HeaderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderError::Short => f.write_str("a header shorter than its fixed fields"),
            HeaderError::Version { xid, version } => {
                write!(f, "xid {xid:#x}: RPC-over-RDMA version {version}")
            }
            HeaderError::Malformed { xid, reason, .. } => write!(f, "xid {xid:#x}: {reason}"),
            HeaderError::Limit { xid, limit, .. } => {
                let what = match limit {
                    LimitExceeded::ReadChunks(max) => format!("more than {max} Read chunks"),
                    LimitExceeded::WriteChunks(max) => format!("more than {max} Write chunks"),
                    LimitExceeded::Segments(max) => {
                        format!("a chunk of more than {max} segments")
                    }
                    LimitExceeded::ReadBytes(max) => {
                        format!("Read chunks of more than {max} bytes")
                    }
                };
                write!(f, "xid {xid:#x}: {what}")
            }
        }
    }
}

/// Word `index` (counted in 4-byte words) of a received message, if it is that long: for the
/// few places that must look at a header before, or instead of, parsing it.
pub(crate) fn word(message: &[u8], index: usize) -> Option<u32> {
    let at = 4 * index;
    Some(u32::from_be_bytes(
        message.get(at..at + 4)?.try_into().ok()?,
    ))
}

/// The first words of a header, which every version keeps (seed 003 section 10.2: later
/// versions "maintain the first four header words").
fn fixed_words(message: &[u8]) -> Option<(u32, u32, u32, u32)> {
    Some((
        word(message, 0)?,
        word(message, 1)?,
        word(message, 2)?,
        word(message, 3)?,
    ))
}

/// Parses the header at the start of `message` (version 1 or 2); returns it and its length
/// (where an RDMA_MSG's RPC message starts).
pub fn parse(message: &[u8], limits: &HeaderLimits) -> Result<(Header, usize), HeaderError> {
    parse_with(message, limits, false)
}

/// [`parse`], keeping an RDMA_MSGP header's padding as [`Body::MsgP`] when `keep_padding`
/// (a receiver in the 2004 mode, seed 000 section 3.5), else taking it as [`Body::Msg`]
/// (seed 004 section 5.7.1). Kept padding that cannot be honoured (an alignment that is not
/// a multiple of four, or larger than [`crate::xdr::MAX_ALIGN`]) is malformed.
pub fn parse_with(
    message: &[u8],
    limits: &HeaderLimits,
    keep_padding: bool,
) -> Result<(Header, usize), HeaderError> {
    if let Some(plain) = plain_msg(message) {
        return Ok(plain);
    }
    let Some((xid, version, _, _)) = fixed_words(message) else {
        return Err(HeaderError::Short);
    };
    match version {
        VERSION => v1::parse(message, limits, keep_padding),
        // Seed 003 keeps seed 004's rule for a header too short to trust.
        VERSION_2 if message.len() < V2_PREFIX_LEN => Err(HeaderError::Short),
        VERSION_2 => v2::parse(message, limits),
        _ => Err(HeaderError::Version { xid, version }),
    }
}

/// The length of a version 1 RDMA_MSG without chunks: the fixed words and three empty lists
/// (seed 004 section 5.6: `rdma_reads`, `rdma_writes`, `rdma_reply`).
const PLAIN_MSG_LEN: usize = FIXED_LEN + 12;

/// The length of a version 2 RDMA2_MSG without chunks: the prefix (the fixed words and
/// `rdma_flags`), `rdma_inv_handle` and three empty lists (seed 003 section 6.3,
/// `rpcrdma2_chunk_lists`).
pub(crate) const PLAIN_MSG_V2_LEN: usize = V2_PREFIX_LEN + 16;

/// `rdma_proc` of RDMA_MSG (seed 004 section 5.6), and `rdma_htype` of RDMA2_MSG (seed 003
/// section 6.4): both 0.
const RDMA_MSG: u32 = 0;

/// The most common header by far, an RDMA_MSG without chunks (every small call and reply), of
/// either version, read without the generated decoder: what that decoder and
/// [`check_chunks`] make of these 28 (version 1) or 36 (version 2) bytes, at a tenth of the
/// instructions. Anything else is `None`, for the full parse.
fn plain_msg(message: &[u8]) -> Option<(Header, usize)> {
    let w = |i| word(message, i);
    if w(3) != Some(RDMA_MSG) {
        return None;
    }
    // An empty list and an absent Reply chunk are each a zero word (RFC 4506 section 4.19).
    let no_chunks = |first: usize| (first..first + 3).all(|i| w(i) == Some(0));
    match w(1)? {
        VERSION if no_chunks(4) => {
            let body = Body::Msg(Chunks::default());
            Some((Header::v1(w(0)?, w(2)?, body), PLAIN_MSG_LEN))
        }
        VERSION_2 if no_chunks(6) => {
            let chunks = Chunks {
                inv_handle: w(5)?,
                ..Chunks::default()
            };
            let header = Header::v2(w(0)?, w(2)?, w(4)?, Body::Msg(chunks));
            Some((header, PLAIN_MSG_V2_LEN))
        }
        _ => None,
    }
}

/// [`plain_msg`]'s counterpart: when `header` is an RDMA_MSG without chunks of either
/// version, writes it at the start of `out` as the generated encoder would and returns its
/// length (28 or 36 bytes); `None` for every other header.
#[inline]
fn write_plain_msg(header: &Header, out: &mut [u8; PLAIN_MSG_V2_LEN]) -> Option<usize> {
    let Body::Msg(c) = &header.body else {
        return None;
    };
    if !(c.reads.is_empty() && c.writes.is_empty() && c.reply.is_none()) {
        return None;
    }
    let mut put =
        |i: usize, value: u32| out[4 * i..4 * i + 4].copy_from_slice(&value.to_be_bytes());
    put(0, header.xid);
    put(1, header.version);
    put(2, header.credit);
    // rdma_proc (RDMA_MSG) / rdma_htype (RDMA2_MSG).
    put(3, RDMA_MSG);
    let (lists, len) = match header.version {
        VERSION => (4, PLAIN_MSG_LEN),
        VERSION_2 => {
            put(4, header.flags);
            put(5, c.inv_handle);
            (6, PLAIN_MSG_V2_LEN)
        }
        _ => return None,
    };
    // The three empty lists.
    (lists..lists + 3).for_each(|i| put(i, 0));
    Some(len)
}

/// Groups and checks decoded chunk lists, naming the header in the error.
fn checked(
    raw: RawChunks,
    limits: &HeaderLimits,
    xid: u32,
    version: u32,
) -> Result<Chunks, HeaderError> {
    check_chunks(raw, limits).map_err(|e| match e {
        ChunkError::Malformed(reason) => HeaderError::Malformed {
            xid,
            version,
            reason,
        },
        ChunkError::Limit(limit) => HeaderError::Limit {
            xid,
            version,
            limit,
        },
    })
}

/// Chunk lists as decoded, before grouping and checking: the Read list's (position,
/// segment) entries, the Write list, the Reply chunk.
struct RawChunks {
    inv_handle: u32,
    reads: Vec<(u32, Segment)>,
    writes: Vec<Vec<Segment>>,
    reply: Option<Vec<Segment>>,
}

enum ChunkError {
    Malformed(String),
    Limit(LimitExceeded),
}

/// Groups the Read list into chunks and checks every list against `limits` and the rules of
/// seed 004 section 4.4.
fn check_chunks(c: RawChunks, limits: &HeaderLimits) -> Result<Chunks, ChunkError> {
    let limit = |l| Err(ChunkError::Limit(l));
    let max_chunks = limits.max_chunks.min(u32::MAX as usize) as u32;
    let max_segments = limits.max_segments.min(u32::MAX as usize) as u32;
    let mut reads: Vec<ReadChunk> = Vec::new();
    for (position, segment) in c.reads {
        // Seed 004 section 4.4.4.1: "The value in this field MUST be a multiple of four."
        if position % 4 != 0 {
            return Err(ChunkError::Malformed(format!(
                "Read chunk position {position} is not a multiple of four"
            )));
        }
        check_segment(&segment).map_err(ChunkError::Malformed)?;
        match reads.last_mut() {
            // Section 4.4.4: "All segments belonging to the same Read chunk have the same
            // value in their Position field": consecutive equal positions form one chunk.
            Some(last) if last.position == position => last.segments.push(segment),
            _ => {
                if reads.iter().any(|r| r.position == position) {
                    return Err(ChunkError::Malformed(format!(
                        "two Read chunks at position {position} (segments of one chunk must be adjacent)"
                    )));
                }
                reads.push(ReadChunk {
                    position,
                    segments: vec![segment],
                });
            }
        }
    }
    if reads.len() > limits.max_chunks {
        return limit(LimitExceeded::ReadChunks(max_chunks));
    }
    let mut read_bytes = 0u64;
    for r in &reads {
        if r.segments.len() > limits.max_segments {
            return limit(LimitExceeded::Segments(max_segments));
        }
        read_bytes += r.len();
    }
    if read_bytes > limits.max_read_bytes {
        return limit(LimitExceeded::ReadBytes(limits.max_read_bytes));
    }
    if c.writes.len() > limits.max_chunks {
        return limit(LimitExceeded::WriteChunks(max_chunks));
    }
    for w in c.writes.iter().chain(c.reply.iter()) {
        if w.len() > limits.max_segments {
            return limit(LimitExceeded::Segments(max_segments));
        }
        for s in w {
            check_segment(s).map_err(ChunkError::Malformed)?;
        }
    }
    Ok(Chunks {
        inv_handle: c.inv_handle,
        reads,
        writes: c.writes,
        reply: c.reply,
    })
}

/// A segment whose last byte's address does not fit 64 bits cannot name real memory.
fn check_segment(s: &Segment) -> Result<(), String> {
    if s.rdma_offset.checked_add(s.rdma_length as u64).is_none() {
        return Err(format!(
            "a segment at {:#x} of {} bytes wraps the address space",
            s.rdma_offset, s.rdma_length
        ));
    }
    Ok(())
}

/// Encodes a header into `enc`, in its version's format.
pub fn encode(header: &Header, enc: &mut Encoder) -> xdr::Result<()> {
    match header.version {
        VERSION_2 => v2::encode(header, enc),
        _ => v1::encode(header, enc),
    }
}

/// Encodes a header into fresh bytes.
pub fn to_bytes(header: &Header) -> xdr::Result<Bytes> {
    let mut bytes = [0; PLAIN_MSG_V2_LEN];
    if let Some(len) = write_plain_msg(header, &mut bytes) {
        return Ok(Bytes::copy_from_slice(&bytes[..len]));
    }
    encode_long(header)
}

/// Encodes a header as the start of a Send: the common RDMA_MSG without chunks in place,
/// any other in a buffer of its own.
pub fn to_send(header: &Header) -> xdr::Result<SendBytes> {
    let mut send = SendBytes::default();
    encode_into(header, &mut send)?;
    Ok(send)
}

/// Encodes a header as the header of `send` (see [`to_send`]), in place of the one it had.
pub fn encode_into(header: &Header, send: &mut SendBytes) -> xdr::Result<()> {
    if !send.write_head(|out| write_plain_msg(header, out)) {
        send.set_head_bytes(encode_long(header)?);
    }
    Ok(())
}

fn encode_long(header: &Header) -> xdr::Result<Bytes> {
    let mut enc = Encoder::with_capacity(encoded_len(header));
    encode(header, &mut enc)?;
    Ok(enc.finish().into_bytes())
}

/// The length of a header's chunk lists on the wire (both versions; version 2 adds
/// `rdma_inv_handle`).
fn chunks_len(c: &Chunks) -> usize {
    // Each Read segment: present flag + position + segment (4 + 4 + 16); list end 4.
    let reads: usize = c.reads.iter().map(|r| r.segments.len() * 24).sum::<usize>() + 4;
    // Each Write chunk: present flag + count + segments; list end 4.
    let writes: usize = c.writes.iter().map(|w| 8 + w.len() * 16).sum::<usize>() + 4;
    let reply = c.reply.as_ref().map_or(4, |r| 8 + r.len() * 16);
    reads + writes + reply
}

/// The header's encoded length.
pub fn encoded_len(header: &Header) -> usize {
    match header.version {
        VERSION_2 => v2::encoded_len(header),
        _ => v1::encoded_len(header),
    }
}

#[cfg(test)]
mod tests;

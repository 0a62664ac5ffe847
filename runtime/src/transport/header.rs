//! The RPC-over-RDMA version 1 header (seed 004 section 5.6), on the types xdrgen generates
//! from `specs/rpcrdma-v1.x` when the crate is built: parsing with every check a responder or
//! requester makes before trusting a peer's header, and building headers to send.

use crate::xdr::{self, Decode, Decoder, Encode, Encoder};

/// The generated types of `specs/rpcrdma-v1.x`.
#[allow(missing_docs, clippy::all)]
pub mod v1 {
    include!(concat!(env!("OUT_DIR"), "/rpcrdma_v1.rs"));
}

use v1::{
    Rpcrdma1Body, Rpcrdma1Chunks, Rpcrdma1ErrVers, Rpcrdma1Error, Rpcrdma1Msg, Rpcrdma1ReadList,
    Rpcrdma1ReadSegment, Rpcrdma1Segment, Rpcrdma1WriteChunk, Rpcrdma1WriteList,
};

/// The protocol version (seed 004 section 5.1.2: "this field MUST contain the value 1").
pub const VERSION: u32 = 1;

/// The four fixed words: XID, version, credits, message type (seed 004 section 5.1).
pub const FIXED_LEN: usize = 16;

/// A remote buffer named in a chunk (seed 004 section 4.4.2): handle, length, offset.
pub type Segment = Rpcrdma1Segment;

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

/// The chunk lists of an RDMA_MSG or RDMA_NOMSG header (seed 004 section 5.2).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chunks {
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
    /// RDMA_MSG: chunk lists, then the RPC message (RDMA_MSGP is taken as this, seed 004
    /// section 5.7.1: "Receivers MUST treat received RDMA_MSGP type messages as they would
    /// treat RDMA_MSG type messages").
    Msg(Chunks),
    /// RDMA_NOMSG: chunk lists only; the RPC message is in a Position-Zero Read chunk (call)
    /// or the Reply chunk (reply).
    NoMsg(Chunks),
    /// RDMA_DONE (seed 004 section 5.7.2: "Receivers MUST drop RDMA_DONE type messages").
    Done,
    /// RDMA_ERROR / ERR_VERS with the peer's supported range.
    ErrVers {
        /// Lowest version supported.
        low: u32,
        /// Highest version supported.
        high: u32,
    },
    /// RDMA_ERROR / ERR_CHUNK.
    ErrChunk,
}

/// A parsed and checked header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The transaction id (seed 004 section 5.1.1).
    pub xid: u32,
    /// Credits requested (calls) or granted (replies) (seed 004 section 5.1.3).
    pub credit: u32,
    /// The message type and body.
    pub body: Body,
}

/// Bounds on what a peer's header may ask for, checked before anything is allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderLimits {
    /// Most segments in one chunk.
    pub max_segments: usize,
    /// Most Read chunks, and most Write chunks.
    pub max_chunks: usize,
    /// Most bytes of all Read chunks of one call together (what the responder pulls).
    pub max_read_bytes: u64,
}

impl Default for HeaderLimits {
    fn default() -> Self {
        HeaderLimits {
            max_segments: 64,
            max_chunks: 16,
            max_read_bytes: 64 << 20,
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
    /// A version this side does not speak: a responder answers ERR_VERS (seed 004 section
    /// 5.5).
    Version {
        /// The header's XID.
        xid: u32,
        /// The version it carried.
        version: u32,
    },
    /// A malformed body or chunk list: a responder answers ERR_CHUNK (seed 004 section 5.5).
    Malformed {
        /// The header's XID.
        xid: u32,
        /// What is wrong.
        reason: String,
    },
}

impl std::fmt::Display for HeaderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderError::Short => f.write_str("a header shorter than its fixed fields"),
            HeaderError::Version { xid, version } => {
                write!(f, "xid {xid:#x}: RPC-over-RDMA version {version}")
            }
            HeaderError::Malformed { xid, reason } => write!(f, "xid {xid:#x}: {reason}"),
        }
    }
}

/// Parses the header at the start of `message`; returns it and its length (where an RDMA_MSG's
/// RPC message starts).
pub fn parse(message: &[u8], limits: &HeaderLimits) -> Result<(Header, usize), HeaderError> {
    if message.len() < FIXED_LEN {
        return Err(HeaderError::Short);
    }
    let word =
        |i: usize| u32::from_be_bytes([message[i], message[i + 1], message[i + 2], message[i + 3]]);
    let (xid, version, credit) = (word(0), word(4), word(8));
    if version != VERSION {
        return Err(HeaderError::Version { xid, version });
    }
    let malformed = |reason: String| HeaderError::Malformed { xid, reason };
    // Nothing a header decodes can allocate more than its own length allows: lists take bytes
    // of the input per element, and counted arrays are checked against what remains. The
    // limits on chunk and segment counts are checked after decoding.
    let mut dec = Decoder::from_slice(&message[12..]);
    dec.set_base_offset(12);
    let body = Rpcrdma1Body::decode(&mut dec).map_err(|e| malformed(e.to_string()))?;
    let used = message.len() - 12 - dec.remaining();
    let body = match body {
        Rpcrdma1Body::RdmaMsg(c) => Body::Msg(check_chunks(c, limits).map_err(malformed)?),
        Rpcrdma1Body::RdmaMsgp(p) => {
            Body::Msg(check_chunks(p.rdma_achunks, limits).map_err(malformed)?)
        }
        Rpcrdma1Body::RdmaNomsg(c) => Body::NoMsg(check_chunks(c, limits).map_err(malformed)?),
        Rpcrdma1Body::RdmaDone => Body::Done,
        Rpcrdma1Body::RdmaError(Rpcrdma1Error::RdmaErrVers(v)) => Body::ErrVers {
            low: v.rdma_vers_low,
            high: v.rdma_vers_high,
        },
        Rpcrdma1Body::RdmaError(Rpcrdma1Error::RdmaErrChunk) => Body::ErrChunk,
    };
    Ok((Header { xid, credit, body }, 12 + used))
}

/// Groups the Read list into chunks and checks every list against `limits` and the rules of
/// seed 004 section 4.4.
fn check_chunks(c: Rpcrdma1Chunks, limits: &HeaderLimits) -> Result<Chunks, String> {
    let mut reads: Vec<ReadChunk> = Vec::new();
    for entry in c.rdma_reads {
        let Rpcrdma1ReadSegment {
            rdma_position: position,
            rdma_target: segment,
        } = entry.rdma_entry;
        // Seed 004 section 4.4.4.1: "The value in this field MUST be a multiple of four."
        if position % 4 != 0 {
            return Err(format!(
                "Read chunk position {position} is not a multiple of four"
            ));
        }
        check_segment(&segment)?;
        match reads.last_mut() {
            // Section 4.4.4: "All segments belonging to the same Read chunk have the same
            // value in their Position field": consecutive equal positions form one chunk.
            Some(last) if last.position == position => last.segments.push(segment),
            _ => {
                if reads.iter().any(|r| r.position == position) {
                    return Err(format!(
                        "two Read chunks at position {position} (segments of one chunk must be adjacent)"
                    ));
                }
                reads.push(ReadChunk {
                    position,
                    segments: vec![segment],
                });
            }
        }
    }
    if reads.len() > limits.max_chunks {
        return Err(format!(
            "{} Read chunks (at most {})",
            reads.len(),
            limits.max_chunks
        ));
    }
    let mut read_bytes = 0u64;
    for r in &reads {
        if r.segments.len() > limits.max_segments {
            return Err(format!(
                "a Read chunk of {} segments (at most {})",
                r.segments.len(),
                limits.max_segments
            ));
        }
        read_bytes += r.len();
    }
    if read_bytes > limits.max_read_bytes {
        return Err(format!(
            "Read chunks of {read_bytes} bytes (at most {})",
            limits.max_read_bytes
        ));
    }
    if c.rdma_writes.len() > limits.max_chunks {
        return Err(format!(
            "{} Write chunks (at most {})",
            c.rdma_writes.len(),
            limits.max_chunks
        ));
    }
    let mut writes = Vec::with_capacity(c.rdma_writes.len());
    for w in c.rdma_writes {
        writes.push(check_write_chunk(w.rdma_entry, limits)?);
    }
    let reply = c
        .rdma_reply
        .map(|r| check_write_chunk(r, limits))
        .transpose()?;
    Ok(Chunks {
        reads,
        writes,
        reply,
    })
}

fn check_write_chunk(w: Rpcrdma1WriteChunk, limits: &HeaderLimits) -> Result<Vec<Segment>, String> {
    if w.rdma_target.len() > limits.max_segments {
        return Err(format!(
            "a Write chunk of {} segments (at most {})",
            w.rdma_target.len(),
            limits.max_segments
        ));
    }
    for s in &w.rdma_target {
        check_segment(s)?;
    }
    Ok(w.rdma_target)
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

/// Encodes a header into `enc`.
pub fn encode(header: &Header, enc: &mut Encoder) -> xdr::Result<()> {
    let chunks = |c: &Chunks| Rpcrdma1Chunks {
        rdma_reads: c
            .reads
            .iter()
            .flat_map(|r| {
                r.segments.iter().map(move |s| Rpcrdma1ReadList {
                    rdma_entry: Rpcrdma1ReadSegment {
                        rdma_position: r.position,
                        rdma_target: *s,
                    },
                })
            })
            .collect(),
        rdma_writes: c
            .writes
            .iter()
            .map(|w| Rpcrdma1WriteList {
                rdma_entry: Rpcrdma1WriteChunk {
                    rdma_target: w.clone(),
                },
            })
            .collect(),
        rdma_reply: c.reply.as_ref().map(|r| Rpcrdma1WriteChunk {
            rdma_target: r.clone(),
        }),
    };
    let body = match &header.body {
        Body::Msg(c) => Rpcrdma1Body::RdmaMsg(chunks(c)),
        Body::NoMsg(c) => Rpcrdma1Body::RdmaNomsg(chunks(c)),
        Body::Done => Rpcrdma1Body::RdmaDone,
        Body::ErrVers { low, high } => {
            Rpcrdma1Body::RdmaError(Rpcrdma1Error::RdmaErrVers(Rpcrdma1ErrVers {
                rdma_vers_low: *low,
                rdma_vers_high: *high,
            }))
        }
        Body::ErrChunk => Rpcrdma1Body::RdmaError(Rpcrdma1Error::RdmaErrChunk),
    };
    Rpcrdma1Msg {
        rdma_xid: header.xid,
        rdma_vers: VERSION,
        rdma_credit: header.credit,
        rdma_body: body,
    }
    .encode(enc)
}

/// The header's encoded length.
pub fn encoded_len(header: &Header) -> usize {
    let c = |c: &Chunks| {
        // Each Read segment: present flag + position + segment (4 + 4 + 16); list end 4.
        let reads: usize = c.reads.iter().map(|r| r.segments.len() * 24).sum::<usize>() + 4;
        // Each Write chunk: present flag + count + segments; list end 4.
        let writes: usize = c.writes.iter().map(|w| 8 + w.len() * 16).sum::<usize>() + 4;
        let reply = c.reply.as_ref().map_or(4, |r| 8 + r.len() * 16);
        reads + writes + reply
    };
    FIXED_LEN
        + match &header.body {
            Body::Msg(chunks) | Body::NoMsg(chunks) => c(chunks),
            Body::Done => 0,
            Body::ErrVers { .. } => 12,
            Body::ErrChunk => 4,
        }
}

#[cfg(test)]
mod tests;

//! The RPC-over-RDMA version 1 header as a user of the `xdr-codec` crate (jsgf's rust-xdr
//! runtime) writes it: written by hand here in the shape that crate's code generator gives a
//! `.x` file (each struct packs and unpacks its fields in order; `T *next` linked lists are
//! `Option<Box<T>>` chains, `T x<>` a `Vec<T>`, a union a Rust enum), so the benchmark can
//! time the same header through it.

use std::io::{Read, Write};

use rpcgen_oracle as o;
use xdr_codec::{Error, ErrorKind, Pack, Result, Unpack};

/// `rpcrdma1_segment`.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    pub handle: u32,
    pub length: u32,
    pub offset: u64,
}

/// `rpcrdma1_read_segment`.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadSegment {
    pub position: u32,
    pub target: Segment,
}

/// `rpcrdma1_read_list`: one link of the chain.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadList {
    pub entry: ReadSegment,
    pub next: Option<Box<ReadList>>,
}

/// `rpcrdma1_write_chunk`.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteChunk {
    pub target: Vec<Segment>,
}

/// `rpcrdma1_write_list`: one link of the chain.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteList {
    pub entry: WriteChunk,
    pub next: Option<Box<WriteList>>,
}

/// `rpcrdma1_chunks`.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunks {
    pub reads: Option<Box<ReadList>>,
    pub writes: Option<Box<WriteList>>,
    pub reply: Option<WriteChunk>,
}

/// `rpcrdma1_padded`.
#[derive(Debug, Clone, PartialEq)]
pub struct Padded {
    pub align: u32,
    pub thresh: u32,
    pub chunks: Chunks,
}

/// `rpcrdma1_error`.
#[derive(Debug, Clone, PartialEq)]
pub enum ErrorBody {
    Vers { low: u32, high: u32 },
    Chunk,
}

/// `rpcrdma1_body`.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Msg(Chunks),
    NoMsg(Chunks),
    Msgp(Padded),
    Done,
    Error(ErrorBody),
}

/// `rpcrdma1_msg`.
#[derive(Debug, Clone, PartialEq)]
pub struct Msg {
    pub xid: u32,
    pub vers: u32,
    pub credit: u32,
    pub body: Body,
}

impl<Out: Write> Pack<Out> for Segment {
    fn pack(&self, out: &mut Out) -> Result<usize> {
        Ok(self.handle.pack(out)? + self.length.pack(out)? + self.offset.pack(out)?)
    }
}

impl<In: Read> Unpack<In> for Segment {
    fn unpack(input: &mut In) -> Result<(Self, usize)> {
        let (handle, a) = u32::unpack(input)?;
        let (length, b) = u32::unpack(input)?;
        let (offset, c) = u64::unpack(input)?;
        Ok((
            Segment {
                handle,
                length,
                offset,
            },
            a + b + c,
        ))
    }
}

impl<Out: Write> Pack<Out> for ReadSegment {
    fn pack(&self, out: &mut Out) -> Result<usize> {
        Ok(self.position.pack(out)? + self.target.pack(out)?)
    }
}

impl<In: Read> Unpack<In> for ReadSegment {
    fn unpack(input: &mut In) -> Result<(Self, usize)> {
        let (position, a) = u32::unpack(input)?;
        let (target, b) = Segment::unpack(input)?;
        Ok((ReadSegment { position, target }, a + b))
    }
}

impl<Out: Write> Pack<Out> for ReadList {
    fn pack(&self, out: &mut Out) -> Result<usize> {
        Ok(self.entry.pack(out)? + self.next.pack(out)?)
    }
}

impl<In: Read> Unpack<In> for ReadList {
    fn unpack(input: &mut In) -> Result<(Self, usize)> {
        let (entry, a) = ReadSegment::unpack(input)?;
        let (next, b) = Option::<Box<ReadList>>::unpack(input)?;
        Ok((ReadList { entry, next }, a + b))
    }
}

impl<Out: Write> Pack<Out> for WriteChunk {
    fn pack(&self, out: &mut Out) -> Result<usize> {
        xdr_codec::pack_flex(&self.target, None, out)
    }
}

impl<In: Read> Unpack<In> for WriteChunk {
    fn unpack(input: &mut In) -> Result<(Self, usize)> {
        let (target, a) = xdr_codec::unpack_flex(input, None)?;
        Ok((WriteChunk { target }, a))
    }
}

impl<Out: Write> Pack<Out> for WriteList {
    fn pack(&self, out: &mut Out) -> Result<usize> {
        Ok(self.entry.pack(out)? + self.next.pack(out)?)
    }
}

impl<In: Read> Unpack<In> for WriteList {
    fn unpack(input: &mut In) -> Result<(Self, usize)> {
        let (entry, a) = WriteChunk::unpack(input)?;
        let (next, b) = Option::<Box<WriteList>>::unpack(input)?;
        Ok((WriteList { entry, next }, a + b))
    }
}

impl<Out: Write> Pack<Out> for Chunks {
    fn pack(&self, out: &mut Out) -> Result<usize> {
        Ok(self.reads.pack(out)? + self.writes.pack(out)? + self.reply.pack(out)?)
    }
}

impl<In: Read> Unpack<In> for Chunks {
    fn unpack(input: &mut In) -> Result<(Self, usize)> {
        let (reads, a) = Unpack::unpack(input)?;
        let (writes, b) = Unpack::unpack(input)?;
        let (reply, c) = Unpack::unpack(input)?;
        Ok((
            Chunks {
                reads,
                writes,
                reply,
            },
            a + b + c,
        ))
    }
}

impl<Out: Write> Pack<Out> for Body {
    fn pack(&self, out: &mut Out) -> Result<usize> {
        Ok(match self {
            Body::Msg(c) => 0u32.pack(out)? + c.pack(out)?,
            Body::NoMsg(c) => 1u32.pack(out)? + c.pack(out)?,
            Body::Msgp(p) => {
                2u32.pack(out)? + p.align.pack(out)? + p.thresh.pack(out)? + p.chunks.pack(out)?
            }
            Body::Done => 3u32.pack(out)?,
            Body::Error(ErrorBody::Vers { low, high }) => {
                4u32.pack(out)? + 1u32.pack(out)? + low.pack(out)? + high.pack(out)?
            }
            Body::Error(ErrorBody::Chunk) => 4u32.pack(out)? + 2u32.pack(out)?,
        })
    }
}

impl<In: Read> Unpack<In> for Body {
    fn unpack(input: &mut In) -> Result<(Self, usize)> {
        let (proc_, a) = u32::unpack(input)?;
        let (body, b) = match proc_ {
            0 => Chunks::unpack(input).map(|(c, n)| (Body::Msg(c), n))?,
            1 => Chunks::unpack(input).map(|(c, n)| (Body::NoMsg(c), n))?,
            2 => {
                let (align, x) = u32::unpack(input)?;
                let (thresh, y) = u32::unpack(input)?;
                let (chunks, z) = Chunks::unpack(input)?;
                let padded = Padded {
                    align,
                    thresh,
                    chunks,
                };
                (Body::Msgp(padded), x + y + z)
            }
            3 => (Body::Done, 0),
            4 => {
                let (code, x) = u32::unpack(input)?;
                match code {
                    1 => {
                        let (low, y) = u32::unpack(input)?;
                        let (high, z) = u32::unpack(input)?;
                        (Body::Error(ErrorBody::Vers { low, high }), x + y + z)
                    }
                    2 => (Body::Error(ErrorBody::Chunk), x),
                    other => return Err(Error::from(ErrorKind::InvalidEnum(other as i32))),
                }
            }
            other => return Err(Error::from(ErrorKind::InvalidEnum(other as i32))),
        };
        Ok((body, a + b))
    }
}

impl<Out: Write> Pack<Out> for Msg {
    fn pack(&self, out: &mut Out) -> Result<usize> {
        Ok(self.xid.pack(out)?
            + self.vers.pack(out)?
            + self.credit.pack(out)?
            + self.body.pack(out)?)
    }
}

impl<In: Read> Unpack<In> for Msg {
    fn unpack(input: &mut In) -> Result<(Self, usize)> {
        let (xid, a) = u32::unpack(input)?;
        let (vers, b) = u32::unpack(input)?;
        let (credit, c) = u32::unpack(input)?;
        let (body, d) = Body::unpack(input)?;
        Ok((
            Msg {
                xid,
                vers,
                credit,
                body,
            },
            a + b + c + d,
        ))
    }
}

fn segment(s: &o::Segment) -> Segment {
    Segment {
        handle: s.handle,
        length: s.length,
        offset: s.offset,
    }
}

fn write_chunk(segments: &[o::Segment]) -> WriteChunk {
    WriteChunk {
        target: segments.iter().map(segment).collect(),
    }
}

fn chunks(c: &o::V1Chunks) -> Chunks {
    let reads = c.reads.iter().rev().fold(None, |next, r| {
        Some(Box::new(ReadList {
            entry: ReadSegment {
                position: r.position,
                target: segment(&r.target),
            },
            next,
        }))
    });
    let writes = c.writes.iter().rev().fold(None, |next, w| {
        Some(Box::new(WriteList {
            entry: write_chunk(w),
            next,
        }))
    });
    Chunks {
        reads,
        writes,
        reply: c.reply.as_deref().map(write_chunk),
    }
}

/// The oracle's flat header as `xdr-codec` types.
pub fn from_flat(m: &o::V1Msg) -> Msg {
    let body = match &m.body {
        o::V1Body::Chunks {
            proc_: 0,
            chunks: c,
        } => Body::Msg(chunks(c)),
        o::V1Body::Chunks { chunks: c, .. } => Body::NoMsg(chunks(c)),
        o::V1Body::Padded {
            align,
            thresh,
            chunks: c,
        } => Body::Msgp(Padded {
            align: *align,
            thresh: *thresh,
            chunks: chunks(c),
        }),
        o::V1Body::Done => Body::Done,
        o::V1Body::ErrVers { low, high } => Body::Error(ErrorBody::Vers {
            low: *low,
            high: *high,
        }),
        o::V1Body::ErrChunk => Body::Error(ErrorBody::Chunk),
    };
    Msg {
        xid: m.xid,
        vers: m.vers,
        credit: m.credit,
        body,
    }
}

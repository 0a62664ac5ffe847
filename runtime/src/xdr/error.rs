//! Codec errors: what went wrong and at which byte offset.

use core::fmt;

/// The result type of the codec core.
pub type Result<T, E = Error> = core::result::Result<T, E>;

/// What went wrong while encoding or decoding.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The input ended before an item did.
    Truncated {
        /// Bytes the item needed.
        needed: usize,
        /// Bytes that were left.
        available: usize,
    },
    /// A variable-length item is longer than the maximum its XDR declares.
    ExceedsDeclaredMaximum {
        /// The length found (decode) or given (encode).
        length: u64,
        /// The declared maximum.
        maximum: u32,
    },
    /// A fixed-length item has the wrong length (encode only; decode reads exactly `expected`).
    WrongFixedLength {
        /// The declared length.
        expected: usize,
        /// The length given.
        actual: usize,
    },
    /// A value is over one of the configured [`Limits`](super::Limits).
    LimitExceeded {
        /// Which limit.
        limit: &'static str,
        /// The value found.
        value: u64,
        /// The configured bound.
        maximum: u64,
    },
    /// An element count larger than the remaining input could possibly hold.
    CountExceedsInput {
        /// The count read.
        count: u64,
        /// Bytes left in the input.
        remaining: usize,
    },
    /// An enum or union discriminant that the type does not define.
    UnknownDiscriminant {
        /// The XDR type being decoded.
        type_name: &'static str,
        /// The value read.
        value: i64,
    },
    /// A boolean or optional-data flag that is neither 0 nor 1.
    InvalidBool(u32),
    /// Non-zero pad bytes while [`Limits::strict_padding`](super::Limits::strict_padding) is set.
    NonZeroPadding,
    /// Recursive values nested deeper than [`Limits::max_depth`](super::Limits::max_depth).
    TooDeep {
        /// The configured bound.
        maximum: u32,
    },
    /// Bytes left over after the value was decoded.
    TrailingBytes(usize),
    /// A list that XDR requires to hold at least one element (a self-referential struct used
    /// directly rather than through `*`) was empty.
    EmptyList(&'static str),
    /// A chunk's length disagrees with the byte count left in the inline stream
    /// (seed 004 section 4.4.3.1). A transport answers with ERR_CHUNK.
    ChunkLengthMismatch {
        /// The count in the inline stream.
        inline_count: u64,
        /// The chunk's length (sum of its segment lengths).
        chunk_len: u64,
    },
    /// A Read chunk whose Position matched no DDP-eligible item.
    UnusedReadChunk {
        /// Its XDR Position.
        position: u32,
    },
    /// A Read chunk whose Position is not a multiple of four (seed 004 section 4.4.4.1).
    MisalignedReadChunk {
        /// Its XDR Position.
        position: u32,
    },
    /// A reply item is larger than the Write chunk the requester provided for it.
    WriteChunkTooSmall {
        /// Index of the Write chunk.
        index: usize,
        /// The item's length.
        needed: u64,
        /// The chunk's capacity.
        capacity: u64,
    },
    /// A chunk-related or other type-specific rule, named.
    Invalid(&'static str),
}

/// An encoding or decoding failure with the byte offset where it happened.
///
/// Boxed, so that a [`Result`] is a register wide on the success path that every codec call
/// takes: errors are rare and may cost an allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(Box<Located>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Located {
    kind: ErrorKind,
    offset: usize,
}

impl ErrorKind {
    /// Whether the error means the message and its chunks disagree, which an RPC-over-RDMA
    /// transport reports as ERR_CHUNK (seed 004 section 5.5).
    pub fn is_chunk_error(&self) -> bool {
        matches!(
            self,
            ErrorKind::ChunkLengthMismatch { .. }
                | ErrorKind::UnusedReadChunk { .. }
                | ErrorKind::MisalignedReadChunk { .. }
                | ErrorKind::WriteChunkTooSmall { .. }
        )
    }
}

impl Error {
    /// An error of `kind` at byte `offset` of the message.
    #[cold]
    pub fn new(kind: ErrorKind, offset: usize) -> Self {
        Error(Box::new(Located { kind, offset }))
    }

    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.0.kind
    }

    /// The byte offset, from the start of the message, of the item that failed.
    pub fn offset(&self) -> usize {
        self.0.offset
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Truncated { needed, available } => {
                write!(f, "truncated: needed {needed} bytes, {available} left")
            }
            ErrorKind::ExceedsDeclaredMaximum { length, maximum } => {
                write!(f, "length {length} exceeds the declared maximum {maximum}")
            }
            ErrorKind::WrongFixedLength { expected, actual } => {
                write!(f, "fixed-length item must be {expected} long, got {actual}")
            }
            ErrorKind::LimitExceeded {
                limit,
                value,
                maximum,
            } => {
                write!(f, "{limit} {value} exceeds the configured limit {maximum}")
            }
            ErrorKind::CountExceedsInput { count, remaining } => {
                write!(
                    f,
                    "element count {count} cannot fit in the {remaining} bytes left"
                )
            }
            ErrorKind::UnknownDiscriminant { type_name, value } => {
                write!(f, "{value} is not a valid value of {type_name}")
            }
            ErrorKind::InvalidBool(v) => write!(f, "boolean or optional flag is {v}, not 0 or 1"),
            ErrorKind::NonZeroPadding => write!(
                f,
                "padding bytes are not zero (RFC 4506 section 4.10; Limits::strict_padding)"
            ),
            ErrorKind::TooDeep { maximum } => write!(
                f,
                "recursive values nested deeper than {maximum} levels (Limits::max_depth)"
            ),
            ErrorKind::TrailingBytes(n) => write!(f, "{n} trailing bytes after the value"),
            ErrorKind::EmptyList(t) => write!(f, "{t} needs at least one element"),
            ErrorKind::ChunkLengthMismatch {
                inline_count,
                chunk_len,
            } => write!(
                f,
                "chunk holds {chunk_len} bytes but the inline stream counts {inline_count}"
            ),
            ErrorKind::UnusedReadChunk { position } => {
                write!(
                    f,
                    "read chunk at position {position} matches no DDP-eligible item"
                )
            }
            ErrorKind::MisalignedReadChunk { position } => {
                write!(
                    f,
                    "read chunk position {position} is not a multiple of four"
                )
            }
            ErrorKind::WriteChunkTooSmall {
                index,
                needed,
                capacity,
            } => write!(
                f,
                "write chunk {index} holds {capacity} bytes, the item needs {needed}"
            ),
            ErrorKind::Invalid(why) => f.write_str(why),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "XDR error at byte {}: {}", self.0.offset, self.0.kind)
    }
}

impl std::error::Error for Error {}

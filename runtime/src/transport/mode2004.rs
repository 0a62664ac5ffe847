//! The protocol of seed 000 (draft-ietf-nfsv4-rpcrdma-00, 2004) as an opt-in mode per
//! connection: RDMA_MSGP padding (section 3.5), the Read-Read transfer model with RDMA_DONE
//! (section 3.8) and the Connection Configuration Protocol (section 6).
//!
//! The default stays RFC 8166 (seed 004): a receiver takes RDMA_MSGP as RDMA_MSG and drops
//! RDMA_DONE (section 5.7). A connection in this mode speaks version 1 headers; it does not
//! offer version 2.

use std::time::Duration;

use crate::xdr::AlignPadding;

/// How one side of a connection speaks the 2004 protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mode2004 {
    /// Pad inline messages this side sends as RDMA_MSGP: the data of each counted opaque item
    /// (or string) of at least `thresh` bytes starts at a multiple of `align` in the
    /// receiver's buffer (seed 000 section 3.5). `None` sends RDMA_MSG. A client that runs
    /// the Connection Configuration Protocol takes `align` from the server's answer.
    pub padding: Option<AlignPadding>,
    /// The alignment this side's receive buffers want for opaque data: what a server answers
    /// as `align` in the Connection Configuration Protocol (seed 000 section 6.2).
    pub receive_align: u32,
    /// The Read-Read model (seed 000 section 3.8): a requester provides no Write and no Reply
    /// chunk; a responder exposes DDP-eligible results, and a reply too long for the
    /// requester's receive buffer, in Read chunks of its reply; the requester pulls them by
    /// RDMA Read and sends RDMA_DONE so that the responder can release them.
    pub read_read: bool,
    /// How long a responder keeps a Read-Read reply's memory exposed when no RDMA_DONE comes
    /// ("the server can proceed with a de-register and free chunk buffers after a time-out",
    /// seed 000 section 3.8): a requester that vanished cannot pin memory.
    pub done_timeout: Duration,
    /// Run the Connection Configuration Protocol (seed 000 section 6) as the first call of
    /// each connection, as program `config_program` (the draft leaves the number unassigned,
    /// specs/ERRATA.md R04-6). `None`: no configuration call; both sides keep their
    /// configured inline sizes, and both must be configured alike, since nothing then tells
    /// a side that its peer speaks the 2004 protocol (a default peer would misread padding).
    pub config_program: Option<u32>,
}

/// The placeholder program number of `CONFIG_RDMA_PROG` in `specs/rpcrdma-2004.x` (a number
/// of the block RFC 5531 leaves to local assignment, specs/ERRATA.md R04-6).
pub const CONFIG_PROGRAM: u32 = 0x2000_0000;

/// The inline size both sides assume before the configuration call has been answered (seed
/// 000 section 6.1: "at least one RPC message at a time that is at least 1 KB in size").
pub const BASIC_INLINE: usize = 1024;

impl Default for Mode2004 {
    /// Everything of the 2004 protocol on: RDMA_MSGP aligning data of 1 KiB or more to 512
    /// bytes (a disk sector: what direct I/O needs; page alignment, 4096, needs receive
    /// buffers of 8 KiB or more to leave room for the padding, and a message it would not fit
    /// goes unpadded), the Read-Read model with a 10 s RDMA_DONE timeout, and the
    /// configuration call as [`CONFIG_PROGRAM`].
    fn default() -> Self {
        Mode2004 {
            padding: Some(AlignPadding::new(512, 1024)),
            receive_align: 512,
            read_read: true,
            done_timeout: Duration::from_secs(10),
            config_program: Some(CONFIG_PROGRAM),
        }
    }
}
pub mod ccp;

//! What a core emits and takes: the RDMA operations to post, the events for the application,
//! the calls to send, and the bookkeeping that ties an operation's completion to its owner.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;

use super::{Buf, CallId, OpId, SendBytes, Slice};
use crate::id_map::IdMap;
use crate::rpc::{Reply, TransportError};
use crate::transport::header::Segment;
use crate::xdr::{Encoded, MovedItem, ReceivedChunks};

/// An RDMA operation to post.
#[derive(Debug, Clone)]
pub enum Op<B> {
    /// A Send of the concatenated `message` (transport header and inline RPC message), with
    /// Send With Invalidate of the peer's handle `invalidate`.
    Send {
        /// The operation.
        id: OpId,
        /// The bytes, in order; at most the peer's receive size in all.
        message: SendBytes,
        /// Send With Invalidate of this handle.
        invalidate: Option<u32>,
    },
    /// An RDMA Read of `remote` into `sink`.
    Read {
        /// The operation.
        id: OpId,
        /// Where the bytes land (as long as `remote`).
        sink: Slice<B>,
        /// The peer's segment.
        remote: Segment,
    },
    /// An RDMA Write of `source` to `remote`.
    Write {
        /// The operation.
        id: OpId,
        /// The bytes (as long as `remote`).
        source: Slice<B>,
        /// The peer's segment.
        remote: Segment,
    },
    /// A local invalidate of the handle of `buf`: the peer can no longer reach the memory.
    Invalidate {
        /// The operation.
        id: OpId,
        /// The buffer whose handle to invalidate.
        buf: B,
    },
    /// Revoke the handle of `buf` at once, without a work request and without a completion
    /// (the driver rekeys the buffer to no remote rights). For an abandoned call, whose reply
    /// may still come with a Send With Invalidate of that very handle: invalidating a handle
    /// twice is an error on every RNIC (and crashes Linux 6.1's rxe), while a handle that no
    /// longer exists only fails the peer's invalidation.
    Revoke {
        /// The buffer whose handle to revoke.
        buf: B,
    },
}

impl<B> Op<B> {
    /// The operation's id (`None` for a revocation, which has no completion).
    pub fn id(&self) -> Option<OpId> {
        match self {
            Op::Send { id, .. }
            | Op::Read { id, .. }
            | Op::Write { id, .. }
            | Op::Invalidate { id, .. } => Some(*id),
            Op::Revoke { .. } => None,
        }
    }
}

/// A call the peer sent, ready to be dispatched (its Read chunks have been pulled).
#[derive(Debug)]
pub struct IncomingCall {
    /// Pass it back to [`Core::send_reply`](super::Core::send_reply).
    pub id: CallId,
    /// The call's XID.
    pub xid: u32,
    /// The whole RPC call message (from a Position-Zero Read chunk for RDMA_NOMSG).
    pub message: Bytes,
    /// Chunk data for DDP-eligible arguments.
    pub chunks: Option<ReceivedChunks>,
    /// The capacity of each Write chunk the requester provided, for the reply's encoder.
    pub write_chunks: Vec<u64>,
    /// The capacity of the Reply chunk, if one was provided.
    pub reply_chunk: Option<u64>,
    /// True for a backward-direction call (the server calling the client).
    pub backward: bool,
}

/// What happened, for the application.
#[derive(Debug)]
pub enum Event {
    /// A call started with [`Core::start_call`](super::Core::start_call) finished: its reply (with every registration
    /// fenced from the peer), or why not.
    Reply {
        /// The call.
        call: CallId,
        /// The reply or the failure.
        result: Result<Reply, TransportError>,
    },
    /// A call to dispatch.
    Call(IncomingCall),
    /// The peer broke the protocol in a way that leaves no answer but closing the connection
    /// (more calls than the credits granted, seed 004 section 4.3).
    Fatal(String),
    /// A client's version negotiation ended: the connection speaks `version` from now on (worth
    /// remembering for the next connection to the same server, [`CoreConfig::remembered_version`](super::CoreConfig::remembered_version)).
    Negotiated {
        /// 1 or 2.
        version: u32,
    },
}

/// A call to send, as the driver prepared it.
#[derive(Debug)]
pub struct OutgoingCall<B> {
    /// The XID, from [`Core::next_xid`](super::Core::next_xid), already in `message`.
    pub xid: u32,
    /// The RPC call message, with DDP-eligible items moved out (an [`Encoder::for_call`]
    /// with [`Core::call_policy`](super::Core::call_policy)).
    ///
    /// [`Encoder::for_call`]: crate::xdr::Encoder::for_call
    pub message: Encoded,
    /// The moved items: each becomes a Read chunk at its Position.
    pub moved: Vec<MovedItem>,
    /// Where the DDP-eligible results go: one Write chunk each.
    pub write_chunks: Vec<WriteTarget<B>>,
    /// The Reply chunk to provide, if the reply may not fit the receive buffer.
    pub reply_chunk: Option<usize>,
    /// The call fails with [`TransportError::TimedOut`] if no reply came within this long.
    pub timeout: Option<Duration>,
    /// True for a backward-direction call (a server calling its client).
    pub backward: bool,
    /// The Write chunk sizes, one per DDP-eligible result, to send the call once more with
    /// (same XID) when a version 1 responder answers ERR_CHUNK because the results did not
    /// fit what this shape offered (seed 004 section 5.5; version 2 says what it needs, seed
    /// 003 section 5.3.3). Empty: such a call fails instead.
    pub room: Vec<usize>,
}

/// The memory behind one Write chunk.
#[derive(Debug)]
pub enum WriteTarget<B> {
    /// Fresh registered memory of this many bytes (plus room for XDR round-up).
    Size(usize),
    /// Memory the application took from the pool, to receive the result in place.
    Buffer(Vec<Slice<B>>),
}

impl<B> WriteTarget<B> {
    /// The bytes the chunk offers.
    pub fn size(&self) -> usize {
        match self {
            WriteTarget::Size(n) => *n,
            WriteTarget::Buffer(slices) => slices.iter().map(|s| s.len).sum(),
        }
    }
}

/// Whom an operation's completion concerns.
#[derive(Debug, Clone, Copy)]
pub(super) enum Owner {
    /// A local invalidation fencing a requester's call.
    Requester(CallId),
    /// An RDMA Read of a reply's Read chunk (the Read-Read model, seed 000 section 3.8).
    Pull(CallId),
    /// An RDMA Read, RDMA Write or Send of a call the responder handles.
    Responder(CallId),
    /// An error reply or other Send nothing waits for.
    Nobody,
}

/// The operations and events produced so far, shared by both directions.
pub(super) struct Outbox<B> {
    pub(super) next_op: OpId,
    pub(super) owners: IdMap<OpId, Owner>,
    pub(super) ops: VecDeque<Op<B>>,
    pub(super) events: VecDeque<Event>,
}

impl<B> Outbox<B> {
    pub(super) fn id(&mut self, owner: Owner) -> OpId {
        self.next_op += 1;
        // Nothing waits for an operation of nobody's: its completion needs no entry.
        if !matches!(owner, Owner::Nobody) {
            self.owners.insert(self.next_op, owner);
        }
        self.next_op
    }

    pub(super) fn send(&mut self, owner: Owner, message: SendBytes, invalidate: Option<u32>) {
        let id = self.id(owner);
        self.ops.push_back(Op::Send {
            id,
            message,
            invalidate,
        });
    }

    pub(super) fn read(&mut self, owner: Owner, sink: Slice<B>, remote: Segment) {
        let id = self.id(owner);
        self.ops.push_back(Op::Read { id, sink, remote });
    }

    pub(super) fn write(&mut self, owner: Owner, source: Slice<B>, remote: Segment) {
        let id = self.id(owner);
        self.ops.push_back(Op::Write { id, source, remote });
    }

    pub(super) fn invalidate(&mut self, owner: Owner, buf: B)
    where
        B: Buf,
    {
        let id = self.id(owner);
        self.ops.push_back(Op::Invalidate { id, buf });
    }

    pub(super) fn revoke(&mut self, buf: B) {
        self.ops.push_back(Op::Revoke { buf });
    }
}

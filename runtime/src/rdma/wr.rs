//! Work requests: what a consumer posts to the send and receive queues (verbs `ibv_send_wr`,
//! `ibv_recv_wr`; RDMAP RFC 5040 section 5 operations).

use std::ops::Range;

use super::error::Result;
use super::mr::MemoryRegion;

/// A caller-chosen identifier returned in the [`Completion`](super::Completion) of a request.
pub type WrId = u64;

/// A scatter/gather element: a byte range of a local registration.
///
/// The element holds a clone of the region, so the memory outlives the work request even if the
/// caller drops every other handle.
#[derive(Clone, Debug)]
pub struct Sge {
    /// The registration.
    pub mr: MemoryRegion,
    /// Offset of the first byte inside the registration.
    pub offset: usize,
    /// Number of bytes.
    pub len: usize,
}

impl Sge {
    /// A range of `mr`; fails when the range is not inside the registration.
    pub fn new(mr: &MemoryRegion, range: Range<usize>) -> Result<Sge> {
        let len = range.end.saturating_sub(range.start);
        mr.checked_range(range.start, len)?;
        Ok(Sge {
            mr: mr.clone(),
            offset: range.start,
            len,
        })
    }

    /// The whole registration.
    pub fn whole(mr: &MemoryRegion) -> Sge {
        Sge {
            mr: mr.clone(),
            offset: 0,
            len: mr.len(),
        }
    }

    /// The byte range inside the registration.
    pub fn range(&self) -> Range<usize> {
        self.offset..self.offset + self.len
    }
}

/// A buffer of the peer, named by its steering tag: the target of an RDMA Write, the source of an
/// RDMA Read. The length is the length of the local side of the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RemoteAddr {
    /// The peer's steering tag (STag / rkey).
    pub rkey: u32,
    /// The peer's address (tagged offset) of the first byte.
    pub addr: u64,
}

impl RemoteAddr {
    /// The remote buffer `rkey` at `addr`.
    pub fn new(rkey: u32, addr: u64) -> RemoteAddr {
        RemoteAddr { rkey, addr }
    }

    /// The address `offset` bytes further on (wrapping is refused by the peer, not here).
    pub fn offset(self, offset: u64) -> RemoteAddr {
        RemoteAddr {
            rkey: self.rkey,
            addr: self.addr.wrapping_add(offset),
        }
    }
}

/// A work request's gather list. Most requests gather one element, which is kept inline:
/// posting it allocates nothing.
///
/// Made from one [`Sge`], a `Vec<Sge>` or an array of them, and read as a slice.
#[derive(Clone, Debug)]
pub struct SgList(SgElements);

#[derive(Clone, Debug)]
enum SgElements {
    One(Sge),
    Many(Vec<Sge>),
}

impl std::ops::Deref for SgList {
    type Target = [Sge];

    fn deref(&self) -> &[Sge] {
        match &self.0 {
            SgElements::One(sge) => std::slice::from_ref(sge),
            SgElements::Many(list) => list,
        }
    }
}

impl<'a> IntoIterator for &'a SgList {
    type Item = &'a Sge;
    type IntoIter = std::slice::Iter<'a, Sge>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl From<Sge> for SgList {
    fn from(sge: Sge) -> SgList {
        SgList(SgElements::One(sge))
    }
}

impl From<Vec<Sge>> for SgList {
    fn from(list: Vec<Sge>) -> SgList {
        SgList(SgElements::Many(list))
    }
}

impl<const N: usize> From<[Sge; N]> for SgList {
    fn from(list: [Sge; N]) -> SgList {
        SgList(SgElements::Many(list.into()))
    }
}

/// The operation of a send-queue work request.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum SendOp {
    /// RDMAP Send (RFC 5040 section 5.3): the gathered bytes land in the peer's next posted
    /// receive. With `solicited` the peer sees a solicited event; with `invalidate` the peer
    /// invalidates its own steering tag before the receive completes (Send with Invalidate).
    Send {
        /// The bytes to send, gathered in order.
        sg: SgList,
        /// Send with Solicited Event.
        solicited: bool,
        /// Send with Invalidate: the peer's steering tag to invalidate.
        invalidate: Option<u32>,
    },
    /// RDMA Write (RFC 5040 section 5.1): the gathered bytes are placed at `remote`.
    RdmaWrite {
        /// The bytes to write, gathered in order.
        sg: SgList,
        /// The target buffer of the peer (needs remote write access there).
        remote: RemoteAddr,
    },
    /// RDMA Read (RFC 5040 section 5.2): `sink.len` bytes at `remote` are copied into `sink`.
    RdmaRead {
        /// The local data sink (needs local write access).
        sink: Sge,
        /// The source buffer of the peer (needs remote read access there).
        remote: RemoteAddr,
    },
    /// Local invalidate: the local steering tag `rkey` can no longer be used by the peer.
    LocalInvalidate {
        /// The local steering tag.
        rkey: u32,
    },
}

/// A send-queue work request. A request produces exactly one completion, unless it was
/// posted [unsignaled](SendWr::unsignaled) and succeeded.
#[derive(Clone, Debug)]
pub struct SendWr {
    /// Returned in the completion.
    pub wr_id: WrId,
    /// What to do.
    pub op: SendOp,
    /// A Send or RDMA Write whose completion need only say that its buffers may be reused
    /// ([`SendWr::complete_locally`]).
    pub complete_locally: bool,
    /// Whether its success produces a completion (see [`SendWr::unsignaled`]).
    pub signaled: bool,
}

impl SendWr {
    /// A plain Send of the gathered bytes.
    pub fn send(wr_id: WrId, sg: impl Into<SgList>) -> SendWr {
        SendWr {
            wr_id,
            op: SendOp::Send {
                sg: sg.into(),
                solicited: false,
                invalidate: None,
            },
            complete_locally: false,
            signaled: true,
        }
    }

    /// An RDMA Write of the gathered bytes to `remote`.
    pub fn write(wr_id: WrId, sg: impl Into<SgList>, remote: RemoteAddr) -> SendWr {
        SendWr {
            wr_id,
            op: SendOp::RdmaWrite {
                sg: sg.into(),
                remote,
            },
            complete_locally: false,
            signaled: true,
        }
    }

    /// An RDMA Read of `sink.len` bytes from `remote` into `sink`.
    pub fn read(wr_id: WrId, sink: Sge, remote: RemoteAddr) -> SendWr {
        SendWr {
            wr_id,
            op: SendOp::RdmaRead { sink, remote },
            complete_locally: false,
            signaled: true,
        }
    }

    /// A local invalidate of the local steering tag `rkey`.
    pub fn local_invalidate(wr_id: WrId, rkey: u32) -> SendWr {
        SendWr {
            wr_id,
            op: SendOp::LocalInvalidate { rkey },
            complete_locally: false,
            signaled: true,
        }
    }

    /// Lets a Send or RDMA Write complete as soon as its bytes have left this side's hands,
    /// its buffers free for reuse, without the completion saying that the peer has them (no
    /// effect on other operations). For a consumer that only needs its buffers back: an RPC
    /// requester learns from the reply that its call arrived, and a responder needs no word
    /// of its reply's arrival.
    ///
    /// Completions still come in posting order. Providers whose completions confirm delivery
    /// at no extra cost ignore it (verbs: the adapter's acknowledgement completes a request);
    /// the software provider with confirmed completions (`SoftConfig::confirm_completions`)
    /// otherwise spends a confirmation exchange on the request (an RDMA Read Request and its
    /// Response on the wire), and completes it once its bytes are written to TCP instead.
    pub fn complete_locally(mut self) -> SendWr {
        self.complete_locally = matches!(self.op, SendOp::Send { .. } | SendOp::RdmaWrite { .. });
        self
    }

    /// Posts the request without a completion for its success, as verbs' unsignaled work
    /// requests (a send queue's requests complete in posting order, so the completion of a
    /// later signaled request says that this one succeeded too). A consumer that streams
    /// Writes or Sends and needs to know only now and then that its buffers are free saves a
    /// completion per request (the device writes none, nobody polls one).
    ///
    /// - A request that fails still completes, with its error; so does one whose outcome the
    ///   connection's end leaves unknown (flushed).
    /// - Its buffers belong to the provider until a later signaled request on the connection
    ///   completes (or the connection ends), as if its completion came then.
    /// - It counts against the send queue's depth until then: a consumer posting unsignaled
    ///   requests signals at least one in every `send_queue_depth`, or a post fails with
    ///   [`Error::QueueFull`](crate::rdma::Error::QueueFull).
    pub fn unsignaled(mut self) -> SendWr {
        self.signaled = false;
        self
    }

    /// Marks a Send as "with Solicited Event" (no effect on other operations).
    pub fn solicited(mut self) -> SendWr {
        if let SendOp::Send { solicited, .. } = &mut self.op {
            *solicited = true;
        }
        self
    }

    /// Makes a Send a "Send with Invalidate" of the peer's tag `rkey` (no effect on other
    /// operations).
    pub fn with_invalidate(mut self, rkey: u32) -> SendWr {
        if let SendOp::Send { invalidate, .. } = &mut self.op {
            *invalidate = Some(rkey);
        }
        self
    }

    /// Total number of payload bytes the request moves.
    pub fn byte_len(&self) -> u64 {
        match &self.op {
            SendOp::Send { sg, .. } | SendOp::RdmaWrite { sg, .. } => {
                sg.iter().map(|s| s.len as u64).sum()
            }
            SendOp::RdmaRead { sink, .. } => sink.len as u64,
            SendOp::LocalInvalidate { .. } => 0,
        }
    }
}

/// A receive-queue work request: one buffer for one incoming Send.
#[derive(Clone, Debug)]
pub struct RecvWr {
    /// Returned in the completion.
    pub wr_id: WrId,
    /// Where the incoming message is placed (needs local write access).
    pub sge: Sge,
}

impl RecvWr {
    /// A receive into `sge`.
    pub fn new(wr_id: WrId, sge: Sge) -> RecvWr {
        RecvWr { wr_id, sge }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdma::{Access, RegionKeys};

    fn region(len: usize) -> MemoryRegion {
        let keys = RegionKeys {
            lkey: 1,
            rkey: 2,
            addr: 0x1000,
        };
        MemoryRegion::register_with(vec![0; len], Access::LOCAL_WRITE, |_, _| Ok((keys, ())))
            .unwrap()
    }

    fn ranges(sg: &[Sge]) -> Vec<(usize, usize)> {
        sg.iter().map(|s| (s.offset, s.len)).collect()
    }

    #[test]
    fn a_gather_list_reads_the_same_from_one_element_a_vec_or_an_array() {
        let mr = region(64);
        let one = SendWr::send(1, Sge::new(&mr, 8..24).unwrap());
        let vec = SendWr::send(2, vec![Sge::new(&mr, 8..24).unwrap()]);
        let two = SendWr::write(
            3,
            [Sge::new(&mr, 0..4).unwrap(), Sge::new(&mr, 32..64).unwrap()],
            RemoteAddr::new(7, 0),
        );
        let sg = |wr: &SendWr| match &wr.op {
            SendOp::Send { sg, .. } | SendOp::RdmaWrite { sg, .. } => ranges(sg),
            _ => unreachable!("a Send or an RDMA Write"),
        };
        assert_eq!(sg(&one), [(8, 16)]);
        assert_eq!(sg(&vec), sg(&one));
        assert_eq!(sg(&two), [(0, 4), (32, 32)]);
        assert_eq!(
            (one.byte_len(), vec.byte_len(), two.byte_len()),
            (16, 16, 36)
        );
    }
}

//! Read-Read (seed 000 section 3.8, 2004 mode): a reply whose results come as Read chunks is
//! delivered once RDMA Reads have pulled them, within the responder's IRD.

use bytes::Bytes;

use super::{memory_error, protocol, Phase, Requester};
use crate::rpc::Reply;
use crate::transport::core::memory::{pulled_message, read_sinks, sink_data, Sinks};
use crate::transport::core::{Buf, CallId, CoreConfig, Memory, Outbox, Owner, Stats};
use crate::transport::header::{check_rpc_xid, AlignPadding, Body, Header};

/// A reply whose Read chunks are being pulled.
pub(super) struct Pull<B> {
    pending: usize,
    failed: bool,
    /// The reply's inline part (empty for RDMA_NOMSG).
    inline: Bytes,
    /// Each Read chunk's position, sink and length.
    sinks: Sinks<B>,
    alignment: Option<(AlignPadding, usize)>,
    invalidated: Option<u32>,
}

impl<B: Buf> Requester<B> {
    /// Pulls a reply's Read chunks by RDMA Read (seed 000 section 3.8, "an RPC with read
    /// chunks in the reply message"); the reply is delivered once they are in, and RDMA_DONE
    /// tells the responder it may release them.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn pull<M: Memory<Buf = B>>(
        &mut self,
        id: CallId,
        header: Header,
        inline: Bytes,
        alignment: Option<(AlignPadding, usize)>,
        invalidated: Option<u32>,
        mem: &mut M,
        config: &CoreConfig,
        out: &mut Outbox<B>,
        stats: &mut Stats,
    ) {
        let (Body::Msg(chunks) | Body::NoMsg(chunks)) = header.body else {
            return;
        };
        // Bounded: a header's Read chunks are at most `max_read_bytes` together.
        let (sinks, pairs) = match read_sinks(&chunks.reads, mem) {
            Ok(r) => r,
            Err(e) => {
                self.dones_waiting.push_back(header.xid);
                return self.fence(id, Err(memory_error(e)), invalidated, out, stats);
            }
        };
        let Some(call) = self.calls.get_mut(id) else {
            return;
        };
        call.phase = Phase::Pulling(Box::new(Pull {
            pending: pairs.len(),
            failed: false,
            inline,
            sinks,
            alignment,
            invalidated,
        }));
        if pairs.is_empty() {
            return self.pulled_all(id, out, stats);
        }
        for (sink, remote) in pairs {
            self.pulls_waiting.push_back((id, sink, remote));
        }
        self.pump_pulls(config, out);
    }

    /// Posts waiting pulls while the responder's IRD allows.
    fn pump_pulls(&mut self, config: &CoreConfig, out: &mut Outbox<B>) {
        while self.pulls_in_flight < config.max_reads.max(1) {
            let Some((id, sink, remote)) = self.pulls_waiting.pop_front() else {
                return;
            };
            if !matches!(
                self.calls.get(id).map(|c| &c.phase),
                Some(Phase::Pulling(_))
            ) {
                continue; // cancelled meanwhile
            }
            self.pulls_in_flight += 1;
            out.read(Owner::Pull(id), sink, remote);
        }
    }

    /// An RDMA Read of call `id`'s reply completed.
    pub(in crate::transport::core) fn pulled(
        &mut self,
        id: CallId,
        ok: bool,
        config: &CoreConfig,
        out: &mut Outbox<B>,
        stats: &mut Stats,
    ) {
        self.pulls_in_flight = self.pulls_in_flight.saturating_sub(1);
        let mut all_in = false;
        if let Some(Phase::Pulling(pull)) = self.calls.get_mut(id).map(|c| &mut c.phase) {
            pull.pending = pull.pending.saturating_sub(1);
            pull.failed |= !ok;
            all_in = pull.pending == 0;
        }
        if all_in {
            self.pulled_all(id, out, stats);
        }
        self.pump_pulls(config, out);
        self.pump(out);
    }

    /// Every Read chunk of call `id`'s reply is in: RDMA_DONE goes, and the reply is
    /// delivered once the call's own handles are fenced.
    fn pulled_all(&mut self, id: CallId, out: &mut Outbox<B>, stats: &mut Stats) {
        let Some(call) = self.calls.get_mut(id) else {
            return;
        };
        let Phase::Pulling(pull) = std::mem::replace(&mut call.phase, Phase::Sent) else {
            return;
        };
        self.dones_waiting.push_back(call.xid);
        let Pull {
            failed,
            inline,
            sinks,
            alignment,
            invalidated,
            ..
        } = *pull;
        let result = if failed {
            Err(protocol(
                "an RDMA Read of the reply's Read chunk failed".into(),
            ))
        } else {
            let data = sink_data(sinks, |_| true, |_| {});
            let (message, chunks) = pulled_message(inline, data, alignment);
            // Seed 004 section 5.1.1, as in `build_reply`: the message may only now be here.
            match check_rpc_xid(call.xid, &message) {
                Ok(()) => {
                    stats.replies_received_read_chunks += 1;
                    Ok(Reply { message, chunks })
                }
                Err(e) => Err(protocol(format!("a reply with {e}"))),
            }
        };
        self.fence(id, result, invalidated, out, stats);
    }
}

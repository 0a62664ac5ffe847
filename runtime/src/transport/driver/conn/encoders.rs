//! The encoders a connection keeps from one message to the next.

use super::Conn;
use crate::rdma::Connection;
use crate::xdr::{Encoder, ThresholdPolicy};

/// The largest buffer a kept encoder may hold ([`Conn::finish_encoder`]).
const KEPT_ENCODER_MAX: usize = 64 * 1024;

/// What a kept encoder was made for.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum EncoderUse {
    /// Forward calls under this policy.
    Call(ThresholdPolicy),
    /// Replies without Write chunks.
    Reply,
}

/// The encoders a connection keeps between messages: each message is split off the encoder's
/// buffer ([`Encoder::take_with_chunks`]) and the rest of the buffer, or all of it once the
/// messages taken from it are gone, serves the next one. Two allocations fewer per message
/// than a new encoder (its buffer, and the shared header `finish` gives the buffer).
///
/// Boxed: an encoder is a few hundred bytes, moved out of here and back per message.
#[derive(Default)]
pub(super) struct Encoders {
    call: Option<(ThresholdPolicy, Box<Encoder>)>,
    reply: Option<Box<Encoder>>,
}

impl<C: Connection> Conn<C> {
    /// An encoder for `usage`: the one kept, if it is free and made for the same use, else a
    /// new one.
    pub(super) fn encoder(&self, usage: EncoderUse) -> Box<Encoder> {
        let kept = self.encoders.try_lock().and_then(|mut kept| match usage {
            EncoderUse::Call(policy) => kept
                .call
                .take()
                .filter(|(p, _)| *p == policy)
                .map(|(_, enc)| enc),
            EncoderUse::Reply => kept.reply.take(),
        });
        kept.unwrap_or_else(|| {
            Box::new(match usage {
                EncoderUse::Call(policy) => Encoder::for_call(policy),
                EncoderUse::Reply => Encoder::for_reply(ThresholdPolicy::default(), Vec::new()),
            })
        })
    }

    /// Ends the message in `enc`. An encoder from [`Conn::encoder`] (`kept` names its use)
    /// gives the message off its buffer and is kept for the next one of its use, unless its
    /// buffer grew for a large message, which the connection would otherwise hold on to; any
    /// other hands its buffer over whole.
    pub(super) fn finish_encoder(
        &self,
        mut enc: Box<Encoder>,
        kept: Option<EncoderUse>,
    ) -> (crate::xdr::Encoded, Vec<crate::xdr::MovedItem>) {
        let Some(usage) = kept else {
            return enc.finish_with_chunks();
        };
        // Also what a failed encode left: nothing stays behind in the encoder.
        let (message, moved) = enc.take_with_chunks();
        if message.len() + enc.capacity() <= KEPT_ENCODER_MAX {
            self.keep_encoder(usage, enc);
        }
        (message, moved)
    }

    /// Keeps `enc`, empty, for the next message of its use.
    fn keep_encoder(&self, usage: EncoderUse, enc: Box<Encoder>) {
        if let Some(mut kept) = self.encoders.try_lock() {
            match usage {
                EncoderUse::Call(policy) => kept.call = Some((policy, enc)),
                EncoderUse::Reply => kept.reply = Some(enc),
            }
        }
    }
}

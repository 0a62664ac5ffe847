//! Encoding messages into a buffer the thread reuses.
//!
//! An encoder per message cost two allocations and two frees per call: its buffer, and the
//! shared header `bytes` adds when a buffer with room to spare is frozen. A message here is
//! written into the thread's encoder and handed to the sender where it lies: a message that
//! is one run of bytes (every small one) is lent as a slice, and the encoder is cleared for
//! the next one (nothing taken, counted or freed; a sender that must queue it copies it). A
//! message that gathered parts by reference (a large payload) is taken from the encoder
//! instead, and shares its buffer (a reference count each) until it has been written.

use std::cell::RefCell;

use super::sink::Record;
use crate::xdr::Encoder;

/// The buffer a thread starts with: room for many small messages.
const CAPACITY: usize = 16 << 10;
/// A buffer grown beyond this by a large message is not kept for the next one.
const MAX_KEPT: usize = 64 << 10;

thread_local! {
    static ENCODER: RefCell<Option<Encoder>> = const { RefCell::new(None) };
}

/// Writes one message with `encode` into this thread's reused encoder and returns what
/// `send` makes of it.
pub(super) fn with_message<E, R>(
    encode: impl FnOnce(&mut Encoder) -> Result<(), E>,
    send: impl FnOnce(Record<'_>) -> R,
) -> Result<R, E> {
    ENCODER.with(|cell| {
        let Ok(mut kept) = cell.try_borrow_mut() else {
            // An encode within an encode (not ours; an `Encode` impl could): its own encoder.
            let mut enc = Encoder::new();
            encode(&mut enc)?;
            return Ok(send_from(&mut enc, send));
        };
        message_in(&mut kept, encode, send)
    })
}

/// An encoder one owner reuses for its messages, as [`with_message`] does the thread's,
/// without looking the thread's up each time (the task serving a server connection, which
/// answers most calls itself: the look-up and its `RefCell` cost 29 instructions per NULL
/// call, callgrind).
#[derive(Default)]
pub(super) struct KeptEncoder(Option<Encoder>);

impl KeptEncoder {
    /// Writes one message with `encode` into the encoder and returns what `send` makes of it.
    pub(super) fn message<E, R>(
        &mut self,
        encode: impl FnOnce(&mut Encoder) -> Result<(), E>,
        send: impl FnOnce(Record<'_>) -> R,
    ) -> Result<R, E> {
        message_in(&mut self.0, encode, send)
    }
}

/// Writes one message with `encode` into the encoder `kept` (made when there is none) and
/// returns what `send` makes of it; an encoder grown too large by it is not kept.
fn message_in<E, R>(
    kept: &mut Option<Encoder>,
    encode: impl FnOnce(&mut Encoder) -> Result<(), E>,
    send: impl FnOnce(Record<'_>) -> R,
) -> Result<R, E> {
    let enc = kept.get_or_insert_with(|| Encoder::with_capacity(CAPACITY));
    // Every message leaves the encoder cleared, unless its `encode` or `send` panicked.
    if !enc.is_empty() {
        enc.clear();
    }
    encode(enc)?;
    let sent = send_from(enc, send);
    if enc.capacity() > MAX_KEPT {
        *kept = None;
    }
    Ok(sent)
}

/// Hands the message in `enc` to `send`, and leaves `enc` empty.
fn send_from<R>(enc: &mut Encoder, send: impl FnOnce(Record<'_>) -> R) -> R {
    if let Some(message) = enc.as_contiguous() {
        let sent = send(Record::Slice(message));
        enc.clear();
        return sent;
    }
    let message = enc.take();
    send(Record::Parts(message.parts()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xdr::Encode;

    fn bytes(record: Record<'_>) -> Vec<u8> {
        match record {
            Record::Slice(slice) => slice.to_vec(),
            Record::Parts(parts) => parts.iter().flat_map(|p| p.iter().copied()).collect(),
        }
    }

    fn encoded(encode: impl FnOnce(&mut Encoder) -> crate::xdr::Result<()>) -> Vec<u8> {
        with_message(encode, bytes).unwrap()
    }

    #[test]
    fn messages_from_the_reused_encoder_stay_intact() {
        assert_eq!(encoded(|enc| 7u32.encode(enc)), [0, 0, 0, 7]);
        assert_eq!(
            encoded(|enc| (1u32, 2u64).encode(enc)),
            [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2]
        );
    }

    #[test]
    fn a_small_message_is_lent_in_place_and_a_gathered_one_taken_as_parts() {
        let small = with_message(|enc| 7u32.encode(enc), |r| matches!(r, Record::Slice(_)));
        assert_eq!(small, Ok::<_, crate::xdr::Error>(true));
        let payload = bytes::Bytes::from(vec![3u8; 64 << 10]);
        let gathered = with_message(
            |enc| enc.put_opaque(&payload, None),
            |r| match r {
                Record::Parts(parts) => parts.iter().any(|p| p.as_ptr() == payload.as_ptr()),
                Record::Slice(_) => false,
            },
        );
        assert_eq!(gathered, Ok(true), "the payload goes by reference");
    }

    #[test]
    fn a_failed_or_panicking_encode_leaves_nothing_for_the_next_message() {
        let failed: Result<(), &str> = with_message(
            |enc| {
                9u32.encode(enc).unwrap();
                Err("no")
            },
            |_| unreachable!("a failed encode is not sent"),
        );
        assert!(failed.is_err());
        let panicked = std::panic::catch_unwind(|| {
            with_message::<(), ()>(
                |enc| {
                    9u32.encode(enc).unwrap();
                    panic!("in an encode")
                },
                |_| (),
            )
        });
        assert!(panicked.is_err());
        assert_eq!(encoded(|enc| 5u32.encode(enc)), [0, 0, 0, 5]);
    }

    #[test]
    fn an_encode_within_an_encode_gets_an_encoder_of_its_own() {
        let outer = encoded(|enc| {
            assert_eq!(encoded(|enc| 2u32.encode(enc)), [0, 0, 0, 2]);
            1u32.encode(enc)
        });
        assert_eq!(outer, [0, 0, 0, 1]);
    }

    #[test]
    fn a_kept_encoder_serves_message_after_message_and_lets_a_grown_buffer_go() {
        let mut kept = KeptEncoder::default();
        for n in 0..3u32 {
            let message = kept.message(|enc| (n, n + 1).encode(enc), bytes);
            let expected: Vec<u8> = [n, n + 1].iter().flat_map(|v| v.to_be_bytes()).collect();
            assert_eq!(message, Ok::<_, crate::xdr::Error>(expected));
        }
        let failed: Result<(), &str> = kept.message(
            |enc| {
                9u32.encode(enc).unwrap();
                Err("no")
            },
            |_| unreachable!("a failed encode is not sent"),
        );
        assert!(failed.is_err());
        assert_eq!(
            kept.message(|enc| 5u32.encode(enc), bytes),
            Ok::<_, crate::xdr::Error>(vec![0, 0, 0, 5])
        );
        let large = vec![0u8; MAX_KEPT * 2];
        let len = kept.message(|enc| enc.put_opaque_slice(&large, None), |r| bytes(r).len());
        assert_eq!(len, Ok::<_, crate::xdr::Error>(4 + MAX_KEPT * 2));
        assert!(kept.0.is_none());
    }

    #[test]
    fn a_buffer_grown_by_a_large_message_is_not_kept() {
        let large = vec![0u8; MAX_KEPT * 2];
        let len = with_message(|enc| enc.put_opaque_slice(&large, None), |r| bytes(r).len());
        assert_eq!(len, Ok::<_, crate::xdr::Error>(4 + MAX_KEPT * 2));
        ENCODER.with(|cell| assert!(cell.borrow().is_none()));
    }
}

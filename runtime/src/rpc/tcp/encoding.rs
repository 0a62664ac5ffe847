//! Encoding messages into a buffer the thread reuses.
//!
//! An encoder per message cost two allocations and two frees per call: its buffer, and the
//! shared header `bytes` adds when a buffer with room to spare is frozen. Messages taken
//! from a reused encoder share its buffer instead (a reference count each), and the buffer is
//! reclaimed whole once they are all gone; a message kept for sending again (or queued
//! behind a full socket) keeps only its part alive.

use std::cell::RefCell;

use crate::xdr::{Encoded, Encoder};

/// The buffer a thread starts with: room for many small messages.
const CAPACITY: usize = 16 << 10;
/// A buffer grown beyond this by a large message is not kept for the next one.
const MAX_KEPT: usize = 64 << 10;

thread_local! {
    static ENCODER: RefCell<Option<Encoder>> = const { RefCell::new(None) };
}

/// One message, written by `encode` into this thread's reused encoder and taken from it.
pub(super) fn encode_message<E>(
    encode: impl FnOnce(&mut Encoder) -> Result<(), E>,
) -> Result<Encoded, E> {
    ENCODER.with(|cell| {
        let Ok(mut kept) = cell.try_borrow_mut() else {
            // An encode within an encode (not ours; an `Encode` impl could): its own encoder.
            let mut enc = Encoder::new();
            encode(&mut enc)?;
            return Ok(enc.finish());
        };
        let enc = kept.get_or_insert_with(|| Encoder::with_capacity(CAPACITY));
        // Left over if an earlier `encode` panicked.
        enc.clear();
        let result = encode(enc);
        // (Before taking the message: what is left after it is only the unused room.)
        let grown = enc.capacity() > MAX_KEPT;
        let message = result.map(|()| enc.take());
        if grown {
            *kept = None;
        }
        message
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xdr::Encode;

    fn bytes(message: &Encoded) -> Vec<u8> {
        message
            .parts()
            .iter()
            .flat_map(|p| p.iter().copied())
            .collect()
    }

    #[test]
    fn messages_taken_from_the_reused_encoder_stay_intact() {
        let first = encode_message(|enc| 7u32.encode(enc)).unwrap();
        let second = encode_message(|enc| (1u32, 2u64).encode(enc)).unwrap();
        assert_eq!(bytes(&first), [0, 0, 0, 7]);
        assert_eq!(bytes(&second), [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2]);
    }

    #[test]
    fn a_failed_or_panicking_encode_leaves_nothing_for_the_next_message() {
        let failed: Result<Encoded, &str> = encode_message(|enc| {
            9u32.encode(enc).unwrap();
            Err("no")
        });
        assert!(failed.is_err());
        let panicked = std::panic::catch_unwind(|| {
            encode_message::<()>(|enc| {
                9u32.encode(enc).unwrap();
                panic!("in an encode")
            })
        });
        assert!(panicked.is_err());
        let next = encode_message(|enc| 5u32.encode(enc)).unwrap();
        assert_eq!(bytes(&next), [0, 0, 0, 5]);
    }

    #[test]
    fn an_encode_within_an_encode_gets_an_encoder_of_its_own() {
        let outer = encode_message(|enc| {
            let inner = encode_message(|enc| 2u32.encode(enc)).unwrap();
            assert_eq!(bytes(&inner), [0, 0, 0, 2]);
            1u32.encode(enc)
        })
        .unwrap();
        assert_eq!(bytes(&outer), [0, 0, 0, 1]);
    }

    #[test]
    fn a_buffer_grown_by_a_large_message_is_not_kept() {
        let large = vec![0u8; MAX_KEPT * 2];
        let message = encode_message(|enc| enc.put_opaque_slice(&large, None)).unwrap();
        assert_eq!(message.len(), 4 + MAX_KEPT * 2);
        ENCODER.with(|cell| assert!(cell.borrow().is_none()));
    }
}

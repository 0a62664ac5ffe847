//! Results whose reply did not fit the call's chunks, kept for the call sent again.
//!
//! A requester that offered too little room for the results learns it from RDMA_ERROR
//! (ERR_CHUNK in version 1, WRITE_RESOURCE or REPLY_RESOURCE in version 2, seed 003 section
//! 5.3.3: "it MAY send the request again using the same XID and more reply resources"). The
//! procedure has run by then; running it again for the second attempt would do twice what a
//! non-idempotent procedure (a removal, an append) must do once. So the result waits here,
//! keyed by the call's XID and a digest of its message, and the call sent again is answered
//! from it. Bounded in entries and time: a requester sends again at once or not at all.

use std::collections::hash_map::DefaultHasher;
use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::rpc::HandlerResult;

/// Results kept at most, per connection.
const KEPT: usize = 16;

/// How long a result waits for its call to come again.
const KEPT_FOR: Duration = Duration::from_secs(10);

/// A call's identity for its second attempt: the XID and a digest of the whole message
/// (credentials and arguments), so a different call that reuses the XID is not answered
/// with another's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CallKey {
    xid: u32,
    digest: u64,
}

impl CallKey {
    pub(super) fn of(xid: u32, message: &Bytes) -> CallKey {
        let mut h = DefaultHasher::new();
        message.hash(&mut h);
        CallKey {
            xid,
            digest: h.finish(),
        }
    }
}

/// The results kept.
#[derive(Default)]
pub(super) struct Undelivered {
    kept: VecDeque<(CallKey, Instant, HandlerResult)>,
}

impl Undelivered {
    /// True when nothing is kept (the common case: no lookup per call).
    pub(super) fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }

    /// Keeps `result` for the call `key` sent again.
    pub(super) fn keep(&mut self, key: CallKey, result: HandlerResult, now: Instant) {
        self.expire(now);
        if self.kept.len() == KEPT {
            self.kept.pop_front();
        }
        self.kept.push_back((key, now, result));
    }

    /// The result kept for `key`, taken out.
    pub(super) fn take(&mut self, key: CallKey, now: Instant) -> Option<HandlerResult> {
        self.expire(now);
        let at = self.kept.iter().position(|(k, _, _)| *k == key)?;
        self.kept.remove(at).map(|(_, _, result)| result)
    }

    fn expire(&mut self, now: Instant) {
        while self
            .kept
            .front()
            .is_some_and(|(_, at, _)| now.duration_since(*at) >= KEPT_FOR)
        {
            self.kept.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::ReplyError;

    fn key(xid: u32, message: &'static [u8]) -> CallKey {
        CallKey::of(xid, &Bytes::from_static(message))
    }

    #[test]
    fn a_result_is_found_by_xid_and_message_once() {
        let now = Instant::now();
        let mut u = Undelivered::default();
        u.keep(key(7, b"call"), Err(ReplyError::SystemErr), now);
        assert!(u.take(key(7, b"other arguments"), now).is_none());
        assert!(u.take(key(8, b"call"), now).is_none());
        assert!(u.take(key(7, b"call"), now).is_some());
        assert!(u.take(key(7, b"call"), now).is_none(), "taken once");
        assert!(u.is_empty());
    }

    #[test]
    fn results_are_kept_for_a_while_and_a_few_at_a_time() {
        let now = Instant::now();
        let mut u = Undelivered::default();
        for xid in 0..KEPT as u32 + 1 {
            u.keep(key(xid, b"m"), Err(ReplyError::SystemErr), now);
        }
        assert!(u.take(key(0, b"m"), now).is_none(), "the oldest made room");
        assert!(u.take(key(1, b"m"), now).is_some());
        assert!(u.take(key(2, b"m"), now + KEPT_FOR).is_none(), "expired");
    }
}

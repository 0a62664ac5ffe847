//! How large a procedure's DDP-eligible results were lately, to decide how the next reply
//! should come back when the caller does not say.
//!
//! Over RPC-over-RDMA a requester decides, before the call goes out, where each DDP-eligible
//! result lands: in a Write chunk it provides (which the responder must then use, seed 002
//! section 3.7: "a server is not permitted to return bulk data inline ... when the client has
//! provided a Write list") or inline in the reply. A Write chunk costs an RDMA Write and
//! registered memory even for a 20-byte result; inline costs nothing extra but fails for a
//! result larger than the receive buffer. The history here lets small results come back
//! inline and large ones straight into a Write chunk of about their size; a guess that turns
//! out too small is corrected by sending the call once more with room (see
//! `transport::core`), and remembered.

use std::collections::HashMap;

/// Results remembered per procedure.
const REMEMBERED: usize = 8;

/// One procedure's recent result sizes.
#[derive(Debug, Default, Clone)]
struct Recent {
    sizes: [u32; REMEMBERED],
    next: usize,
    seen: usize,
}

impl Recent {
    fn push(&mut self, size: usize) {
        self.sizes[self.next] = size.min(u32::MAX as usize) as u32;
        self.next = (self.next + 1) % REMEMBERED;
        self.seen += 1;
    }

    fn largest(&self) -> usize {
        self.sizes[..self.seen.min(REMEMBERED)]
            .iter()
            .copied()
            .max()
            .unwrap_or(0) as usize
    }
}

/// Recent result sizes by (program, version, procedure).
#[derive(Debug, Default)]
pub(crate) struct ReplySizes {
    by_procedure: HashMap<(u32, u32, u32), Recent>,
}

impl ReplySizes {
    /// The largest of the last results of `procedure`, `None` before the first.
    pub(crate) fn predict(&self, procedure: (u32, u32, u32)) -> Option<usize> {
        self.by_procedure.get(&procedure).map(Recent::largest)
    }

    /// Remembers that a result of `procedure` carried `size` bytes of DDP-eligible data (or,
    /// inline, a reply of `size` bytes).
    pub(crate) fn observe(&mut self, procedure: (u32, u32, u32), size: usize) {
        self.by_procedure.entry(procedure).or_default().push(size);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prediction_is_the_largest_of_the_last_eight() {
        let mut sizes = ReplySizes::default();
        let p = (1, 1, 2);
        assert_eq!(sizes.predict(p), None);
        sizes.observe(p, 20);
        assert_eq!(sizes.predict(p), Some(20));
        sizes.observe(p, 4 << 20);
        for _ in 0..7 {
            sizes.observe(p, 20);
            assert_eq!(sizes.predict(p), Some(4 << 20));
        }
        sizes.observe(p, 30);
        assert_eq!(sizes.predict(p), Some(30), "the large one is forgotten");
        assert_eq!(sizes.predict((1, 1, 3)), None);
    }
}

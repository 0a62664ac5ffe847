//! The back channel's slots as the replier keeps them (RFC 5661 section 2.10.6.1, applied to
//! CB_SEQUENCE by section 20.9.3): per slot, the last sequence ID and the reply to it, so that
//! a retry gets the same answer instead of running again.

use crate::nfs4::{CbCompound4res, Nfsstat4};

#[derive(Debug, Default)]
struct Slot {
    /// The last sequence ID accepted (0: none yet).
    seq: u32,
    /// A request on the slot is being answered.
    busy: bool,
    /// The reply to `seq` (every reply is kept: a CB_COMPOUND reply is a few dozen bytes).
    cached: Option<CbCompound4res>,
}

/// What to do with a CB_SEQUENCE's slot and sequence ID.
#[derive(Debug)]
pub enum Begin {
    /// A new request: run it, then [`CbSlots::finish`].
    New,
    /// A retry of the last request: send its reply again.
    Replay(CbCompound4res),
    /// Refuse the request with this status in the CB_SEQUENCE result.
    Refuse(Nfsstat4),
}

/// The slots of one session's back channel.
#[derive(Debug)]
pub struct CbSlots {
    slots: Vec<Slot>,
}

impl CbSlots {
    /// `slots` slots (at least one), none used.
    pub fn new(slots: u32) -> CbSlots {
        CbSlots {
            slots: (0..slots.max(1)).map(|_| Slot::default()).collect(),
        }
    }

    /// The highest slot ID (`csr_highest_slotid` and `csr_target_highest_slotid`).
    pub fn highest(&self) -> u32 {
        self.slots.len().saturating_sub(1) as u32
    }

    /// Judges request `seq` on `slot` (RFC 5661 section 2.10.6.1): the next sequence ID is a
    /// new request, the last one a retry, anything else `NFS4ERR_SEQ_MISORDERED`; a slot
    /// beyond the table is `NFS4ERR_BADSLOT`, one still answering `NFS4ERR_DELAY`.
    pub fn begin(&mut self, slot: u32, seq: u32) -> Begin {
        let Some(s) = self.slots.get_mut(slot as usize) else {
            return Begin::Refuse(Nfsstat4::Nfs4errBadslot);
        };
        if s.busy {
            return Begin::Refuse(Nfsstat4::Nfs4errDelay);
        }
        if seq == s.seq.wrapping_add(1) {
            s.busy = true;
            s.seq = seq;
            s.cached = None;
            return Begin::New;
        }
        match &s.cached {
            Some(reply) if seq == s.seq => Begin::Replay(reply.clone()),
            _ => Begin::Refuse(Nfsstat4::Nfs4errSeqMisordered),
        }
    }

    /// Keeps `reply` as the answer to the request [`begin`](Self::begin) accepted on `slot`.
    pub fn finish(&mut self, slot: u32, reply: &CbCompound4res) {
        if let Some(s) = self.slots.get_mut(slot as usize) {
            s.busy = false;
            s.cached = Some(reply.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(status: Nfsstat4) -> CbCompound4res {
        CbCompound4res {
            status,
            tag: Default::default(),
            resarray: Vec::new(),
        }
    }

    #[test]
    fn new_requests_retries_and_misordered_ones() {
        let mut slots = CbSlots::new(1);
        assert!(matches!(
            slots.begin(0, 0),
            Begin::Refuse(Nfsstat4::Nfs4errSeqMisordered)
        ));
        assert!(matches!(slots.begin(0, 1), Begin::New));
        assert!(matches!(
            slots.begin(0, 1),
            Begin::Refuse(Nfsstat4::Nfs4errDelay)
        ));
        slots.finish(0, &reply(Nfsstat4::Nfs4Ok));
        assert!(matches!(slots.begin(0, 1), Begin::Replay(r) if r.status == Nfsstat4::Nfs4Ok));
        assert!(matches!(
            slots.begin(0, 3),
            Begin::Refuse(Nfsstat4::Nfs4errSeqMisordered)
        ));
        assert!(matches!(
            slots.begin(1, 1),
            Begin::Refuse(Nfsstat4::Nfs4errBadslot)
        ));
        assert!(matches!(slots.begin(0, 2), Begin::New));
    }
}

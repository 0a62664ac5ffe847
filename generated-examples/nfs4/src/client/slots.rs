//! The fore channel's slot table (RFC 5661 section 2.10.6.1): one request per slot at a time,
//! each slot's sequence ID one more than its previous request's, and the server's
//! `sr_highest_slotid` / `sr_target_highest_slotid` bounding the slots in use (section
//! 2.10.6.1 and 18.46.3).
//!
//! The table decides nothing by itself: [`SlotTable::acquire`] hands out a free slot with the
//! sequence ID to send, and the caller reports how the request ended with
//! [`Lease::complete`]. A lease dropped without a report (the caller's future cancelled) counts
//! as [`Outcome::Uncertain`].

use std::sync::{Mutex, MutexGuard};

use tokio::sync::Notify;

/// How a request on a slot ended, as its SEQUENCE result tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// SEQUENCE succeeded: the server's slot moved to the sequence ID sent. Carries the
    /// reply's `sr_highest_slotid` and `sr_target_highest_slotid`.
    Advanced {
        /// `sr_highest_slotid`: the highest slot the server accepts now.
        highest: u32,
        /// `sr_target_highest_slotid`: the highest slot the server would like used.
        target: u32,
    },
    /// SEQUENCE failed (RFC 5661 section 2.10.6.1: the slot's sequence ID does not move).
    NotAdvanced,
    /// No usable reply (transport failure, cancelled call, a reply for another slot): the
    /// server may or may not have seen the request. The table assumes it did, and the next
    /// request's `NFS4ERR_SEQ_MISORDERED` says otherwise ([`Outcome::Rewind`]).
    Uncertain,
    /// `NFS4ERR_SEQ_MISORDERED` after an uncertain request: that request never reached the
    /// server, whose slot is one sequence ID behind what the table assumed.
    Rewind,
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// The sequence ID of the last request the server is taken to have processed (0: none,
    /// so the first request sends 1).
    seq: u32,
    busy: bool,
    /// The last request's fate is unknown ([`Outcome::Uncertain`]).
    uncertain: bool,
}

#[derive(Debug)]
struct Slots {
    slots: Vec<Slot>,
    /// The highest slot ID handed out: `min(sr_highest_slotid, sr_target_highest_slotid)`,
    /// bounded by the table.
    limit: u32,
}

impl Slots {
    fn highest_busy(&self) -> u32 {
        self.slots.iter().rposition(|s| s.busy).unwrap_or(0) as u32
    }
}

/// A session's fore channel slots, shared by concurrent callers.
#[derive(Debug)]
pub struct SlotTable {
    state: Mutex<Slots>,
    freed: Notify,
}

/// One slot held for one request.
#[derive(Debug)]
#[must_use = "a lease not completed counts as an uncertain request"]
pub struct Lease<'a> {
    table: &'a SlotTable,
    /// The slot ID (`sa_slotid`).
    pub slot: u32,
    /// The sequence ID to send (`sa_sequenceid`).
    pub seq: u32,
    /// The highest slot ID in use when the lease was taken (`sa_highest_slotid`).
    pub highest_in_use: u32,
    /// The slot's previous request had no usable reply.
    pub uncertain: bool,
    done: bool,
}

impl SlotTable {
    /// A table of `slots` slots (at least one), all usable at first.
    pub fn new(slots: u32) -> SlotTable {
        let slots = slots.max(1);
        SlotTable {
            state: Mutex::new(Slots {
                slots: vec![Slot::default(); slots as usize],
                limit: slots - 1,
            }),
            freed: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slots> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The highest slot ID handed out now.
    pub fn limit(&self) -> u32 {
        self.lock().limit
    }

    /// A free slot at or below the limit, if there is one.
    pub fn try_acquire(&self) -> Option<Lease<'_>> {
        let mut st = self.lock();
        let limit = st.limit as usize;
        let index = st.slots.iter().take(limit + 1).position(|s| !s.busy)?;
        let slot = &mut st.slots[index];
        slot.busy = true;
        let (seq, uncertain) = (slot.seq.wrapping_add(1), slot.uncertain);
        let highest_in_use = st.highest_busy();
        Some(Lease {
            table: self,
            slot: index as u32,
            seq,
            highest_in_use,
            uncertain,
            done: false,
        })
    }

    /// Waits for a free slot.
    pub async fn acquire(&self) -> Lease<'_> {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            // Registered before looking, so a slot freed in between still wakes this caller.
            freed.as_mut().enable();
            if let Some(lease) = self.try_acquire() {
                return lease;
            }
            freed.await;
        }
    }

    /// Hands out no slot above `highest` until a SEQUENCE reply says otherwise (CB_RECALL_SLOT,
    /// RFC 5661 section 20.8).
    pub fn lower_limit(&self, highest: u32) {
        let mut st = self.lock();
        st.limit = st.limit.min(highest);
    }

    fn release(&self, slot: u32, seq: u32, outcome: Outcome) {
        let mut st = self.lock();
        let len = st.slots.len() as u32;
        if let Some(s) = st.slots.get_mut(slot as usize) {
            s.busy = false;
            match outcome {
                Outcome::Advanced { .. } => {
                    s.seq = seq;
                    s.uncertain = false;
                }
                Outcome::NotAdvanced => {}
                Outcome::Uncertain => {
                    s.seq = seq;
                    s.uncertain = true;
                }
                Outcome::Rewind => {
                    s.seq = seq.wrapping_sub(2);
                    s.uncertain = false;
                }
            }
        }
        if let Outcome::Advanced { highest, target } = outcome {
            // Counts from the server are bounded by the table the session was granted.
            st.limit = highest.min(target).min(len - 1);
        }
        drop(st);
        self.freed.notify_waiters();
    }
}

impl Lease<'_> {
    /// Frees the slot, recording how its request ended.
    pub fn complete(mut self, outcome: Outcome) {
        self.done = true;
        self.table.release(self.slot, self.seq, outcome);
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.table.release(self.slot, self.seq, Outcome::Uncertain);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: Outcome = Outcome::Advanced {
        highest: 7,
        target: 7,
    };

    #[test]
    fn sequence_ids_start_at_one_and_move_only_when_sequence_succeeds() {
        let table = SlotTable::new(2);
        let lease = table.try_acquire().unwrap();
        assert_eq!((lease.slot, lease.seq, lease.highest_in_use), (0, 1, 0));
        lease.complete(OK);
        let lease = table.try_acquire().unwrap();
        assert_eq!((lease.slot, lease.seq), (0, 2));
        lease.complete(Outcome::NotAdvanced);
        let lease = table.try_acquire().unwrap();
        assert_eq!((lease.slot, lease.seq), (0, 2));
        lease.complete(OK);
    }

    #[test]
    fn one_request_per_slot_and_the_highest_in_use_reported() {
        let table = SlotTable::new(2);
        let a = table.try_acquire().unwrap();
        let b = table.try_acquire().unwrap();
        assert_eq!((a.slot, b.slot, b.highest_in_use), (0, 1, 1));
        assert!(table.try_acquire().is_none());
        b.complete(OK);
        a.complete(OK);
    }

    #[test]
    fn an_uncertain_request_is_assumed_seen_until_seq_misordered_says_otherwise() {
        let table = SlotTable::new(1);
        let lease = table.try_acquire().unwrap();
        assert_eq!(lease.seq, 1);
        drop(lease); // cancelled: uncertain
        let lease = table.try_acquire().unwrap();
        assert_eq!((lease.seq, lease.uncertain), (2, true));
        lease.complete(Outcome::Rewind);
        let lease = table.try_acquire().unwrap();
        assert_eq!((lease.seq, lease.uncertain), (1, false));
        lease.complete(OK);
    }

    #[test]
    fn the_servers_highest_and_target_slot_bound_the_slots_handed_out() {
        let table = SlotTable::new(4);
        let lease = table.try_acquire().unwrap();
        lease.complete(Outcome::Advanced {
            highest: 3,
            target: 1,
        });
        assert_eq!(table.limit(), 1);
        let a = table.try_acquire().unwrap();
        let b = table.try_acquire().unwrap();
        assert!(
            table.try_acquire().is_none(),
            "slots 2 and 3 are above the target"
        );
        a.complete(Outcome::Advanced {
            highest: u32::MAX,
            target: u32::MAX,
        });
        assert_eq!(table.limit(), 3, "bounded by the table");
        b.complete(OK);
    }

    #[tokio::test]
    async fn a_waiting_caller_gets_the_slot_freed() {
        let table = std::sync::Arc::new(SlotTable::new(1));
        let held = table.try_acquire().unwrap();
        let waiter = {
            let table = table.clone();
            tokio::spawn(async move {
                let lease = table.acquire().await;
                let seq = lease.seq;
                lease.complete(OK);
                seq
            })
        };
        tokio::task::yield_now().await;
        held.complete(OK);
        assert_eq!(waiter.await.unwrap(), 2);
    }
}

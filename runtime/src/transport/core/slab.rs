//! The calls one side of a connection tracks, by [`CallId`]: a slab (a vector of slots and a
//! list of the free ones) instead of a hash map.
//!
//! A call is looked up several times between its start and its end (reply, fencing,
//! completions); here a look-up is an index and a comparison, and an insertion or a removal
//! touches one slot, where the hash map hashed and probed each time (an RPC-over-RDMA NULL
//! call, `scripts/rpc-profile rdma`: client 12,091 -> 11,926 instructions, server 10,187 ->
//! 10,052).
//!
//! An id carries its slot in its low 32 bits and a sequence number in its high 32 bits, so an
//! id whose call is gone never finds the call that reuses its slot (a cancellation that comes
//! after the reply, say): it finds nothing, as in the map. Ids repeat only after 2^32 calls
//! through the same slot.

use super::CallId;

/// Values by the [`CallId`] each was given when inserted.
pub(super) struct CallSlab<T> {
    /// Each slot's id and value, `None` when free.
    slots: Vec<Option<(CallId, T)>>,
    /// Free slots, the last freed on top (reused first, while it is warm in the cache).
    free: Vec<u32>,
    len: usize,
    /// The sequence number of the next id (never 0, so no id is 0).
    seq: u32,
}

impl<T> Default for CallSlab<T> {
    fn default() -> CallSlab<T> {
        CallSlab {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
            seq: 1,
        }
    }
}

/// The slot of `id`.
fn slot(id: CallId) -> usize {
    id as u32 as usize
}

impl<T> CallSlab<T> {
    /// Stores `value` under a new id, which it returns.
    pub(super) fn insert(&mut self, value: T) -> CallId {
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                let index = u32::try_from(self.slots.len()).expect("fewer than 2^32 calls");
                self.slots.push(None);
                index
            }
        };
        let id = (u64::from(self.seq) << 32) | u64::from(index);
        self.seq = self.seq.wrapping_add(1).max(1);
        self.slots[index as usize] = Some((id, value));
        self.len += 1;
        id
    }

    /// The value stored under `id`, if it is still there.
    pub(super) fn get(&self, id: CallId) -> Option<&T> {
        match self.slots.get(slot(id)) {
            Some(Some((at, value))) if *at == id => Some(value),
            _ => None,
        }
    }

    /// The value stored under `id`, if it is still there.
    pub(super) fn get_mut(&mut self, id: CallId) -> Option<&mut T> {
        match self.slots.get_mut(slot(id)) {
            Some(Some((at, value))) if *at == id => Some(value),
            _ => None,
        }
    }

    /// Takes the value stored under `id` out; its slot is free again.
    pub(super) fn remove(&mut self, id: CallId) -> Option<T> {
        let entry = self.slots.get_mut(slot(id))?;
        if !entry.as_ref().is_some_and(|(at, _)| *at == id) {
            return None;
        }
        let (_, value) = entry.take()?;
        self.free.push(slot(id) as u32);
        self.len -= 1;
        Some(value)
    }

    /// Drops the value stored under `id` where it lies (no copy out, unlike
    /// [`CallSlab::remove`]); its slot is free again. False when there was none.
    pub(super) fn discard(&mut self, id: CallId) -> bool {
        let Some(entry) = self.slots.get_mut(slot(id)) else {
            return false;
        };
        if !entry.as_ref().is_some_and(|(at, _)| *at == id) {
            return false;
        }
        *entry = None;
        self.free.push(slot(id) as u32);
        self.len -= 1;
        true
    }

    /// How many values are stored.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Every stored value with its id, in slot order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (CallId, &T)> {
        self.slots.iter().flatten().map(|(id, value)| (*id, value))
    }

    /// Every stored value.
    pub(super) fn values(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().flatten().map(|(_, value)| value)
    }

    /// Every stored value, to change.
    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.slots.iter_mut().flatten().map(|(_, value)| value)
    }

    /// Takes every value out, with its id.
    pub(super) fn drain(&mut self) -> impl Iterator<Item = (CallId, T)> {
        self.free.clear();
        self.len = 0;
        std::mem::take(&mut self.slots).into_iter().flatten()
    }

    /// Forgets every value.
    pub(super) fn clear(&mut self) {
        self.slots.clear();
        self.free.clear();
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_come_back_by_their_ids() {
        let mut calls = CallSlab::default();
        let a = calls.insert("a");
        let b = calls.insert("b");
        assert_ne!(a, b);
        assert_ne!(a, 0);
        assert_eq!(calls.get(a), Some(&"a"));
        assert_eq!(calls.get(b), Some(&"b"));
        assert_eq!(calls.len(), 2);
        *calls.get_mut(b).unwrap() = "B";
        assert_eq!(calls.remove(b), Some("B"));
        assert_eq!(calls.len(), 1);
        assert!(calls.get(a).is_some());
        assert!(calls.get(b).is_none());
        assert!(!calls.discard(b));
        assert!(calls.discard(a));
        assert!(calls.get(a).is_none());
        assert_eq!(calls.len(), 0);
    }

    #[test]
    fn a_stale_id_does_not_find_the_value_that_reuses_its_slot() {
        let mut calls = CallSlab::default();
        let old = calls.insert(1);
        assert_eq!(calls.remove(old), Some(1));
        let new = calls.insert(2);
        // The same slot, another id.
        assert_eq!(slot(old), slot(new));
        assert_ne!(old, new);
        assert_eq!(calls.get(old), None);
        assert_eq!(calls.get_mut(old), None);
        assert_eq!(calls.remove(old), None);
        assert!(!calls.discard(old));
        assert_eq!(calls.get(new), Some(&2));
        assert_eq!(calls.len(), 1);
    }

    #[test]
    fn ids_never_seen_find_nothing() {
        let mut calls = CallSlab::<u8>::default();
        assert_eq!(calls.get(0), None);
        assert_eq!(calls.remove(u64::MAX), None);
        let id = calls.insert(7);
        assert_eq!(calls.get(id + 1), None);
        assert_eq!(calls.get(id ^ (1 << 40)), None);
        assert_eq!(calls.len(), 1);
    }

    #[test]
    fn freed_slots_are_reused_so_the_slab_stays_as_large_as_the_most_calls_at_once() {
        let mut calls = CallSlab::default();
        for round in 0..100 {
            let ids: Vec<CallId> = (0..8).map(|i| calls.insert(round * 8 + i)).collect();
            for (i, id) in ids.into_iter().enumerate() {
                assert_eq!(calls.remove(id), Some(round * 8 + i));
            }
        }
        assert_eq!(calls.slots.len(), 8);
        assert_eq!(calls.len(), 0);
    }

    #[test]
    fn iteration_and_draining_see_every_value_once() {
        let mut calls = CallSlab::default();
        let ids: Vec<CallId> = (0..5).map(|i| calls.insert(i)).collect();
        calls.remove(ids[2]);
        let mut seen: Vec<(CallId, i32)> = calls.iter().map(|(id, v)| (id, *v)).collect();
        seen.sort();
        let expected: Vec<(CallId, i32)> =
            [0, 1, 3, 4].iter().map(|&i| (ids[i], i as i32)).collect();
        assert_eq!(seen, expected);
        for v in calls.values_mut() {
            *v *= 10;
        }
        assert_eq!(calls.values().sum::<i32>(), 80);
        let mut drained: Vec<i32> = calls.drain().map(|(_, v)| v).collect();
        drained.sort();
        assert_eq!(drained, vec![0, 10, 30, 40]);
        assert_eq!(calls.len(), 0);
        assert_eq!(calls.iter().count(), 0);
        let again = calls.insert(9);
        assert_eq!(calls.get(again), Some(&9));
        calls.clear();
        assert_eq!(calls.get(again), None);
        assert_eq!(calls.len(), 0);
    }

    #[test]
    fn the_sequence_skips_zero_when_it_wraps() {
        let mut calls = CallSlab {
            seq: u32::MAX,
            ..CallSlab::default()
        };
        let last = calls.insert(1);
        assert_eq!(last >> 32, u64::from(u32::MAX));
        let next = calls.insert(2);
        assert_eq!(next >> 32, 1);
        assert_ne!(calls.insert(3), 0);
    }
}

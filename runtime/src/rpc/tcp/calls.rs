//! The calls waiting on a client connection, by XID.
//!
//! Most connections have one call waiting at a time (a synchronous caller): that one is kept
//! beside the map rather than in it, so registering and answering it costs a comparison
//! instead of hashing, probing and the table's upkeep (130 instructions of a NULL call,
//! callgrind). Further calls go into the map.

use crate::id_map::IdMap;

/// Values by XID: one inline, the rest in a map.
pub(super) struct Calls<V> {
    /// A call not in `rest` (whichever came when this was free).
    first: Option<(u32, V)>,
    rest: IdMap<u32, V>,
}

impl<V> Default for Calls<V> {
    fn default() -> Self {
        Calls {
            first: None,
            rest: IdMap::default(),
        }
    }
}

impl<V> Calls<V> {
    /// How many there are.
    pub(super) fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }

    /// Whether `xid` is there.
    pub(super) fn contains(&self, xid: u32) -> bool {
        self.get(xid).is_some()
    }

    /// The value of `xid`.
    pub(super) fn get(&self, xid: u32) -> Option<&V> {
        match &self.first {
            Some((x, value)) if *x == xid => Some(value),
            _ if self.rest.is_empty() => None,
            _ => self.rest.get(&xid),
        }
    }

    /// The value of `xid`, to change.
    pub(super) fn get_mut(&mut self, xid: u32) -> Option<&mut V> {
        match &mut self.first {
            Some((x, value)) if *x == xid => Some(value),
            _ if self.rest.is_empty() => None,
            _ => self.rest.get_mut(&xid),
        }
    }

    /// Adds `value` for `xid`, which must not be there yet (the caller looks first).
    pub(super) fn insert(&mut self, xid: u32, value: V) {
        debug_assert!(!self.contains(xid), "XID {xid:#x} inserted twice");
        match self.first {
            None => self.first = Some((xid, value)),
            Some(_) => {
                self.rest.insert(xid, value);
            }
        }
    }

    /// Takes out the value of `xid`.
    pub(super) fn remove(&mut self, xid: u32) -> Option<V> {
        match &self.first {
            Some((x, _)) if *x == xid => self.first.take().map(|(_, value)| value),
            _ if self.rest.is_empty() => None,
            _ => self.rest.remove(&xid),
        }
    }

    /// Every value, to change, in no particular order.
    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        let first = self.first.as_mut().map(|(_, value)| value);
        first.into_iter().chain(self.rest.values_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn behaves_as_a_map_whichever_entry_is_inline() {
        let mut calls = Calls::default();
        let mut model = BTreeMap::new();
        // Insertions and removals in an order that moves the inline place around: the first
        // removed while others wait, re-filled by the next insertion, XIDs not consecutive.
        let steps: [(bool, u32); 14] = [
            (true, 7),
            (true, 8),
            (true, 9),
            (false, 7),
            (true, 3),
            (false, 8),
            (false, 3),
            (false, 3),
            (true, u32::MAX),
            (false, 9),
            (true, 0),
            (false, u32::MAX),
            (false, 0),
            (false, 12),
        ];
        for (n, (insert, xid)) in steps.into_iter().enumerate() {
            if insert {
                calls.insert(xid, n);
                model.insert(xid, n);
            } else {
                assert_eq!(calls.remove(xid), model.remove(&xid), "removing {xid}");
            }
            assert_eq!(calls.len(), model.len());
            for probe in [0, 3, 7, 8, 9, 12, u32::MAX] {
                assert_eq!(calls.contains(probe), model.contains_key(&probe));
                assert_eq!(calls.get(probe), model.get(&probe));
            }
            let mut values: Vec<usize> = calls.values_mut().map(|v| *v).collect();
            values.sort_unstable();
            let mut expected: Vec<usize> = model.values().copied().collect();
            expected.sort_unstable();
            assert_eq!(values, expected);
        }
        assert_eq!(calls.len(), 0);
    }

    #[test]
    fn values_change_in_place_inline_or_not() {
        let mut calls = Calls::default();
        calls.insert(1, 10);
        calls.insert(2, 20);
        *calls.get_mut(1).unwrap() += 1;
        *calls.get_mut(2).unwrap() += 1;
        assert!(calls.get_mut(3).is_none());
        for value in calls.values_mut() {
            *value *= 2;
        }
        assert_eq!((calls.get(1), calls.get(2)), (Some(&22), Some(&42)));
    }

    #[test]
    fn a_lone_call_never_touches_the_map() {
        let mut calls = Calls::default();
        for xid in 0..1000 {
            calls.insert(xid, ());
            assert!(calls.contains(xid));
            assert_eq!(calls.remove(xid), Some(()));
        }
        assert_eq!(calls.rest.capacity(), 0, "the map never allocated");
    }
}

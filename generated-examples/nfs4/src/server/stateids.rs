//! The server's stateids, indexed by file and by client.
//!
//! Every OPEN checks share reservations and delegations on its file, every WRITE looks for
//! other clients' delegations to recall, CLOSE looks for the locks under the open, and the
//! per-client bound counts a client's stateids: over one map of every stateid each of those
//! is a scan of all the server holds (thousands of clients with hundreds of opens each). The
//! indexes make them cost what is on the one file, or the one client, instead.

use std::collections::{HashMap, HashSet};

use super::state::{ClientId, Other, StateEntry};

/// Stateids by their `other` field, with the stateids of each file and of each client.
///
/// An entry's `client` and `fileid` are the indexes' keys: set when it is inserted, never
/// changed through [`get_mut`](Stateids::get_mut) (which the server only uses for `seqid` and
/// `kind`).
#[derive(Debug, Default)]
pub struct Stateids {
    entries: HashMap<Other, StateEntry>,
    by_file: HashMap<u64, Vec<Other>>,
    by_client: HashMap<ClientId, HashSet<Other>>,
}

impl Stateids {
    /// The entry of `other`.
    pub fn get(&self, other: &Other) -> Option<&StateEntry> {
        self.entries.get(other)
    }

    /// The entry of `other`, to change its `seqid` or `kind` (not its client or file).
    pub fn get_mut(&mut self, other: &Other) -> Option<&mut StateEntry> {
        self.entries.get_mut(other)
    }

    /// Whether `other` is held.
    pub fn contains_key(&self, other: &Other) -> bool {
        self.entries.contains_key(other)
    }

    /// Stateids held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds `entry` as `other` (a new `other`: the server never reuses one).
    pub fn insert(&mut self, other: Other, entry: StateEntry) {
        self.remove(&other);
        self.by_file.entry(entry.fileid).or_default().push(other);
        self.by_client
            .entry(entry.client)
            .or_default()
            .insert(other);
        self.entries.insert(other, entry);
    }

    /// Removes `other`, returning its entry.
    pub fn remove(&mut self, other: &Other) -> Option<StateEntry> {
        let entry = self.entries.remove(other)?;
        self.unindex(other, &entry);
        Some(entry)
    }

    fn unindex(&mut self, other: &Other, entry: &StateEntry) {
        if let Some(on_file) = self.by_file.get_mut(&entry.fileid) {
            if let Some(i) = on_file.iter().position(|o| o == other) {
                on_file.swap_remove(i);
            }
            if on_file.is_empty() {
                self.by_file.remove(&entry.fileid);
            }
        }
        if let Some(of_client) = self.by_client.get_mut(&entry.client) {
            of_client.remove(other);
            if of_client.is_empty() {
                self.by_client.remove(&entry.client);
            }
        }
    }

    /// The stateids on file `fileid`.
    pub fn on_file(&self, fileid: u64) -> impl Iterator<Item = (&Other, &StateEntry)> {
        self.by_file
            .get(&fileid)
            .into_iter()
            .flatten()
            .filter_map(|o| self.entries.get(o).map(|e| (o, e)))
    }

    /// How many stateids `client` holds.
    pub fn count_of(&self, client: ClientId) -> usize {
        self.by_client.get(&client).map_or(0, HashSet::len)
    }

    /// Removes every stateid of `client`, returning their entries.
    pub fn remove_client(&mut self, client: ClientId) -> Vec<StateEntry> {
        let others = self.by_client.remove(&client).unwrap_or_default();
        others
            .iter()
            .filter_map(|other| self.remove(other))
            .collect()
    }
}

impl std::ops::Index<&Other> for Stateids {
    type Output = StateEntry;

    fn index(&self, other: &Other) -> &StateEntry {
        &self.entries[other]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::state::StateKind;

    fn entry(client: ClientId, fileid: u64) -> StateEntry {
        StateEntry {
            client,
            fileid,
            seqid: 1,
            kind: StateKind::Delegation {
                write: false,
                recalled: false,
            },
        }
    }

    fn other(n: u8) -> Other {
        [n; 12]
    }

    #[test]
    fn the_indexes_follow_inserts_and_removals() {
        let mut ids = Stateids::default();
        ids.insert(other(1), entry(7, 100));
        ids.insert(other(2), entry(7, 200));
        ids.insert(other(3), entry(8, 100));
        let on_100: HashSet<Other> = ids.on_file(100).map(|(o, _)| *o).collect();
        assert_eq!(on_100, HashSet::from([other(1), other(3)]));
        assert_eq!(
            (ids.count_of(7), ids.count_of(8), ids.count_of(9)),
            (2, 1, 0)
        );

        assert_eq!(ids.remove(&other(1)).map(|e| e.fileid), Some(100));
        assert_eq!(ids.remove(&other(1)), None);
        assert_eq!(ids.on_file(100).count(), 1);
        assert_eq!(ids.count_of(7), 1);

        let gone = ids.remove_client(7);
        assert_eq!(gone.len(), 1);
        assert_eq!(ids.on_file(200).count(), 0);
        assert_eq!(ids.count_of(7), 0);
        assert_eq!(ids.len(), 1);
        ids.remove(&other(3));
        assert!(ids.is_empty());
        assert!(ids.by_file.is_empty() && ids.by_client.is_empty());
    }
}

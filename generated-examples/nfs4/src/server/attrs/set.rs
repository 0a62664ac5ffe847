//! Attribute sets: a `bitmap4` read into a fixed-size set of attribute numbers.

use super::*;

/// A `bitmap4` as a set of attribute numbers (RFC 5661 section 3.2: bit `n % 32` of word
/// `n / 32` stands for attribute `n`).
///
/// Fixed-size: attributes below [`AttrSet::LIMIT`] are held exactly; any bit at or beyond it
/// (a hostile or future bitmap) is remembered as one element "beyond the limit"
/// ([`exceeds_limit`](Self::exceeds_limit)), which no server-side set contains, so a set with
/// it is never a subset of [`supported`] and an intersection with [`supported`] drops it. The
/// set operations treat it as that one extra element.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AttrSet {
    pub(super) words: [u32; AttrSet::WORDS],
    pub(super) beyond: bool,
}

impl AttrSet {
    /// Bitmap words held exactly.
    pub const WORDS: usize = 8;

    /// Attribute numbers below this are held exactly (NFSv4.1 defines up to 75, NFSv4.2 a few
    /// more).
    pub const LIMIT: u32 = (AttrSet::WORDS * 32) as u32;

    /// The empty set.
    pub const EMPTY: AttrSet = AttrSet {
        words: [0; AttrSet::WORDS],
        beyond: false,
    };

    /// The empty set.
    pub const fn new() -> Self {
        Self::EMPTY
    }

    /// The set of `attrs`; numbers at or beyond [`LIMIT`](Self::LIMIT) set
    /// [`exceeds_limit`](Self::exceeds_limit).
    pub const fn from_attrs(attrs: &[u32]) -> Self {
        let mut set = Self::EMPTY;
        let mut i = 0;
        while i < attrs.len() {
            set = set.with(attrs[i]);
            i += 1;
        }
        set
    }

    /// The set a `bitmap4` stands for. Words past [`WORDS`](Self::WORDS) that are not zero set
    /// [`exceeds_limit`](Self::exceeds_limit); trailing zero words mean nothing.
    pub fn from_bitmap(bitmap: &[u32]) -> Self {
        let mut set = Self::EMPTY;
        for (i, &word) in bitmap.iter().enumerate() {
            match set.words.get_mut(i) {
                Some(slot) => *slot = word,
                None => set.beyond |= word != 0,
            }
        }
        set
    }

    /// The `bitmap4` of this set, without trailing zero words (they would say nothing).
    /// Beyond-the-limit membership cannot be written and is left out.
    pub fn to_bitmap(&self) -> Bitmap4 {
        self.words[..self.word_count()].to_vec()
    }

    /// Words up to and including the last non-zero one.
    pub(super) fn word_count(&self) -> usize {
        self.words
            .iter()
            .rposition(|&w| w != 0)
            .map_or(0, |last| last + 1)
    }

    /// `self` with `attr` added.
    pub(super) const fn with(mut self, attr: u32) -> Self {
        if attr < Self::LIMIT {
            self.words[(attr / 32) as usize] |= 1 << (attr % 32);
        } else {
            self.beyond = true;
        }
        self
    }

    /// Whether `attr` is in the set (always false at or beyond [`LIMIT`](Self::LIMIT)).
    pub const fn contains(&self, attr: u32) -> bool {
        attr < Self::LIMIT && self.words[(attr / 32) as usize] & (1 << (attr % 32)) != 0
    }

    /// Adds `attr`; true if it was not there. A number at or beyond [`LIMIT`](Self::LIMIT) sets
    /// [`exceeds_limit`](Self::exceeds_limit) and returns false.
    pub fn insert(&mut self, attr: u32) -> bool {
        let added = attr < Self::LIMIT && !self.contains(attr);
        *self = self.with(attr);
        added
    }

    /// Removes `attr`; true if it was there.
    pub fn remove(&mut self, attr: u32) -> bool {
        let present = self.contains(attr);
        if present {
            self.words[(attr / 32) as usize] &= !(1 << (attr % 32));
        }
        present
    }

    /// Whether the bitmap this set came from had bits at or beyond [`LIMIT`](Self::LIMIT).
    pub const fn exceeds_limit(&self) -> bool {
        self.beyond
    }

    /// The attribute numbers, in increasing order (those below [`LIMIT`](Self::LIMIT)).
    pub fn iter(&self) -> Iter {
        Iter {
            words: self.words,
            word: 0,
        }
    }

    /// Attributes in both sets.
    pub const fn intersection(&self, other: &AttrSet) -> AttrSet {
        let mut out = Self::EMPTY;
        let mut i = 0;
        while i < Self::WORDS {
            out.words[i] = self.words[i] & other.words[i];
            i += 1;
        }
        out.beyond = self.beyond && other.beyond;
        out
    }

    /// Attributes in either set.
    pub const fn union(&self, other: &AttrSet) -> AttrSet {
        let mut out = Self::EMPTY;
        let mut i = 0;
        while i < Self::WORDS {
            out.words[i] = self.words[i] | other.words[i];
            i += 1;
        }
        out.beyond = self.beyond || other.beyond;
        out
    }

    /// Attributes in `self` and not in `other`.
    pub const fn difference(&self, other: &AttrSet) -> AttrSet {
        let mut out = Self::EMPTY;
        let mut i = 0;
        while i < Self::WORDS {
            out.words[i] = self.words[i] & !other.words[i];
            i += 1;
        }
        out.beyond = self.beyond && !other.beyond;
        out
    }

    /// Whether every attribute of `self` is in `other`.
    pub const fn is_subset(&self, other: &AttrSet) -> bool {
        self.difference(other).is_empty()
    }

    /// Whether the set has no attribute at all (not even one beyond the limit).
    pub const fn is_empty(&self) -> bool {
        let mut i = 0;
        while i < Self::WORDS {
            if self.words[i] != 0 {
                return false;
            }
            i += 1;
        }
        !self.beyond
    }

    /// The number of attributes below [`LIMIT`](Self::LIMIT).
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }
}

impl core::fmt::Debug for AttrSet {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut set = f.debug_set();
        set.entries(self.iter());
        if self.beyond {
            set.entry(&format_args!("{}..", Self::LIMIT));
        }
        set.finish()
    }
}

impl FromIterator<u32> for AttrSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        iter.into_iter().fold(Self::EMPTY, Self::with)
    }
}

impl IntoIterator for &AttrSet {
    type Item = u32;
    type IntoIter = Iter;

    fn into_iter(self) -> Iter {
        self.iter()
    }
}

/// The attribute numbers of an [`AttrSet`], in increasing order.
#[derive(Debug, Clone)]
pub struct Iter {
    /// The bits not yet returned.
    words: [u32; AttrSet::WORDS],
    /// The first word that may still have bits.
    word: usize,
}

impl Iterator for Iter {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        while let Some(bits) = self.words.get_mut(self.word) {
            if *bits != 0 {
                let bit = bits.trailing_zeros();
                *bits &= *bits - 1;
                return Some(self.word as u32 * 32 + bit);
            }
            self.word += 1;
        }
        None
    }
}

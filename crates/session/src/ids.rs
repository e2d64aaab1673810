//! [`IdMap`]: every input id or call id a session ever recorded, held compactly.
//!
//! A session must refuse a second input with an id it already recorded and a second call
//! with an id the model already used, for its whole life, also after a compaction has
//! dropped the text of those turns. A `HashMap<String, _>` spends two allocations and ~70
//! bytes on each 13-byte id; this keeps the ids back to back in one buffer (an interner) and
//! the values in a `Vec`, about a third of that, and compares ids exactly (no digests).

use string_interner::StringInterner;
use string_interner::backend::StringBackend;
use string_interner::symbol::{Symbol, SymbolUsize};

/// Ids mapped to a value each (the seq that recorded an input, the index of a call).
#[derive(Clone)]
pub struct IdMap<V> {
    ids: StringInterner<StringBackend<SymbolUsize>>,
    /// Value of the id whose symbol has index `i`.
    values: Vec<V>,
}

impl<V> Default for IdMap<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V> IdMap<V> {
    pub fn new() -> Self {
        IdMap {
            ids: StringInterner::new(),
            values: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    pub fn get(&self, id: &str) -> Option<&V> {
        self.ids.get(id).map(|s| &self.values[s.to_usize()])
    }

    pub fn contains_key(&self, id: &str) -> bool {
        self.ids.get(id).is_some()
    }

    /// Records `id` with `value`; an id already present keeps its first value (replay checks
    /// refuse duplicates before they are applied, so this never happens on a valid log).
    pub fn insert(&mut self, id: &str, value: V) {
        let sym = self.ids.get_or_intern(id).to_usize();
        if sym == self.values.len() {
            self.values.push(value);
        }
    }

    /// Every id with its value, in the order they were first recorded.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.ids
            .iter()
            .map(move |(s, id)| (id, &self.values[s.to_usize()]))
    }
}

impl<V: PartialEq> PartialEq for IdMap<V> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().all(|(id, v)| other.get(id) == Some(v))
    }
}

impl<V: Eq> Eq for IdMap<V> {}

impl<V: std::fmt::Debug> std::fmt::Debug for IdMap<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_each_id_once_and_keeps_the_first_value() {
        let mut m = IdMap::new();
        m.insert("a", 1u64);
        m.insert("bb", 2);
        m.insert("a", 3);
        assert_eq!(m.len(), 2);
        assert_eq!(m.get("a"), Some(&1));
        assert_eq!(m.get("bb"), Some(&2));
        assert_eq!(m.get("b"), None);
        assert!(m.contains_key("bb") && !m.contains_key(""));
        let mut other = IdMap::new();
        other.insert("bb", 2);
        other.insert("a", 1);
        assert_eq!(m, other, "equal as maps, whatever the order");
        other.insert("c", 4);
        assert_ne!(m, other);
    }
}

//! The dedupe map of a cleaning pass: key → offset of its latest record in the dirty part.
//!
//! Its memory is fixed up front ([`OffsetMap::with_budget`]): every slot costs
//! [`SLOT_COST`] bytes plus its key's bytes, which are kept so that a lookup compares the
//! full key, not only its 64-bit hash. Two keys with one hash share a slot that is then
//! marked collided, and every record with that hash is kept: a collision costs space, never
//! a record that is still the latest of its key.

use std::collections::HashMap;
use std::hash::Hasher;

/// Bytes charged per slot (hash map entry, slot and bookkeeping).
pub const SLOT_COST: usize = 48;

struct Slot {
    offset: u64,
    key_at: u32,
    key_len: u32,
    collided: bool,
}

/// What the map knows about a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Latest {
    /// The key has no record in the mapped range.
    Unknown,
    /// The offset of the key's latest record in the mapped range.
    At(u64),
    /// Another key shares the hash: keep every record of it.
    Collided,
}

/// A bounded key → latest-offset map.
pub struct OffsetMap {
    slots: HashMap<u64, Slot>,
    keys: Vec<u8>,
    budget: usize,
    hash: fn(&[u8]) -> u64,
}

fn sip_hash(key: &[u8]) -> u64 {
    // Fixed keys: the same hash in every process (nothing is persisted, but tests replay).
    let mut hasher = std::hash::DefaultHasher::new();
    hasher.write(key);
    hasher.finish()
}

impl OffsetMap {
    /// An empty map using at most `budget` bytes (at most 4 GiB of keys).
    pub fn with_budget(budget: usize) -> Self {
        Self::with_hasher(budget, sip_hash)
    }

    /// Like [`OffsetMap::with_budget`] with another hash function (tests force collisions).
    pub fn with_hasher(budget: usize, hash: fn(&[u8]) -> u64) -> Self {
        OffsetMap {
            slots: HashMap::new(),
            keys: Vec::new(),
            budget: budget.min(u32::MAX as usize),
            hash,
        }
    }

    /// Bytes in use.
    pub fn used_bytes(&self) -> usize {
        self.slots.len() * SLOT_COST + self.keys.len()
    }

    /// Number of slots (distinct hashes).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when nothing is mapped.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Whether `key` could be put without passing the budget.
    pub fn has_room_for(&self, key: &[u8]) -> bool {
        self.slots.contains_key(&(self.hash)(key))
            || self.used_bytes() + SLOT_COST + key.len() <= self.budget
    }

    /// Records `offset` as the latest record of `key` (callers put offsets in increasing
    /// order). Returns false, changing nothing, when a new slot would pass the budget.
    pub fn put(&mut self, key: &[u8], offset: u64) -> bool {
        let hash = (self.hash)(key);
        if let Some(slot) = self.slots.get_mut(&hash) {
            let stored = &self.keys[slot.key_at as usize..][..slot.key_len as usize];
            if stored == key {
                slot.offset = slot.offset.max(offset);
            } else {
                slot.collided = true;
            }
            return true;
        }
        if self.used_bytes() + SLOT_COST + key.len() > self.budget {
            return false;
        }
        let key_at = self.keys.len() as u32;
        self.keys.extend_from_slice(key);
        self.slots.insert(
            hash,
            Slot {
                offset,
                key_at,
                key_len: key.len() as u32,
                collided: false,
            },
        );
        true
    }

    /// The latest offset of `key` in the mapped range.
    pub fn latest(&self, key: &[u8]) -> Latest {
        match self.slots.get(&(self.hash)(key)) {
            None => Latest::Unknown,
            Some(slot) if slot.collided => Latest::Collided,
            Some(slot) => {
                let stored = &self.keys[slot.key_at as usize..][..slot.key_len as usize];
                if stored == key {
                    Latest::At(slot.offset)
                } else {
                    // Same hash, another key, seen only outside the mapped range.
                    Latest::Unknown
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn constant_hash(_: &[u8]) -> u64 {
        7
    }

    #[test]
    fn latest_offset_wins_and_unknown_keys_are_unknown() {
        let mut map = OffsetMap::with_budget(1 << 20);
        assert!(map.put(b"a", 1));
        assert!(map.put(b"b", 2));
        assert!(map.put(b"a", 5));
        assert_eq!(map.latest(b"a"), Latest::At(5));
        assert_eq!(map.latest(b"b"), Latest::At(2));
        assert_eq!(map.latest(b"c"), Latest::Unknown);
    }

    #[test]
    fn colliding_keys_are_kept_conservatively() {
        let mut map = OffsetMap::with_hasher(1 << 20, constant_hash);
        assert!(map.put(b"a", 1));
        // A key sharing the hash but never put is not mistaken for the stored one.
        assert_eq!(map.latest(b"z"), Latest::Unknown);
        assert!(map.put(b"b", 2));
        assert_eq!(map.latest(b"a"), Latest::Collided);
        assert_eq!(map.latest(b"b"), Latest::Collided);
    }

    #[test]
    fn the_budget_bounds_the_map() {
        let mut map = OffsetMap::with_budget(2 * SLOT_COST + 2);
        assert!(map.put(b"a", 1));
        assert!(map.put(b"b", 2));
        assert!(!map.put(b"c", 3), "a third slot passes the budget");
        assert!(map.put(b"a", 4), "an existing key still updates");
        assert!(map.used_bytes() <= 2 * SLOT_COST + 2);
        assert_eq!(map.latest(b"c"), Latest::Unknown);
    }
}

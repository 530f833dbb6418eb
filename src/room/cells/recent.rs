//! [`RecentKeys`]: the identities of a room's last committed commands, kept by its cell, so a
//! retry or a duplicate of one of them is answered from the command log before its batch is
//! decided — never by a transaction the database refuses over the command log's unique key,
//! which the rest of the batch would have to be decided and written again after (SPEC §13.1:
//! a batch shares no fate over one caller's duplicate).
//!
//! Only keys of commits that landed are kept, and a logged command stays logged, so the memory
//! is never wrong; it is bounded ([`RECENT_KEYS`]), and a key it forgot is still found by the
//! database's unique key, as before.

use std::collections::{HashSet, VecDeque};

use crate::store::CommandKey;

/// Committed command identities a room's cell remembers.
pub(in crate::room) const RECENT_KEYS: usize = 512;

/// The last [`RECENT_KEYS`] command identities committed in a room, oldest first.
#[derive(Debug, Default)]
pub(in crate::room) struct RecentKeys {
    order: VecDeque<CommandKey>,
    keys: HashSet<CommandKey>,
}

impl RecentKeys {
    /// True when `key` was committed lately.
    pub(in crate::room) fn contains(&self, key: &CommandKey) -> bool {
        self.keys.contains(key)
    }

    /// Remembers `key` as committed, forgetting the oldest beyond [`RECENT_KEYS`].
    pub(in crate::room) fn insert(&mut self, key: CommandKey) {
        if self.keys.insert(key.clone()) {
            self.order.push_back(key);
        }
        while self.order.len() > RECENT_KEYS {
            if let Some(old) = self.order.pop_front() {
                self.keys.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_the_last_keys_only() {
        let mut recent = RecentKeys::default();
        let key = |i: usize| CommandKey::new("user:a", format!("c{i}"));
        for i in 0..RECENT_KEYS + 10 {
            recent.insert(key(i));
        }
        assert!(!recent.contains(&key(9)), "the oldest are forgotten");
        assert!(recent.contains(&key(10)));
        assert!(recent.contains(&key(RECENT_KEYS + 9)));
        recent.insert(key(RECENT_KEYS + 9));
        assert_eq!(recent.order.len(), RECENT_KEYS, "a key is kept once");
        assert!(!recent.contains(&CommandKey::new("user:b", "c10")), "another caller's id is another key");
    }
}

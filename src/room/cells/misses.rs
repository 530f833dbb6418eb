//! Rooms found missing lately. A read or heartbeat of a room that does not exist is answered
//! from here for [`HOLD`] after the database said so, and leaves nothing else behind (no cell:
//! see [`crate::room::reads`]), so a flood of distinct unknown room ids costs
//! at most [`CAPACITY`] small entries (quick_cache's CLOCK-Pro eviction), and a flood of the
//! same unknown id costs one database read per [`HOLD`].
//!
//! [`HOLD`] is short because a room created on another node of a cluster becomes visible here
//! only when the entry ends. A room created on this node is forgotten at once
//! ([`Misses::forget`], after its CreateRoom), and a miss read from the database while a
//! CreateRoom committed is never remembered (the generation check of [`Misses::remember`]),
//! so the creator's next read always finds its room.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use quick_cache::sync::Cache;
use tokio::time::Instant;

use crate::domain::RoomId;

/// Longest a miss is remembered.
pub const HOLD: Duration = Duration::from_secs(5);
/// Most misses remembered (~150 bytes each: a room id is at most 64 bytes).
pub const CAPACITY: usize = 16_384;

/// The rooms found missing lately, each until its entry's end.
pub(in crate::room) struct Misses {
    cache: Cache<RoomId, Instant>,
    /// Bumped by every [`Misses::forget`]: a miss read before a bump may be older than the
    /// room's creation, so it is not remembered.
    generation: AtomicU64,
}

impl std::fmt::Debug for Misses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Misses").field("rooms", &self.cache.len()).finish()
    }
}

impl Default for Misses {
    fn default() -> Self {
        Self::with_capacity(CAPACITY)
    }
}

impl Misses {
    fn with_capacity(capacity: usize) -> Self {
        Self { cache: Cache::new(capacity), generation: AtomicU64::new(0) }
    }

    /// True when `room_id` was found missing within [`HOLD`] before `at`.
    pub(in crate::room) fn contains(&self, room_id: &RoomId, at: Instant) -> bool {
        let Some(until) = self.cache.get(room_id) else { return false };
        if at < until {
            return true;
        }
        // Only if still over: a fresh entry put meanwhile stays.
        self.cache.remove_if(room_id, |until| at >= *until);
        false
    }

    /// The generation to hand to [`Misses::remember`]: taken before the database is read.
    pub(in crate::room) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Remembers that the database said at `at` that `room_id` does not exist, in a read
    /// started at `generation`. Not remembered (or removed again at once) when a room was
    /// created here since: the read may predate that creation.
    pub(in crate::room) fn remember(&self, room_id: &RoomId, generation: u64, at: Instant) {
        if self.generation() != generation {
            return;
        }
        self.cache.insert(room_id.clone(), at + HOLD);
        // A `forget` between the check above and the insert has bumped the generation first,
        // and its removal may have run before the insert: undo it here.
        if self.generation() != generation {
            self.cache.remove(room_id);
        }
    }

    /// Forgets `room_id`'s miss: it was just created here.
    pub(in crate::room) fn forget(&self, room_id: &RoomId) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.cache.remove(room_id);
    }

    /// Misses remembered now.
    #[cfg(test)]
    pub(in crate::room) fn len(&self) -> usize {
        self.cache.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn room(id: &str) -> RoomId {
        RoomId::parse(id).expect("a valid room id")
    }

    #[test]
    fn a_miss_is_remembered_for_the_hold_then_forgotten() {
        let (misses, at) = (Misses::default(), Instant::now());
        misses.remember(&room("r"), misses.generation(), at);
        assert!(misses.contains(&room("r"), at + HOLD - Duration::from_millis(1)));
        assert!(!misses.contains(&room("r"), at + HOLD));
        assert_eq!(misses.len(), 0, "what is over is forgotten");
        assert!(!misses.contains(&room("other"), at));
    }

    #[test]
    fn creating_a_room_forgets_its_miss_at_once() {
        let (misses, at) = (Misses::default(), Instant::now());
        misses.remember(&room("r"), misses.generation(), at);
        misses.remember(&room("s"), misses.generation(), at);
        misses.forget(&room("r"));
        assert!(!misses.contains(&room("r"), at), "the created room is found at once");
        assert!(misses.contains(&room("s"), at), "another room's miss stays");
    }

    #[test]
    fn a_miss_read_while_a_room_was_created_is_not_remembered() {
        let (misses, at) = (Misses::default(), Instant::now());
        let generation = misses.generation();
        // The database said "missing", then the room was created here before the miss landed.
        misses.forget(&room("r"));
        misses.remember(&room("r"), generation, at);
        assert!(!misses.contains(&room("r"), at));
    }

    #[test]
    fn misses_are_bounded() {
        let (misses, at) = (Misses::with_capacity(100), Instant::now());
        for i in 0..10_000 {
            misses.remember(&room(&format!("r{i}")), misses.generation(), at);
        }
        assert!(misses.len() <= 200, "{} misses remembered", misses.len());
    }
}

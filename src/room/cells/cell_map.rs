//! The cell map: every cell of this process, by room, in [`SHARDS`] shards each behind its own
//! short lock, so no request waits on a walk over all rooms.
//!
//! The walks (the janitor's [`Cells::evict_idle`], the presence worker's
//! [`Cells::stale_members`]) copy one shard's cells under its lock, release it, decide outside
//! it, and take it again only to drop a cell, re-checking there that the cell is still the
//! map's and still idle. A cell is cloned only under its shard's lock, so "nobody else holds
//! it" is a count read under that lock.
//!
//! A read or heartbeat holds its cell as a [`ReadCell`]: when it ends, a cell holding no room
//! that nobody else uses goes at once, so reads of rooms that do not exist leave no cell.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex};

use super::cell::{Cell, CellState, lock};
use crate::domain::{RoomId, RoomStatus, UserId};

/// Shards of the map.
pub(in crate::room) const SHARDS: usize = 64;

type Shard = HashMap<RoomId, Arc<Cell>>;

/// Every cell of this process, by room.
#[derive(Debug)]
pub(in crate::room) struct Cells {
    shards: Box<[Mutex<Shard>]>,
    hasher: std::collections::hash_map::RandomState,
}

impl Default for Cells {
    fn default() -> Self {
        Self { shards: (0..SHARDS).map(|_| Mutex::default()).collect(), hasher: Default::default() }
    }
}

impl Cells {
    fn shard(&self, room_id: &RoomId) -> &Mutex<Shard> {
        let at = usize::try_from(self.hasher.hash_one(room_id) % SHARDS as u64).unwrap_or_default();
        &self.shards[at]
    }

    /// The room's cell, created when missing, marked used at `now_ms`.
    pub(in crate::room) fn get(&self, room_id: &RoomId, now_ms: i64) -> Arc<Cell> {
        let mut shard = lock(self.shard(room_id));
        let cell = shard.entry(room_id.clone()).or_default();
        cell.touch(now_ms);
        cell.clone()
    }

    /// The room's cell, if it has one (not created, not marked used).
    pub(in crate::room) fn find(&self, room_id: &RoomId) -> Option<Arc<Cell>> {
        lock(self.shard(room_id)).get(room_id).cloned()
    }

    /// Commands queued on a room's cell (0 when it has none).
    pub(in crate::room) fn queued(&self, room_id: &RoomId) -> usize {
        lock(self.shard(room_id)).get(room_id).map_or(0, |cell| cell.queued())
    }

    /// How many cells are in memory.
    pub(in crate::room) fn len(&self) -> usize {
        self.shards.iter().map(|shard| lock(shard).len()).sum()
    }

    /// Lets go of `cell`, a read's (or a finished drain task's) hold of `room_id`'s cell, and
    /// drops the cell from the map when it holds no room and nobody else holds it (the last
    /// reader of a room that does not exist, or the drain task that refused its commands,
    /// takes its cell away with it).
    pub(in crate::room) fn release(&self, room_id: &RoomId, cell: Arc<Cell>) {
        let mut shard = lock(self.shard(room_id));
        let ours = shard.get(room_id).is_some_and(|c| Arc::ptr_eq(c, &cell));
        // Let go under the lock, where clones are made: the count below is then exact.
        drop(cell);
        if ours && shard.get(room_id).is_some_and(|c| Arc::strong_count(c) == 1 && c.holds_nothing()) {
            shard.remove(room_id);
        }
    }

    /// One shard's cells, copied under its lock.
    fn copy(shard: &Mutex<Shard>) -> Vec<(RoomId, Arc<Cell>)> {
        lock(shard).iter().map(|(id, c)| (id.clone(), c.clone())).collect()
    }

    /// Open rooms loaded in memory and their members (with `joined_at_ms`) last seen at or
    /// before `cutoff_ms`. Presence is scanned without the rooms' locks; only a room with stale
    /// members is copied under its lock (O(1): the maps are persistent) for their join times.
    pub(in crate::room) async fn stale_members(&self, cutoff_ms: i64) -> Vec<(RoomId, Vec<(UserId, i64)>)> {
        let mut stale = Vec::new();
        for shard in &self.shards {
            for (room_id, cell) in Self::copy(shard) {
                let ids = cell.presence.stale(cutoff_ms);
                if ids.is_empty() {
                    continue;
                }
                let room = match &*cell.state.lock().await {
                    CellState::Room(room) if room.status == RoomStatus::Open => room.clone(),
                    _ => continue,
                };
                let members: Vec<(UserId, i64)> = ids
                    .into_iter()
                    .filter_map(|id| room.members.get(&id).map(|m| m.joined_at_ms).map(|at| (id, at)))
                    .collect();
                if !members.is_empty() {
                    stale.push((room_id, members));
                }
            }
        }
        stale
    }

    /// Drops cells nobody is using that hold no live presence: rooms that do not exist, closed
    /// rooms, rooms without members unused since `cutoff_ms`, and rooms not `owned` here.
    /// Returns how many. Walks shard by shard: each shard's lock is held to copy it and again
    /// to drop the cells found idle, never while deciding (`owned` runs without any lock).
    pub(in crate::room) fn evict_idle(&self, cutoff_ms: i64, owned: impl Fn(&RoomId) -> bool) -> usize {
        self.evict_idle_with(cutoff_ms, owned, || {})
    }

    /// [`Self::evict_idle`], calling `between` after each shard (tests check the locks there).
    fn evict_idle_with(
        &self,
        cutoff_ms: i64,
        owned: impl Fn(&RoomId) -> bool,
        mut between: impl FnMut(),
    ) -> usize {
        let mut evicted = 0;
        for shard in &self.shards {
            // Held by the map and by this copy only: nobody uses or waits on it.
            let idle: Vec<(RoomId, Arc<Cell>, bool)> = Self::copy(shard)
                .into_iter()
                .filter(|(_, cell)| Arc::strong_count(cell) == 2)
                .map(|(room_id, cell)| {
                    let owned = owned(&room_id);
                    (room_id, cell, owned)
                })
                .filter(|(_, cell, owned)| cell.evictable(cutoff_ms, *owned))
                .collect();
            if !idle.is_empty() {
                let mut map = lock(shard);
                for (room_id, cell, owned) in idle {
                    // Still the map's cell, still held by nobody else (clones are made under
                    // this lock), still idle.
                    let same = map.get(&room_id).is_some_and(|c| Arc::ptr_eq(c, &cell));
                    if same && Arc::strong_count(&cell) == 2 && cell.evictable(cutoff_ms, owned) {
                        map.remove(&room_id);
                        evicted += 1;
                    }
                }
            }
            between();
        }
        evicted
    }

    /// True when no shard's lock is held (by this thread or another).
    #[cfg(test)]
    fn unlocked(&self) -> bool {
        self.shards.iter().all(|shard| shard.try_lock().is_ok())
    }
}

/// A read's or heartbeat's hold of a room's cell; when dropped, the cell goes too if it holds
/// no room and nobody else holds it ([`Cells::release`]).
pub(in crate::room) struct ReadCell<'a> {
    cells: &'a Cells,
    room_id: &'a RoomId,
    cell: Option<Arc<Cell>>,
}

impl<'a> ReadCell<'a> {
    /// Holds `cell`, `room_id`'s cell in `cells`.
    pub(in crate::room) fn new(cells: &'a Cells, room_id: &'a RoomId, cell: Arc<Cell>) -> Self {
        Self { cells, room_id, cell: Some(cell) }
    }
}

impl std::ops::Deref for ReadCell<'_> {
    type Target = Cell;

    fn deref(&self) -> &Cell {
        self.cell.as_deref().unwrap_or_else(|| unreachable!("held until dropped"))
    }
}

impl Drop for ReadCell<'_> {
    fn drop(&mut self) {
        if let Some(cell) = self.cell.take() {
            self.cells.release(self.room_id, cell);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell as Counter;

    use super::*;
    use crate::domain::{Command, CommandContext, CommandId, RoomState, apply};

    fn room(id: &str) -> RoomId {
        RoomId::parse(id).expect("a valid room id")
    }

    /// An open room with `members`.
    fn open(room_id: &RoomId, members: &[&str]) -> RoomState {
        let ctx = CommandContext {
            room_id: room_id.clone(),
            command_id: CommandId::parse("c").unwrap(),
            request_id: "r".into(),
            now_ms: 1,
            max_admins: crate::domain::DEFAULT_MAX_ADMINS,
            seat_request_ttl_ms: crate::domain::DEFAULT_SEAT_REQUEST_TTL_MS,
            idle_close_after_ms: None,
        };
        let user = |id: &str| UserId::parse(id).unwrap();
        let create =
            Command::CreateRoom { owner_id: user("owner"), title: "t".into(), seats: Default::default() };
        let mut state = apply(None, &create, &ctx).unwrap().state;
        for member in members {
            state = apply(Some(&state), &Command::JoinRoom { user_id: user(member) }, &ctx).unwrap().state;
        }
        state
    }

    /// A cell of `room_id` loaded with `room` (`None`: missing), used at `now_ms`.
    fn loaded(cells: &Cells, room_id: &RoomId, room: Option<RoomState>, now_ms: i64) {
        let cell = cells.get(room_id, now_ms);
        let mut state = cell.state.try_lock().unwrap();
        cell.load(&mut state, room, now_ms);
    }

    #[test]
    fn the_janitor_decides_outside_the_map_lock_and_releases_it_between_shards() {
        let cells = Cells::default();
        for i in 0..500 {
            loaded(&cells, &room(&format!("missing-{i}")), None, 0);
        }
        let (busy, quiet, held) = (room("busy"), room("quiet"), room("held"));
        loaded(&cells, &busy, Some(open(&busy, &["alice"])), 0);
        loaded(&cells, &quiet, Some(open(&quiet, &[])), 0);
        let holder = cells.get(&held, 0);
        let (decided, walked) = (Counter::new(0), Counter::new(0));
        let evicted = cells.evict_idle_with(
            10,
            |_| {
                assert!(cells.unlocked(), "a cell is decided on while the map is locked");
                decided.set(decided.get() + 1);
                true
            },
            || {
                assert!(cells.unlocked(), "the walk holds the map between shards");
                walked.set(walked.get() + 1);
            },
        );
        assert_eq!(walked.get(), SHARDS);
        assert_eq!(decided.get(), 502, "every cell nobody holds is decided on");
        assert_eq!(evicted, 501, "the missing rooms and the unused room without members go");
        assert!(cells.find(&busy).is_some(), "a room with members stays");
        assert!(cells.find(&held).is_some_and(|c| Arc::ptr_eq(&c, &holder)), "a cell in use stays");
        assert_eq!(cells.len(), 2);
    }

    #[test]
    fn a_rooms_cell_is_dropped_once_no_longer_owned_and_kept_while_used() {
        let cells = Cells::default();
        let (mine, moved) = (room("mine"), room("moved"));
        loaded(&cells, &mine, Some(open(&mine, &[])), 100);
        loaded(&cells, &moved, Some(open(&moved, &["bob"])), 100);
        assert_eq!(cells.evict_idle(10, |room_id| room_id == &mine), 1);
        assert!(cells.find(&mine).is_some() && cells.find(&moved).is_none());
    }

    #[test]
    fn the_last_reader_of_a_missing_room_takes_its_cell_away() {
        let cells = Cells::default();
        let (gone, there) = (room("gone"), room("there"));
        let first = ReadCell::new(&cells, &gone, cells.get(&gone, 0));
        let second = ReadCell::new(&cells, &gone, cells.get(&gone, 0));
        {
            let mut state = first.state.try_lock().unwrap();
            first.load(&mut state, None, 0);
        }
        drop(first);
        assert_eq!(cells.len(), 1, "another reader still holds it");
        drop(second);
        assert_eq!(cells.len(), 0, "nothing lasting");
        let reader = ReadCell::new(&cells, &there, cells.get(&there, 0));
        {
            let mut state = reader.state.try_lock().unwrap();
            reader.load(&mut state, Some(open(&there, &[])), 0);
        }
        drop(reader);
        assert!(cells.find(&there).is_some(), "a room that exists keeps its cell");
    }
}

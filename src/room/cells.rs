//! Room cells: each room's state in memory behind its own lock, and its queue of commands.
//!
//! Commands of one room are queued on its cell and run by one drain task at a time (see
//! [`super::drain`]), which takes up to `max_commit_batch` queued commands and commits them
//! together; different rooms run concurrently. Cells are created on first use, loaded lazily
//! and dropped again when idle.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Mutex as AsyncMutex;

use super::decide::Queued;
use super::lane::Lane;
use super::last_seen::LastSeen;
use crate::domain::{Change, RoomId, RoomState, RoomStatus, UserId};

/// What a cell knows of its room.
#[derive(Debug, Default)]
pub(super) enum CellState {
    /// Not loaded from the database yet (or unloaded: it may be behind the database).
    #[default]
    Unloaded,
    /// Loaded: the room does not exist.
    NoRoom,
    /// Loaded: the room as committed.
    Room(RoomState),
}

impl CellState {
    /// The loaded state: the room, or none.
    pub(super) fn loaded(room: Option<RoomState>) -> Self {
        room.map_or(CellState::NoRoom, CellState::Room)
    }

    /// The room, when loaded and there.
    pub(super) fn room_mut(&mut self) -> Option<&mut RoomState> {
        match self {
            CellState::Room(room) => Some(room),
            CellState::NoRoom | CellState::Unloaded => None,
        }
    }
}

/// One room's cell.
#[derive(Debug, Default)]
pub(super) struct Cell {
    /// The room as committed; held by the drain task across a commit.
    pub(super) state: AsyncMutex<CellState>,
    /// When each member was last seen: outside `state`, so a heartbeat never waits for a
    /// commit. Follows the state: seeded when it loads, changed after a commit, cleared when
    /// it unloads (see [`LastSeen`]).
    pub(super) presence: LastSeen,
    queue: Mutex<Queue>,
    /// The room's publish lane: its IM events in order, sent by one lane task at a time.
    pub(super) lane: Lane,
    /// Last time (service clock, ms) a request used the cell.
    last_used_ms: AtomicI64,
    /// The room's lane may send: nothing of the room older than its next event is undelivered.
    /// False until checked against the database (a fresh cell does not know what earlier
    /// processes left undelivered) and after the lane gave events to the worker.
    pub(super) sync_clear: AtomicBool,
    /// The shard lease epoch the state was loaded under (0 without a cluster): under another
    /// epoch the room may have been changed by another owner in between, so it reloads.
    epoch: AtomicU64,
}

#[derive(Debug, Default)]
struct Queue {
    items: VecDeque<Queued>,
    /// A drain task is running for this cell.
    draining: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Cell {
    /// Queues a command; true when the caller must start the drain task (none is running).
    pub(super) fn enqueue(&self, item: Queued) -> bool {
        let mut queue = lock(&self.queue);
        queue.items.push_back(item);
        !std::mem::replace(&mut queue.draining, true)
    }

    /// Takes the next batch: up to `max` queued commands in order, skipping those whose caller
    /// has gone away, and stopping before a command id already in the batch (it then runs
    /// after, and is answered from the log). `None` when the queue is empty: the drain task
    /// ends, and the next command starts a new one.
    pub(super) fn next_batch(&self, max: usize) -> Option<Vec<Queued>> {
        let mut queue = lock(&self.queue);
        let mut batch: Vec<Queued> = Vec::new();
        while batch.len() < max {
            let Some(front) = queue.items.front() else { break };
            if batch.iter().any(|q| q.command_id == front.command_id) {
                break;
            }
            let item = queue.items.pop_front().unwrap_or_else(|| unreachable!("front exists"));
            if !item.reply.is_closed() {
                batch.push(item);
            }
        }
        if batch.is_empty() && queue.items.is_empty() {
            queue.draining = false;
            return None;
        }
        Some(batch)
    }

    /// After a drain task died (a panic): the commands still queued are answered "outcome
    /// unknown" (their reply channels close) and the next command starts a new drain task, so
    /// the room never hangs.
    pub(super) fn abandon(&self) {
        let mut queue = lock(&self.queue);
        queue.items.clear();
        queue.draining = false;
    }

    /// Unloads `state` (it may be behind the database): the next use reloads it, and the
    /// publish lane checks the database before it sends the room's next events (events of a
    /// commit that may have landed must not be overtaken).
    pub(super) fn unload(&self, state: &mut CellState) {
        *state = CellState::Unloaded;
        self.presence.clear();
        self.sync_clear.store(false, Ordering::Release);
    }

    /// Sets `state` to the room just loaded (`None`: it does not exist); every member is seen
    /// at `now_ms`, so a restart never evicts everyone at once.
    pub(super) fn load(&self, state: &mut CellState, room: Option<RoomState>, now_ms: i64) {
        self.presence.seed(self.epoch(), room.as_ref(), now_ms);
        *state = CellState::loaded(room);
    }

    /// Swaps a commit into memory: `state` becomes `room`, and presence follows the
    /// membership `changes` of the commit.
    pub(super) fn committed(
        &self,
        state: &mut CellState,
        room: Option<RoomState>,
        changes: &[Change],
        now_ms: i64,
    ) {
        *state = CellState::loaded(room);
        let room = match &*state {
            CellState::Room(room) => Some(room),
            CellState::NoRoom | CellState::Unloaded => None,
        };
        self.presence.committed(self.epoch(), room, changes, now_ms);
    }

    /// The shard lease epoch of the cell's state (0 without a cluster).
    pub(super) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Records that the room is served under the shard lease `epoch`; a state loaded under
    /// another epoch is unloaded (another owner may have changed the room in between).
    pub(super) fn enter_epoch(&self, epoch: u64, state: &mut CellState) {
        if self.epoch.swap(epoch, Ordering::AcqRel) != epoch {
            self.unload(state);
        }
    }

    fn queued(&self) -> usize {
        lock(&self.queue).items.len()
    }

    fn is_idle(&self) -> bool {
        let queue = lock(&self.queue);
        queue.items.is_empty() && !queue.draining && self.lane.is_idle()
    }
}

/// Every cell of this process, by room.
#[derive(Debug, Default)]
pub(super) struct Cells {
    map: Mutex<HashMap<RoomId, Arc<Cell>>>,
}

impl Cells {
    fn map(&self) -> MutexGuard<'_, HashMap<RoomId, Arc<Cell>>> {
        lock(&self.map)
    }

    /// The room's cell, created when missing, marked used at `now_ms`.
    pub(super) fn get(&self, room_id: &RoomId, now_ms: i64) -> Arc<Cell> {
        let mut map = self.map();
        let cell = map.entry(room_id.clone()).or_default();
        cell.last_used_ms.store(now_ms, Ordering::Relaxed);
        cell.clone()
    }

    /// The room's cell, if it has one (not created, not marked used).
    pub(super) fn find(&self, room_id: &RoomId) -> Option<Arc<Cell>> {
        self.map().get(room_id).cloned()
    }

    /// Commands queued on a room's cell (0 when it has none).
    pub(super) fn queued(&self, room_id: &RoomId) -> usize {
        self.map().get(room_id).map_or(0, |cell| cell.queued())
    }

    /// How many cells are in memory.
    pub(super) fn len(&self) -> usize {
        self.map().len()
    }

    /// Open rooms loaded in memory and their members (with `joined_at_ms`) last seen at or
    /// before `cutoff_ms`. Presence is scanned without the rooms' locks; only a room with stale
    /// members is copied under its lock (O(1): the maps are persistent) for their join times.
    pub(super) async fn stale_members(&self, cutoff_ms: i64) -> Vec<(RoomId, Vec<(UserId, i64)>)> {
        let cells: Vec<(RoomId, Arc<Cell>)> =
            self.map().iter().map(|(id, c)| (id.clone(), c.clone())).collect();
        let mut stale = Vec::new();
        for (room_id, cell) in cells {
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
        stale
    }

    /// Drops cells nobody is using that hold no live presence: rooms that do not exist, closed
    /// rooms, rooms without members unused since `cutoff_ms`, and rooms not `owned` here.
    /// Returns how many.
    pub(super) fn evict_idle(&self, cutoff_ms: i64, owned: impl Fn(&RoomId) -> bool) -> usize {
        let mut map = self.map();
        let before = map.len();
        map.retain(|room_id, cell| {
            // Only the map holds it (clones are made under this lock): nobody uses or waits on
            // it, and no drain task runs for it.
            if Arc::strong_count(cell) > 1 || !cell.is_idle() {
                return true;
            }
            let Ok(state) = cell.state.try_lock() else { return true };
            if !owned(room_id) {
                return false;
            }
            match &*state {
                CellState::Unloaded | CellState::NoRoom => false,
                CellState::Room(room) if room.status == RoomStatus::Closed => false,
                CellState::Room(room) => {
                    !room.members.is_empty() || cell.last_used_ms.load(Ordering::Relaxed) > cutoff_ms
                }
            }
        });
        before - map.len()
    }
}

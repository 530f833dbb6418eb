//! Room cells: each room's state in memory behind its own lock, and its queue of commands.
//!
//! Commands of one room are queued on its cell and run by one drain task at a time (see
//! [`crate::room::command::drain`]), which takes up to `max_commit_batch` queued commands and
//! commits them together; different rooms run concurrently. Cells are created on first use, loaded
//! lazily and dropped again when idle; the map of them is [`super::cell_map::Cells`].

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Mutex as AsyncMutex;

use super::recent::RecentKeys;
use crate::domain::{Change, RoomState, RoomStatus};
use crate::room::command::decide::Queued;
use crate::room::presence::last_seen::LastSeen;
use crate::room::publish::lane::Lane;

/// What a cell knows of its room.
#[derive(Debug, Default)]
pub(in crate::room) enum CellState {
    /// Not loaded from the database yet (or unloaded: it may be behind the database).
    #[default]
    Unloaded,
    /// Loaded: the room does not exist.
    NoRoom,
    /// Loaded: the room as committed (boxed: a room is large beside the other states).
    Room(Box<RoomState>),
}

impl CellState {
    /// The loaded state: the room, or none.
    pub(in crate::room) fn loaded(room: Option<RoomState>) -> Self {
        room.map_or(CellState::NoRoom, |room| CellState::Room(Box::new(room)))
    }

    /// The room, when loaded and there.
    pub(in crate::room) fn room_mut(&mut self) -> Option<&mut RoomState> {
        match self {
            CellState::Room(room) => Some(room),
            CellState::NoRoom | CellState::Unloaded => None,
        }
    }
}

/// One room's cell.
#[derive(Debug, Default)]
pub(in crate::room) struct Cell {
    /// The room as committed; held by the drain task across a commit.
    pub(in crate::room) state: AsyncMutex<CellState>,
    /// When each member was last seen: outside `state`, so a heartbeat never waits for a
    /// commit. Follows the state: seeded when it loads, changed after a commit, cleared when
    /// it unloads (see [`LastSeen`]).
    pub(in crate::room) presence: LastSeen,
    queue: Mutex<Queue>,
    /// The room's publish lane: its IM events in order, sent by one lane task at a time; and
    /// its route (who sends them: the lane or the worker) with the shard lease epoch the room
    /// is served under (0 without a cluster: under another epoch the room may have been changed
    /// by another owner in between, so the state reloads).
    pub(in crate::room) lane: Arc<Lane>,
    /// Last time (service clock, ms) a request used the cell.
    last_used_ms: AtomicI64,
    /// The identities of the room's last committed commands (a retry or a duplicate of one is
    /// answered from the log before its batch is decided).
    pub(in crate::room) recent: Mutex<RecentKeys>,
}

#[derive(Debug, Default)]
struct Queue {
    items: VecDeque<Queued>,
    /// A drain task is running for this cell.
    draining: bool,
}

/// Locks `m`, whether or not a holder panicked (the data guarded stays consistent).
pub(in crate::room) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Cell {
    /// Queues a command; true when the caller must start the drain task (none is running).
    pub(in crate::room) fn enqueue(&self, item: Queued) -> bool {
        let mut queue = lock(&self.queue);
        queue.items.push_back(item);
        !std::mem::replace(&mut queue.draining, true)
    }

    /// Takes the next batch: up to `max` queued commands in order, skipping those whose caller
    /// has gone away. An identical copy of a command already in the batch (the same caller,
    /// `command_id` and body) joins that command's answer instead of running; the same
    /// caller's `command_id` with another body stops the batch (it runs after, and is answered
    /// 409 from the log). Another caller's equal `command_id` is another command. `None` when
    /// the queue is empty: the drain task ends, and the next command starts a new one.
    pub(in crate::room) fn next_batch(&self, max: usize) -> Option<Vec<Queued>> {
        let mut queue = lock(&self.queue);
        let mut batch: Vec<Queued> = Vec::new();
        while batch.len() < max {
            let Some(front) = queue.items.front() else { break };
            let same =
                batch.iter().position(|q| q.command_id == front.command_id && q.caller == front.caller);
            if let Some(index) = same
                && batch[index].fingerprint != front.fingerprint
            {
                break;
            }
            let item = queue.items.pop_front().unwrap_or_else(|| unreachable!("front exists"));
            match same {
                Some(index) => batch[index].reply.take_copy(item.reply),
                None if !item.reply.is_closed() => batch.push(item),
                None => {}
            }
        }
        if batch.is_empty() && queue.items.is_empty() {
            queue.draining = false;
            return None;
        }
        Some(batch)
    }

    /// Splits `items` into the ones committed lately (a retry or a duplicate: answered from the
    /// log) and the rest, in order.
    pub(in crate::room) fn split_recent(&self, items: Vec<Queued>) -> (Vec<Queued>, Vec<Queued>) {
        let recent = lock(&self.recent);
        items.into_iter().partition(|item| recent.contains(&item.key()))
    }

    /// Remembers the identities of `items`, just committed.
    pub(in crate::room) fn remember_committed<'a>(&self, items: impl Iterator<Item = &'a Queued>) {
        let mut recent = lock(&self.recent);
        for item in items {
            recent.insert(item.key());
        }
    }

    /// After a drain task died (a panic): the commands still queued are answered "outcome
    /// unknown" (their reply channels close) and the next command starts a new drain task, so
    /// the room never hangs.
    pub(in crate::room) fn abandon(&self) {
        let mut queue = lock(&self.queue);
        queue.items.clear();
        queue.draining = false;
    }

    /// Unloads `state` (it may be behind the database): the next use reloads it, and the
    /// publish lane checks the database before it sends the room's next events (events of a
    /// commit that may have landed must not be overtaken).
    pub(in crate::room) fn unload(&self, state: &mut CellState) {
        *state = CellState::Unloaded;
        self.presence.clear();
        self.lane.route.to_worker();
    }

    /// Sets `state` to the room just loaded (`None`: it does not exist); every member is seen
    /// at `now_ms`, so a restart never evicts everyone at once.
    pub(in crate::room) fn load(&self, state: &mut CellState, room: Option<RoomState>, now_ms: i64) {
        self.presence.seed(self.epoch(), room.as_ref(), now_ms);
        *state = CellState::loaded(room);
    }

    /// Swaps a commit into memory: `state` becomes `room`, and presence follows the
    /// membership `changes` of the commit.
    pub(in crate::room) fn committed(
        &self,
        state: &mut CellState,
        room: Option<RoomState>,
        changes: &[Change],
        now_ms: i64,
    ) {
        *state = CellState::loaded(room);
        let room = match &*state {
            CellState::Room(room) => Some(&**room),
            CellState::NoRoom | CellState::Unloaded => None,
        };
        self.presence.committed(self.epoch(), room, changes, now_ms);
    }

    /// The shard lease epoch of the cell's state (0 without a cluster).
    pub(in crate::room) fn epoch(&self) -> u64 {
        self.lane.route.epoch()
    }

    /// Records that the room is served under the shard lease `epoch`; a state loaded under
    /// another epoch is unloaded (another owner may have changed the room in between).
    pub(in crate::room) fn enter_epoch(&self, epoch: u64, state: &mut CellState) {
        if self.lane.route.enter_epoch(epoch) {
            self.unload(state);
        }
    }

    /// Marks the cell used at `now_ms`.
    pub(in crate::room) fn touch(&self, now_ms: i64) {
        self.last_used_ms.store(now_ms, Ordering::Relaxed);
    }

    /// Commands queued on the cell.
    pub(in crate::room) fn queued(&self) -> usize {
        lock(&self.queue).items.len()
    }

    fn is_idle(&self) -> bool {
        let queue = lock(&self.queue);
        queue.items.is_empty() && !queue.draining && self.lane.is_idle()
    }

    /// True when the cell may be dropped (the caller has checked that nobody else holds it):
    /// nothing queued, draining or sending, its state not locked, and it holds no room, a
    /// closed room, or an open room without members unused since `cutoff_ms`; any idle cell
    /// of a room not `owned` here.
    pub(in crate::room) fn evictable(&self, cutoff_ms: i64, owned: bool) -> bool {
        if !self.is_idle() {
            return false;
        }
        let Ok(state) = self.state.try_lock() else { return false };
        if !owned {
            return true;
        }
        match &*state {
            CellState::Unloaded | CellState::NoRoom => true,
            CellState::Room(room) if room.status == RoomStatus::Closed => true,
            CellState::Room(room) => {
                room.members.is_empty() && self.last_used_ms.load(Ordering::Relaxed) <= cutoff_ms
            }
        }
    }

    /// True when the cell holds no room (not loaded, or loaded as missing) and is idle: a read
    /// that made it may drop it at once (the caller has checked that nobody else holds it).
    pub(in crate::room) fn holds_nothing(&self) -> bool {
        self.is_idle()
            && self
                .state
                .try_lock()
                .is_ok_and(|state| matches!(*state, CellState::Unloaded | CellState::NoRoom))
    }
}

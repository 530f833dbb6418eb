//! Room cells: each room's state in memory behind its own lock, so the commands of one room
//! run one at a time while different rooms run concurrently. Cells are created on first use,
//! loaded lazily by the pipeline, and dropped again when idle.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Mutex as AsyncMutex;

use crate::domain::{RoomId, RoomState, RoomStatus, UserId};

/// One room's cell: `None` until loaded, then the room (`None` inside: it does not exist).
#[derive(Debug, Default)]
pub(super) struct Cell {
    pub(super) state: AsyncMutex<Option<Option<RoomState>>>,
    /// Last time (service clock, ms) a request used the cell.
    last_used_ms: AtomicI64,
}

/// Every cell of this process, by room.
#[derive(Debug, Default)]
pub(super) struct Cells {
    map: Mutex<HashMap<RoomId, Arc<Cell>>>,
}

impl Cells {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<RoomId, Arc<Cell>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The room's cell, created when missing, marked used at `now_ms`.
    pub(super) fn get(&self, room_id: &RoomId, now_ms: i64) -> Arc<Cell> {
        let mut map = self.map();
        let cell = map.entry(room_id.clone()).or_default();
        cell.last_used_ms.store(now_ms, Ordering::Relaxed);
        cell.clone()
    }

    /// How many cells are in memory.
    pub(super) fn len(&self) -> usize {
        self.map().len()
    }

    /// Open rooms loaded in memory and their members (with `joined_at_ms`) whose last
    /// heartbeat is at or before `cutoff_ms`.
    pub(super) async fn stale_members(&self, cutoff_ms: i64) -> Vec<(RoomId, Vec<(UserId, i64)>)> {
        let cells: Vec<(RoomId, Arc<Cell>)> =
            self.map().iter().map(|(id, c)| (id.clone(), c.clone())).collect();
        let mut stale = Vec::new();
        for (room_id, cell) in cells {
            let guard = cell.state.lock().await;
            if let Some(Some(room)) = guard.as_ref() {
                let members: Vec<(UserId, i64)> = room
                    .stale_members(cutoff_ms)
                    .into_iter()
                    .filter_map(|u| room.members.get(&u).map(|m| (u, m.joined_at_ms)))
                    .collect();
                if room.status == RoomStatus::Open && !members.is_empty() {
                    stale.push((room_id, members));
                }
            }
        }
        stale
    }

    /// Drops cells nobody is using that hold no live presence: rooms that do not exist, closed
    /// rooms, and rooms without members unused since `cutoff_ms`. Returns how many.
    pub(super) fn evict_idle(&self, cutoff_ms: i64) -> usize {
        let mut map = self.map();
        let before = map.len();
        map.retain(|_, cell| {
            // Only the map holds it (clones are made under this lock): nobody uses or waits on it.
            if Arc::strong_count(cell) > 1 {
                return true;
            }
            let Ok(state) = cell.state.try_lock() else { return true };
            match state.as_ref() {
                None | Some(None) => false,
                Some(Some(room)) if room.status == RoomStatus::Closed => false,
                Some(Some(room)) => {
                    !room.members.is_empty() || cell.last_used_ms.load(Ordering::Relaxed) > cutoff_ms
                }
            }
        });
        before - map.len()
    }
}

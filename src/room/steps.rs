//! [`Steps`]: the cells and the steps a command goes through, shared by the service's handles
//! ([`super::service::RoomService`]) and the rooms' drain tasks ([`super::drain`]).

use std::sync::Arc;

use super::Clock;
use super::cell_map::Cells;
use super::cells::{Cell, CellState};
use super::commit::Commit;
use super::error::RoomError;
use super::history::History;
use super::misses::Misses;
use super::options::RoomOptions;
use super::pay::Payments;
use super::replay::Replay;
use super::sync_publish::SyncPublish;
use crate::domain::{RoomId, RoomState};

/// The cells and the steps a command goes through, each with its own data.
pub(super) struct Steps {
    pub(super) cells: Cells,
    /// Rooms found missing lately: reads and heartbeats of them leave no cell behind.
    pub(super) misses: Misses,
    pub(super) options: RoomOptions,
    pub(super) clock: Clock,
    /// Pays for gifts before they are queued.
    pub(super) payments: Arc<Payments>,
    /// Writes decided batches and loads rooms.
    pub(super) commit: Commit,
    /// Answers repeated command ids from the log.
    pub(super) replay: Replay,
    /// Publishes committed events in room order and marks them.
    pub(super) publish: SyncPublish,
    /// Reads the rooms' event history.
    pub(super) history: History,
}

impl Steps {
    /// The commit fence of the room while this node owns it (`None` without a cluster);
    /// unloads a cell loaded under another epoch (the room may have moved on elsewhere).
    pub(super) fn fence(
        &self,
        room_id: &RoomId,
        cell: &Cell,
        slot: &mut CellState,
    ) -> Result<Option<u64>, RoomError> {
        let fence = self.options.ownership.fence(room_id.as_str()).map_err(|_| RoomError::NotOwner)?;
        cell.enter_epoch(fence.unwrap_or(0), slot);
        Ok(fence)
    }

    /// Loads the cell's state from the database if it is not loaded yet (its presence seeded
    /// at load time); the room, if any.
    pub(super) async fn loaded<'a>(
        &self,
        room_id: &RoomId,
        cell: &Cell,
        slot: &'a mut CellState,
    ) -> Result<Option<&'a mut RoomState>, RoomError> {
        if let CellState::Unloaded = slot {
            let room = self.commit.load(room_id).await?;
            cell.load(slot, room, (self.clock)());
        }
        Ok(slot.room_mut())
    }
}

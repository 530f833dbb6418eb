//! [`Steps`]: the cells and the steps a command goes through, shared by the service's handles
//! ([`crate::room::service::RoomService`]) and the rooms' drain tasks ([`super::drain`]).

use std::sync::Arc;

use super::commit::Commit;
use super::pay::Payments;
use super::replay::Replay;
use crate::domain::{RoomId, RoomState};
use crate::room::cells::cell::{Cell, CellState};
use crate::room::cells::cell_map::Cells;
use crate::room::cells::misses::Misses;
use crate::room::error::RoomError;
use crate::room::history::History;
use crate::room::options::Clock;
use crate::room::options::RoomOptions;
use crate::room::publish::sync_publish::SyncPublish;

/// The cells and the steps a command goes through, each with its own data.
pub(in crate::room) struct Steps {
    pub(in crate::room) cells: Cells,
    /// Rooms found missing lately: reads and heartbeats of them leave no cell behind.
    pub(in crate::room) misses: Misses,
    pub(in crate::room) options: RoomOptions,
    pub(in crate::room) clock: Clock,
    /// Pays for gifts before they are queued.
    pub(in crate::room) payments: Arc<Payments>,
    /// Writes decided batches and loads rooms.
    pub(in crate::room) commit: Commit,
    /// Answers repeated command ids from the log.
    pub(in crate::room) replay: Replay,
    /// Publishes committed events in room order and marks them.
    pub(in crate::room) publish: SyncPublish,
    /// Reads the rooms' event history.
    pub(in crate::room) history: History,
}

impl Steps {
    /// The commit fence of the room while this node owns it (`None` without a cluster);
    /// unloads a cell loaded under another epoch (the room may have moved on elsewhere).
    pub(in crate::room) fn fence(
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
    pub(in crate::room) async fn loaded<'a>(
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

//! A room's drain task ([`Drain`]), where the service runs its steps: while commands are queued on
//! the cell, take up to `max_commit_batch` of them, decide them in order on the committed state
//! ([`Decide`](super::decide::Decide)), ask the hand-off who sends their events ([`Route`]), commit
//! them in ONE transaction ([`super::commit::Commit`]), swap memory, and hand them to the publish
//! step ([`crate::room::publish::sync_publish::SyncPublish`]; what has nothing to publish is
//! answered at once). The task is here; a batch's rounds from its decision to its answers (reload,
//! repeats, bisection) are [`rounds`]'.
//!
//! The task is spawned, so a caller that goes away never interrupts a commit: its command is
//! skipped if it was still queued, and runs to the end otherwise.

mod rounds;

use std::sync::Arc;

use super::decide::{Answer, Queued};
use super::steps::Steps;
use crate::domain::RoomId;
use crate::room::cells::cell::{Cell, CellState};
use crate::room::error::RoomError;
use crate::room::publish::handoff::Route;

/// The drain task of one room's cell; one per cell at a time.
pub(in crate::room) struct Drain {
    steps: Arc<Steps>,
    room_id: RoomId,
    cell: Arc<Cell>,
}

impl Drain {
    /// The drain task of `cell`, the cell of `room_id`.
    pub(in crate::room) fn new(steps: Arc<Steps>, room_id: RoomId, cell: Arc<Cell>) -> Self {
        Self { steps, room_id, cell }
    }

    /// Runs the cell's queue dry. A cell left holding no room (commands sent to a room that
    /// does not exist) goes with the task, as a read's does: unknown rooms leave nothing behind
    /// in memory.
    pub(in crate::room) async fn run(self) {
        self.run_dry().await;
        // The task's own reference goes with it, so the map can tell whether anyone else holds
        // the cell.
        let Drain { steps, room_id, cell } = self;
        steps.cells.release(&room_id, cell);
    }

    async fn run_dry(&self) {
        let cell = &self.cell;
        let _abandon = AbandonOnPanic(cell);
        loop {
            let mut guard = cell.state.lock().await;
            let Some(batch) = cell.next_batch(self.steps.options.max_commit_batch) else { return };
            if batch.is_empty() {
                continue;
            }
            // Before anything of the batch reaches the database: the lane's deadline for its
            // events starts here, never after the rows' claim guard (which starts at their INSERT).
            let started = tokio::time::Instant::now();
            let (answers, route) = self.run_batch(&mut guard, batch).await;
            drop(guard);
            self.steps.publish.publish(&cell.lane, answers, route, started).await;
        }
    }

    /// Decides and commits `items` on the room; every item gets an answer. A version conflict
    /// (another node moved the room on) reloads and decides the batch again, once; commands
    /// found already logged are answered from the log and the rest decided again. Also says
    /// who sends the batch's IM events (on the worker's route they were committed claimable at
    /// once).
    async fn run_batch(&self, slot: &mut CellState, items: Vec<Queued>) -> (Vec<Answer>, Route) {
        // The epoch fence first: entering a new epoch unloads the cell and sends its room to
        // the worker, so the route is decided under the epoch the batch commits under.
        if let Err(error) = self.steps.fence(&self.room_id, &self.cell, slot) {
            return (failed(items, error), Route::Worker);
        }
        let route = self.steps.publish.handoff().route_for_commit(&self.room_id, &self.cell.lane.route).await;
        (self.decide_and_commit(slot, items, route).await, route)
    }
}

/// Clears the cell's queue if the drain task unwinds, so the room takes commands again.
struct AbandonOnPanic<'a>(&'a Cell);

impl Drop for AbandonOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.abandon();
        }
    }
}

/// Every one of `items` answered with `error`.
fn failed(items: Vec<Queued>, error: RoomError) -> Vec<Answer> {
    items.into_iter().map(|item| (item, Err(error.clone()))).collect()
}

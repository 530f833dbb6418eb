//! A room's drain task ([`Drain`]), where the service runs its steps: while commands are
//! queued on the cell, take up to `max_commit_batch` of them, decide them in order on the
//! committed state ([`Decide`]), ask the hand-off who sends their events ([`Route`]), commit
//! them in ONE transaction ([`super::commit::Commit`]), swap memory, and hand them to the
//! publish step ([`super::sync_publish::SyncPublish`]; what has nothing to publish is answered
//! at once).
//!
//! The task is spawned, so a caller that goes away never interrupts a commit: its command is
//! skipped if it was still queued, and runs to the end otherwise.

use std::sync::Arc;

use super::cells::{Cell, CellState};
use super::commit::Written;
use super::decide::{Answer, Decide, Decision, Queued};
use super::error::RoomError;
use super::handoff::Route;
use super::steps::Steps;
use crate::domain::{RoomId, RoomState};

/// The drain task of one room's cell; one per cell at a time.
pub(super) struct Drain {
    steps: Arc<Steps>,
    room_id: RoomId,
    cell: Arc<Cell>,
}

impl Drain {
    /// The drain task of `cell`, the cell of `room_id`.
    pub(super) fn new(steps: Arc<Steps>, room_id: RoomId, cell: Arc<Cell>) -> Self {
        Self { steps, room_id, cell }
    }

    /// Runs the cell's queue dry. A cell left holding no room (commands sent to a room that
    /// does not exist) goes with the task, as a read's does: unknown rooms leave nothing behind
    /// in memory.
    pub(super) async fn run(self) {
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
            return (fail_all(Vec::new(), items, error), Route::Worker);
        }
        let route = self.steps.publish.handoff().route_for_commit(&self.room_id, &self.cell.lane.route).await;
        (self.decide_and_commit(slot, items, route).await, route)
    }

    async fn decide_and_commit(
        &self,
        slot: &mut CellState,
        mut items: Vec<Queued>,
        route: Route,
    ) -> Vec<Answer> {
        let (steps, room_id, cell) = (&*self.steps, &self.room_id, &*self.cell);
        let claim_after = steps.publish.handoff().claim_after(route);
        let mut answers: Vec<Answer> = Vec::with_capacity(items.len());
        let mut reloaded = false;
        while !items.is_empty() {
            let fence = match steps.fence(room_id, cell, slot) {
                Ok(fence) => fence,
                Err(e) => return fail_all(answers, items, e),
            };
            let state = match steps.loaded(room_id, cell, slot).await {
                Ok(state) => state.cloned(),
                Err(e) => return fail_all(answers, items, e),
            };
            let cell_version = state.as_ref().map(|s| s.version);
            let repeats;
            (repeats, items) = cell.split_recent(items);
            for item in repeats {
                let room = state.as_ref().map(RoomState::snapshot);
                let answer = steps.replay.answer(&item.key(), &item.fingerprint, None, room).await;
                answers.push((item, answer));
            }
            if items.is_empty() {
                return answers;
            }
            let plan = Decide::new(room_id, (steps.clock)()).batch(state.as_ref(), &items);
            if plan.writes_nothing() {
                // Nothing to write: every command was refused (or skipped) on the cell's state,
                // which another node may have moved on. Reload and decide again, once.
                if !reloaded {
                    match steps.commit.is_stale(room_id, cell_version).await {
                        Ok(true) => {
                            reloaded = true;
                            cell.unload(slot);
                            continue;
                        }
                        Ok(false) => {}
                        Err(e) => return fail_all(answers, items, e.into()),
                    }
                }
                return self.settle(answers, items, plan.decisions, state).await;
            }
            let written = {
                let _spans = commit_spans(&items);
                steps.commit.write(room_id, &items, &plan, fence, claim_after).await
            };
            match written {
                Written::Committed => {
                    cell.remember_committed(plan.logged.iter().filter_map(|&i| items.get(i)));
                    cell.committed(slot, plan.state.clone(), &plan.changes, (steps.clock)());
                    return self.settle(answers, items, plan.decisions, plan.state).await;
                }
                Written::Repeats(logged) => {
                    // Answer the logged ones from the log, decide the others again without them.
                    let room = state.as_ref().map(|s| s.snapshot());
                    let (repeats, rest): (Vec<Queued>, Vec<Queued>) = items
                        .into_iter()
                        .partition(|q| logged.iter().any(|c| c.belongs_to(&q.key(), &q.fingerprint)));
                    for item in repeats {
                        let answer =
                            steps.replay.answer(&item.key(), &item.fingerprint, None, room.clone()).await;
                        answers.push((item, answer));
                    }
                    items = rest;
                }
                Written::Moved if !reloaded => {
                    tracing::info!(room_id = %room_id, "Room changed on another node; reloading");
                    reloaded = true;
                    cell.unload(slot);
                }
                Written::Moved => return fail_all(answers, items, Written::moved_twice()),
                Written::Failed { error, unload: false } if items.len() > 1 && shares_no_fate(&error) => {
                    // The database refused the batch over one command's data (or a command id
                    // in use concurrently): bisect, halves in order, so only the culprit fails
                    // and it costs the batch about 2·log2(n) transactions, never one a command.
                    let second = items.split_off(items.len() / 2);
                    for half in [items, second] {
                        answers.extend(Box::pin(self.decide_and_commit(slot, half, route)).await);
                    }
                    return answers;
                }
                Written::Failed { error, unload } => {
                    if unload {
                        cell.unload(slot);
                    }
                    return fail_all(answers, items, refused_data(error));
                }
            }
        }
        answers
    }

    /// Answers a decided batch: the commands done, and the refused ones after asking the
    /// command log whether they are repeats (a retried CreateRoom is refused by the room it
    /// created, and answers its original success).
    async fn settle(
        &self,
        mut answers: Vec<Answer>,
        items: Vec<Queued>,
        decisions: Vec<Decision>,
        state: Option<RoomState>,
    ) -> Vec<Answer> {
        let room = state.as_ref().map(|s| s.snapshot());
        for (item, decision) in items.into_iter().zip(decisions) {
            let answer = match decision {
                Decision::Done(committed) => Ok(committed),
                Decision::Refused(refused) => {
                    self.steps
                        .replay
                        .answer(&item.key(), &item.fingerprint, Some(refused), room.clone())
                        .await
                }
            };
            answers.push((item, answer));
        }
        answers
    }
}

/// A `commit` span in each sampled command's trace for the time its batch's transaction takes
/// (one transaction: the spans of its commands start and end together).
fn commit_spans(items: &[Queued]) -> Vec<tracing::Span> {
    let batch = items.len();
    items
        .iter()
        .filter_map(|item| item.trace.as_ref())
        .map(|trace| tracing::info_span!(parent: trace.span(), "commit", batch))
        .collect()
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

/// True when a batch's failure may be one command's alone (SPEC §13.1: a batch shares no fate
/// over data): the database answered and refused it before its COMMIT, or two commands of the
/// batch are one command. Not when the database is lost or unavailable.
fn shares_no_fate(error: &RoomError) -> bool {
    match error {
        RoomError::NotCommitted(store) => store.is_refusal(),
        RoomError::VersionConflict(_) => true,
        _ => false,
    }
}

/// A command whose own data the database refused answers 400 naming it (nothing was written),
/// not 503: a retry would fail the same way.
fn refused_data(error: RoomError) -> RoomError {
    match error {
        RoomError::NotCommitted(store) if store.is_data_fault() => {
            tracing::warn!(%store, "The database refused a command's data; the edge let through what a column cannot hold");
            crate::domain::DomainError::InvalidArgument {
                field: "command",
                reason: "a value does not fit what the service stores".into(),
            }
            .into()
        }
        other => other,
    }
}

fn fail_all(mut answers: Vec<Answer>, items: Vec<Queued>, error: RoomError) -> Vec<Answer> {
    answers.extend(items.into_iter().map(|item| (item, Err(error.clone()))));
    answers
}

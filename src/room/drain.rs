//! A room's drain task: while commands are queued on the cell, take up to `max_commit_batch`
//! of them, decide them in order on the committed state, commit them in ONE transaction, swap
//! memory, and hand them to the publish lane (or answer at once what has nothing to publish).
//!
//! The task is spawned, so a caller that goes away never interrupts a commit: its command is
//! skipped if it was still queued, and runs to the end otherwise.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::batch::{Committed, Decision, Queued, plan};
use super::cells::{Cell, Slot};
use super::error::RoomError;
use super::pipeline::RoomService;
use crate::domain::RoomId;
use crate::store::CommitError;

/// Time after `publish_timeout` before a worker may claim the rows of a fresh command.
const SYNC_CLAIM_MARGIN: Duration = Duration::from_secs(1);

/// One command's answer before publishing.
pub(super) type Answer = (Queued, Result<Committed, RoomError>);

impl RoomService {
    /// Runs the cell's queue dry; one drain task per cell at a time.
    pub(super) async fn drain(self, room_id: RoomId, cell: Arc<Cell>) {
        let _guard = AbandonOnPanic(&cell);
        loop {
            let mut guard = cell.state.lock().await;
            let Some(batch) = cell.next_batch(self.inner.options.max_commit_batch) else { return };
            if batch.is_empty() {
                continue;
            }
            let answers = self.run_batch(&room_id, &cell, &mut guard, batch).await;
            drop(guard);
            self.publish_in_lane(&cell, answers);
        }
    }

    /// Decides and commits `items` on the room; every item gets an answer. A version conflict
    /// (another node moved the room on) reloads and decides the batch again, once; commands
    /// found already logged are answered from the log and the rest decided again.
    async fn run_batch(
        &self,
        room_id: &RoomId,
        cell: &Cell,
        slot: &mut Slot,
        mut items: Vec<Queued>,
    ) -> Vec<Answer> {
        // Unloading the cell (a reload, or a commit whose outcome is unknown) also makes the
        // publish lane check the database before it sends the room's next events: events of
        // a commit that may have landed must not be overtaken.
        let unload = |slot: &mut Slot| {
            *slot = None;
            cell.sync_clear.store(false, Ordering::Release);
        };
        let mut answers: Vec<Answer> = Vec::with_capacity(items.len());
        let mut reloaded = false;
        let claim_after = self.inner.options.publish_timeout + SYNC_CLAIM_MARGIN;
        while !items.is_empty() {
            let fence = match self.fence(room_id, cell, slot) {
                Ok(fence) => fence,
                Err(e) => return fail_all(answers, items, e),
            };
            let state = match self.loaded(room_id, slot).await {
                Ok(state) => state.clone(),
                Err(e) => return fail_all(answers, items, e),
            };
            let cell_version = state.as_ref().map(|s| s.version);
            let plan = plan(room_id, state.as_ref(), &items, (self.inner.clock)(), claim_after, fence);
            let Some(commit) = &plan.commit else {
                // Nothing to write: every command was refused (or skipped) on the cell's state,
                // which another node may have moved on. Reload and decide again, once.
                if !reloaded {
                    match self.is_stale(room_id, cell_version).await {
                        Ok(true) => {
                            reloaded = true;
                            unload(slot);
                            continue;
                        }
                        Ok(false) => {}
                        Err(e) => return fail_all(answers, items, e.into()),
                    }
                }
                return self.settle(answers, items, plan.decisions, state).await;
            };
            match self.inner.repo.commit_room(commit).await {
                Ok(()) => {
                    self.inner.transactions.fetch_add(1, Ordering::Relaxed);
                    self.inner.committed_commands.fetch_add(commit.commands.len() as u64, Ordering::Relaxed);
                    *slot = Some(plan.state.clone());
                    return self.settle(answers, items, plan.decisions, plan.state).await;
                }
                Err(CommitError::DuplicateCommand) => {
                    // Some command id is logged already (a retried command): answer those from
                    // the log, decide the others again without them.
                    let ids: Vec<String> = items.iter().map(|q| q.command_id.to_string()).collect();
                    let logged = match self.inner.repo.find_commands(&ids).await {
                        Ok(logged) => logged,
                        Err(e) => return fail_all(answers, items, e.into()),
                    };
                    if logged.is_empty() {
                        let busy =
                            RoomError::VersionConflict("command id is being used concurrently; retry".into());
                        return fail_all(answers, items, busy);
                    }
                    let room = state.as_ref().map(|s| s.snapshot());
                    let (repeats, rest): (Vec<Queued>, Vec<Queued>) = items
                        .into_iter()
                        .partition(|q| logged.iter().any(|c| c.command_id == q.command_id.as_str()));
                    for item in repeats {
                        let answer =
                            self.replay(&item.command_id, &item.fingerprint, None, room.clone()).await;
                        answers.push((item, answer));
                    }
                    items = rest;
                }
                Err(CommitError::VersionConflict) if !reloaded => {
                    tracing::info!(room_id = %room_id, "Room changed on another node; reloading");
                    reloaded = true;
                    unload(slot);
                }
                Err(CommitError::VersionConflict) => {
                    let conflict = RoomError::VersionConflict(
                        "room was changed concurrently by another node; retry the command".into(),
                    );
                    return fail_all(answers, items, conflict);
                }
                Err(CommitError::Fenced) => {
                    // Another node took the shard over: nothing was written, and this cell's
                    // state may be behind the new owner's.
                    tracing::warn!(room_id = %room_id, "Shard lease lost; the command was not committed");
                    unload(slot);
                    return fail_all(answers, items, RoomError::NotOwner);
                }
                Err(CommitError::Store(e)) => {
                    // Rolled back before the COMMIT: nothing landed, the cell still holds the room.
                    return fail_all(answers, items, RoomError::NotCommitted(Arc::new(e)));
                }
                Err(CommitError::OutcomeUnknown(e)) => {
                    // The commit may or may not have landed: the cell reloads on the next command.
                    unload(slot);
                    return fail_all(answers, items, e.into());
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
        state: Option<crate::domain::RoomState>,
    ) -> Vec<Answer> {
        let room = state.as_ref().map(|s| s.snapshot());
        for (item, decision) in items.into_iter().zip(decisions) {
            let answer = match decision {
                Decision::Done(committed) => Ok(committed),
                Decision::Refused(refused) => {
                    self.replay(&item.command_id, &item.fingerprint, Some(refused), room.clone()).await
                }
            };
            answers.push((item, answer));
        }
        answers
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

fn fail_all(mut answers: Vec<Answer>, items: Vec<Queued>, error: RoomError) -> Vec<Answer> {
    answers.extend(items.into_iter().map(|item| (item, Err(error.clone()))));
    answers
}

//! The rounds of one batch ([`Drain::decide_and_commit`]): each round fences the batch, takes
//! the room as committed, answers from the log what the cell committed recently, decides the
//! rest ([`Decide`]) and commits it in one transaction. What the write answers decides what
//! follows: the answers (committed, refused, failed), another round (the room moved on:
//! reload, once; repeats found in the log: answered, the rest decided again), or a bisection
//! (the database refused one command's data: each half on its own).

use std::time::Duration;

use super::{Drain, failed};
use crate::domain::RoomState;
use crate::room::cells::cell::{Cell, CellState};
use crate::room::command::commit::Written;
use crate::room::command::decide::{Answer, Decide, Decision, Plan, Queued};
use crate::room::error::RoomError;
use crate::room::publish::handoff::Route;

impl Drain {
    /// Decides and commits `items` in rounds until every one is answered: a round that
    /// leaves items to decide again (the cell reloaded, or repeats the commit found answered
    /// from the log) is followed by another; a batch the database refused over one command's
    /// data is bisected, each half decided and committed on its own.
    pub(super) async fn decide_and_commit(
        &self,
        slot: &mut CellState,
        items: Vec<Queued>,
        route: Route,
    ) -> Vec<Answer> {
        let claim_after = self.steps.publish.handoff().claim_after(route);
        let mut progress = Progress { answers: Vec::with_capacity(items.len()), reloaded: false };
        let mut items = items;
        while !items.is_empty() {
            items = match self.round(slot, items, claim_after, &mut progress).await {
                Next::Again(rest) => rest,
                Next::Answered => break,
                Next::Bisect(mut first) => {
                    // The database refused the batch over one command's data (or a command id
                    // in use concurrently): bisect, halves in order, so only the culprit fails
                    // and it costs the batch about 2·log2(n) transactions, never one a command.
                    let second = first.split_off(first.len() / 2);
                    for half in [first, second] {
                        progress.answers.extend(Box::pin(self.decide_and_commit(slot, half, route)).await);
                    }
                    break;
                }
            };
        }
        progress.answers
    }

    /// One round over `items`: the epoch fence, the room as committed, the commands the cell
    /// committed recently answered from the log, the others decided and, when they write
    /// anything, committed in one transaction.
    async fn round(
        &self,
        slot: &mut CellState,
        items: Vec<Queued>,
        claim_after: Duration,
        progress: &mut Progress,
    ) -> Next {
        let (steps, room_id, cell) = (&*self.steps, &self.room_id, &*self.cell);
        let fence = match steps.fence(room_id, cell, slot) {
            Ok(fence) => fence,
            Err(e) => return progress.fail(items, e),
        };
        let state = match steps.loaded(room_id, cell, slot).await {
            Ok(state) => state.cloned(),
            Err(e) => return progress.fail(items, e),
        };
        let (repeats, items) = cell.split_recent(items);
        self.answer_from_log(repeats, state.as_ref(), progress).await;
        if items.is_empty() {
            return Next::Answered;
        }
        let plan = Decide::new(room_id, (steps.clock)(), &steps.options).batch(state.as_ref(), &items);
        if plan.writes_nothing() {
            return self.nothing_to_write(slot, items, plan, state, progress).await;
        }
        let written = {
            let _spans = commit_spans(&items);
            steps.commit.write(room_id, &items, &plan, fence, claim_after).await
        };
        self.after_write(slot, items, (plan, state), written, progress).await
    }

    /// A plan that writes nothing: every command was refused (or skipped) on the cell's state,
    /// which another node may have moved on. Reload and decide again, once; otherwise the
    /// refusals are the answers.
    async fn nothing_to_write(
        &self,
        slot: &mut CellState,
        items: Vec<Queued>,
        plan: Plan,
        state: Option<RoomState>,
        progress: &mut Progress,
    ) -> Next {
        if !progress.reloaded {
            match self.steps.commit.is_stale(&self.room_id, state.as_ref().map(|s| s.version)).await {
                Ok(true) => return progress.reload(&self.cell, slot, items),
                Ok(false) => {}
                Err(e) => return progress.fail(items, e.into()),
            }
        }
        self.settle(progress, items, plan.decisions, state).await;
        Next::Answered
    }

    /// What follows the write of `plan` (decided on `state`): the answers when it committed or
    /// failed, or the items to decide again.
    async fn after_write(
        &self,
        slot: &mut CellState,
        items: Vec<Queued>,
        (plan, state): (Plan, Option<RoomState>),
        written: Written,
        progress: &mut Progress,
    ) -> Next {
        let cell = &*self.cell;
        match written {
            Written::Committed => {
                cell.remember_committed(plan.logged.iter().filter_map(|&i| items.get(i)));
                cell.committed(slot, plan.state.clone(), &plan.changes, (self.steps.clock)());
                self.settle(progress, items, plan.decisions, plan.state).await;
                Next::Answered
            }
            Written::Repeats(logged) => {
                // Answer the logged ones from the log, decide the others again without them.
                let (repeats, rest): (Vec<Queued>, Vec<Queued>) = items
                    .into_iter()
                    .partition(|q| logged.iter().any(|c| c.belongs_to(&q.key(), &q.fingerprint)));
                self.answer_from_log(repeats, state.as_ref(), progress).await;
                Next::Again(rest)
            }
            Written::Moved if !progress.reloaded => {
                tracing::info!(room_id = %self.room_id, "Room changed on another node; reloading");
                progress.reload(cell, slot, items)
            }
            Written::Moved => progress.fail(items, Written::moved_twice()),
            Written::Failed { error, unload: false } if items.len() > 1 && shares_no_fate(&error) => {
                Next::Bisect(items)
            }
            Written::Failed { error, unload } => {
                if unload {
                    cell.unload(slot);
                }
                progress.fail(items, refused_data(error))
            }
        }
    }

    /// Answers `repeats`, commands logged already, from the command log; `state` is the room
    /// they were found on.
    async fn answer_from_log(
        &self,
        repeats: Vec<Queued>,
        state: Option<&RoomState>,
        progress: &mut Progress,
    ) {
        let room = state.map(RoomState::answer_view);
        for item in repeats {
            let answer = self.steps.replay.answer(&item.key(), &item.fingerprint, None, room.clone()).await;
            progress.answers.push((item, answer));
        }
    }

    /// Answers a decided batch: the commands done, and the refused ones after asking the
    /// command log whether they are repeats (a retried CreateRoom is refused by the room it
    /// created, and answers its original success).
    async fn settle(
        &self,
        progress: &mut Progress,
        items: Vec<Queued>,
        decisions: Vec<Decision>,
        state: Option<RoomState>,
    ) {
        let room = state.as_ref().map(RoomState::answer_view);
        for (item, decision) in items.into_iter().zip(decisions) {
            let answer = match decision {
                Decision::Done(committed) => Ok(*committed),
                Decision::Refused(refused) => {
                    self.steps
                        .replay
                        .answer(&item.key(), &item.fingerprint, Some(refused), room.clone())
                        .await
                }
            };
            progress.answers.push((item, answer));
        }
    }
}

/// The answers of a batch's rounds so far.
struct Progress {
    answers: Vec<Answer>,
    /// The cell was reloaded once already: the room moving on again fails the batch.
    reloaded: bool,
}

impl Progress {
    /// Answers every one of `items` with `error`.
    fn fail(&mut self, items: Vec<Queued>, error: RoomError) -> Next {
        self.answers.extend(failed(items, error));
        Next::Answered
    }

    /// Unloads the cell so that `items` are decided again on the room as the database has it.
    fn reload(&mut self, cell: &Cell, slot: &mut CellState, items: Vec<Queued>) -> Next {
        self.reloaded = true;
        cell.unload(slot);
        Next::Again(items)
    }
}

/// What a round leaves to do.
enum Next {
    /// Every item of the round is answered.
    Answered,
    /// These items are decided again, on a reloaded cell or without the repeats answered.
    Again(Vec<Queued>),
    /// The database refused these items' write over one command's data: decide and commit
    /// each half on its own.
    Bisect(Vec<Queued>),
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

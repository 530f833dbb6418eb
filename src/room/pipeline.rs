//! The command pipeline: validate → cell applies → one transaction → swap memory → publish →
//! respond; the marks of the published events are written best-effort by the
//! [`DeliveryMarker`], batched across concurrent commands.

use std::sync::Arc;
use std::time::Duration;

use super::Clock;
use super::cells::{Cell, Cells};
use super::commit::{command_commit, envelopes};
use super::error::RoomError;
use super::marker::{DeliveryMarker, MarkerStats};
use super::outcome::{CommandResponse, fingerprint};
use crate::domain::{
    self, Command, CommandContext, CommandId, DomainError, EventEnvelope, RoomId, RoomSnapshot, RoomState,
    UserId,
};
use crate::publish::Publisher;
use crate::store::{CommitError, SharedRepository};
use crate::telemetry::names;

/// Time after `publish_timeout` before a worker may claim the rows of a fresh command.
const SYNC_CLAIM_MARGIN: Duration = Duration::from_secs(1);

/// A condition on the room, checked under its cell lock right before a command applies.
pub type StillHolds = dyn Fn(&RoomState) -> bool + Send + Sync;

/// Settings of the room service.
#[derive(Debug, Clone)]
pub struct RoomOptions {
    /// Bounds the synchronous publish of one command; outbox rows are not claimable by the
    /// worker before it has passed.
    pub publish_timeout: Duration,
}

/// Runs room commands; cheap to clone.
#[derive(Clone)]
pub struct RoomService {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) repo: SharedRepository,
    pub(super) publisher: Publisher,
    pub(super) marker: DeliveryMarker,
    cells: Cells,
    pub(super) options: RoomOptions,
    clock: Clock,
}

impl std::fmt::Debug for RoomService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoomService").field("options", &self.inner.options).finish_non_exhaustive()
    }
}

/// A committed command waiting to be published.
pub(super) struct Committed {
    pub(super) response: CommandResponse,
    pub(super) envelopes: Vec<(EventEnvelope, Arc<str>)>,
}

impl RoomService {
    /// A service over `repo` that publishes through `publisher`. Starts its delivery marker
    /// task, so it must be called inside a Tokio runtime; stop it with [`Self::shutdown`].
    pub fn new(repo: SharedRepository, publisher: Publisher, options: RoomOptions, clock: Clock) -> Self {
        let marker = DeliveryMarker::spawn(repo.clone());
        let inner = Inner { repo, publisher, marker, cells: Cells::default(), options, clock };
        Self { inner: Arc::new(inner) }
    }

    /// Waits until the delivery marks of every command answered so far are written (or failed).
    pub async fn flush_delivery_marks(&self) {
        self.inner.marker.flush().await;
    }

    /// Counters of the delivery marker (statements vs events marked).
    pub fn delivery_marker_stats(&self) -> MarkerStats {
        self.inner.marker.stats()
    }

    /// Writes the pending delivery marks and stops the marker task; call after the last
    /// command has finished and before the pool closes. Later marks are dropped (their rows
    /// stay pending for the worker).
    pub async fn shutdown(&self) {
        self.inner.marker.shutdown().await;
    }

    /// Applies `command` to `room_id` (idempotent by `command_id`), commits it, publishes its
    /// events and answers how far each got.
    pub async fn execute(
        &self,
        room_id: RoomId,
        command_id: CommandId,
        request_id: String,
        command: Command,
    ) -> Result<CommandResponse, RoomError> {
        self.run(room_id, command_id, request_id, command, None).await
    }

    /// [`Self::execute`], but only if `still` holds for the room under its cell lock; otherwise
    /// nothing is applied or logged and the answer is `applied: false` (the presence worker
    /// re-checks that a member is still stale at the moment of removal).
    pub async fn execute_if(
        &self,
        room_id: RoomId,
        command_id: CommandId,
        request_id: String,
        command: Command,
        still: &StillHolds,
    ) -> Result<CommandResponse, RoomError> {
        self.run(room_id, command_id, request_id, command, Some(still)).await
    }

    async fn run(
        &self,
        room_id: RoomId,
        command_id: CommandId,
        request_id: String,
        command: Command,
        still: Option<&StillHolds>,
    ) -> Result<CommandResponse, RoomError> {
        let started = tokio::time::Instant::now();
        let name = command.name();
        let result = match self.commit(&room_id, &command_id, request_id, &command, still).await {
            Ok(committed) => Ok(self.publish(committed).await),
            Err(e) => Err(e),
        };
        let outcome = match &result {
            Ok(r) if r.replayed => "replayed",
            Ok(r) if r.applied => "applied",
            Ok(_) => "not_applied",
            Err(RoomError::Domain(_)) => "rejected",
            Err(RoomError::CommandConflict(_)) => "conflict",
            Err(RoomError::Unavailable(_)) => "unavailable",
            Err(RoomError::Corrupt(_)) => "corrupt",
        };
        metrics::counter!(names::COMMANDS_TOTAL, names::LABEL_COMMAND => name, names::LABEL_RESULT => outcome)
            .increment(1);
        metrics::histogram!(names::COMMAND_LATENCY_SECONDS, names::LABEL_COMMAND => name)
            .record(started.elapsed().as_secs_f64());
        result
    }

    /// Refreshes a member's presence (memory only).
    pub async fn heartbeat(&self, room_id: &RoomId, user_id: &UserId) -> Result<(), RoomError> {
        let cell = self.cell(room_id);
        let mut guard = cell.state.lock().await;
        let state = self.loaded(room_id, &mut guard).await?;
        let room = state.as_mut().ok_or(DomainError::RoomNotFound)?;
        domain::heartbeat(room, user_id, (self.inner.clock)())?;
        Ok(())
    }

    /// The room as committed.
    pub async fn snapshot(&self, room_id: &RoomId) -> Result<RoomSnapshot, RoomError> {
        let cell = self.cell(room_id);
        let mut guard = cell.state.lock().await;
        let state = self.loaded(room_id, &mut guard).await?;
        Ok(state.as_ref().ok_or(DomainError::RoomNotFound)?.snapshot())
    }

    /// Open rooms loaded in memory and their members (with `joined_at_ms`) whose last
    /// heartbeat is at or before `cutoff_ms` (for the presence worker).
    pub async fn stale_members(&self, cutoff_ms: i64) -> Vec<(RoomId, Vec<(UserId, i64)>)> {
        self.inner.cells.stale_members(cutoff_ms).await
    }

    /// The clock the service runs on.
    pub fn now_ms(&self) -> i64 {
        (self.inner.clock)()
    }

    fn cell(&self, room_id: &RoomId) -> Arc<Cell> {
        self.inner.cells.get(room_id, (self.inner.clock)())
    }

    /// Drops cells nobody is using that hold no live presence: rooms that do not exist, closed
    /// rooms, and rooms without members unused for `idle_after`. A dropped room loads again
    /// from its snapshot on the next request. Returns how many cells were dropped.
    pub fn evict_idle(&self, idle_after: Duration) -> usize {
        self.inner.cells.evict_idle((self.inner.clock)() - idle_after.as_millis() as i64)
    }

    /// How many cells are in memory.
    pub fn cell_count(&self) -> usize {
        self.inner.cells.len()
    }

    /// Loads the cell's state from the snapshot if it is not loaded yet.
    async fn loaded<'a>(
        &self,
        room_id: &RoomId,
        slot: &'a mut Option<Option<RoomState>>,
    ) -> Result<&'a mut Option<RoomState>, RoomError> {
        if slot.is_none() {
            *slot = Some(self.load(room_id).await?);
        }
        Ok(slot.get_or_insert(None))
    }

    /// True when the stored snapshot is not at `cell_version` (`None`: no room).
    async fn is_stale(&self, room_id: &RoomId, cell_version: Option<u64>) -> Result<bool, RoomError> {
        let stored = self.inner.repo.load_room(room_id.as_str()).await?;
        Ok(stored.map(|s| s.version) != cell_version)
    }

    async fn load(&self, room_id: &RoomId) -> Result<Option<RoomState>, RoomError> {
        let Some(stored) = self.inner.repo.load_room(room_id.as_str()).await? else {
            return Ok(None);
        };
        let mut state: RoomState = serde_json::from_str(&stored.state)
            .map_err(|e| RoomError::Corrupt(format!("snapshot of room {room_id}: {e}")))?;
        state.reset_presence((self.inner.clock)());
        Ok(Some(state))
    }

    /// Applies and commits under the cell lock; memory changes only after commit.
    async fn commit(
        &self,
        room_id: &RoomId,
        command_id: &CommandId,
        request_id: String,
        command: &Command,
        still: Option<&StillHolds>,
    ) -> Result<Committed, RoomError> {
        let fingerprint = fingerprint(room_id, command);
        let cell = self.cell(room_id);
        let mut guard = cell.state.lock().await;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let state = self.loaded(room_id, &mut guard).await?;
            if let Some(still) = still
                && !state.as_ref().is_some_and(still)
            {
                let room = state.as_ref().map(RoomState::snapshot);
                let room_version = room.as_ref().map_or(0, |r| r.version);
                let response = CommandResponse {
                    applied: false,
                    room_version,
                    replayed: false,
                    room,
                    events: Vec::new(),
                };
                return Ok(Committed { response, envelopes: Vec::new() });
            }
            let ctx = CommandContext {
                room_id: room_id.clone(),
                command_id: command_id.clone(),
                request_id: request_id.clone(),
                now_ms: (self.inner.clock)(),
            };
            let applied = match domain::apply(state.as_ref(), command, &ctx) {
                Ok(applied) => applied,
                // A repeated command may be refused by the state it produced (CreateRoom of
                // an existing room, CloseRoom of a closed one): the log answers first.
                Err(refused) => {
                    let room = state.as_ref().map(RoomState::snapshot);
                    let cell_version = state.as_ref().map(|s| s.version);
                    match self.replay(command_id, &fingerprint, Some(refused), room).await {
                        // A refusal is decided on the cell: if another node has moved the room
                        // on, reload and decide again (once).
                        Err(RoomError::Domain(_))
                            if attempts < 2 && self.is_stale(room_id, cell_version).await? =>
                        {
                            *guard = None;
                            continue;
                        }
                        answer => return answer,
                    }
                }
            };
            let previous_version = state.as_ref().map_or(0, |s| s.version);
            let envelopes = envelopes(&applied, &ctx);
            let mut commit =
                command_commit(&ctx, command, &fingerprint, &applied, previous_version, &envelopes);
            // The synchronous push starts after commit and its mark is batched: give it a margin
            // before the worker may claim the rows.
            commit.publish_timeout = self.inner.options.publish_timeout + SYNC_CLAIM_MARGIN;
            let room_before = state.as_ref().map(RoomState::snapshot);
            // Unload the cell while the commit is in flight: if this future is dropped (the
            // client went away) the commit may still land, and the next request must reload
            // rather than decide on the state before it.
            let before = guard.take();
            match self.inner.repo.commit_command(&commit).await {
                Ok(()) => {
                    let response = CommandResponse {
                        applied: applied.applied,
                        room_version: applied.state.version,
                        replayed: false,
                        room: Some(applied.state.snapshot()),
                        events: Vec::new(),
                    };
                    *guard = if applied.applied { Some(Some(applied.state)) } else { before };
                    return Ok(Committed { response, envelopes });
                }
                Err(CommitError::DuplicateCommand) => {
                    return self.replay(command_id, &fingerprint, None, room_before).await;
                }
                Err(CommitError::VersionConflict) if attempts < 2 => {
                    tracing::info!(room_id = %room_id, "Room changed on another node; reloading");
                }
                Err(CommitError::VersionConflict) => {
                    return Err(RoomError::CommandConflict(
                        "room was changed concurrently by another node; retry the command".into(),
                    ));
                }
                // The commit may or may not have landed: the cell reloads on the next command.
                Err(CommitError::Store(e)) => return Err(RoomError::Unavailable(e)),
            }
        }
    }
}

//! The command pipeline: validate → queue on the room's cell → the cell's drain task applies
//! the queued commands in order and commits them in one transaction → swap memory → publish in
//! room order → respond; the marks of the published events are written best-effort by the
//! [`DeliveryMarker`], batched across commands.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, oneshot};

use super::batch::Queued;
use super::cells::{Cell, Cells, Slot};
use super::error::RoomError;
use super::marker::{DeliveryMarker, MarkerStats};
use super::outcome::{CommandResponse, fingerprint};
use super::{Clock, Transport};
use crate::cluster::Ownership;
use crate::domain::{
    self, Command, CommandId, DomainError, MemberView, RoomId, RoomSnapshot, RoomState, SenderTotal, UserId,
};
use crate::publish::Publisher;
use crate::store::{SharedRepository, StoreError};
use crate::telemetry::names;
use crate::wallet::{Wallet, WalletError};

/// A condition on the room, checked at the command's turn right before it applies.
pub type StillHolds = dyn Fn(&RoomState) -> bool + Send + Sync;

/// Default `rooms.max_commit_batch`.
pub const DEFAULT_MAX_COMMIT_BATCH: usize = 64;

/// Settings of the room service.
#[derive(Debug, Clone)]
pub struct RoomOptions {
    /// Bounds the synchronous publish of one command; outbox rows are not claimable by the
    /// worker before it has passed.
    pub publish_timeout: Duration,
    /// At most this many queued commands of one room are committed in one transaction
    /// (1: one command per transaction).
    pub max_commit_batch: usize,
    /// Longest room id IM can carry (`GroupId` = prefix + room id, 48 bytes at most); `None`
    /// when IM is disabled. CreateRoom refuses longer ids.
    pub max_room_id_bytes: Option<usize>,
    /// Notified when the synchronous path leaves events pending, so the worker claims them now.
    pub worker_wake: Option<Arc<Notify>>,
    /// Which rooms this node may serve (every room without a cluster); commits are fenced on
    /// the shard lease's epoch.
    pub ownership: Ownership,
    /// The wallet gifts are paid from (`wallet.enabled`); `None`: gifts are free.
    pub wallet: Option<Arc<dyn Wallet>>,
}

impl RoomOptions {
    /// Options with the default batch size, no room id limit, no worker to wake and no wallet.
    pub fn new(publish_timeout: Duration) -> Self {
        Self {
            publish_timeout,
            max_commit_batch: DEFAULT_MAX_COMMIT_BATCH,
            max_room_id_bytes: None,
            worker_wake: None,
            ownership: Ownership::Single,
            wallet: None,
        }
    }
}

/// Runs room commands; cheap to clone.
#[derive(Clone)]
pub struct RoomService {
    pub(super) inner: Arc<Inner>,
}

/// How the command path has committed so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitStats {
    /// Room transactions committed.
    pub transactions: u64,
    /// Commands logged by them (applied or no-op).
    pub commands: u64,
}

pub(super) struct Inner {
    pub(super) repo: SharedRepository,
    pub(super) publisher: Publisher,
    pub(super) marker: DeliveryMarker,
    pub(super) cells: Cells,
    pub(super) options: RoomOptions,
    pub(super) clock: Clock,
    pub(super) transactions: AtomicU64,
    pub(super) committed_commands: AtomicU64,
    /// Gifts whose debit was refunded (see [`super::pay`]).
    pub(super) refunded: super::pay::RefundedKeys,
}

impl std::fmt::Debug for RoomService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoomService").field("options", &self.inner.options).finish_non_exhaustive()
    }
}

impl RoomService {
    /// A service over `repo` that publishes through `publisher`. Starts its delivery marker
    /// task, so it must be called inside a Tokio runtime; stop it with [`Self::shutdown`].
    pub fn new(repo: SharedRepository, publisher: Publisher, mut options: RoomOptions, clock: Clock) -> Self {
        options.max_commit_batch = options.max_commit_batch.max(1);
        let marker = DeliveryMarker::spawn(repo.clone());
        let inner = Inner {
            repo,
            publisher,
            marker,
            cells: Cells::default(),
            options,
            clock,
            transactions: AtomicU64::new(0),
            committed_commands: AtomicU64::new(0),
            refunded: Default::default(),
        };
        Self { inner: Arc::new(inner) }
    }

    /// Waits until the delivery marks of every command answered so far are written (or failed).
    pub async fn flush_delivery_marks(&self) {
        self.inner.marker.flush().await;
    }

    /// Room transactions committed and the commands they logged: their ratio is the average
    /// group-commit batch.
    pub fn commit_stats(&self) -> CommitStats {
        CommitStats {
            transactions: self.inner.transactions.load(Ordering::Relaxed),
            commands: self.inner.committed_commands.load(Ordering::Relaxed),
        }
    }

    /// Commands waiting on a room's cell (not yet taken into a batch).
    pub fn queued_commands(&self, room_id: &RoomId) -> usize {
        self.inner.cells.queued(room_id)
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
        self.execute_via(Transport::Internal, room_id, command_id, request_id, command).await
    }

    /// [`Self::execute`] for a command that came in over `transport` (the `transport` label of
    /// `room_commands_total`).
    pub async fn execute_via(
        &self,
        transport: Transport,
        room_id: RoomId,
        command_id: CommandId,
        request_id: String,
        command: Command,
    ) -> Result<CommandResponse, RoomError> {
        self.run(transport, room_id, command_id, request_id, command, None).await
    }

    /// [`Self::execute`], but only if `still` holds for the room at the command's turn;
    /// otherwise nothing is applied or logged and the answer is `applied: false` (the presence
    /// worker re-checks that a member is still stale at the moment of removal).
    pub async fn execute_if(
        &self,
        room_id: RoomId,
        command_id: CommandId,
        request_id: String,
        command: Command,
        still: Arc<StillHolds>,
    ) -> Result<CommandResponse, RoomError> {
        self.run(Transport::Internal, room_id, command_id, request_id, command, Some(still)).await
    }

    async fn run(
        &self,
        transport: Transport,
        room_id: RoomId,
        command_id: CommandId,
        request_id: String,
        command: Command,
        still: Option<Arc<StillHolds>>,
    ) -> Result<CommandResponse, RoomError> {
        let started = tokio::time::Instant::now();
        let name = command.name();
        if let (Command::CreateRoom { .. }, Some(max)) = (&command, self.inner.options.max_room_id_bytes)
            && room_id.as_str().len() > max
        {
            let reason =
                format!("must be at most {max} bytes: IM's GroupId (group_id_prefix + room_id) holds 48");
            return Err(DomainError::InvalidArgument { field: "room_id", reason }.into());
        }
        let (reply, answer) = oneshot::channel();
        let fingerprint = fingerprint(&room_id, &command);
        let charge = self.charge(&command_id, &command);
        let item = Queued { command_id, request_id, command, fingerprint, still, reply };
        // A gift is paid for before it is queued; the answer decides whether the debit stays.
        let result = self.paid(charge, self.clone().queued(room_id, item, answer)).await;
        let outcome = match &result {
            Ok(r) if r.replayed => "replayed",
            Ok(r) if r.applied => "applied",
            Ok(_) => "not_applied",
            Err(RoomError::Domain(_) | RoomError::Wallet(WalletError::InsufficientBalance)) => "rejected",
            Err(
                RoomError::CommandConflict(_) | RoomError::VersionConflict(_) | RoomError::PaymentRefunded,
            ) => "conflict",
            Err(
                RoomError::Unavailable(_)
                | RoomError::NotCommitted(_)
                | RoomError::NotOwner
                | RoomError::Wallet(_),
            ) => "unavailable",
            Err(RoomError::Corrupt(_)) => "corrupt",
        };
        metrics::counter!(
            names::COMMANDS_TOTAL,
            names::LABEL_COMMAND => name,
            names::LABEL_RESULT => outcome,
            names::LABEL_TRANSPORT => transport.as_str()
        )
        .increment(1);
        metrics::histogram!(names::COMMAND_LATENCY_SECONDS, names::LABEL_COMMAND => name)
            .record(started.elapsed().as_secs_f64());
        result
    }

    /// Queues `item` on its room's cell (starting the drain task if none runs) and waits for
    /// its answer.
    async fn queued(
        self,
        room_id: RoomId,
        item: Queued,
        answer: oneshot::Receiver<Result<CommandResponse, RoomError>>,
    ) -> Result<CommandResponse, RoomError> {
        let cell = self.cell(&room_id);
        if cell.enqueue(item) {
            tokio::spawn(self.clone().drain(room_id, cell));
        }
        // The drain task always answers; a lost answer means it died mid-batch.
        answer.await.unwrap_or_else(|_| Err(RoomError::unknown_outcome()))
    }

    /// Refreshes a member's presence (memory only).
    pub async fn heartbeat(&self, room_id: &RoomId, user_id: &UserId) -> Result<(), RoomError> {
        let cell = self.cell(room_id);
        let mut guard = cell.state.lock().await;
        self.fence(room_id, &cell, &mut guard)?;
        let state = self.loaded(room_id, &mut guard).await?;
        let room = state.as_mut().ok_or(DomainError::RoomNotFound)?;
        domain::heartbeat(room, user_id, (self.inner.clock)())?;
        Ok(())
    }

    /// The room as committed (without its member list).
    pub async fn snapshot(&self, room_id: &RoomId) -> Result<RoomSnapshot, RoomError> {
        Ok(self.room(room_id).await?.snapshot())
    }

    /// Up to `limit` members after `after` (exclusive), in user id order.
    pub async fn members(
        &self,
        room_id: &RoomId,
        after: Option<&UserId>,
        limit: usize,
    ) -> Result<Vec<MemberView>, RoomError> {
        Ok(self.room(room_id).await?.members_page(after, limit))
    }

    /// A copy of the room as committed (O(1): its maps are persistent).
    async fn room(&self, room_id: &RoomId) -> Result<RoomState, RoomError> {
        let cell = self.cell(room_id);
        let mut guard = cell.state.lock().await;
        self.fence(room_id, &cell, &mut guard)?;
        let state = self.loaded(room_id, &mut guard).await?;
        Ok(state.as_ref().ok_or(DomainError::RoomNotFound)?.clone())
    }

    /// Open rooms loaded in memory and their members (with `joined_at_ms`) whose last
    /// heartbeat is at or before `cutoff_ms` (for the presence worker).
    /// Only rooms this node owns: a room's presence lives at its owner.
    pub async fn stale_members(&self, cutoff_ms: i64) -> Vec<(RoomId, Vec<(UserId, i64)>)> {
        let mut stale = self.inner.cells.stale_members(cutoff_ms).await;
        stale.retain(|(room_id, _)| self.owns(room_id));
        stale
    }

    /// The clock the service runs on.
    pub fn now_ms(&self) -> i64 {
        (self.inner.clock)()
    }

    /// At most this many commands of a room are committed together.
    pub fn max_commit_batch(&self) -> usize {
        self.inner.options.max_commit_batch
    }

    pub(super) fn cell(&self, room_id: &RoomId) -> Arc<Cell> {
        self.inner.cells.get(room_id, (self.inner.clock)())
    }

    /// Drops cells nobody is using that hold no live presence: rooms that do not exist, closed
    /// rooms, rooms without members unused for `idle_after`, and rooms another node owns now.
    /// A dropped room loads again from its snapshot on the next request. Returns how many
    /// cells were dropped.
    pub fn evict_idle(&self, idle_after: Duration) -> usize {
        let ownership = &self.inner.options.ownership;
        self.inner.cells.evict_idle((self.inner.clock)() - idle_after.as_millis() as i64, |room| {
            ownership.owns(room.as_str())
        })
    }

    /// How many cells are in memory.
    pub fn cell_count(&self) -> usize {
        self.inner.cells.len()
    }

    /// The commit fence of the room while this node owns it (`None` without a cluster);
    /// unloads a cell loaded under another epoch (the room may have moved on elsewhere).
    pub(super) fn fence(
        &self,
        room_id: &RoomId,
        cell: &Cell,
        slot: &mut Slot,
    ) -> Result<Option<u64>, RoomError> {
        let fence = self.inner.options.ownership.fence(room_id.as_str()).map_err(|_| RoomError::NotOwner)?;
        let epoch = fence.unwrap_or(0);
        if cell.epoch.swap(epoch, Ordering::AcqRel) != epoch {
            *slot = None;
            cell.sync_clear.store(false, Ordering::Release);
        }
        Ok(fence)
    }

    /// True when this node may serve `room_id` now.
    pub fn owns(&self, room_id: &RoomId) -> bool {
        self.inner.options.ownership.owns(room_id.as_str())
    }

    /// Loads the cell's state from the database if it is not loaded yet.
    pub(super) async fn loaded<'a>(
        &self,
        room_id: &RoomId,
        slot: &'a mut Slot,
    ) -> Result<&'a mut Option<RoomState>, RoomError> {
        if slot.is_none() {
            *slot = Some(self.load(room_id).await?);
        }
        Ok(slot.get_or_insert(None))
    }

    /// True when the stored room is not at `cell_version` (`None`: no room).
    pub(super) async fn is_stale(
        &self,
        room_id: &RoomId,
        cell_version: Option<u64>,
    ) -> Result<bool, StoreError> {
        Ok(self.inner.repo.room_version(room_id.as_str()).await? != cell_version)
    }

    async fn load(&self, room_id: &RoomId) -> Result<Option<RoomState>, RoomError> {
        let Some(stored) = self.inner.repo.load_room(room_id.as_str()).await? else {
            return Ok(None);
        };
        let corrupt = |what: &str, e: &dyn std::fmt::Display| {
            RoomError::Corrupt(format!("{what} of room {room_id}: {e}"))
        };
        let snapshot: RoomSnapshot =
            serde_json::from_str(&stored.state).map_err(|e| corrupt("snapshot", &e))?;
        let members = stored
            .members
            .into_iter()
            .map(|(id, joined)| UserId::parse(id).map(|id| (id, joined)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| corrupt("a member", &e))?;
        let senders = stored
            .gift_totals
            .into_iter()
            .map(|t| {
                let total = SenderTotal { total_value: t.total_value, first_version: t.first_version };
                UserId::parse(t.user_id).map(|id| (id, total))
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| corrupt("a gift total", &e))?;
        Ok(Some(RoomState::restore(snapshot, members, senders, (self.inner.clock)())))
    }
}

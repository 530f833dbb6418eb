//! [`RoomService`]: validate → pay (gifts) → queue on the room's cell → the cell's drain task runs
//! the steps ([`crate::room::command::drain`]: decide, commit, swap memory, publish in room order)
//! → respond. The queries and heartbeats, served from the cells, are in [`super::reads`].

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use super::error::RoomError;
use super::history::History;
use super::options::Clock;
use super::options::{CommitStats, RoomOptions};
use crate::domain::{Command, CommandId, DomainError, RoomId, UserId};
use crate::publish::Publisher;
use crate::room::cells::cell::Cell;
use crate::room::cells::cell_map::Cells;
use crate::room::cells::misses::Misses;
use crate::room::command::commit::Commit;
use crate::room::command::decide::{Queued, Reply};
use crate::room::command::drain::Drain;
use crate::room::command::outcome::{CommandResponse, fingerprint, result_label};
use crate::room::command::pay::Payments;
use crate::room::command::replay::Replay;
use crate::room::command::request::CommandRequest;
use crate::room::command::steps::Steps;
use crate::room::publish::marker::MarkerStats;
use crate::room::publish::sync_publish::{PublishSettings, SyncPublish};
use crate::store::{CommandKey, DueSeatRequest, SharedCommandStore};
use crate::telemetry::names;
use crate::telemetry::traces::{self, Traced};
use tracing::Instrument;

/// Who a command is from, as its identity keeps it (SPEC §13.1): the authenticated caller
/// (`user:<id>`, `service:<name>`); for an anonymous one (`auth.mode: none`) and the service's
/// own commands, the user the command acts as; empty for a command naming nobody (CloseRoom).
fn principal(caller: Option<String>, command: &Command) -> String {
    caller.unwrap_or_else(|| command.acting_user().map(|user| format!("user:{user}")).unwrap_or_default())
}

/// Runs room commands; cheap to clone.
#[derive(Clone)]
pub struct RoomService {
    pub(super) inner: Arc<Steps>,
}

impl std::fmt::Debug for RoomService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoomService").field("options", &self.inner.options).finish_non_exhaustive()
    }
}

impl RoomService {
    /// A service over `repo` that publishes through `publisher`. Starts its delivery marker
    /// task, so it must be called inside a Tokio runtime; stop it with [`Self::shutdown`].
    pub fn new(
        repo: SharedCommandStore,
        publisher: Publisher,
        mut options: RoomOptions,
        clock: Clock,
    ) -> Self {
        options.max_commit_batch = options.max_commit_batch.max(1);
        let settings = PublishSettings {
            publish_timeout: options.publish_timeout,
            sync_publish_wait: options.sync_publish_wait,
            in_flight_per_room: options.in_flight_per_room,
            pack: options.pack,
            quarantine: options.quarantine.clone(),
            permits: options.permits.clone(),
            groups: options.groups,
        };
        let publish = SyncPublish::new(publisher, repo.clone(), settings, options.worker_wake.clone());
        let inner = Steps {
            cells: Cells::default(),
            misses: Misses::default(),
            payments: Arc::new(Payments::new(options.wallet.clone(), repo.clone())),
            commit: Commit::new(repo.clone()),
            replay: Replay::new(repo.clone(), options.groups),
            history: History::new(repo, options.history),
            publish,
            options,
            clock,
        };
        Self { inner: Arc::new(inner) }
    }

    /// Waits until the delivery marks of every command answered so far are written (or failed).
    pub async fn flush_delivery_marks(&self) {
        self.inner.publish.handoff().marker().flush().await;
    }

    /// Room transactions committed and the commands they logged: their ratio is the average
    /// group-commit batch.
    pub fn commit_stats(&self) -> CommitStats {
        self.inner.commit.stats()
    }

    /// Commands waiting on a room's cell (not yet taken into a batch).
    pub fn queued_commands(&self, room_id: &RoomId) -> usize {
        self.inner.cells.queued(room_id)
    }

    /// Counters of the delivery marker (statements vs events marked).
    pub fn delivery_marker_stats(&self) -> MarkerStats {
        self.inner.publish.handoff().marker().stats()
    }

    /// Writes the pending delivery marks and stops the marker task; call after the last
    /// command has finished and before the pool closes. Later marks are dropped (their rows
    /// stay pending for the worker).
    pub async fn shutdown(&self) {
        self.inner.publish.handoff().marker().shutdown().await;
    }

    /// Applies `command` to `room_id` (idempotent by `command_id`), commits it, publishes its
    /// events and answers how far each got: [`Self::submit`] of a [`CommandRequest::new`].
    pub async fn execute(
        &self,
        room_id: RoomId,
        command_id: CommandId,
        request_id: String,
        command: Command,
    ) -> Result<CommandResponse, RoomError> {
        self.submit(CommandRequest::new(room_id, command_id, request_id, command)).await
    }

    /// Applies `request` (idempotent by its command id, and only if its condition holds),
    /// commits it, publishes its events and answers how far each got. A `command` span of the
    /// request's trace when traces are exported.
    pub async fn submit(&self, request: CommandRequest) -> Result<CommandResponse, RoomError> {
        let span = traces::span_if_on(|| {
            let (room_id, command) = (&request.room_id, request.command.name());
            tracing::info_span!("command", %room_id, command, command_id = %request.command_id)
        });
        let trace = Traced::of(&span);
        self.run(request, trace).instrument(span).await
    }

    async fn run(
        &self,
        request: CommandRequest,
        trace: Option<Traced>,
    ) -> Result<CommandResponse, RoomError> {
        let CommandRequest { room_id, command_id, mut request_id, command, transport, still, caller } =
            request;
        if crate::domain::RequestId::parse(request_id.as_str()).is_err() {
            // The edges replace an invalid one already; nothing else may reach the log either.
            request_id = uuid::Uuid::now_v7().to_string();
        }
        let started = tokio::time::Instant::now();
        let name = command.name();
        if let (Command::CreateRoom { .. }, Some(max)) = (&command, self.inner.options.max_room_id_bytes)
            && room_id.as_str().len() > max
        {
            let reason =
                format!("must be at most {max} bytes: IM's GroupId (group_id_prefix + room_id) holds 48");
            return Err(DomainError::InvalidArgument { field: "room_id", reason }.into());
        }
        // The room's miss is forgotten once its creation is answered (committed or not), so the
        // creator's next read finds it.
        let created = matches!(command, Command::CreateRoom { .. }).then(|| room_id.clone());
        let (reply, answer) = oneshot::channel();
        let fingerprint = fingerprint(&room_id, &command, caller.as_deref());
        let caller = principal(caller, &command);
        let key = CommandKey::new(caller.clone(), command_id.as_str());
        let charge = self.inner.payments.charge(&room_id, &key, &fingerprint, &command);
        let reply = Reply::new(reply);
        let item = Queued { command_id, caller, request_id, command, fingerprint, still, trace, reply };
        // A gift is paid for before it is queued; the answer decides whether the debit stays.
        let result = self.inner.payments.paid(charge, self.clone().queued(room_id, item, answer)).await;
        if let Some(room_id) = created {
            self.inner.misses.forget(&room_id);
        }
        let outcome = result_label(&result);
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
            tokio::spawn(Drain::new(Arc::clone(&self.inner), room_id, cell).run());
        }
        // The drain task always answers; a lost answer means it died mid-batch.
        answer.await.unwrap_or_else(|_| Err(RoomError::unknown_outcome()))
    }

    /// Open rooms loaded in memory and their members (with `joined_at_ms`) last seen at or
    /// before `cutoff_ms` (for the presence worker).
    /// Only rooms this node owns: a room's presence lives at its owner.
    pub async fn stale_members(&self, cutoff_ms: i64) -> Vec<(RoomId, Vec<(UserId, i64)>)> {
        let mut stale = self.inner.cells.stale_members(cutoff_ms).await;
        stale.retain(|(room_id, _)| self.owns(room_id));
        stale
    }

    /// The open rooms this node owns with no member whose last command is at least
    /// `idle_after` old on the database clock (for the idle closer), from a scan of every
    /// room's in pages of `page` room ids, until it found `limit` of its own.
    pub async fn idle_rooms(
        &self,
        idle_after: Duration,
        page: u32,
        limit: usize,
    ) -> Result<Vec<RoomId>, RoomError> {
        let repo = self.inner.commit.repo();
        let (mut after, mut mine) = (String::new(), Vec::new());
        loop {
            let ids = repo.idle_rooms(idle_after, &after, page).await?;
            let full = ids.len() == page as usize;
            if let Some(last) = ids.last() {
                after.clone_from(last);
            }
            mine.extend(
                ids.into_iter().filter_map(|id| RoomId::parse(id).ok()).filter(|room| self.owns(room)),
            );
            if !full || mine.len() >= limit {
                mine.truncate(limit);
                return Ok(mine);
            }
        }
    }

    /// The seat requests and invitations due at `now_ms` of the rooms this node owns after
    /// `after` (`(room_id, user_id)`, key order), from a scan of every room's in pages of
    /// `page`, until it found `limit` of its own; with where the next scan goes on from
    /// (`None`: it reached the end).
    pub async fn due_seat_requests(
        &self,
        now_ms: i64,
        after: (String, String),
        page: u32,
        limit: usize,
    ) -> Result<(Vec<DueSeatRequest>, Option<(String, String)>), RoomError> {
        let repo = self.inner.commit.repo();
        let (mut after, mut mine) = (after, Vec::new());
        loop {
            let rows = repo.due_seat_requests(now_ms, (&after.0, &after.1), page).await?;
            let full = rows.len() == page as usize;
            if let Some(last) = rows.last() {
                after = (last.room_id.clone(), last.user_id.clone());
            }
            let owned =
                |r: &DueSeatRequest| RoomId::parse(r.room_id.as_str()).is_ok_and(|room| self.owns(&room));
            mine.extend(rows.into_iter().filter(owned));
            if !full {
                return Ok((mine, None));
            }
            if mine.len() >= limit {
                return Ok((mine, Some(after)));
            }
        }
    }

    /// Deletes every room's mutes and bans that ended (database clock); how many went.
    pub async fn prune_restrictions(&self) -> Result<u64, RoomError> {
        Ok(self.inner.commit.repo().prune_restrictions().await?)
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

    /// Sends again the gift refunds the wallet has not confirmed, recorded at least
    /// `older_than` ago, of the rooms this node owns; returns how many the wallet confirmed now.
    pub async fn finish_refunds(&self, older_than: Duration) -> usize {
        let ownership = &self.inner.options.ownership;
        self.inner.payments.finish_refunds(older_than, |room| ownership.owns(room)).await
    }

    /// How many cells are in memory.
    pub fn cell_count(&self) -> usize {
        self.inner.cells.len()
    }

    /// True when this node may serve `room_id` now.
    pub fn owns(&self, room_id: &RoomId) -> bool {
        self.inner.options.ownership.owns(room_id.as_str())
    }
}

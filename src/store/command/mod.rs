//! [`CommandStore`]: what the command path stores — rooms (snapshot, members, gift totals) and
//! the command log, written together with the commands' outbox rows in one transaction; its
//! reads and marks of those rows (delivered when it published them itself, parked when IM
//! refused one alone for its content, released to the worker when it gave up, their status on
//! replay) and a room's event history; the refunds of gifts that committed nothing — and its
//! one SQL implementation, for [`SqlRepository`] over any [`Backend`].
//!
//! Beside it: the values it takes and answers (`types.rs`), the commit and load transactions
//! (`commit.rs`), their statements (`commit_sql.rs`, `read_sql.rs`), the refunds'
//! (`refund_sql.rs`), those on the rows it committed (`outbox_sql.rs`), and the row shapes read
//! back (`rows.rs`).

mod commit;
mod commit_sql;
mod outbox_sql;
mod read_sql;
mod refund_sql;
mod rows;
mod types;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use self::rows::{CommandRow, HistoryRow, VersionRow};
pub use self::types::{
    AttributeChanges, AttributeRow, CommandKey, CommitError, DueSeatRequest, GiftTotalRow, HistoryEvent,
    LoggedCommand, MemberChanges, NewOutboxRow, RestrictionChanges, RestrictionRow, RoomCommit,
    SeatRequestChanges, SeatRequestRow, SnapshotWrite, StoredCommand, StoredRoom,
};
use crate::store::backend::run::Run;
use crate::store::backend::{Backend, SqlRepository};
use crate::store::error::{StoreError, short_error};
use crate::store::outbox_row::OutboxStatus;

/// Ended mutes and bans one prune statement deletes at most.
pub const PRUNE_BATCH: u32 = 1_000;

/// The command path's store, shared by the room service's steps.
pub type SharedCommandStore = Arc<dyn CommandStore>;

/// The command path's storage; see the module docs.
#[async_trait]
pub trait CommandStore: Send + Sync {
    /// A persisted room — snapshot, members, gift totals as of one version — if any.
    async fn load_room(&self, room_id: &str) -> Result<Option<StoredRoom>, StoreError>;

    /// The stored version of a room, if it exists (cheap: the snapshot row alone).
    async fn room_version(&self, room_id: &str) -> Result<Option<u64>, StoreError>;

    /// The log rows that may be the command `key` names, if it was ever committed: its
    /// caller's, and one logged before commands had callers under the same `command_id` (the
    /// caller's row first). [`StoredCommand::belongs_to`] says which is the caller's.
    async fn find_command(&self, key: &CommandKey) -> Result<Vec<StoredCommand>, StoreError>;

    /// The log rows of whichever of these command ids were ever committed, by any caller.
    async fn find_commands(&self, command_ids: &[String]) -> Result<Vec<StoredCommand>, StoreError>;

    /// Records that the debit under the wallet key `wallet_key` of a gift in `room_id` was
    /// refunded (nothing committed), so that a retry under the same key is refused; recording
    /// it again is a no-op.
    async fn record_refund(&self, wallet_key: &str, room_id: &str) -> Result<(), StoreError>;

    /// True when the debit under `wallet_key` was refunded ([`CommandStore::record_refund`]).
    async fn is_refunded(&self, wallet_key: &str) -> Result<bool, StoreError>;

    /// Records that the wallet confirmed the refund under `wallet_key`.
    async fn finish_refund(&self, wallet_key: &str) -> Result<(), StoreError>;

    /// Up to `limit` refunds recorded at least `older_than` ago (database clock) that the
    /// wallet has not confirmed, oldest first: `(wallet_key, room_id)`.
    async fn unfinished_refunds(
        &self,
        older_than: Duration,
        limit: u32,
    ) -> Result<Vec<(String, String)>, StoreError>;

    /// Best-effort mark of the events the command path published itself
    /// (`pending|retryable` → `delivered`). Returns how many rows changed.
    async fn mark_delivered(&self, event_ids: &[String]) -> Result<u64, StoreError>;

    /// Makes fresh `pending` rows the command path gave up publishing claimable at once, for
    /// the outbox worker. Returns how many rows changed.
    async fn release_pending(&self, event_ids: &[String]) -> Result<u64, StoreError>;

    /// Parks the fresh `pending` row of `event_id` the command path still guards (its claim
    /// guard not passed: no worker holds it or can claim it meanwhile): `failed` with `reason`
    /// and `error` (shortened to what `last_error` holds), one attempt spent, as the worker
    /// parks a row. True when it was parked; false when the row is no longer the command
    /// path's (then the worker decides).
    async fn park_pending(&self, event_id: &str, reason: &str, error: &str) -> Result<bool, StoreError>;

    /// Guards the fresh `pending` rows of `event_ids` the command path still guards for `guard`
    /// from now (database clock), fenced as [`CommandStore::park_pending`]. Returns how many
    /// rows changed: fewer than asked means some are no longer the command path's.
    async fn extend_guard(&self, event_ids: &[String], guard: Duration) -> Result<u64, StoreError>;

    /// True when a row of `room_id` is not delivered yet (pending, retryable or delivering;
    /// parked rows do not count).
    async fn has_undelivered(&self, room_id: &str) -> Result<bool, StoreError>;

    /// The current delivery status of these events (a replayed command answers with it).
    async fn outbox_statuses(&self, event_ids: &[String]) -> Result<Vec<(String, OutboxStatus)>, StoreError>;

    /// The room's IM events with `room_version` in `after+1..=up_to`, in version order, each
    /// with its age (database clock): at most `up_to - after` rows, one index range.
    async fn room_events_after(
        &self,
        room_id: &str,
        after: u64,
        up_to: u64,
    ) -> Result<Vec<HistoryEvent>, StoreError>;

    /// One transaction: the commands' log rows, outbox rows (`pending`, claimable after
    /// `claim_after`), member and gift rows, and the snapshot fenced on
    /// `expected_version`.
    async fn commit_room(&self, commit: &RoomCommit) -> Result<(), CommitError>;

    /// Deletes every room's mutes and bans that ended (database clock), in batches of
    /// `PRUNE_BATCH` (no statement holds many rows): they are pruned without a command.
    /// Returns how many rows went.
    async fn prune_restrictions(&self) -> Result<u64, StoreError>;

    /// Up to `limit` open rooms with ids after `after` (room id order), without a member row,
    /// whose snapshot was last written at least `idle_after` ago (database clock).
    async fn idle_rooms(
        &self,
        idle_after: Duration,
        after: &str,
        limit: u32,
    ) -> Result<Vec<String>, StoreError>;

    /// How many open rooms other than `except_room` `owner_id` owns: one count on the owner's
    /// index of `room_snapshot` (rooms on every node of a cluster).
    async fn open_rooms_owned(&self, owner_id: &str, except_room: &str) -> Result<u64, StoreError>;

    /// Up to `limit` pending seat requests and invitations of every room due at `now_ms` (the
    /// scanning node's clock; a request's expiry was set on its owner's), after `after`
    /// (`(room_id, user_id)`, key order).
    async fn due_seat_requests(
        &self,
        now_ms: i64,
        after: (&str, &str),
        limit: u32,
    ) -> Result<Vec<DueSeatRequest>, StoreError>;
}

#[async_trait]
impl<DB: Backend> CommandStore for SqlRepository<DB> {
    async fn load_room(&self, room_id: &str) -> Result<Option<StoredRoom>, StoreError> {
        commit::load_room::<DB>(self.pool.begin().await?, room_id).await
    }

    async fn room_version(&self, room_id: &str) -> Result<Option<u64>, StoreError> {
        let mut q = read_sql::room_version::<DB>(room_id, false);
        let row = q.fetch_optional::<VersionRow>(&self.pool).await?;
        Ok(row.map(|r| r.version.max(0) as u64))
    }

    async fn find_command(&self, key: &CommandKey) -> Result<Vec<StoredCommand>, StoreError> {
        let mut q = read_sql::find_command::<DB>(key);
        let rows = q.fetch_all::<CommandRow>(&self.pool).await?;
        let mut rows: Vec<StoredCommand> = rows.into_iter().map(StoredCommand::from).collect();
        rows.sort_by_key(|r| r.caller != key.caller);
        Ok(rows)
    }

    async fn find_commands(&self, command_ids: &[String]) -> Result<Vec<StoredCommand>, StoreError> {
        if command_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = read_sql::find_commands::<DB>(command_ids);
        let rows = q.fetch_all::<CommandRow>(&self.pool).await?;
        Ok(rows.into_iter().map(StoredCommand::from).collect())
    }

    async fn prune_restrictions(&self) -> Result<u64, StoreError> {
        let mut pruned = 0;
        loop {
            let mut ended = read_sql::ended_restrictions::<DB>(PRUNE_BATCH);
            let rows = ended.fetch_all::<(String, String, String)>(&self.pool).await?;
            if !rows.is_empty() {
                pruned += read_sql::delete_restrictions::<DB>(&rows).execute(&self.pool).await?;
            }
            if rows.len() < PRUNE_BATCH as usize {
                return Ok(pruned);
            }
        }
    }

    async fn idle_rooms(
        &self,
        idle_after: Duration,
        after: &str,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        let mut q = read_sql::idle_rooms::<DB>(idle_after, after, limit);
        Ok(q.fetch_all::<(String,)>(&self.pool).await?.into_iter().map(|(id,)| id).collect())
    }

    async fn open_rooms_owned(&self, owner_id: &str, except_room: &str) -> Result<u64, StoreError> {
        let mut q = read_sql::open_rooms_owned::<DB>(owner_id, except_room);
        let (count,) = q.fetch_one::<(i64,)>(&self.pool).await?;
        Ok(count.max(0) as u64)
    }

    async fn due_seat_requests(
        &self,
        now_ms: i64,
        after: (&str, &str),
        limit: u32,
    ) -> Result<Vec<DueSeatRequest>, StoreError> {
        let mut q = read_sql::due_seat_requests::<DB>(now_ms, after, limit);
        Ok(q.fetch_all::<DueSeatRequest>(&self.pool).await?)
    }

    async fn record_refund(&self, wallet_key: &str, room_id: &str) -> Result<(), StoreError> {
        let mut q = refund_sql::record_refund::<DB>(wallet_key, room_id);
        q.execute(&self.pool).await?;
        Ok(())
    }

    async fn is_refunded(&self, wallet_key: &str) -> Result<bool, StoreError> {
        let mut q = refund_sql::find_refund::<DB>(wallet_key);
        Ok(q.fetch_optional::<()>(&self.pool).await?.is_some())
    }

    async fn finish_refund(&self, wallet_key: &str) -> Result<(), StoreError> {
        refund_sql::finish_refund::<DB>(wallet_key).execute(&self.pool).await?;
        Ok(())
    }

    async fn unfinished_refunds(
        &self,
        older_than: Duration,
        limit: u32,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let mut q = refund_sql::unfinished_refunds::<DB>(older_than, limit);
        Ok(q.fetch_all(&self.pool).await?)
    }

    async fn mark_delivered(&self, event_ids: &[String]) -> Result<u64, StoreError> {
        if event_ids.is_empty() {
            return Ok(0);
        }
        let mut q = outbox_sql::mark_delivered::<DB>(event_ids);
        Ok(q.execute(&self.pool).await?)
    }

    async fn release_pending(&self, event_ids: &[String]) -> Result<u64, StoreError> {
        if event_ids.is_empty() {
            return Ok(0);
        }
        let mut q = outbox_sql::release_pending::<DB>(event_ids);
        Ok(q.execute(&self.pool).await?)
    }

    async fn park_pending(&self, event_id: &str, reason: &str, error: &str) -> Result<bool, StoreError> {
        let mut q = outbox_sql::park_pending::<DB>(event_id, reason, &short_error(error));
        Ok(q.execute(&self.pool).await? == 1)
    }

    async fn extend_guard(&self, event_ids: &[String], guard: Duration) -> Result<u64, StoreError> {
        if event_ids.is_empty() {
            return Ok(0);
        }
        let mut q = outbox_sql::extend_guard::<DB>(event_ids, guard);
        Ok(q.execute(&self.pool).await?)
    }

    async fn room_events_after(
        &self,
        room_id: &str,
        after: u64,
        up_to: u64,
    ) -> Result<Vec<HistoryEvent>, StoreError> {
        let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let mut q = outbox_sql::room_events_after::<DB>(room_id, clamp(after), clamp(up_to));
        let rows = q.fetch_all::<HistoryRow>(&self.pool).await?;
        Ok(rows
            .into_iter()
            .map(|r| HistoryEvent {
                room_version: r.room_version.max(0) as u64,
                envelope: r.envelope,
                age: Duration::from_millis(r.age_ms.max(0) as u64),
            })
            .collect())
    }

    async fn has_undelivered(&self, room_id: &str) -> Result<bool, StoreError> {
        let mut q = outbox_sql::undelivered_in_room::<DB>(room_id);
        Ok(q.fetch_optional::<()>(&self.pool).await?.is_some())
    }

    async fn outbox_statuses(&self, event_ids: &[String]) -> Result<Vec<(String, OutboxStatus)>, StoreError> {
        if event_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = outbox_sql::outbox_statuses::<DB>(event_ids);
        let rows = q.fetch_all(&self.pool).await?;
        Ok(parse_statuses(rows.into_iter()))
    }

    async fn commit_room(&self, c: &RoomCommit) -> Result<(), CommitError> {
        commit::commit_room(self.pool.begin_with(DB::BEGIN_WRITE).await?, c).await
    }
}

/// Parses `(event_id, status)` pairs, skipping statuses this version does not know.
fn parse_statuses(rows: impl Iterator<Item = (String, String)>) -> Vec<(String, OutboxStatus)> {
    rows.filter_map(|(id, status)| status.parse().ok().map(|s| (id, s))).collect()
}

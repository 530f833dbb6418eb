//! [`CommandStore`]: what the command path stores — rooms (snapshot, members, gift totals) and
//! the command log, written together with the commands' outbox rows in one transaction — and
//! reads and marks of those rows (delivered when it published them itself, released to the
//! worker when it gave up, their status on replay); and its one SQL implementation over any [`Dialect`](super::sql::Dialect)
//! ([`impl_command_store`]).

use std::time::Duration;

use async_trait::async_trait;

use super::outbox_types::OutboxStatus;
use super::types::{CommandKey, CommitError, RoomCommit, StoreError, StoredCommand, StoredRoom};

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

    /// True when a row of `room_id` is not delivered yet (pending, retryable or delivering;
    /// parked rows do not count).
    async fn has_undelivered(&self, room_id: &str) -> Result<bool, StoreError>;

    /// The current delivery status of these events (a replayed command answers with it).
    async fn outbox_statuses(&self, event_ids: &[String]) -> Result<Vec<(String, OutboxStatus)>, StoreError>;

    /// The room's IM events with `room_version` in `after+1..=up_to`, committed within `max_age`
    /// (database clock), in version order, at most `limit`: `(room_version, envelope)`.
    async fn room_events_after(
        &self,
        room_id: &str,
        after: u64,
        up_to: u64,
        max_age: Duration,
        limit: u32,
    ) -> Result<Vec<(u64, String)>, StoreError>;

    /// One transaction: the commands' log rows, outbox rows (`pending`, claimable after
    /// `claim_after`), member and gift rows, and the snapshot fenced on
    /// `expected_version`.
    async fn commit_room(&self, commit: &RoomCommit) -> Result<(), CommitError>;
}

/// [`CommandStore`] for `SqlRepository<$db>`.
macro_rules! impl_command_store {
    ($db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::CommandStore for $crate::store::SqlRepository<$db> {
            async fn load_room(
                &self,
                room_id: &str,
            ) -> Result<Option<$crate::store::StoredRoom>, $crate::store::StoreError> {
                $crate::store::flows::load_room::<$db>(self.pool.begin().await?, room_id).await
            }

            async fn room_version(&self, room_id: &str) -> Result<Option<u64>, $crate::store::StoreError> {
                use $crate::store::{room_sql, rows};
                let mut q = room_sql::room_version::<$db>(room_id, false);
                let row = q.build_query_as::<rows::VersionRow>().fetch_optional(&self.pool).await?;
                Ok(row.map(|r| r.version.max(0) as u64))
            }

            async fn find_command(
                &self,
                key: &$crate::store::CommandKey,
            ) -> Result<Vec<$crate::store::StoredCommand>, $crate::store::StoreError> {
                use $crate::store::{StoredCommand, room_sql, rows};
                let mut q = room_sql::find_command::<$db>(key);
                let rows = q.build_query_as::<rows::CommandRow>().fetch_all(&self.pool).await?;
                let mut rows: Vec<StoredCommand> = rows.into_iter().map(StoredCommand::from).collect();
                rows.sort_by_key(|r| r.caller != key.caller);
                Ok(rows)
            }

            async fn find_commands(
                &self,
                command_ids: &[String],
            ) -> Result<Vec<$crate::store::StoredCommand>, $crate::store::StoreError> {
                use $crate::store::{StoredCommand, room_sql, rows};
                if command_ids.is_empty() {
                    return Ok(Vec::new());
                }
                let mut q = room_sql::find_commands::<$db>(command_ids);
                let rows = q.build_query_as::<rows::CommandRow>().fetch_all(&self.pool).await?;
                Ok(rows.into_iter().map(StoredCommand::from).collect())
            }

            async fn record_refund(
                &self,
                wallet_key: &str,
                room_id: &str,
            ) -> Result<(), $crate::store::StoreError> {
                let mut q = $crate::store::room_sql::record_refund::<$db>(wallet_key, room_id);
                q.build().execute(&self.pool).await?;
                Ok(())
            }

            async fn is_refunded(&self, wallet_key: &str) -> Result<bool, $crate::store::StoreError> {
                let mut q = $crate::store::room_sql::find_refund::<$db>(wallet_key);
                Ok(q.build().fetch_optional(&self.pool).await?.is_some())
            }

            async fn finish_refund(&self, wallet_key: &str) -> Result<(), $crate::store::StoreError> {
                $crate::store::room_sql::finish_refund::<$db>(wallet_key).build().execute(&self.pool).await?;
                Ok(())
            }

            async fn unfinished_refunds(
                &self,
                older_than: std::time::Duration,
                limit: u32,
            ) -> Result<Vec<(String, String)>, $crate::store::StoreError> {
                let mut q = $crate::store::room_sql::unfinished_refunds::<$db>(older_than, limit);
                Ok(q.build_query_as::<(String, String)>().fetch_all(&self.pool).await?)
            }

            async fn mark_delivered(&self, event_ids: &[String]) -> Result<u64, $crate::store::StoreError> {
                if event_ids.is_empty() {
                    return Ok(0);
                }
                let mut q = $crate::store::sync_sql::mark_delivered::<$db>(event_ids);
                Ok(q.build().execute(&self.pool).await?.rows_affected())
            }

            async fn release_pending(&self, event_ids: &[String]) -> Result<u64, $crate::store::StoreError> {
                if event_ids.is_empty() {
                    return Ok(0);
                }
                let mut q = $crate::store::sync_sql::release_pending::<$db>(event_ids);
                Ok(q.build().execute(&self.pool).await?.rows_affected())
            }

            async fn room_events_after(
                &self,
                room_id: &str,
                after: u64,
                up_to: u64,
                max_age: std::time::Duration,
                limit: u32,
            ) -> Result<Vec<(u64, String)>, $crate::store::StoreError> {
                let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
                let age = i64::try_from(max_age.as_millis()).unwrap_or(i64::MAX);
                let mut q = $crate::store::sync_sql::room_events_after::<$db>(
                    room_id,
                    clamp(after),
                    clamp(up_to),
                    age,
                    i64::from(limit),
                );
                let rows =
                    q.build_query_as::<$crate::store::rows::HistoryRow>().fetch_all(&self.pool).await?;
                Ok(rows.into_iter().map(|r| (r.room_version.max(0) as u64, r.envelope)).collect())
            }

            async fn has_undelivered(&self, room_id: &str) -> Result<bool, $crate::store::StoreError> {
                let mut q = $crate::store::sync_sql::undelivered_in_room::<$db>(room_id);
                Ok(q.build().fetch_optional(&self.pool).await?.is_some())
            }

            async fn outbox_statuses(
                &self,
                event_ids: &[String],
            ) -> Result<Vec<(String, $crate::store::OutboxStatus)>, $crate::store::StoreError> {
                use sqlx::Row;
                if event_ids.is_empty() {
                    return Ok(Vec::new());
                }
                let mut q = $crate::store::sync_sql::outbox_statuses::<$db>(event_ids);
                let rows = q.build().fetch_all(&self.pool).await?;
                Ok($crate::store::outbox_types::parse_statuses(rows.iter().map(|r| (r.get(0), r.get(1)))))
            }

            async fn commit_room(
                &self,
                c: &$crate::store::RoomCommit,
            ) -> Result<(), $crate::store::CommitError> {
                use $crate::store::sql::Dialect;
                $crate::store::flows::commit_room(self.pool.begin_with(<$db>::BEGIN_WRITE).await?, c).await
            }
        }
    };
}

pub(super) use impl_command_store;

//! Operator storage operations on `room_outbox` (SPEC §11): look a row up by event id, requeue
//! parked or retryable rows, and purge old delivered rows in small batches by primary key.
//!
//! [`AdminRepository`] is a supertrait of [`Repository`](super::Repository), so a
//! [`SharedRepository`](super::SharedRepository) offers these too; it is implemented for each
//! backend in its own file (`mysql_admin.rs`, `sqlite_admin.rs`). Every write here is fenced on
//! the row status: `delivering` rows (a worker holds their lease) and `delivered` rows are never
//! requeued, and only `delivered` rows are ever deleted. Ages use the database's clock.

use std::time::Duration;

use async_trait::async_trait;

use super::types::{OutboxRow, OutboxStatus, StoreError};

/// Largest purge batch: one `DELETE` touches at most this many rows.
pub const MAX_PURGE_BATCH: u32 = 1000;
/// Largest requeue batch (by status).
pub const MAX_REQUEUE_BATCH: u32 = 1000;
/// The statuses a requeue moves back to `pending`.
pub const REQUEUEABLE: [OutboxStatus; 2] = [OutboxStatus::Retryable, OutboxStatus::Failed];
/// Prefix of the MySQL advisory lock (`GET_LOCK`) that lets one instance at a time purge; the
/// database name follows it, so services sharing a server do not block each other.
pub const PURGE_LOCK_PREFIX: &str = "room_outbox_retention";

/// Which rows a requeue targets.
#[derive(Debug, Clone, Copy)]
pub enum RequeueTarget<'a> {
    /// These events, where their status is requeueable.
    EventIds(&'a [String]),
    /// One page of rows in `status` (which must be one of [`REQUEUEABLE`]) with an id above
    /// `after_id`, by ascending id, at most `limit` (capped at [`MAX_REQUEUE_BATCH`]).
    Status {
        /// `retryable` or `failed`.
        status: OutboxStatus,
        /// Only ids greater than this (the caller's cursor).
        after_id: i64,
        /// At most this many rows.
        limit: u32,
    },
}

/// A row a requeue moved back to `pending`.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, serde::Serialize)]
pub struct RequeuedRow {
    /// Primary key.
    pub id: i64,
    /// The event.
    pub event_id: String,
}

/// Held by the one instance allowed to purge. On MySQL it owns the session holding the advisory
/// lock: [`PurgeLock::release`] releases it, and dropping it closes the session, which releases
/// it too. On SQLite (one file, deletes are idempotent) it holds nothing.
#[derive(Debug)]
pub struct PurgeLock {
    pub(super) session: Option<(sqlx::MySqlConnection, String)>,
}

impl PurgeLock {
    /// A lock that holds nothing (SQLite).
    pub(super) fn none() -> Self {
        Self { session: None }
    }

    /// Releases the lock and closes its session.
    pub async fn release(self) -> Result<(), StoreError> {
        use sqlx::Connection;
        if let Some((mut conn, name)) = self.session {
            sqlx::query("SELECT RELEASE_LOCK(?)").bind(&name).execute(&mut conn).await?;
            conn.close().await?;
        }
        Ok(())
    }
}

/// Operator operations on `room_outbox`; see the module docs.
#[async_trait]
pub trait AdminRepository: Send + Sync {
    /// The row of `event_id`, if any.
    async fn find_outbox(&self, event_id: &str) -> Result<Option<OutboxRow>, StoreError>;

    /// Moves the targeted `retryable`/`failed` rows back to `pending`, claimable at once
    /// (`lock_until_ms` = database now, `worker_id` cleared, `retry_count` and `last_error`
    /// kept). Rows in any other status are left alone. Returns the rows changed, by id.
    async fn requeue_outbox(&self, target: RequeueTarget<'_>) -> Result<Vec<RequeuedRow>, StoreError>;

    /// How many `delivered` rows were delivered more than `older_than` ago (and, with
    /// `up_to`, have an id up to it).
    async fn count_purgeable(&self, older_than: Duration, up_to: Option<i64>) -> Result<u64, StoreError>;

    /// Deletes one batch, by ascending primary key, of at most `limit` (capped at
    /// [`MAX_PURGE_BATCH`]) `delivered` rows delivered more than `older_than` ago. `up_to`
    /// (the consumers' floor, [`ConsumerRepository::consumers_floor`]) keeps every row above it:
    /// an event is deleted only once every enabled consumer has passed it. Returns how many rows
    /// were deleted; fewer than `limit` means nothing older is left.
    ///
    /// [`ConsumerRepository::consumers_floor`]: super::ConsumerRepository::consumers_floor
    async fn purge_delivered_batch(
        &self,
        older_than: Duration,
        up_to: Option<i64>,
        limit: u32,
    ) -> Result<u64, StoreError>;

    /// Tries, without waiting, to become the one instance that purges. `None`: another
    /// instance holds the lock.
    async fn try_purge_lock(&self) -> Result<Option<PurgeLock>, StoreError>;
}

/// `older_than` in milliseconds for SQL, capped at about 100 years so `now - age` never
/// overflows a BIGINT.
pub(super) fn age_ms(older_than: Duration) -> i64 {
    const CAP_MS: u128 = 100 * 365 * 24 * 3600 * 1000;
    older_than.as_millis().min(CAP_MS) as i64
}

/// A batch limit within `1..=max`.
pub(super) fn batch_limit(limit: u32, max: u32) -> i64 {
    i64::from(limit.clamp(1, max))
}

/// Whether a requeue by status names a requeueable status.
pub(super) fn check_requeueable(status: OutboxStatus) -> Result<(), StoreError> {
    if REQUEUEABLE.contains(&status) {
        Ok(())
    } else {
        Err(StoreError::Config(format!(
            "cannot requeue rows in status {}: only retryable and failed rows are requeued",
            status.as_str()
        )))
    }
}

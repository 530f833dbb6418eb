//! Storage: one [`Repository`] trait over the tables (`room_command_log`, `room_outbox`,
//! `room_snapshot`, `room_member`, `room_gift_total`), implemented for MySQL/MariaDB and SQLite.
//!
//! The command path commits one or more commands of a room — their log rows, outbox rows, the
//! small snapshot and the member and gift rows they changed — in one transaction
//! ([`Repository::commit_room`]); the outbox worker claims and marks rows;
//! the admin endpoints read stats. Every time comparison on outbox rows uses the database's
//! clock, never the node's.

mod admin;
mod consumer;
mod consumer_impl;
mod consumer_sql;
mod flows;
mod lease;
mod lease_sql;
mod mysql;
mod mysql_admin;
mod room_sql;
mod rows;
mod sql;
mod sqlite;
mod sqlite_admin;
mod types;

use std::sync::Arc;

use async_trait::async_trait;

pub use admin::{
    AdminRepository, MAX_PURGE_BATCH, MAX_REQUEUE_BATCH, PURGE_LOCK_PREFIX, PurgeLock, REQUEUEABLE,
    RequeueTarget, RequeuedRow,
};
pub use consumer::{AuditEntry, ConsumerRepository, ConsumerRow, EventRow, ResetReport, ResetTo};
pub use lease::{ClusterNode, LeaseRepository, ShardLease};
pub use mysql::MySqlRepository;
pub use sqlite::SqliteRepository;
pub use types::{
    Claim, ClaimScope, CommitError, GiftTotalRow, LoggedCommand, Mark, MarkReport, MemberChanges,
    NewOutboxRow, OutboxQuery, OutboxRow, OutboxStats, OutboxStatus, PoolStats, PublishResult, RoomCommit,
    RoomHead, SnapshotWrite, StoreError, StoredCommand, StoredRoom,
};

/// Which database a repository talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// MySQL 8 or MariaDB >= 10.6.
    MySql,
    /// Embedded SQLite file.
    Sqlite,
}

/// Shared handle to the repository.
pub type SharedRepository = Arc<dyn Repository>;

/// Everything the service stores. One conformance suite (`tests/it/store.rs`) runs unchanged
/// against both implementations. The operator operations ([`AdminRepository`]), the shard leases
/// ([`LeaseRepository`]) and the event consumers' positions ([`ConsumerRepository`]) come with it.
#[async_trait]
pub trait Repository:
    AdminRepository + LeaseRepository + ConsumerRepository + Send + Sync + std::fmt::Debug + 'static
{
    /// Which database this is.
    fn backend(&self) -> Backend;

    /// Cheap round trip, for readiness.
    async fn ping(&self) -> Result<(), StoreError>;

    /// A persisted room — snapshot, members, gift totals as of one version — if any.
    async fn load_room(&self, room_id: &str) -> Result<Option<StoredRoom>, StoreError>;

    /// The stored version of a room, if it exists (cheap: the snapshot row alone).
    async fn room_version(&self, room_id: &str) -> Result<Option<u64>, StoreError>;

    /// The logged outcome of a command, if it was ever committed.
    async fn find_command(&self, command_id: &str) -> Result<Option<StoredCommand>, StoreError>;

    /// The logged outcomes of whichever of these commands were ever committed.
    async fn find_commands(&self, command_ids: &[String]) -> Result<Vec<StoredCommand>, StoreError>;

    /// One transaction: the commands' log rows, outbox rows (`pending`, claimable after
    /// `publish_timeout`), member and gift rows, and the snapshot fenced on
    /// `expected_version`.
    async fn commit_room(&self, commit: &RoomCommit) -> Result<(), CommitError>;

    /// Best-effort mark of synchronously published events (`pending|retryable` → `delivered`).
    /// Returns how many rows changed.
    async fn mark_delivered(&self, event_ids: &[String]) -> Result<u64, StoreError>;

    /// Claims up to `claim.limit` claimable rows for `claim.worker_id` under a lease; returns
    /// them in claim order (the order they fell due, then id).
    async fn claim_outbox(&self, claim: &Claim) -> Result<Vec<OutboxRow>, StoreError>;

    /// Records a claimed batch's results, fenced on `status='delivering' AND worker_id`.
    async fn finish_claimed(
        &self,
        worker_id: &str,
        results: &[PublishResult],
    ) -> Result<MarkReport, StoreError>;

    /// Hands claimed rows that were never published back (a worker stopping mid-batch):
    /// fenced on `status='delivering' AND worker_id`, they return to `pending` (`retryable`
    /// when `retry_count > 0`) with `lock_until_ms` = database now, so any worker can claim
    /// them at once instead of after the lease; `retry_count` is unchanged. Returns how many
    /// rows changed.
    async fn release_claimed(&self, worker_id: &str, ids: &[i64]) -> Result<u64, StoreError>;

    /// The oldest undelivered row (pending, retryable or delivering) of each of `rooms`,
    /// leaving out the rows held by the claims in `own` (this worker's, published in order in
    /// memory). Rooms with nothing undelivered are absent.
    async fn room_heads(&self, rooms: &[String], own: &[String]) -> Result<Vec<RoomHead>, StoreError>;

    /// True when a row of `room_id` older than the row of `event_id` is not delivered yet
    /// (pending, retryable or delivering).
    async fn has_earlier_undelivered(&self, room_id: &str, event_id: &str) -> Result<bool, StoreError>;

    /// Extends the lease of every row `worker_id` still holds to `lease` from now (database
    /// clock). Returns how many rows.
    async fn renew_lease(&self, worker_id: &str, lease: std::time::Duration) -> Result<u64, StoreError>;

    /// How long until the next `pending` or `retryable` row becomes claimable (zero when one
    /// already is); `None` when there is none.
    async fn next_claimable_in(&self) -> Result<Option<std::time::Duration>, StoreError>;

    /// Makes fresh `pending` rows the synchronous path gave up on claimable at once (first). Returns how
    /// many rows changed.
    async fn release_pending(&self, event_ids: &[String]) -> Result<u64, StoreError>;

    /// Counts per undelivered status and the age of the oldest undelivered row.
    async fn outbox_stats(&self) -> Result<OutboxStats, StoreError>;

    /// Rows for the admin listing, by ascending id.
    async fn list_outbox(&self, query: &OutboxQuery) -> Result<Vec<OutboxRow>, StoreError>;

    /// Current status of the given events (for replayed command responses).
    async fn outbox_statuses(&self, event_ids: &[String]) -> Result<Vec<(String, OutboxStatus)>, StoreError>;

    /// Connections of the pool, in use and idle, and its upper bound (no round trip).
    fn pool_stats(&self) -> PoolStats;

    /// Closes the pool; waits for connections in use to be returned.
    async fn close(&self);
}

/// Opens the database named by `url` (`mysql://`, `mariadb://` or `sqlite:`), checks the
/// engine, and runs migrations when asked.
pub async fn connect(
    url: &str,
    max_connections: u32,
    run_migrations: bool,
) -> Result<SharedRepository, StoreError> {
    open(url, max_connections, Some(run_migrations)).await
}

/// Opens the existing database at `url` for an operator tool: never migrates, and never
/// creates a SQLite file.
pub async fn connect_existing(url: &str, max_connections: u32) -> Result<SharedRepository, StoreError> {
    open(url, max_connections, None).await
}

/// `run_migrations: None` opens an existing database as it is.
async fn open(
    url: &str,
    max_connections: u32,
    migrations: Option<bool>,
) -> Result<SharedRepository, StoreError> {
    let run_migrations = migrations == Some(true);
    if url.starts_with("sqlite:") {
        let repo = if migrations.is_some() {
            SqliteRepository::connect(url, max_connections).await?
        } else {
            SqliteRepository::connect_existing(url, max_connections).await?
        };
        if run_migrations {
            repo.migrate().await?;
        }
        Ok(Arc::new(repo))
    } else if url.starts_with("mysql:") || url.starts_with("mariadb:") {
        let url = url.replacen("mariadb:", "mysql:", 1);
        let repo = MySqlRepository::connect(&url, max_connections).await?;
        repo.check_engine().await?;
        if run_migrations {
            repo.migrate().await?;
        }
        Ok(Arc::new(repo))
    } else {
        Err(StoreError::Config("database.url must start with sqlite:, mysql: or mariadb:".into()))
    }
}

/// Truncates an error message to what fits `last_error` (512 chars), on a char boundary.
pub fn short_error(message: &str) -> String {
    const MAX: usize = 512;
    if message.len() <= MAX {
        return message.to_owned();
    }
    let mut end = MAX - 3;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &message[..end])
}

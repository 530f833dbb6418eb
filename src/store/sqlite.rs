//! [`Repository`] on an embedded SQLite file (the default: `cargo run` works anywhere).
//!
//! SQLite has one writer at a time, so the claim is a single atomic
//! `UPDATE ... WHERE id IN (SELECT ... LIMIT n) RETURNING ...`; WAL mode lets readers run
//! beside it.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Row, Sqlite};

use super::consumer_impl;
use super::flows;
use super::lease_sql;
use super::room_sql;
use super::rows;
use super::sql;
use super::types::*;
use super::{Backend, Repository};

/// SQLite repository.
#[derive(Debug, Clone)]
pub struct SqliteRepository {
    pool: SqlitePool,
}

impl SqliteRepository {
    /// Opens (creating when the URL says `mode=rwc`) the file and its parent directory.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        Self::open(url, max_connections, true).await
    }

    /// Opens an existing database file and never creates one (nor its directory), whatever
    /// `mode=` the URL asks for: the operator tools act on the service's database only.
    pub async fn connect_existing(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        Self::open(url, max_connections, false).await
    }

    async fn open(url: &str, max_connections: u32, create: bool) -> Result<Self, StoreError> {
        let mut options = SqliteConnectOptions::from_str(url)?
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(5));
        if !create {
            options = options.create_if_missing(false);
            let file = options.get_filename();
            if !file.exists() {
                return Err(StoreError::Config(format!(
                    "database.url: no SQLite database at {} (run the service or `room-service migrate` first)",
                    file.display()
                )));
            }
        }
        if let Some(dir) = options.get_filename().parent().filter(|d| create && !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                StoreError::Config(format!("database.url: cannot create directory {}: {e}", dir.display()))
            })?;
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(options)
            .await?;
        Ok(Self { pool })
    }

    /// The underlying pool (tests).
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Runs `migrations/sqlite`.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        sqlx::migrate!("migrations/sqlite").run(&self.pool).await?;
        Ok(())
    }
}

lease_sql::impl_lease_repository!(SqliteRepository, Sqlite);
consumer_impl::impl_consumer_repository!(SqliteRepository, Sqlite);

#[async_trait]
impl Repository for SqliteRepository {
    fn backend(&self) -> Backend {
        Backend::Sqlite
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn load_room(&self, room_id: &str) -> Result<Option<StoredRoom>, StoreError> {
        flows::load_room::<Sqlite>(self.pool.begin().await?, room_id).await
    }

    async fn room_version(&self, room_id: &str) -> Result<Option<u64>, StoreError> {
        let mut q = room_sql::room_version::<Sqlite>(room_id, false);
        let row = q.build_query_as::<rows::VersionRow>().fetch_optional(&self.pool).await?;
        Ok(row.map(|r| r.version.max(0) as u64))
    }

    async fn find_command(&self, command_id: &str) -> Result<Option<StoredCommand>, StoreError> {
        let mut q = room_sql::find_command::<Sqlite>(command_id);
        Ok(q.build_query_as::<rows::CommandRow>().fetch_optional(&self.pool).await?.map(StoredCommand::from))
    }

    async fn find_commands(&self, command_ids: &[String]) -> Result<Vec<StoredCommand>, StoreError> {
        if command_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = room_sql::find_commands::<Sqlite>(command_ids);
        Ok(q.build_query_as::<rows::CommandRow>()
            .fetch_all(&self.pool)
            .await?
            .into_iter()
            .map(StoredCommand::from)
            .collect())
    }

    async fn commit_room(&self, c: &RoomCommit) -> Result<(), CommitError> {
        // BEGIN IMMEDIATE: take the write lock up front instead of failing to upgrade later.
        flows::commit_room(self.pool.begin_with("BEGIN IMMEDIATE").await?, c).await
    }

    async fn mark_delivered(&self, event_ids: &[String]) -> Result<u64, StoreError> {
        if event_ids.is_empty() {
            return Ok(0);
        }
        Ok(sql::mark_delivered::<Sqlite>(event_ids).build().execute(&self.pool).await?.rows_affected())
    }

    async fn claim_outbox(&self, claim: &Claim) -> Result<Vec<OutboxRow>, StoreError> {
        // BEGIN IMMEDIATE: SQLite has one writer at a time; the claim takes it up front.
        flows::claim(self.pool.begin_with("BEGIN IMMEDIATE").await?, claim).await
    }

    async fn finish_claimed(
        &self,
        worker_id: &str,
        results: &[PublishResult],
    ) -> Result<MarkReport, StoreError> {
        if results.is_empty() {
            return Ok(MarkReport::default());
        }
        flows::finish_claimed(self.pool.begin_with("BEGIN IMMEDIATE").await?, worker_id, results).await
    }

    async fn release_claimed(&self, worker_id: &str, ids: &[i64]) -> Result<u64, StoreError> {
        if ids.is_empty() {
            return Ok(0);
        }
        Ok(sql::release_claimed::<Sqlite>(worker_id, ids).build().execute(&self.pool).await?.rows_affected())
    }

    async fn room_heads(&self, rooms: &[String], own: &[String]) -> Result<Vec<RoomHead>, StoreError> {
        if rooms.is_empty() {
            return Ok(Vec::new());
        }
        flows::room_heads::<Sqlite>(self.pool.begin().await?, rooms, own).await
    }

    async fn has_earlier_undelivered(&self, room_id: &str, event_id: &str) -> Result<bool, StoreError> {
        let mut q = sql::earlier_undelivered::<Sqlite>(room_id, event_id);
        Ok(q.build().fetch_optional(&self.pool).await?.is_some())
    }

    async fn next_claimable_in(&self) -> Result<Option<Duration>, StoreError> {
        let wait: Option<i64> =
            sql::next_claimable::<Sqlite>().build_query_scalar().fetch_one(&self.pool).await?;
        Ok(wait.map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))))
    }

    async fn renew_lease(&self, worker_id: &str, lease: Duration) -> Result<u64, StoreError> {
        Ok(sql::renew_lease::<Sqlite>(worker_id, lease).build().execute(&self.pool).await?.rows_affected())
    }

    async fn release_pending(&self, event_ids: &[String]) -> Result<u64, StoreError> {
        if event_ids.is_empty() {
            return Ok(0);
        }
        Ok(sql::release_pending::<Sqlite>(event_ids).build().execute(&self.pool).await?.rows_affected())
    }

    async fn outbox_stats(&self) -> Result<OutboxStats, StoreError> {
        let rows = sql::outbox_stats::<Sqlite>().build().fetch_all(&self.pool).await?;
        let groups = rows.iter().map(|r| (r.get(0), r.get(1), r.get(2), r.get(3))).collect();
        let mut stats = stats_from_groups(groups);
        if stats.failed > 0 {
            let parked = sql::parked_by_reason::<Sqlite>().build().fetch_all(&self.pool).await?;
            stats.parked_by_reason =
                parked.iter().map(|r| (r.get::<String, _>(0), r.get::<i64, _>(1).max(0) as u64)).collect();
        }
        Ok(stats)
    }

    async fn list_outbox(&self, query: &OutboxQuery) -> Result<Vec<OutboxRow>, StoreError> {
        Ok(sql::list_outbox::<Sqlite>(query).build_query_as::<OutboxRow>().fetch_all(&self.pool).await?)
    }

    async fn outbox_statuses(&self, event_ids: &[String]) -> Result<Vec<(String, OutboxStatus)>, StoreError> {
        if event_ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows = sql::outbox_statuses::<Sqlite>(event_ids).build().fetch_all(&self.pool).await?;
        Ok(parse_statuses(rows.iter().map(|r| (r.get(0), r.get(1)))))
    }

    fn pool_stats(&self) -> PoolStats {
        PoolStats::of(&self.pool)
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}

//! [`Repository`] on MySQL 8 / MariaDB >= 10.6 (production).
//!
//! Every session runs at READ COMMITTED (set on connect): REPEATABLE READ gap locks taken by
//! the claim would block the command path's inserts. The claim is one short transaction:
//! `SELECT id ... FOR UPDATE SKIP LOCKED` on `idx_room_outbox_claim`, then `UPDATE ... WHERE
//! id IN (...)`. No transaction is ever held across an IM call.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use sqlx::{Executor, MySql, Row};

use super::consumer_impl;
use super::flows;
use super::lease_sql;
use super::room_sql;
use super::rows;
use super::sql;
use super::types::*;
use super::{Backend, Repository};

/// MySQL/MariaDB repository.
#[derive(Debug, Clone)]
pub struct MySqlRepository {
    pool: MySqlPool,
}

impl MySqlRepository {
    /// Opens a pool of at most `max_connections`, every session at READ COMMITTED.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        let options = MySqlConnectOptions::from_str(url)?;
        let pool = MySqlPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(5))
            .after_connect(|conn, _meta| {
                Box::pin(async move {
                    conn.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED").await?;
                    // UNIX_TIMESTAMP(NOW(3)) is unambiguous only in a zone without DST.
                    conn.execute("SET SESSION time_zone = '+00:00'").await?;
                    Ok(())
                })
            })
            .connect_with(options)
            .await?;
        Ok(Self { pool })
    }

    /// The underlying pool (tests and benchmarks).
    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    /// Runs `migrations/mysql`.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        sqlx::migrate!("migrations/mysql").run(&self.pool).await?;
        Ok(())
    }

    /// Refuses engines on which `FOR UPDATE SKIP LOCKED` does not give disjoint claims:
    /// MariaDB before 10.6, MySQL before 8, and TiDB (which ignores `FOR UPDATE` there).
    pub async fn check_engine(&self) -> Result<(), StoreError> {
        let version: String = sqlx::query_scalar("SELECT VERSION()").fetch_one(&self.pool).await?;
        check_engine_version(&version).map_err(StoreError::Config)
    }
}

/// Decides from `SELECT VERSION()` whether the engine supports the claim.
pub(crate) fn check_engine_version(version: &str) -> Result<(), String> {
    let lower = version.to_ascii_lowercase();
    let numbers: Vec<u32> =
        version.split(|c: char| !c.is_ascii_digit()).take(2).map(|n| n.parse().unwrap_or(0)).collect();
    let (major, minor) = (numbers.first().copied().unwrap_or(0), numbers.get(1).copied().unwrap_or(0));
    let refuse = |why: &str| Err(format!("database engine {version:?} is not supported: {why}"));
    if lower.contains("tidb") {
        return refuse(
            "TiDB ignores FOR UPDATE next to SKIP LOCKED, so two workers could claim the same rows",
        );
    }
    if lower.contains("mariadb") {
        if (major, minor) < (10, 6) {
            return refuse("MariaDB >= 10.6 is required for SELECT ... FOR UPDATE SKIP LOCKED");
        }
    } else if major < 8 {
        return refuse("MySQL >= 8.0 is required for SELECT ... FOR UPDATE SKIP LOCKED");
    }
    Ok(())
}

lease_sql::impl_lease_repository!(MySqlRepository, MySql);
consumer_impl::impl_consumer_repository!(MySqlRepository, MySql);

#[async_trait]
impl Repository for MySqlRepository {
    fn backend(&self) -> Backend {
        Backend::MySql
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn load_room(&self, room_id: &str) -> Result<Option<StoredRoom>, StoreError> {
        flows::load_room::<MySql>(self.pool.begin().await?, room_id).await
    }

    async fn room_version(&self, room_id: &str) -> Result<Option<u64>, StoreError> {
        let mut q = room_sql::room_version::<MySql>(room_id, false);
        let row = q.build_query_as::<rows::VersionRow>().fetch_optional(&self.pool).await?;
        Ok(row.map(|r| r.version.max(0) as u64))
    }

    async fn find_command(&self, command_id: &str) -> Result<Option<StoredCommand>, StoreError> {
        let mut q = room_sql::find_command::<MySql>(command_id);
        Ok(q.build_query_as::<rows::CommandRow>().fetch_optional(&self.pool).await?.map(StoredCommand::from))
    }

    async fn find_commands(&self, command_ids: &[String]) -> Result<Vec<StoredCommand>, StoreError> {
        if command_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = room_sql::find_commands::<MySql>(command_ids);
        Ok(q.build_query_as::<rows::CommandRow>()
            .fetch_all(&self.pool)
            .await?
            .into_iter()
            .map(StoredCommand::from)
            .collect())
    }

    async fn commit_room(&self, c: &RoomCommit) -> Result<(), CommitError> {
        flows::commit_room(self.pool.begin().await?, c).await
    }

    async fn mark_delivered(&self, event_ids: &[String]) -> Result<u64, StoreError> {
        if event_ids.is_empty() {
            return Ok(0);
        }
        Ok(sql::mark_delivered::<MySql>(event_ids).build().execute(&self.pool).await?.rows_affected())
    }

    async fn claim_outbox(&self, claim: &Claim) -> Result<Vec<OutboxRow>, StoreError> {
        flows::claim(self.pool.begin().await?, claim).await
    }

    async fn finish_claimed(
        &self,
        worker_id: &str,
        results: &[PublishResult],
    ) -> Result<MarkReport, StoreError> {
        if results.is_empty() {
            return Ok(MarkReport::default());
        }
        flows::finish_claimed(self.pool.begin().await?, worker_id, results).await
    }

    async fn release_claimed(&self, worker_id: &str, ids: &[i64]) -> Result<u64, StoreError> {
        if ids.is_empty() {
            return Ok(0);
        }
        Ok(sql::release_claimed::<MySql>(worker_id, ids).build().execute(&self.pool).await?.rows_affected())
    }

    async fn room_heads(&self, rooms: &[String], own: &[String]) -> Result<Vec<RoomHead>, StoreError> {
        if rooms.is_empty() {
            return Ok(Vec::new());
        }
        flows::room_heads::<MySql>(self.pool.begin().await?, rooms, own).await
    }

    async fn has_earlier_undelivered(&self, room_id: &str, event_id: &str) -> Result<bool, StoreError> {
        let mut q = sql::earlier_undelivered::<MySql>(room_id, event_id);
        Ok(q.build().fetch_optional(&self.pool).await?.is_some())
    }

    async fn next_claimable_in(&self) -> Result<Option<Duration>, StoreError> {
        let wait: Option<i64> =
            sql::next_claimable::<MySql>().build_query_scalar().fetch_one(&self.pool).await?;
        Ok(wait.map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))))
    }

    async fn renew_lease(&self, worker_id: &str, lease: Duration) -> Result<u64, StoreError> {
        Ok(sql::renew_lease::<MySql>(worker_id, lease).build().execute(&self.pool).await?.rows_affected())
    }

    async fn release_pending(&self, event_ids: &[String]) -> Result<u64, StoreError> {
        if event_ids.is_empty() {
            return Ok(0);
        }
        Ok(sql::release_pending::<MySql>(event_ids).build().execute(&self.pool).await?.rows_affected())
    }

    async fn outbox_stats(&self) -> Result<OutboxStats, StoreError> {
        let rows = sql::outbox_stats::<MySql>().build().fetch_all(&self.pool).await?;
        let groups = rows.iter().map(|r| (r.get(0), r.get(1), r.get(2), r.get(3))).collect();
        let mut stats = stats_from_groups(groups);
        if stats.failed > 0 {
            let parked = sql::parked_by_reason::<MySql>().build().fetch_all(&self.pool).await?;
            stats.parked_by_reason =
                parked.iter().map(|r| (r.get::<String, _>(0), r.get::<i64, _>(1).max(0) as u64)).collect();
        }
        Ok(stats)
    }

    async fn list_outbox(&self, query: &OutboxQuery) -> Result<Vec<OutboxRow>, StoreError> {
        Ok(sql::list_outbox::<MySql>(query).build_query_as::<OutboxRow>().fetch_all(&self.pool).await?)
    }

    async fn outbox_statuses(&self, event_ids: &[String]) -> Result<Vec<(String, OutboxStatus)>, StoreError> {
        if event_ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows = sql::outbox_statuses::<MySql>(event_ids).build().fetch_all(&self.pool).await?;
        Ok(parse_statuses(rows.iter().map(|r| (r.get(0), r.get(1)))))
    }

    fn pool_stats(&self) -> PoolStats {
        PoolStats::of(&self.pool)
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::check_engine_version;

    #[test]
    fn engine_check_accepts_modern_engines_and_refuses_the_rest() {
        assert!(check_engine_version("10.11.19-MariaDB-0+deb12u1").is_ok());
        assert!(check_engine_version("10.6.0-MariaDB").is_ok());
        assert!(check_engine_version("8.0.36").is_ok());
        assert!(check_engine_version("10.5.20-MariaDB").unwrap_err().contains("10.6"));
        assert!(check_engine_version("5.7.44-log").unwrap_err().contains("8.0"));
        assert!(check_engine_version("8.0.11-TiDB-v7.5.0").unwrap_err().contains("TiDB"));
    }
}

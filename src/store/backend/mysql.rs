//! MySQL 8 / MariaDB >= 10.6 (production): its [`Backend`] impl, and what only it does —
//! opening the pool, its migrations and the engine check.
//!
//! Every session runs at READ COMMITTED (set on connect): REPEATABLE READ gap locks taken by
//! the claim would block the command path's inserts. The claim is one short transaction: the
//! rooms and their heads (plain reads on `idx_room_outbox_status_room` and
//! `idx_room_outbox_room`), `SELECT id ... WHERE id IN (...) FOR UPDATE SKIP LOCKED` of the rows
//! taken, then `UPDATE ... WHERE id IN (...)`. No transaction is ever held across an IM call.

use std::str::FromStr;

use futures::future::BoxFuture;
use sqlx::mysql::{MySqlConnectOptions, MySqlDatabaseError};
use sqlx::{Executor, MySql, Pool};

use super::open_writers::{OpenWriters, mysql_open_writers};
use super::purge_lock::{PurgeLock, mysql_purge_lock};
use super::{Backend, SqlRepository, assignments, written_alike};
use crate::store::error::StoreError;

/// The store on MySQL 8 / MariaDB >= 10.6 (production).
pub type MySqlRepository = SqlRepository<MySql>;

impl Backend for MySql {
    const NOW_MS: &'static str = "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)";
    const LOCKING_READ: &'static str = " FOR UPDATE";
    const SHARED_READ: &'static str = " LOCK IN SHARE MODE";
    const CLAIM_LOCK: &'static str = " FOR UPDATE SKIP LOCKED";
    const COLUMN_COLLATION: &'static str = " COLLATE utf8mb4_bin";
    const BEGIN_WRITE: &'static str = "BEGIN";
    fn upsert(_key: &str, columns: &[&str]) -> String {
        format!(" ON DUPLICATE KEY UPDATE {}", assignments(columns, |c| format!("VALUES({c})")))
    }
    fn index_hint(index: &str) -> String {
        format!(" FORCE INDEX ({index})")
    }
    written_alike!();
    // INNODB_TRX, read past its cache: see `mysql_open_writers`. The probe's transaction locks
    // the one room_cluster row: it always exists and nothing writes it.
    const OPEN_WRITERS: Option<OpenWriters> = Some(OpenWriters {
        begin: "SELECT id FROM room_cluster WHERE id = 1 LOCK IN SHARE MODE",
        count: mysql_open_writers,
    });
    fn access_denied(error: &sqlx::Error) -> bool {
        // 1227: PROCESS privilege missing; 1142/1044: no access to the table/schema.
        let code = error.as_database_error().and_then(|e| e.try_downcast_ref::<MySqlDatabaseError>());
        code.is_some_and(|e| matches!(e.number(), 1044 | 1142 | 1227))
    }
    fn try_purge_lock(pool: &Pool<Self>) -> BoxFuture<'_, Result<Option<PurgeLock>, StoreError>> {
        Box::pin(mysql_purge_lock(pool))
    }
}

/// The migration lock's name, before the database's (`GET_LOCK` names are server-wide).
const MIGRATION_LOCK_PREFIX: &str = "room_service.migrate.";
/// `migrations/mysql`.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/mysql");
/// How long a node waits for another node's migrations.
const MIGRATION_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

impl SqlRepository<MySql> {
    /// Opens a pool of at most `max_connections`, every session at READ COMMITTED.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        let options = MySqlConnectOptions::from_str(url)?;
        let pool = Self::pool_options(max_connections)
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

    /// Runs `migrations/mysql`, one node at a time: under a `GET_LOCK` of our own on the
    /// migrating session, waited for up to 120 s. (sqlx's own lock asks
    /// `GET_LOCK(name, -1)`, which MariaDB answers NULL at once without locking anything, so
    /// nodes started together on a fresh database raced to apply the same migration and all but
    /// one failed with a duplicate key in `_sqlx_migrations`.)
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await?;
        let got: Option<i64> =
            sqlx::query_scalar("SELECT GET_LOCK(LEFT(CONCAT(?, COALESCE(DATABASE(), '')), 64), ?)")
                .bind(MIGRATION_LOCK_PREFIX)
                .bind(MIGRATION_LOCK_WAIT.as_secs() as i64)
                .fetch_one(&mut *conn)
                .await?;
        if got != Some(1) {
            return Err(StoreError::Config(format!(
                "another node held the migration lock for {MIGRATION_LOCK_WAIT:?}; start this one again once it is up"
            )));
        }
        // `run_direct` on the locked session (sqlx's own way around `run`'s future not being
        // `Send` for every lifetime of an `Acquire`).
        let migrated = MIGRATOR.run_direct(None, &mut *conn, false).await;
        let released = sqlx::query("SELECT RELEASE_LOCK(LEFT(CONCAT(?, COALESCE(DATABASE(), '')), 64))")
            .bind(MIGRATION_LOCK_PREFIX)
            .execute(&mut *conn)
            .await;
        migrated?;
        released?;
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

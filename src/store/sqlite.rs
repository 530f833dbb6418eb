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
use sqlx::{QueryBuilder, Row, Sqlite};

use super::types::*;
use super::{Backend, Repository};

/// Database clock, milliseconds since the epoch.
macro_rules! now_ms {
    () => {
        "CAST(unixepoch('subsec') * 1000 AS INTEGER)"
    };
}

const OUTBOX_COLUMNS: &str = "id, event_id, room_id, event_type, envelope, status, retry_count, last_error, \
     worker_id, lock_until_ms, created_at_ms, updated_at_ms, delivered_at_ms";

/// SQLite repository.
#[derive(Debug, Clone)]
pub struct SqliteRepository {
    pool: SqlitePool,
}

impl SqliteRepository {
    /// Opens (creating when the URL says `mode=rwc`) the file and its parent directory.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::from_str(url)?
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(5));
        if let Some(dir) = options.get_filename().parent().filter(|d| !d.as_os_str().is_empty()) {
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

fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}

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
        let row = sqlx::query("SELECT version, state FROM room_snapshot WHERE room_id = ?")
            .bind(room_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| StoredRoom { version: r.get::<i64, _>(0) as u64, state: r.get(1) }))
    }

    async fn find_command(&self, command_id: &str) -> Result<Option<StoredCommand>, StoreError> {
        let row = sqlx::query(
            "SELECT room_id, fingerprint, applied, room_version, outcome FROM room_command_log \
             WHERE command_id = ?",
        )
        .bind(command_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|r| StoredCommand {
            room_id: r.get(0),
            fingerprint: r.get(1),
            applied: r.get::<bool, _>(2),
            room_version: r.get::<i64, _>(3) as u64,
            outcome: r.get(4),
        }))
    }

    async fn commit_command(&self, c: &CommandCommit) -> Result<(), CommitError> {
        // BEGIN IMMEDIATE: take the write lock up front instead of failing to upgrade later.
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        if let Some((expected, state)) = &c.snapshot {
            let written = if *expected == 0 {
                let insert = sqlx::query(concat!(
                    "INSERT INTO room_snapshot (room_id, version, status, state, updated_at_ms) VALUES (?, ?, ?, ?, ",
                    now_ms!(),
                    ")"
                ))
                .bind(&c.room_id)
                .bind(c.room_version as i64)
                .bind(c.room_status)
                .bind(state)
                .execute(&mut *tx)
                .await;
                match insert {
                    Err(e) if is_unique_violation(&e) => 0,
                    other => other?.rows_affected(),
                }
            } else {
                sqlx::query(concat!(
                    "UPDATE room_snapshot SET version = ?, status = ?, state = ?, updated_at_ms = ",
                    now_ms!(),
                    " WHERE room_id = ? AND version = ?"
                ))
                .bind(c.room_version as i64)
                .bind(c.room_status)
                .bind(state)
                .bind(&c.room_id)
                .bind(*expected as i64)
                .execute(&mut *tx)
                .await?
                .rows_affected()
            };
            if written != 1 {
                return Err(CommitError::VersionConflict);
            }
        }
        let logged = sqlx::query(concat!(
            "INSERT INTO room_command_log (command_id, room_id, command_type, fingerprint, request_id, \
             applied, room_version, outcome, created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ",
            now_ms!(),
            ")"
        ))
        .bind(&c.command_id)
        .bind(&c.room_id)
        .bind(c.command_type)
        .bind(&c.fingerprint)
        .bind(&c.request_id)
        .bind(c.applied)
        .bind(c.room_version as i64)
        .bind(&c.outcome)
        .execute(&mut *tx)
        .await;
        match logged {
            Err(e) if is_unique_violation(&e) => return Err(CommitError::DuplicateCommand),
            other => other?,
        };
        if !c.outbox.is_empty() {
            let timeout_ms = c.publish_timeout.as_millis() as i64;
            let mut insert = QueryBuilder::<Sqlite>::new(
                "INSERT INTO room_outbox (event_id, room_id, event_type, envelope, status, retry_count, \
                 lock_until_ms, created_at_ms, updated_at_ms) ",
            );
            insert.push_values(&c.outbox, |mut row, e| {
                row.push_bind(&e.event_id)
                    .push_bind(&c.room_id)
                    .push_bind(e.event_type)
                    .push_bind(&e.envelope)
                    .push("'pending'")
                    .push("0")
                    .push(concat!(now_ms!(), " + "))
                    .push_bind_unseparated(timeout_ms)
                    .push(now_ms!())
                    .push(now_ms!());
            });
            insert.build().execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn mark_delivered(&self, event_ids: &[String]) -> Result<u64, StoreError> {
        if event_ids.is_empty() {
            return Ok(0);
        }
        let mut q = QueryBuilder::<Sqlite>::new(concat!(
            "UPDATE room_outbox SET status = 'delivered', last_error = NULL, lock_until_ms = NULL, \
             delivered_at_ms = ",
            now_ms!(),
            ", updated_at_ms = ",
            now_ms!(),
            " WHERE status IN ('pending', 'retryable') AND event_id IN ("
        ));
        let mut ids = q.separated(", ");
        for id in event_ids {
            ids.push_bind(id);
        }
        q.push(")");
        Ok(q.build().execute(&self.pool).await?.rows_affected())
    }

    async fn claim_outbox(&self, claim: &Claim) -> Result<Vec<OutboxRow>, StoreError> {
        let mut rows: Vec<OutboxRow> = sqlx::query_as(concat!(
            "UPDATE room_outbox SET status = 'delivering', worker_id = ?1, lock_until_ms = ",
            now_ms!(),
            " + ?2, updated_at_ms = ",
            now_ms!(),
            " WHERE id IN (SELECT id FROM room_outbox INDEXED BY idx_room_outbox_claim WHERE lock_until_ms <= ",
            now_ms!(),
            " AND status IN ('pending', 'retryable', 'delivering') ORDER BY lock_until_ms, id LIMIT ?3) \
             RETURNING id, event_id, room_id, event_type, envelope, status, retry_count, last_error, \
             worker_id, lock_until_ms, created_at_ms, updated_at_ms, delivered_at_ms"
        ))
        .bind(&claim.worker_id)
        .bind(claim.lease.as_millis() as i64)
        .bind(claim.limit as i64)
        .fetch_all(&self.pool)
        .await?;
        rows.sort_by_key(|r| r.id);
        Ok(rows)
    }

    async fn finish_claimed(
        &self,
        worker_id: &str,
        results: &[PublishResult],
    ) -> Result<MarkReport, StoreError> {
        let mut report = MarkReport::default();
        if results.is_empty() {
            return Ok(report);
        }
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let delivered: Vec<i64> = results.iter().filter(|r| r.outcome.is_ok()).map(|r| r.id).collect();
        if !delivered.is_empty() {
            let mut q = QueryBuilder::<Sqlite>::new(concat!(
                "UPDATE room_outbox SET status = 'delivered', last_error = NULL, lock_until_ms = NULL, \
                 delivered_at_ms = ",
                now_ms!(),
                ", updated_at_ms = ",
                now_ms!(),
                " WHERE status = 'delivering' AND worker_id = "
            ));
            q.push_bind(worker_id).push(" AND id IN (");
            push_ids(&mut q, &delivered);
            report.delivered = q.build().execute(&mut *tx).await?.rows_affected();
        }
        for ((error, retry_after), ids) in group_failures(results) {
            let mut q = QueryBuilder::<Sqlite>::new(
                "UPDATE room_outbox SET status = 'retryable', retry_count = retry_count + 1, last_error = ",
            );
            q.push_bind(error)
                .push(concat!(", lock_until_ms = ", now_ms!(), " + "))
                .push_bind(retry_after.as_millis() as i64)
                .push(concat!(
                    ", updated_at_ms = ",
                    now_ms!(),
                    " WHERE status = 'delivering' AND worker_id = "
                ))
                .push_bind(worker_id)
                .push(" AND id IN (");
            push_ids(&mut q, &ids);
            report.retried += q.build().execute(&mut *tx).await?.rows_affected();
        }
        tx.commit().await?;
        report.lease_lost = results.len() as u64 - report.delivered - report.retried;
        Ok(report)
    }

    async fn release_claimed(&self, worker_id: &str, ids: &[i64]) -> Result<u64, StoreError> {
        if ids.is_empty() {
            return Ok(0);
        }
        let mut q = QueryBuilder::<Sqlite>::new(concat!(
            "UPDATE room_outbox SET status = CASE WHEN retry_count > 0 THEN 'retryable' ELSE 'pending' END, \
             lock_until_ms = ",
            now_ms!(),
            ", updated_at_ms = ",
            now_ms!(),
            " WHERE status = 'delivering' AND worker_id = "
        ));
        q.push_bind(worker_id).push(" AND id IN (");
        push_ids(&mut q, ids);
        Ok(q.build().execute(&self.pool).await?.rows_affected())
    }

    async fn outbox_stats(&self) -> Result<OutboxStats, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT status, COUNT(*), ",
            now_ms!(),
            " - MIN(created_at_ms), MAX(retry_count) FROM room_outbox \
             WHERE status IN ('pending', 'delivering', 'retryable', 'failed') GROUP BY status"
        ))
        .fetch_all(&self.pool)
        .await?;
        let rows = rows
            .into_iter()
            .map(|r| {
                (
                    r.get::<String, _>(0),
                    r.get::<i64, _>(1),
                    r.get::<Option<i64>, _>(2),
                    r.get::<Option<i32>, _>(3),
                )
            })
            .collect();
        Ok(stats_from_groups(rows))
    }

    async fn list_outbox(&self, query: &OutboxQuery) -> Result<Vec<OutboxRow>, StoreError> {
        let mut q =
            QueryBuilder::<Sqlite>::new(format!("SELECT {OUTBOX_COLUMNS} FROM room_outbox WHERE id > "));
        q.push_bind(query.after_id);
        if let Some(status) = query.status {
            q.push(" AND status = ").push_bind(status.as_str());
        }
        q.push(" ORDER BY id LIMIT ").push_bind(i64::from(query.limit));
        Ok(q.build_query_as::<OutboxRow>().fetch_all(&self.pool).await?)
    }

    async fn outbox_statuses(&self, event_ids: &[String]) -> Result<Vec<(String, OutboxStatus)>, StoreError> {
        if event_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q =
            QueryBuilder::<Sqlite>::new("SELECT event_id, status FROM room_outbox WHERE event_id IN (");
        let mut ids = q.separated(", ");
        for id in event_ids {
            ids.push_bind(id);
        }
        q.push(")");
        let rows = q.build().fetch_all(&self.pool).await?;
        Ok(parse_statuses(rows.iter().map(|r| (r.get::<String, _>(0), r.get::<String, _>(1)))))
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}

fn push_ids(q: &mut QueryBuilder<Sqlite>, ids: &[i64]) {
    let mut list = q.separated(", ");
    for id in ids {
        list.push_bind(*id);
    }
    q.push(")");
}

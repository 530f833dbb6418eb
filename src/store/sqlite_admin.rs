//! [`AdminRepository`] on SQLite: each requeue and purge batch is one atomic statement
//! (`UPDATE/DELETE ... WHERE id IN (SELECT ... LIMIT n)`, `RETURNING` what changed). SQLite has
//! one writer at a time and deletes are idempotent, so the purge lock holds nothing.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::{QueryBuilder, Sqlite};

use super::admin::{
    AdminRepository, MAX_PURGE_BATCH, MAX_REQUEUE_BATCH, PurgeLock, RequeueTarget, RequeuedRow, age_ms,
    batch_limit, check_requeueable,
};
use super::sqlite::SqliteRepository;
use super::types::{OutboxRow, StoreError};

/// Database clock, milliseconds since the epoch (as in `sqlite.rs`).
macro_rules! now_ms {
    () => {
        "CAST(unixepoch('subsec') * 1000 AS INTEGER)"
    };
}

/// The purge predicate, to be followed by the bound age in ms (see `mysql_admin.rs`).
macro_rules! purgeable {
    () => {
        concat!("status = 'delivered' AND COALESCE(delivered_at_ms, updated_at_ms) < ", now_ms!(), " - ")
    };
}

const OUTBOX_COLUMNS: &str = "id, event_id, room_id, event_type, envelope, status, retry_count, last_error, \
     worker_id, lock_until_ms, created_at_ms, updated_at_ms, delivered_at_ms";

#[async_trait]
impl AdminRepository for SqliteRepository {
    async fn find_outbox(&self, event_id: &str) -> Result<Option<OutboxRow>, StoreError> {
        let mut q = QueryBuilder::<Sqlite>::new(format!(
            "SELECT {OUTBOX_COLUMNS} FROM room_outbox WHERE event_id = "
        ));
        q.push_bind(event_id);
        Ok(q.build_query_as::<OutboxRow>().fetch_optional(self.pool()).await?)
    }

    async fn requeue_outbox(&self, target: RequeueTarget<'_>) -> Result<Vec<RequeuedRow>, StoreError> {
        let mut q = QueryBuilder::<Sqlite>::new(concat!(
            "UPDATE room_outbox SET status = 'pending', worker_id = NULL, lock_until_ms = ",
            now_ms!(),
            ", updated_at_ms = ",
            now_ms!(),
            " WHERE status IN ('retryable', 'failed') AND "
        ));
        match target {
            RequeueTarget::EventIds([]) => return Ok(Vec::new()),
            RequeueTarget::EventIds(event_ids) => {
                q.push("event_id IN (");
                let mut list = q.separated(", ");
                for id in event_ids {
                    list.push_bind(id);
                }
                q.push(")");
            }
            RequeueTarget::Status { status, after_id, limit } => {
                check_requeueable(status)?;
                q.push("id IN (SELECT id FROM room_outbox WHERE status = ")
                    .push_bind(status.as_str())
                    .push(" AND id > ")
                    .push_bind(after_id)
                    .push(" ORDER BY id LIMIT ")
                    .push_bind(batch_limit(limit, MAX_REQUEUE_BATCH))
                    .push(")");
            }
        }
        q.push(" RETURNING id, event_id");
        let mut rows = q.build_query_as::<RequeuedRow>().fetch_all(self.pool()).await?;
        rows.sort_by_key(|r| r.id);
        Ok(rows)
    }

    async fn count_purgeable(&self, older_than: Duration) -> Result<u64, StoreError> {
        let count: i64 =
            sqlx::query_scalar(concat!("SELECT COUNT(*) FROM room_outbox WHERE ", purgeable!(), "?"))
                .bind(age_ms(older_than))
                .fetch_one(self.pool())
                .await?;
        Ok(count.max(0) as u64)
    }

    async fn purge_delivered_batch(&self, older_than: Duration, limit: u32) -> Result<u64, StoreError> {
        let deleted = sqlx::query(concat!(
            "DELETE FROM room_outbox WHERE id IN (SELECT id FROM room_outbox INDEXED BY idx_room_outbox_status \
             WHERE ",
            purgeable!(),
            "? ORDER BY id LIMIT ?)"
        ))
        .bind(age_ms(older_than))
        .bind(batch_limit(limit, MAX_PURGE_BATCH))
        .execute(self.pool())
        .await?;
        Ok(deleted.rows_affected())
    }

    async fn try_purge_lock(&self) -> Result<Option<PurgeLock>, StoreError> {
        Ok(Some(PurgeLock::none()))
    }
}

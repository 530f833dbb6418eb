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
use super::sql;
use super::sqlite::SqliteRepository;
use super::types::{OutboxRow, StoreError};

#[async_trait]
impl AdminRepository for SqliteRepository {
    async fn find_outbox(&self, event_id: &str) -> Result<Option<OutboxRow>, StoreError> {
        Ok(sql::find_outbox::<Sqlite>(event_id)
            .build_query_as::<OutboxRow>()
            .fetch_optional(self.pool())
            .await?)
    }

    async fn requeue_outbox(&self, target: RequeueTarget<'_>) -> Result<Vec<RequeuedRow>, StoreError> {
        let mut q = sql::requeue_set::<Sqlite>();
        match target {
            RequeueTarget::EventIds([]) => return Ok(Vec::new()),
            RequeueTarget::EventIds(event_ids) => {
                q.push("event_id IN ");
                sql::push_strs(&mut q, event_ids);
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

    async fn count_purgeable(&self, older_than: Duration, up_to: Option<i64>) -> Result<u64, StoreError> {
        let count: i64 = sql::count_purgeable::<Sqlite>(age_ms(older_than), up_to)
            .build_query_scalar()
            .fetch_one(self.pool())
            .await?;
        Ok(count.max(0) as u64)
    }

    async fn purge_delivered_batch(
        &self,
        older_than: Duration,
        up_to: Option<i64>,
        limit: u32,
    ) -> Result<u64, StoreError> {
        let mut delete = QueryBuilder::<Sqlite>::new(
            "DELETE FROM room_outbox WHERE id IN (SELECT id FROM room_outbox INDEXED BY idx_room_outbox_status WHERE ",
        );
        sql::push_purgeable(&mut delete, age_ms(older_than), up_to);
        delete.push(" ORDER BY id LIMIT ").push_bind(batch_limit(limit, MAX_PURGE_BATCH)).push(")");
        Ok(delete.build().execute(self.pool()).await?.rows_affected())
    }

    async fn try_purge_lock(&self) -> Result<Option<PurgeLock>, StoreError> {
        Ok(Some(PurgeLock::none()))
    }
}

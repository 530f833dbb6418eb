//! [`AdminRepository`] on MySQL/MariaDB: requeues lock their rows (`FOR UPDATE`) in one short
//! transaction so the rows reported are exactly the rows changed; purges select one batch of
//! ids on `idx_room_outbox_status` and delete by primary key, re-checking the predicate; the
//! purge lock is `GET_LOCK` on a session of its own, outside the pool.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::{MySql, QueryBuilder};

use super::admin::{
    AdminRepository, MAX_PURGE_BATCH, MAX_REQUEUE_BATCH, PURGE_LOCK_PREFIX, PurgeLock, RequeueTarget,
    RequeuedRow, age_ms, batch_limit, check_requeueable,
};
use super::mysql::MySqlRepository;
use super::sql;
use super::types::{OutboxRow, StoreError};

#[async_trait]
impl AdminRepository for MySqlRepository {
    async fn find_outbox(&self, event_id: &str) -> Result<Option<OutboxRow>, StoreError> {
        Ok(sql::find_outbox::<MySql>(event_id)
            .build_query_as::<OutboxRow>()
            .fetch_optional(self.pool())
            .await?)
    }

    async fn requeue_outbox(&self, target: RequeueTarget<'_>) -> Result<Vec<RequeuedRow>, StoreError> {
        let mut tx = self.pool().begin().await?;
        let mut select = QueryBuilder::<MySql>::new("SELECT id, event_id FROM room_outbox WHERE ");
        match target {
            RequeueTarget::EventIds([]) => return Ok(Vec::new()),
            RequeueTarget::EventIds(event_ids) => {
                select.push("status IN ('retryable', 'failed') AND event_id IN ");
                sql::push_strs(&mut select, event_ids);
                select.push(" ORDER BY id FOR UPDATE");
            }
            RequeueTarget::Status { status, after_id, limit } => {
                check_requeueable(status)?;
                select
                    .push("status = ")
                    .push_bind(status.as_str())
                    .push(" AND id > ")
                    .push_bind(after_id)
                    .push(" ORDER BY id LIMIT ")
                    .push_bind(batch_limit(limit, MAX_REQUEUE_BATCH))
                    .push(" FOR UPDATE");
            }
        }
        let rows = select.build_query_as::<RequeuedRow>().fetch_all(&mut *tx).await?;
        if rows.is_empty() {
            tx.commit().await?;
            return Ok(rows);
        }
        let mut update = sql::requeue_set::<MySql>();
        update.push("id IN ");
        sql::push_ids(&mut update, &rows.iter().map(|r| r.id).collect::<Vec<_>>());
        update.build().execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(rows)
    }

    async fn count_purgeable(&self, older_than: Duration, up_to: Option<i64>) -> Result<u64, StoreError> {
        let count: i64 = sql::count_purgeable::<MySql>(age_ms(older_than), up_to)
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
        let age = age_ms(older_than);
        let mut select = QueryBuilder::<MySql>::new(
            "SELECT id FROM room_outbox FORCE INDEX (idx_room_outbox_status) WHERE ",
        );
        sql::push_purgeable(&mut select, age, up_to);
        select.push(" ORDER BY id LIMIT ").push_bind(batch_limit(limit, MAX_PURGE_BATCH));
        let ids: Vec<i64> = select.build_query_scalar().fetch_all(self.pool()).await?;
        if ids.is_empty() {
            return Ok(0);
        }
        // Re-checks the predicate: a row requeued meanwhile is not deleted.
        let mut delete = QueryBuilder::<MySql>::new("DELETE FROM room_outbox WHERE ");
        sql::push_purgeable(&mut delete, age, up_to);
        delete.push(" AND id IN ");
        sql::push_ids(&mut delete, &ids);
        Ok(delete.build().execute(self.pool()).await?.rows_affected())
    }

    async fn try_purge_lock(&self) -> Result<Option<PurgeLock>, StoreError> {
        // A session of its own: a pooled one would go back to the pool still holding the lock.
        let mut conn = self.pool().acquire().await?.detach();
        let name: String = sqlx::query_scalar("SELECT LEFT(CONCAT(?, '.', COALESCE(DATABASE(), '')), 64)")
            .bind(PURGE_LOCK_PREFIX)
            .fetch_one(&mut conn)
            .await?;
        let got: Option<i64> =
            sqlx::query_scalar("SELECT GET_LOCK(?, 0)").bind(&name).fetch_one(&mut conn).await?;
        if got == Some(1) {
            Ok(Some(PurgeLock { session: Some((conn, name)) }))
        } else {
            use sqlx::Connection;
            conn.close().await?;
            Ok(None)
        }
    }
}

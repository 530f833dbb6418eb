//! [`OutboxAdmin`]: the operator's view of `room_outbox` (SPEC §11) — backlog stats, listing,
//! look a row up by event id, requeue parked or retryable rows, and purge old delivered rows in
//! small batches by primary key — and its one SQL implementation, for [`SqlRepository`] over
//! any [`Backend`], running the statements of `sql.rs`; its values are in `types.rs`. Which
//! instance may purge is the backend's [`PurgeLock`].
//!
//! Every write here is fenced on the row status: `delivering` rows (a worker holds their lease)
//! and `delivered` rows are never requeued, and only `delivered` rows are ever deleted. A
//! requeue locks its rows in one short write transaction, so the rows reported are exactly the
//! rows changed; a purge reads one batch of ids on the status index and deletes by primary key,
//! re-checking the predicate. Ages use the database's clock.

mod sql;
mod types;

use std::time::Duration;

use async_trait::async_trait;

pub use self::types::{
    MAX_PURGE_BATCH, MAX_REQUEUE_BATCH, OutboxQuery, OutboxStats, REQUEUEABLE, RequeueTarget, RequeuedRow,
};
use crate::store::backend::purge_lock::PurgeLock;
use crate::store::backend::run::Run;
use crate::store::backend::{Backend, SqlRepository};
use crate::store::error::StoreError;
use crate::store::outbox_row::{OutboxRow, OutboxStatus};

/// Operator operations on `room_outbox`; see the module docs.
#[async_trait]
pub trait OutboxAdmin: Send + Sync {
    /// Counts per undelivered status and the age of the oldest undelivered row.
    async fn outbox_stats(&self) -> Result<OutboxStats, StoreError>;

    /// Rows for the admin listing, by ascending id.
    async fn list_outbox(&self, query: &OutboxQuery) -> Result<Vec<OutboxRow>, StoreError>;

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
    /// [`ConsumerRepository::consumers_floor`]: crate::store::ConsumerRepository::consumers_floor
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
fn age_ms(older_than: Duration) -> i64 {
    const CAP_MS: u128 = 100 * 365 * 24 * 3600 * 1000;
    older_than.as_millis().min(CAP_MS) as i64
}

/// A batch limit within `1..=max`.
fn batch_limit(limit: u32, max: u32) -> i64 {
    i64::from(limit.clamp(1, max))
}

/// Whether a requeue by status names a requeueable status.
fn check_requeueable(status: OutboxStatus) -> Result<(), StoreError> {
    if REQUEUEABLE.contains(&status) {
        Ok(())
    } else {
        Err(StoreError::Config(format!(
            "cannot requeue rows in status {}: only retryable and failed rows are requeued",
            status.as_str()
        )))
    }
}

#[async_trait]
impl<DB: Backend> OutboxAdmin for SqlRepository<DB> {
    async fn outbox_stats(&self) -> Result<OutboxStats, StoreError> {
        let groups = sql::outbox_stats::<DB>().fetch_all(&self.pool).await?;
        let mut stats = types::stats_from_groups(groups);
        if stats.failed > 0 {
            let parked: Vec<(String, i64)> = sql::parked_by_reason::<DB>().fetch_all(&self.pool).await?;
            stats.parked_by_reason =
                parked.into_iter().map(|(reason, n)| (reason, n.max(0) as u64)).collect();
        }
        Ok(stats)
    }

    async fn list_outbox(&self, query: &OutboxQuery) -> Result<Vec<OutboxRow>, StoreError> {
        let mut q = sql::list_outbox::<DB>(query);
        Ok(q.fetch_all(&self.pool).await?)
    }

    async fn find_outbox(&self, event_id: &str) -> Result<Option<OutboxRow>, StoreError> {
        let mut q = sql::find_outbox::<DB>(event_id);
        Ok(q.fetch_optional(&self.pool).await?)
    }

    async fn requeue_outbox(&self, target: RequeueTarget<'_>) -> Result<Vec<RequeuedRow>, StoreError> {
        let limit = match target {
            RequeueTarget::EventIds([]) => return Ok(Vec::new()),
            RequeueTarget::EventIds(_) => 0,
            RequeueTarget::Status { status, limit, .. } => {
                check_requeueable(status)?;
                batch_limit(limit, MAX_REQUEUE_BATCH)
            }
        };
        let mut tx = self.pool.begin_with(DB::BEGIN_WRITE).await?;
        let mut select = sql::requeue_select::<DB>(&target, limit);
        let rows = select.fetch_all::<RequeuedRow>(&mut *tx).await?;
        if !rows.is_empty() {
            let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
            sql::requeue_ids::<DB>(&ids).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(rows)
    }

    async fn count_purgeable(&self, older_than: Duration, up_to: Option<i64>) -> Result<u64, StoreError> {
        let mut q = sql::count_purgeable::<DB>(age_ms(older_than), up_to);
        let (count,): (i64,) = q.fetch_one(&self.pool).await?;
        Ok(count.max(0) as u64)
    }

    async fn purge_delivered_batch(
        &self,
        older_than: Duration,
        up_to: Option<i64>,
        limit: u32,
    ) -> Result<u64, StoreError> {
        let age = age_ms(older_than);
        let mut select = sql::purge_ids::<DB>(age, up_to, batch_limit(limit, MAX_PURGE_BATCH));
        let ids: Vec<(i64,)> = select.fetch_all(&self.pool).await?;
        if ids.is_empty() {
            return Ok(0);
        }
        let ids: Vec<i64> = ids.into_iter().map(|(id,)| id).collect();
        let mut delete = sql::purge_delete::<DB>(age, up_to, &ids);
        Ok(delete.execute(&self.pool).await?)
    }

    async fn try_purge_lock(&self) -> Result<Option<PurgeLock>, StoreError> {
        DB::try_purge_lock(&self.pool).await
    }
}

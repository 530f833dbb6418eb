//! [`OutboxQueue`]: the outbox as the worker's work queue — claims by room under a lease, the
//! claimed batch's fenced marks, lease renewal — and its one SQL implementation, for
//! [`SqlRepository`] over any [`Backend`]: the claim in `claim/`, the batch mark in `marks.rs`,
//! the other statements in `sql.rs`, the values in `types.rs`. Every time comparison uses the
//! database's clock, never the node's.

mod claim;
mod marks;
mod sql;
mod types;

use std::time::Duration;

use async_trait::async_trait;

pub use self::types::{Claim, ClaimScope, ClaimedBatch, Mark, MarkReport, PublishResult};
use crate::store::backend::run::Run;
use crate::store::backend::{Backend, SqlRepository};
use crate::store::error::StoreError;

/// The outbox worker's view of the store; see the module docs.
#[async_trait]
pub trait OutboxQueue: Send + Sync + std::fmt::Debug {
    /// Claims up to `claim.limit` rows for `claim.worker_id` under a lease, room by room: of
    /// each room it takes the oldest undelivered rows, from the room's head in id order, and
    /// stops at the first row it cannot take (held by another claim, retryable not yet due,
    /// young pending). A room whose head is held elsewhere gets nothing; rows `claim.own` holds
    /// at a room's head are passed over (the worker publishes them first). Rooms are looked at
    /// round robin in room id order from `claim.after_room`, the rooms with a claimable head
    /// share the batch (at most `claim.per_room` rows of one room held at once), and the rows
    /// come back in claim order (rooms in the order their first claimed row fell due).
    async fn claim_outbox(&self, claim: &Claim) -> Result<ClaimedBatch, StoreError>;

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

    /// Extends the lease of every row `worker_id` still holds to `lease` from now (database
    /// clock). Returns how many rows.
    async fn renew_lease(&self, worker_id: &str, lease: Duration) -> Result<u64, StoreError>;

    /// How long until the next `pending` or `retryable` row whose claim-after time is still to
    /// come reaches it; `None` when there is none. Rows claimable already are the claims' to
    /// take: a claim that left some says so ([`ClaimedBatch::more`]), and the others wait behind
    /// a room head this worker cannot send.
    async fn next_claimable_in(&self) -> Result<Option<Duration>, StoreError>;
}

#[async_trait]
impl<DB: Backend> OutboxQueue for SqlRepository<DB> {
    async fn claim_outbox(&self, claim: &Claim) -> Result<ClaimedBatch, StoreError> {
        // SQLite: one writer at a time; the claim takes the write lock up front.
        claim::claim(self.pool.begin_with(DB::BEGIN_WRITE).await?, claim).await
    }

    async fn finish_claimed(
        &self,
        worker_id: &str,
        results: &[PublishResult],
    ) -> Result<MarkReport, StoreError> {
        if results.is_empty() {
            return Ok(MarkReport::default());
        }
        let tx = self.pool.begin_with(DB::BEGIN_WRITE).await?;
        marks::finish_claimed(tx, worker_id, results).await
    }

    async fn release_claimed(&self, worker_id: &str, ids: &[i64]) -> Result<u64, StoreError> {
        if ids.is_empty() {
            return Ok(0);
        }
        let mut q = sql::release_claimed::<DB>(worker_id, ids);
        Ok(q.execute(&self.pool).await?)
    }

    async fn renew_lease(&self, worker_id: &str, lease: Duration) -> Result<u64, StoreError> {
        let mut q = sql::renew_lease::<DB>(worker_id, lease);
        Ok(q.execute(&self.pool).await?)
    }

    async fn next_claimable_in(&self) -> Result<Option<Duration>, StoreError> {
        let mut q = sql::next_claimable::<DB>();
        let wait: Option<(i64,)> = q.fetch_optional(&self.pool).await?;
        Ok(wait.map(|(ms,)| Duration::from_millis(u64::try_from(ms).unwrap_or(0))))
    }
}

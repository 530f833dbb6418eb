//! [`OutboxQueue`]: the outbox as the worker's work queue — claims by room under a lease, the
//! claimed batch's fenced marks, lease renewal — and its one SQL implementation over any
//! [`Dialect`](super::sql::Dialect) ([`impl_outbox_queue`]). Every time comparison uses the
//! database's clock, never the node's.

use std::time::Duration;

use async_trait::async_trait;

use super::outbox_types::{Claim, ClaimedBatch, MarkReport, PublishResult};
use super::types::StoreError;

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

/// [`OutboxQueue`] for `SqlRepository<$db>`.
macro_rules! impl_outbox_queue {
    ($db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::OutboxQueue for $crate::store::SqlRepository<$db> {
            async fn claim_outbox(
                &self,
                claim: &$crate::store::Claim,
            ) -> Result<$crate::store::ClaimedBatch, $crate::store::StoreError> {
                use $crate::store::sql::Dialect;
                // SQLite: one writer at a time; the claim takes the write lock up front.
                $crate::store::flows::claim(self.pool.begin_with(<$db>::BEGIN_WRITE).await?, claim).await
            }

            async fn finish_claimed(
                &self,
                worker_id: &str,
                results: &[$crate::store::PublishResult],
            ) -> Result<$crate::store::MarkReport, $crate::store::StoreError> {
                use $crate::store::sql::Dialect;
                if results.is_empty() {
                    return Ok($crate::store::MarkReport::default());
                }
                let tx = self.pool.begin_with(<$db>::BEGIN_WRITE).await?;
                $crate::store::flows::finish_claimed(tx, worker_id, results).await
            }

            async fn release_claimed(
                &self,
                worker_id: &str,
                ids: &[i64],
            ) -> Result<u64, $crate::store::StoreError> {
                if ids.is_empty() {
                    return Ok(0);
                }
                let mut q = $crate::store::queue_sql::release_claimed::<$db>(worker_id, ids);
                Ok(q.build().execute(&self.pool).await?.rows_affected())
            }

            async fn renew_lease(
                &self,
                worker_id: &str,
                lease: std::time::Duration,
            ) -> Result<u64, $crate::store::StoreError> {
                let mut q = $crate::store::queue_sql::renew_lease::<$db>(worker_id, lease);
                Ok(q.build().execute(&self.pool).await?.rows_affected())
            }

            async fn next_claimable_in(
                &self,
            ) -> Result<Option<std::time::Duration>, $crate::store::StoreError> {
                let mut q = $crate::store::queue_sql::next_claimable::<$db>();
                let wait: Option<i64> = q.build_query_scalar().fetch_optional(&self.pool).await?;
                Ok(wait.map(|ms| std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0))))
            }
        }
    };
}

pub(super) use impl_outbox_queue;

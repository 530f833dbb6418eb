//! The queue's statements besides the claim's (those are in `claim/sql.rs`): the worker's
//! writes on the rows it claimed ([`OutboxQueue`](super::OutboxQueue)) — the marks of a batch's
//! results, each fenced on the claim still holding the row, the hand-back of rows never
//! attempted, the lease renewal — and the wait until the next row falls due; built once for
//! both backends over a [`Backend`].

use std::time::Duration;

use sqlx::QueryBuilder;

use crate::store::backend::Backend;
use crate::store::backend::bind::{millis, push_ids};

/// Ends every worker mark: the change time, and the fence (the row is still claimed by this
/// claim).
fn push_fence<DB: Backend>(q: &mut QueryBuilder<DB>, worker_id: &str, ids: &[i64]) {
    q.push(format!(", updated_at_ms = {} WHERE status = 'delivering' AND worker_id = ", DB::NOW_MS));
    DB::bind_str(q, worker_id);
    q.push(" AND id IN ");
    push_ids(q, ids);
}

/// Worker success, fenced.
pub(super) fn finish_delivered<DB: Backend>(worker_id: &str, ids: &[i64]) -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    let mut q = QueryBuilder::new(format!(
        "UPDATE room_outbox SET status = 'delivered', last_error = NULL, lock_until_ms = NULL, \
         delivered_at_ms = {now}"
    ));
    push_fence(&mut q, worker_id, ids);
    q
}

/// The start of a failed attempt's mark: `status`, one more attempt, its `error`.
fn failed_attempt<DB: Backend>(status: &'static str, error: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(format!(
        "UPDATE room_outbox SET status = '{status}', retry_count = retry_count + 1, last_error = "
    ));
    DB::bind_str(&mut q, error);
    q
}

/// Worker failure, fenced: one more attempt, claimable again after `retry_after`.
pub(super) fn finish_retryable<DB: Backend>(
    worker_id: &str,
    error: &str,
    retry_after: Duration,
    ids: &[i64],
) -> QueryBuilder<DB> {
    let mut q = failed_attempt("retryable", error);
    q.push(format!(", lock_until_ms = {} + ", DB::NOW_MS));
    DB::bind_i64(&mut q, millis(retry_after));
    push_fence(&mut q, worker_id, ids);
    q
}

/// Worker failure that parks the row, fenced: `failed`, out of the claim index for good.
pub(super) fn finish_parked<DB: Backend>(
    worker_id: &str,
    reason: &str,
    error: &str,
    ids: &[i64],
) -> QueryBuilder<DB> {
    let mut q = failed_attempt("failed", error);
    q.push(", lock_until_ms = NULL, park_reason = ");
    DB::bind_str(&mut q, reason);
    push_fence(&mut q, worker_id, ids);
    q
}

/// Claimed rows handed back unattempted, fenced: claimable after `after`, `retry_count`
/// unchanged (a worker stopping, a pause, or an earlier row of the room still undelivered).
pub(super) fn finish_deferred<DB: Backend>(
    worker_id: &str,
    after: Duration,
    ids: &[i64],
) -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    let mut q = QueryBuilder::new(format!(
        "UPDATE room_outbox SET status = CASE WHEN retry_count > 0 THEN 'retryable' ELSE 'pending' END, \
         lock_until_ms = {now} + "
    ));
    DB::bind_i64(&mut q, millis(after));
    push_fence(&mut q, worker_id, ids);
    q
}

/// Unpublished rows of a cancelled batch go back, claimable at once, retry_count unchanged.
pub(super) fn release_claimed<DB: Backend>(worker_id: &str, ids: &[i64]) -> QueryBuilder<DB> {
    finish_deferred(worker_id, Duration::ZERO, ids)
}

/// Extends the lease of every row a claim still holds.
pub(super) fn renew_lease<DB: Backend>(worker_id: &str, lease: Duration) -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    let mut q = QueryBuilder::new(format!("UPDATE room_outbox SET lock_until_ms = {now} + "));
    DB::bind_i64(&mut q, millis(lease));
    q.push(format!(", updated_at_ms = {now} WHERE status = 'delivering' AND worker_id = "));
    DB::bind_str(&mut q, worker_id);
    q
}

/// Milliseconds until the next pending or retryable row whose claim-after time is still to
/// come: the first such row on the claim index from now on (no row when there is none).
pub(super) fn next_claimable<DB: Backend>() -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    QueryBuilder::new(format!(
        "SELECT lock_until_ms - {now} FROM room_outbox{} WHERE lock_until_ms > {now} \
         AND status IN ('pending', 'retryable') ORDER BY lock_until_ms LIMIT 1",
        DB::index_hint("idx_room_outbox_claim")
    ))
}

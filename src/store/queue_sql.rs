//! The statements of the outbox queue ([`OutboxQueue`](super::OutboxQueue)): the claim, the
//! worker's fenced marks, the lease renewal and the room-order reads, built once for both
//! backends over a [`Dialect`].

use std::time::Duration;

use sqlx::QueryBuilder;

use super::outbox_types::ClaimScope;
use super::sql::{Dialect, OUTBOX_COLUMNS, millis, push_ids, push_list, push_strs};

/// Ends every worker mark: the change time, and the fence (the row is still claimed by this
/// claim).
fn push_fence<DB: Dialect>(q: &mut QueryBuilder<DB>, worker_id: &str, ids: &[i64]) {
    q.push(format!(", updated_at_ms = {} WHERE status = 'delivering' AND worker_id = ", DB::NOW_MS));
    DB::bind_str(q, worker_id);
    q.push(" AND id IN ");
    push_ids(q, ids);
}

/// Worker success, fenced.
pub(super) fn finish_delivered<DB: Dialect>(worker_id: &str, ids: &[i64]) -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    let mut q = QueryBuilder::new(format!(
        "UPDATE room_outbox SET status = 'delivered', last_error = NULL, lock_until_ms = NULL, \
         delivered_at_ms = {now}"
    ));
    push_fence(&mut q, worker_id, ids);
    q
}

/// The start of a failed attempt's mark: `status`, one more attempt, its `error`.
fn failed_attempt<DB: Dialect>(status: &'static str, error: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(format!(
        "UPDATE room_outbox SET status = '{status}', retry_count = retry_count + 1, last_error = "
    ));
    DB::bind_str(&mut q, error);
    q
}

/// Worker failure, fenced: one more attempt, claimable again after `retry_after`.
pub(super) fn finish_retryable<DB: Dialect>(
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
pub(super) fn finish_parked<DB: Dialect>(
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
pub(super) fn finish_deferred<DB: Dialect>(
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
pub(super) fn release_claimed<DB: Dialect>(worker_id: &str, ids: &[i64]) -> QueryBuilder<DB> {
    finish_deferred(worker_id, Duration::ZERO, ids)
}

/// Rows by id, in id order (read back after a claim).
pub(super) fn outbox_rows_by_id<DB: Dialect>(ids: &[i64]) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(format!("SELECT {OUTBOX_COLUMNS} FROM room_outbox WHERE id IN "));
    push_ids(&mut q, ids);
    q.push(" ORDER BY id");
    q
}

/// The ids of up to `limit` claimable rows, in claim order, walking the claim index (it holds
/// claimable rows only in its non-NULL range).
pub(super) fn claimable_ids<DB: Dialect>(limit: usize, scope: Option<&ClaimScope>) -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    let mut q = QueryBuilder::new(format!(
        "SELECT id FROM room_outbox{} WHERE lock_until_ms <= {now} \
         AND status IN ('pending', 'retryable', 'delivering')",
        DB::index_hint("idx_room_outbox_claim"),
    ));
    if let Some(scope) = scope {
        // The owned shards' rows, or any row orphaned for the grace.
        q.push(format!(" AND (lock_until_ms <= {now} - "));
        DB::bind_i64(&mut q, millis(scope.orphaned_after));
        if !scope.shards.is_empty() {
            q.push(" OR shard IN ");
            push_list(&mut q, &scope.shards, |q, shard| DB::bind_i64(q, i64::from(*shard)));
        }
        q.push(")");
    }
    q.push(" ORDER BY lock_until_ms, id LIMIT ");
    DB::bind_i64(&mut q, i64::try_from(limit).unwrap_or(i64::MAX));
    q.push(DB::CLAIM_LOCK);
    q
}

/// Marks claimed rows `delivering` under a lease for `worker_id`.
pub(super) fn claim_rows<DB: Dialect>(worker_id: &str, lease: Duration, ids: &[i64]) -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    let mut q = QueryBuilder::new("UPDATE room_outbox SET status = 'delivering', worker_id = ");
    DB::bind_str(&mut q, worker_id);
    q.push(format!(", lock_until_ms = {now} + "));
    DB::bind_i64(&mut q, millis(lease));
    q.push(format!(", updated_at_ms = {now} WHERE id IN "));
    push_ids(&mut q, ids);
    q
}

/// The oldest undelivered row of each of `rooms`, leaving out the rows `own` claims hold:
/// `(room_id, id)`.
pub(super) fn room_heads<DB: Dialect>(rooms: &[String], own: &[String]) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(
        "SELECT room_id, MIN(id) FROM room_outbox WHERE lock_until_ms IS NOT NULL AND room_id IN ",
    );
    push_strs(&mut q, rooms);
    if !own.is_empty() {
        q.push(" AND NOT (status = 'delivering' AND worker_id IN ");
        push_strs(&mut q, own);
        q.push(")");
    }
    q.push(" GROUP BY room_id");
    q
}

/// Rows by id with their status and how long until their `lock_until_ms` (database clock).
pub(super) fn rows_wait<DB: Dialect>(ids: &[i64]) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(format!(
        "SELECT id, room_id, status, lock_until_ms - {}, event_id FROM room_outbox WHERE id IN ",
        DB::NOW_MS
    ));
    push_ids(&mut q, ids);
    q
}

/// Extends the lease of every row a claim still holds.
pub(super) fn renew_lease<DB: Dialect>(worker_id: &str, lease: Duration) -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    let mut q = QueryBuilder::new(format!("UPDATE room_outbox SET lock_until_ms = {now} + "));
    DB::bind_i64(&mut q, millis(lease));
    q.push(format!(", updated_at_ms = {now} WHERE status = 'delivering' AND worker_id = "));
    DB::bind_str(&mut q, worker_id);
    q
}

/// Milliseconds until the next pending or retryable row becomes claimable (negative: one is
/// already), on the claim index.
pub(super) fn next_claimable<DB: Dialect>() -> QueryBuilder<DB> {
    QueryBuilder::new(format!(
        "SELECT MIN(lock_until_ms) - {} FROM room_outbox WHERE lock_until_ms IS NOT NULL \
         AND status IN ('pending', 'retryable')",
        DB::NOW_MS
    ))
}

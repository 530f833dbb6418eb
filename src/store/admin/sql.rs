//! The statements of the operator operations ([`OutboxAdmin`](super::OutboxAdmin)): stats,
//! listing, lookups, requeue and purge, built once for both backends over a [`Backend`].

use sqlx::QueryBuilder;

use super::types::{OutboxQuery, RequeueTarget};
use crate::store::backend::Backend;
use crate::store::backend::bind::{push_ids, push_strs};
use crate::store::outbox_row::OUTBOX_COLUMNS;

/// `(park_reason, count)` of the parked rows.
pub(super) fn parked_by_reason<DB: Backend>() -> QueryBuilder<DB> {
    QueryBuilder::new(
        "SELECT COALESCE(park_reason, 'unknown'), COUNT(*) FROM room_outbox WHERE status = 'failed' GROUP BY park_reason",
    )
}

/// `(status, count, age of the oldest, max retry_count)` per undelivered status.
pub(super) fn outbox_stats<DB: Backend>() -> QueryBuilder<DB> {
    QueryBuilder::new(format!(
        "SELECT status, COUNT(*), {} - MIN(created_at_ms), MAX(retry_count) FROM room_outbox \
         WHERE status IN ('pending', 'delivering', 'retryable', 'failed') GROUP BY status",
        DB::NOW_MS
    ))
}

/// A page of rows for the admin listing.
pub(super) fn list_outbox<DB: Backend>(query: &OutboxQuery) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(format!("SELECT {OUTBOX_COLUMNS} FROM room_outbox WHERE id > "));
    DB::bind_i64(&mut q, query.after_id);
    if let Some(status) = query.status {
        q.push(" AND status = ");
        DB::bind_str(&mut q, status.as_str());
    }
    q.push(" ORDER BY id LIMIT ");
    DB::bind_i64(&mut q, i64::from(query.limit));
    q
}

/// One row by event id.
pub(super) fn find_outbox<DB: Backend>(event_id: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(format!("SELECT {OUTBOX_COLUMNS} FROM room_outbox WHERE event_id = "));
    DB::bind_str(&mut q, event_id);
    q
}

/// Appends the purge predicate: delivered longer ago than `age_ms` (database clock), and with
/// an id up to `up_to` when given (the lowest consumer position: a row some consumer has not
/// passed yet stays). `delivered_at_ms` is always set by a delivery mark; `updated_at_ms`
/// stands in should it be missing.
pub(super) fn push_purgeable<DB: Backend>(q: &mut QueryBuilder<DB>, age_ms: i64, up_to: Option<i64>) {
    q.push(format!("status = 'delivered' AND COALESCE(delivered_at_ms, updated_at_ms) < {} - ", DB::NOW_MS));
    DB::bind_i64(q, age_ms);
    if let Some(up_to) = up_to {
        q.push(" AND id <= ");
        DB::bind_i64(q, up_to);
    }
}

/// How many rows a purge would delete.
pub(super) fn count_purgeable<DB: Backend>(age_ms: i64, up_to: Option<i64>) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("SELECT COUNT(*) FROM room_outbox WHERE ");
    push_purgeable(&mut q, age_ms, up_to);
    q
}

/// Requeued rows go back to `pending`, claimable now; `last_error` stays. A parked row gets a
/// fresh attempt budget (`retry_count` 0); a retryable one keeps its count.
pub(super) fn requeue_set<DB: Backend>() -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    QueryBuilder::new(format!(
        "UPDATE room_outbox SET retry_count = CASE WHEN status = 'failed' THEN 0 ELSE retry_count END, \
         status = 'pending', park_reason = NULL, worker_id = NULL, lock_until_ms = {now}, updated_at_ms = {now} \
         WHERE status IN ('retryable', 'failed') AND "
    ))
}

/// The rows a requeue targets, in id order, locked until the transaction ends (the ids it
/// reports are exactly the rows it changes): the given events where requeueable, or a page of
/// `status` after `after_id`.
pub(super) fn requeue_select<DB: Backend>(target: &RequeueTarget<'_>, limit: i64) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("SELECT id, event_id FROM room_outbox WHERE ");
    match target {
        RequeueTarget::EventIds(event_ids) => {
            q.push("status IN ('retryable', 'failed') AND event_id IN ");
            push_strs(&mut q, event_ids);
        }
        RequeueTarget::Status { status, after_id, .. } => {
            q.push("status = ");
            DB::bind_str(&mut q, status.as_str());
            q.push(" AND id > ");
            DB::bind_i64(&mut q, *after_id);
        }
    }
    q.push(" ORDER BY id");
    if matches!(target, RequeueTarget::Status { .. }) {
        q.push(" LIMIT ");
        DB::bind_i64(&mut q, limit);
    }
    q.push(DB::LOCKING_READ);
    q
}

/// The requeue itself, on rows [`requeue_select`] locked.
pub(super) fn requeue_ids<DB: Backend>(ids: &[i64]) -> QueryBuilder<DB> {
    let mut q = requeue_set::<DB>();
    q.push("id IN ");
    push_ids(&mut q, ids);
    q
}

/// One purge batch's ids, by ascending id, on the status index.
pub(super) fn purge_ids<DB: Backend>(age_ms: i64, up_to: Option<i64>, limit: i64) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(format!(
        "SELECT id FROM room_outbox{} WHERE ",
        DB::index_hint("idx_room_outbox_status")
    ));
    push_purgeable(&mut q, age_ms, up_to);
    q.push(" ORDER BY id LIMIT ");
    DB::bind_i64(&mut q, limit);
    q
}

/// Deletes the rows [`purge_ids`] found, re-checking the predicate: a row requeued meanwhile is
/// not deleted.
pub(super) fn purge_delete<DB: Backend>(age_ms: i64, up_to: Option<i64>, ids: &[i64]) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("DELETE FROM room_outbox WHERE ");
    push_purgeable(&mut q, age_ms, up_to);
    q.push(" AND id IN ");
    push_ids(&mut q, ids);
    q
}

//! The statements of the outbox queue ([`OutboxQueue`](super::OutboxQueue)): the claim by room,
//! the worker's fenced marks and the lease renewal, built once for both backends over a
//! [`Dialect`].

use std::time::Duration;

use sqlx::QueryBuilder;

use super::outbox_types::Claim;
use super::sql::{Dialect, OUTBOX_COLUMNS, millis, push_ids, push_list, push_strs};

/// The statuses of a row not yet delivered (nor parked): exactly the rows with a
/// `lock_until_ms`.
const UNDELIVERED: [&str; 3] = ["pending", "retryable", "delivering"];

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

/// `(<row> held by one of `own`)`, on the row named `t`.
fn push_own<DB: Dialect>(q: &mut QueryBuilder<DB>, t: &str, own: &[String]) {
    if own.is_empty() {
        q.push("(1 = 0)");
        return;
    }
    q.push(format!("({t}.status = 'delivering' AND COALESCE({t}.worker_id, '') IN "));
    push_strs(q, own);
    q.push(")");
}

/// `(<row> claimable by this claim now)`, on the row named `t`: due (pending or retryable past
/// its claim-after time, or delivering past its lease), not held by the worker's own claims,
/// and in the claim's scope (a cluster node: its shards' rows, or any row claimable for the
/// orphan grace).
fn push_claimable<DB: Dialect>(q: &mut QueryBuilder<DB>, t: &str, claim: &Claim) {
    let now = DB::NOW_MS;
    q.push(format!(
        "({t}.lock_until_ms <= {now} AND {t}.status IN ('pending', 'retryable', 'delivering') AND NOT "
    ));
    push_own(q, t, &claim.own);
    if let Some(scope) = &claim.scope {
        // Another shard's row once it has been due, and unchanged, for the grace: a row a lane
        // released (due at 0, changed now) stays its owner's for the grace.
        q.push(format!(" AND (({t}.lock_until_ms <= {now} - "));
        DB::bind_i64(q, millis(scope.orphaned_after));
        q.push(format!(" AND {t}.updated_at_ms <= {now} - "));
        DB::bind_i64(q, millis(scope.orphaned_after));
        q.push(")");
        if !scope.shards.is_empty() {
            q.push(format!(" OR {t}.shard IN "));
            push_list(q, &scope.shards, |q, shard| DB::bind_i64(q, i64::from(*shard)));
        }
        q.push(")");
    }
    q.push(")");
}

/// `, CASE WHEN <claimable> THEN 1 ELSE 0 END AS claimable, CASE WHEN <own> ... AS own`.
fn push_flags<DB: Dialect>(q: &mut QueryBuilder<DB>, t: &str, claim: &Claim) {
    q.push(", CASE WHEN ");
    push_claimable(q, t, claim);
    q.push(" THEN 1 ELSE 0 END AS claimable, CASE WHEN ");
    push_own(q, t, &claim.own);
    q.push(" THEN 1 ELSE 0 END AS own");
}

/// The rooms with undelivered rows after the claim's cursor, in room id order, at most
/// `per_list` per undelivered status, each with its smallest id in that status and whether the
/// claim may take that row: `(status, room_id, head, claimable, own)`. Per status a range of
/// `idx_room_outbox_status_room` — on MariaDB a loose index scan, a seek per room, when rooms
/// hold many rows — so rooms whose rows are all delivered or parked are never visited; then the
/// head rows by primary key.
pub(super) fn claim_rooms<DB: Dialect>(claim: &Claim, per_list: usize) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("SELECT g.status AS status, g.room_id AS room_id, g.head AS head");
    push_flags(&mut q, "h", claim);
    q.push(" FROM (");
    for (i, status) in UNDELIVERED.iter().enumerate() {
        if i > 0 {
            q.push(" UNION ALL ");
        }
        let collation = DB::COLUMN_COLLATION;
        q.push(format!(
            "SELECT * FROM (SELECT status, room_id, MIN(id) AS head FROM room_outbox{} \
             WHERE status = '{status}'{collation} AND room_id > ",
            DB::index_hint("idx_room_outbox_status_room")
        ));
        DB::bind_str(&mut q, &claim.after_room);
        q.push(format!("{collation} GROUP BY status, room_id ORDER BY status, room_id LIMIT "));
        DB::bind_i64(&mut q, i64::try_from(per_list).unwrap_or(i64::MAX));
        q.push(format!(") AS g{i}"));
    }
    q.push(") AS g JOIN room_outbox h ON h.id = g.head");
    q
}

/// Each room's rows from its head, in id order, at most the given number per room:
/// `(id, room_id, lock_until_ms, claimable, own)`. A range of `idx_room_outbox_room` per room.
pub(super) fn room_rows<DB: Dialect>(claim: &Claim, rooms: &[(String, i64, usize)]) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("");
    for (i, (room, head, rows)) in rooms.iter().enumerate() {
        if i > 0 {
            q.push(" UNION ALL ");
        }
        q.push("SELECT * FROM (SELECT o.id AS id, o.room_id AS room_id, o.lock_until_ms AS lock_until_ms");
        push_flags(&mut q, "o", claim);
        q.push(format!(" FROM room_outbox o{} WHERE o.room_id = ", DB::index_hint("idx_room_outbox_room")));
        DB::bind_str(&mut q, room);
        q.push(" AND o.id >= ");
        DB::bind_i64(&mut q, *head);
        q.push(" ORDER BY o.id LIMIT ");
        DB::bind_i64(&mut q, i64::try_from(*rows).unwrap_or(i64::MAX));
        q.push(format!(") AS r{i}"));
    }
    q
}

/// Locks the rows of `ids` still claimable, skipping those another transaction holds: the ids
/// locked.
pub(super) fn lock_claimable<DB: Dialect>(claim: &Claim, ids: &[i64]) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("SELECT o.id FROM room_outbox o WHERE o.id IN ");
    push_ids(&mut q, ids);
    q.push(" AND ");
    push_claimable(&mut q, "o", claim);
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

/// Extends the lease of every row a claim still holds.
pub(super) fn renew_lease<DB: Dialect>(worker_id: &str, lease: Duration) -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    let mut q = QueryBuilder::new(format!("UPDATE room_outbox SET lock_until_ms = {now} + "));
    DB::bind_i64(&mut q, millis(lease));
    q.push(format!(", updated_at_ms = {now} WHERE status = 'delivering' AND worker_id = "));
    DB::bind_str(&mut q, worker_id);
    q
}

/// Milliseconds until the next pending or retryable row whose claim-after time is still to
/// come: the first such row on the claim index from now on (no row when there is none).
pub(super) fn next_claimable<DB: Dialect>() -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    QueryBuilder::new(format!(
        "SELECT lock_until_ms - {now} FROM room_outbox{} WHERE lock_until_ms > {now} \
         AND status IN ('pending', 'retryable') ORDER BY lock_until_ms LIMIT 1",
        DB::index_hint("idx_room_outbox_claim")
    ))
}

//! The SQL both backends share, built once for either through a small [`Dialect`]: the only
//! differences are the database clock expression and how a value is bound. Each repository
//! executes these statements on its own pool or transaction.

use std::time::Duration;

use sqlx::{Database, MySql, QueryBuilder, Sqlite};

use super::consumer_sql::OpenWriters;
use super::types::{ClaimScope, OutboxQuery};

/// Columns of `room_outbox`, in `OutboxRow` order.
pub(super) const OUTBOX_COLUMNS: &str = "id, event_id, room_id, event_type, envelope, status, retry_count, \
     last_error, worker_id, lock_until_ms, created_at_ms, updated_at_ms, delivered_at_ms, park_reason";

/// What differs between the SQL of MySQL/MariaDB and SQLite.
pub(super) trait Dialect: Database {
    /// The database clock, milliseconds since the epoch.
    const NOW_MS: &'static str;
    /// Binds an integer.
    fn bind_i64(q: &mut QueryBuilder<Self>, value: i64);
    /// Binds a string.
    fn bind_str(q: &mut QueryBuilder<Self>, value: &str);
    /// Rows a statement changed.
    fn rows_affected(result: &Self::QueryResult) -> u64;
    /// Appended to a read that must lock its rows until commit (empty where the transaction
    /// already holds the write lock).
    const LOCKING_READ: &'static str;
    /// Appended to a read that keeps writers of its rows out until commit (empty where a read
    /// transaction already sees one consistent snapshot).
    const SHARED_READ: &'static str;
    /// Appended to a multi-row `INSERT` so that a row whose `key` exists overwrites `columns`.
    fn upsert(key: &str, columns: &[&str]) -> String;
    /// After `FROM room_outbox` in the claim: make the planner walk the claim index.
    const CLAIM_INDEX: &'static str;
    /// Appended to the claim's SELECT: lock the rows, skipping those another claim holds
    /// (empty where the transaction already holds the only write lock).
    const CLAIM_LOCK: &'static str;
    /// Starts a transaction that reads, then writes (SQLite: take the write lock up front, so
    /// the write cannot fail on a snapshot that moved since the read).
    const BEGIN_WRITE: &'static str;
    /// How to count this database's open transactions that began at or before a time (`None`:
    /// every id is handed out under the one write lock, so none can be open behind a reader).
    const OPEN_WRITERS: Option<OpenWriters>;
    /// True when `error` says this session may not run [`Dialect::OPEN_WRITERS`].
    fn access_denied(error: &sqlx::Error) -> bool;
}

impl Dialect for MySql {
    const NOW_MS: &'static str = "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)";
    const LOCKING_READ: &'static str = " FOR UPDATE";
    const SHARED_READ: &'static str = " LOCK IN SHARE MODE";
    const CLAIM_INDEX: &'static str = " FORCE INDEX (idx_room_outbox_claim)";
    const CLAIM_LOCK: &'static str = " FOR UPDATE SKIP LOCKED";
    const BEGIN_WRITE: &'static str = "BEGIN";
    // INNODB_TRX, read past its cache: see `consumer_sql::mysql_open_writers`. The probe's
    // transaction locks the one room_cluster row: it always exists and nothing writes it.
    const OPEN_WRITERS: Option<OpenWriters> = Some(OpenWriters {
        begin: "SELECT id FROM room_cluster WHERE id = 1 LOCK IN SHARE MODE",
        count: super::consumer_sql::mysql_open_writers,
    });
    fn access_denied(error: &sqlx::Error) -> bool {
        // 1227: PROCESS privilege missing; 1142/1044: no access to the table/schema.
        let code =
            error.as_database_error().and_then(|e| e.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>());
        code.is_some_and(|e| matches!(e.number(), 1044 | 1142 | 1227))
    }
    fn upsert(_key: &str, columns: &[&str]) -> String {
        let set: Vec<String> = columns.iter().map(|c| format!("{c} = VALUES({c})")).collect();
        format!(" ON DUPLICATE KEY UPDATE {}", set.join(", "))
    }
    fn bind_i64(q: &mut QueryBuilder<Self>, value: i64) {
        q.push_bind(value);
    }
    fn bind_str(q: &mut QueryBuilder<Self>, value: &str) {
        q.push_bind(value.to_owned());
    }
    fn rows_affected(result: &Self::QueryResult) -> u64 {
        result.rows_affected()
    }
}

impl Dialect for Sqlite {
    const NOW_MS: &'static str = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";
    // Command transactions start with BEGIN IMMEDIATE: the write lock is already held.
    const LOCKING_READ: &'static str = "";
    // WAL: a read transaction sees one snapshot from its first read to its end.
    const SHARED_READ: &'static str = "";
    const CLAIM_INDEX: &'static str = " INDEXED BY idx_room_outbox_claim";
    // Claims run in BEGIN IMMEDIATE: the one write lock is held.
    const CLAIM_LOCK: &'static str = "";
    const BEGIN_WRITE: &'static str = "BEGIN IMMEDIATE";
    const OPEN_WRITERS: Option<OpenWriters> = None;
    fn access_denied(_error: &sqlx::Error) -> bool {
        false
    }
    fn upsert(key: &str, columns: &[&str]) -> String {
        let set: Vec<String> = columns.iter().map(|c| format!("{c} = excluded.{c}")).collect();
        format!(" ON CONFLICT ({key}) DO UPDATE SET {}", set.join(", "))
    }
    fn bind_i64(q: &mut QueryBuilder<Self>, value: i64) {
        q.push_bind(value);
    }
    fn bind_str(q: &mut QueryBuilder<Self>, value: &str) {
        q.push_bind(value.to_owned());
    }
    fn rows_affected(result: &Self::QueryResult) -> u64 {
        result.rows_affected()
    }
}

pub(super) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Appends `(v1, v2, ...)` binding each value.
fn push_list<DB: Dialect, T>(q: &mut QueryBuilder<DB>, values: &[T], bind: fn(&mut QueryBuilder<DB>, &T)) {
    q.push("(");
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            q.push(", ");
        }
        bind(q, v);
    }
    q.push(")");
}

/// Appends `(id, ...)`.
pub(super) fn push_ids<DB: Dialect>(q: &mut QueryBuilder<DB>, ids: &[i64]) {
    push_list(q, ids, |q, id| DB::bind_i64(q, *id));
}

/// Appends `('value', ...)`.
pub(super) fn push_strs<DB: Dialect>(q: &mut QueryBuilder<DB>, values: &[String]) {
    push_list(q, values, |q, v| DB::bind_str(q, v));
}

/// Best-effort mark of synchronously published events.
pub(super) fn mark_delivered<DB: Dialect>(event_ids: &[String]) -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    let mut q = QueryBuilder::new(format!(
        "UPDATE room_outbox SET status = 'delivered', last_error = NULL, lock_until_ms = NULL, \
         delivered_at_ms = {now}, updated_at_ms = {now} WHERE status IN ('pending', 'retryable') AND event_id IN "
    ));
    push_strs(&mut q, event_ids);
    q
}

/// Appends the fence of every worker mark: the row is still claimed by this claim.
fn push_fence<DB: Dialect>(q: &mut QueryBuilder<DB>, worker_id: &str, ids: &[i64]) {
    q.push(" WHERE status = 'delivering' AND worker_id = ");
    DB::bind_str(q, worker_id);
    q.push(" AND id IN ");
    push_ids(q, ids);
}

/// Worker success, fenced.
pub(super) fn finish_delivered<DB: Dialect>(worker_id: &str, ids: &[i64]) -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    let mut q = QueryBuilder::new(format!(
        "UPDATE room_outbox SET status = 'delivered', last_error = NULL, lock_until_ms = NULL, \
         delivered_at_ms = {now}, updated_at_ms = {now}"
    ));
    push_fence(&mut q, worker_id, ids);
    q
}

/// Worker failure, fenced: one more attempt, claimable again after `retry_after`.
pub(super) fn finish_retryable<DB: Dialect>(
    worker_id: &str,
    error: &str,
    retry_after: Duration,
    ids: &[i64],
) -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    let mut q = QueryBuilder::new(
        "UPDATE room_outbox SET status = 'retryable', retry_count = retry_count + 1, last_error = ",
    );
    DB::bind_str(&mut q, error);
    q.push(format!(", lock_until_ms = {now} + "));
    DB::bind_i64(&mut q, millis(retry_after));
    q.push(format!(", updated_at_ms = {now}"));
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
    let now = DB::NOW_MS;
    let mut q = QueryBuilder::new(
        "UPDATE room_outbox SET status = 'failed', retry_count = retry_count + 1, lock_until_ms = NULL, last_error = ",
    );
    DB::bind_str(&mut q, error);
    q.push(", park_reason = ");
    DB::bind_str(&mut q, reason);
    q.push(format!(", updated_at_ms = {now}"));
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
    q.push(format!(", updated_at_ms = {now}"));
    push_fence(&mut q, worker_id, ids);
    q
}

/// Unpublished rows of a cancelled batch go back, claimable at once, retry_count unchanged.
pub(super) fn release_claimed<DB: Dialect>(worker_id: &str, ids: &[i64]) -> QueryBuilder<DB> {
    finish_deferred(worker_id, Duration::ZERO, ids)
}

/// `(park_reason, count)` of the parked rows.
pub(super) fn parked_by_reason<DB: Dialect>() -> QueryBuilder<DB> {
    QueryBuilder::new(
        "SELECT COALESCE(park_reason, 'unknown'), COUNT(*) FROM room_outbox WHERE status = 'failed' GROUP BY park_reason",
    )
}

/// `(status, count, age of the oldest, max retry_count)` per undelivered status.
pub(super) fn outbox_stats<DB: Dialect>() -> QueryBuilder<DB> {
    QueryBuilder::new(format!(
        "SELECT status, COUNT(*), {} - MIN(created_at_ms), MAX(retry_count) FROM room_outbox \
         WHERE status IN ('pending', 'delivering', 'retryable', 'failed') GROUP BY status",
        DB::NOW_MS
    ))
}

/// A page of rows for the admin listing.
pub(super) fn list_outbox<DB: Dialect>(query: &OutboxQuery) -> QueryBuilder<DB> {
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

/// `(event_id, status)` of the given events.
pub(super) fn outbox_statuses<DB: Dialect>(event_ids: &[String]) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("SELECT event_id, status FROM room_outbox WHERE event_id IN ");
    push_strs(&mut q, event_ids);
    q
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
        DB::CLAIM_INDEX,
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

/// One row by event id.
pub(super) fn find_outbox<DB: Dialect>(event_id: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(format!("SELECT {OUTBOX_COLUMNS} FROM room_outbox WHERE event_id = "));
    DB::bind_str(&mut q, event_id);
    q
}

/// Appends the purge predicate: delivered longer ago than `age_ms` (database clock), and with
/// an id up to `up_to` when given (the lowest consumer position: a row some consumer has not
/// passed yet stays). `delivered_at_ms` is always set by a delivery mark; `updated_at_ms`
/// stands in should it be missing.
pub(super) fn push_purgeable<DB: Dialect>(q: &mut QueryBuilder<DB>, age_ms: i64, up_to: Option<i64>) {
    q.push(format!("status = 'delivered' AND COALESCE(delivered_at_ms, updated_at_ms) < {} - ", DB::NOW_MS));
    DB::bind_i64(q, age_ms);
    if let Some(up_to) = up_to {
        q.push(" AND id <= ");
        DB::bind_i64(q, up_to);
    }
}

/// How many rows a purge would delete.
pub(super) fn count_purgeable<DB: Dialect>(age_ms: i64, up_to: Option<i64>) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("SELECT COUNT(*) FROM room_outbox WHERE ");
    push_purgeable(&mut q, age_ms, up_to);
    q
}

/// Requeued rows go back to `pending`, claimable now; `last_error` stays. A parked row gets a
/// fresh attempt budget (`retry_count` 0); a retryable one keeps its count.
pub(super) fn requeue_set<DB: Dialect>() -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    QueryBuilder::new(format!(
        "UPDATE room_outbox SET retry_count = CASE WHEN status = 'failed' THEN 0 ELSE retry_count END, \
         status = 'pending', park_reason = NULL, worker_id = NULL, lock_until_ms = {now}, updated_at_ms = {now} \
         WHERE status IN ('retryable', 'failed') AND "
    ))
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

/// Fresh rows the synchronous path gave up on: claimable at once instead of after their
/// young-pending guard, and first (`lock_until_ms` 0 sorts ahead of any backlog in the claim
/// index), so live events never wait behind an old backlog.
pub(super) fn release_pending<DB: Dialect>(event_ids: &[String]) -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    let mut q = QueryBuilder::new(format!(
        "UPDATE room_outbox SET lock_until_ms = 0, updated_at_ms = {now} \
         WHERE status = 'pending' AND lock_until_ms > {now} AND event_id IN "
    ));
    push_strs(&mut q, event_ids);
    q
}

/// One undelivered row of `room_id` older than the row of `event_id`, if any.
pub(super) fn earlier_undelivered<DB: Dialect>(room_id: &str, event_id: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("SELECT id FROM room_outbox WHERE room_id = ");
    DB::bind_str(&mut q, room_id);
    q.push(" AND lock_until_ms IS NOT NULL AND id < (SELECT id FROM room_outbox WHERE event_id = ");
    DB::bind_str(&mut q, event_id);
    q.push(") LIMIT 1");
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

//! The statements of the event consumers ([`ConsumerRepository`](super::ConsumerRepository)),
//! built once for both backends over a [`Backend`]; `mod.rs` runs them on the repository's pool.
//!
//! The lease fences count on `rows_affected` being the rows a statement *matched*: sqlx opens
//! MySQL sessions with CLIENT_FOUND_ROWS (and every write here moves `updated_at_ms` anyway),
//! so a renewal that changes nothing else still counts its row. An acquisition reads the owner
//! back too, so a lease lost between its UPDATE and its read is never reported as won.

use std::time::Duration;

use sqlx::QueryBuilder;

use super::types::{AuditEntry, ConsumerLease, ConsumerRow, ResetTo};
use crate::store::backend::Backend;
use crate::store::backend::bind::{insert_or_ignore, millis};
use crate::store::error::{StoreError, short_error};

/// `room_event_consumer` as read, with the lease's time left on the database clock.
#[derive(sqlx::FromRow)]
pub(super) struct ConsumerRecord {
    name: String,
    position: i64,
    owner: Option<String>,
    remaining_ms: i64,
    updated_at_ms: i64,
    last_error: Option<String>,
}

impl From<ConsumerRecord> for ConsumerRow {
    fn from(r: ConsumerRecord) -> Self {
        ConsumerRow {
            name: r.name,
            position: r.position,
            owner: r.owner,
            lease_remaining: (r.remaining_ms > 0).then(|| Duration::from_millis(r.remaining_ms as u64)),
            updated_at_ms: r.updated_at_ms,
            last_error: r.last_error,
        }
    }
}

/// A consumer's position and owner, read back after an acquisition.
#[derive(sqlx::FromRow)]
pub(super) struct Holder {
    pub(super) position: i64,
    pub(super) owner: Option<String>,
}

/// Takes the lease when it is free, expired or already `owner`'s (`<=`: a lease ending now is
/// over, as `list` reports it).
pub(super) fn take<DB: Backend>(lease: ConsumerLease<'_>) -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    let mut q = QueryBuilder::new("UPDATE room_event_consumer SET owner = ");
    DB::bind_str(&mut q, lease.owner);
    q.push(format!(", lease_until_ms = {now} + "));
    DB::bind_i64(&mut q, millis(lease.ttl));
    q.push(format!(", updated_at_ms = {now} WHERE name = "));
    DB::bind_str(&mut q, lease.name);
    q.push(" AND (owner IS NULL OR owner = ");
    DB::bind_str(&mut q, lease.owner);
    q.push(format!(" OR lease_until_ms <= {now})"));
    q
}

/// Creates the row, free at position 0; an existing row is left as it is.
pub(super) fn create<DB: Backend>(name: &str) -> QueryBuilder<DB> {
    insert_or_ignore("room_event_consumer", &[("name", name)], "updated_at_ms", "name")
}

/// The position and owner of `name`.
pub(super) fn holder<DB: Backend>(name: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("SELECT position, owner FROM room_event_consumer WHERE name = ");
    DB::bind_str(&mut q, name);
    q
}

/// Appends the lease renewal and the owner fence of every write of a running consumer.
fn push_renewal<DB: Backend>(q: &mut QueryBuilder<DB>, lease: ConsumerLease<'_>) {
    let now = DB::NOW_MS;
    q.push(format!(", lease_until_ms = {now} + "));
    DB::bind_i64(q, millis(lease.ttl));
    q.push(format!(", updated_at_ms = {now} WHERE name = "));
    DB::bind_str(q, lease.name);
    q.push(" AND owner = ");
    DB::bind_str(q, lease.owner);
}

/// Fenced on the owner and on the position it moves from: a reset (or another instance) that
/// moved the consumer in between wins.
pub(super) fn advance<DB: Backend>(lease: ConsumerLease<'_>, from: i64, to: i64) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("UPDATE room_event_consumer SET last_error = NULL, position = ");
    DB::bind_i64(&mut q, to);
    push_renewal(&mut q, lease);
    q.push(" AND position = ");
    DB::bind_i64(&mut q, from);
    q
}

/// Records a failed delivery (shortened to what `last_error` holds), fenced on the owner.
pub(super) fn record_error<DB: Backend>(lease: ConsumerLease<'_>, error: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("UPDATE room_event_consumer SET last_error = ");
    DB::bind_str(&mut q, &short_error(error));
    push_renewal(&mut q, lease);
    q
}

/// Frees the lease if its owner still holds it.
pub(super) fn release<DB: Backend>(lease: ConsumerLease<'_>) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(format!(
        "UPDATE room_event_consumer SET owner = NULL, lease_until_ms = 0, updated_at_ms = {} WHERE name = ",
        DB::NOW_MS
    ));
    DB::bind_str(&mut q, lease.name);
    q.push(" AND owner = ");
    DB::bind_str(&mut q, lease.owner);
    q
}

/// A walk of the primary key: no index but the PK is needed, however many rows IM delivered.
pub(super) fn events_after<DB: Backend>(position: i64, limit: u32) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(
        "SELECT id, event_id, event_type, room_id, envelope, created_at_ms, trace_context FROM room_outbox \
         WHERE id > ",
    );
    DB::bind_i64(&mut q, position);
    q.push(" ORDER BY id LIMIT ");
    DB::bind_i64(&mut q, i64::from(limit));
    q
}

/// The age of the first event after `position`, on the database clock (no row: caught up).
pub(super) fn lag<DB: Backend>(position: i64) -> QueryBuilder<DB> {
    let mut q =
        QueryBuilder::new(format!("SELECT {} - created_at_ms FROM room_outbox WHERE id > ", DB::NOW_MS));
    DB::bind_i64(&mut q, position);
    q.push(" ORDER BY id LIMIT 1");
    q
}

/// The database clock.
pub(super) fn now<DB: Backend>() -> QueryBuilder<DB> {
    QueryBuilder::new(format!("SELECT {}", DB::NOW_MS))
}

/// Every consumer row, by name, with the lease's time left.
pub(super) fn list<DB: Backend>() -> QueryBuilder<DB> {
    QueryBuilder::new(format!(
        "SELECT name, position, owner, lease_until_ms - {} AS remaining_ms, updated_at_ms, last_error \
         FROM room_event_consumer ORDER BY name",
        DB::NOW_MS
    ))
}

/// The position of `name`, locked until the reset's transaction ends.
pub(super) fn locked_position<DB: Backend>(name: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("SELECT position FROM room_event_consumer WHERE name = ");
    DB::bind_str(&mut q, name);
    q.push(DB::LOCKING_READ);
    q
}

/// The position a reset moves to. By time: just before the lowest id committed at or after
/// `t` — ids and commit times can disagree by a few rows, and delivering an older event again
/// (receivers dedup on event id) beats skipping a newer one; with nothing that recent, the
/// newest id (everything stored is older); with nothing stored, 0. A scan of `room_outbox`:
/// an operator's command, on a table retention keeps small.
pub(super) fn reset_target<DB: Backend>(to: ResetTo) -> Result<QueryBuilder<DB>, StoreError> {
    match to {
        ResetTo::Id(id) if id < 0 => {
            Err(StoreError::Config(format!("reset position {id} is negative: outbox ids start at 1")))
        }
        ResetTo::Id(id) => {
            let mut q = QueryBuilder::new("SELECT ");
            DB::bind_i64(&mut q, id);
            Ok(q)
        }
        ResetTo::TimeMs(t) => {
            let mut q =
                QueryBuilder::new("SELECT COALESCE((SELECT MIN(id) FROM room_outbox WHERE created_at_ms >= ");
            DB::bind_i64(&mut q, t);
            q.push(") - 1, (SELECT MAX(id) FROM room_outbox), 0)");
            Ok(q)
        }
    }
}

/// Moves `name` to `position` and frees its lease, creating the row when missing.
pub(super) fn reset<DB: Backend>(name: &str, position: i64) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(
        "INSERT INTO room_event_consumer (name, position, owner, lease_until_ms, updated_at_ms) VALUES (",
    );
    DB::bind_str(&mut q, name);
    q.push(", ");
    DB::bind_i64(&mut q, position);
    q.push(format!(", NULL, 0, {})", DB::NOW_MS));
    q.push(DB::upsert("name", &["position", "owner", "lease_until_ms", "updated_at_ms"]));
    q
}

/// `(name, position)` of every stored consumer.
pub(super) fn positions<DB: Backend>() -> QueryBuilder<DB> {
    QueryBuilder::new("SELECT name, position FROM room_event_consumer")
}

/// Deletes the row of `name`.
pub(super) fn retire<DB: Backend>(name: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("DELETE FROM room_event_consumer WHERE name = ");
    DB::bind_str(&mut q, name);
    q
}

/// One multi-row INSERT; a row whose `event_id` is there already changes nothing (an upsert
/// that rewrites the key with itself, not an insert-ignore, which on MySQL would also turn a
/// too-long value into a warning and a silently truncated row).
pub(super) fn append_audit<DB: Backend>(entries: &[AuditEntry]) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(
        "INSERT INTO room_audit_log (event_id, event_type, room_id, envelope, occurred_at_ms, recorded_at_ms) VALUES ",
    );
    for (i, e) in entries.iter().enumerate() {
        q.push(if i == 0 { "(" } else { ", (" });
        DB::bind_str(&mut q, &e.event_id);
        for text in [&e.event_type, &e.room_id, &e.envelope] {
            q.push(", ");
            DB::bind_str(&mut q, text);
        }
        q.push(", ");
        DB::bind_i64(&mut q, e.occurred_at_ms);
        q.push(format!(", {})", DB::NOW_MS));
    }
    q.push(DB::upsert("event_id", &["event_id"]));
    q
}

/// Up to `limit` audit entries (of `room_id` only, when given), in the order recorded.
pub(super) fn audit_entries<DB: Backend>(room_id: Option<&str>, limit: u32) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(
        "SELECT event_id, event_type, room_id, envelope, occurred_at_ms FROM room_audit_log",
    );
    if let Some(room_id) = room_id {
        q.push(" WHERE room_id = ");
        DB::bind_str(&mut q, room_id);
    }
    q.push(" ORDER BY id LIMIT ");
    DB::bind_i64(&mut q, i64::from(limit));
    q
}

/// The lowest position among the stored consumers and the `enabled` ones (one without a row
/// counts 0); `None` when there is neither.
pub(super) fn floor(stored: &[(String, i64)], enabled: &[&str]) -> Option<i64> {
    let missing = enabled.iter().any(|name| !stored.iter().any(|(n, _)| n == name));
    let lowest = stored.iter().map(|(_, p)| *p).min();
    if missing { Some(0) } else { lowest }
}

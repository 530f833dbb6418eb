//! The statements of the claim by room (run by [`claim`](super::claim)): the room listing, the
//! rooms' rows from their heads, the locking read and the mark, and the read-back; built once
//! for both backends over a [`Backend`].

use std::time::Duration;

use sqlx::QueryBuilder;

use crate::store::backend::Backend;
use crate::store::backend::bind::{millis, push_ids, push_list, push_strs};
use crate::store::outbox_row::OUTBOX_COLUMNS;
use crate::store::queue::types::Claim;

/// The statuses of a row not yet delivered (nor parked): exactly the rows with a
/// `lock_until_ms`.
const UNDELIVERED: [&str; 3] = ["pending", "retryable", "delivering"];

/// Rows by id, in id order (read back after a claim).
pub(super) fn outbox_rows_by_id<DB: Backend>(ids: &[i64]) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(format!("SELECT {OUTBOX_COLUMNS} FROM room_outbox WHERE id IN "));
    push_ids(&mut q, ids);
    q.push(" ORDER BY id");
    q
}

/// `(<row> held by one of `own`)`, on the row named `t`.
fn push_own<DB: Backend>(q: &mut QueryBuilder<DB>, t: &str, own: &[String]) {
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
fn push_claimable<DB: Backend>(q: &mut QueryBuilder<DB>, t: &str, claim: &Claim) {
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
fn push_flags<DB: Backend>(q: &mut QueryBuilder<DB>, t: &str, claim: &Claim) {
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
pub(super) fn claim_rooms<DB: Backend>(claim: &Claim, per_list: usize) -> QueryBuilder<DB> {
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
pub(super) fn room_rows<DB: Backend>(claim: &Claim, rooms: &[(String, i64, usize)]) -> QueryBuilder<DB> {
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
pub(super) fn lock_claimable<DB: Backend>(claim: &Claim, ids: &[i64]) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("SELECT o.id FROM room_outbox o WHERE o.id IN ");
    push_ids(&mut q, ids);
    q.push(" AND ");
    push_claimable(&mut q, "o", claim);
    q.push(DB::CLAIM_LOCK);
    q
}

/// Marks claimed rows `delivering` under a lease for `worker_id`.
pub(super) fn claim_rows<DB: Backend>(worker_id: &str, lease: Duration, ids: &[i64]) -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    let mut q = QueryBuilder::new("UPDATE room_outbox SET status = 'delivering', worker_id = ");
    DB::bind_str(&mut q, worker_id);
    q.push(format!(", lock_until_ms = {now} + "));
    DB::bind_i64(&mut q, millis(lease));
    q.push(format!(", updated_at_ms = {now} WHERE id IN "));
    push_ids(&mut q, ids);
    q
}

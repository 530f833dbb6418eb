//! The command path's statements on the outbox rows it committed
//! ([`CommandStore`](super::CommandStore)): the delivered mark of what it published, the park
//! of an event IM refused alone for its content (and the longer guard its split may need), the
//! release to the worker of what it gave up on, the room-order check before a lane takes its
//! room back, the statuses a replay answers with, and a room's event history; built once for
//! both backends over a [`Backend`].

use std::time::Duration;

use sqlx::QueryBuilder;

use crate::store::backend::Backend;
use crate::store::backend::bind::{millis, push_strs};

/// Best-effort mark of synchronously published events.
pub(super) fn mark_delivered<DB: Backend>(event_ids: &[String]) -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    let mut q = QueryBuilder::new(format!(
        "UPDATE room_outbox SET status = 'delivered', last_error = NULL, lock_until_ms = NULL, \
         delivered_at_ms = {now}, updated_at_ms = {now} WHERE status IN ('pending', 'retryable') AND event_id IN "
    ));
    push_strs(&mut q, event_ids);
    q
}

/// Fresh rows the synchronous path gave up on: claimable at once instead of after their
/// young-pending guard, and first (`lock_until_ms` 0 sorts ahead of any backlog in the claim
/// index), so live events never wait behind an old backlog. Their `updated_at_ms` is now: in a
/// cluster a row is another node's to claim only once it has also not changed for
/// `orphaned_after` (the claim's claimable predicate, `store/queue/claim/sql.rs`), so released
/// rows are their owner's worker's, not every node's at once.
pub(super) fn release_pending<DB: Backend>(event_ids: &[String]) -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    let mut q = QueryBuilder::new(format!(
        "UPDATE room_outbox SET lock_until_ms = 0, updated_at_ms = {now} \
         WHERE status = 'pending' AND lock_until_ms > {now} AND event_id IN "
    ));
    push_strs(&mut q, event_ids);
    q
}

/// One fresh row the synchronous path still guards, parked: IM refused its event alone for
/// its content. The guard (`pending`, claim-after time still to come, on the database clock)
/// is the fence: a row the worker may claim (or holds) is left to the worker, which parks it
/// the same way.
pub(super) fn park_pending<DB: Backend>(event_id: &str, reason: &str, error: &str) -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    let mut q = QueryBuilder::new(
        "UPDATE room_outbox SET status = 'failed', retry_count = retry_count + 1, last_error = ",
    );
    DB::bind_str(&mut q, error);
    q.push(", park_reason = ");
    DB::bind_str(&mut q, reason);
    q.push(format!(
        ", lock_until_ms = NULL, updated_at_ms = {now} WHERE status = 'pending' AND lock_until_ms > {now} \
         AND event_id = "
    ));
    DB::bind_str(&mut q, event_id);
    q
}

/// Fresh rows the synchronous path still guards, guarded `guard` longer from now: a lane
/// splitting a refused message needs longer than their first guard. The same fence as
/// [`park_pending`]: a row whose guard has passed is left as it is.
pub(super) fn extend_guard<DB: Backend>(event_ids: &[String], guard: Duration) -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    let mut q = QueryBuilder::new(format!("UPDATE room_outbox SET lock_until_ms = {now} + "));
    DB::bind_i64(&mut q, millis(guard));
    q.push(format!(
        ", updated_at_ms = {now} WHERE status = 'pending' AND lock_until_ms > {now} AND event_id IN "
    ));
    push_strs(&mut q, event_ids);
    q
}

/// One undelivered row of `room_id`, if any (only undelivered rows have a `lock_until_ms`:
/// `idx_room_outbox_room_undelivered`).
pub(super) fn undelivered_in_room<DB: Backend>(room_id: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("SELECT id FROM room_outbox WHERE room_id = ");
    DB::bind_str(&mut q, room_id);
    q.push(" AND lock_until_ms IS NOT NULL LIMIT 1");
    q
}

/// `(event_id, status)` of the given events.
pub(super) fn outbox_statuses<DB: Backend>(event_ids: &[String]) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("SELECT event_id, status FROM room_outbox WHERE event_id IN ");
    push_strs(&mut q, event_ids);
    q
}

/// A room's IM events with `room_version` in `after+1..=up_to`, in version order, each with its
/// age on the database clock: one range of `idx_room_outbox_history`, at most `up_to - after`
/// rows whatever the room's history holds (the age is answered, never filtered on: a filter
/// would scan the whole range for the rows it keeps).
pub(super) fn room_events_after<DB: Backend>(room_id: &str, after: i64, up_to: i64) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(format!(
        "SELECT room_version, envelope, {} - created_at_ms AS age_ms FROM room_outbox WHERE room_id = ",
        DB::NOW_MS
    ));
    DB::bind_str(&mut q, room_id);
    q.push(" AND room_version > ");
    DB::bind_i64(&mut q, after);
    q.push(" AND room_version <= ");
    DB::bind_i64(&mut q, up_to);
    q.push(" ORDER BY room_version LIMIT ");
    DB::bind_i64(&mut q, up_to.saturating_sub(after).max(0));
    q
}

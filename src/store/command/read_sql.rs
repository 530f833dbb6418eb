//! The command path's reads, built once for both backends over a [`Backend`]: a room as of one
//! version (snapshot, members, gift totals: [`load_room`](super::commit::load_room)), its
//! stored version, and the command log's rows of a command id.

use sqlx::QueryBuilder;

use super::types::CommandKey;
use crate::store::backend::Backend;
use crate::store::backend::bind::push_strs;

/// A room's snapshot row, kept from writers until the load's transaction ends so the member
/// and gift rows read next belong to the same version.
pub(super) fn load_snapshot<DB: Backend>(room_id: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("SELECT version, state FROM room_snapshot WHERE room_id = ");
    DB::bind_str(&mut q, room_id);
    q.push(DB::SHARED_READ);
    q
}

/// A room's members, by user id.
pub(super) fn load_members<DB: Backend>(room_id: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("SELECT user_id, joined_at_ms FROM room_member WHERE room_id = ");
    DB::bind_str(&mut q, room_id);
    q.push(" ORDER BY user_id");
    q
}

/// A room's gift totals.
pub(super) fn load_gift_totals<DB: Backend>(room_id: &str) -> QueryBuilder<DB> {
    let mut q =
        QueryBuilder::new("SELECT user_id, total_value, first_version FROM room_gift_total WHERE room_id = ");
    DB::bind_str(&mut q, room_id);
    q
}

/// A room's attributes.
pub(super) fn load_attributes<DB: Backend>(room_id: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("SELECT attr_key, value, version FROM room_attribute WHERE room_id = ");
    DB::bind_str(&mut q, room_id);
    q
}

/// A room's pending seat requests and invitations.
pub(super) fn load_seat_requests<DB: Backend>(room_id: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(
        "SELECT user_id, kind, seat_index, expires_at_ms, by_actor FROM room_seat_request WHERE room_id = ",
    );
    DB::bind_str(&mut q, room_id);
    q
}

/// Up to `limit` seat requests and invitations of every room due at `now_ms`, after
/// `(after_room, after_user)` in key order: a page of the expiry scan.
pub(super) fn due_seat_requests<DB: Backend>(
    now_ms: i64,
    after: (&str, &str),
    limit: u32,
) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(
        "SELECT room_id, user_id, kind, expires_at_ms FROM room_seat_request WHERE expires_at_ms <= ",
    );
    DB::bind_i64(&mut q, now_ms);
    q.push(" AND (room_id > ");
    DB::bind_str(&mut q, after.0);
    q.push(" OR (room_id = ");
    DB::bind_str(&mut q, after.0);
    q.push(" AND user_id > ");
    DB::bind_str(&mut q, after.1);
    q.push(")) ORDER BY room_id, user_id LIMIT ");
    DB::bind_i64(&mut q, i64::from(limit));
    q
}

/// A room's mutes and bans still in force on the database clock.
pub(super) fn load_restrictions<DB: Backend>(room_id: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(
        "SELECT kind, user_id, until_ms, reason, by_actor FROM room_restriction WHERE room_id = ",
    );
    DB::bind_str(&mut q, room_id);
    q.push(format!(" AND until_ms > {}", DB::NOW_MS));
    q
}

/// Up to `limit` ended mutes and bans of every room, the longest ended first (by the
/// `until_ms` index): what one prune batch deletes.
pub(super) fn ended_restrictions<DB: Backend>(limit: u32) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(format!(
        "SELECT room_id, kind, user_id FROM room_restriction WHERE until_ms <= {} ORDER BY until_ms LIMIT ",
        DB::NOW_MS
    ));
    DB::bind_i64(&mut q, i64::from(limit));
    q
}

/// Deletes `rows` (`(room_id, kind, user_id)`) that are still ended: one renewed meanwhile
/// stays.
pub(super) fn delete_restrictions<DB: Backend>(rows: &[(String, String, String)]) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("DELETE FROM room_restriction WHERE (room_id, kind, user_id) IN (");
    for (i, (room_id, kind, user_id)) in rows.iter().enumerate() {
        q.push(if i == 0 { "(" } else { ", (" });
        DB::bind_str(&mut q, room_id);
        q.push(", ");
        DB::bind_str(&mut q, kind);
        q.push(", ");
        DB::bind_str(&mut q, user_id);
        q.push(")");
    }
    q.push(format!(") AND until_ms <= {}", DB::NOW_MS));
    q
}

/// Open rooms after `after` (room id order: a page of the scan) without members, written last
/// at least `idle_after` ago. On the index of open rooms (`status`, `room_id`): the page is a
/// range of it, and closed rooms are never read.
pub(super) fn idle_rooms<DB: Backend>(
    idle_after: std::time::Duration,
    after: &str,
    limit: u32,
) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(format!(
        "SELECT s.room_id FROM room_snapshot s {} WHERE s.status = 'open' AND s.room_id > ",
        DB::index_hint("idx_room_snapshot_open")
    ));
    DB::bind_str(&mut q, after);
    q.push(format!(" AND s.updated_at_ms <= {} - ", DB::NOW_MS));
    DB::bind_i64(&mut q, i64::try_from(idle_after.as_millis()).unwrap_or(i64::MAX));
    q.push(
        " AND NOT EXISTS (SELECT 1 FROM room_member m WHERE m.room_id = s.room_id) ORDER BY s.room_id LIMIT ",
    );
    DB::bind_i64(&mut q, i64::from(limit));
    q
}

/// How many open rooms other than `except_room` `owner_id` owns (the owner's index).
pub(super) fn open_rooms_owned<DB: Backend>(owner_id: &str, except_room: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("SELECT COUNT(*) FROM room_snapshot WHERE owner_id = ");
    DB::bind_str(&mut q, owner_id);
    q.push(" AND status = 'open' AND room_id <> ");
    DB::bind_str(&mut q, except_room);
    q
}

/// The stored version of a room; `lock` appends the backend's locking read (held until commit).
pub(super) fn room_version<DB: Backend>(room_id: &str, lock: bool) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("SELECT version FROM room_snapshot WHERE room_id = ");
    DB::bind_str(&mut q, room_id);
    if lock {
        q.push(DB::LOCKING_READ);
    }
    q
}

/// The log's columns, as [`CommandRow`](super::rows::CommandRow) reads them, up to the
/// command id the statement compares.
const COMMAND_COLUMNS: &str = "SELECT command_id, caller, room_id, fingerprint, applied, room_version, outcome FROM room_command_log WHERE command_id";

/// The log rows of `key`: its caller's, and one logged before commands had callers (at most
/// two rows, on the unique key).
pub(super) fn find_command<DB: Backend>(key: &CommandKey) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(format!("{COMMAND_COLUMNS} = "));
    DB::bind_str(&mut q, &key.command_id);
    q.push(" AND caller IN (");
    DB::bind_str(&mut q, &key.caller);
    q.push(", '')");
    q
}

/// The log rows of any of these command ids (any caller: the caller picks its own).
pub(super) fn find_commands<DB: Backend>(command_ids: &[String]) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(format!("{COMMAND_COLUMNS} IN "));
    push_strs(&mut q, command_ids);
    q
}

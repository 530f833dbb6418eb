//! The SQL of the command path, built once for both backends over a [`Dialect`]: the room
//! commit (snapshot fence, member rows, gift totals, command log, outbox) and the room load.
//! A commit writes what its commands changed, never the whole room. And the refunds of gifts
//! that committed nothing.

use std::time::Duration;

use sqlx::QueryBuilder;

use super::sql::{Dialect, millis, push_strs};
use super::types::{CommandKey, GiftTotalRow, RoomCommit, SnapshotWrite};

/// A new room's first snapshot; a unique violation means another writer created it first.
/// `epoch`: the shard lease it is written under (0 without a cluster).
pub(super) fn insert_snapshot<DB: Dialect>(
    room_id: &str,
    s: &SnapshotWrite,
    epoch: Option<u64>,
) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(
        "INSERT INTO room_snapshot (room_id, version, status, state, epoch, updated_at_ms) VALUES (",
    );
    DB::bind_str(&mut q, room_id);
    q.push(", ");
    DB::bind_i64(&mut q, s.version as i64);
    q.push(", ");
    DB::bind_str(&mut q, s.status);
    q.push(", ");
    DB::bind_str(&mut q, &s.state);
    q.push(", ");
    DB::bind_i64(&mut q, epoch.unwrap_or(0) as i64);
    q.push(format!(", {})", DB::NOW_MS));
    q
}

/// The next snapshot, fenced: changes one row only if the stored version is `expected` and,
/// under a shard lease, it was not written under a newer `epoch` (which it then carries).
pub(super) fn update_snapshot<DB: Dialect>(
    room_id: &str,
    expected: u64,
    s: &SnapshotWrite,
    epoch: Option<u64>,
) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("UPDATE room_snapshot SET version = ");
    DB::bind_i64(&mut q, s.version as i64);
    q.push(", status = ");
    DB::bind_str(&mut q, s.status);
    q.push(", state = ");
    DB::bind_str(&mut q, &s.state);
    if let Some(epoch) = epoch {
        q.push(", epoch = ");
        DB::bind_i64(&mut q, epoch as i64);
    }
    q.push(format!(", updated_at_ms = {} WHERE room_id = ", DB::NOW_MS));
    DB::bind_str(&mut q, room_id);
    q.push(" AND version = ");
    DB::bind_i64(&mut q, expected as i64);
    if let Some(epoch) = epoch {
        q.push(" AND epoch <= ");
        DB::bind_i64(&mut q, epoch as i64);
    }
    q
}

/// The stored version of a room; `lock` appends the dialect's locking read (held until commit).
pub(super) fn room_version<DB: Dialect>(room_id: &str, lock: bool) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("SELECT version FROM room_snapshot WHERE room_id = ");
    DB::bind_str(&mut q, room_id);
    if lock {
        q.push(DB::LOCKING_READ);
    }
    q
}

/// Every member row of a room (a close).
pub(super) fn delete_all_members<DB: Dialect>(room_id: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("DELETE FROM room_member WHERE room_id = ");
    DB::bind_str(&mut q, room_id);
    q
}

/// Some member rows of a room (leaves).
pub(super) fn delete_members<DB: Dialect>(room_id: &str, user_ids: &[String]) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("DELETE FROM room_member WHERE room_id = ");
    DB::bind_str(&mut q, room_id);
    q.push(" AND user_id IN ");
    push_strs(&mut q, user_ids);
    q
}

/// Member rows (joins); a member who left and joined again within one commit overwrites.
pub(super) fn upsert_members<DB: Dialect>(room_id: &str, members: &[(String, i64)]) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("INSERT INTO room_member (room_id, user_id, joined_at_ms) VALUES ");
    for (i, (user_id, joined_at_ms)) in members.iter().enumerate() {
        q.push(if i == 0 { "(" } else { ", (" });
        DB::bind_str(&mut q, room_id);
        q.push(", ");
        DB::bind_str(&mut q, user_id);
        q.push(", ");
        DB::bind_i64(&mut q, *joined_at_ms);
        q.push(")");
    }
    q.push(DB::upsert("room_id, user_id", &["joined_at_ms"]));
    q
}

/// Senders' running totals.
pub(super) fn upsert_gift_totals<DB: Dialect>(room_id: &str, totals: &[GiftTotalRow]) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(
        "INSERT INTO room_gift_total (room_id, user_id, total_value, first_version) VALUES ",
    );
    for (i, t) in totals.iter().enumerate() {
        q.push(if i == 0 { "(" } else { ", (" });
        DB::bind_str(&mut q, room_id);
        q.push(", ");
        DB::bind_str(&mut q, &t.user_id);
        q.push(", ");
        DB::bind_i64(&mut q, i64::try_from(t.total_value).unwrap_or(i64::MAX));
        q.push(", ");
        DB::bind_i64(&mut q, t.first_version as i64);
        q.push(")");
    }
    q.push(DB::upsert("room_id, user_id", &["total_value", "first_version"]));
    q
}

/// The commands' log rows; a unique violation on `(command_id, caller)` means one was logged
/// before.
pub(super) fn insert_command_log<DB: Dialect>(c: &RoomCommit) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(
        "INSERT INTO room_command_log (command_id, caller, room_id, command_type, fingerprint, request_id, applied, \
         room_version, outcome, created_at_ms) VALUES ",
    );
    for (i, command) in c.commands.iter().enumerate() {
        q.push(if i == 0 { "(" } else { ", (" });
        for value in [
            &command.command_id,
            &command.caller,
            &c.room_id,
            command.command_type,
            &command.fingerprint,
            &command.request_id,
        ] {
            DB::bind_str(&mut q, value);
            q.push(", ");
        }
        DB::bind_i64(&mut q, i64::from(command.applied));
        q.push(", ");
        DB::bind_i64(&mut q, command.room_version as i64);
        q.push(", ");
        DB::bind_str(&mut q, &command.outcome);
        q.push(format!(", {})", DB::NOW_MS));
    }
    q
}

/// The commands' outbox rows: `pending`, claimable once `claim_after` has passed.
pub(super) fn insert_outbox<DB: Dialect>(c: &RoomCommit) -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    let mut q = QueryBuilder::new(
        "INSERT INTO room_outbox (event_id, room_id, event_type, envelope, room_version, trace_context, \
         shard, status, retry_count, lock_until_ms, created_at_ms, updated_at_ms) VALUES ",
    );
    for (i, row) in c.outbox.iter().enumerate() {
        q.push(if i == 0 { "(" } else { ", (" });
        for value in [&row.event_id, &c.room_id, row.event_type, &row.envelope] {
            DB::bind_str(&mut q, value);
            q.push(", ");
        }
        DB::bind_opt_i64(&mut q, row.room_version.and_then(|v| i64::try_from(v).ok()));
        q.push(", ");
        DB::bind_opt_str(&mut q, row.trace_context.as_deref());
        q.push(", ");
        DB::bind_i64(&mut q, i64::from(c.shard));
        q.push(format!(", 'pending', 0, {now} + "));
        DB::bind_i64(&mut q, millis(c.claim_after));
        q.push(format!(", {now}, {now})"));
    }
    q
}

/// A room's snapshot row, kept from writers until the load's transaction ends so the member
/// and gift rows read next belong to the same version.
pub(super) fn load_snapshot<DB: Dialect>(room_id: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("SELECT version, state FROM room_snapshot WHERE room_id = ");
    DB::bind_str(&mut q, room_id);
    q.push(DB::SHARED_READ);
    q
}

/// A room's members, by user id.
pub(super) fn load_members<DB: Dialect>(room_id: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("SELECT user_id, joined_at_ms FROM room_member WHERE room_id = ");
    DB::bind_str(&mut q, room_id);
    q.push(" ORDER BY user_id");
    q
}

/// A room's gift totals.
pub(super) fn load_gift_totals<DB: Dialect>(room_id: &str) -> QueryBuilder<DB> {
    let mut q =
        QueryBuilder::new("SELECT user_id, total_value, first_version FROM room_gift_total WHERE room_id = ");
    DB::bind_str(&mut q, room_id);
    q
}

const COMMAND_COLUMNS: &str = "SELECT command_id, caller, room_id, fingerprint, applied, room_version, outcome FROM room_command_log WHERE command_id";

/// The log rows of `key`: its caller's, and one logged before commands had callers (at most
/// two rows, on the unique key).
pub(super) fn find_command<DB: Dialect>(key: &CommandKey) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(format!("{COMMAND_COLUMNS} = "));
    DB::bind_str(&mut q, &key.command_id);
    q.push(" AND caller IN (");
    DB::bind_str(&mut q, &key.caller);
    q.push(", '')");
    q
}

/// The log rows of any of these command ids (any caller: the caller picks its own).
pub(super) fn find_commands<DB: Dialect>(command_ids: &[String]) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(format!("{COMMAND_COLUMNS} IN "));
    push_strs(&mut q, command_ids);
    q
}

/// Records that the debit under `wallet_key` (a gift in `room_id`) was refunded; a key
/// recorded already keeps its first row.
pub(super) fn record_refund<DB: Dialect>(wallet_key: &str, room_id: &str) -> QueryBuilder<DB> {
    let columns = [("wallet_key", wallet_key), ("room_id", room_id)];
    super::sql::insert_or_ignore("room_payment_refund", &columns, "refunded_at_ms", "wallet_key")
}

/// The refund row of `wallet_key`, if any.
pub(super) fn find_refund<DB: Dialect>(wallet_key: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("SELECT wallet_key FROM room_payment_refund WHERE wallet_key = ");
    DB::bind_str(&mut q, wallet_key);
    q
}

/// Records that the wallet confirmed the refund under `wallet_key`.
pub(super) fn finish_refund<DB: Dialect>(wallet_key: &str) -> QueryBuilder<DB> {
    let mut q =
        QueryBuilder::new(format!("UPDATE room_payment_refund SET wallet_refunded_at_ms = {}", DB::NOW_MS));
    q.push(" WHERE wallet_refunded_at_ms IS NULL AND wallet_key = ");
    DB::bind_str(&mut q, wallet_key);
    q
}

/// Up to `limit` refunds decided at least `older_than` ago that the wallet has not confirmed,
/// oldest first: `(wallet_key, room_id)`.
pub(super) fn unfinished_refunds<DB: Dialect>(older_than: Duration, limit: u32) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(format!(
        "SELECT wallet_key, room_id FROM room_payment_refund WHERE wallet_refunded_at_ms IS NULL \
         AND refunded_at_ms <= {} - ",
        DB::NOW_MS
    ));
    DB::bind_i64(&mut q, millis(older_than));
    q.push(" ORDER BY refunded_at_ms LIMIT ");
    DB::bind_i64(&mut q, i64::from(limit));
    q
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sqlx::MySql;

    use super::insert_outbox;
    use crate::store::{MemberChanges, NewOutboxRow, RoomCommit};

    fn commit(versions: &[Option<u64>]) -> RoomCommit {
        let outbox = versions
            .iter()
            .enumerate()
            .map(|(n, &room_version)| NewOutboxRow {
                event_id: format!("e{n}"),
                event_type: "RoomGiftSent",
                envelope: "{}".into(),
                room_version,
                trace_context: None,
            })
            .collect();
        RoomCommit {
            room_id: "r".into(),
            expected_version: 1,
            snapshot: None,
            commands: Vec::new(),
            outbox,
            members: MemberChanges::default(),
            gift_totals: Vec::new(),
            claim_after: Duration::from_secs(1),
            shard: 0,
            fence: None,
        }
    }

    #[test]
    fn the_outbox_insert_has_one_text_per_row_count_wherever_the_events_without_a_version_fall() {
        // Each text is prepared and cached per connection: texts that differ by where the
        // NULLs fall thrash the cache (B10's hot room lost half its commits to it).
        let text = |versions: &[Option<u64>]| {
            insert_outbox::<MySql>(&commit(versions)).into_sql().as_str().to_owned()
        };
        let a = text(&[Some(5), None, Some(6)]);
        assert_eq!(a, text(&[None, Some(5), None]));
        assert_eq!(a, text(&[Some(5), Some(6), Some(7)]));
        assert!(!a.contains("NULL"), "{a}");
    }
}

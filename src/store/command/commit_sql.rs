//! The statements of the room commit ([`commit_room`](super::commit::commit_room)), built once
//! for both backends over a [`Backend`]: the shard's epoch fence, the snapshot (the version
//! fence), member rows, gift totals, the command log and the outbox rows. A commit writes what
//! its commands changed, never the whole room.

use sqlx::QueryBuilder;

use super::types::{AttributeRow, GiftTotalRow, RestrictionRow, RoomCommit, SeatRequestRow, SnapshotWrite};
use crate::store::backend::Backend;
use crate::store::backend::bind::{millis, push_strs};

/// The epoch of `shard`, read so that no acquisition can commit before this transaction ends
/// (the commit fence).
pub(super) fn fence_epoch<DB: Backend>(shard: u16) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("SELECT epoch FROM room_shard_lease WHERE shard = ");
    DB::bind_i64(&mut q, i64::from(shard));
    q.push(DB::SHARED_READ);
    q
}

/// A new room's first snapshot; a unique violation means another writer created it first.
/// `epoch`: the shard lease it is written under (0 without a cluster).
pub(super) fn insert_snapshot<DB: Backend>(
    room_id: &str,
    s: &SnapshotWrite,
    epoch: Option<u64>,
) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(
        "INSERT INTO room_snapshot (room_id, version, status, owner_id, state, epoch, updated_at_ms) VALUES (",
    );
    DB::bind_str(&mut q, room_id);
    q.push(", ");
    DB::bind_i64(&mut q, s.version as i64);
    q.push(", ");
    DB::bind_str(&mut q, s.status);
    q.push(", ");
    DB::bind_str(&mut q, &s.owner_id);
    q.push(", ");
    DB::bind_str(&mut q, &s.state);
    q.push(", ");
    DB::bind_i64(&mut q, epoch.unwrap_or(0) as i64);
    q.push(format!(", {})", DB::NOW_MS));
    q
}

/// The next snapshot, fenced: changes one row only if the stored version is `expected` and,
/// under a shard lease, it was not written under a newer `epoch` (which it then carries).
pub(super) fn update_snapshot<DB: Backend>(
    room_id: &str,
    expected: u64,
    s: &SnapshotWrite,
    epoch: Option<u64>,
) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("UPDATE room_snapshot SET version = ");
    DB::bind_i64(&mut q, s.version as i64);
    q.push(", status = ");
    DB::bind_str(&mut q, s.status);
    // Never changes; written again so a row an older build wrote without it gets it.
    q.push(", owner_id = ");
    DB::bind_str(&mut q, &s.owner_id);
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

/// Every member row of a room (a close).
pub(super) fn delete_all_members<DB: Backend>(room_id: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("DELETE FROM room_member WHERE room_id = ");
    DB::bind_str(&mut q, room_id);
    q
}

/// Some member rows of a room (leaves).
pub(super) fn delete_members<DB: Backend>(room_id: &str, user_ids: &[String]) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("DELETE FROM room_member WHERE room_id = ");
    DB::bind_str(&mut q, room_id);
    q.push(" AND user_id IN ");
    push_strs(&mut q, user_ids);
    q
}

/// Member rows (joins); a member who left and joined again within one commit overwrites.
pub(super) fn upsert_members<DB: Backend>(room_id: &str, members: &[(String, i64)]) -> QueryBuilder<DB> {
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
pub(super) fn upsert_gift_totals<DB: Backend>(room_id: &str, totals: &[GiftTotalRow]) -> QueryBuilder<DB> {
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

/// Mute and ban rows (a later one of the same user and kind overwrites).
pub(super) fn upsert_restrictions<DB: Backend>(room_id: &str, rows: &[RestrictionRow]) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(
        "INSERT INTO room_restriction (room_id, kind, user_id, until_ms, reason, by_actor) VALUES ",
    );
    for (i, r) in rows.iter().enumerate() {
        q.push(if i == 0 { "(" } else { ", (" });
        DB::bind_str(&mut q, room_id);
        q.push(", ");
        DB::bind_str(&mut q, &r.kind);
        q.push(", ");
        DB::bind_str(&mut q, &r.user_id);
        q.push(", ");
        DB::bind_i64(&mut q, r.until_ms);
        q.push(", ");
        DB::bind_str(&mut q, &r.reason);
        q.push(", ");
        DB::bind_str(&mut q, &r.by_actor);
        q.push(")");
    }
    q.push(DB::upsert("room_id, kind, user_id", &["until_ms", "reason", "by_actor"]));
    q
}

/// One mute or ban row of a room (lifted).
pub(super) fn delete_restriction<DB: Backend>(room_id: &str, kind: &str, user_id: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("DELETE FROM room_restriction WHERE room_id = ");
    DB::bind_str(&mut q, room_id);
    q.push(" AND kind = ");
    DB::bind_str(&mut q, kind);
    q.push(" AND user_id = ");
    DB::bind_str(&mut q, user_id);
    q
}

/// Seat request rows (a user's later one overwrites).
pub(super) fn upsert_seat_requests<DB: Backend>(room_id: &str, rows: &[SeatRequestRow]) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(
        "INSERT INTO room_seat_request (room_id, user_id, kind, seat_index, expires_at_ms, by_actor) VALUES ",
    );
    for (i, r) in rows.iter().enumerate() {
        q.push(if i == 0 { "(" } else { ", (" });
        DB::bind_str(&mut q, room_id);
        q.push(", ");
        DB::bind_str(&mut q, &r.user_id);
        q.push(", ");
        DB::bind_str(&mut q, &r.kind);
        q.push(", ");
        DB::bind_opt_i64(&mut q, r.seat_index);
        q.push(", ");
        DB::bind_i64(&mut q, r.expires_at_ms);
        q.push(", ");
        DB::bind_str(&mut q, &r.by_actor);
        q.push(")");
    }
    q.push(DB::upsert("room_id, user_id", &["kind", "seat_index", "expires_at_ms", "by_actor"]));
    q
}

/// Seat request rows of a room (answered, withdrawn, expired or dropped).
pub(super) fn delete_seat_requests<DB: Backend>(room_id: &str, users: &[String]) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("DELETE FROM room_seat_request WHERE room_id = ");
    DB::bind_str(&mut q, room_id);
    q.push(" AND user_id IN ");
    push_strs(&mut q, users);
    q
}

/// Attribute rows (set).
pub(super) fn upsert_attributes<DB: Backend>(room_id: &str, rows: &[AttributeRow]) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("INSERT INTO room_attribute (room_id, attr_key, value, version) VALUES ");
    for (i, r) in rows.iter().enumerate() {
        q.push(if i == 0 { "(" } else { ", (" });
        DB::bind_str(&mut q, room_id);
        q.push(", ");
        DB::bind_str(&mut q, &r.attr_key);
        q.push(", ");
        DB::bind_str(&mut q, &r.value);
        q.push(", ");
        DB::bind_i64(&mut q, r.version);
        q.push(")");
    }
    q.push(DB::upsert("room_id, attr_key", &["value", "version"]));
    q
}

/// Attribute rows of a room (deleted).
pub(super) fn delete_attributes<DB: Backend>(room_id: &str, keys: &[String]) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("DELETE FROM room_attribute WHERE room_id = ");
    DB::bind_str(&mut q, room_id);
    q.push(" AND attr_key IN ");
    push_strs(&mut q, keys);
    q
}

/// The commands' log rows; a unique violation on `(command_id, caller)` means one was logged
/// before.
pub(super) fn insert_command_log<DB: Backend>(c: &RoomCommit) -> QueryBuilder<DB> {
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
pub(super) fn insert_outbox<DB: Backend>(c: &RoomCommit) -> QueryBuilder<DB> {
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sqlx::MySql;

    use super::insert_outbox;
    use crate::store::command::types::{MemberChanges, NewOutboxRow, RoomCommit};

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
            restrictions: Default::default(),
            attributes: Default::default(),
            seat_requests: Default::default(),
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

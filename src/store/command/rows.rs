//! The command path's row shapes read back from the tables, converted into the public types.

use super::types::{GiftTotalRow, StoredCommand};

/// `room_snapshot` as read by [`load_snapshot`](super::read_sql::load_snapshot).
#[derive(sqlx::FromRow)]
pub(super) struct RoomRow {
    pub(super) version: i64,
    pub(super) state: String,
}

/// A shard's epoch, as read by the commit fence.
#[derive(sqlx::FromRow)]
pub(super) struct EpochRow {
    pub(super) epoch: i64,
}

/// `room_member` as read by [`load_members`](super::read_sql::load_members).
#[derive(sqlx::FromRow)]
pub(super) struct MemberRow {
    pub(super) user_id: String,
    pub(super) joined_at_ms: i64,
}

/// `room_gift_total` as read by [`load_gift_totals`](super::read_sql::load_gift_totals).
#[derive(sqlx::FromRow)]
pub(super) struct GiftRow {
    user_id: String,
    total_value: i64,
    first_version: i64,
}

impl From<GiftRow> for GiftTotalRow {
    fn from(r: GiftRow) -> Self {
        GiftTotalRow {
            user_id: r.user_id,
            total_value: r.total_value.max(0) as u64,
            first_version: r.first_version.max(0) as u64,
        }
    }
}

/// `room_command_log` as read by [`find_command`](super::read_sql::find_command).
#[derive(sqlx::FromRow)]
pub(super) struct CommandRow {
    command_id: String,
    caller: String,
    room_id: String,
    fingerprint: String,
    applied: bool,
    room_version: i64,
    outcome: String,
}

impl From<CommandRow> for StoredCommand {
    fn from(r: CommandRow) -> Self {
        StoredCommand {
            command_id: r.command_id,
            caller: r.caller,
            room_id: r.room_id,
            fingerprint: r.fingerprint,
            applied: r.applied,
            room_version: r.room_version.max(0) as u64,
            outcome: r.outcome,
        }
    }
}

/// `room_snapshot.version` alone, as read by [`room_version`](super::read_sql::room_version).
#[derive(sqlx::FromRow)]
pub(super) struct VersionRow {
    pub(super) version: i64,
}

/// One event of a room's history, as read by [`room_events_after`](super::outbox_sql::room_events_after).
#[derive(sqlx::FromRow)]
pub(super) struct HistoryRow {
    pub(super) room_version: i64,
    pub(super) envelope: String,
    pub(super) age_ms: i64,
}

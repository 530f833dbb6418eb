//! Private row shapes read back from the tables, converted into the public types.

use super::types::{StoredCommand, StoredRoom};

/// `room_snapshot` as read by [`load_room`](super::sql::load_room).
#[derive(sqlx::FromRow)]
pub(super) struct RoomRow {
    version: i64,
    state: String,
}

impl From<RoomRow> for StoredRoom {
    fn from(r: RoomRow) -> Self {
        StoredRoom { version: r.version.max(0) as u64, state: r.state }
    }
}

/// `room_command_log` as read by [`find_command`](super::sql::find_command).
#[derive(sqlx::FromRow)]
pub(super) struct CommandRow {
    room_id: String,
    fingerprint: String,
    applied: bool,
    room_version: i64,
    outcome: String,
}

impl From<CommandRow> for StoredCommand {
    fn from(r: CommandRow) -> Self {
        StoredCommand {
            room_id: r.room_id,
            fingerprint: r.fingerprint,
            applied: r.applied,
            room_version: r.room_version.max(0) as u64,
            outcome: r.outcome,
        }
    }
}

/// `room_snapshot.version` alone, as read by [`locked_version`](super::sql::locked_version).
#[derive(sqlx::FromRow)]
pub(super) struct VersionRow {
    pub(super) version: i64,
}

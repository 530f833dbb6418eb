//! Room state, its persisted form and its public snapshot view.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ids::{RoomId, UserId};

/// How many senders the gift rank keeps.
pub const GIFT_RANK_SIZE: usize = 10;

/// Open or closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoomStatus {
    /// Accepts commands.
    Open,
    /// Refuses every command.
    Closed,
}

/// A member of a room.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// When the member joined (ms since the epoch).
    pub joined_at_ms: i64,
    /// Last heartbeat (ms); presence only, reset to the load time when a cell loads.
    pub last_heartbeat_ms: i64,
}

/// Running gift total of one sender.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SenderTotal {
    /// Sum of count × unit_value over the sender's gifts.
    pub total_value: u64,
    /// Room version of the sender's first gift: ties in the rank go to the earliest.
    pub first_version: u64,
}

/// One line of the gift rank.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankEntry {
    /// The sender.
    pub user_id: UserId,
    /// Their total gift value.
    pub total_value: u64,
}

/// The whole state of one room, as kept in its cell and persisted as the snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoomState {
    /// The room.
    pub room_id: RoomId,
    /// Who created it.
    pub owner_id: UserId,
    /// Display title.
    pub title: String,
    /// Open or closed.
    pub status: RoomStatus,
    /// Members by user id.
    pub members: BTreeMap<UserId, Member>,
    /// Sum of all gift values.
    pub heat: i64,
    /// Gift totals by sender (the rank is derived from it).
    pub senders: BTreeMap<UserId, SenderTotal>,
    /// Top senders, highest total first, ties by earliest first gift.
    pub gift_rank: Vec<RankEntry>,
    /// +1 per applied command.
    pub version: u64,
}

/// A member as shown in the snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberView {
    /// The member.
    pub user_id: UserId,
    /// When they joined.
    pub joined_at_ms: i64,
}

/// The public view of a room (`GET /v1/rooms/{id}` and command responses).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoomSnapshot {
    /// The room.
    pub room_id: RoomId,
    /// Owner.
    pub owner_id: UserId,
    /// Title.
    pub title: String,
    /// open | closed.
    pub status: RoomStatus,
    /// Version.
    pub version: u64,
    /// Heat.
    pub heat: i64,
    /// Members, ordered by user id.
    pub members: Vec<MemberView>,
    /// Top senders.
    pub gift_rank: Vec<RankEntry>,
}

impl RoomState {
    /// The public view of this state.
    pub fn snapshot(&self) -> RoomSnapshot {
        RoomSnapshot {
            room_id: self.room_id.clone(),
            owner_id: self.owner_id.clone(),
            title: self.title.clone(),
            status: self.status,
            version: self.version,
            heat: self.heat,
            members: self
                .members
                .iter()
                .map(|(user_id, m)| MemberView { user_id: user_id.clone(), joined_at_ms: m.joined_at_ms })
                .collect(),
            gift_rank: self.gift_rank.clone(),
        }
    }

    /// Starts every member's heartbeat clock at `now_ms` (a cell was just loaded, so a
    /// restart never evicts everyone at once).
    pub fn reset_presence(&mut self, now_ms: i64) {
        for member in self.members.values_mut() {
            member.last_heartbeat_ms = now_ms;
        }
    }

    /// Members whose last heartbeat is at or before `cutoff_ms`.
    pub fn stale_members(&self, cutoff_ms: i64) -> Vec<UserId> {
        self.members
            .iter()
            .filter(|(_, m)| m.last_heartbeat_ms <= cutoff_ms)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Recomputes the gift rank from the sender totals.
    pub(crate) fn compute_rank(&self) -> Vec<RankEntry> {
        let mut all: Vec<(&UserId, &SenderTotal)> = self.senders.iter().collect();
        all.sort_by(|(a_id, a), (b_id, b)| {
            b.total_value.cmp(&a.total_value).then(a.first_version.cmp(&b.first_version)).then(a_id.cmp(b_id))
        });
        all.into_iter()
            .take(GIFT_RANK_SIZE)
            .map(|(id, t)| RankEntry { user_id: id.clone(), total_value: t.total_value })
            .collect()
    }
}

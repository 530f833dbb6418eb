//! Room state, its persisted parts and its public snapshot view.
//!
//! Members and gift totals live in persistent maps (`imbl`): cloning a room is O(1) and a
//! change copies only the path to the entry it touches, so applying a command costs the same in
//! a room of 10 or 100,000 members. The room is persisted in three parts: the small
//! [`RoomSnapshot`] (one row, the version fence), one row per member and one per gift sender.

use std::collections::BTreeMap;
use std::ops::Bound;

use imbl::{OrdMap, OrdSet};
use serde::{Deserialize, Serialize};

use super::ids::{RoomId, UserId};
use super::seat::{PendingSeat, Seat, SeatMode};

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

impl RoomStatus {
    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            RoomStatus::Open => "open",
            RoomStatus::Closed => "closed",
        }
    }
}

/// A member of a room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// When the member joined (ms since the epoch). Presence (the last heartbeat) is not part
    /// of the room: the room's cell keeps it beside the state, outside the commit lock.
    pub joined_at_ms: i64,
}

/// Running gift total of one sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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

/// One of a room's attributes (SPEC §14.2): its value and version — the room version of the
/// command that last wrote it, so a version is never reused, even after a delete.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attribute {
    /// The value.
    pub value: String,
    /// The room version that wrote it.
    pub version: u64,
}

/// A mute or a ban of one user (SPEC §14.2): stored one row each, like members, never in the
/// snapshot. In force while the room's clock is before `until_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restriction {
    /// When it ends (ms since the epoch).
    pub until_ms: i64,
    /// A ban's reason (empty for a mute).
    pub reason: String,
    /// Who imposed it (an `Actor`'s wire form).
    pub by: String,
}

impl Restriction {
    /// True while it holds at `now_ms`.
    pub fn holds_at(&self, now_ms: i64) -> bool {
        now_ms < self.until_ms
    }
}

/// Which restriction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RestrictionKind {
    /// May not speak in the IM group.
    Mute,
    /// Removed, and may not rejoin.
    Ban,
}

impl RestrictionKind {
    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            RestrictionKind::Mute => "mute",
            RestrictionKind::Ban => "ban",
        }
    }
}

/// The figures of a room's live, kept as it runs and told in its close (SPEC §14.2).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveFigures {
    /// When the room was created (ms since the epoch).
    #[serde(default)]
    pub created_at_ms: i64,
    /// The most members it had at once.
    #[serde(default)]
    pub peak_members: u64,
    /// Gift commands applied.
    #[serde(default)]
    pub gifts: u64,
    /// When its last command was applied (ms since the epoch): idle close counts from it.
    #[serde(default)]
    pub last_command_ms: i64,
}

/// The whole state of one room, as kept in its cell.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    pub members: OrdMap<UserId, Member>,
    /// Sum of all gift values.
    pub heat: i64,
    /// Gift totals by sender (the rank is derived from it).
    pub senders: OrdMap<UserId, SenderTotal>,
    /// Top senders, highest total first, ties by earliest first gift.
    pub gift_rank: Vec<RankEntry>,
    /// +1 per applied command.
    pub version: u64,
    /// Appointed admins (at most `rooms.max_admins`).
    pub admins: OrdSet<UserId>,
    /// Everyone but the owner and admins muted in the IM group.
    pub muted_all: bool,
    /// The pinned announcement ("" for none).
    pub announcement: String,
    /// The cover image URL ("" for none).
    pub cover_url: String,
    /// Attributes by key.
    pub attributes: BTreeMap<String, Attribute>,
    /// Mutes by user (rows of their own; an expired one is ignored until pruned).
    pub mutes: OrdMap<UserId, Restriction>,
    /// Bans by user (likewise).
    pub bans: OrdMap<UserId, Restriction>,
    /// The live's figures so far.
    pub figures: LiveFigures,
    /// Who may take a seat.
    pub seat_mode: SeatMode,
    /// The mic seats, by index (persistent: a clone costs nothing).
    pub seats: imbl::Vector<Seat>,
    /// Pending seat requests and invitations by user (rows of their own, like members).
    pub seat_pending: OrdMap<UserId, PendingSeat>,
}

/// A member as shown by the members listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberView {
    /// The member.
    pub user_id: UserId,
    /// When they joined.
    pub joined_at_ms: i64,
}

/// The small part of a room: its public view (`GET /v1/rooms/{id}` and, without the
/// attributes, command responses) and, serialised, the snapshot row. Members are counted here
/// and listed page by page.
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
    /// How many members the room has.
    #[serde(default)]
    pub member_count: u64,
    /// Top senders.
    pub gift_rank: Vec<RankEntry>,
    /// Appointed admins, by user id.
    #[serde(default)]
    pub admins: Vec<UserId>,
    /// Whether everyone but the owner and admins is muted.
    #[serde(default)]
    pub muted_all: bool,
    /// The pinned announcement.
    #[serde(default)]
    pub announcement: String,
    /// The cover image URL.
    #[serde(default)]
    pub cover_url: String,
    /// Attributes by key, with their versions; `None` where the view leaves them out (a
    /// command's answer and the snapshot row), so the key is absent from its JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<BTreeMap<String, Attribute>>,
    /// The live's figures so far.
    #[serde(default)]
    pub figures: LiveFigures,
    /// Who may take a seat.
    #[serde(default)]
    pub seat_mode: SeatMode,
    /// The mic seats (`[]`: the room has none).
    #[serde(default)]
    pub seats: Vec<Seat>,
}

/// A room's restrictions as stored: `(kind, user, restriction)`.
pub type StoredRestriction = (RestrictionKind, UserId, Restriction);

impl RoomState {
    /// Rebuilds a room from its persisted parts.
    pub fn restore(
        snapshot: RoomSnapshot,
        members: impl IntoIterator<Item = (UserId, i64)>,
        senders: impl IntoIterator<Item = (UserId, SenderTotal)>,
        restrictions: impl IntoIterator<Item = StoredRestriction>,
        seat_pending: impl IntoIterator<Item = (UserId, PendingSeat)>,
    ) -> RoomState {
        let (mut mutes, mut bans) = (OrdMap::new(), OrdMap::new());
        for (kind, user, restriction) in restrictions {
            match kind {
                RestrictionKind::Mute => mutes.insert(user, restriction),
                RestrictionKind::Ban => bans.insert(user, restriction),
            };
        }
        RoomState {
            room_id: snapshot.room_id,
            owner_id: snapshot.owner_id,
            title: snapshot.title,
            status: snapshot.status,
            members: members.into_iter().map(|(id, joined_at_ms)| (id, Member { joined_at_ms })).collect(),
            heat: snapshot.heat,
            senders: senders.into_iter().collect(),
            gift_rank: snapshot.gift_rank,
            version: snapshot.version,
            admins: snapshot.admins.into_iter().collect(),
            muted_all: snapshot.muted_all,
            announcement: snapshot.announcement,
            cover_url: snapshot.cover_url,
            attributes: snapshot.attributes.unwrap_or_default(),
            mutes,
            bans,
            figures: snapshot.figures,
            seat_mode: snapshot.seat_mode,
            seats: snapshot.seats.into_iter().collect(),
            seat_pending: seat_pending.into_iter().collect(),
        }
    }

    /// The small view of this state as JSON, as the snapshot row stores it: without the
    /// attributes, which have rows of their own.
    pub fn snapshot_json(&self) -> String {
        // Cannot fail: serde_json fails only on a map with non-string keys or a `Serialize`
        // impl that errors; a snapshot holds only derived impls over strings, integers, unit
        // variants, `Vec`s and a map with string keys.
        serde_json::to_string(&self.view(false)).expect("a room snapshot always serialises")
    }

    /// The small view of this state (no member list), as the room read shows it.
    pub fn snapshot(&self) -> RoomSnapshot {
        self.view(true)
    }

    /// The small view a command answers: without the attributes (up to 16 KB a room), so an
    /// answer stays small however much the room holds; the room read carries them.
    pub fn answer_view(&self) -> RoomSnapshot {
        self.view(false)
    }

    /// The small view, with or without the attributes.
    fn view(&self, attributes: bool) -> RoomSnapshot {
        RoomSnapshot {
            room_id: self.room_id.clone(),
            owner_id: self.owner_id.clone(),
            title: self.title.clone(),
            status: self.status,
            version: self.version,
            heat: self.heat,
            member_count: self.members.len() as u64,
            gift_rank: self.gift_rank.clone(),
            admins: self.admins.iter().cloned().collect(),
            muted_all: self.muted_all,
            announcement: self.announcement.clone(),
            cover_url: self.cover_url.clone(),
            attributes: attributes.then(|| self.attributes.clone()),
            figures: self.figures.clone(),
            seat_mode: self.seat_mode,
            seats: self.seats.iter().cloned().collect(),
        }
    }

    /// The ban holding `user` out at `now_ms`, if any.
    pub fn ban_of(&self, user: &UserId, now_ms: i64) -> Option<&Restriction> {
        self.bans.get(user).filter(|b| b.holds_at(now_ms))
    }

    /// Up to `limit` restrictions of `kind` in force at `now_ms`, after `after` (exclusive), in
    /// user id order.
    pub fn restrictions_page(
        &self,
        kind: RestrictionKind,
        now_ms: i64,
        after: Option<&UserId>,
        limit: usize,
    ) -> Vec<(UserId, Restriction)> {
        let map = match kind {
            RestrictionKind::Mute => &self.mutes,
            RestrictionKind::Ban => &self.bans,
        };
        let start = after.map_or(Bound::Unbounded, Bound::Excluded);
        map.range::<_, UserId>((start, Bound::Unbounded))
            .filter(|(_, r)| r.holds_at(now_ms))
            .take(limit)
            .map(|(u, r)| (u.clone(), r.clone()))
            .collect()
    }

    /// Up to `limit` members after `after` (exclusive), in user id order.
    pub fn members_page(&self, after: Option<&UserId>, limit: usize) -> Vec<MemberView> {
        let view = |(user_id, m): (&UserId, &Member)| MemberView {
            user_id: user_id.clone(),
            joined_at_ms: m.joined_at_ms,
        };
        match after {
            Some(after) => self
                .members
                .range::<_, UserId>((Bound::Excluded(after), Bound::Unbounded))
                .take(limit)
                .map(view)
                .collect(),
            None => self.members.iter().take(limit).map(view).collect(),
        }
    }

    /// The gift rank after `sender`'s total grew. Totals only ever grow, so the new top
    /// [`GIFT_RANK_SIZE`] is drawn from the old one plus the sender: O(rank), not O(senders).
    pub(crate) fn rank_after_gift(&self, sender: &UserId) -> Vec<RankEntry> {
        let mut candidates: Vec<(&UserId, SenderTotal)> = self
            .gift_rank
            .iter()
            .filter(|e| &e.user_id != sender)
            .filter_map(|e| self.senders.get(&e.user_id).map(|t| (&e.user_id, *t)))
            .collect();
        if let Some(total) = self.senders.get(sender) {
            candidates.push((sender, *total));
        }
        candidates.sort_by(|(a_id, a), (b_id, b)| {
            b.total_value.cmp(&a.total_value).then(a.first_version.cmp(&b.first_version)).then(a_id.cmp(b_id))
        });
        candidates
            .into_iter()
            .take(GIFT_RANK_SIZE)
            .map(|(id, t)| RankEntry { user_id: id.clone(), total_value: t.total_value })
            .collect()
    }
}

//! Mic seats (SPEC §14.3): who may speak in a voice room. A room has 0–20 seats, in its
//! snapshot; the pending requests for a seat and invitations to one are rows of their own
//! (like members), at most one per user and [`MAX_PENDING_SEATS`] per room, each expiring
//! after `rooms.seat_request_ttl` with a command of its own.

use serde::{Deserialize, Serialize};

use super::ids::UserId;

/// Most seats a room has.
pub const MAX_SEATS: u32 = 20;
/// Most pending requests and invitations a room holds at once.
pub const MAX_PENDING_SEATS: usize = 100;
/// Default `rooms.seat_request_ttl`, in milliseconds.
pub const DEFAULT_SEAT_REQUEST_TTL_MS: i64 = 30_000;

/// Who may take a seat.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SeatMode {
    /// Any member takes a free seat.
    #[default]
    Free,
    /// A member requests one, and the owner or an admin answers.
    Apply,
}

impl SeatMode {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            SeatMode::Free => "free",
            SeatMode::Apply => "apply",
        }
    }

    /// The mode its wire name names.
    pub fn parse(name: &str) -> Option<Self> {
        [SeatMode::Free, SeatMode::Apply].into_iter().find(|m| m.as_str() == name)
    }
}

/// What `POST /v1/rooms` asks for seats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeatConfig {
    /// How many, 0–[`MAX_SEATS`] (0: a room without seats).
    #[serde(default)]
    pub count: u32,
    /// Free or apply.
    #[serde(default)]
    pub mode: SeatMode,
}

impl SeatConfig {
    /// No seats, free mode: what a room created without `seats` has.
    pub fn is_none(&self) -> bool {
        *self == SeatConfig::default()
    }
}

/// One seat, as the room view shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seat {
    /// Its number, from 0.
    pub index: u32,
    /// Who holds it.
    pub user_id: Option<UserId>,
    /// Nobody may take it.
    #[serde(default)]
    pub locked: bool,
    /// Its holder's microphone is muted by the room.
    #[serde(default)]
    pub muted: bool,
}

/// A request for a seat, or an invitation to one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PendingKind {
    /// A member asked for a seat (apply mode).
    Request,
    /// The owner or an admin invited a member.
    Invite,
}

impl PendingKind {
    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            PendingKind::Request => "request",
            PendingKind::Invite => "invite",
        }
    }

    /// The kind its stored name names.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "request" => Some(PendingKind::Request),
            "invite" => Some(PendingKind::Invite),
            _ => None,
        }
    }
}

/// A pending request or invitation of one user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingSeat {
    /// Request or invitation.
    pub kind: PendingKind,
    /// The seat named, if any (else the lowest free one when accepted).
    pub index: Option<u32>,
    /// When it expires (ms since the epoch).
    pub expires_at_ms: i64,
    /// Who made it (the requester, or the inviter's actor wire form).
    pub by: String,
}

/// What a `move` does when its target seat is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MovePolicy {
    /// Refuse (409 `seat_occupied`).
    Cancel,
    /// Take it: its holder leaves the seats (owner/admin).
    Force,
    /// Exchange the two seats' holders (owner/admin).
    Swap,
}

impl MovePolicy {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            MovePolicy::Cancel => "cancel",
            MovePolicy::Force => "force",
            MovePolicy::Swap => "swap",
        }
    }

    /// The policy its wire name names.
    pub fn parse(name: &str) -> Option<Self> {
        [MovePolicy::Cancel, MovePolicy::Force, MovePolicy::Swap].into_iter().find(|p| p.as_str() == name)
    }
}

/// A seat command's action (SPEC §14.3), its wire name in `action`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum SeatAction {
    /// The actor takes a seat (`None`: the lowest free one).
    Take {
        /// Which seat.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        index: Option<u32>,
    },
    /// The actor leaves its seat.
    Leave,
    /// The actor asks for a seat (apply mode).
    Request {
        /// Which seat, if it cares.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        index: Option<u32>,
    },
    /// The actor withdraws its request, or (owner/admin) an invitation to `user_id`.
    CancelRequest {
        /// Whose invitation (`None`: the actor's own request).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        user_id: Option<UserId>,
    },
    /// The owner or an admin accepts or rejects a user's request.
    AnswerRequest {
        /// Whose request.
        user_id: UserId,
        /// Seat them, or not.
        accept: bool,
    },
    /// The owner or an admin invites a member to a seat.
    Invite {
        /// Whom.
        user_id: UserId,
        /// Which seat, if it matters.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        index: Option<u32>,
    },
    /// The invitee accepts or declines.
    AnswerInvite {
        /// Take the seat, or not.
        accept: bool,
    },
    /// The owner or an admin takes a seat's holder off it.
    Kick {
        /// Which seat.
        index: u32,
    },
    /// The owner or an admin locks (freeing it) or unlocks a seat.
    Lock {
        /// Which seat.
        index: u32,
        /// Locked or not.
        locked: bool,
    },
    /// The owner or an admin mutes or unmutes a seat's microphone.
    Mute {
        /// Which seat.
        index: u32,
        /// Muted or not.
        muted: bool,
    },
    /// A seated user moves to seat `to`.
    Move {
        /// Who moves.
        user_id: UserId,
        /// Where.
        to: u32,
        /// What if `to` is taken.
        policy: MovePolicy,
    },
}

impl SeatAction {
    /// Every action's wire name.
    pub const NAMES: [&'static str; 11] = [
        "take",
        "leave",
        "request",
        "cancel_request",
        "answer_request",
        "invite",
        "answer_invite",
        "kick",
        "lock",
        "mute",
        "move",
    ];

    /// The wire name.
    pub fn name(&self) -> &'static str {
        match self {
            SeatAction::Take { .. } => "take",
            SeatAction::Leave => "leave",
            SeatAction::Request { .. } => "request",
            SeatAction::CancelRequest { .. } => "cancel_request",
            SeatAction::AnswerRequest { .. } => "answer_request",
            SeatAction::Invite { .. } => "invite",
            SeatAction::AnswerInvite { .. } => "answer_invite",
            SeatAction::Kick { .. } => "kick",
            SeatAction::Lock { .. } => "lock",
            SeatAction::Mute { .. } => "mute",
            SeatAction::Move { .. } => "move",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Actor, Command};

    /// A seat command crosses the cluster hop and the command log as JSON: every action comes
    /// back as it went.
    #[test]
    fn every_seat_command_round_trips_through_json() {
        let user = || UserId::parse("bob").unwrap();
        let actions = [
            SeatAction::Take { index: Some(3) },
            SeatAction::Take { index: None },
            SeatAction::Leave,
            SeatAction::Request { index: Some(0) },
            SeatAction::CancelRequest { user_id: Some(user()) },
            SeatAction::AnswerRequest { user_id: user(), accept: true },
            SeatAction::Invite { user_id: user(), index: None },
            SeatAction::AnswerInvite { accept: false },
            SeatAction::Kick { index: 19 },
            SeatAction::Lock { index: 1, locked: true },
            SeatAction::Mute { index: 2, muted: false },
            SeatAction::Move { user_id: user(), to: 4, policy: MovePolicy::Swap },
        ];
        for action in actions {
            let command = Command::Seat { by: Actor::Service("ops".into()), action };
            let json = serde_json::to_string(&command).unwrap();
            assert_eq!(serde_json::from_str::<Command>(&json).unwrap(), command, "{json}");
        }
        let expire =
            Command::ExpireSeatRequest { user_id: user(), kind: PendingKind::Invite, expires_at_ms: 7 };
        for mode in [SeatMode::Free, SeatMode::Apply] {
            assert_eq!(serde_json::to_value(mode).unwrap(), mode.as_str());
            assert_eq!(SeatMode::parse(mode.as_str()), Some(mode));
        }
        for policy in [MovePolicy::Cancel, MovePolicy::Force, MovePolicy::Swap] {
            assert_eq!(serde_json::to_value(policy).unwrap(), policy.as_str());
            assert_eq!(MovePolicy::parse(policy.as_str()), Some(policy));
        }
        let json = serde_json::to_string(&expire).unwrap();
        assert_eq!(serde_json::from_str::<Command>(&json).unwrap(), expire);
        // A room created without seats serialises as before seats existed (replays compare it).
        let create =
            Command::CreateRoom { owner_id: user(), title: "t".into(), seats: SeatConfig::default() };
        assert_eq!(
            serde_json::to_value(&create).unwrap(),
            serde_json::json!({"command": "create_room", "owner_id": "bob", "title": "t"})
        );
    }
}

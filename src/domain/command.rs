//! Room commands and the context they are applied in.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ids::{CommandId, GiftId, RoomId, UserId};
use super::seat::{PendingKind, SeatAction, SeatConfig, SeatMode};

/// Who a moderation command acts as (SPEC §14.2): a user, or an operator's backend holding a
/// service token, which may do anything. Its wire form — the `by` of the events — is the user's
/// id or `svc:<name>` (a user id holds no `:`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Actor {
    /// A user.
    User(UserId),
    /// A service token's holder, by its name.
    Service(String),
}

impl Actor {
    /// The user, if it is one.
    pub fn user(&self) -> Option<&UserId> {
        match self {
            Actor::User(user) => Some(user),
            Actor::Service(_) => None,
        }
    }

    /// The wire form.
    pub fn wire(&self) -> String {
        match self {
            Actor::User(user) => user.to_string(),
            Actor::Service(name) => format!("svc:{name}"),
        }
    }
}

impl From<Actor> for String {
    fn from(actor: Actor) -> String {
        actor.wire()
    }
}

impl TryFrom<String> for Actor {
    type Error = super::ids::IdError;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        match value.strip_prefix("svc:") {
            Some(name) => Ok(Actor::Service(name.to_owned())),
            None => UserId::parse(value).map(Actor::User),
        }
    }
}

/// Why a room closed (`RoomClosed.reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CloseReason {
    /// Its owner closed it.
    Owner,
    /// An operator (a service token) closed it.
    Admin,
    /// It stayed empty and silent for `rooms.idle_close_after`.
    Idle,
}

/// What `POST /v1/rooms/{id}/attributes` asks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttributeWrite {
    /// Keys to set, with their new values.
    #[serde(default)]
    pub set: BTreeMap<String, String>,
    /// Keys to delete.
    #[serde(default)]
    pub delete: Vec<String>,
    /// The write happens only if each key is at this version (0: absent).
    #[serde(default)]
    pub expect: BTreeMap<String, u64>,
}

/// What `POST /v1/rooms/{id}/info` changes: the fields given.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InfoChange {
    /// New title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// New announcement ("" removes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub announcement: Option<String>,
    /// New cover URL ("" removes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cover_url: Option<String>,
    /// New seat mode (becoming `free` drops the pending requests and invitations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seat_mode: Option<SeatMode>,
}

/// Who asks for a command ([`Command::actor`]), as authorization sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acting<'a> {
    /// A user, named by the command's `field`: the caller itself (or a service acting for it).
    User {
        /// The field that names it.
        field: &'static str,
        /// The user.
        user: &'a UserId,
    },
    /// The actor the command names in `by` (a moderator, a closer): the caller itself.
    By(&'a Actor),
    /// Nobody: a close without an actor (an anonymous caller's, under `auth.mode: none`).
    Nobody,
    /// The service's own timer (an idle close, a stale eviction, a seat request's expiry):
    /// never a caller's, whoever it is; `field` is what makes it the timer's.
    Timer {
        /// The field at fault in a caller's request.
        field: &'static str,
    },
}

/// Why a member left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaveReason {
    /// The user asked to leave.
    User,
    /// The presence worker removed a member whose heartbeat went stale.
    Stale,
    /// The room was closed.
    Closed,
}

/// A command on one room. Its serialised form is the command body compared on replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    /// Create a new open room.
    CreateRoom {
        /// The owner.
        owner_id: UserId,
        /// Display title.
        title: String,
        /// Its mic seats (none unless asked).
        #[serde(default, skip_serializing_if = "SeatConfig::is_none")]
        seats: SeatConfig,
    },
    /// Add a member.
    JoinRoom {
        /// Who joins.
        user_id: UserId,
    },
    /// Remove a member.
    LeaveRoom {
        /// Who leaves.
        user_id: UserId,
        /// Why.
        reason: LeaveReason,
    },
    /// Send a gift; the sender must be a member.
    SendGift {
        /// Who sends.
        sender_id: UserId,
        /// Who receives.
        receiver_id: UserId,
        /// Which gift.
        gift_id: GiftId,
        /// How many, 1–9999.
        count: u32,
        /// Value of one, 1–1,000,000.
        unit_value: u32,
    },
    /// Close the room and remove every member.
    CloseRoom {
        /// Who closes it (`None`: an anonymous caller under `auth.mode: none`, or the service
        /// itself for an idle room).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<Actor>,
        /// The room closes itself: it stayed empty and silent.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        idle: bool,
    },
    /// Appoint or remove an admin (the owner's).
    SetAdmin {
        /// Who asks.
        by: Actor,
        /// Who.
        user_id: UserId,
        /// Admin or not.
        admin: bool,
    },
    /// Mute a user for `duration_s` seconds (0 lifts the mute).
    MuteUser {
        /// Who asks.
        by: Actor,
        /// Who.
        user_id: UserId,
        /// Seconds, 0–30 days.
        duration_s: u32,
    },
    /// Remove a user and ban them for `ban_s` seconds (0: remove only).
    KickUser {
        /// Who asks.
        by: Actor,
        /// Who.
        user_id: UserId,
        /// Seconds, 0–30 days.
        ban_s: u32,
        /// Why (≤ 200 bytes).
        reason: String,
    },
    /// Lift a ban.
    UnbanUser {
        /// Who asks.
        by: Actor,
        /// Who.
        user_id: UserId,
    },
    /// Mute or unmute everyone but the owner and admins.
    MuteAll {
        /// Who asks.
        by: Actor,
        /// On or off.
        muted: bool,
    },
    /// Change the title, announcement or cover.
    UpdateRoomInfo {
        /// Who asks.
        by: Actor,
        /// The fields to change.
        #[serde(flatten)]
        info: InfoChange,
    },
    /// Set and delete attributes, conditionally.
    SetAttributes {
        /// Who asks.
        by: Actor,
        /// The write.
        #[serde(flatten)]
        write: AttributeWrite,
    },
    /// A mic seat action (SPEC §14.3).
    Seat {
        /// Who acts.
        by: Actor,
        /// What it does.
        #[serde(flatten)]
        action: SeatAction,
    },
    /// A pending request or invitation ran out (the service's, timer-driven): applied only if
    /// it is still the one pending, and due.
    ExpireSeatRequest {
        /// Whose.
        user_id: UserId,
        /// Request or invitation.
        kind: PendingKind,
        /// When it expires: tells it from a later one of the same user.
        expires_at_ms: i64,
    },
}

impl Command {
    /// Every [name](Self::name), in declaration order.
    pub const NAMES: [&'static str; 14] = [
        "create_room",
        "join_room",
        "leave_room",
        "send_gift",
        "close_room",
        "set_admin",
        "mute_user",
        "kick_user",
        "unban_user",
        "mute_all",
        "update_room_info",
        "set_attributes",
        "seat",
        "expire_seat_request",
    ];

    /// Bounded name used in logs, metrics and the command log.
    pub fn name(&self) -> &'static str {
        match self {
            Command::CreateRoom { .. } => "create_room",
            Command::JoinRoom { .. } => "join_room",
            Command::LeaveRoom { .. } => "leave_room",
            Command::SendGift { .. } => "send_gift",
            Command::CloseRoom { .. } => "close_room",
            Command::SetAdmin { .. } => "set_admin",
            Command::MuteUser { .. } => "mute_user",
            Command::KickUser { .. } => "kick_user",
            Command::UnbanUser { .. } => "unban_user",
            Command::MuteAll { .. } => "mute_all",
            Command::UpdateRoomInfo { .. } => "update_room_info",
            Command::SetAttributes { .. } => "set_attributes",
            Command::Seat { .. } => "seat",
            Command::ExpireSeatRequest { .. } => "expire_seat_request",
        }
    }

    /// Who asks for this command, as authorization sees it: one exhaustive decision per
    /// command, so a new command does not compile until it says who may send it.
    pub fn actor(&self) -> Acting<'_> {
        match self {
            Command::CreateRoom { owner_id, .. } => Acting::User { field: "owner_id", user: owner_id },
            Command::JoinRoom { user_id } => Acting::User { field: "user_id", user: user_id },
            Command::LeaveRoom { user_id, reason } => match reason {
                LeaveReason::User => Acting::User { field: "user_id", user: user_id },
                // A stale eviction is the presence worker's, a close's leaves the room's own.
                LeaveReason::Stale | LeaveReason::Closed => Acting::Timer { field: "reason" },
            },
            Command::SendGift { sender_id, .. } => Acting::User { field: "sender_id", user: sender_id },
            Command::CloseRoom { idle: true, .. } => Acting::Timer { field: "idle" },
            Command::CloseRoom { by: Some(by), idle: false } => Acting::By(by),
            Command::CloseRoom { by: None, idle: false } => Acting::Nobody,
            Command::SetAdmin { by, .. }
            | Command::MuteUser { by, .. }
            | Command::KickUser { by, .. }
            | Command::UnbanUser { by, .. }
            | Command::MuteAll { by, .. }
            | Command::UpdateRoomInfo { by, .. }
            | Command::SetAttributes { by, .. }
            | Command::Seat { by, .. } => Acting::By(by),
            Command::ExpireSeatRequest { .. } => Acting::Timer { field: "command" },
        }
    }

    /// The user the command acts as: the owner it creates a room for, who joins or leaves, who
    /// sends a gift, the user a moderation command acts as (`by`); `None` for a command naming
    /// nobody (a service's or an anonymous close).
    pub fn acting_user(&self) -> Option<&UserId> {
        match self {
            Command::CreateRoom { owner_id, .. } => Some(owner_id),
            Command::JoinRoom { user_id } | Command::LeaveRoom { user_id, .. } => Some(user_id),
            Command::SendGift { sender_id, .. } => Some(sender_id),
            Command::CloseRoom { by, .. } => by.as_ref().and_then(Actor::user),
            Command::SetAdmin { by, .. }
            | Command::MuteUser { by, .. }
            | Command::KickUser { by, .. }
            | Command::UnbanUser { by, .. }
            | Command::MuteAll { by, .. }
            | Command::UpdateRoomInfo { by, .. }
            | Command::SetAttributes { by, .. }
            | Command::Seat { by, .. } => by.user(),
            Command::ExpireSeatRequest { .. } => None,
        }
    }
}

/// Everything besides the command that `apply` needs; all inputs are explicit so `apply`
/// stays pure.
#[derive(Debug, Clone)]
pub struct CommandContext {
    /// The room the command targets.
    pub room_id: RoomId,
    /// Idempotency key.
    pub command_id: CommandId,
    /// Tracing id of the HTTP request.
    pub request_id: String,
    /// Wall-clock time of the command (ms since the epoch).
    pub now_ms: i64,
    /// `rooms.max_admins`.
    pub max_admins: usize,
    /// `rooms.seat_request_ttl`, in milliseconds.
    pub seat_request_ttl_ms: i64,
    /// `rooms.idle_close_after`, in milliseconds (`None`: never): an idle close applies only
    /// to a room with no member and no command for this long, as the room finds it at the
    /// close's turn.
    pub idle_close_after_ms: Option<i64>,
}

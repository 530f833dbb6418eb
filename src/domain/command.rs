//! Room commands and the context they are applied in.

use serde::{Deserialize, Serialize};

use super::ids::{CommandId, GiftId, RoomId, UserId};

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
    CloseRoom,
}

impl Command {
    /// Every [name](Self::name), in declaration order.
    pub const NAMES: [&'static str; 5] =
        ["create_room", "join_room", "leave_room", "send_gift", "close_room"];

    /// Bounded name used in logs, metrics and the command log.
    pub fn name(&self) -> &'static str {
        match self {
            Command::CreateRoom { .. } => "create_room",
            Command::JoinRoom { .. } => "join_room",
            Command::LeaveRoom { .. } => "leave_room",
            Command::SendGift { .. } => "send_gift",
            Command::CloseRoom => "close_room",
        }
    }

    /// The user the command acts as: the owner it creates a room for, who joins or leaves, who
    /// sends a gift; `None` for CloseRoom (it names nobody).
    pub fn acting_user(&self) -> Option<&UserId> {
        match self {
            Command::CreateRoom { owner_id, .. } => Some(owner_id),
            Command::JoinRoom { user_id } | Command::LeaveRoom { user_id, .. } => Some(user_id),
            Command::SendGift { sender_id, .. } => Some(sender_id),
            Command::CloseRoom => None,
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
}

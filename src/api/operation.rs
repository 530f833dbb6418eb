//! The neutral request of the room API: what a room request *is*, whichever edge it came in
//! by (an HTTP route, a gRPC method) and wherever it runs (here, or at the room's owner after
//! one hop). Both edges read their wire format into a [`RoomRequest`]; [`super::serve`] runs it
//! here or carries it to the owner ([`super::forward`]), and answers an [`Outcome`] each edge
//! writes back in its own format.
//!
//! An [`Operation`] is serialisable as it stands (its command is the domain's
//! [`Command`], with its own serde form), so the cluster hop carries the operation itself:
//! a new command crosses the hop without a line of forwarding code.

use ::http::HeaderValue;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::error::ApiError;
use super::rooms::{MAX_MEMBERS_LIMIT, check_heartbeat_ids};
use crate::auth::Caller;
use crate::domain::{
    Command, CommandId, MemberView, PendingKind, RestrictionKind, RoomId, RoomSnapshot, Seat, SeatMode,
    UserId,
};
use crate::room::{CommandResponse, Transport};

/// Largest body the batch heartbeat route takes whatever `http.body_limit_bytes` says: its
/// largest valid request, 1000 user ids of 64 bytes (about 67 KB of JSON), fits. gRPC's limit
/// (one for every method) and a forwarded hop's are at least this too.
pub const BATCH_HEARTBEAT_BYTES: usize = 72 * 1024;

/// What `POST /v1/rooms/{id}/heartbeats` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatsAnswer {
    /// How many distinct ids are members (their presence refreshed).
    pub alive: usize,
    /// The ids that are not members, in request order (each once).
    pub unknown: Vec<UserId>,
}

/// A page of members (`GET /v1/rooms/{room_id}/members`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MembersPage {
    /// Members in user id order.
    pub members: Vec<MemberView>,
    /// Pass as `after` for the next page; null on the last page.
    pub next_after: Option<UserId>,
}

/// What is asked of a room: every forwardable request of both APIs. (A page of the room's
/// events is not here: any node serves it from the database, it never travels.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Operation {
    /// A command, idempotent by (caller, `command_id`).
    Command {
        /// Its idempotency key.
        command_id: CommandId,
        /// What to apply.
        command: Command,
    },
    /// A member's presence heartbeat.
    Heartbeat {
        /// The member.
        user_id: UserId,
    },
    /// A gateway's heartbeats for the members it aggregates.
    Heartbeats {
        /// The members, in request order.
        user_ids: Vec<UserId>,
    },
    /// The room's snapshot.
    Snapshot,
    /// A page of the room's members.
    Members {
        /// Members after this one (`next_after` of the previous page).
        after: Option<UserId>,
        /// At most this many.
        limit: usize,
    },
    /// A page of the room's active mutes and bans (owner, admins, services).
    Moderation {
        /// One kind only.
        kind: Option<RestrictionKind>,
        /// Entries of users after this one.
        after: Option<UserId>,
        /// About this many (a user's entries are never split).
        limit: usize,
    },
    /// The room's seats and the pending requests and invitations the caller may see.
    Seats,
}

/// The room's seats and pending seat requests (`GET /v1/rooms/{room_id}/seats`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeatsView {
    /// `free` or `apply`.
    pub seat_mode: SeatMode,
    /// The seats, by index.
    pub seats: Vec<Seat>,
    /// Pending requests and invitations: every one for the owner, admins and services (and
    /// without authentication), the caller's own for a member; by user id.
    pub pending: Vec<PendingEntry>,
}

/// One pending request or invitation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingEntry {
    /// Whose.
    pub user_id: UserId,
    /// `request` or `invite`.
    pub kind: PendingKind,
    /// The seat named, if any.
    pub index: Option<u32>,
    /// When it expires (ms since the epoch).
    pub expires_at_ms: i64,
    /// Who made it.
    pub by: String,
}

/// One active mute or ban (`GET /v1/rooms/{room_id}/moderation`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModerationEntry {
    /// Who.
    pub user_id: UserId,
    /// `mute` or `ban`.
    pub kind: RestrictionKind,
    /// When it ends (ms since the epoch).
    pub until_ms: i64,
    /// A ban's reason ("" for a mute).
    pub reason: String,
    /// Who imposed it.
    pub by: String,
}

/// A page of active mutes and bans.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModerationPage {
    /// Entries by user id (a user's mute before their ban).
    pub entries: Vec<ModerationEntry>,
    /// Pass as `after` for the next page; null on the last page.
    pub next_after: Option<UserId>,
}

impl Operation {
    /// True for a read: it needs a token only when reads are not public (`auth.public_reads`).
    pub fn is_read(&self) -> bool {
        matches!(self, Operation::Snapshot | Operation::Members { .. })
    }

    /// The bounds every operation keeps, whichever edge or hop it came by: the room's owner
    /// checks them before it runs one (the edges refuse the same while parsing, with the same
    /// words), so no page is sized by a caller's number. 400 naming the field.
    pub fn check(&self) -> Result<(), ApiError> {
        let page = |limit: usize| {
            if (1..=MAX_MEMBERS_LIMIT as usize).contains(&limit) {
                Ok(())
            } else {
                Err(ApiError::invalid("limit", format!("must be an integer from 1 to {MAX_MEMBERS_LIMIT}")))
            }
        };
        match self {
            Operation::Members { limit, .. } | Operation::Moderation { limit, .. } => page(*limit),
            Operation::Heartbeats { user_ids } => check_heartbeat_ids(user_ids),
            // A command's fields are the domain's to bound, who may ask for it the policy's.
            Operation::Command { .. }
            | Operation::Heartbeat { .. }
            | Operation::Snapshot
            | Operation::Seats => Ok(()),
        }
    }
}

/// What an [`Operation`] answers, one variant per operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", content = "answer", rename_all = "snake_case")]
pub enum Outcome {
    /// A command's answer.
    Command(CommandResponse),
    /// A heartbeat was taken.
    Heartbeat,
    /// The heartbeats' answer.
    Heartbeats(HeartbeatsAnswer),
    /// The snapshot.
    Snapshot(RoomSnapshot),
    /// The page of members.
    Members(MembersPage),
    /// The page of mutes and bans.
    Moderation(ModerationPage),
    /// The seats.
    Seats(SeatsView),
}

impl Outcome {
    /// The answer of a [`Operation::Command`].
    pub fn command(self) -> Result<CommandResponse, ApiError> {
        match self {
            Outcome::Command(answer) => Ok(answer),
            other => Err(other.mismatch()),
        }
    }

    /// The answer of a [`Operation::Heartbeat`].
    pub fn heartbeat(self) -> Result<(), ApiError> {
        match self {
            Outcome::Heartbeat => Ok(()),
            other => Err(other.mismatch()),
        }
    }

    /// The answer of a [`Operation::Heartbeats`].
    pub fn heartbeats(self) -> Result<HeartbeatsAnswer, ApiError> {
        match self {
            Outcome::Heartbeats(answer) => Ok(answer),
            other => Err(other.mismatch()),
        }
    }

    /// The answer of a [`Operation::Snapshot`].
    pub fn snapshot(self) -> Result<RoomSnapshot, ApiError> {
        match self {
            Outcome::Snapshot(answer) => Ok(answer),
            other => Err(other.mismatch()),
        }
    }

    /// The answer of a [`Operation::Moderation`].
    pub fn moderation(self) -> Result<ModerationPage, ApiError> {
        match self {
            Outcome::Moderation(page) => Ok(page),
            other => Err(other.mismatch()),
        }
    }

    /// The answer of a [`Operation::Seats`].
    pub fn seats(self) -> Result<SeatsView, ApiError> {
        match self {
            Outcome::Seats(view) => Ok(view),
            other => Err(other.mismatch()),
        }
    }

    /// The answer of a [`Operation::Members`].
    pub fn members(self) -> Result<MembersPage, ApiError> {
        match self {
            Outcome::Members(answer) => Ok(answer),
            other => Err(other.mismatch()),
        }
    }

    /// Which operation this answers (for logs).
    fn name(&self) -> &'static str {
        match self {
            Outcome::Command(_) => "command",
            Outcome::Heartbeat => "heartbeat",
            Outcome::Heartbeats(_) => "heartbeats",
            Outcome::Snapshot(_) => "snapshot",
            Outcome::Members(_) => "members",
            Outcome::Moderation(_) => "moderation",
            Outcome::Seats(_) => "seats",
        }
    }

    /// The answer of another operation than the one asked: only an owner of another version
    /// could send it.
    fn mismatch(&self) -> ApiError {
        tracing::error!(outcome = self.name(), "The owner answered another operation than the one asked");
        ApiError::owner_unavailable()
    }
}

/// The caller's credential (its `Authorization` value, as the very bytes it sent): what a hop
/// carries to the room's owner, which verifies it again (SPEC §12.3). Never printed.
#[derive(Clone)]
pub struct Credential(HeaderValue);

impl Credential {
    /// The credential of an `Authorization` value; `None` when no header value can carry it
    /// (a CR, LF or NUL: no edge accepts one).
    pub fn from_bytes(value: &[u8]) -> Option<Self> {
        let mut value = HeaderValue::from_bytes(value).ok()?;
        value.set_sensitive(true);
        Some(Self(value))
    }

    /// The value as sent.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    /// The value, for the hop's `Authorization` header (marked sensitive).
    pub fn header(&self) -> HeaderValue {
        self.0.clone()
    }
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credential(..)")
    }
}

/// Who sent a room request, and how: everything an edge knows of it besides the operation.
#[derive(Debug, Clone)]
pub struct Sender {
    /// The caller, as verified where the request arrived (the owner verifies the credential
    /// again).
    pub caller: Caller,
    /// Its credential, for a hop.
    pub credential: Option<Credential>,
    /// The request id (valid: the edges replace any other).
    pub request_id: String,
    /// The edge it came in by (the `transport` label of `room_commands_total`).
    pub transport: Transport,
    /// When the caller stops waiting for the answer (a gRPC call's deadline, or the one a hop
    /// carried); `None`: the node's own request timeout bounds it.
    pub deadline: Option<Instant>,
    /// True when it came over a hop from another node: it is never forwarded again.
    pub hop: bool,
}

impl Sender {
    /// A request of `caller` with `credential`, traced as `request_id`, that came in over
    /// `transport` from a client (not a hop), without a deadline of its own.
    pub fn new(
        caller: Caller,
        credential: Option<Credential>,
        request_id: String,
        transport: Transport,
    ) -> Self {
        Self { caller, credential, request_id, transport, deadline: None, hop: false }
    }
}

/// One request for one room: the [`Operation`], and who sent it and how ([`Sender`]).
#[derive(Debug, Clone)]
pub struct RoomRequest {
    /// The room.
    pub room_id: RoomId,
    /// What is asked of it.
    pub operation: Operation,
    /// Who asks.
    pub sender: Sender,
}

impl RoomRequest {
    /// `operation` on `room_id`, from `sender`.
    pub fn new(room_id: RoomId, operation: Operation, sender: Sender) -> Self {
        Self { room_id, operation, sender }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::LeaveReason;

    fn user(id: &str) -> UserId {
        UserId::parse(id).unwrap()
    }

    #[test]
    fn an_operation_is_its_command_in_the_commands_own_form() {
        let leave = Operation::Command {
            command_id: CommandId::parse("c-1").unwrap(),
            command: Command::LeaveRoom { user_id: user("u"), reason: LeaveReason::User },
        };
        let encoded = serde_json::to_value(&leave).unwrap();
        assert_eq!(
            encoded,
            json!({"op": "command", "command_id": "c-1",
                   "command": {"command": "leave_room", "user_id": "u", "reason": "user"}})
        );
        assert_eq!(serde_json::from_value::<Operation>(encoded).unwrap(), leave);
        for read in [Operation::Snapshot, Operation::Members { after: Some(user("a")), limit: 5 }] {
            assert!(read.is_read());
            let text = serde_json::to_string(&read).unwrap();
            assert_eq!(serde_json::from_str::<Operation>(&text).unwrap(), read);
        }
        assert!(!Operation::Heartbeats { user_ids: vec![user("a")] }.is_read());
    }

    #[test]
    fn an_outcome_answers_its_own_operation_only() {
        let text = serde_json::to_string(&Outcome::Heartbeat).unwrap();
        let outcome: Outcome = serde_json::from_str(&text).unwrap();
        assert_eq!(outcome.clone().heartbeat(), Ok(()));
        assert_eq!(outcome.snapshot().unwrap_err().code, "owner_unavailable");
    }

    #[test]
    fn a_credential_keeps_its_bytes_and_never_prints_them() {
        let credential = Credential::from_bytes("Bearer clé".as_bytes()).unwrap();
        assert_eq!(credential.as_bytes(), "Bearer clé".as_bytes());
        assert!(credential.header().is_sensitive());
        assert_eq!(format!("{credential:?}"), "Credential(..)");
        assert!(Credential::from_bytes(b"Bearer a\nb").is_none());
    }
}

//! The response to a command, and its logged form replayed for a repeated `command_id`.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::domain::{Command, RoomId, RoomSnapshot};
use crate::room::error::RoomError;
use crate::wallet::WalletError;

/// How far an event got by the time the command answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// IM accepted it.
    Delivered,
    /// Not meant for IM (filtered); marked delivered without a call.
    Skipped,
    /// Not delivered yet; the outbox worker will.
    Pending,
}

/// One event of a command response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventReceipt {
    /// Event id.
    pub event_id: String,
    /// Event type name.
    pub event_type: String,
    /// Delivery state.
    pub delivery: Delivery,
}

/// The 200 answer to a command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandResponse {
    /// False when the command was a no-op.
    pub applied: bool,
    /// Room version the command produced (the same on replay).
    pub room_version: u64,
    /// True when this answers a repeated `command_id` from the log.
    pub replayed: bool,
    /// The room now.
    pub room: Option<RoomSnapshot>,
    /// The command's events.
    pub events: Vec<EventReceipt>,
}

/// What the command log keeps of a command's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LoggedOutcome {
    pub applied: bool,
    pub room_version: u64,
    pub events: Vec<LoggedEvent>,
}

/// An event id and type, as logged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LoggedEvent {
    pub event_id: String,
    pub event_type: String,
}

/// Every value [`result_label`] answers.
pub(in crate::room) const RESULT_LABELS: [&str; 8] = [
    "replayed",
    "applied",
    "not_applied",
    "rejected",
    "conflict",
    "unavailable",
    "payment_mismatch",
    "corrupt",
];

/// The `result` label of `room_commands_total` for a command's answer (one of
/// [`RESULT_LABELS`]).
pub(in crate::room) fn result_label(result: &Result<CommandResponse, RoomError>) -> &'static str {
    match result {
        Ok(r) if r.replayed => "replayed",
        Ok(r) if r.applied => "applied",
        Ok(_) => "not_applied",
        Err(RoomError::Domain(_) | RoomError::Wallet(WalletError::InsufficientBalance)) => "rejected",
        Err(RoomError::CommandConflict(_) | RoomError::VersionConflict(_) | RoomError::PaymentRefunded) => {
            "conflict"
        }
        Err(
            RoomError::Unavailable(_)
            | RoomError::NotCommitted(_)
            | RoomError::NotOwner
            | RoomError::Wallet(_),
        ) => "unavailable",
        Err(RoomError::PaymentMismatch) => "payment_mismatch",
        Err(RoomError::Corrupt(_)) => "corrupt",
    }
}

/// SHA-256 (hex) of the room id, the canonical command body and the caller that sent it: a
/// repeated `command_id` must carry the same fingerprint or it is a conflict. An anonymous
/// command (`caller` `None`, `auth.mode: none`) hashes as it did before callers existed, so
/// the command logs written then still replay.
pub(crate) fn fingerprint(room_id: &RoomId, command: &Command, caller: Option<&str>) -> String {
    // Cannot fail: serde_json fails only on a map with non-string keys or a `Serialize` impl
    // that errors, and a room id and a `Command` are derived impls over strings, integers
    // and unit variants — no map.
    let body = match caller {
        None => serde_json::to_vec(&(room_id, command)),
        Some(caller) => serde_json::to_vec(&(room_id, command, caller)),
    }
    .expect("a command always serialises");
    let digest = Sha256::digest(&body);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::UserId;

    #[test]
    fn fingerprint_differs_by_body_and_room() {
        let room = RoomId::parse("r").unwrap();
        let join = |u: &str| Command::JoinRoom { user_id: UserId::parse(u).unwrap() };
        assert_eq!(fingerprint(&room, &join("a"), None), fingerprint(&room, &join("a"), None));
        assert_ne!(fingerprint(&room, &join("a"), None), fingerprint(&room, &join("b"), None));
        assert_ne!(
            fingerprint(&room, &join("a"), None),
            fingerprint(&RoomId::parse("s").unwrap(), &join("a"), None)
        );
    }

    #[test]
    fn fingerprint_differs_by_caller_and_keeps_the_anonymous_one() {
        let room = RoomId::parse("r").unwrap();
        let join = Command::JoinRoom { user_id: UserId::parse("a").unwrap() };
        let alice = fingerprint(&room, &join, Some("user:alice"));
        assert_ne!(alice, fingerprint(&room, &join, Some("service:gateway")));
        assert_ne!(alice, fingerprint(&room, &join, None));
        // What a command logged before callers existed carries (SHA-256 of `["r",{...}]`).
        let body = serde_json::to_vec(&(&room, &join)).unwrap();
        let before: String = Sha256::digest(&body).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(fingerprint(&room, &join, None), before);
    }
}

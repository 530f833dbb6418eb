//! Seat request expiry (SPEC §14.3, `rooms.seat_request_ttl`): a pending request for a mic seat
//! or invitation to one that ran out leaves with a `RoomSeatRequestExpired`, exactly once.
//! Every node pages the database for due requests and expires those of the rooms it owns, each
//! with a command of its own whose id is made of the request (room, user, kind, expiry): a
//! request expires once, however many nodes saw it due or whichever node owned the room when,
//! and a restart loses none. The command applies only if that request is still the one pending
//! at its turn (answered, withdrawn or renewed meanwhile: a no-op).

use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::every;
use crate::domain::{Command, CommandId, PendingKind, RoomId, UserId};
use crate::room::{CommandRequest, RoomService};
use crate::store::DueSeatRequest;

/// Most requests one scan expires.
pub const EXPIRY_SCAN_LIMIT: usize = 1_000;
/// Rows one query of the scan reads (every node's due requests: a node keeps its own).
pub const EXPIRY_SCAN_PAGE: u32 = 1_000;

/// How often a node looks for due requests: a tenth of the TTL, between 250 ms and 5 s.
pub fn scan_interval(ttl: Duration) -> Duration {
    (ttl / 10).clamp(Duration::from_millis(250), Duration::from_secs(5))
}

/// The command id of one request's expiry: the same request always maps to the same id.
pub fn expiry_command_id(
    room_id: &RoomId,
    user_id: &UserId,
    kind: PendingKind,
    expires_at_ms: i64,
) -> CommandId {
    let digest =
        Sha256::digest(format!("{room_id}\n{user_id}\n{}\n{expires_at_ms}", kind.as_str()).as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    // The reserved prefix (refused from clients) + 64 hex chars: always a valid command id.
    CommandId::reserved(&format!("seatx:{hex}"))
        .unwrap_or_else(|_| unreachable!("a hex digest is printable ASCII"))
}

/// Expires the due requests of the rooms this node owns, once; returns how many it expired.
pub async fn expire_due(rooms: &RoomService, cancel: &CancellationToken) -> usize {
    let due = match rooms.due_seat_requests(rooms.now_ms(), EXPIRY_SCAN_PAGE, EXPIRY_SCAN_LIMIT).await {
        Ok(due) => due,
        Err(error) => {
            tracing::warn!(%error, "Could not look for due seat requests");
            return 0;
        }
    };
    let mut expired = 0;
    for row in due {
        if cancel.is_cancelled() {
            break;
        }
        expired += usize::from(expire(rooms, row).await);
    }
    expired
}

/// Expires one request; true when this call did.
async fn expire(rooms: &RoomService, row: DueSeatRequest) -> bool {
    let (Ok(room_id), Ok(user_id), Some(kind)) =
        (RoomId::parse(row.room_id), UserId::parse(row.user_id), PendingKind::parse(&row.kind))
    else {
        return false;
    };
    let command_id = expiry_command_id(&room_id, &user_id, kind, row.expires_at_ms);
    let command = Command::ExpireSeatRequest { user_id, kind, expires_at_ms: row.expires_at_ms };
    match rooms.submit(CommandRequest::new(room_id.clone(), command_id, "seat-expiry", command)).await {
        Ok(r) => r.applied && !r.replayed,
        Err(error) => {
            tracing::warn!(room_id = %room_id, %error, "Could not expire a seat request");
            false
        }
    }
}

/// Expires due seat requests every [`scan_interval`] until cancelled.
pub async fn run_seat_expiry(rooms: RoomService, ttl: Duration, cancel: CancellationToken) {
    let (rooms, stop) = (&rooms, &cancel);
    every(scan_interval(ttl), true, &cancel, || async move {
        let expired = expire_due(rooms, stop).await;
        if expired > 0 {
            tracing::debug!(expired, "Expired seat requests");
        }
    })
    .await;
}

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

/// Expires the due requests of the rooms this node owns after `cursor`, once; returns how
/// many it expired, and moves `cursor` to where the next scan goes on from. A scan that stopped
/// at its limit goes on after its last row next time, so rows that keep failing (a room that
/// cannot load) never hold the others back; one that reached the end starts over.
pub async fn expire_due(
    rooms: &RoomService,
    cursor: &mut (String, String),
    cancel: &CancellationToken,
) -> usize {
    let now_ms = rooms.now_ms();
    let due = match rooms.due_seat_requests(now_ms, cursor.clone(), EXPIRY_SCAN_PAGE, EXPIRY_SCAN_LIMIT).await
    {
        Ok((due, next)) => {
            *cursor = next.unwrap_or_default();
            due
        }
        Err(error) => {
            tracing::warn!(%error, "Could not look for due seat requests");
            return 0;
        }
    };
    let (mut expired, mut failed): (usize, Option<String>) = (0, None);
    for row in due {
        if cancel.is_cancelled() {
            break;
        }
        // A room that failed once is left for the next scan: one warning a room a scan.
        if failed.as_deref() == Some(row.room_id.as_str()) {
            continue;
        }
        match expire(rooms, &row).await {
            Ok(applied) => expired += usize::from(applied),
            Err(error) => {
                tracing::warn!(room_id = %row.room_id, %error, "Could not expire a seat request");
                failed = Some(row.room_id);
            }
        }
    }
    expired
}

/// Expires one request; true when this call did.
async fn expire(rooms: &RoomService, row: &DueSeatRequest) -> Result<bool, String> {
    let room_id = RoomId::parse(row.room_id.as_str()).map_err(|e| e.to_string())?;
    let user_id = UserId::parse(row.user_id.as_str()).map_err(|e| e.to_string())?;
    let kind = PendingKind::parse(&row.kind).ok_or_else(|| format!("unknown kind {:?}", row.kind))?;
    let command_id = expiry_command_id(&room_id, &user_id, kind, row.expires_at_ms);
    let command = Command::ExpireSeatRequest { user_id, kind, expires_at_ms: row.expires_at_ms };
    match rooms.submit(CommandRequest::new(room_id, command_id, "seat-expiry", command)).await {
        Ok(r) => Ok(r.applied && !r.replayed),
        Err(error) => Err(error.to_string()),
    }
}

/// Expires due seat requests every [`scan_interval`] until cancelled.
pub async fn run_seat_expiry(rooms: RoomService, ttl: Duration, cancel: CancellationToken) {
    let (rooms, stop) = (&rooms, &cancel);
    let cursor = &std::sync::Mutex::new((String::new(), String::new()));
    every(scan_interval(ttl), true, &cancel, || async move {
        let mut at = cursor.lock().map(|c| c.clone()).unwrap_or_default();
        let expired = expire_due(rooms, &mut at, stop).await;
        if let Ok(mut c) = cursor.lock() {
            *c = at;
        }
        if expired > 0 {
            tracing::debug!(expired, "Expired seat requests");
        }
    })
    .await;
}

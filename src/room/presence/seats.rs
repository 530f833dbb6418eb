//! Seat request expiry (docs/API.md, "Mic seats"; `rooms.seat_request_ttl`): a pending request for a mic seat
//! or invitation to one that ran out leaves with a `RoomSeatRequestExpired`, exactly once.
//! Every node pages the database for due requests and expires those of the rooms it owns, each
//! with a command of its own whose id is made of the request (room, user, kind, expiry): a
//! request expires once, however many nodes saw it due or whichever node owned the room when,
//! and a restart loses none. The command applies only if that request is still the one pending
//! at its turn (answered, withdrawn or renewed meanwhile: a no-op). A room's due requests are
//! submitted together and rooms expired in parallel ([`expire_due`]): one busy room never
//! delays another's expiries, nor its own beyond a few group commits.

use std::time::Duration;

use futures::StreamExt;
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
/// Most rooms whose due requests one scan expires at once (each room's together).
pub const EXPIRY_ROOMS_IN_PARALLEL: usize = 16;

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
///
/// A room's due requests are submitted together (up to its `max_commit_batch` at a time, none
/// waiting for another's IM send), so group commit takes them in one transaction and its lane
/// in one packed message; up to [`EXPIRY_ROOMS_IN_PARALLEL`] rooms are expired at once. A due
/// request is thus in IM within a scan interval and one commit and IM round trip of its
/// expiry, however many others are due (docs/DESIGN.md, "Seat request expiry").
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
    futures::stream::iter(by_room(due))
        .take_while(|_| std::future::ready(!cancel.is_cancelled()))
        .map(|rows| expire_room(rooms, rows, cancel))
        .buffer_unordered(EXPIRY_ROOMS_IN_PARALLEL)
        .fold(0, |sum, expired| std::future::ready(sum + expired))
        .await
}

/// `due` (in key order: a room's rows are together) cut into one run of rows per room.
fn by_room(due: Vec<DueSeatRequest>) -> Vec<Vec<DueSeatRequest>> {
    let mut runs: Vec<Vec<DueSeatRequest>> = Vec::new();
    for row in due {
        match runs.last_mut() {
            Some(run) if run.first().is_some_and(|first| first.room_id == row.room_id) => run.push(row),
            _ => runs.push(vec![row]),
        }
    }
    runs
}

/// Expires one room's due `rows` together; how many this call expired. A room whose
/// expiries failed is left for the next scan, with one warning.
async fn expire_room(rooms: &RoomService, rows: Vec<DueSeatRequest>, cancel: &CancellationToken) -> usize {
    let room_id = rows.first().map(|row| row.room_id.clone()).unwrap_or_default();
    let outcomes: Vec<Result<bool, String>> = futures::stream::iter(rows)
        .take_while(|_| std::future::ready(!cancel.is_cancelled()))
        .map(|row| async move { expire(rooms, &row).await })
        .buffer_unordered(rooms.max_commit_batch())
        .collect()
        .await;
    let failed = outcomes.iter().filter(|outcome| outcome.is_err()).count();
    if let Some(Err(error)) = outcomes.iter().find(|outcome| outcome.is_err()) {
        tracing::warn!(%room_id, failed, %error, "Could not expire seat requests");
    }
    outcomes.into_iter().filter(|outcome| matches!(outcome, Ok(true))).count()
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

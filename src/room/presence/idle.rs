//! Idle close (SPEC §14.2, `rooms.idle_close_after`): a room with no member and no command (its
//! creation counts) for that long closes itself, with `RoomClosed` reason `idle`. Every node
//! scans the database for such rooms and closes only those it owns, under a command id made of
//! the room's id: a room is closed once, however many nodes saw it idle or whichever node owned
//! it when. The close applies only if the room is still empty and silent at its turn.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::every;
use crate::domain::{Command, CommandId, RoomId, RoomState};
use crate::room::{CommandRequest, RoomService};

/// Most idle rooms one scan closes.
pub const IDLE_SCAN_LIMIT: usize = 500;
/// Room ids one query of the scan reads (every node's idle rooms: a node keeps its own).
pub const IDLE_SCAN_PAGE: u32 = 1_000;

/// How often a node looks for idle rooms: a quarter of `idle_after`, between 250 ms and 30 s.
pub fn scan_interval(idle_after: Duration) -> Duration {
    (idle_after / 4).clamp(Duration::from_millis(250), Duration::from_secs(30))
}

/// The command id of a room's idle close: one per room, so no two nodes close it twice.
pub fn idle_command_id(room_id: &RoomId) -> CommandId {
    // The reserved prefix (refused from clients) + `idle:` + a room id: at most 78 printable
    // ASCII characters, always a valid command id.
    CommandId::reserved(&format!("idle:{room_id}"))
        .unwrap_or_else(|_| unreachable!("a room id is printable ASCII"))
}

/// Closes the idle rooms this node owns, once; returns how many it closed.
pub async fn close_idle(rooms: &RoomService, idle_after: Duration, cancel: &CancellationToken) -> usize {
    let candidates = match rooms.idle_rooms(idle_after, IDLE_SCAN_PAGE, IDLE_SCAN_LIMIT).await {
        Ok(candidates) => candidates,
        Err(error) => {
            tracing::warn!(%error, "Could not look for idle rooms");
            return 0;
        }
    };
    let idle_ms = i64::try_from(idle_after.as_millis()).unwrap_or(i64::MAX);
    let mut closed = 0;
    for room_id in candidates {
        if cancel.is_cancelled() {
            break;
        }
        let cutoff = rooms.now_ms().saturating_sub(idle_ms);
        // Read at the command's turn: a member or a command since the scan keeps it open.
        let still_idle =
            Arc::new(move |s: &RoomState| s.members.is_empty() && s.figures.last_command_ms <= cutoff);
        let command = Command::CloseRoom { by: None, idle: true };
        let request = CommandRequest::new(room_id.clone(), idle_command_id(&room_id), "idle-close", command)
            .only_if(still_idle);
        match rooms.submit(request).await {
            Ok(r) if r.applied && !r.replayed => {
                tracing::info!(room_id = %room_id, "Closed an idle room");
                closed += 1;
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(room_id = %room_id, %error, "Could not close an idle room"),
        }
    }
    closed
}

/// Closes idle rooms every [`scan_interval`] until cancelled.
pub async fn run_idle_closer(rooms: RoomService, idle_after: Duration, cancel: CancellationToken) {
    let (rooms, stop) = (&rooms, &cancel);
    every(scan_interval(idle_after), true, &cancel, || async move {
        close_idle(rooms, idle_after, stop).await;
    })
    .await;
}

//! Idle close (`rooms.idle_close_after`, docs/CONFIG.md): a room with no member and no command (its
//! creation counts) for that long closes itself, with `RoomClosed` reason `idle`. Every node
//! scans the database for such rooms and closes only those it owns, under a command id made of
//! the room's id: a room is closed once, however many nodes saw it idle or whichever node owned
//! it when. The close applies only if the room is still empty and silent at its turn: the
//! room itself checks that, as part of the command (`CommandContext::idle_close_after_ms`).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::every;
use crate::domain::{Command, CommandId, RoomId};
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
    let mut closed = 0;
    for room_id in candidates {
        if cancel.is_cancelled() {
            break;
        }
        // The room checks at the command's turn that it is still empty and silent for
        // `idle_after`: a member or a command since the scan keeps it open.
        let command = Command::CloseRoom { by: None, idle: true };
        let request = CommandRequest::new(room_id.clone(), idle_command_id(&room_id), "idle-close", command);
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

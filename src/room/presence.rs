//! The presence stale worker: members whose last heartbeat is older than `stale_after` leave
//! through the normal command pipeline (LeaveRoom, reason `stale`), so their RoomUserLeft goes
//! through the outbox like any other event.

use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::RoomService;
use crate::domain::{Command, CommandId, LeaveReason, RoomId, UserId};

/// Deterministic command id of a stale removal: the same member session (room, user, joined
/// at) always maps to the same id, so two nodes can never remove it twice.
pub fn stale_command_id(room_id: &RoomId, user_id: &UserId, joined_at_ms: i64) -> CommandId {
    let digest = Sha256::digest(format!("{room_id}\n{user_id}\n{joined_at_ms}").as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    // 6 + 64 printable ASCII chars: always a valid command id.
    CommandId::parse(format!("stale-{hex}")).unwrap_or_else(|_| unreachable!("hex digest is printable ASCII"))
}

/// Removes stale members once; returns how many were removed.
pub async fn sweep_stale(rooms: &RoomService, stale_after: Duration) -> usize {
    let cutoff = rooms.now_ms() - stale_after.as_millis() as i64;
    let mut removed = 0;
    for (room_id, members) in rooms.stale_members(cutoff).await {
        for (user_id, joined_at_ms) in members {
            let command_id = stale_command_id(&room_id, &user_id, joined_at_ms);
            let command = Command::LeaveRoom { user_id: user_id.clone(), reason: LeaveReason::Stale };
            match rooms.execute(room_id.clone(), command_id, "presence".into(), command).await {
                Ok(r) if r.applied && !r.replayed => removed += 1,
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(room_id = %room_id, user_id = %user_id, %error, "Could not remove a stale member")
                }
            }
        }
    }
    removed
}

/// Drops idle cells every `interval` until cancelled (see [`RoomService::evict_idle`]).
pub async fn run_cell_janitor(
    rooms: RoomService,
    interval: Duration,
    idle_after: Duration,
    cancel: CancellationToken,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while cancel.run_until_cancelled(tick.tick()).await.is_some() {
        let evicted = rooms.evict_idle(idle_after);
        if evicted > 0 {
            tracing::debug!(evicted, cells = rooms.cell_count(), "Evicted idle room cells");
        }
    }
}

/// Sweeps every `scan_interval` until cancelled.
pub async fn run_presence_worker(
    rooms: RoomService,
    stale_after: Duration,
    scan_interval: Duration,
    cancel: CancellationToken,
) {
    let mut tick = tokio::time::interval(scan_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    while cancel.run_until_cancelled(tick.tick()).await.is_some() {
        let removed = sweep_stale(&rooms, stale_after).await;
        if removed > 0 {
            tracing::info!(removed, "Removed stale members");
        }
    }
}

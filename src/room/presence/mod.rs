//! The rooms' background workers. The presence stale worker: members whose last heartbeat is
//! older than `stale_after` leave through the normal command pipeline (LeaveRoom, reason
//! `stale`), so their RoomUserLeft goes through the outbox like any other event. The cell
//! janitor (which also prunes ended mutes and bans), the sweeper of gift refunds the wallet has
//! not confirmed, the idle closer ([`idle`]) and the expiry of mic seat requests ([`seats`]).
//!
//! What the stale worker reads is each cell's presence (`last_seen`): when each member was
//! last seen, kept beside the room's state and outside its commit lock, so a heartbeat never
//! waits for a commit.

pub mod idle;
pub(in crate::room) mod last_seen;
pub mod seats;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::{CommandRequest, RoomService};
use crate::domain::{Command, CommandId, LeaveReason, RoomId, RoomState, UserId};

/// Deterministic command id of a stale removal: the same member session (room, user, joined
/// at) always maps to the same id, so two nodes can never remove it twice.
pub fn stale_command_id(room_id: &RoomId, user_id: &UserId, joined_at_ms: i64) -> CommandId {
    let digest = Sha256::digest(format!("{room_id}\n{user_id}\n{joined_at_ms}").as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    // The reserved prefix (refused from clients) + 64 hex chars: always a valid command id.
    CommandId::reserved(&format!("stale:{hex}"))
        .unwrap_or_else(|_| unreachable!("a hex digest is printable ASCII"))
}

/// Removes stale members once; returns how many were removed. The removals of a room are
/// issued together (up to its `max_commit_batch` at a time), so a room that lost thousands of
/// viewers at once clears them in a few group commits.
pub async fn sweep_stale(rooms: &RoomService, stale_after: Duration, cancel: &CancellationToken) -> usize {
    let stale_after_ms = i64::try_from(stale_after.as_millis()).unwrap_or(i64::MAX);
    let cutoff = rooms.now_ms().saturating_sub(stale_after_ms);
    let mut removed = 0;
    for (room_id, members) in rooms.stale_members(cutoff).await {
        let removals = futures::stream::iter(members)
            .take_while(|_| std::future::ready(!cancel.is_cancelled()))
            .map(|(user_id, joined_at_ms)| remove_stale(rooms, &room_id, user_id, joined_at_ms, cutoff))
            .buffer_unordered(rooms.max_commit_batch());
        removed += removals.filter(|removed| std::future::ready(*removed)).count().await;
        if cancel.is_cancelled() {
            break;
        }
    }
    removed
}

/// Removes one stale member, unless a heartbeat came in since the scan (re-checked at the
/// command's turn). True when this call removed it.
async fn remove_stale(
    rooms: &RoomService,
    room_id: &RoomId,
    user_id: UserId,
    joined_at_ms: i64,
    cutoff: i64,
) -> bool {
    let command_id = stale_command_id(room_id, &user_id, joined_at_ms);
    let command = Command::LeaveRoom { user_id: user_id.clone(), reason: LeaveReason::Stale };
    let member = user_id.clone();
    // Read at the command's turn, from the room's presence: a heartbeat since the scan wins.
    // (Holding the cell also keeps the janitor from dropping it until the removal is done.)
    let cell = rooms.cell(room_id);
    let still_stale = Arc::new(move |state: &RoomState| {
        state.members.get(&member).is_some_and(|m| m.joined_at_ms == joined_at_ms)
            && cell.presence.last_seen(&member).is_some_and(|seen| seen <= cutoff)
    });
    let request = CommandRequest::new(room_id.clone(), command_id, "presence", command).only_if(still_stale);
    match rooms.submit(request).await {
        Ok(r) => r.applied && !r.replayed,
        Err(error) => {
            tracing::warn!(room_id = %room_id, user_id = %user_id, %error, "Could not remove a stale member");
            false
        }
    }
}

/// Drops idle cells every `interval` until cancelled (see [`RoomService::evict_idle`]).
pub async fn run_cell_janitor(
    rooms: RoomService,
    interval: Duration,
    idle_after: Duration,
    cancel: CancellationToken,
) {
    let rooms = &rooms;
    every(interval, false, &cancel, || async move {
        let evicted = rooms.evict_idle(idle_after);
        if evicted > 0 {
            tracing::debug!(evicted, cells = rooms.cell_count(), "Evicted idle room cells");
        }
        // Mutes and bans that ended go without a command (a cell ignores them already).
        match rooms.prune_restrictions().await {
            Ok(0) => {}
            Ok(pruned) => tracing::debug!(pruned, "Pruned ended mutes and bans"),
            Err(error) => tracing::warn!(%error, "Could not prune ended mutes and bans"),
        }
    })
    .await;
}

/// Every `interval` until cancelled, sends again the gift refunds the wallet has not
/// confirmed after [`REFUND_UNFINISHED_AFTER`] (see [`RoomService::finish_refunds`]).
pub async fn run_refund_sweeper(rooms: RoomService, interval: Duration, cancel: CancellationToken) {
    let rooms = &rooms;
    every(interval, true, &cancel, || async move {
        rooms.finish_refunds(REFUND_UNFINISHED_AFTER).await;
    })
    .await;
}

/// A refund the wallet has not confirmed this long after it was recorded is sent again: the
/// command path's own attempts (a few wallet timeouts) are over by then.
pub const REFUND_UNFINISHED_AFTER: Duration = Duration::from_secs(30);

/// Sweeps every `scan_interval` until cancelled.
pub async fn run_presence_worker(
    rooms: RoomService,
    stale_after: Duration,
    scan_interval: Duration,
    cancel: CancellationToken,
) {
    let (rooms, stop) = (&rooms, &cancel);
    every(scan_interval, true, &cancel, || async move {
        let removed = sweep_stale(rooms, stale_after, stop).await;
        if removed > 0 {
            tracing::info!(removed, "Removed stale members");
        }
    })
    .await;
}

/// Runs `step` every `period` until `cancel` fires (a step under way is not cut here: it
/// watches `cancel` itself if it must), the first time at once unless `wait_first`. A tick missed while a step runs is pushed back,
/// not made up for, so a slow step is never followed by a burst of them.
async fn every<F: Future<Output = ()>>(
    period: Duration,
    wait_first: bool,
    cancel: &CancellationToken,
    mut step: impl FnMut() -> F,
) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    if wait_first {
        tick.tick().await;
    }
    while cancel.run_until_cancelled(tick.tick()).await.is_some() {
        step().await;
    }
}

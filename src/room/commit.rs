//! What a command commits: its events wrapped in envelopes (UUIDv7 ids) and the
//! [`CommandCommit`] — command log row with the logged outcome, outbox rows, fenced snapshot.

use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use super::outcome::{LoggedEvent, LoggedOutcome};
use crate::domain::{Applied, Command, CommandContext, EventEnvelope, RoomStatus};
use crate::store::{CommandCommit, NewOutboxRow};

/// The command's events as envelopes, with their JSON (stored and published as is).
pub(super) fn envelopes(applied: &Applied, ctx: &CommandContext) -> Vec<(EventEnvelope, Arc<str>)> {
    applied
        .events
        .iter()
        .map(|event| {
            let id = Uuid::now_v7().to_string();
            let envelope = EventEnvelope::new(event.clone(), ctx, applied.state.version, id);
            let json: Arc<str> = serde_json::to_string(&envelope).unwrap_or_default().into();
            (envelope, json)
        })
        .collect()
}

/// Everything the command's transaction writes; `previous_version` fences the snapshot (0 for
/// a new room). The rows are claimable at once until the caller sets `publish_timeout`.
pub(super) fn command_commit(
    ctx: &CommandContext,
    command: &Command,
    fingerprint: &str,
    applied: &Applied,
    previous_version: u64,
    envelopes: &[(EventEnvelope, Arc<str>)],
) -> CommandCommit {
    let logged = LoggedOutcome {
        applied: applied.applied,
        room_version: applied.state.version,
        events: envelopes
            .iter()
            .map(|(e, _)| LoggedEvent {
                event_id: e.event_id.clone(),
                event_type: e.event_type.as_str().into(),
            })
            .collect(),
    };
    CommandCommit {
        command_id: ctx.command_id.to_string(),
        room_id: ctx.room_id.to_string(),
        command_type: command.name(),
        fingerprint: fingerprint.to_owned(),
        request_id: ctx.request_id.clone(),
        applied: applied.applied,
        room_version: applied.state.version,
        outcome: serde_json::to_string(&logged).unwrap_or_default(),
        snapshot: applied
            .applied
            .then(|| (previous_version, serde_json::to_string(&applied.state).unwrap_or_default())),
        room_status: match applied.state.status {
            RoomStatus::Open => "open",
            RoomStatus::Closed => "closed",
        },
        outbox: envelopes
            .iter()
            .map(|(e, json)| NewOutboxRow {
                event_id: e.event_id.clone(),
                event_type: e.event_type.as_str(),
                envelope: json.to_string(),
            })
            .collect(),
        publish_timeout: Duration::ZERO,
    }
}

//! Group commit: the commands queued on a room, applied in order in memory and written as
//! ONE [`RoomCommit`] — each command's log row and outbox rows, one snapshot write fenced on
//! the version the batch was decided on, and the net member and gift-total rows.
//!
//! Planning is pure: [`plan`] decides every command exactly as if it ran alone on the state
//! left by the ones before it; the pipeline commits the plan and answers each command.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use uuid::Uuid;

use super::error::RoomError;
use super::outcome::{CommandResponse, LoggedEvent, LoggedOutcome};
use super::pipeline::StillHolds;
use crate::cluster::shard_of;
use crate::domain::{
    self, Applied, Change, Command, CommandContext, CommandId, DomainError, EventEnvelope, RoomId, RoomState,
    SenderTotal, UserId,
};
use crate::store::{GiftTotalRow, LoggedCommand, MemberChanges, NewOutboxRow, RoomCommit, SnapshotWrite};

/// A command waiting on its room's cell.
pub(super) struct Queued {
    pub(super) command_id: CommandId,
    pub(super) request_id: String,
    pub(super) command: Command,
    /// SHA-256 of the room id and command body (see [`super::outcome::fingerprint`]).
    pub(super) fingerprint: String,
    /// Apply only if this still holds for the room at its turn (presence removals).
    pub(super) still: Option<Arc<StillHolds>>,
    /// Where the answer goes; closed when the caller went away (the command is then skipped
    /// if it has not been taken into a batch yet).
    pub(super) reply: oneshot::Sender<Result<CommandResponse, RoomError>>,
}

impl std::fmt::Debug for Queued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queued")
            .field("command_id", &self.command_id)
            .field("command", &self.command)
            .finish()
    }
}

/// A decided command waiting to be published: its response so far and its events.
pub(super) struct Committed {
    pub(super) response: CommandResponse,
    pub(super) envelopes: Vec<(EventEnvelope, Arc<str>)>,
}

/// What became of one command of a batch.
pub(super) enum Decision {
    /// Applied, a no-op, or skipped (its condition no longer held).
    Done(Committed),
    /// Refused by the domain; the command log is asked first whether it is a repeat.
    Refused(DomainError),
}

/// A batch decided on one state.
pub(super) struct Plan {
    /// What to write; `None` when no command is logged (every one refused or skipped).
    pub(super) commit: Option<RoomCommit>,
    /// One per queued command, in order.
    pub(super) decisions: Vec<Decision>,
    /// The room after the batch.
    pub(super) state: Option<RoomState>,
}

/// Applies `items` in order to `state` (the room as committed at its version) and gathers
/// one commit. `claim_after`: the outbox rows are not claimable by the worker before it;
/// `fence`: the shard lease epoch the commit is fenced on.
pub(super) fn plan(
    room_id: &RoomId,
    state: Option<&RoomState>,
    items: &[Queued],
    now_ms: i64,
    claim_after: Duration,
    fence: Option<u64>,
) -> Plan {
    let expected_version = state.map_or(0, |s| s.version);
    let mut state = state.cloned();
    let mut decisions = Vec::with_capacity(items.len());
    let mut commands = Vec::new();
    let mut outbox = Vec::new();
    let mut members = NetMembers::default();
    let mut senders: BTreeMap<UserId, SenderTotal> = BTreeMap::new();
    let mut changed = false;
    for item in items {
        if let Some(still) = &item.still
            && !state.as_ref().is_some_and(|s| still(s))
        {
            decisions.push(Decision::Done(not_applied(state.as_ref())));
            continue;
        }
        let ctx = CommandContext {
            room_id: room_id.clone(),
            command_id: item.command_id.clone(),
            request_id: item.request_id.clone(),
            now_ms,
        };
        let applied = match domain::apply(state.as_ref(), &item.command, &ctx) {
            Ok(applied) => applied,
            Err(refused) => {
                decisions.push(Decision::Refused(refused));
                continue;
            }
        };
        let envelopes = envelopes(&applied, &ctx);
        commands.push(logged_command(item, &applied, &envelopes));
        outbox.extend(envelopes.iter().map(|(e, json)| NewOutboxRow {
            event_id: e.event_id.clone(),
            event_type: e.event_type.as_str(),
            envelope: json.to_string(),
        }));
        for change in &applied.changes {
            match change {
                Change::SenderTotal { user_id, total } => {
                    senders.insert(user_id.clone(), *total);
                }
                other => members.record(other),
            }
        }
        let response = CommandResponse {
            applied: applied.applied,
            room_version: applied.state.version,
            replayed: false,
            room: Some(applied.state.snapshot()),
            events: Vec::new(),
        };
        if applied.applied {
            changed = true;
            state = Some(applied.state);
        }
        decisions.push(Decision::Done(Committed { response, envelopes }));
    }
    let commit = (!commands.is_empty()).then(|| RoomCommit {
        room_id: room_id.to_string(),
        expected_version,
        snapshot: changed.then(|| state.as_ref().map(snapshot_write)).flatten(),
        commands,
        outbox,
        members: members.into_changes(),
        gift_totals: senders
            .into_iter()
            .map(|(user_id, t)| GiftTotalRow {
                user_id: user_id.to_string(),
                total_value: t.total_value,
                first_version: t.first_version,
            })
            .collect(),
        publish_timeout: claim_after,
        shard: shard_of(room_id.as_str()),
        fence,
    });
    Plan { commit, decisions, state }
}

/// The answer to a command whose condition no longer held: nothing applied or logged.
fn not_applied(state: Option<&RoomState>) -> Committed {
    let room = state.map(RoomState::snapshot);
    let room_version = room.as_ref().map_or(0, |r| r.version);
    let response =
        CommandResponse { applied: false, room_version, replayed: false, room, events: Vec::new() };
    Committed { response, envelopes: Vec::new() }
}

/// The command's events as envelopes, with their JSON (stored and published as is).
fn envelopes(applied: &Applied, ctx: &CommandContext) -> Vec<(EventEnvelope, Arc<str>)> {
    applied
        .events
        .iter()
        .map(|event| {
            let id = Uuid::now_v7().to_string();
            let envelope = EventEnvelope::new(event.clone(), ctx, applied.state.version, id);
            let json: Arc<str> = envelope.to_json().into();
            (envelope, json)
        })
        .collect()
}

/// The command's log row, with the outcome replayed for a repeated command id.
fn logged_command(
    item: &Queued,
    applied: &Applied,
    envelopes: &[(EventEnvelope, Arc<str>)],
) -> LoggedCommand {
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
    LoggedCommand {
        command_id: item.command_id.to_string(),
        command_type: item.command.name(),
        fingerprint: item.fingerprint.clone(),
        request_id: item.request_id.clone(),
        applied: applied.applied,
        room_version: applied.state.version,
        // Cannot fail: a bool, an integer and a Vec of two-string structs, all derived.
        outcome: serde_json::to_string(&logged).expect("a logged outcome always serialises"),
    }
}

fn snapshot_write(state: &RoomState) -> SnapshotWrite {
    SnapshotWrite { version: state.version, status: state.status.as_str(), state: state.snapshot_json() }
}

/// The net effect of a batch's member changes: the last word on each member, and whether the
/// room was cleared first.
#[derive(Debug, Default)]
struct NetMembers {
    cleared: bool,
    last: BTreeMap<UserId, Option<i64>>,
}

impl NetMembers {
    fn record(&mut self, change: &Change) {
        match change {
            Change::MemberJoined { user_id, joined_at_ms } => {
                self.last.insert(user_id.clone(), Some(*joined_at_ms));
            }
            Change::MemberLeft { user_id } => {
                self.last.insert(user_id.clone(), None);
            }
            Change::MembersCleared => {
                self.cleared = true;
                self.last.clear();
            }
            Change::SenderTotal { .. } => {}
        }
    }

    fn into_changes(self) -> MemberChanges {
        let mut changes = MemberChanges { cleared: self.cleared, ..MemberChanges::default() };
        for (user_id, joined) in self.last {
            match joined {
                Some(joined_at_ms) => changes.upserted.push((user_id.to_string(), joined_at_ms)),
                None => changes.deleted.push(user_id.to_string()),
            }
        }
        changes
    }
}

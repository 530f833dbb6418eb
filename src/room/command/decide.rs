//! The decide step (pure): the commands queued on a room, applied in order by the domain on
//! the room as committed — each exactly as if it ran alone on the state left by the ones
//! before it. The [`Plan`] says what became of each command and what the batch changed; the
//! commit step ([`super::commit`]) writes it as one transaction.

use std::sync::Arc;

use tokio::sync::oneshot;
use uuid::Uuid;

use super::outcome::CommandResponse;
use crate::domain::{
    self, Applied, Change, Command, CommandContext, CommandId, DomainError, EventEnvelope, RoomId, RoomState,
};
use crate::room::error::RoomError;
use crate::room::options::{RoomOptions, StillHolds};
use crate::store::CommandKey;
use crate::telemetry::traces::Traced;

/// A command waiting on its room's cell.
pub(in crate::room) struct Queued {
    pub(in crate::room) command_id: CommandId,
    /// Who sent it: with `command_id`, the command's identity ([`CommandKey`]).
    pub(in crate::room) caller: String,
    pub(in crate::room) request_id: String,
    pub(in crate::room) command: Command,
    /// SHA-256 of the room id and command body (see [`super::outcome::fingerprint`]).
    pub(in crate::room) fingerprint: String,
    /// Apply only if this still holds for the room at its turn (presence removals).
    pub(in crate::room) still: Option<Arc<StillHolds>>,
    /// The command's span when its trace is sampled (SPEC §13.4).
    pub(in crate::room) trace: Option<Traced>,
    /// Where the answer goes (and the answers of identical copies queued with it); closed
    /// when every caller went away (the command is then skipped if it has not been taken into
    /// a batch yet).
    pub(in crate::room) reply: Reply,
}

/// Where a queued command's answer goes: its caller, and the callers of identical copies of it
/// (the same caller, `command_id` and body) that were queued beside it. A copy never runs: it
/// is answered what the command was, as a replay (SPEC §13.1: one caller's duplicate costs the
/// batch nothing).
#[derive(Debug)]
pub(in crate::room) struct Reply {
    first: oneshot::Sender<Result<CommandResponse, RoomError>>,
    copies: Vec<oneshot::Sender<Result<CommandResponse, RoomError>>>,
}

impl Reply {
    /// The answer of one caller.
    pub(in crate::room) fn new(sender: oneshot::Sender<Result<CommandResponse, RoomError>>) -> Self {
        Self { first: sender, copies: Vec::new() }
    }

    /// True when nobody waits for the answer any more.
    pub(in crate::room) fn is_closed(&self) -> bool {
        self.first.is_closed() && self.copies.iter().all(oneshot::Sender::is_closed)
    }

    /// `copy`, an identical command queued later, is answered with this one.
    pub(in crate::room) fn take_copy(&mut self, copy: Reply) {
        self.copies.push(copy.first);
        self.copies.extend(copy.copies);
    }

    /// Answers the command and its copies (as replays).
    pub(in crate::room) fn send(self, answer: Result<CommandResponse, RoomError>) {
        for copy in self.copies {
            let replayed = answer.clone().map(|mut response| {
                response.replayed = true;
                response
            });
            let _ = copy.send(replayed);
        }
        let _ = self.first.send(answer);
    }
}

impl Queued {
    /// The command's identity.
    pub(in crate::room) fn key(&self) -> CommandKey {
        CommandKey::new(self.caller.clone(), self.command_id.as_str())
    }
}

impl std::fmt::Debug for Queued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queued")
            .field("command_id", &self.command_id)
            .field("command", &self.command)
            .finish()
    }
}

/// One command's answer after its batch was decided and committed, before publishing.
pub(in crate::room) type Answer = (Queued, Result<Committed, RoomError>);

/// A decided command waiting to be published: its response so far and its events.
pub(in crate::room) struct Committed {
    pub(in crate::room) response: CommandResponse,
    pub(in crate::room) envelopes: Vec<(EventEnvelope, Arc<str>)>,
}

/// What became of one command of a batch.
pub(in crate::room) enum Decision {
    /// Applied, a no-op, or skipped (its condition no longer held); boxed, as it carries the
    /// room's view.
    Done(Box<Committed>),
    /// Refused by the domain; the command log is asked first whether it is a repeat.
    Refused(DomainError),
}

/// A batch decided on one state.
pub(in crate::room) struct Plan {
    /// One per queued command, in order.
    pub(in crate::room) decisions: Vec<Decision>,
    /// The commands to log (applied or no-op), by their index in the batch.
    pub(in crate::room) logged: Vec<usize>,
    /// The member and gift-total changes of the applied commands, in order.
    pub(in crate::room) changes: Vec<Change>,
    /// The room version the batch was decided on (0: no room).
    pub(in crate::room) expected_version: u64,
    /// Some command was applied: the room's snapshot is written.
    pub(in crate::room) changed: bool,
    /// The room after the batch.
    pub(in crate::room) state: Option<RoomState>,
}

impl Plan {
    /// True when no command is logged (every one refused or skipped): nothing to commit.
    pub(in crate::room) fn writes_nothing(&self) -> bool {
        self.logged.is_empty()
    }

    /// A logged command's answer so far and events (`index` from [`Plan::logged`]).
    pub(in crate::room) fn committed(&self, index: usize) -> Option<&Committed> {
        match self.decisions.get(index) {
            Some(Decision::Done(committed)) => Some(committed),
            _ => None,
        }
    }
}

/// The decide step: the domain applied to one room's commands at one instant.
pub(in crate::room) struct Decide<'a> {
    room_id: &'a RoomId,
    now_ms: i64,
    max_admins: usize,
    seat_request_ttl_ms: i64,
    idle_close_after_ms: Option<i64>,
}

impl<'a> Decide<'a> {
    /// Decides commands of `room_id` at `now_ms`.
    pub(in crate::room) fn new(room_id: &'a RoomId, now_ms: i64, options: &RoomOptions) -> Self {
        let seat_request_ttl_ms = i64::try_from(options.seat_request_ttl.as_millis()).unwrap_or(i64::MAX);
        let idle_close_after_ms =
            options.idle_close_after.map(|after| i64::try_from(after.as_millis()).unwrap_or(i64::MAX));
        Self { room_id, now_ms, max_admins: options.max_admins, seat_request_ttl_ms, idle_close_after_ms }
    }

    /// Applies `items` in order to `state` (the room as committed at its version).
    pub(in crate::room) fn batch(&self, state: Option<&RoomState>, items: &[Queued]) -> Plan {
        let mut plan = Plan {
            decisions: Vec::with_capacity(items.len()),
            logged: Vec::new(),
            changes: Vec::new(),
            expected_version: state.map_or(0, |s| s.version),
            changed: false,
            state: state.cloned(),
        };
        for item in items {
            let decision = self.one(&mut plan, item);
            plan.decisions.push(decision);
        }
        plan
    }

    fn one(&self, plan: &mut Plan, item: &Queued) -> Decision {
        if let Some(still) = &item.still
            && !plan.state.as_ref().is_some_and(|s| still(s))
        {
            return Decision::Done(Box::new(not_applied(plan.state.as_ref())));
        }
        let ctx = CommandContext {
            room_id: self.room_id.clone(),
            command_id: item.command_id.clone(),
            request_id: item.request_id.clone(),
            now_ms: self.now_ms,
            max_admins: self.max_admins,
            seat_request_ttl_ms: self.seat_request_ttl_ms,
            idle_close_after_ms: self.idle_close_after_ms,
        };
        let applied = match domain::apply(plan.state.as_ref(), &item.command, &ctx) {
            Ok(applied) => applied,
            Err(refused) => return Decision::Refused(refused),
        };
        plan.logged.push(plan.decisions.len());
        let envelopes = envelopes(&applied, &ctx);
        let response = CommandResponse {
            applied: applied.applied,
            room_version: applied.state.version,
            replayed: false,
            room: Some(applied.state.answer_view()),
            events: Vec::new(),
        };
        plan.changes.extend(applied.changes);
        if applied.applied {
            plan.changed = true;
            plan.state = Some(applied.state);
        }
        Decision::Done(Box::new(Committed { response, envelopes }))
    }
}

/// The answer to a command whose condition no longer held: nothing applied or logged.
fn not_applied(state: Option<&RoomState>) -> Committed {
    let room = state.map(RoomState::answer_view);
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

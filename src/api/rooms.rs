//! The operations of the room API both transports call, and the limits both apply: a command,
//! a presence heartbeat or a batch of them (each refused while draining, and checked against
//! the caller's rights and rate the same way whichever API it came through), and a page of
//! members. Both edges reach them through [`super::serve`] (a page of events directly: it is
//! never forwarded); the logic is here.

use std::sync::Arc;

use serde::Serialize;

use super::error::ApiError;
pub use super::operation::{
    HeartbeatsAnswer, MembersPage, ModerationEntry, ModerationPage, PendingEntry, SeatsView,
};
use super::state::AppState;
use crate::auth::policy::{self, Act};
use crate::auth::{AuthError, Caller};
use crate::domain::{Actor, Command, CommandId, RestrictionKind, RoomId, UserId};
use crate::room::{CommandRequest, CommandResponse, Transport};

/// At most this many user ids in one `heartbeats` call.
pub const MAX_HEARTBEAT_IDS: usize = 1_000;

/// Runs a command that came in over `transport` from `caller`: refused while draining, when
/// its `command_id` carries the reserved prefix, when the caller may not do it (403: acting as
/// another user, closing a room it does not own) or is over its limit (429; a seat action also
/// over its user's in the room, `rooms.seat_actions_per_user_per_sec`), a creation when its
/// owner has as many open rooms as it may ([`Bounds::check_open_rooms`], 409), else handed to
/// [`RoomService::submit`] with the caller as part of the command's identity. The one command
/// path of the HTTP and gRPC APIs; nothing is paid or written for a refused command.
///
/// [`RoomService::submit`]: crate::room::RoomService::submit
/// [`Bounds::check_open_rooms`]: super::bounds::Bounds::check_open_rooms
pub async fn run_command(
    state: &AppState,
    transport: Transport,
    caller: &Caller,
    room_id: RoomId,
    command_id: CommandId,
    request_id: String,
    command: Command,
) -> Result<CommandResponse, ApiError> {
    if state.lifecycle.is_draining() {
        return Err(ApiError::draining());
    }
    if command_id.is_reserved() {
        return Err(ApiError::invalid(
            "command_id",
            format!(
                "the prefix {:?} is reserved for commands the service issues itself",
                crate::domain::RESERVED_COMMAND_PREFIX
            ),
        ));
    }
    // The room checks the actor's role (SPEC §14.2); here only that it is the caller.
    policy::authorize(caller, Act::Command(&command)).map_err(refused)?;
    state.auth.check_rate(caller).map_err(refused)?;
    if let Some(seats) = &state.seat_actions {
        seats.check(&room_id, &command)?;
    }
    if let Command::CreateRoom { owner_id, .. } = &command {
        state.bounds.check_open_rooms(state.repo.as_ref(), caller, &room_id, owner_id).await?;
    }
    let request =
        CommandRequest::new(room_id, command_id, request_id, command).via(transport).by(caller.identity());
    Ok(state.rooms.submit(request).await?)
}

/// Who a moderation command acts as (SPEC §14.2): the authenticated principal — a user, or a
/// service token (`svc:<name>`, or the user its `actor_id` names: a gateway acting for one);
/// under `auth.mode: none` the body's `actor_id`, which is then required. A user naming
/// someone else is 403, as for `user_id`.
pub fn moderator(caller: &Caller, actor_id: Option<UserId>) -> Result<Actor, ApiError> {
    closer(caller, actor_id)?.ok_or_else(|| {
        ApiError::invalid("actor_id", "required without authentication (auth.mode: none): who acts")
    })
}

/// Who closes a room: as [`moderator`], but an anonymous caller may name nobody (a close
/// under `auth.mode: none`, as before roles).
pub fn closer(caller: &Caller, actor_id: Option<UserId>) -> Result<Option<Actor>, ApiError> {
    match (caller, actor_id) {
        (Caller::User(me), Some(other)) if *me != other => Err(refused(AuthError::Forbidden {
            field: "actor_id",
            why: "must be the caller's own user id (only a service token acts for others)",
        })),
        (Caller::User(me), _) => Ok(Some(Actor::User(me.clone()))),
        (Caller::Service(_) | Caller::Anonymous, Some(user)) => Ok(Some(Actor::User(user))),
        (Caller::Service(name), None) => Ok(Some(Actor::Service(name.clone()))),
        (Caller::Anonymous, None) => Ok(None),
    }
}

/// A refusal of the caller, counted.
fn refused(error: AuthError) -> ApiError {
    error.counted().into()
}

/// A presence heartbeat of either API: refused while draining, for another user than the
/// caller (403), and beyond the caller's limit (429).
pub async fn run_heartbeat(
    state: &AppState,
    caller: &Caller,
    room_id: &RoomId,
    user_id: &UserId,
) -> Result<(), ApiError> {
    if state.lifecycle.is_draining() {
        return Err(ApiError::draining());
    }
    policy::authorize(caller, Act::Heartbeat(user_id)).map_err(refused)?;
    state.auth.check_rate(caller).map_err(refused)?;
    Ok(state.rooms.heartbeat(room_id, user_id).await?)
}

/// Presence heartbeats of many members, of either API: 1–[`MAX_HEARTBEAT_IDS`] ids (a
/// repeated one counts once), a service's only (403 for a user), refused while draining like
/// a single heartbeat.
pub async fn run_heartbeats(
    state: &AppState,
    caller: &Caller,
    room_id: &RoomId,
    user_ids: &[UserId],
) -> Result<HeartbeatsAnswer, ApiError> {
    policy::authorize(caller, Act::Heartbeats).map_err(refused)?;
    check_heartbeat_ids(user_ids)?;
    if state.lifecycle.is_draining() {
        return Err(ApiError::draining());
    }
    let beats = state.rooms.heartbeats(room_id, user_ids).await?;
    Ok(HeartbeatsAnswer { alive: beats.alive, unknown: beats.unknown })
}

/// 1–[`MAX_HEARTBEAT_IDS`] ids, else 400 naming `user_ids`.
pub fn check_heartbeat_ids(user_ids: &[UserId]) -> Result<(), ApiError> {
    if user_ids.is_empty() || user_ids.len() > MAX_HEARTBEAT_IDS {
        return Err(ApiError::invalid("user_ids", format!("must hold 1–{MAX_HEARTBEAT_IDS} user ids")));
    }
    Ok(())
}

/// Default page size of the members listing.
pub const DEFAULT_MEMBERS_LIMIT: usize = 100;
/// Largest page of the members listing.
pub const MAX_MEMBERS_LIMIT: u32 = 1000;

/// A page of at most `limit` members after `after`, for either API.
pub async fn members_page(
    state: &AppState,
    room_id: &RoomId,
    after: Option<&UserId>,
    limit: usize,
) -> Result<MembersPage, ApiError> {
    // One more than asked tells whether another page follows.
    let mut members = state.rooms.members(room_id, after, limit.saturating_add(1)).await?;
    let next_after = (members.len() > limit).then(|| {
        members.truncate(limit);
        members.last().map(|m| m.user_id.clone())
    });
    Ok(MembersPage { members, next_after: next_after.flatten() })
}

/// A page of the room's active mutes and bans for `caller` (an admin of the room at least, or
/// a service), for either API.
pub async fn moderation_page(
    state: &AppState,
    caller: &Caller,
    room_id: &RoomId,
    kind: Option<RestrictionKind>,
    after: Option<&UserId>,
    limit: usize,
) -> Result<ModerationPage, ApiError> {
    let actor = closer(caller, None)?;
    let (page, more) = state.rooms.moderation(room_id, actor.as_ref(), kind, after, limit.max(1)).await?;
    let next_after = if more { page.last().map(|(_, user, _)| user.clone()) } else { None };
    let entries = page
        .into_iter()
        .map(|(kind, user_id, r)| ModerationEntry {
            user_id,
            kind,
            until_ms: r.until_ms,
            reason: r.reason,
            by: r.by,
        })
        .collect();
    Ok(ModerationPage { entries, next_after })
}

/// The room's seats and the pending requests and invitations `caller` may see (all of them for
/// the owner, admins and services, and without authentication; a member's own otherwise), for
/// either API.
pub async fn seats_view(state: &AppState, caller: &Caller, room_id: &RoomId) -> Result<SeatsView, ApiError> {
    let actor = closer(caller, None)?;
    let room = state.rooms.seats(room_id).await?;
    let now_ms = state.rooms.now_ms();
    let sees_all = actor.as_ref().is_none_or(|a| room.role_of(a, now_ms) >= crate::domain::Role::Admin);
    let pending = room
        .seat_pending
        .iter()
        .filter(|(user, _)| sees_all || matches!(&actor, Some(Actor::User(me)) if me == *user))
        .map(|(user_id, p)| PendingEntry {
            user_id: user_id.clone(),
            kind: p.kind,
            index: p.index,
            expires_at_ms: p.expires_at_ms,
            by: p.by.clone(),
        })
        .collect();
    Ok(SeatsView { seat_mode: room.seat_mode, seats: room.seats.iter().cloned().collect(), pending })
}

/// A page of a room's event history (`GET /v1/rooms/{room_id}/events`, gRPC `ListEvents`).
#[derive(Debug, Serialize)]
pub struct EventsPage {
    /// The room.
    pub room_id: RoomId,
    /// The room's version now.
    pub room_version: u64,
    /// False when the versions right after `after_version` are no longer kept: reload the
    /// room's state and follow on from its version.
    pub recovered: bool,
    /// The envelopes, exactly as IM received them, in version order (written out as stored:
    /// a page is never parsed again).
    pub events: Vec<Arc<serde_json::value::RawValue>>,
    /// The last version in `events` (`after_version` when empty): the next page's `after_version`.
    pub next_after: u64,
}

impl EventsPage {
    /// The page as JSON, written out directly: the envelopes are copied as stored, never
    /// parsed or re-encoded (what a reconnect herd's reads cost the node).
    pub fn to_json(&self) -> String {
        let bytes: usize = self.events.iter().map(|e| e.get().len() + 1).sum();
        let mut json = String::with_capacity(bytes + 128);
        json.push_str("{\"room_id\":");
        // Cannot fail: a string.
        json.push_str(&serde_json::to_string(&self.room_id).unwrap_or_default());
        json.push_str(&format!(
            ",\"room_version\":{},\"recovered\":{},\"events\":[",
            self.room_version, self.recovered
        ));
        for (i, event) in self.events.iter().enumerate() {
            if i > 0 {
                json.push(',');
            }
            json.push_str(event.get());
        }
        json.push_str(&format!("],\"next_after\":{}}}", self.next_after));
        json
    }
}

/// A page of at most `limit` of the room's IM events after version `after`, for either API,
/// read by `caller` from `peer` (each reader's share first: `rooms.history.reads_per_sec_per_client`):
/// served by any node from its history cache (see [`crate::room::RoomService::events`]).
pub async fn events_page(
    state: &AppState,
    (caller, peer): (&Caller, Option<std::net::IpAddr>),
    room_id: &RoomId,
    after: u64,
    limit: u32,
) -> Result<EventsPage, ApiError> {
    if let Some(reads) = &state.reads {
        reads.check(caller, peer)?;
    }
    let page = state.rooms.events(room_id, after, limit).await?;
    Ok(EventsPage {
        room_id: room_id.clone(),
        room_version: page.room_version,
        recovered: page.recovered,
        events: page.events,
        next_after: page.next_after,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::value::RawValue;

    use super::*;

    #[test]
    fn a_page_written_out_directly_is_the_page_serde_writes() {
        let event = |v: u64| -> Arc<RawValue> {
            Arc::from(RawValue::from_string(format!("{{\"room_version\":{v},\"s\":\"a\\\"b\"}}")).unwrap())
        };
        for events in [vec![], vec![event(2)], vec![event(2), event(3), event(4)]] {
            let page = EventsPage {
                room_id: RoomId::parse("r-1").unwrap(),
                room_version: 9,
                recovered: !events.is_empty(),
                next_after: 1 + events.len() as u64,
                events,
            };
            assert_eq!(page.to_json(), serde_json::to_string(&page).unwrap());
        }
    }
}

//! Room command and query routes (`/v1/rooms...`).

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::AppState;
use super::error::ApiError;
use super::extract::{Json, RequestId, RoomCommand, RoomPath, page_limit};
use crate::auth::policy::{self, Act};
use crate::auth::{AuthError, Caller};
use crate::domain::{Command, CommandId, GiftId, LeaveReason, MemberView, RoomId, RoomSnapshot, UserId};
use crate::room::{CommandRequest, CommandResponse, Transport};

/// `POST /v1/rooms`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateRoomBody {
    command_id: CommandId,
    room_id: RoomId,
    owner_id: UserId,
    title: String,
}

/// `POST /v1/rooms/{id}/join` and `/leave`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberBody {
    command_id: CommandId,
    user_id: UserId,
}

/// `POST /v1/rooms/{id}/gifts`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GiftBody {
    command_id: CommandId,
    sender_id: UserId,
    receiver_id: UserId,
    gift_id: GiftId,
    count: u32,
    unit_value: u32,
}

/// `POST /v1/rooms/{id}/close`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloseBody {
    command_id: CommandId,
}

/// `POST /v1/rooms/{id}/heartbeat`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatBody {
    user_id: UserId,
}

/// `POST /v1/rooms/{id}/heartbeats`: a gateway's heartbeats for the viewers it aggregates.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatsBody {
    user_ids: Vec<UserId>,
}

/// At most this many user ids in one `heartbeats` call.
pub const MAX_HEARTBEAT_IDS: usize = 1_000;

/// What `POST /v1/rooms/{id}/heartbeats` answers.
#[derive(Debug, Serialize, Deserialize)]
pub struct HeartbeatsAnswer {
    /// How many distinct ids are members (their presence refreshed).
    pub alive: usize,
    /// The ids that are not members, in request order (each once).
    pub unknown: Vec<UserId>,
}

/// What a command route answers.
type CommandAnswer = Result<axum::Json<CommandResponse>, ApiError>;

/// Runs the command `command` makes of the body of `request`.
async fn run<B>(
    state: &AppState,
    request: RoomCommand<B>,
    command: impl FnOnce(B) -> (CommandId, Command),
) -> CommandAnswer {
    let (command_id, command) = command(request.body);
    answer(state, &request.caller, request.room_id, command_id, request.request_id, command).await
}

/// The HTTP answer of a command.
async fn answer(
    state: &AppState,
    caller: &Caller,
    room_id: RoomId,
    command_id: CommandId,
    request_id: String,
    command: Command,
) -> CommandAnswer {
    let response =
        run_command(state, Transport::Http, caller, room_id, command_id, request_id, command).await?;
    Ok(axum::Json(response))
}

/// Runs a command that came in over `transport` from `caller`: refused while draining, when
/// its `command_id` carries the reserved prefix, when the caller may not do it (403: acting as
/// another user, closing a room it does not own) or is over its limit (429), else handed to
/// [`RoomService::submit`] with the caller as part of the command's identity. The one command
/// path of the HTTP and gRPC APIs; nothing is paid or written for a refused command.
///
/// [`RoomService::submit`]: crate::room::RoomService::submit
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
    policy::authorize(caller, Act::Command(&command)).map_err(refused)?;
    if let (Command::CloseRoom, Caller::User(_)) = (&command, caller) {
        // The owner never changes, so the room as it is now tells; a room that does not
        // exist answers so (and cannot come to exist with another owner meanwhile).
        let room = state.rooms.snapshot(&room_id).await?;
        policy::owner_may_close(caller, &room.owner_id).map_err(refused)?;
    }
    state.auth.check_rate(caller).map_err(refused)?;
    let request =
        CommandRequest::new(room_id, command_id, request_id, command).via(transport).by(caller.identity());
    Ok(state.rooms.submit(request).await?)
}

/// A refusal of the caller, counted.
fn refused(error: AuthError) -> ApiError {
    error.counted().into()
}

/// CreateRoom (the room is named in the body).
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Json(b): Json<CreateRoomBody>,
) -> CommandAnswer {
    let command = Command::CreateRoom { owner_id: b.owner_id, title: b.title };
    answer(&state, &caller, b.room_id, b.command_id, request_id, command).await
}

/// JoinRoom.
pub async fn join(State(state): State<AppState>, request: RoomCommand<MemberBody>) -> CommandAnswer {
    run(&state, request, |b| (b.command_id, Command::JoinRoom { user_id: b.user_id })).await
}

/// LeaveRoom (reason `user`).
pub async fn leave(State(state): State<AppState>, request: RoomCommand<MemberBody>) -> CommandAnswer {
    run(&state, request, |b| {
        (b.command_id, Command::LeaveRoom { user_id: b.user_id, reason: LeaveReason::User })
    })
    .await
}

/// SendGift.
pub async fn gift(State(state): State<AppState>, request: RoomCommand<GiftBody>) -> CommandAnswer {
    run(&state, request, |b| {
        let GiftBody { command_id, sender_id, receiver_id, gift_id, count, unit_value } = b;
        (command_id, Command::SendGift { sender_id, receiver_id, gift_id, count, unit_value })
    })
    .await
}

/// CloseRoom.
pub async fn close(State(state): State<AppState>, request: RoomCommand<CloseBody>) -> CommandAnswer {
    run(&state, request, |b| (b.command_id, Command::CloseRoom)).await
}

/// Presence heartbeat: 204, memory only.
pub async fn heartbeat(
    State(state): State<AppState>,
    caller: Caller,
    RoomPath(room_id): RoomPath,
    Json(b): Json<HeartbeatBody>,
) -> Result<Response, ApiError> {
    run_heartbeat(&state, &caller, &room_id, &b.user_id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
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

/// Presence heartbeats of many members: 200 `{"alive", "unknown"}`, memory only.
pub async fn heartbeats(
    State(state): State<AppState>,
    caller: Caller,
    RoomPath(room_id): RoomPath,
    Json(b): Json<HeartbeatsBody>,
) -> Result<axum::Json<HeartbeatsAnswer>, ApiError> {
    Ok(axum::Json(run_heartbeats(&state, &caller, &room_id, &b.user_ids).await?))
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

/// The room snapshot, unwrapped.
pub async fn get(
    State(state): State<AppState>,
    RoomPath(room_id): RoomPath,
) -> Result<axum::Json<RoomSnapshot>, ApiError> {
    Ok(axum::Json(state.rooms.snapshot(&room_id).await?))
}

/// Default page size of the members listing.
pub const DEFAULT_MEMBERS_LIMIT: usize = 100;
/// Largest page of the members listing.
pub const MAX_MEMBERS_LIMIT: u32 = 1000;

/// A page of members (`GET /v1/rooms/{room_id}/members`).
#[derive(Debug, Serialize, Deserialize)]
pub struct MembersPage {
    /// Members in user id order.
    pub members: Vec<MemberView>,
    /// Pass as `after` for the next page; null on the last page.
    pub next_after: Option<UserId>,
}

/// The room's members, paged in user id order: `?limit=` (1–1000, default 100) and `?after=`
/// (the `next_after` of the previous page).
pub async fn members(
    State(state): State<AppState>,
    RoomPath(room_id): RoomPath,
    Query(params): Query<HashMap<String, String>>,
) -> Result<axum::Json<MembersPage>, ApiError> {
    let (after, limit) = parse_members_query(&params)?;
    Ok(axum::Json(members_page(&state, &room_id, after.as_ref(), limit).await?))
}

/// A page of at most `limit` members after `after`, for either API.
pub async fn members_page(
    state: &AppState,
    room_id: &RoomId,
    after: Option<&UserId>,
    limit: usize,
) -> Result<MembersPage, ApiError> {
    // One more than asked tells whether another page follows.
    let mut members = state.rooms.members(room_id, after, limit + 1).await?;
    let next_after = (members.len() > limit).then(|| {
        members.truncate(limit);
        members.last().map(|m| m.user_id.clone())
    });
    Ok(MembersPage { members, next_after: next_after.flatten() })
}

fn parse_members_query(params: &HashMap<String, String>) -> Result<(Option<UserId>, usize), ApiError> {
    let mut limit = DEFAULT_MEMBERS_LIMIT;
    let mut after = None;
    for (key, value) in params {
        match key.as_str() {
            "limit" => limit = page_limit(value, MAX_MEMBERS_LIMIT)? as usize,
            "after" if value.is_empty() => {}
            "after" => {
                after = Some(UserId::parse(value.as_str()).map_err(|e| ApiError::invalid("after", e))?)
            }
            other => return Err(ApiError::invalid(other, "unknown query parameter (expected limit, after)")),
        }
    }
    Ok((after, limit))
}

#[cfg(test)]
mod proptests;

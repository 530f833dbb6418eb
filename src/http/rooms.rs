//! Room command and query routes (`/v1/rooms...`): each reads its request into the neutral
//! [`RoomRequest`] (a bad field answers 400 naming it), has it served here or at the room's
//! owner ([`crate::api::serve`]), and answers the [`Outcome`](crate::api::Outcome) as JSON. A
//! page of events is read here whoever owns the room ([`crate::api::rooms::events_page`]).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::extract::{Json, Peer, QueryParams, RoomCommand, RoomPath, page_limit};
use crate::api::rooms::{
    DEFAULT_MEMBERS_LIMIT, EventsPage, HeartbeatsAnswer, MAX_MEMBERS_LIMIT, MembersPage, closer, events_page,
};
use crate::api::{ApiError, AppState, Operation, RoomRequest, Sender, serve};
use crate::auth::Caller;
use crate::domain::{Command, CommandId, GiftId, LeaveReason, RoomId, RoomSnapshot, SeatConfig, UserId};
use crate::room::{CommandResponse, DEFAULT_EVENTS_LIMIT, MAX_EVENTS_LIMIT};

/// `POST /v1/rooms`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateRoomBody {
    command_id: CommandId,
    room_id: RoomId,
    owner_id: UserId,
    title: String,
    #[serde(default)]
    seats: SeatConfig,
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
    actor_id: Option<UserId>,
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

/// What a command route answers.
pub(super) type CommandAnswer = Result<axum::Json<CommandResponse>, ApiError>;

/// Runs the command `command` makes of the body of `request`.
async fn run<B>(
    state: &AppState,
    request: RoomCommand<B>,
    command: impl FnOnce(B) -> (CommandId, Command),
) -> CommandAnswer {
    let (command_id, command) = command(request.body);
    answer(state, request.sender, request.room_id, command_id, command).await
}

/// The HTTP answer of a command, run here or at the room's owner.
pub(super) async fn answer(
    state: &AppState,
    sender: Sender,
    room_id: RoomId,
    command_id: CommandId,
    command: Command,
) -> CommandAnswer {
    let operation = Operation::Command { command_id, command };
    let outcome = serve(state, RoomRequest::new(room_id, operation, sender)).await?;
    Ok(axum::Json(outcome.command()?))
}

/// CreateRoom (the room is named in the body).
pub async fn create(
    State(state): State<AppState>,
    sender: Sender,
    Json(b): Json<CreateRoomBody>,
) -> CommandAnswer {
    let command = Command::CreateRoom { owner_id: b.owner_id, title: b.title, seats: b.seats };
    answer(&state, sender, b.room_id, b.command_id, command).await
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

/// CloseRoom (the owner's; a service token's is an operator's close).
pub async fn close(State(state): State<AppState>, request: RoomCommand<CloseBody>) -> CommandAnswer {
    let RoomCommand { sender, room_id, body } = request;
    let by = closer(&sender.caller, body.actor_id)?;
    answer(&state, sender, room_id, body.command_id, Command::CloseRoom { by, idle: false }).await
}

/// Presence heartbeat: 204, memory only.
pub async fn heartbeat(
    State(state): State<AppState>,
    sender: Sender,
    RoomPath(room_id): RoomPath,
    Json(b): Json<HeartbeatBody>,
) -> Result<Response, ApiError> {
    let operation = Operation::Heartbeat { user_id: b.user_id };
    serve(&state, RoomRequest::new(room_id, operation, sender)).await?.heartbeat()?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Presence heartbeats of many members: 200 `{"alive", "unknown"}`, memory only.
pub async fn heartbeats(
    State(state): State<AppState>,
    sender: Sender,
    RoomPath(room_id): RoomPath,
    Json(b): Json<HeartbeatsBody>,
) -> Result<axum::Json<HeartbeatsAnswer>, ApiError> {
    let operation = Operation::Heartbeats { user_ids: b.user_ids };
    Ok(axum::Json(serve(&state, RoomRequest::new(room_id, operation, sender)).await?.heartbeats()?))
}

/// The room snapshot, unwrapped.
pub async fn get(
    State(state): State<AppState>,
    sender: Sender,
    RoomPath(room_id): RoomPath,
) -> Result<axum::Json<RoomSnapshot>, ApiError> {
    let request = RoomRequest::new(room_id, Operation::Snapshot, sender);
    Ok(axum::Json(serve(&state, request).await?.snapshot()?))
}

/// The room's members, paged in user id order: `?limit=` (1–1000, default 100) and `?after=`
/// (the `next_after` of the previous page). Metered here, where the reader's address is known,
/// before it is served or forwarded (`rooms.members.reads_per_sec_per_client`).
pub async fn members(
    State(state): State<AppState>,
    sender: Sender,
    Peer(peer): Peer,
    RoomPath(room_id): RoomPath,
    QueryParams(params): QueryParams,
) -> Result<axum::Json<MembersPage>, ApiError> {
    let (after, limit) = parse_members_query(&params)?;
    state.bounds.meter_members(&sender.caller, peer, limit)?;
    let request = RoomRequest::new(room_id, Operation::Members { after, limit }, sender);
    Ok(axum::Json(serve(&state, request).await?.members()?))
}

fn parse_members_query(params: &[(String, String)]) -> Result<(Option<UserId>, usize), ApiError> {
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

/// The room's IM events after a version, from its event history (any node serves it from the
/// database, never under a room's commit lock: not forwarded): `?after_version=` (default 0:
/// from the first) and `?limit=` (1–300, default 100).
pub async fn events(
    State(state): State<AppState>,
    caller: Caller,
    Peer(peer): Peer,
    RoomPath(room_id): RoomPath,
    QueryParams(params): QueryParams,
) -> Result<Response, ApiError> {
    let (after, limit) = parse_events_query(&params)?;
    let page: EventsPage = events_page(&state, (&caller, peer), &room_id, after, limit).await?;
    Ok(([(axum::http::header::CONTENT_TYPE, "application/json")], page.to_json()).into_response())
}

fn parse_events_query(params: &[(String, String)]) -> Result<(u64, u32), ApiError> {
    let mut limit = DEFAULT_EVENTS_LIMIT;
    let mut after = 0;
    for (key, value) in params {
        match key.as_str() {
            "limit" => limit = page_limit(value, MAX_EVENTS_LIMIT)?,
            "after_version" => {
                after = value.parse::<u64>().ok().filter(|v| i64::try_from(*v).is_ok()).ok_or_else(|| {
                    ApiError::invalid("after_version", "must be a room version: an integer from 0")
                })?
            }
            other => {
                return Err(ApiError::invalid(
                    other,
                    "unknown query parameter (expected after_version, limit)",
                ));
            }
        }
    }
    Ok((after, limit))
}

#[cfg(test)]
mod proptests;

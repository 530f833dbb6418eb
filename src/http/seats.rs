//! `POST /v1/rooms/{id}/seats/{action}` (SPEC §14.3): the body's fields as the action's room
//! command ([`crate::api::seats`], shared with gRPC), run like every other command.

use axum::extract::State;
use axum::extract::{FromRequest, Request};
use serde::Deserialize;

use super::extract::{Json, RoomPath};
use super::rooms::{CommandAnswer, answer};
use crate::api::rooms::SeatsView;
use crate::api::seats::{SeatFields, seat_command};
use crate::api::{ApiError, AppState, Operation, RoomRequest, Sender, serve};
use crate::domain::{CommandId, MovePolicy, UserId};

/// The body of every seat action: which fields an action takes is checked with the action.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeatBody {
    command_id: CommandId,
    actor_id: Option<UserId>,
    user_id: Option<UserId>,
    index: Option<u32>,
    accept: Option<bool>,
    locked: Option<bool>,
    muted: Option<bool>,
    to: Option<u32>,
    policy: Option<MovePolicy>,
}

/// A seat action's request: the sender, then the path's room and action, then the body.
pub struct SeatRequest {
    sender: Sender,
    room_id: crate::domain::RoomId,
    action: String,
    body: SeatBody,
}

impl<S: Send + Sync> FromRequest<S> for SeatRequest {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        use axum::extract::FromRequestParts;
        let (mut parts, body) = req.into_parts();
        let sender = Sender::from_request_parts(&mut parts, state).await?;
        let RoomPath(room_id) = RoomPath::from_request_parts(&mut parts, state).await?;
        let action = super::extract::path_param(&mut parts, state, "action").await?;
        let Json(body) = Json::from_request(Request::from_parts(parts, body), state).await?;
        Ok(Self { sender, room_id, action, body })
    }
}

/// `GET /v1/rooms/{id}/seats`: the seats and the pending requests the caller may see.
pub async fn list(
    State(state): State<AppState>,
    sender: Sender,
    RoomPath(room_id): RoomPath,
) -> Result<axum::Json<SeatsView>, ApiError> {
    Ok(axum::Json(serve(&state, RoomRequest::new(room_id, Operation::Seats, sender)).await?.seats()?))
}

/// One seat action.
pub async fn seat(State(state): State<AppState>, request: SeatRequest) -> CommandAnswer {
    let SeatRequest { sender, room_id, action, body: b } = request;
    let fields = SeatFields {
        actor_id: b.actor_id,
        user_id: b.user_id,
        index: b.index,
        accept: b.accept,
        locked: b.locked,
        muted: b.muted,
        to: b.to,
        policy: b.policy,
    };
    let command = seat_command(&sender.caller, &action, fields)?;
    answer(&state, sender, room_id, b.command_id, command).await
}

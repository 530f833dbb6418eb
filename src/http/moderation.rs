//! The routes of roles, moderation, room info and attributes (SPEC §14.2): each reads its body
//! into a room command acting as the caller ([`moderator`]), run like every other command
//! ([`super::rooms`]); and the page of a room's active mutes and bans.

use std::collections::BTreeMap;

use axum::extract::State;
use serde::Deserialize;

use super::extract::{QueryParams, RoomCommand, RoomPath, page_limit};
use super::rooms::{CommandAnswer, answer};
use crate::api::rooms::{DEFAULT_MEMBERS_LIMIT, MAX_MEMBERS_LIMIT, ModerationPage, moderator};
use crate::api::{ApiError, AppState, Operation, RoomRequest, Sender, serve};
use crate::domain::{
    AttributeWrite, Command, CommandId, DEFAULT_BAN_S, InfoChange, RestrictionKind, SeatMode, UserId,
};

/// `POST /v1/rooms/{id}/admins`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminBody {
    command_id: CommandId,
    actor_id: Option<UserId>,
    user_id: UserId,
    admin: bool,
}

/// `POST /v1/rooms/{id}/mutes`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MuteBody {
    command_id: CommandId,
    actor_id: Option<UserId>,
    user_id: UserId,
    duration_s: u32,
}

/// `POST /v1/rooms/{id}/kicks`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KickBody {
    command_id: CommandId,
    actor_id: Option<UserId>,
    user_id: UserId,
    #[serde(default = "default_ban_s")]
    ban_s: u32,
    #[serde(default)]
    reason: String,
}

fn default_ban_s() -> u32 {
    DEFAULT_BAN_S
}

/// `POST /v1/rooms/{id}/unban`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnbanBody {
    command_id: CommandId,
    actor_id: Option<UserId>,
    user_id: UserId,
}

/// `POST /v1/rooms/{id}/mute_all`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MuteAllBody {
    command_id: CommandId,
    actor_id: Option<UserId>,
    muted: bool,
}

/// `POST /v1/rooms/{id}/info`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InfoBody {
    command_id: CommandId,
    actor_id: Option<UserId>,
    title: Option<String>,
    announcement: Option<String>,
    cover_url: Option<String>,
    seat_mode: Option<SeatMode>,
}

/// `POST /v1/rooms/{id}/attributes`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttributesBody {
    command_id: CommandId,
    actor_id: Option<UserId>,
    #[serde(default)]
    set: BTreeMap<String, String>,
    #[serde(default)]
    delete: Vec<String>,
    #[serde(default)]
    expect: BTreeMap<String, u64>,
}

/// Runs `command` as the body's actor (the caller, [`moderator`]).
macro_rules! moderate {
    ($state:expr, $request:expr, |$b:ident, $by:ident| $command:expr) => {{
        let RoomCommand { sender, room_id, body: $b } = $request;
        let $by = moderator(&sender.caller, $b.actor_id)?;
        answer(&$state, sender, room_id, $b.command_id, $command).await
    }};
}

/// SetAdmin.
pub async fn admins(State(state): State<AppState>, request: RoomCommand<AdminBody>) -> CommandAnswer {
    moderate!(state, request, |b, by| Command::SetAdmin { by, user_id: b.user_id, admin: b.admin })
}

/// MuteUser.
pub async fn mutes(State(state): State<AppState>, request: RoomCommand<MuteBody>) -> CommandAnswer {
    moderate!(state, request, |b, by| Command::MuteUser { by, user_id: b.user_id, duration_s: b.duration_s })
}

/// KickUser.
pub async fn kicks(State(state): State<AppState>, request: RoomCommand<KickBody>) -> CommandAnswer {
    moderate!(state, request, |b, by| Command::KickUser {
        by,
        user_id: b.user_id,
        ban_s: b.ban_s,
        reason: b.reason
    })
}

/// UnbanUser.
pub async fn unban(State(state): State<AppState>, request: RoomCommand<UnbanBody>) -> CommandAnswer {
    moderate!(state, request, |b, by| Command::UnbanUser { by, user_id: b.user_id })
}

/// MuteAll.
pub async fn mute_all(State(state): State<AppState>, request: RoomCommand<MuteAllBody>) -> CommandAnswer {
    moderate!(state, request, |b, by| Command::MuteAll { by, muted: b.muted })
}

/// UpdateRoomInfo.
pub async fn info(State(state): State<AppState>, request: RoomCommand<InfoBody>) -> CommandAnswer {
    moderate!(state, request, |b, by| {
        let info = InfoChange {
            title: b.title,
            announcement: b.announcement,
            cover_url: b.cover_url,
            seat_mode: b.seat_mode,
        };
        Command::UpdateRoomInfo { by, info }
    })
}

/// SetAttributes.
pub async fn attributes(
    State(state): State<AppState>,
    request: RoomCommand<AttributesBody>,
) -> CommandAnswer {
    moderate!(state, request, |b, by| {
        let write = AttributeWrite { set: b.set, delete: b.delete, expect: b.expect };
        Command::SetAttributes { by, write }
    })
}

/// The room's active mutes and bans, paged in user id order: `?kind=mute|ban` (default both),
/// `?limit=` (1–1000, default 100), `?after=` (the page's `next_after`, of one kind). Owner,
/// admins and service tokens only.
pub async fn list(
    State(state): State<AppState>,
    sender: Sender,
    RoomPath(room_id): RoomPath,
    QueryParams(params): QueryParams,
) -> Result<axum::Json<ModerationPage>, ApiError> {
    let mut operation = Operation::Moderation { kind: None, after: None, limit: DEFAULT_MEMBERS_LIMIT };
    if let Operation::Moderation { kind, after, limit } = &mut operation {
        for (key, value) in &params {
            match key.as_str() {
                "limit" => *limit = page_limit(value, MAX_MEMBERS_LIMIT)? as usize,
                "kind" => *kind = Some(restriction_kind(value)?),
                "after" if value.is_empty() => {}
                "after" => {
                    *after = Some(UserId::parse(value.as_str()).map_err(|e| ApiError::invalid("after", e))?)
                }
                other => {
                    return Err(ApiError::invalid(
                        other,
                        "unknown query parameter (expected kind, after, limit)",
                    ));
                }
            }
        }
    }
    Ok(axum::Json(serve(&state, RoomRequest::new(room_id, operation, sender)).await?.moderation()?))
}

fn restriction_kind(value: &str) -> Result<RestrictionKind, ApiError> {
    match value {
        "mute" => Ok(RestrictionKind::Mute),
        "ban" => Ok(RestrictionKind::Ban),
        _ => Err(ApiError::invalid("kind", "must be mute or ban")),
    }
}

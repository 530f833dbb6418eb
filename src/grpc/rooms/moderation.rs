//! The roles and moderation RPCs' messages read into room commands acting as the caller
//! ([`rooms::moderator`], as the HTTP routes do), and the moderation page's request.

use tonic::Status;

use super::{Parsed, optional_user, parsed, user_id};
use crate::api::Operation;
use crate::api::rooms::{self, DEFAULT_MEMBERS_LIMIT, MAX_MEMBERS_LIMIT};
use crate::api::seats::{SeatFields, seat_command};
use crate::auth::Caller;
use crate::domain::{
    Actor, AttributeWrite, Command, DEFAULT_BAN_S, InfoChange, MovePolicy, RestrictionKind, SeatMode,
};
use crate::grpc::pb;
use crate::grpc::status::{from_api, invalid};

/// The actor of a moderation message.
fn by(caller: &Caller, actor_id: String) -> Result<Actor, Status> {
    rooms::moderator(caller, optional_user("actor_id", actor_id)?).map_err(from_api)
}

pub(super) fn set_admin(m: pb::SetAdminRequest, caller: &Caller) -> Parsed {
    let command = Command::SetAdmin {
        by: by(caller, m.actor_id)?,
        user_id: user_id("user_id", m.user_id)?,
        admin: m.admin,
    };
    parsed(command, m.room_id, m.command_id)
}

pub(super) fn mute_user(m: pb::MuteUserRequest, caller: &Caller) -> Parsed {
    let command = Command::MuteUser {
        by: by(caller, m.actor_id)?,
        user_id: user_id("user_id", m.user_id)?,
        duration_s: m.duration_s,
    };
    parsed(command, m.room_id, m.command_id)
}

pub(super) fn kick_user(m: pb::KickUserRequest, caller: &Caller) -> Parsed {
    let command = Command::KickUser {
        by: by(caller, m.actor_id)?,
        user_id: user_id("user_id", m.user_id)?,
        ban_s: m.ban_s.unwrap_or(DEFAULT_BAN_S),
        reason: m.reason,
    };
    parsed(command, m.room_id, m.command_id)
}

pub(super) fn unban_user(m: pb::UnbanUserRequest, caller: &Caller) -> Parsed {
    let command = Command::UnbanUser { by: by(caller, m.actor_id)?, user_id: user_id("user_id", m.user_id)? };
    parsed(command, m.room_id, m.command_id)
}

pub(super) fn mute_all(m: pb::MuteAllRequest, caller: &Caller) -> Parsed {
    parsed(Command::MuteAll { by: by(caller, m.actor_id)?, muted: m.muted }, m.room_id, m.command_id)
}

pub(super) fn update_room_info(m: pb::UpdateRoomInfoRequest, caller: &Caller) -> Parsed {
    let seat_mode = m.seat_mode.as_deref().map(|mode| seat_mode("seat_mode", mode)).transpose()?;
    let info = InfoChange { title: m.title, announcement: m.announcement, cover_url: m.cover_url, seat_mode };
    parsed(Command::UpdateRoomInfo { by: by(caller, m.actor_id)?, info }, m.room_id, m.command_id)
}

pub(super) fn set_attributes(m: pb::SetAttributesRequest, caller: &Caller) -> Parsed {
    let write = AttributeWrite {
        set: m.set.into_iter().collect(),
        delete: m.delete,
        expect: m.expect.into_iter().collect(),
    };
    parsed(Command::SetAttributes { by: by(caller, m.actor_id)?, write }, m.room_id, m.command_id)
}

/// The moderation page a `ListModerationRequest` asks.
pub(super) fn list(kind: String, after: String, limit: u32) -> Result<Operation, Status> {
    let kind = match kind.as_str() {
        "" => None,
        "mute" => Some(RestrictionKind::Mute),
        "ban" => Some(RestrictionKind::Ban),
        _ => return Err(invalid("kind", "must be mute, ban or empty")),
    };
    let limit = match limit {
        0 => DEFAULT_MEMBERS_LIMIT,
        n if n <= MAX_MEMBERS_LIMIT => n as usize,
        n => return Err(invalid("limit", format!("{n} is not between 1 and {MAX_MEMBERS_LIMIT}"))),
    };
    Ok(Operation::Moderation { kind, after: optional_user("after", after)?, limit })
}

/// A seat action, its fields checked as HTTP's ([`crate::api::seats`]).
pub(super) fn seat(m: pb::SeatRequest, caller: &Caller) -> Parsed {
    let policy = match m.policy.as_deref() {
        None => None,
        Some(name) => {
            Some(MovePolicy::parse(name).ok_or_else(|| invalid("policy", "must be cancel, force or swap"))?)
        }
    };
    let fields = SeatFields {
        actor_id: optional_user("actor_id", m.actor_id)?,
        user_id: m.user_id.map(|u| user_id("user_id", u)).transpose()?,
        index: m.index,
        accept: m.accept,
        locked: m.locked,
        muted: m.muted,
        to: m.to,
        policy,
    };
    let command = seat_command(caller, &m.action, fields).map_err(from_api)?;
    parsed(command, m.room_id, m.command_id)
}

/// `free` or `apply`.
pub(super) fn seat_mode(field: &str, mode: &str) -> Result<SeatMode, Status> {
    SeatMode::parse(mode).ok_or_else(|| invalid(field, "must be free or apply"))
}

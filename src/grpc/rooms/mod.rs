//! `room.v1.RoomService`: each RPC parses its message into the neutral [`RoomRequest`] (a bad
//! field answers `INVALID_ARGUMENT` naming it), has it served here or at the room's owner
//! ([`crate::api::serve`], as the HTTP routes do), and writes the [`Outcome`] back as its
//! message (`reply`). No logic of its own. The call's credential and deadline travel with it
//! to the owner, which verifies the one and keeps to the other.

mod moderation;
mod reply;

use std::net::SocketAddr;

use axum::extract::ConnectInfo;
use tonic::{Request, Response, Status};

use super::deadline::CallDeadline;
use super::edge::Authenticated;
use super::pb;
use super::status::{from_api, invalid};
use crate::api::dispatch::verify_caller;
use crate::api::rooms::{self, DEFAULT_MEMBERS_LIMIT, MAX_MEMBERS_LIMIT};
use crate::api::{AppState, Credential, Operation, Outcome, RoomRequest, Sender, serve};
use crate::auth::Caller;
use crate::domain::{Command, CommandId, GiftId, LeaveReason, RoomId, SeatConfig, SeatMode, UserId};
use crate::room::{DEFAULT_EVENTS_LIMIT, MAX_EVENTS_LIMIT, Transport};

/// The metadata entry of the bearer token.
const AUTHORIZATION: &str = "authorization";

/// What an RPC answers.
type Rpc<T> = Result<Response<T>, Status>;

/// The room service over gRPC.
#[derive(Clone)]
pub struct GrpcRooms {
    state: AppState,
}

impl GrpcRooms {
    /// Serves `state`'s room service.
    pub fn new(state: AppState) -> Self {
        Self { state }
    }

    /// Serves `operation` on `room_id` for `sender`, here or at the room's owner.
    async fn serve(&self, room_id: RoomId, operation: Operation, sender: Sender) -> Result<Outcome, Status> {
        serve(&self.state, RoomRequest::new(room_id, operation, sender)).await.map_err(from_api)
    }

    /// Runs the command `parse` reads from `request`.
    async fn command<M>(
        &self,
        request: Request<M>,
        parse: fn(M, &Caller) -> Parsed,
    ) -> Rpc<pb::CommandOutcome> {
        let sender = self.sender(&request, false).await?;
        let (room_id, command_id, command) = parse(request.into_inner(), &sender.caller)?;
        let outcome = self.serve(room_id, Operation::Command { command_id, command }, sender).await?;
        Ok(Response::new(reply::outcome(outcome.command().map_err(from_api)?)))
    }

    /// Who sent `request` (a `read` needs no token while reads are public): the caller the
    /// edge verified from its `authorization` entry before the message was read
    /// ([`Authenticated`]), or verified here when the service runs without its edge (a refusal
    /// is counted and answers `UNAUTHENTICATED`); the entry itself as its raw bytes (the owner
    /// verifies exactly what the caller sent); its request id and deadline.
    async fn sender<T>(&self, request: &Request<T>, read: bool) -> Result<Sender, Status> {
        let entry = request.metadata().get(AUTHORIZATION).map(|v| v.as_bytes());
        let caller = match request.extensions().get::<Authenticated>() {
            Some(Authenticated(caller)) => caller.clone(),
            None => verify_caller(&self.state.auth, entry, read).await.map_err(from_api)?,
        };
        let credential = entry.and_then(Credential::from_bytes);
        let sender = Sender::new(caller, credential, request_id(request), Transport::Grpc);
        Ok(Sender { deadline: request.extensions().get::<CallDeadline>().map(|d| d.0), ..sender })
    }
}

/// A command message read: its room, command id and command, or `INVALID_ARGUMENT` naming the
/// first bad field (the command's fields first, then the room, then the command id).
pub(super) type Parsed = Result<(RoomId, CommandId, Command), Status>;

/// The room and command id of a command message, after its `command`.
pub(super) fn parsed(command: Command, room: String, command_id: String) -> Parsed {
    let room = room_id(room)?;
    let command_id = CommandId::parse(command_id).map_err(|e| invalid("command_id", e))?;
    Ok((room, command_id, command))
}

fn create(m: pb::CreateRoomRequest, _: &Caller) -> Parsed {
    parsed(
        Command::CreateRoom {
            owner_id: user_id("owner_id", m.owner_id)?,
            title: m.title,
            seats: match m.seats {
                Some(s) if s.mode.is_empty() => SeatConfig { count: s.count, mode: SeatMode::Free },
                Some(s) => SeatConfig { count: s.count, mode: moderation::seat_mode("seats.mode", &s.mode)? },
                None => SeatConfig::default(),
            },
        },
        m.room_id,
        m.command_id,
    )
}

fn join(m: pb::MemberRequest, _: &Caller) -> Parsed {
    parsed(Command::JoinRoom { user_id: user_id("user_id", m.user_id)? }, m.room_id, m.command_id)
}

fn leave(m: pb::MemberRequest, _: &Caller) -> Parsed {
    let command = Command::LeaveRoom { user_id: user_id("user_id", m.user_id)?, reason: LeaveReason::User };
    parsed(command, m.room_id, m.command_id)
}

fn gift(m: pb::SendGiftRequest, _: &Caller) -> Parsed {
    let command = Command::SendGift {
        sender_id: user_id("sender_id", m.sender_id)?,
        receiver_id: user_id("receiver_id", m.receiver_id)?,
        gift_id: GiftId::parse(m.gift_id).map_err(|e| invalid("gift_id", e))?,
        count: m.count,
        unit_value: m.unit_value,
    };
    parsed(command, m.room_id, m.command_id)
}

fn close(m: pb::CloseRoomRequest, caller: &Caller) -> Parsed {
    let by = rooms::closer(caller, optional_user("actor_id", m.actor_id)?).map_err(from_api)?;
    parsed(Command::CloseRoom { by, idle: false }, m.room_id, m.command_id)
}

/// The user an optional id field names (empty: none).
pub(super) fn optional_user(field: &str, value: String) -> Result<Option<UserId>, Status> {
    if value.is_empty() { Ok(None) } else { user_id(field, value).map(Some) }
}

/// The request id the request-id layer set (or the client sent).
fn request_id<T>(request: &Request<T>) -> String {
    crate::api::edge::request_id(request.metadata().get("x-request-id").and_then(|v| v.to_str().ok()))
}

fn room_id(value: String) -> Result<RoomId, Status> {
    RoomId::parse(value).map_err(|e| invalid("room_id", e))
}

pub(super) fn user_id(field: &str, value: String) -> Result<UserId, Status> {
    UserId::parse(value).map_err(|e| invalid(field, e))
}

#[tonic::async_trait]
impl pb::room_service_server::RoomService for GrpcRooms {
    async fn create_room(&self, request: Request<pb::CreateRoomRequest>) -> Rpc<pb::CommandOutcome> {
        self.command(request, create).await
    }

    async fn join_room(&self, request: Request<pb::MemberRequest>) -> Rpc<pb::CommandOutcome> {
        self.command(request, join).await
    }

    async fn leave_room(&self, request: Request<pb::MemberRequest>) -> Rpc<pb::CommandOutcome> {
        self.command(request, leave).await
    }

    async fn send_gift(&self, request: Request<pb::SendGiftRequest>) -> Rpc<pb::CommandOutcome> {
        self.command(request, gift).await
    }

    async fn close_room(&self, request: Request<pb::CloseRoomRequest>) -> Rpc<pb::CommandOutcome> {
        self.command(request, close).await
    }

    async fn heartbeat(&self, request: Request<pb::HeartbeatRequest>) -> Rpc<pb::HeartbeatResponse> {
        let sender = self.sender(&request, false).await?;
        let m = request.into_inner();
        let (room, user) = (room_id(m.room_id)?, user_id("user_id", m.user_id)?);
        let outcome = self.serve(room, Operation::Heartbeat { user_id: user }, sender).await?;
        outcome.heartbeat().map_err(from_api)?;
        Ok(Response::new(pb::HeartbeatResponse {}))
    }

    async fn heartbeats(&self, request: Request<pb::HeartbeatsRequest>) -> Rpc<pb::HeartbeatsResponse> {
        let sender = self.sender(&request, false).await?;
        let m = request.into_inner();
        let room = room_id(m.room_id)?;
        let users = m.user_ids.into_iter().map(|u| user_id("user_ids", u)).collect::<Result<Vec<_>, _>>()?;
        rooms::check_heartbeat_ids(&users).map_err(from_api)?;
        let outcome = self.serve(room, Operation::Heartbeats { user_ids: users }, sender).await?;
        Ok(Response::new(reply::heartbeats(outcome.heartbeats().map_err(from_api)?)))
    }

    async fn get_room(&self, request: Request<pb::GetRoomRequest>) -> Rpc<pb::Room> {
        let sender = self.sender(&request, true).await?;
        let room = room_id(request.into_inner().room_id)?;
        let outcome = self.serve(room, Operation::Snapshot, sender).await?;
        Ok(Response::new(reply::room(outcome.snapshot().map_err(from_api)?)))
    }

    async fn list_events(&self, request: Request<pb::ListEventsRequest>) -> Rpc<pb::ListEventsResponse> {
        // A read, served here from the database whoever owns the room: never forwarded.
        let caller = self.sender(&request, true).await?.caller;
        let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|info| info.0.ip());
        let m = request.into_inner();
        let room = room_id(m.room_id)?;
        let limit = match m.limit {
            0 => DEFAULT_EVENTS_LIMIT,
            n if n <= MAX_EVENTS_LIMIT => n,
            n => return Err(invalid("limit", format!("{n} is not between 1 and {MAX_EVENTS_LIMIT}"))),
        };
        if i64::try_from(m.after_version).is_err() {
            return Err(invalid("after_version", "must be a room version: an integer from 0"));
        }
        let page = rooms::events_page(&self.state, (&caller, peer), &room, m.after_version, limit)
            .await
            .map_err(from_api)?;
        Ok(Response::new(reply::events(page)))
    }

    async fn set_admin(&self, request: Request<pb::SetAdminRequest>) -> Rpc<pb::CommandOutcome> {
        self.command(request, moderation::set_admin).await
    }

    async fn mute_user(&self, request: Request<pb::MuteUserRequest>) -> Rpc<pb::CommandOutcome> {
        self.command(request, moderation::mute_user).await
    }

    async fn kick_user(&self, request: Request<pb::KickUserRequest>) -> Rpc<pb::CommandOutcome> {
        self.command(request, moderation::kick_user).await
    }

    async fn unban_user(&self, request: Request<pb::UnbanUserRequest>) -> Rpc<pb::CommandOutcome> {
        self.command(request, moderation::unban_user).await
    }

    async fn mute_all(&self, request: Request<pb::MuteAllRequest>) -> Rpc<pb::CommandOutcome> {
        self.command(request, moderation::mute_all).await
    }

    async fn update_room_info(&self, request: Request<pb::UpdateRoomInfoRequest>) -> Rpc<pb::CommandOutcome> {
        self.command(request, moderation::update_room_info).await
    }

    async fn set_attributes(&self, request: Request<pb::SetAttributesRequest>) -> Rpc<pb::CommandOutcome> {
        self.command(request, moderation::set_attributes).await
    }

    async fn seat(&self, request: Request<pb::SeatRequest>) -> Rpc<pb::CommandOutcome> {
        self.command(request, moderation::seat).await
    }

    async fn list_seats(&self, request: Request<pb::ListSeatsRequest>) -> Rpc<pb::ListSeatsResponse> {
        let sender = self.sender(&request, false).await?;
        let room = room_id(request.into_inner().room_id)?;
        let outcome = self.serve(room, Operation::Seats, sender).await?;
        Ok(Response::new(reply::seats(outcome.seats().map_err(from_api)?)))
    }

    async fn list_moderation(
        &self,
        request: Request<pb::ListModerationRequest>,
    ) -> Rpc<pb::ListModerationResponse> {
        let sender = self.sender(&request, false).await?;
        let m = request.into_inner();
        let room = room_id(m.room_id)?;
        let operation = moderation::list(m.kind, m.after, m.limit)?;
        let outcome = self.serve(room, operation, sender).await?;
        Ok(Response::new(reply::moderation(outcome.moderation().map_err(from_api)?)))
    }

    async fn list_members(&self, request: Request<pb::ListMembersRequest>) -> Rpc<pb::ListMembersResponse> {
        let sender = self.sender(&request, true).await?;
        let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|info| info.0.ip());
        let m = request.into_inner();
        let room = room_id(m.room_id)?;
        let limit = match m.limit {
            0 => DEFAULT_MEMBERS_LIMIT,
            n if n <= MAX_MEMBERS_LIMIT => n as usize,
            n => return Err(invalid("limit", format!("{n} is not between 1 and {MAX_MEMBERS_LIMIT}"))),
        };
        let after = match m.after.as_str() {
            "" => None,
            _ => Some(user_id("after", m.after)?),
        };
        // Metered here, where the reader's address is known, before it is served or forwarded.
        self.state.bounds.meter_members(&sender.caller, peer, limit).map_err(from_api)?;
        let outcome = self.serve(room, Operation::Members { after, limit }, sender).await?;
        Ok(Response::new(reply::members(outcome.members().map_err(from_api)?)))
    }
}

//! `room.v1.RoomService`: each RPC parses its message into the domain's types (a bad field
//! answers `INVALID_ARGUMENT` naming it), calls the operation of [`crate::api::rooms`] the
//! matching HTTP route calls, and maps the answer back. No logic of its own. In a cluster, a
//! call for a room another node owns is forwarded to the owner's twin HTTP route
//! (`grpc::forward`), as HTTP requests are.

use std::net::SocketAddr;

use axum::extract::ConnectInfo;
use tonic::{Request, Response, Status};

use super::edge::Authenticated;
use super::forward::Call;
use super::pb;
use super::status::{from_api, invalid};
use crate::api::AppState;
use crate::api::forward::Forwarder;
use crate::api::rooms::{self, DEFAULT_MEMBERS_LIMIT, MAX_MEMBERS_LIMIT};
use crate::auth::Caller;
use crate::domain::{
    Command, CommandId, GiftId, LeaveReason, MemberView, RankEntry, RoomId, RoomSnapshot, RoomStatus, UserId,
};
use crate::room::{
    CommandResponse, DEFAULT_EVENTS_LIMIT, Delivery, EventReceipt, MAX_EVENTS_LIMIT, Transport,
};

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

    /// Runs the command `parse` reads from `request`, here or on the room's owner (which
    /// verifies the caller's credential again).
    async fn command<M>(&self, request: Request<M>, parse: fn(M) -> Parsed) -> Rpc<pb::CommandOutcome> {
        let id = request_id(&request);
        let (caller, credential) = self.caller(&request, false).await?;
        let (room_id, command_id, command) = parse(request.into_inner())?;
        if let Some(forwarder) = self.elsewhere(&room_id) {
            let call = Call::command(&room_id, &command_id, &command);
            let response: CommandResponse =
                call.send(forwarder, &room_id, &id, credential.as_deref()).await?;
            return Ok(Response::new(outcome(response)));
        }
        rooms::run_command(&self.state, Transport::Grpc, &caller, room_id, command_id, id, command)
            .await
            .map(|r| Response::new(outcome(r)))
            .map_err(from_api)
    }
}

/// A command message read: its room, command id and command, or `INVALID_ARGUMENT` naming the
/// first bad field (the command's fields first, then the room, then the command id).
type Parsed = Result<(RoomId, CommandId, Command), Status>;

/// The room and command id of a command message, after its `command`.
fn parsed(command: Command, room: String, command_id: String) -> Parsed {
    let room = room_id(room)?;
    let command_id = CommandId::parse(command_id).map_err(|e| invalid("command_id", e))?;
    Ok((room, command_id, command))
}

fn create(m: pb::CreateRoomRequest) -> Parsed {
    parsed(
        Command::CreateRoom { owner_id: user_id("owner_id", m.owner_id)?, title: m.title },
        m.room_id,
        m.command_id,
    )
}

fn join(m: pb::MemberRequest) -> Parsed {
    parsed(Command::JoinRoom { user_id: user_id("user_id", m.user_id)? }, m.room_id, m.command_id)
}

fn leave(m: pb::MemberRequest) -> Parsed {
    let command = Command::LeaveRoom { user_id: user_id("user_id", m.user_id)?, reason: LeaveReason::User };
    parsed(command, m.room_id, m.command_id)
}

fn gift(m: pb::SendGiftRequest) -> Parsed {
    let command = Command::SendGift {
        sender_id: user_id("sender_id", m.sender_id)?,
        receiver_id: user_id("receiver_id", m.receiver_id)?,
        gift_id: GiftId::parse(m.gift_id).map_err(|e| invalid("gift_id", e))?,
        count: m.count,
        unit_value: m.unit_value,
    };
    parsed(command, m.room_id, m.command_id)
}

fn close(m: pb::CloseRoomRequest) -> Parsed {
    parsed(Command::CloseRoom, m.room_id, m.command_id)
}

/// The request id the request-id layer set (or the client sent).
fn request_id<T>(request: &Request<T>) -> String {
    crate::api::edge::request_id(request.metadata().get("x-request-id").and_then(|v| v.to_str().ok()))
}

fn room_id(value: String) -> Result<RoomId, Status> {
    RoomId::parse(value).map_err(|e| invalid("room_id", e))
}

impl GrpcRooms {
    /// The caller of `request` (its `authorization` metadata entry; a read needs none while
    /// reads are public), and the entry itself for a hop to the room's owner: the one the edge
    /// verified before the message was read ([`Authenticated`]), or verified here when the
    /// service runs without its edge. A refusal is counted and answers `UNAUTHENTICATED`.
    async fn caller<T>(&self, request: &Request<T>, read: bool) -> Result<(Caller, Option<Vec<u8>>), Status> {
        let entry = request.metadata().get(AUTHORIZATION);
        // Its raw bytes, as they came: the owner verifies exactly what the caller sent.
        let credential = entry.map(|v| v.as_bytes().to_vec());
        if read && self.state.auth.public_reads() {
            return Ok((Caller::Anonymous, credential));
        }
        if let Some(Authenticated(caller)) = request.extensions().get::<Authenticated>() {
            return Ok((caller.clone(), credential));
        }
        match self.state.auth.authenticate(entry.map(|v| v.as_bytes())).await {
            Ok(caller) => Ok((caller, credential)),
            Err(refused) => Err(from_api(refused.counted().into())),
        }
    }

    /// The forwarder when another node of the cluster owns `room` (`None`: served here).
    fn elsewhere(&self, room: &RoomId) -> Option<&Forwarder> {
        self.state.forwarder.as_ref().filter(|forwarder| !forwarder.cluster().owns(room.as_str()))
    }
}

fn user_id(field: &str, value: String) -> Result<UserId, Status> {
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
        let id = request_id(&request);
        let (caller, credential) = self.caller(&request, false).await?;
        let m = request.into_inner();
        let (room, user) = (room_id(m.room_id)?, user_id("user_id", m.user_id)?);
        if let Some(forwarder) = self.elsewhere(&room) {
            Call::heartbeat(&room, &user).send::<()>(forwarder, &room, &id, credential.as_deref()).await?;
        } else {
            rooms::run_heartbeat(&self.state, &caller, &room, &user).await.map_err(from_api)?;
        }
        Ok(Response::new(pb::HeartbeatResponse {}))
    }

    async fn heartbeats(&self, request: Request<pb::HeartbeatsRequest>) -> Rpc<pb::HeartbeatsResponse> {
        let id = request_id(&request);
        let (caller, credential) = self.caller(&request, false).await?;
        let m = request.into_inner();
        let room = room_id(m.room_id)?;
        let users = m.user_ids.into_iter().map(|u| user_id("user_ids", u)).collect::<Result<Vec<_>, _>>()?;
        rooms::check_heartbeat_ids(&users).map_err(from_api)?;
        let answer: rooms::HeartbeatsAnswer = match self.elsewhere(&room) {
            Some(forwarder) => {
                Call::heartbeats(&room, &users).send(forwarder, &room, &id, credential.as_deref()).await?
            }
            None => rooms::run_heartbeats(&self.state, &caller, &room, &users).await.map_err(from_api)?,
        };
        Ok(Response::new(pb::HeartbeatsResponse {
            alive: answer.alive as u64,
            unknown: answer.unknown.into_iter().map(|u| u.as_str().to_owned()).collect(),
        }))
    }

    async fn get_room(&self, request: Request<pb::GetRoomRequest>) -> Rpc<pb::Room> {
        let id = request_id(&request);
        let (_, credential) = self.caller(&request, true).await?;
        let room = room_id(request.into_inner().room_id)?;
        let snapshot = match self.elsewhere(&room) {
            Some(forwarder) => {
                Call::snapshot(&room).send(forwarder, &room, &id, credential.as_deref()).await?
            }
            None => self.state.rooms.snapshot(&room).await.map_err(|e| from_api(e.into()))?,
        };
        Ok(Response::new(room_message(snapshot)))
    }

    async fn list_events(&self, request: Request<pb::ListEventsRequest>) -> Rpc<pb::ListEventsResponse> {
        // A read, served here from the database whoever owns the room: never forwarded.
        let (caller, _) = self.caller(&request, true).await?;
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
        Ok(Response::new(pb::ListEventsResponse {
            room_id: room.as_str().to_owned(),
            room_version: page.room_version,
            recovered: page.recovered,
            events: page.events.iter().map(|e| e.get().to_owned()).collect(),
            next_after: page.next_after,
        }))
    }

    async fn list_members(&self, request: Request<pb::ListMembersRequest>) -> Rpc<pb::ListMembersResponse> {
        let id = request_id(&request);
        let (_, credential) = self.caller(&request, true).await?;
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
        let page: rooms::MembersPage = match self.elsewhere(&room) {
            Some(forwarder) => {
                let call = Call::members(&room, after.as_ref(), limit);
                call.send(forwarder, &room, &id, credential.as_deref()).await?
            }
            None => rooms::members_page(&self.state, &room, after.as_ref(), limit).await.map_err(from_api)?,
        };
        Ok(Response::new(pb::ListMembersResponse {
            members: page.members.into_iter().map(member).collect(),
            next_after: page.next_after.map(|u| u.as_str().to_owned()).unwrap_or_default(),
        }))
    }
}

fn outcome(r: CommandResponse) -> pb::CommandOutcome {
    pb::CommandOutcome {
        applied: r.applied,
        room_version: r.room_version,
        replayed: r.replayed,
        room: r.room.map(room_message),
        events: r.events.into_iter().map(receipt).collect(),
    }
}

fn receipt(e: EventReceipt) -> pb::EventReceipt {
    let delivery = match e.delivery {
        Delivery::Delivered => pb::Delivery::Delivered,
        Delivery::Skipped => pb::Delivery::Skipped,
        Delivery::Pending => pb::Delivery::Pending,
    };
    pb::EventReceipt { event_id: e.event_id, event_type: e.event_type, delivery: delivery.into() }
}

fn room_message(s: RoomSnapshot) -> pb::Room {
    let status = match s.status {
        RoomStatus::Open => pb::RoomStatus::Open,
        RoomStatus::Closed => pb::RoomStatus::Closed,
    };
    pb::Room {
        room_id: s.room_id.as_str().to_owned(),
        owner_id: s.owner_id.as_str().to_owned(),
        title: s.title,
        status: status.into(),
        version: s.version,
        heat: s.heat,
        member_count: s.member_count,
        gift_rank: s.gift_rank.into_iter().map(rank).collect(),
    }
}

fn rank(r: RankEntry) -> pb::RankEntry {
    pb::RankEntry { user_id: r.user_id.as_str().to_owned(), total_value: r.total_value }
}

fn member(m: MemberView) -> pb::Member {
    pb::Member { user_id: m.user_id.as_str().to_owned(), joined_at_ms: m.joined_at_ms }
}

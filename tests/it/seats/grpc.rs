//! The `Seat` method over gRPC (SPEC §14.3), under `auth.mode: none` with `actor_id` (or, for a
//! self action, `user_id` alone): it answers like `POST /v1/rooms/{id}/seats/{action}`, a seat
//! code is FAILED_PRECONDITION with `error-code`, a member's moderation PERMISSION_DENIED, a bad
//! field INVALID_ARGUMENT naming it; `ListSeats` shows the pending requests; the same call sent
//! 20 times at once applies once; and no refusal writes a thing.

use room_service::grpc::pb;
use room_service::grpc::pb::room_service_client::RoomServiceClient;
use tonic::Code;
use tonic::transport::Channel;

use crate::moderation::cid;
use crate::support::app::{TestApp, settings};
use crate::support::{TestDb, backends};

type Client = RoomServiceClient<Channel>;

fn metadata<'a>(status: &'a tonic::Status, key: &str) -> &'a str {
    status.metadata().get(key).map_or("", |v| v.to_str().unwrap())
}

/// A client of `app`'s gRPC API with room `g1` of owner alice, `count` free seats, and
/// `members` joined.
async fn seated_room(app: &TestApp, count: u32, members: &[&str]) -> Client {
    let channel = Channel::from_shared(format!("http://{}", app.app.grpc_addr)).unwrap().connect_lazy();
    let mut rooms = RoomServiceClient::new(channel);
    let create = pb::CreateRoomRequest {
        command_id: cid("c"),
        room_id: "g1".into(),
        owner_id: "alice".into(),
        title: "t".into(),
        seats: Some(pb::SeatConfig { count, mode: "free".into() }),
    };
    rooms.create_room(create).await.expect("create");
    for user in members {
        let join = pb::MemberRequest { command_id: cid("j"), room_id: "g1".into(), user_id: (*user).into() };
        rooms.join_room(join).await.expect("join");
    }
    rooms
}

/// A `Seat` call on `g1`: `action` by `actor`, no field set.
fn call(actor: &str, action: &str) -> pb::SeatRequest {
    pb::SeatRequest {
        command_id: cid("s"),
        room_id: "g1".into(),
        actor_id: actor.into(),
        action: action.into(),
        ..Default::default()
    }
}

fn at(actor: &str, action: &str, index: u32) -> pb::SeatRequest {
    pb::SeatRequest { index: Some(index), ..call(actor, action) }
}

/// Who holds each seat of `g1`, by `GetRoom`.
async fn holders(rooms: &mut Client) -> Vec<Option<String>> {
    let room = rooms.get_room(pb::GetRoomRequest { room_id: "g1".into() }).await.expect("get").into_inner();
    room.seats.into_iter().map(|s| s.user_id).collect()
}

/// Command-log rows, outbox rows and `g1`'s version.
async fn written(db: &TestDb, rooms: &mut Client) -> (i64, i64, u64) {
    let room = rooms.get_room(pb::GetRoomRequest { room_id: "g1".into() }).await.expect("get").into_inner();
    (db.count("room_command_log").await, db.count("room_outbox").await, room.version)
}

/// Asserts `request` is refused with `code` and `error_code` (or, for INVALID_ARGUMENT, a
/// message starting with the field `error_code` names).
async fn refused(rooms: &mut Client, request: pb::SeatRequest, code: Code, error_code: &str) {
    let shown = format!("{request:?}");
    let status = rooms.seat(request).await.expect_err(&shown);
    assert_eq!(status.code(), code, "{shown}: {status:?}");
    if code == Code::InvalidArgument {
        assert!(status.message().starts_with(error_code), "{shown}: {}", status.message());
    } else {
        assert_eq!(metadata(&status, "error-code"), error_code, "{shown}: {status:?}");
    }
}

#[tokio::test]
async fn the_seat_method_answers_like_its_route_and_a_refusal_writes_nothing() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        let mut rooms = seated_room(&app, 3, &["bob", "carol", "dan", "erin"]).await;

        let took = rooms.seat(at("bob", "take", 0)).await.expect("take").into_inner();
        assert!(took.applied, "{db}: {took:?}");
        assert_eq!(
            took.events.iter().map(|e| e.event_type.as_str()).collect::<Vec<_>>(),
            ["RoomSeatsChanged"]
        );
        let seats = &took.room.as_ref().expect("the room").seats;
        assert_eq!((seats.len(), seats[0].user_id.as_deref()), (3, Some("bob")), "{db}: {seats:?}");
        refused(&mut rooms, at("carol", "take", 0), Code::FailedPrecondition, "seat_occupied").await;
        // A self action names its actor by user_id alone.
        let own = pb::SeatRequest { user_id: Some("carol".into()), ..call("", "take") };
        rooms.seat(own).await.expect("carol takes the lowest free seat");
        assert_eq!(holders(&mut rooms).await, [Some("bob".into()), Some("carol".into()), None], "{db}");

        // Refusals: none writes a thing.
        let before = written(&db, &mut rooms).await;
        refused(&mut rooms, at("dan", "kick", 0), Code::PermissionDenied, "forbidden").await;
        refused(&mut rooms, at("dan", "mute", 0), Code::InvalidArgument, "muted").await;
        let mute = pb::SeatRequest { muted: Some(true), ..at("dan", "mute", 0) };
        refused(&mut rooms, mute, Code::PermissionDenied, "forbidden").await;
        refused(&mut rooms, at("zed", "take", 2), Code::FailedPrecondition, "not_member").await;
        refused(&mut rooms, at("bob", "take", 2), Code::FailedPrecondition, "already_seated").await;
        refused(&mut rooms, at("dan", "take", 3), Code::InvalidArgument, "index").await;
        refused(&mut rooms, call("dan", "sit"), Code::InvalidArgument, "action").await;
        refused(&mut rooms, call("dan", "request"), Code::FailedPrecondition, "wrong_seat_mode").await;
        let extra = pb::SeatRequest { muted: Some(true), ..at("alice", "kick", 0) };
        refused(&mut rooms, extra, Code::InvalidArgument, "muted").await;
        let sideways = pb::SeatRequest {
            user_id: Some("bob".into()),
            to: Some(2),
            policy: Some("sideways".into()),
            ..call("alice", "move")
        };
        refused(&mut rooms, sideways, Code::InvalidArgument, "policy").await;
        refused(&mut rooms, call("", "kick"), Code::InvalidArgument, "actor_id").await;
        let elsewhere = pb::SeatRequest { room_id: "nowhere".into(), ..at("dan", "take", 0) };
        assert_eq!(rooms.seat(elsewhere).await.unwrap_err().code(), Code::NotFound, "{db}");
        assert_eq!(written(&db, &mut rooms).await, before, "{db}: the refusals wrote nothing");

        // Moderation: lock frees carol's seat, mute, a move onto the locked seat, a kick.
        rooms.seat(pb::SeatRequest { locked: Some(true), ..at("alice", "lock", 1) }).await.expect("lock");
        rooms.seat(pb::SeatRequest { muted: Some(true), ..at("alice", "mute", 0) }).await.expect("mute");
        let onto_locked =
            pb::SeatRequest { user_id: Some("bob".into()), to: Some(1), ..call("alice", "move") };
        refused(&mut rooms, onto_locked, Code::FailedPrecondition, "seat_locked").await;
        let moved = pb::SeatRequest {
            user_id: Some("bob".into()),
            to: Some(2),
            policy: Some("force".into()),
            ..call("alice", "move")
        };
        rooms.seat(moved).await.expect("move");
        let room =
            rooms.get_room(pb::GetRoomRequest { room_id: "g1".into() }).await.expect("get").into_inner();
        let seats: Vec<(Option<&str>, bool, bool)> =
            room.seats.iter().map(|s| (s.user_id.as_deref(), s.locked, s.muted)).collect();
        assert_eq!(seats, [(None, false, true), (None, true, false), (Some("bob"), false, false)], "{db}");
        assert_eq!(room.seat_mode, "free", "{db}");

        // Apply mode: a member's take is PERMISSION_DENIED; it requests, the owner accepts.
        let info = pb::UpdateRoomInfoRequest {
            command_id: cid("i"),
            room_id: "g1".into(),
            actor_id: "alice".into(),
            seat_mode: Some("apply".into()),
            ..Default::default()
        };
        rooms.update_room_info(info).await.expect("to apply mode");
        refused(&mut rooms, call("dan", "take"), Code::PermissionDenied, "forbidden").await;
        let requested = rooms.seat(call("dan", "request")).await.expect("request").into_inner();
        assert_eq!(requested.events[0].event_type, "RoomSeatRequested", "{db}");
        refused(&mut rooms, call("dan", "request"), Code::FailedPrecondition, "request_pending").await;
        let listed =
            rooms.list_seats(pb::ListSeatsRequest { room_id: "g1".into() }).await.expect("list").into_inner();
        assert_eq!((listed.seat_mode.as_str(), listed.seats.len()), ("apply", 3), "{db}: {listed:?}");
        let pending: Vec<(&str, &str, &str)> =
            listed.pending.iter().map(|p| (p.user_id.as_str(), p.kind.as_str(), p.by.as_str())).collect();
        assert_eq!(pending, [("dan", "request", "dan")], "{db}");
        assert!(listed.pending[0].expires_at_ms > 0 && listed.pending[0].index.is_none(), "{db}: {listed:?}");
        let accept = pb::SeatRequest {
            user_id: Some("dan".into()),
            accept: Some(true),
            ..call("alice", "answer_request")
        };
        rooms.seat(accept).await.expect("accept");
        assert_eq!(holders(&mut rooms).await, [Some("dan".into()), None, Some("bob".into())], "{db}");
        app.stop().await;
    }
}

/// As a hostile client would: the same take sent 20 times at once applies once (the copies
/// replay it), and a member's kick is PERMISSION_DENIED writing nothing.
#[tokio::test]
async fn the_same_seat_call_twenty_times_at_once_applies_once() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        let mut rooms = seated_room(&app, 2, &["bob", "carol"]).await;
        let same = at("bob", "take", 1);
        let answers = futures::future::join_all((0..20).map(|_| {
            let (mut rooms, same) = (rooms.clone(), same.clone());
            async move { rooms.seat(same).await.map(tonic::Response::into_inner) }
        }))
        .await;
        let applied = answers.iter().filter(|a| a.as_ref().is_ok_and(|o| !o.replayed)).count();
        assert_eq!(applied, 1, "{db}: one take applied, the copies replayed: {answers:?}");
        assert!(answers.iter().all(|a| a.as_ref().is_ok_and(|o| o.room_version == 4)), "{db}: {answers:?}");
        assert_eq!(holders(&mut rooms).await, [None, Some("bob".into())], "{db}");
        app.settle().await;
        let sql = "SELECT COUNT(*) FROM room_outbox WHERE room_id = 'g1' AND event_type = 'RoomSeatsChanged'";
        assert_eq!(db.scalar(sql).await, Some(1), "{db}");

        let before = written(&db, &mut rooms).await;
        refused(&mut rooms, at("carol", "kick", 1), Code::PermissionDenied, "forbidden").await;
        let lock = pb::SeatRequest { locked: Some(true), ..at("carol", "lock", 1) };
        refused(&mut rooms, lock, Code::PermissionDenied, "forbidden").await;
        assert_eq!(written(&db, &mut rooms).await, before, "{db}: nothing written");
        app.stop().await;
    }
}

//! Mic seats (SPEC §14.3), black box: the service started in-process over real databases (a
//! cluster of processes for forwarding), driven over HTTP and gRPC as racing and hostile clients
//! would. Every refusal is checked to have written nothing, and what the events tell is read
//! back from the events API and from the fake IM, as a client would.

mod actions;
mod auth;
mod churn;
mod cluster;
mod expiry;
mod expiry_load;
mod grpc;
mod hostile;
mod im_order;
mod members;
mod quarantine;
mod race;
mod rate;

use serde_json::{Value, json};

use crate::moderation::{cid, error};
use crate::support::TestDb;
use crate::support::app::TestApp;

/// Creates `room` owned by `owner` with `count` seats in `mode` (auth none); panics unless it
/// applies.
pub async fn create(app: &TestApp, room: &str, owner: &str, count: u32, mode: &str) {
    let body = json!({"command_id": cid("create"), "room_id": room, "owner_id": owner, "title": "t",
        "seats": {"count": count, "mode": mode}});
    let (status, answer) = app.post("/v1/rooms", body).await;
    assert_eq!(status, 200, "create {room} with {count} {mode} seats: {answer}");
}

/// `POST /v1/rooms/{room}/seats/{action}` acting as `actor` (the body's `actor_id`; none when
/// empty) with a fresh command id and the fields of `body`.
pub async fn seat(app: &TestApp, room: &str, action: &str, actor: &str, body: Value) -> (u16, Value) {
    let mut body = body;
    body["command_id"] = cid(action).into();
    if !actor.is_empty() {
        body["actor_id"] = actor.into();
    }
    app.post(&format!("/v1/rooms/{room}/seats/{action}"), body).await
}

/// As [`seat`], panicking unless it answers 200; the answer.
pub async fn seated(app: &TestApp, room: &str, action: &str, actor: &str, body: Value) -> Value {
    let (status, answer) = seat(app, room, action, actor, body.clone()).await;
    assert_eq!(status, 200, "{actor} {action} {body}: {answer}");
    answer
}

/// As [`seat`], asserting it answers `status` with error `code`; the answer.
pub async fn refused(
    app: &TestApp,
    room: &str,
    action: &str,
    actor: &str,
    body: Value,
    expect: (u16, &str),
) -> Value {
    let (status, answer) = seat(app, room, action, actor, body.clone()).await;
    assert_eq!((status, error(&answer).0), expect, "{actor} {action} {body}: {answer}");
    answer
}

/// Who holds each seat of a room view (`GET /v1/rooms/{id}`, a command answer's `room`, or an
/// event's `seats` list).
pub fn holders(seats: &Value) -> Vec<Option<String>> {
    let seats = seats.as_array().unwrap_or_else(|| panic!("a seat list: {seats}"));
    seats.iter().map(|s| s["user_id"].as_str().map(str::to_owned)).collect()
}

/// `count` free seats, unlocked and unmuted: a new room's list.
pub fn free_seats(count: u32) -> Value {
    json!(
        (0..count)
            .map(|index| json!({"index": index, "user_id": null, "locked": false, "muted": false}))
            .collect::<Vec<_>>()
    )
}

/// The outbox rows of `room` of `event_type`.
pub async fn outbox_count(db: &TestDb, room: &str, event_type: &str) -> i64 {
    let sql =
        format!("SELECT COUNT(*) FROM room_outbox WHERE room_id = '{room}' AND event_type = '{event_type}'");
    db.scalar(sql).await.unwrap_or(0)
}

/// The seat list after `events` (envelopes in version order), starting from `initial`: each
/// `RoomSeatsChanged`, and each departure (`RoomUserLeft`, `RoomUserKicked`) carrying `seats`,
/// replaces it whole.
pub fn replay(initial: Value, events: &[Value]) -> Value {
    events.iter().fold(initial, |seats, event| {
        let payload = &event["payload"];
        match event["event_type"].as_str() {
            Some("RoomSeatsChanged" | "RoomUserLeft" | "RoomUserKicked")
                if payload.get("seats").is_some() =>
            {
                payload["seats"].clone()
            }
            _ => seats,
        }
    })
}

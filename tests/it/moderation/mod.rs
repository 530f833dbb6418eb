//! Roles, moderation, room info and attributes (SPEC §14.2), black box: the service started
//! in-process over real databases, driven over HTTP and gRPC. Every refusal is checked to have
//! written nothing (no command-log row, no outbox row, the room's version unchanged), and what
//! the events tell is read back from the events API, as a client would.

mod attributes;
mod auth;
mod bans;
mod bounds;
mod grpc;
mod hostile;
mod lifts;
mod roles;
mod summary;

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use crate::support::TestDb;
use crate::support::app::TestApp;

/// A command id never used before in this test binary.
pub fn cid(tag: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{tag}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Creates `room` owned by `owner` (auth none); panics unless it applies.
pub async fn create(app: &TestApp, room: &str, owner: &str) {
    let body = json!({"command_id": cid("create"), "room_id": room, "owner_id": owner, "title": "t"});
    let (status, answer) = app.post("/v1/rooms", body).await;
    assert_eq!(status, 200, "create {room}: {answer}");
}

/// `user` joins `room` (auth none): the status and the answer.
pub async fn join(app: &TestApp, room: &str, user: &str) -> (u16, Value) {
    app.post(&format!("/v1/rooms/{room}/join"), json!({"command_id": cid("join"), "user_id": user})).await
}

/// Joins every one of `users`; panics unless each is taken.
pub async fn join_all(app: &TestApp, room: &str, users: &[&str]) {
    for user in users {
        let (status, answer) = join(app, room, user).await;
        assert_eq!(status, 200, "join {user}: {answer}");
    }
}

/// `POST /v1/rooms/{room}/{route}` acting as `actor` (the body's `actor_id`, auth none) with a
/// fresh command id and the fields of `body`.
pub async fn act(app: &TestApp, room: &str, route: &str, actor: &str, body: Value) -> (u16, Value) {
    let mut body = body;
    body["command_id"] = cid(route).into();
    body["actor_id"] = actor.into();
    app.post(&format!("/v1/rooms/{room}/{route}"), body).await
}

/// As [`act`], panicking unless it answers 200; the answer.
pub async fn ok(app: &TestApp, room: &str, route: &str, actor: &str, body: Value) -> Value {
    let (status, answer) = act(app, room, route, actor, body.clone()).await;
    assert_eq!(status, 200, "{actor} {route} {body}: {answer}");
    answer
}

/// The error code and message of an error answer.
pub fn error(answer: &Value) -> (&str, &str) {
    let error = &answer["error"];
    (error["code"].as_str().unwrap_or_default(), error["message"].as_str().unwrap_or_default())
}

/// What a refusal must leave as it was: command-log rows, outbox rows, the room's version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    pub commands: i64,
    pub outbox: i64,
    pub version: u64,
}

/// What is written now, and `room`'s version.
pub async fn written(db: &TestDb, app: &TestApp, room: &str) -> Written {
    let (status, view) = app.get(&format!("/v1/rooms/{room}")).await;
    assert_eq!(status, 200, "GET {room}: {view}");
    Written {
        commands: db.count("room_command_log").await,
        outbox: db.count("room_outbox").await,
        version: view["version"].as_u64().expect("version"),
    }
}

/// `GET /v1/rooms/{room}`.
pub async fn room(app: &TestApp, room: &str) -> Value {
    let (status, view) = app.get(&format!("/v1/rooms/{room}")).await;
    assert_eq!(status, 200, "GET {room}: {view}");
    view
}

/// The user ids on `room`'s members pages.
pub async fn members(app: &TestApp, room: &str) -> Vec<String> {
    let (status, page) = app.get(&format!("/v1/rooms/{room}/members?limit=1000")).await;
    assert_eq!(status, 200, "members of {room}: {page}");
    let members = page["members"].as_array().expect("members");
    members.iter().map(|m| m["user_id"].as_str().expect("user_id").to_owned()).collect()
}

/// Every event of `room` from the events API up to the room's version now, each with the
/// length of its JSON. The API may answer a version a few ms old (each node caches it
/// briefly), so this reads again until the last event is at the version `GET` shows.
pub async fn events(app: &TestApp, room_id: &str) -> Vec<(Value, usize)> {
    let version = room(app, room_id).await["version"].as_u64().expect("version");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let all = read_events(app, room_id).await;
        let last = all.last().and_then(|(e, _)| e["room_version"].as_u64()).unwrap_or(1);
        if last >= version || tokio::time::Instant::now() > deadline {
            return all;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Every page of `room`'s events, as a client catches up: until a page is empty.
async fn read_events(app: &TestApp, room: &str) -> Vec<(Value, usize)> {
    let mut all = Vec::new();
    let mut after = 0;
    loop {
        let url = format!("{}/v1/rooms/{room}/events?after_version={after}&limit=300", app.base);
        let response = app.http.get(url).send().await.expect("events");
        let status = response.status().as_u16();
        let text = response.text().await.expect("events body");
        assert_eq!(status, 200, "events of {room} after {after}: {text}");
        // The envelopes as the API wrote them out: each one's length is its stored length.
        let page: serde_json::Map<String, Value> = serde_json::from_str(&text).expect("events page");
        assert_eq!(page["recovered"], true, "events of {room} after {after}: {text}");
        let raw: RawPage = serde_json::from_str(&text).expect("events page");
        for event in raw.events {
            all.push((serde_json::from_str(event.get()).expect("envelope"), event.get().len()));
        }
        let next = page["next_after"].as_u64().expect("next_after");
        if next == after {
            return all;
        }
        after = next;
    }
}

#[derive(serde::Deserialize)]
struct RawPage<'a> {
    #[serde(borrow)]
    events: Vec<&'a serde_json::value::RawValue>,
}

/// The events of `room` of type `event_type`, in version order.
pub async fn events_of(app: &TestApp, room: &str, event_type: &str) -> Vec<Value> {
    events(app, room).await.into_iter().map(|(e, _)| e).filter(|e| e["event_type"] == event_type).collect()
}

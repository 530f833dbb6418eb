//! The HTTP API end to end over real loopback HTTP, on SQLite files and on MariaDB.

mod connections;
mod decoding;
mod docs;
mod edge;
mod fences;
mod robustness;

use serde_json::{Value, json};

use crate::support::app::{TestApp, settings};
use crate::support::{TestDb, backends};

pub(crate) async fn create_room(app: &TestApp, room: &str) -> Value {
    let (status, body) =
        app.post("/v1/rooms", json!({"command_id": format!("create-{room}"), "room_id": room, "owner_id": "alice", "title": "Live"})).await;
    assert_eq!(status, 200, "{body}");
    body
}

pub(crate) async fn join(app: &TestApp, room: &str, user: &str, command_id: &str) -> (u16, Value) {
    app.post(&format!("/v1/rooms/{room}/join"), json!({"command_id": command_id, "user_id": user})).await
}

#[tokio::test]
async fn walkthrough_create_join_gift_snapshot_on_both_backends() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        let created = create_room(&app, "r1").await;
        assert_eq!(created["applied"], true, "{db}");
        assert_eq!(created["events"][0]["event_type"], "RoomCreated", "{db}");
        assert_eq!(created["events"][0]["delivery"], "skipped", "{db}");

        let (status, joined) = join(&app, "r1", "bob", "j1").await;
        assert_eq!(status, 200, "{db}: {joined}");
        assert_eq!(joined["room"]["version"], 2, "{db}");
        assert_eq!(joined["events"][0]["delivery"], "delivered", "{db}");

        let gift = json!({"command_id": "g1", "sender_id": "bob", "receiver_id": "alice", "gift_id": "rocket", "count": 3, "unit_value": 100});
        let (status, gifted) = app.post("/v1/rooms/r1/gifts", gift).await;
        assert_eq!(status, 200, "{db}: {gifted}");
        let types: Vec<&str> =
            gifted["events"].as_array().unwrap().iter().map(|e| e["event_type"].as_str().unwrap()).collect();
        assert_eq!(types, ["RoomGiftSent", "RoomHeatChanged", "RoomRankChanged"], "{db}");

        let (status, room) = app.get("/v1/rooms/r1").await;
        assert_eq!(status, 200, "{db}");
        assert_eq!(room["heat"], 300, "{db}");
        assert_eq!(room["version"], 3, "{db}");
        assert_eq!(room["member_count"], 1, "{db}");
        assert!(room.get("members").is_none(), "{db}: the member list is paged, never in the room");
        let (status, members) = app.get("/v1/rooms/r1/members").await;
        assert_eq!(status, 200, "{db}");
        assert_eq!(members["members"][0]["user_id"], "bob", "{db}");
        assert_eq!(room["gift_rank"], json!([{"user_id": "bob", "total_value": 300}]), "{db}");

        // Every event is in the outbox and marked delivered (published or filtered).
        app.settle().await;
        let rows = db.outbox().await;
        assert_eq!(rows.len(), 5, "{db}");
        assert!(rows.iter().all(|r| r.status == "delivered"), "{db}: {rows:?}");
        app.stop().await;
    }
}

#[tokio::test]
async fn replayed_command_id_returns_the_original_outcome_without_reapplying() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create_room(&app, "r1").await;
        let (_, first) = join(&app, "r1", "bob", "j1").await;
        let (status, again) = join(&app, "r1", "bob", "j1").await;
        assert_eq!(status, 200, "{db}");
        assert_eq!(again["replayed"], true, "{db}");
        assert_eq!(again["applied"], true, "{db}");
        assert_eq!(again["room_version"], first["room_version"], "{db}");
        assert_eq!(again["events"][0]["event_id"], first["events"][0]["event_id"], "{db}");
        assert_eq!(db.count("room_outbox").await, 2, "{db}: nothing re-applied");

        // A repeated CreateRoom is answered from the log, not refused as room_exists.
        let (status, body) = app
            .post(
                "/v1/rooms",
                json!({"command_id": "create-r1", "room_id": "r1", "owner_id": "alice", "title": "Live"}),
            )
            .await;
        assert_eq!((status, body["replayed"].clone()), (200, json!(true)), "{db}: {body}");
        app.settle().await;
        let (_, body) = app
            .post(
                "/v1/rooms",
                json!({"command_id": "create-r1", "room_id": "r1", "owner_id": "alice", "title": "Live"}),
            )
            .await;
        assert_eq!(body["events"][0]["delivery"], "skipped", "{db}: a filtered event replays as skipped");

        // The same caller's id with another body (bob leaving under his join's id): 409,
        // nothing written.
        let (status, body) =
            app.post("/v1/rooms/r1/leave", json!({"command_id": "j1", "user_id": "bob"})).await;
        assert_eq!(status, 409, "{db}: {body}");
        assert_eq!(body["error"]["code"], "command_conflict", "{db}");
        let (_, room) = app.get("/v1/rooms/r1").await;
        assert_eq!(room["member_count"], 1, "{db}");
        // Another caller's use of the id (mode none: the user the command names) is another
        // command.
        let (status, body) = join(&app, "r1", "carol", "j1").await;
        assert_eq!((status, body["replayed"].clone()), (200, json!(false)), "{db}: {body}");
        let (_, room) = app.get("/v1/rooms/r1").await;
        assert_eq!(room["member_count"], 2, "{db}");
        app.stop().await;
    }
}

#[tokio::test]
async fn duplicate_join_is_not_applied() {
    let db = TestDb::sqlite().await;
    let app = TestApp::start(settings(db.url(), None, &[])).await;
    create_room(&app, "r1").await;
    join(&app, "r1", "bob", "j1").await;
    let (status, body) = join(&app, "r1", "bob", "j2").await;
    assert_eq!(status, 200);
    assert_eq!(body["applied"], false);
    assert_eq!(body["events"], json!([]));
    assert_eq!(body["room"]["version"], 2);
    app.stop().await;
}

#[tokio::test]
async fn closed_room_refuses_commands() {
    let db = TestDb::sqlite().await;
    let app = TestApp::start(settings(db.url(), None, &[])).await;
    create_room(&app, "r1").await;
    join(&app, "r1", "bob", "j1").await;
    let (status, closed) = app.post("/v1/rooms/r1/close", json!({"command_id": "close"})).await;
    assert_eq!(status, 200);
    assert_eq!(closed["room"]["status"], "closed");
    assert_eq!(closed["room"]["member_count"], 0);
    let (status, body) = join(&app, "r1", "carol", "j2").await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("room_closed")));
    app.stop().await;
}

#[tokio::test]
async fn request_id_is_echoed_and_its_digest_stored_in_the_envelope() {
    let db = TestDb::sqlite().await;
    let app = TestApp::start(settings(db.url(), None, &[])).await;
    create_room(&app, "r1").await;
    let response = app
        .http
        .post(format!("{}/v1/rooms/r1/join", app.base))
        .header("x-request-id", "trace-123")
        .json(&json!({"command_id": "j1", "user_id": "bob"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["x-request-id"], "trace-123");
    let body: Value = response.json().await.unwrap();
    let row = db.outbox_row(body["events"][0]["event_id"].as_str().unwrap()).await;
    let envelope: Value = serde_json::from_str(&row.envelope).unwrap();
    // Digests of the caller's ids (SPEC §13.1: nothing a caller wrote reaches IM's content
    // check); the caller matches its event by hashing its own ids.
    assert_eq!(envelope["request_id"], room_service::domain::envelope_id("trace-123"));
    assert_eq!(envelope["command_id"], room_service::domain::envelope_id("j1"));
    assert_eq!(envelope["command_id"].as_str().map(str::len), Some(32));
    assert_eq!(envelope["room_version"], 2);
    app.stop().await;
}

#[tokio::test]
async fn restart_gives_back_the_last_committed_state() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create_room(&app, "r1").await;
        join(&app, "r1", "bob", "j1").await;
        let (_, before) = app.get("/v1/rooms/r1").await;
        app.stop().await;

        let app = TestApp::start(settings(db.url(), None, &[])).await;
        let (status, after) = app.get("/v1/rooms/r1").await;
        assert_eq!(status, 200, "{db}");
        assert_eq!(after, before, "{db}");
        // The room goes on from the loaded version.
        let (status, joined) = join(&app, "r1", "carol", "j2").await;
        assert_eq!((status, joined["room"]["version"].clone()), (200, json!(3)), "{db}");
        app.stop().await;
    }
}

#[tokio::test]
async fn health_readiness_and_metrics_answer() {
    let db = TestDb::sqlite().await;
    let app = TestApp::start(settings(db.url(), None, &[])).await;
    assert_eq!(app.get("/healthz").await.0, 200);
    assert_eq!(app.get("/readyz").await.0, 200);
    create_room(&app, "r1").await;
    let (status, metrics) = app.admin_get("/metrics").await;
    assert_eq!(status, 200);
    let text = metrics.as_str().unwrap();
    for series in [
        "room_outbox_publish_success_total{",
        "room_commands_total{command=\"create_room\",result=\"applied\",transport=\"http\"}",
        "room_command_latency_seconds_bucket{command=\"create_room\"",
        "http_requests_total{method=\"POST\",route=\"/v1/rooms\",status=\"2xx\"}",
        "room_outbox_rows{status=\"pending\"}",
        "room_outbox_oldest_pending_age_seconds",
    ] {
        assert!(text.contains(series), "{series} missing from /metrics:\n{text}");
    }
    app.settle().await; // the delivery mark of RoomCreated is batched
    let (status, stats) = app.admin_get("/admin/outbox/stats").await;
    assert_eq!((status, stats["pending"].clone()), (200, json!(0)));
    let (status, body) = app.admin_get("/admin/outbox?limit=0").await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("invalid_argument")));
    let (status, page) = app.admin_get("/admin/outbox?status=delivered&limit=10").await;
    assert_eq!(status, 200);
    assert_eq!(page["rows"].as_array().unwrap().len(), 1);
    app.stop().await;
}

#[tokio::test]
async fn with_im_disabled_no_rate_limit_holds_events_back() {
    let db = TestDb::sqlite().await;
    // Tencent's limits belong to the IM client; the log sink takes any rate.
    let limits = [("im_rate_limit.global_per_sec", "2"), ("im_rate_limit.per_group_per_sec", "1")];
    let app = TestApp::start(settings(db.url(), None, &limits)).await;
    create_room(&app, "r1").await;
    for n in 0..10 {
        let (status, body) = join(&app, "r1", &format!("u{n}"), &format!("j{n}")).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["events"][0]["delivery"], "delivered", "{body}");
    }
    app.stop().await;
}

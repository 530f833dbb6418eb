//! The HTTP API end to end over real loopback HTTP, on SQLite files and on MariaDB.

use serde_json::{Value, json};

use crate::support::app::{TestApp, settings};
use crate::support::{TestDb, backends};

async fn create_room(app: &TestApp, room: &str) -> Value {
    let (status, body) =
        app.post("/v1/rooms", json!({"command_id": format!("create-{room}"), "room_id": room, "owner_id": "alice", "title": "Live"})).await;
    assert_eq!(status, 200, "{body}");
    body
}

async fn join(app: &TestApp, room: &str, user: &str, command_id: &str) -> (u16, Value) {
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
        assert_eq!(room["members"][0]["user_id"], "bob", "{db}");
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

        // Same id, different body: 409, nothing written.
        let (status, body) = join(&app, "r1", "carol", "j1").await;
        assert_eq!(status, 409, "{db}");
        assert_eq!(body["error"]["code"], "command_conflict", "{db}");
        let (_, room) = app.get("/v1/rooms/r1").await;
        assert_eq!(room["members"].as_array().unwrap().len(), 1, "{db}");
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
async fn bad_input_is_a_4xx_naming_the_problem_and_writes_nothing() {
    let db = TestDb::sqlite().await;
    let app = TestApp::start(settings(db.url(), None, &[("http.body_limit_bytes", "1024")])).await;
    create_room(&app, "r1").await;
    join(&app, "r1", "bob", "j1").await;
    let before = (db.count("room_outbox").await, db.count("room_command_log").await);

    let gift = |count: Value| json!({"command_id": "g", "sender_id": "bob", "receiver_id": "alice", "gift_id": "rose", "count": count, "unit_value": 1});
    let cases: Vec<(&str, Value, u16, &str)> = vec![
        ("/v1/rooms/r1/join", json!({"user_id": "x"}), 400, "command_id"),
        ("/v1/rooms/r1/join", json!({"command_id": "c", "user_id": 5}), 400, "user_id"),
        ("/v1/rooms/r1/join", json!({"command_id": "c", "user_id": "bad id"}), 400, "user_id"),
        ("/v1/rooms/r1/join", json!({"command_id": "c", "user_id": "x", "extra": 1}), 400, "extra"),
        ("/v1/rooms/bad$id/join", json!({"command_id": "c", "user_id": "x"}), 400, "room_id"),
        ("/v1/rooms/r1/gifts", gift(json!(0)), 400, "count"),
        ("/v1/rooms/r1/gifts", gift(json!(10_000)), 400, "count"),
        ("/v1/rooms/r1/gifts", gift(json!(-1)), 400, "count"),
        ("/v1/rooms/r1/gifts", gift(json!(1.5)), 400, "count"),
        (
            "/v1/rooms",
            json!({"command_id": "c", "room_id": "r2", "owner_id": "o", "title": ""}),
            400,
            "title",
        ),
        ("/v1/rooms/r1/join", json!({"command_id": "x".repeat(129), "user_id": "x"}), 400, "command_id"),
        ("/v1/rooms/nope/join", json!({"command_id": "c", "user_id": "x"}), 404, "room not found"),
        (
            "/v1/rooms/r1/gifts",
            json!({"command_id": "g", "sender_id": "stranger", "receiver_id": "alice", "gift_id": "rose", "count": 1, "unit_value": 1}),
            409,
            "stranger",
        ),
    ];
    for (path, body, want_status, mentions) in cases {
        let (status, answer) = app.post(path, body.clone()).await;
        assert_eq!(status, want_status, "{path} {body}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(mentions), "{path} {body}: {message:?} should mention {mentions}");
        assert!(answer["error"]["code"].is_string(), "{answer}");
    }

    let raw = |body: &'static str, content_type: &'static str| {
        app.http
            .post(format!("{}/v1/rooms/r1/join", app.base))
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    assert_eq!(raw("{not json", "application/json").await.unwrap().status(), 400);
    assert_eq!(raw("{}", "text/plain").await.unwrap().status(), 415);
    let big = app
        .http
        .post(format!("{}/v1/rooms/r1/join", app.base))
        .json(&json!({"command_id": "c", "user_id": "x".repeat(4096)}))
        .send()
        .await
        .unwrap();
    assert_eq!(big.status(), 413);
    let body: Value = big.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_large");

    assert_eq!(
        (db.count("room_outbox").await, db.count("room_command_log").await),
        before,
        "nothing written"
    );
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
    assert_eq!(closed["room"]["members"], json!([]));
    let (status, body) = join(&app, "r1", "carol", "j2").await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("room_closed")));
    app.stop().await;
}

#[tokio::test]
async fn request_id_is_echoed_and_stored_in_the_envelope() {
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
    assert_eq!(envelope["request_id"], "trace-123");
    assert_eq!(envelope["command_id"], "j1");
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
    let (status, metrics) = app.get("/metrics").await;
    assert_eq!(status, 200);
    let text = metrics.as_str().unwrap();
    for series in [
        "room_outbox_publish_success_total{",
        "room_commands_total{command=\"create_room\",result=\"applied\"}",
        "room_command_latency_seconds_bucket{command=\"create_room\"",
        "http_requests_total{method=\"POST\",route=\"/v1/rooms\",status=\"2xx\"}",
        "room_outbox_rows{status=\"pending\"}",
        "room_outbox_oldest_pending_age_seconds",
    ] {
        assert!(text.contains(series), "{series} missing from /metrics:\n{text}");
    }
    let (status, stats) = app.get("/admin/outbox/stats").await;
    assert_eq!((status, stats["pending"].clone()), (200, json!(0)));
    let (status, body) = app.get("/admin/outbox?limit=0").await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("invalid_argument")));
    let (status, page) = app.get("/admin/outbox?status=delivered&limit=10").await;
    assert_eq!(status, 200);
    assert_eq!(page["rows"].as_array().unwrap().len(), 1);
    app.stop().await;
}

#[tokio::test]
async fn storage_outage_answers_503_changes_nothing_and_recovers() {
    let db = TestDb::mysql().await;
    let app = TestApp::start(settings(db.url(), None, &[])).await;
    create_room(&app, "r1").await;
    db.execute("RENAME TABLE room_outbox TO room_outbox_away").await;
    let (status, body) = join(&app, "r1", "bob", "j1").await;
    assert_eq!((status, body["error"]["code"].as_str()), (503, Some("storage_unavailable")), "{body}");
    let (_, room) = app.get("/v1/rooms/r1").await;
    assert_eq!(room["members"], json!([]), "memory unchanged");
    assert_eq!(db.count("room_command_log").await, 1, "the failed transaction left nothing");

    db.execute("RENAME TABLE room_outbox_away TO room_outbox").await;
    let (status, body) = join(&app, "r1", "bob", "j1").await;
    assert_eq!(status, 200, "recovered: {body}");
    assert_eq!(body["room"]["version"], 2);
    app.stop().await;
}

#[tokio::test]
async fn two_nodes_on_one_database_never_both_commit_a_version() {
    let db = TestDb::mysql().await;
    let a = TestApp::start(settings(db.url(), None, &[])).await;
    let b = TestApp::start(settings(db.url(), None, &[])).await;
    create_room(&a, "r1").await;
    // Both nodes load the room at version 1.
    assert_eq!(b.get("/v1/rooms/r1").await.1["version"], 1);
    assert_eq!(join(&a, "r1", "u1", "j1").await.0, 200);
    // B's cell is stale (version 1): its write is fenced, it reloads and retries once.
    let (status, body) = join(&b, "r1", "u2", "j2").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["room"]["version"], 3);
    let members: Vec<&str> =
        body["room"]["members"].as_array().unwrap().iter().map(|m| m["user_id"].as_str().unwrap()).collect();
    assert_eq!(members, ["u1", "u2"], "B's commit includes A's");
    let versions =
        db.scalar("SELECT COUNT(DISTINCT room_version) FROM room_command_log WHERE room_id = 'r1'").await;
    assert_eq!(versions, Some(3));
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn draining_answers_503_on_readyz_and_commands() {
    use room_service::http::{AppState, Lifecycle, router};
    use room_service::room::{RoomOptions, RoomService, system_clock};
    use tower::ServiceExt;

    let db = TestDb::sqlite().await;
    let publisher = crate::support::app::publisher(&settings(db.url(), None, &[]));
    let rooms = RoomService::new(
        db.repo.clone(),
        publisher,
        RoomOptions { publish_timeout: std::time::Duration::from_secs(1) },
        system_clock(),
    );
    let lifecycle = Lifecycle::default();
    let app =
        router(AppState { rooms, repo: db.repo.clone(), lifecycle: lifecycle.clone(), metrics: None }, 65536);
    let request = |uri: &str, body: Option<Value>| {
        let builder = axum::http::Request::builder().uri(uri).header("content-type", "application/json");
        match body {
            Some(b) => builder.method("POST").body(axum::body::Body::from(b.to_string())).unwrap(),
            None => builder.body(axum::body::Body::empty()).unwrap(),
        }
    };
    let create = json!({"command_id": "c", "room_id": "r1", "owner_id": "o", "title": "t"});
    assert_eq!(app.clone().oneshot(request("/readyz", None)).await.unwrap().status(), 200);
    lifecycle.start_draining();
    assert_eq!(app.clone().oneshot(request("/readyz", None)).await.unwrap().status(), 503);
    let response = app.clone().oneshot(request("/v1/rooms", Some(create))).await.unwrap();
    assert_eq!(response.status(), 503);
    let body: Value =
        serde_json::from_slice(&axum::body::to_bytes(response.into_body(), 4096).await.unwrap()).unwrap();
    assert_eq!(body["error"]["code"], "draining");
    assert_eq!(db.count("room_command_log").await, 0);
    assert_eq!(app.oneshot(request("/healthz", None)).await.unwrap().status(), 200, "still alive");
}

#[tokio::test]
async fn a_client_trickling_its_headers_is_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = axum::Router::new().route("/", axum::routing::get(|| async { "ok" }));
    let stop = tokio_util::sync::CancellationToken::new();
    let server = tokio::spawn(room_service::http::server::serve(
        listener,
        router,
        std::time::Duration::from_millis(300),
        stop.clone().cancelled_owned(),
    ));

    // A complete request is served.
    let body = reqwest::get(format!("http://{addr}/")).await.unwrap().text().await.unwrap();
    assert_eq!(body, "ok");

    // Half a request, then silence: the server closes the connection.
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(5), stream.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the connection was still open after 5 s");
    assert!(!String::from_utf8_lossy(&buf).contains("200 OK"), "{buf:?}");

    stop.cancel();
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_no_op_decided_on_a_stale_cell_is_refenced_and_reapplied() {
    let db = TestDb::mysql().await;
    let a = TestApp::start(settings(db.url(), None, &[])).await;
    let b = TestApp::start(settings(db.url(), None, &[])).await;
    create_room(&a, "r1").await;
    assert_eq!(join(&a, "r1", "u1", "j1").await.0, 200);
    assert_eq!(b.get("/v1/rooms/r1").await.1["version"], 2, "B loads u1 as a member");
    let leave = json!({"command_id": "l1", "user_id": "u1"});
    assert_eq!(a.post("/v1/rooms/r1/leave", leave).await.0, 200);
    // To B's stale cell u1 is still a member, so the join looks like a no-op; the commit's
    // version check catches it, B reloads, and the join is applied.
    let (status, body) = join(&b, "r1", "u1", "j2").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["applied"], true, "{body}");
    assert_eq!(body["room"]["version"], 4);
    a.stop().await;
    b.stop().await;
}

//! Bad input, a storage outage, draining and slow clients: clear errors, nothing written, no
//! hang.

use serde_json::{Value, json};

use super::{create_room, join};
use crate::support::TestDb;
use crate::support::app::{TestApp, settings};

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
        ("/v1/rooms/r1/leave", json!({"command_id": "presence:stale:00", "user_id": "bob"}), 400, "reserved"),
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
async fn storage_outage_answers_503_changes_nothing_and_recovers() {
    let db = TestDb::mysql().await;
    let app = TestApp::start(settings(db.url(), None, &[])).await;
    create_room(&app, "r1").await;
    db.execute("RENAME TABLE room_outbox TO room_outbox_away").await;
    let (status, body) = join(&app, "r1", "bob", "j1").await;
    assert_eq!((status, body["error"]["code"].as_str()), (503, Some("storage_unavailable")), "{body}");
    let (_, room) = app.get("/v1/rooms/r1").await;
    assert_eq!(room["member_count"], 0, "memory unchanged");
    assert_eq!(db.count("room_command_log").await, 1, "the failed transaction left nothing");

    db.execute("RENAME TABLE room_outbox_away TO room_outbox").await;
    let (status, body) = join(&app, "r1", "bob", "j1").await;
    assert_eq!(status, 200, "recovered: {body}");
    assert_eq!(body["room"]["version"], 2);
    app.stop().await;
}

#[tokio::test]
async fn draining_answers_503_on_readyz_and_commands() {
    use room_service::http::{PublicOptions, public_router};
    use tower::ServiceExt;

    let db = TestDb::sqlite().await;
    let state = crate::support::app::router_state(&db);
    let lifecycle = state.lifecycle.clone();
    let app = public_router(state, PublicOptions::default());
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
async fn readyz_and_grpc_health_share_one_database_ping_per_250_ms() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use room_service::api::readiness::{DbPing, REUSE};
    use room_service::grpc::health::Readiness;
    use room_service::http::{PublicOptions, public_router};
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_server::Health;
    use tower::ServiceExt;

    let db = TestDb::sqlite().await;
    let mut state = crate::support::app::router_state(&db);
    let pings = Arc::new(AtomicUsize::new(0));
    let (counted, repo) = (pings.clone(), db.repo.clone());
    state.db_ping = DbPing::from_fn(move || {
        counted.fetch_add(1, Ordering::SeqCst);
        let repo = repo.clone();
        Box::pin(async move { repo.ping().await })
    });
    let health = Readiness::new(state.clone());
    let app = public_router(state, PublicOptions::default());
    let readyz = || axum::http::Request::get("/readyz").body(axum::body::Body::empty()).unwrap();

    let started = std::time::Instant::now();
    for _ in 0..5 {
        assert_eq!(app.clone().oneshot(readyz()).await.unwrap().status(), 200);
        let answer = health.check(tonic::Request::new(HealthCheckRequest::default())).await.unwrap();
        assert_eq!(answer.into_inner().status, 1, "SERVING");
    }
    let took = started.elapsed();
    let within = pings.load(Ordering::SeqCst);
    tokio::time::sleep(REUSE).await;
    assert_eq!(app.oneshot(readyz()).await.unwrap().status(), 200);
    let after = pings.load(Ordering::SeqCst);
    eprintln!("10 readiness checks in {took:?}: {within} ping(s); one more after 250 ms: {after} in all");
    if took < REUSE {
        assert_eq!(within, 1, "ten checks within 250 ms, over both protocols: one ping");
    }
    assert_eq!(after, within + 1, "250 ms after the ping, the next check pings again");
}

//! The HTTP edge of the running service: which listener serves what, the admin token, JSON
//! answers for unknown routes and methods, the request timeout, load shedding, and the
//! readiness grace of a rolling deploy.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::create_room;
use crate::support::TestDb;
use crate::support::app::{TestApp, fake_im, settings};

#[tokio::test]
async fn admin_routes_and_metrics_are_served_on_the_admin_listener_only() {
    let db = TestDb::sqlite().await;
    let app = TestApp::start(settings(db.url(), None, &[])).await;
    for path in ["/admin/outbox/stats", "/admin/outbox", "/metrics"] {
        let (status, body) = app.get(path).await;
        assert_eq!(status, 404, "public {path}: {body}");
        assert_eq!(body["error"]["code"], "not_found", "public {path}");
        let (status, body) = app.admin_get(path).await;
        assert_eq!(status, 200, "admin {path}: {body}");
    }
    // And the public API is not on the admin listener.
    let response = app.http.get(format!("{}/v1/rooms/r1", app.admin_base)).send().await.unwrap();
    assert_eq!(response.status(), 404);
    app.stop().await;
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_json() {
    let db = TestDb::sqlite().await;
    let app = TestApp::start(settings(db.url(), None, &[])).await;
    let response = app.http.delete(format!("{}/v1/rooms", app.base)).send().await.unwrap();
    assert_eq!(response.status(), 405);
    let body: Value = response.json().await.expect("405 has a JSON body");
    assert_eq!(body["error"]["code"], "method_not_allowed");
    assert!(body["error"]["message"].as_str().unwrap().contains("DELETE"), "{body}");

    let response = app.http.put(format!("{}/admin/outbox/requeue", app.admin_base)).send().await.unwrap();
    assert_eq!(response.status(), 405);
    let body: Value = response.json().await.expect("admin 405 has a JSON body");
    assert_eq!(body["error"]["code"], "method_not_allowed");

    let (status, body) = app.get("/nowhere").await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("not_found")));
    app.stop().await;
}

#[tokio::test]
async fn admin_routes_need_the_token_when_one_is_set() {
    let db = TestDb::sqlite().await;
    let app = TestApp::start(settings(db.url(), None, &[("http.admin_token", "t0ken-for-tests")])).await;
    let url = format!("{}/admin/outbox/stats", app.admin_base);
    for (header, what) in
        [(None, "no token"), (Some("Bearer wrong"), "a wrong token"), (Some("t0ken-for-tests"), "no scheme")]
    {
        let mut request = app.http.get(&url);
        if let Some(header) = header {
            request = request.header("authorization", header);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 401, "{what}");
        assert_eq!(response.headers()["www-authenticate"], "Bearer");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "unauthorized", "{what}");
        assert!(!body.to_string().contains("t0ken-for-tests"), "the token leaked: {body}");
    }
    // Unknown admin routes are refused too (nothing about the listener is learnt without it).
    let response = app.http.get(format!("{}/admin/nowhere", app.admin_base)).send().await.unwrap();
    assert_eq!(response.status(), 401);
    // The right token (the TestApp helpers send it).
    let (status, stats) = app.admin_get("/admin/outbox/stats").await;
    assert_eq!(status, 200, "{stats}");
    let (status, metrics) = app.admin_get("/metrics").await;
    assert_eq!(status, 200);
    assert!(!metrics.to_string().contains("t0ken-for-tests"));
    app.stop().await;
}

#[tokio::test]
async fn one_outbox_row_is_shown_on_the_admin_listener() {
    let db = TestDb::sqlite().await;
    let app = TestApp::start(settings(db.url(), None, &[])).await;
    let created = create_room(&app, "r1").await;
    let event_id = created["events"][0]["event_id"].as_str().unwrap().to_owned();
    let (status, row) = app.admin_get(&format!("/admin/outbox/{event_id}")).await;
    assert_eq!(status, 200, "{row}");
    assert_eq!(row["event_id"], event_id.as_str());
    let envelope: Value = serde_json::from_str(row["envelope"].as_str().unwrap()).unwrap();
    assert_eq!(envelope["event_type"], "RoomCreated", "{row}");
    let (status, body) = app.admin_get("/admin/outbox/0190c1c2-0000-7000-8000-000000000000").await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("event_not_found")), "{body}");
    app.stop().await;
}

#[tokio::test]
async fn a_command_not_answered_in_time_gets_503_and_its_retry_the_stored_answer() {
    let db = TestDb::sqlite().await;
    let im = fake_im().await;
    let app = TestApp::start(settings(
        db.url(),
        Some(&im),
        &[("http.request_timeout", "200ms"), ("outbox_worker.publish_timeout", "2s")],
    ))
    .await;
    create_room(&app, "r1").await;
    // Every IM call now takes 1.5 s: the synchronous publish outlasts the request timeout.
    im.set_latency(Duration::from_millis(1500));
    let join = json!({"command_id": "slow-join", "user_id": "u1"});
    let started = Instant::now();
    let (status, body) = app.post("/v1/rooms/r1/join", join.clone()).await;
    assert_eq!((status, body["error"]["code"].as_str()), (503, Some("request_timeout")), "{body}");
    assert!(started.elapsed() < Duration::from_millis(1200), "answered after {:?}", started.elapsed());

    // The command was committed all the same: its retry is answered from the log.
    im.set_latency(Duration::ZERO);
    let (status, body) = app.post("/v1/rooms/r1/join", join).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["room"]["version"], 2, "{body}");
    let (_, metrics) = app.admin_get("/metrics").await;
    assert!(metrics.as_str().unwrap().contains("room_http_request_timeouts_total 1"), "{metrics}");
    app.stop().await;
}

#[tokio::test]
async fn a_flood_beyond_max_in_flight_is_shed_fast_and_the_service_recovers() {
    let db = TestDb::sqlite().await;
    let im = fake_im().await;
    let app = TestApp::start(settings(db.url(), Some(&im), &[("http.max_in_flight", "4")])).await;
    for i in 0..40 {
        create_room(&app, &format!("flood-{i}")).await;
    }
    im.set_latency(Duration::from_millis(500));
    let started = Instant::now();
    let flood = (0..40).map(|i| {
        let (http, base) = (app.http.clone(), app.base.clone());
        tokio::spawn(async move {
            let body = json!({"command_id": format!("j{i}"), "user_id": "u"});
            let response =
                http.post(format!("{base}/v1/rooms/flood-{i}/join")).json(&body).send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap(), Instant::now())
        })
    });
    let answers: Vec<_> = futures::future::join_all(flood).await.into_iter().map(Result::unwrap).collect();
    let shed: Vec<_> = answers.iter().filter(|(status, _, _)| *status == 503).collect();
    let served = answers.iter().filter(|(status, _, _)| *status == 200).count();
    assert!(served >= 4, "at least max_in_flight requests are served: {answers:?}");
    assert!(!shed.is_empty(), "40 concurrent requests over a limit of 4 shed some");
    for (_, body, at) in &shed {
        assert_eq!(body["error"]["code"], "overloaded", "{body}");
        assert!(*at - started < Duration::from_millis(450), "a shed request waited {:?}", *at - started);
    }
    // Recovered: with the flood over, every room takes its command.
    im.set_latency(Duration::ZERO);
    for i in 0..40 {
        let (status, body) = app
            .post(
                &format!("/v1/rooms/flood-{i}/join"),
                json!({"command_id": format!("j{i}"), "user_id": "u"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let (_, metrics) = app.admin_get("/metrics").await;
    assert!(
        metrics.as_str().unwrap().contains(&format!("room_http_requests_shed_total {}", shed.len())),
        "{metrics}"
    );
    app.stop().await;
}

#[tokio::test]
async fn during_the_shutdown_grace_readyz_fails_while_commands_still_succeed() {
    let db = TestDb::sqlite().await;
    let app = TestApp::start(settings(db.url(), None, &[("http.shutdown_grace", "1500ms")])).await;
    create_room(&app, "r1").await;
    let (status, _) = app.get("/readyz").await;
    assert_eq!(status, 200);
    app.app.shutdown_token().cancel();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (status, body) = app.get("/readyz").await;
    assert_eq!(status, 503, "{body}");
    let (status, body) = super::join(&app, "r1", "late", "late-join").await;
    assert_eq!(status, 200, "commands are still served during the grace: {body}");
    let (status, _) = app.get("/healthz").await;
    assert_eq!(status, 200, "alive");
    // After the grace: draining, then stopped.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let stopped = tokio::time::timeout(Duration::from_secs(10), app.app.wait()).await;
    stopped.expect("stopped after the grace").expect("clean stop");
    assert_eq!(db.count("room_command_log").await, 2);
}

//! The service and the fake Tencent IM together over loopback HTTP: what reaches IM, what is
//! filtered, and what a failing IM leaves in the outbox.

use std::time::{Duration, Instant};

use room_service::config::OutboxWorkerSettings;
use room_service::outbox::OutboxWorker;
use room_service_fakes::fake_im::Fault;
use serde_json::{Value, json};

use crate::support::app::{TestApp, fake_im, settings};
use crate::support::{TestDb, backends};

async fn setup_room(app: &TestApp) {
    let (status, body) = app
        .post(
            "/v1/rooms",
            json!({"command_id": "create", "room_id": "r1", "owner_id": "alice", "title": "Live"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn a_join_reaches_im_once_with_the_committed_envelope() {
    for db in backends().await {
        let im = fake_im().await;
        let app = TestApp::start(settings(db.url(), Some(&im), &[])).await;
        setup_room(&app).await;
        let (status, body) =
            app.post("/v1/rooms/r1/join", json!({"command_id": "j1", "user_id": "bob"})).await;
        assert_eq!(status, 200, "{db}: {body}");
        assert_eq!(body["events"][0]["delivery"], "delivered", "{db}");
        let event_id = body["events"][0]["event_id"].as_str().unwrap();

        let messages = im.messages("r1");
        assert_eq!(messages.len(), 1, "{db}: RoomCreated is filtered, the join is sent once");
        let sent = &messages[0];
        assert_eq!(sent.event_id.as_deref(), Some(event_id), "{db}");
        assert_eq!(sent.desc, "RoomUserJoined", "{db}");
        let envelope: Value = serde_json::from_str(&sent.data).unwrap();
        assert_eq!(envelope["event_id"], event_id, "{db}");
        assert_eq!(envelope["payload"]["user_id"], "bob", "{db}");
        app.settle().await;
        assert_eq!(db.outbox_row(event_id).await.status, "delivered", "{db}");
        app.stop().await;
    }
}

#[tokio::test]
async fn filtered_events_never_reach_im_yet_end_delivered() {
    let db = TestDb::sqlite().await;
    let im = fake_im().await;
    let app = TestApp::start(settings(db.url(), Some(&im), &[])).await;
    setup_room(&app).await;
    app.post("/v1/rooms/r1/join", json!({"command_id": "j1", "user_id": "bob"})).await;
    let gift = json!({"command_id": "g1", "sender_id": "bob", "receiver_id": "alice", "gift_id": "rocket", "count": 1, "unit_value": 9});
    let (_, body) = app.post("/v1/rooms/r1/gifts", gift).await;
    let sent: Vec<String> = im.all_messages().into_iter().map(|m| m.desc).collect();
    assert_eq!(sent, ["RoomUserJoined", "RoomGiftSent"]);
    assert_eq!(im.messages("r1")[1].priority.as_deref(), Some("High"));
    app.settle().await;
    for event in body["events"].as_array().unwrap() {
        let row = db.outbox_row(event["event_id"].as_str().unwrap()).await;
        assert_eq!(row.status, "delivered", "{event}");
    }
    for row in db.outbox().await {
        assert_eq!(row.status, "delivered", "{row:?}");
    }
    app.stop().await;
}

#[tokio::test]
async fn im_failure_keeps_the_command_and_leaves_rows_pending() {
    for db in backends().await {
        let im = fake_im().await;
        let app = TestApp::start(settings(db.url(), Some(&im), &[])).await;
        for (n, fault) in
            [Fault::Http502, Fault::ErrorCode(10002), Fault::DropConnection].into_iter().enumerate()
        {
            let room = format!("f{n}");
            create(&app, &room).await;
            im.inject(fault.clone(), 1);
            let (status, body) = app
                .post(
                    &format!("/v1/rooms/{room}/join"),
                    json!({"command_id": format!("j{n}"), "user_id": "u"}),
                )
                .await;
            assert_eq!(status, 200, "{db} {fault:?}: {body}");
            assert_eq!(body["events"][0]["delivery"], "pending", "{db} {fault:?}");
            let row = db.outbox_row(body["events"][0]["event_id"].as_str().unwrap()).await;
            assert_eq!((row.status.as_str(), row.retry_count), ("pending", 0), "{db} {fault:?}");
            let (_, listed) = app.get(&format!("/v1/rooms/{room}/members")).await;
            assert_eq!(listed["members"][0]["user_id"], "u", "{db}: room updated");
        }
        // IM healthy again: a room with nothing undelivered is served synchronously.
        create(&app, "ok").await;
        let (_, body) = app.post("/v1/rooms/ok/join", json!({"command_id": "ok", "user_id": "late"})).await;
        assert_eq!(body["events"][0]["delivery"], "delivered", "{db}");
        app.stop().await;
    }
}

#[tokio::test]
async fn a_room_with_an_undelivered_event_sends_nothing_after_it_until_the_worker_delivered_it() {
    for db in backends().await {
        let im = fake_im().await;
        let app = TestApp::start(settings(db.url(), Some(&im), &[])).await;
        setup_room(&app).await;
        im.inject(Fault::Http502, 1);
        let join = |n: u32| json!({"command_id": format!("j{n}"), "user_id": format!("u{n}")});
        let (_, first) = app.post("/v1/rooms/r1/join", join(1)).await;
        assert_eq!(first["events"][0]["delivery"], "pending", "{db}");
        // IM is healthy, but u1's join is not delivered yet: u2's must not overtake it.
        let (_, second) = app.post("/v1/rooms/r1/join", join(2)).await;
        assert_eq!(second["events"][0]["delivery"], "pending", "{db}: held behind u1");
        assert!(im.messages("r1").is_empty(), "{db}: nothing sent out of order");
        // Both were made claimable at once; the worker delivers them in order.
        let worker = OutboxWorker::new(
            db.repo.clone(),
            crate::support::app::publisher(&app.settings),
            "test",
            OutboxWorkerSettings::default(),
        );
        app.settle().await;
        eventually_delivered(&worker, &db, 2).await;
        let sent: Vec<String> = im.messages("r1").iter().filter_map(|m| m.event_id.clone()).collect();
        let expected = [&first, &second].map(|b| b["events"][0]["event_id"].as_str().unwrap().to_owned());
        assert_eq!(sent, expected, "{db}: in room order");
        // The room is clear again: once its lane has looked (at most every 250 ms), the next
        // join goes out synchronously.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (_, third) = app.post("/v1/rooms/r1/join", join(3)).await;
        assert_eq!(third["events"][0]["delivery"], "delivered", "{db}");
        app.stop().await;
    }
}

/// Runs worker rounds until `n` rows were delivered (bounded).
async fn eventually_delivered(worker: &OutboxWorker, db: &TestDb, n: u64) {
    let mut delivered = 0;
    for _ in 0..50 {
        delivered += worker.process_pending_outbox().await.unwrap().delivered;
        if delivered >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{db}: only {delivered} of {n} delivered");
}

async fn create(app: &TestApp, room: &str) {
    let body = json!({"command_id": format!("create-{room}"), "room_id": room, "owner_id": "alice", "title": "Live"});
    let (status, body) = app.post("/v1/rooms", body).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn a_slow_im_never_holds_the_response_past_publish_timeout() {
    let db = TestDb::sqlite().await;
    let im = fake_im().await;
    let app =
        TestApp::start(settings(db.url(), Some(&im), &[("outbox_worker.publish_timeout", "300ms")])).await;
    setup_room(&app).await;
    im.inject(Fault::Delay(Duration::from_secs(3)), 1);
    let started = Instant::now();
    let (status, body) = app.post("/v1/rooms/r1/join", json!({"command_id": "j1", "user_id": "bob"})).await;
    let took = started.elapsed();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["events"][0]["delivery"], "pending");
    assert!(took < Duration::from_millis(2_500), "answered after {took:?}");
    app.stop().await;
}

#[tokio::test]
async fn the_worker_delivers_what_the_sync_push_missed_and_only_once() {
    for db in backends().await {
        let im = fake_im().await;
        let worker_on = [
            ("outbox_worker.enabled", "true"),
            ("outbox_worker.poll_interval", "100ms"),
            ("outbox_worker.publish_timeout", "300ms"),
        ];
        let app = TestApp::start(settings(db.url(), Some(&im), &worker_on)).await;
        setup_room(&app).await;
        im.inject(Fault::Http502, 1);
        let (status, body) =
            app.post("/v1/rooms/r1/join", json!({"command_id": "j1", "user_id": "bob"})).await;
        assert_eq!(status, 200, "{db}: {body}");
        assert_eq!(body["events"][0]["delivery"], "pending", "{db}");
        let event_id = body["events"][0]["event_id"].as_str().unwrap().to_owned();

        let deadline = Instant::now() + Duration::from_secs(10);
        while db.outbox_row(&event_id).await.status != "delivered" {
            assert!(Instant::now() < deadline, "{db}: the worker never delivered {event_id}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let row = db.outbox_row(&event_id).await;
        assert_eq!(row.retry_count, 0, "{db}: the sync failure does not count as a worker attempt");
        // Give the worker a few more rounds: nothing is sent twice.
        tokio::time::sleep(Duration::from_millis(400)).await;
        let sent: Vec<_> =
            im.messages("r1").into_iter().filter(|m| m.event_id.as_deref() == Some(&event_id)).collect();
        assert_eq!(sent.len(), 1, "{db}");
        app.stop().await;
    }
}

#[tokio::test]
async fn with_the_worker_disabled_pending_rows_stay_pending() {
    let db = TestDb::sqlite().await;
    let im = fake_im().await;
    let off = [("outbox_worker.enabled", "false"), ("outbox_worker.publish_timeout", "100ms")];
    let app = TestApp::start(settings(db.url(), Some(&im), &off)).await;
    setup_room(&app).await;
    im.inject(Fault::ErrorCode(10002), 1);
    let (_, body) = app.post("/v1/rooms/r1/join", json!({"command_id": "j1", "user_id": "bob"})).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let row = db.outbox_row(body["events"][0]["event_id"].as_str().unwrap()).await;
    assert_eq!(row.status, "pending");
    assert!(im.messages("r1").is_empty());
    app.stop().await;
}

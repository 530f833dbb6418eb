//! Recovery (SPEC §13.2, docs/CLIENT.md): the events API pages a room's IM events exactly as
//! committed, answers `recovered: false` beyond the history, refuses bad queries naming the
//! parameter over HTTP and gRPC; and the reference client (`tests/peer/room_client.py`, Python,
//! written from CLIENT.md alone) rebuilds every version from what the fake IM received under
//! duplicates, reorders, an offline window and a restart of the node.

use std::time::Duration;

use room_service::grpc::pb;
use room_service::grpc::pb::room_service_client::RoomServiceClient;
use serde_json::{Value, json};
use tonic::Code;

use crate::support::app::{TestApp, fake_im, settings};
use crate::support::{TestDb, backends};

/// The IM group of `room` with the shipped prefix.
fn group(app: &TestApp, room: &str) -> String {
    let prefix = app.settings.tencent_im.as_ref().map(|im| im.group_id_prefix.clone()).unwrap_or_default();
    format!("{prefix}{room}")
}

/// Creates `room` (alice), joins `members`, then sends `gifts` gifts from them in turn; every
/// command must apply. Returns the room's version.
async fn fill(app: &TestApp, room: &str, tag: &str, members: &[&str], gifts: usize) -> u64 {
    let body = json!({"command_id": format!("{tag}-c"), "room_id": room, "owner_id": "alice", "title": "t"});
    let (status, answer) = app.post("/v1/rooms", body).await;
    assert_eq!(status, 200, "create {room}: {answer}");
    more(app, room, tag, members, gifts).await
}

/// Joins `members` (a member already in stays: no version) and sends `gifts` gifts from them
/// in turn. Returns the room's version.
async fn more(app: &TestApp, room: &str, tag: &str, members: &[&str], gifts: usize) -> u64 {
    for user in members {
        let (status, body) = app
            .post(
                &format!("/v1/rooms/{room}/join"),
                json!({"command_id": format!("{tag}-j-{user}"), "user_id": user}),
            )
            .await;
        assert_eq!(status, 200, "join {user}: {body}");
    }
    let mut version = 0;
    for n in 0..gifts {
        let sender = members[n % members.len()];
        let body = json!({"command_id": format!("{tag}-g{n}"), "sender_id": sender, "receiver_id": "alice",
            "gift_id": "rose", "count": 1, "unit_value": 10});
        let (status, answer) = app.post(&format!("/v1/rooms/{room}/gifts"), body).await;
        assert_eq!(status, 200, "gift {n}: {answer}");
        version = answer["room_version"].as_u64().expect("room_version");
    }
    version
}

/// The committed IM envelopes of `room`, by version, from the outbox rows.
async fn committed(db: &TestDb, room: &str) -> Vec<Value> {
    let mut envelopes: Vec<Value> = db
        .outbox()
        .await
        .into_iter()
        .filter(|r| {
            r.room_id == room
                && ["RoomUserJoined", "RoomUserLeft", "RoomGiftSent", "RoomClosed"]
                    .contains(&r.event_type.as_str())
        })
        .map(|r| serde_json::from_str(&r.envelope).expect("envelope JSON"))
        .collect();
    envelopes.sort_by_key(|e| e["room_version"].as_u64());
    envelopes
}

/// The envelopes the reference client showed, in the order it showed them.
fn shown(report: &Value) -> Vec<Value> {
    let events = report["events"].as_array().expect("events");
    events.iter().map(|e| serde_json::from_str(e.as_str().expect("JSON text")).expect("envelope")).collect()
}

/// Waits (at most 10 s) until IM holds `count` distinct events of `group`.
async fn im_holds(im: &room_service_fakes::fake_im::FakeIm, group: &str, count: usize) {
    for _ in 0..100 {
        let seen: std::collections::HashSet<String> =
            im.messages(group).into_iter().filter_map(|m| m.event_id).collect();
        if seen.len() >= count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn versions(events: &[Value]) -> Vec<u64> {
    events.iter().map(|e| e["room_version"].as_u64().expect("room_version")).collect()
}

#[tokio::test]
async fn the_events_api_pages_a_rooms_im_events_in_order_exactly_as_committed() {
    for db in backends().await {
        let im = fake_im().await;
        let app = TestApp::start(settings(db.url(), Some(&im), &[])).await;
        let version = fill(&app, "h1", "a", &["bob", "carol", "dave"], 6).await;
        assert_eq!(version, 10, "{db}: create 1, three joins, six gifts");
        let (status, first) = app.get("/v1/rooms/h1/events?after_version=0&limit=4").await;
        assert_eq!(status, 200, "{db}: {first}");
        assert_eq!((first["room_version"].as_u64(), first["recovered"].as_bool()), (Some(10), Some(true)));
        let first_events = first["events"].as_array().expect("events").clone();
        assert_eq!(versions(&first_events), [2, 3, 4, 5], "{db}: the creation has no IM event");
        assert_eq!(first["next_after"], 5);
        let (_, rest) = app.get("/v1/rooms/h1/events?after_version=5").await;
        let rest_events = rest["events"].as_array().expect("events").clone();
        assert_eq!(versions(&rest_events), [6, 7, 8, 9, 10], "{db}");
        assert_eq!(rest["next_after"], 10);
        let all: Vec<Value> = first_events.into_iter().chain(rest_events).collect();
        assert_eq!(all, committed(&db, "h1").await, "{db}: exactly the committed envelopes");
        // And exactly what IM received, element for element.
        im_holds(&im, &group(&app, "h1"), all.len()).await;
        let received: Vec<Value> = im
            .messages(&group(&app, "h1"))
            .iter()
            .map(|m| serde_json::from_str(&m.data).expect("IM data is JSON"))
            .collect();
        assert_eq!(all, received, "{db}");
        // Nothing after the room's version yet: recovered, no events, next_after stays.
        let (_, none) = app.get("/v1/rooms/h1/events?after_version=10").await;
        assert_eq!(
            (none["recovered"].as_bool(), none["events"].as_array().map(Vec::len)),
            (Some(true), Some(0))
        );
        assert_eq!(none["next_after"], 10);
        app.stop().await;
    }
}

#[tokio::test]
async fn a_catch_up_from_beyond_the_history_answers_recovered_false() {
    let db = TestDb::sqlite().await;
    let overrides = [("rooms.history.max_events", "3"), ("rooms.history.max_age", "1s")];
    let app = TestApp::start(settings(db.url(), None, &overrides)).await;
    let version = fill(&app, "h2", "b", &["bob"], 5).await;
    assert_eq!(version, 7);
    let (_, old) = app.get("/v1/rooms/h2/events?after_version=2").await;
    assert_eq!(old["recovered"], false, "version 3 is the 5th most recent: {old}");
    assert_eq!((old["events"].as_array().map(Vec::len), old["next_after"].as_u64()), (Some(0), Some(2)));
    let (_, kept) = app.get("/v1/rooms/h2/events?after_version=4").await;
    assert_eq!(
        (kept["recovered"].as_bool(), versions(kept["events"].as_array().unwrap())),
        (Some(true), vec![5, 6, 7])
    );
    // Once older than max_age, even the most recent are gone.
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let (_, aged) = app.get("/v1/rooms/h2/events?after_version=6").await;
    assert_eq!(aged["recovered"], false, "{aged}");
    app.stop().await;
}

#[tokio::test]
async fn bad_queries_answer_400_naming_the_parameter_and_unknown_rooms_404_over_http_and_grpc() {
    let db = TestDb::sqlite().await;
    let app = TestApp::start(settings(db.url(), None, &[])).await;
    fill(&app, "h3", "c", &["bob"], 1).await;
    for (query, field) in [
        ("after_version=-1", "after_version"),
        ("after_version=abc", "after_version"),
        ("after_version=4", "after_version"),
        ("after_version=18446744073709551615", "after_version"),
        ("limit=0", "limit"),
        ("limit=301", "limit"),
        ("limit=ten", "limit"),
        ("after=3", "after"),
        // A repeated parameter is refused, not settled by whichever value comes last.
        ("after_version=1&after_version=2", "after_version"),
        ("limit=1&limit=300", "limit"),
    ] {
        let (status, body) = app.get(&format!("/v1/rooms/h3/events?{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["error"]["code"], "invalid_argument", "{query}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.starts_with(field), "{query}: {message} does not name {field}");
    }
    let (status, body) = app.get("/v1/rooms/nowhere/events").await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("room_not_found")));

    let channel = tonic::transport::Channel::from_shared(format!("http://{}", app.app.grpc_addr))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let mut rooms = RoomServiceClient::new(channel);
    let ask = |room: &str, after_version: u64, limit: u32| pb::ListEventsRequest {
        room_id: room.into(),
        after_version,
        limit,
    };
    let page = rooms.list_events(ask("h3", 0, 0)).await.expect("list events").into_inner();
    assert_eq!((page.room_version, page.recovered, page.next_after), (3, true, 3));
    let envelopes: Vec<Value> =
        page.events.iter().map(|e| serde_json::from_str(e).expect("JSON text")).collect();
    assert_eq!(envelopes, committed(&db, "h3").await);
    for (request, field) in [
        (ask("h3", 4, 0), "after_version"),
        (ask("h3", u64::MAX, 0), "after_version"),
        (ask("h3", 0, 301), "limit"),
    ] {
        let status = rooms.list_events(request).await.expect_err("refused");
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(status.message().starts_with(field), "{status:?}");
    }
    let status = rooms.list_events(ask("nowhere", 0, 0)).await.expect_err("refused");
    assert_eq!(status.code(), Code::NotFound);
    app.stop().await;
}

/// Runs the reference client over what IM received for `room`; its JSON report.
async fn reference_client(im_url: &str, group: &str, service: &str, room: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "tests/peer/room_client.py".to_owned(),
        "--im".into(),
        im_url.into(),
        "--group".into(),
        group.into(),
        "--service".into(),
        service.into(),
        "--room".into(),
        room.into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let output = tokio::process::Command::new("python3")
        .args(&args)
        .kill_on_drop(true)
        .output()
        .await
        .expect("python3 must be installed");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "room_client.py failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("room_client.py printed {stdout}: {e}"))
}

#[tokio::test]
async fn the_reference_client_rebuilds_every_version_under_duplicates_reorders_an_offline_window_and_a_restart()
 {
    for db in backends().await {
        let im = fake_im().await;
        let overrides = [("outbox_worker.enabled", "true")];
        let app = TestApp::start(settings(db.url(), Some(&im), &overrides)).await;
        let group = group(&app, "h4");
        fill(&app, "h4", "d", &["bob", "carol"], 10).await;
        app.settle().await;
        let before_offline = im.messages(&group).len();
        // The phone is offline for two seconds while the room goes on.
        let started = tokio::time::Instant::now();
        let mut n = 0;
        while started.elapsed() < Duration::from_secs(2) {
            more(&app, "h4", &format!("e{n}"), &["bob", "carol"], 1).await;
            n += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        app.settle().await;
        let after_offline = im.messages(&group).len();
        // The node restarts; the room goes on on the new process.
        app.stop().await;
        let app = TestApp::start(settings(db.url(), Some(&im), &overrides)).await;
        let version = more(&app, "h4", "f", &["bob", "carol", "dave"], 8).await;
        app.settle().await;
        // IM-side duplicates too: the same message accepted twice (a re-delivery after a timeout).
        let offline = format!("{before_offline}:{after_offline}");
        let report = reference_client(
            &im.base_url(),
            &group,
            &app.base,
            "h4",
            &["--duplicate-every", "3", "--shuffle-window", "4", "--offline", &offline, "--seed", "11"],
        )
        .await;
        assert_eq!(report["position"].as_u64(), Some(version), "{db}: {report}");
        let shown = shown(&report);
        assert_eq!(versions(&shown), (2..=version).collect::<Vec<_>>(), "{db}: every version once, in order");
        assert_eq!(shown, committed(&db, "h4").await, "{db}: exactly the committed envelopes");
        assert!(
            report["api_calls"].as_u64() > Some(0),
            "{db}: the offline window was filled from the API: {report}"
        );
        assert!(report["duplicates_dropped"].as_u64() > Some(0), "{db}: {report}");
        assert_eq!(report["reloads"], 0, "{db}: {report}");
        app.stop().await;
    }
}

#[tokio::test]
async fn the_reference_client_reloads_the_state_when_its_gap_is_older_than_the_history() {
    let db = TestDb::sqlite().await;
    let im = fake_im().await;
    let app = TestApp::start(settings(db.url(), Some(&im), &[("rooms.history.max_events", "5")])).await;
    let group = group(&app, "h5");
    let version = fill(&app, "h5", "g", &["bob"], 20).await;
    app.settle().await;
    let received = im.messages(&group).len();
    // Offline for everything but the last two messages: 19 versions missed, 5 kept.
    let offline = format!("0:{}", received - 2);
    let report = reference_client(&im.base_url(), &group, &app.base, "h5", &["--offline", &offline]).await;
    assert_eq!(report["reloads"], 1, "{report}");
    assert_eq!(report["position"].as_u64(), Some(version), "{report}");
    app.stop().await;
}

/// Sends `gifts` gifts to `room` at once from `members` (already joined), `tag`-named.
async fn burst(app: &TestApp, room: &str, tag: &str, members: &[&str], gifts: usize) {
    let sends = (0..gifts).map(|n| {
        let body = json!({"command_id": format!("{tag}-{n}"), "sender_id": members[n % members.len()],
            "receiver_id": "alice", "gift_id": "rose", "count": 1, "unit_value": 10});
        let path = format!("/v1/rooms/{room}/gifts");
        async move { app.post(&path, body).await }
    });
    for (status, answer) in futures::future::join_all(sends).await {
        assert_eq!(status, 200, "{answer}");
    }
}

/// How far out of order IM received the versions of `group`: the largest number of versions a
/// message arrived ahead of (0: in order).
fn displacement(im: &room_service_fakes::fake_im::FakeIm, group: &str) -> u64 {
    let mut highest = 0u64;
    let mut most = 0;
    for message in im.messages(group) {
        let envelope: Value = serde_json::from_str(&message.data).expect("envelope");
        let version = envelope["room_version"].as_u64().expect("room_version");
        most = most.max(highest.saturating_sub(version));
        highest = highest.max(version);
    }
    most
}

#[tokio::test]
async fn with_four_messages_in_flight_im_gets_a_room_out_of_order_and_the_reference_client_rebuilds_it() {
    for db in backends().await {
        let im = fake_im().await;
        im.set_latency(Duration::from_millis(20));
        im.set_jitter(Duration::from_millis(60));
        let overrides = [
            ("outbox_worker.enabled", "true"),
            ("im_batch.in_flight_per_room", "4"),
            ("im_batch.max_events", "2"),
        ];
        let app = TestApp::start(settings(db.url(), Some(&im), &overrides)).await;
        let group = group(&app, "h6");
        fill(&app, "h6", "k", &["bob", "carol"], 0).await;
        burst(&app, "h6", "k1", &["bob", "carol"], 80).await;
        // The node restarts between two bursts.
        app.stop().await;
        let app = TestApp::start(settings(db.url(), Some(&im), &overrides)).await;
        burst(&app, "h6", "k2", &["bob", "carol"], 80).await;
        let (_, room) = app.get("/v1/rooms/h6").await;
        let version = room["version"].as_u64().expect("version");
        assert_eq!(version, 163, "{db}: create, 2 joins, 160 gifts");
        // Everything reaches IM (the worker sends what a lane gave up).
        im_holds(&im, &group, (version - 1) as usize).await;
        let out_of_order = displacement(&im, &group);
        assert!(out_of_order > 0, "{db}: four messages in flight with jitter reached IM in order");
        let report =
            reference_client(&im.base_url(), &group, &app.base, "h6", &["--duplicate-every", "5"]).await;
        let shown = shown(&report);
        assert_eq!(
            versions(&shown),
            (2..=version).collect::<Vec<_>>(),
            "{db}: every version once, in order: {report}"
        );
        assert_eq!(shown, committed(&db, "h6").await, "{db}: exactly the committed envelopes");
        assert_eq!(report["reloads"], 0, "{db}: {report}");
        app.stop().await;
    }
}

#[tokio::test]
async fn with_one_message_in_flight_im_gets_a_room_in_order() {
    let db = TestDb::sqlite().await;
    let im = fake_im().await;
    im.set_latency(Duration::from_millis(20));
    im.set_jitter(Duration::from_millis(60));
    let overrides = [("outbox_worker.enabled", "true"), ("im_batch.max_events", "2")];
    let app = TestApp::start(settings(db.url(), Some(&im), &overrides)).await;
    let group = group(&app, "h7");
    fill(&app, "h7", "o", &["bob", "carol"], 0).await;
    burst(&app, "h7", "o1", &["bob", "carol"], 60).await;
    // The lane falls behind this burst and gives the room to the worker, which keeps the order.
    im_holds(&im, &group, 62).await;
    app.stop().await;
    assert_eq!(im.messages(&group).len(), 62, "every event reached IM once");
    assert_eq!(displacement(&im, &group), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_client_rebuilds_a_room_whose_owner_died_in_a_three_node_cluster() {
    let nodes = crate::cluster::Nodes::start(3, &[]).await;
    let gift = |id: String, sender: &str| json!({"command_id": id, "sender_id": sender, "receiver_id": "o", "gift_id": "rose", "count": 1, "unit_value": 10});
    let create = json!({"command_id": "mv-create", "room_id": "mv", "owner_id": "o", "title": "t"});
    assert_eq!(nodes.post(0, "/v1/rooms", create).await.0, 200);
    let owner = nodes.owner(0, "mv").await;
    let via = (owner + 1) % 3;
    for user in ["bob", "carol"] {
        let (status, body) = nodes
            .post(via, "/v1/rooms/mv/join", json!({"command_id": format!("mv-j-{user}"), "user_id": user}))
            .await;
        assert_eq!(status, 200, "{body}");
    }
    for n in 0..20 {
        let (status, body) = nodes.post(via, "/v1/rooms/mv/gifts", gift(format!("mv-a{n}"), "bob")).await;
        assert_eq!(status, 200, "{body}");
    }
    // The owner dies; the room moves to another node within the lease's TTL and goes on there.
    nodes.signal(owner, "-KILL");
    nodes.wait_exit(owner).await;
    let mut sent = 0;
    let started = tokio::time::Instant::now();
    while sent < 20 {
        let (status, _) = nodes.post(via, "/v1/rooms/mv/gifts", gift(format!("mv-b{sent}"), "carol")).await;
        if status == 200 {
            sent += 1;
        } else {
            assert!(started.elapsed() < crate::cluster::TTL * 4, "the room never moved");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    assert_ne!(nodes.owner(via, "mv").await, owner);
    nodes.all_delivered(Duration::from_secs(30)).await;
    let group = nodes
        .im
        .all_messages()
        .into_iter()
        .find(|m| m.data.contains("\"room_id\":\"mv\""))
        .map(|m| m.group)
        .expect("the room's events reached IM");
    // The phone read IM through a reconnect: a stretch of messages lost, some twice, reordered.
    let service = format!("http://127.0.0.1:{}", nodes.nodes[via].port);
    let report = reference_client(
        &nodes.im.base_url(),
        &group,
        &service,
        "mv",
        &["--offline", "10:25", "--duplicate-every", "4", "--shuffle-window", "3"],
    )
    .await;
    let (_, room) = nodes.get(via, "/v1/rooms/mv").await;
    let version = room["version"].as_u64().expect("version");
    assert_eq!(version, 43, "create, 2 joins, 40 gifts");
    let shown = shown(&report);
    assert_eq!(versions(&shown), (2..=version).collect::<Vec<_>>(), "{report}");
    assert_eq!(shown, committed(&nodes.db, "mv").await);
    assert!(report["api_calls"].as_u64() > Some(0), "{report}");
}

/// IM calls it takes `rooms` rooms, each sent 10 gifts one after another (all rooms at once),
/// to reach IM with `in_flight` messages a room when the app-wide quota (20 calls/s) binds.
async fn calls_under_the_app_quota(in_flight: &str, rooms: usize) -> usize {
    let db = TestDb::sqlite().await;
    let im = fake_im().await;
    im.set_latency(Duration::from_millis(20));
    let overrides = [
        ("outbox_worker.enabled", "true"),
        ("im_batch.in_flight_per_room", in_flight),
        ("im_rate_limit.global_per_sec", "20"),
        ("im_rate_limit.per_group_per_sec", "20"),
    ];
    let app = TestApp::start(settings(db.url(), Some(&im), &overrides)).await;
    let names: Vec<String> = (0..rooms).map(|n| format!("q{n}")).collect();
    for room in &names {
        fill(&app, room, room, &["bob"], 0).await;
    }
    for room in &names {
        im_holds(&im, &group(&app, room), 1).await;
    }
    im.clear();
    let tags: Vec<String> = names.iter().map(|room| format!("{room}b")).collect();
    futures::future::join_all(names.iter().zip(&tags).map(|(room, tag)| more(&app, room, tag, &["bob"], 10)))
        .await;
    for room in &names {
        im_holds(&im, &group(&app, room), 10).await;
        assert_eq!(
            im.messages(&group(&app, room)).len(),
            10,
            "k = {in_flight}: {room}'s 10 gifts, each once"
        );
    }
    let calls = im.call_times().len();
    app.stop().await;
    calls
}

#[tokio::test]
async fn with_four_messages_in_flight_a_room_takes_no_more_of_the_app_quota_than_with_one() {
    // 16 rooms take gifts one after another while their messages wait at a quota of 20
    // calls/s: a room's next message opens only once none of its own waits at the limit, so a
    // room's gifts gather in its waiting message instead of spreading over four calls.
    let one = calls_under_the_app_quota("1", 16).await;
    let four = calls_under_the_app_quota("4", 16).await;
    // Measured: about as many calls either way (21 and 21 idle; 24 and 19 with the machine's
    // two cores busy); without the rule, k = 4 made 50 where k = 1 made 21. The margin is for
    // a loaded machine, whose slower commands reach the limit in more, smaller messages.
    assert!(four * 2 <= one * 3, "k = 4 made {four} IM calls where k = 1 made {one}");
}

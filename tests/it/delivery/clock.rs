//! Fault row 5, clock skew: nodes with their clocks 10 minutes ahead and 10 minutes behind.
//!
//! - Two nodes drain one backlog together (`faketime`, wall clock only). Leases live on the
//!   database's clock, so neither node reclaims the other's rows early nor keeps its own past
//!   their time: no lease is lost, no event is sent twice, every event is delivered.
//! - Three nodes — exact, ahead, behind, under plain `faketime` as an operator would run it
//!   (its `CLOCK_MONOTONIC` is the faked wall clock too) — share an IM outage's backlog, then IM
//!   comes back slow: every room drains (issue #37: a node whose clock is not the kernel's
//!   waited for a rate-limit permit on a thread that never woke, holding its rooms' heads).

use std::time::Duration;

use room_service::domain::EventType;
use room_service_fakes::fake_im::{FakeIm, FakeImOptions, Fault};
use serde_json::json;

use super::{Node, eventually, metric, undelivered};
use crate::outbox::harness::{ADMIN, APP, Db, KEY};
use crate::support::TestDb;

// More rooms than one claim takes (a batch of 100 rows, one room's share at least one row): a
// room is worked by one node at a time — the other finds its head held — so both nodes hold
// rooms only when there are more rooms than one claim covers.
const ROOMS: usize = 200;
const PER_ROOM: usize = 4;

/// Checks that `faketime` is there; a fresh MariaDB database and its URL.
async fn skew_setup() -> (TestDb, String) {
    if std::process::Command::new("faketime").arg("--version").output().is_err() {
        panic!("faketime is not installed (scripts/test.sh installs Debian's faketime package)");
    }
    let test_db = TestDb::mysql().await;
    let db_url = test_db.url().to_owned();
    (test_db, db_url)
}

#[tokio::test]
async fn nodes_ten_minutes_ahead_and_behind_never_steal_or_keep_leases() {
    let (test_db, db_url) = skew_setup().await;
    let outbox = Db::over(test_db);
    let mut options = FakeImOptions::new(APP, KEY, ADMIN);
    // Rows inserted straight into the outbox, no RoomCreated among them: every group exists.
    options.require_groups = false;
    (options.per_group_limit_per_sec, options.global_limit_per_sec) = (None, None);
    // Slow enough that both nodes hold claims for a while.
    options.latency = Duration::from_millis(20);
    let im = FakeIm::start(options).await;
    for room in 0..ROOMS {
        outbox.insert_events(&format!("skew-{room}"), &[EventType::RoomUserJoined; PER_ROOM]).await;
    }

    let skewed = |node_id: &str, offset: &str| {
        let mut node = Node::new(&db_url, &im);
        node.node_id = node_id.into();
        // The wall clock only: tokio's timers run on the monotonic clock, which no node can skew.
        node.wrapper =
            ["env", "FAKETIME_DONT_FAKE_MONOTONIC=1", "faketime", "-f", offset].map(str::to_owned).to_vec();
        node
    };
    let (ahead, behind) = (skewed("ahead", "+10m"), skewed("behind", "-10m"));
    let mut children = [ahead.spawn(), behind.spawn()];
    let db = outbox.test_db();
    eventually("both nodes drain the backlog", Duration::from_secs(90), || async {
        undelivered(db).await == 0
    })
    .await;
    let (ahead_metrics, behind_metrics) = (ahead.metrics().await, behind.metrics().await);
    // Each node stamps the events of the commands it runs with its own clock.
    let mut skew = Vec::new();
    for node in [&ahead, &behind] {
        let body = serde_json::json!({"command_id": node.node_id, "room_id": node.node_id, "owner_id": "o", "title": "t"});
        let url = format!("http://127.0.0.1:{}/v1/rooms", node.port);
        let answer: serde_json::Value =
            reqwest::Client::new().post(url).json(&body).send().await.unwrap().json().await.unwrap();
        let event_id = answer["events"][0]["event_id"].as_str().unwrap().to_owned();
        let row = db.outbox_row(&event_id).await;
        let envelope: serde_json::Value = serde_json::from_str(&row.envelope).unwrap();
        // The node's clock at the command minus the database's at its insert.
        skew.push((envelope["occurred_at_ms"].as_i64().unwrap() - row.created_at_ms) as f64 / 1000.0);
    }
    for child in &mut children {
        Node::stop(child);
    }

    // The clocks really were skewed.
    assert!(
        (skew[0] - 600.0).abs() < 60.0 && (skew[1] + 600.0).abs() < 60.0,
        "node clock - db clock: {skew:?} s"
    );

    let claimed = |text: &str| metric(text, "room_outbox_claimed_total").unwrap_or(0.0);
    let lost = |text: &str| metric(text, "room_outbox_lease_lost_total").unwrap_or(-1.0);
    let stats = im.stats();
    eprintln!(
        "row 5 clock skew ({skew:?} s): claims ahead {} / behind {}, leases lost {} / {}, {} events, {} sent twice",
        claimed(&ahead_metrics),
        claimed(&behind_metrics),
        lost(&ahead_metrics),
        lost(&behind_metrics),
        stats.accepted,
        stats.duplicates
    );
    assert!(claimed(&ahead_metrics) > 0.0 && claimed(&behind_metrics) > 0.0, "both nodes claimed rows");
    assert_eq!((lost(&ahead_metrics), lost(&behind_metrics)), (0.0, 0.0), "a lease was taken early");
    assert_eq!(stats.accepted, (ROOMS * PER_ROOM) as u64, "{stats:?}");
    // (RoomCreated of the two probe commands is not an IM event.)
    assert_eq!(stats.duplicates, 0, "an event was sent twice: {stats:?}");
}

const OUTAGE_ROOMS: usize = 8;
const OUTAGE_JOINS: usize = 60;
/// How long the backlog may take to drain once IM is back: two calls of 1 s per room's head,
/// retries one `poll_interval` apart, and a wide margin for two loaded cores. Before the fix a
/// room whose head a skewed node held never drained.
const OUTAGE_DRAIN_BOUND: Duration = Duration::from_secs(45);

#[tokio::test]
async fn an_outage_backlog_drains_on_nodes_whose_clocks_are_ten_minutes_apart() {
    let (test_db, db_url) = skew_setup().await;
    // Tencent's limits (200 calls/s, 40/s per group): the nodes' workers wait for permits.
    let im = FakeIm::start(FakeImOptions::new(APP, KEY, ADMIN)).await;
    // A transient outage (10002) from the start.
    im.inject(Fault::ErrorCode(10_002), u32::MAX);
    let node = |node_id: &str, offset: Option<&str>| {
        let mut node = Node::new(&db_url, &im);
        node.node_id = node_id.into();
        // The settings: small claims, a 200 ms poll, Tencent's 3 s timeout.
        for (key, value) in [("POLL_INTERVAL", "200ms"), ("PUBLISH_TIMEOUT", "3s"), ("BATCH_SIZE", "10")] {
            node.env.push((format!("ROOM_SERVICE__OUTBOX_WORKER__{key}"), value.into()));
        }
        if let Some(offset) = offset {
            // Plain faketime: the monotonic clock is faked too.
            node.wrapper = ["faketime", "-f", offset].map(str::to_owned).to_vec();
        }
        node
    };
    let exact = node("exact", None);
    let skewed = [node("ahead", Some("+600s")), node("behind", Some("-600s"))];
    let http = reqwest::Client::new();
    let ready = |port: u16| {
        let http = http.clone();
        async move {
            let url = format!("http://127.0.0.1:{port}/readyz");
            http.get(url).send().await.is_ok_and(|r| r.status() == 200)
        }
    };
    // The exact node first: it runs the migrations.
    let mut children = vec![exact.spawn()];
    eventually("the exact node serves", Duration::from_secs(30), || ready(exact.port)).await;
    children.extend(skewed.iter().map(Node::spawn));
    for node in &skewed {
        eventually("a skewed node serves", Duration::from_secs(30), || ready(node.port)).await;
    }

    // The commands go through the exact node while IM is down.
    let post = |path: String, body: serde_json::Value| {
        let url = format!("http://127.0.0.1:{}{path}", exact.port);
        let http = http.clone();
        async move {
            let response = http.post(url).json(&body).send().await.expect("the exact node answers");
            assert_eq!(response.status(), 200, "{}", response.text().await.unwrap_or_default());
        }
    };
    for room in 0..OUTAGE_ROOMS {
        let body = json!({"command_id": format!("c{room}"), "room_id": format!("r{room}"), "owner_id": "o", "title": "t"});
        post("/v1/rooms".into(), body).await;
    }
    for join in 0..OUTAGE_JOINS {
        let body = json!({"command_id": format!("j{join}"), "user_id": format!("u{join}")});
        post(format!("/v1/rooms/r{}/join", join % OUTAGE_ROOMS), body).await;
    }
    // Every node's worker retries the backlog through the outage.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let db = &test_db;
    let retries: i64 =
        db.scalar("SELECT CAST(COALESCE(SUM(retry_count), 0) AS SIGNED) FROM room_outbox").await.unwrap_or(0);

    // IM is back, at 1 s a call.
    im.clear();
    im.set_latency(Duration::from_secs(1));
    let back = tokio::time::Instant::now();
    let mut drained = None;
    while back.elapsed() < OUTAGE_DRAIN_BOUND {
        if undelivered(db).await == 0 {
            drained = Some(back.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stuck: Vec<(String, i64)> = match drained {
        Some(_) => Vec::new(),
        None => {
            let rows = db.outbox().await;
            rows.into_iter().filter(|r| r.status != "delivered").map(|r| (r.status, r.id)).collect()
        }
    };
    let metrics = [exact.metrics().await, skewed[0].metrics().await, skewed[1].metrics().await];
    for child in &mut children {
        Node::stop(child);
    }
    let claimed: Vec<f64> =
        metrics.iter().map(|text| metric(text, "room_outbox_claimed_total").unwrap_or(0.0)).collect();
    let sends = im.sends_by_event();
    let twice = sends.values().filter(|s| s.received > 1).count();
    eprintln!(
        "row 5 outage across skewed nodes: {retries} failed attempts in the outage, claims exact / ahead / behind {claimed:?}, drained {drained:?} after IM came back, {} events received, {twice} twice",
        sends.values().filter(|s| s.received > 0).count(),
    );
    assert!(
        drained.is_some(),
        "not drained {OUTAGE_DRAIN_BOUND:?} after IM came back; undelivered (status, id): {stuck:?}"
    );
    assert!(claimed[1] > 0.0 && claimed[2] > 0.0, "the skewed nodes took part: {claimed:?}");
    let received = sends.values().filter(|s| s.received > 0).count();
    assert_eq!(received, OUTAGE_JOINS, "every join reached IM");
    // Nothing IM accepted was in flight when it came back (the outage refused every call, and a
    // call of 1 s ends well within the 3 s timeout): no event may reach it twice.
    assert_eq!(twice, 0, "events received twice");
}

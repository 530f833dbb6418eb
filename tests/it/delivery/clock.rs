//! Fault row 5, clock skew: two nodes drain one backlog together, one with its clock 10 minutes
//! ahead and one 10 minutes behind (`faketime`, wall clock only). Leases live on the database's
//! clock, so neither node reclaims the other's rows early nor keeps its own past their time:
//! no lease is lost, no event is sent twice, every event is delivered.

use std::time::Duration;

use room_service::domain::EventType;
use room_service::fake_im::{FakeIm, FakeImOptions};

use super::{Node, eventually, metric, undelivered};
use crate::outbox::harness::{ADMIN, APP, Db, KEY};
use crate::support::TestDb;

// More rooms than one claim takes (a batch of 100 rows, one room's share at least one row): a
// room is worked by one node at a time — the other finds its head held — so both nodes hold
// rooms only when there are more rooms than one claim covers.
const ROOMS: usize = 200;
const PER_ROOM: usize = 4;

#[tokio::test]
async fn nodes_ten_minutes_ahead_and_behind_never_steal_or_keep_leases() {
    if std::process::Command::new("faketime").arg("--version").output().is_err() {
        panic!("faketime is not installed (scripts/test.sh installs Debian's faketime package)");
    }
    let test_db = TestDb::mysql().await;
    let db_url = test_db.url().to_owned();
    let outbox = Db::over(test_db);
    let mut options = FakeImOptions::new(APP, KEY, ADMIN);
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

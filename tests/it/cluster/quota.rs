//! One IM quota for the cluster: three room-service processes drain one backlog on one MariaDB
//! database, taking their app-wide permits from one GCRA key in a private Redis. While Redis is
//! up the fake IM never sees more than the app's quota in any sliding second although each node
//! alone would send all of it; when Redis dies mid-run each node falls back to a third of it;
//! when Redis comes back they share it again; and nothing is lost.
//!
//! The limits are Tencent's scaled by 0.3 (60 calls/s per app; ours 57, the margin of 190 vs
//! 200) to keep the run short on two cores. The figures are printed:
//! `cargo test --test it cluster::quota -- --nocapture`.

use std::collections::HashMap;
use std::time::Duration;

use room_service::domain::EventType;
use room_service_fakes::fake_im::{FakeIm, FakeImOptions, busiest_window};
use tokio::time::Instant;

use crate::delivery::{Node, metric};
use crate::outbox::harness::{ADMIN, APP, Db, KEY};
use crate::support::{PrivateRedis, TestDb};

/// The app's quota at the fake IM (Tencent's 200/s, scaled).
const APP_QUOTA: usize = 60;
/// `im_rate_limit.global_per_sec` of every node.
const GLOBAL: u32 = 57;
const NODES: u32 = 3;
const ROOMS: usize = 40;
const PER_ROOM: usize = 20;

/// Worker publishes a node has delivered (its `/metrics` text).
fn delivered_by_worker(text: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with("room_outbox_publish_success_total{"))
        .filter(|l| l.contains(r#"path="worker""#) && l.contains(r#"result="delivered""#))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn every_node(nodes: &[Node], check: impl Fn(&str) -> bool) -> bool {
    for node in nodes {
        if !check(&node.metrics().await) {
            return false;
        }
    }
    true
}

async fn wait_for(what: &str, limit: Duration, mut check: impl AsyncFnMut() -> bool) {
    let give_up = Instant::now() + limit;
    while !check().await {
        assert!(Instant::now() < give_up, "gave up waiting: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_share_one_quota_and_each_falls_back_to_a_third_when_redis_dies() {
    let test_db = TestDb::mysql().await;
    let db_url = test_db.url().to_owned();
    let outbox = Db::over(test_db);
    let mut options = FakeImOptions::new(APP, KEY, ADMIN);
    // Rows inserted straight into the outbox, no RoomCreated among them: every group exists.
    options.require_groups = false;
    (options.per_group_limit_per_sec, options.global_limit_per_sec) = (None, Some(APP_QUOTA as u32));
    options.latency = Duration::from_millis(5);
    let im = FakeIm::start(options).await;
    let mut redis = PrivateRedis::start();
    let mut sent = Vec::new();
    for room in 0..ROOMS {
        sent.extend(
            outbox.insert_events(&format!("quota-{room}"), &[EventType::RoomUserJoined; PER_ROOM]).await,
        );
    }

    let nodes: Vec<Node> = (0..NODES)
        .map(|n| {
            let mut node = Node::new(&db_url, &im);
            node.node_id = format!("quota-{n}");
            node.env = [
                ("ROOM_SERVICE__REDIS__URL", redis.url()),
                ("ROOM_SERVICE__CLUSTER__EXPECTED_NODES", NODES.to_string()),
                ("ROOM_SERVICE__IM_RATE_LIMIT__GLOBAL_PER_SEC", GLOBAL.to_string()),
                // Each node's worker alone would take the whole quota: three times it together.
                ("ROOM_SERVICE__IM_RATE_LIMIT__WORKER_SHARE", "1".to_owned()),
                // One event a call: the quota counts calls, and this test counts events as calls.
                ("ROOM_SERVICE__IM_BATCH__MAX_EVENTS", "1".to_owned()),
                // Claims by room keep a room at the node holding it: small claims spread the
                // 40 rooms over the three nodes, so each keeps publishing (and finds Redis back).
                ("ROOM_SERVICE__OUTBOX_WORKER__BATCH_SIZE", "8".to_owned()),
            ]
            .map(|(k, v)| (k.to_owned(), v))
            .to_vec();
            node
        })
        .collect();
    let mut children: Vec<_> = nodes.iter().map(Node::spawn).collect();

    // Redis up: the three drain together for a few seconds on the shared quota.
    wait_for("the drain is under way", Duration::from_secs(60), async || im.call_times().len() >= 200).await;
    let sharing = every_node(&nodes, |m| metric(m, "room_im_quota_fallback") == Some(0.0)).await;
    let killed_at = Instant::now();
    redis.kill();

    // Redis gone: every node falls back to its share of 57 / 3 = 19 calls per second.
    wait_for("every node falls back", Duration::from_secs(20), async || {
        every_node(&nodes, |m| metric(m, "room_im_quota_fallback") == Some(1.0)).await
    })
    .await;
    let share = GLOBAL / NODES;
    let mut before = Vec::new();
    for node in &nodes {
        before.push(delivered_by_worker(&node.metrics().await));
    }
    let sampled_at = Instant::now();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let mut per_node = Vec::new();
    for (node, before) in nodes.iter().zip(before) {
        per_node.push(delivered_by_worker(&node.metrics().await) - before);
    }
    let sampled_for = sampled_at.elapsed().as_secs_f64();

    // Redis back where it was (empty): each node finds it on its next publish a second or
    // more after its last try.
    let _redis = PrivateRedis::start_on(redis.port);
    let restarted_at = Instant::now();
    wait_for("every node shares the quota again", Duration::from_secs(20), async || {
        every_node(&nodes, |m| metric(m, "room_im_quota_fallback") == Some(0.0)).await
    })
    .await;
    let recovered_at = Instant::now();

    let db = outbox.test_db();
    wait_for("every event delivered", Duration::from_secs(120), async || {
        db.scalar("SELECT COUNT(*) FROM room_outbox WHERE status <> 'delivered'").await.unwrap_or(-1) == 0
    })
    .await;
    for child in &mut children {
        let _ = child.kill();
        let _ = child.wait();
    }

    let calls = im.call_times();
    let up: Vec<Instant> = calls.iter().copied().filter(|t| *t < killed_at).collect();
    // Calls Redis granted just before the kill may still arrive just after it.
    let down_from = killed_at + Duration::from_millis(250);
    let down: Vec<Instant> =
        calls.iter().copied().filter(|t| (down_from..restarted_at).contains(t)).collect();
    let again: Vec<Instant> = calls.iter().copied().filter(|t| *t >= recovered_at).collect();
    let rate = |times: &[Instant]| match (times.first(), times.last()) {
        (Some(first), Some(last)) if last > first => {
            (times.len() - 1) as f64 / (*last - *first).as_secs_f64()
        }
        _ => 0.0,
    };
    let most = |times: &[Instant]| busiest_window(times, Duration::from_secs(1));
    let (most_up, most_down, most_again) = (most(&up), most(&down), most(&again));
    let stats = im.stats();
    let node_rates: Vec<String> = per_node.iter().map(|d| format!("{:.1}/s", d / sampled_for)).collect();
    eprintln!(
        "cluster quota, 3 nodes × worker at {GLOBAL}/s: Redis up {} calls ({:.1}/s), at most {most_up} in one second; \
         Redis down {} calls ({:.1}/s), at most {most_down} in one second, per node {node_rates:?} (share {share}/s); \
         every node sharing again {:.1} s after Redis restarted, then {} calls ({:.1}/s), at most {most_again} in one second; \
         fake IM {stats:?}",
        up.len(),
        rate(&up),
        down.len(),
        rate(&down),
        (recovered_at - restarted_at).as_secs_f64(),
        again.len(),
        rate(&again),
    );

    assert!(sharing, "every node took its permits from Redis before the kill");
    assert!(most_up <= APP_QUOTA, "{most_up} calls in one second with Redis up, quota {APP_QUOTA}");
    assert!(most_down <= APP_QUOTA, "{most_down} calls in one second in fallback, quota {APP_QUOTA}");
    assert!(most_again <= APP_QUOTA, "{most_again} calls in one second with Redis back, quota {APP_QUOTA}");
    assert!(rate(&up) >= f64::from(GLOBAL) * 0.5, "the shared quota was used: {:.1}/s", rate(&up));
    for (n, delivered) in per_node.iter().enumerate() {
        // At most `share` in any second: over the sample, a second's worth more at its edges.
        let bound = f64::from(share) * (sampled_for + 1.0) + 2.0;
        assert!(
            *delivered <= bound,
            "node {n} delivered {delivered} in {sampled_for:.1} s on a share of {share}/s"
        );
    }
    // Nothing lost: every event reached IM (once, or more after a lost mark).
    let sends = im.sends_by_event();
    let missing: Vec<&String> =
        sent.iter().filter(|id| sends.get(*id).is_none_or(|s| s.received == 0)).collect();
    assert!(missing.is_empty(), "{} of {} events never reached IM: {missing:?}", missing.len(), sent.len());
    let seen: HashMap<_, _> =
        sends.iter().filter(|(_, s)| s.received > 0).map(|(id, s)| (id, s.received)).collect();
    assert_eq!(seen.len(), ROOMS * PER_ROOM);
}

//! SIGKILL in the middle of a drain: the rows a killed worker had sent but not yet marked are
//! sent again after its lease — no more than IM accepted in its last mark interval (a repeat
//! may travel in a pack cut differently, so it is counted per event).

use std::time::Duration;

use room_service::domain::EventType;
use room_service_fakes::fake_im::{FakeIm, FakeImOptions};

use super::{Node, eventually, undelivered};
use crate::outbox::harness::{ADMIN, APP, Db, KEY};
use crate::support::{Spawned, TestDb};

/// The marks of a batch are written at least this often (the worker's promise), plus the time
/// a mark statement takes.
const MARK_WINDOW: Duration = Duration::from_millis(250 + 250);

fn spawn(db_url: &str, im: &FakeIm) -> Spawned {
    Node::new(db_url, im).spawn()
}

#[tokio::test]
async fn sigkill_mid_drain_resends_at_most_what_im_accepted_in_the_last_mark_interval() {
    let test_db = TestDb::mysql().await;
    let db_url = test_db.url().to_owned();
    let outbox = Db::over(test_db);
    let mut options = FakeImOptions::new(APP, KEY, ADMIN);
    // Rows inserted straight into the outbox, no RoomCreated among them: every group exists.
    options.require_groups = false;
    (options.per_group_limit_per_sec, options.global_limit_per_sec) = (None, None);
    options.latency = Duration::from_millis(5);
    let im = FakeIm::start(options).await;
    const ROOMS: usize = 30;
    const PER_ROOM: usize = 60;
    for room in 0..ROOMS {
        outbox.insert_events(&format!("room-{room}"), &[EventType::RoomUserJoined; PER_ROOM]).await;
    }

    let mut first = spawn(&db_url, &im);
    eventually("the drain is under way", Duration::from_secs(30), || async { im.stats().accepted >= 400 })
        .await;
    let killed_at = tokio::time::Instant::now();
    first.kill().unwrap(); // SIGKILL
    first.wait().unwrap();
    // Sent but maybe not marked: accepted within the last mark interval (or still in flight).
    let recent = im.all_messages().iter().filter(|m| m.accepted_at + MARK_WINDOW >= killed_at).count() as u64;

    let mut second = spawn(&db_url, &im);
    let db = outbox.test_db();
    eventually("the restarted worker delivers the rest", Duration::from_secs(90), || async {
        undelivered(db).await == 0
    })
    .await;
    second.kill().unwrap();
    second.wait().unwrap();
    let stats = im.stats();
    // Every event IM took, and how often: a repeat is recorded again when the restarted
    // worker packed it differently, or dropped by Tencent's Random dedup when it sent the
    // identical pack.
    let sends = im.sends_by_event();
    let reached = sends.values().filter(|s| s.received > 0).count();
    let repeats: u64 = sends.values().map(|s| u64::from(s.received.saturating_sub(1))).sum();
    // The figures, for `cargo test --test it delivery::crash -- --nocapture`.
    eprintln!(
        "sent again: {repeats} ({} by an identical pack); accepted in the last {MARK_WINDOW:?} before the kill: {recent}",
        stats.duplicates
    );
    assert_eq!(reached, ROOMS * PER_ROOM, "every event reached IM: {stats:?}");
    assert!(
        repeats <= recent,
        "{repeats} events sent again, more than the {recent} IM accepted in the last {MARK_WINDOW:?} before the kill"
    );
}

/// SIGKILL of the service while a hot room's lane sends packs: every committed event reaches
/// IM after the restart, first receptions in room order, and repeats only of what IM took
/// in the moments before the kill (packs in flight, marks not yet written).
#[tokio::test]
async fn sigkill_mid_pack_of_a_hot_room_loses_nothing_and_keeps_room_order() {
    let test_db = TestDb::mysql().await;
    let db_url = test_db.url().to_owned();
    let outbox = Db::over(test_db);
    let mut options = FakeImOptions::new(APP, KEY, ADMIN);
    (options.per_group_limit_per_sec, options.global_limit_per_sec) = (Some(40), Some(200));
    options.latency = Duration::from_millis(20);
    let im = FakeIm::start(options).await;
    let node = Node::new(&db_url, &im);
    let mut first = node.spawn();
    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{}", node.port);
    let post = move |path: String, body: serde_json::Value| {
        let (http, url) = (http.clone(), format!("{base}{path}"));
        async move { http.post(url).json(&body).send().await.map(|r| r.status().as_u16()).unwrap_or(0) }
    };
    eventually("the node serves", Duration::from_secs(30), || async {
        post(
            "/v1/rooms".into(),
            serde_json::json!({"command_id": "c", "room_id": "hot", "owner_id": "o", "title": "t"}),
        )
        .await
            == 200
    })
    .await;
    for u in 0..8 {
        let join = serde_json::json!({"command_id": format!("j{u}"), "user_id": format!("u{u}")});
        assert_eq!(post("/v1/rooms/hot/join".into(), join).await, 200);
    }
    // Eight clients send gifts until the node dies under them.
    let senders: Vec<_> = (0..8)
        .map(|u| {
            let post = post.clone();
            tokio::spawn(async move {
                for n in 0.. {
                    let gift = serde_json::json!({"command_id": format!("g{u}-{n}"), "sender_id": format!("u{u}"),
                        "receiver_id": "o", "gift_id": "rose", "count": 1, "unit_value": 1});
                    if post("/v1/rooms/hot/gifts".into(), gift).await != 200 {
                        return;
                    }
                }
            })
        })
        .collect();
    eventually("packs are under way", Duration::from_secs(30), || async { im.stats().accepted >= 300 }).await;
    let killed_at = tokio::time::Instant::now();
    first.kill().unwrap(); // SIGKILL
    first.wait().unwrap();
    for sender in senders {
        sender.await.unwrap();
    }
    let recent = im.all_messages().iter().filter(|m| m.accepted_at + MARK_WINDOW >= killed_at).count();

    let mut second = node.spawn();
    let db = outbox.test_db();
    eventually("the restarted node delivers the rest", Duration::from_secs(90), || async {
        undelivered(db).await == 0
    })
    .await;
    second.kill().unwrap();
    second.wait().unwrap();

    let committed: Vec<String> = db
        .outbox()
        .await
        .into_iter()
        .filter(|r| r.event_type == "RoomGiftSent")
        .map(|r| r.event_id)
        .collect();
    let records = im.messages(&format!("{}hot", crate::outbox::harness::PREFIX));
    let mut first_seen = std::collections::HashSet::new();
    let mut versions = Vec::new();
    for record in &records {
        let id = record.event_id.clone().unwrap_or_default();
        if first_seen.insert(id) {
            versions.push(
                serde_json::from_str::<serde_json::Value>(&record.data).unwrap()["room_version"].as_u64(),
            );
        }
    }
    let lost: Vec<&String> = committed.iter().filter(|id| !first_seen.contains(*id)).collect();
    assert!(lost.is_empty(), "{} committed gifts never reached IM", lost.len());
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "first receptions out of room order");
    // Repeats IM took: recorded again (a retry packed differently) or dropped by its Random dedup.
    let repeats = records.len() - first_seen.len() + im.stats().duplicates as usize;
    eprintln!(
        "hot room SIGKILL: {} gifts, {repeats} repeats, {recent} accepted in the last {MARK_WINDOW:?}",
        committed.len()
    );
    assert!(repeats <= recent, "{repeats} repeats, more than the {recent} IM took just before the kill");
}

//! A live room with IM on (SPEC §12.1): one room taking gifts from many clients at once,
//! against a fake IM holding Tencent's limits (200 calls/s per app, 40 messages/s per group)
//! with a same-region latency. The room's lane packs what is ready into each call, so nothing
//! is refused or dropped, every event arrives in room order, and a command's answer does not
//! wait behind the IM calls of the commands before it.

use std::collections::HashSet;
use std::time::Duration;

use futures::future::join_all;
use serde_json::{Value, json};

use super::{create, eventually, fake_with_limits, start, undelivered, version};
use crate::support::TestDb;
use crate::support::app::TestApp;

/// Gift senders sending at once, each as fast as its answers come.
const SENDERS: usize = 16;
/// Gifts each sender sends.
const GIFTS_EACH: usize = 40;

async fn gift(app: &TestApp, room: &str, sender: &str, n: usize) -> Value {
    let body = json!({
        "command_id": format!("g-{sender}-{n}"), "sender_id": sender, "receiver_id": "o",
        "gift_id": "rose", "count": 1, "unit_value": 1,
    });
    let (status, body) = app.post(&format!("/v1/rooms/{room}/gifts"), body).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// The IM events of a command's answer: (event id, delivery).
fn im_events(answer: &Value) -> Vec<(String, String)> {
    answer["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event_type"] == "RoomGiftSent")
        .map(|e| (e["event_id"].as_str().unwrap().to_owned(), e["delivery"].as_str().unwrap().to_owned()))
        .collect()
}

#[tokio::test]
async fn a_hot_room_packs_its_gifts_within_tencents_limits_in_room_order() {
    let db = TestDb::mysql().await;
    let im = fake_with_limits(Some(200), Some(40)).await;
    im.set_latency(Duration::from_millis(20));
    let app = start(
        &db,
        &im,
        &[("im_rate_limit.global_per_sec", "190"), ("im_rate_limit.per_group_per_sec", "35")],
    )
    .await;
    create(&app, "hot").await;
    let senders: Vec<String> = (0..SENDERS).map(|i| format!("u{i:02}")).collect();
    for user in &senders {
        let body = json!({"command_id": format!("j-{user}"), "user_id": user});
        let (status, body) = app.post("/v1/rooms/hot/join", body).await;
        assert_eq!(status, 200, "{body}");
    }
    let runs = senders.iter().map(|sender| {
        let app = &app;
        async move {
            let mut answers = Vec::with_capacity(GIFTS_EACH);
            for n in 0..GIFTS_EACH {
                answers.push(gift(app, "hot", sender, n).await);
            }
            answers
        }
    });
    let answers: Vec<Value> = join_all(runs).await.into_iter().flatten().collect();
    let sent: Vec<(String, String)> = answers.iter().flat_map(im_events).collect();
    assert_eq!(sent.len(), SENDERS * GIFTS_EACH);

    eventually("every event delivered", Duration::from_secs(60), || async { undelivered(&db).await == 0 })
        .await;
    let stats = im.stats();
    assert_eq!((stats.rate_limited, stats.dropped), (0, 0), "refused or dropped for rate limits: {stats:?}");
    let records = im.messages("hot");
    let at_im: HashSet<&str> = records.iter().filter_map(|m| m.event_id.as_deref()).collect();
    for (id, _) in &sent {
        assert!(at_im.contains(id.as_str()), "{id} never reached IM");
    }
    let versions: Vec<u64> = records.iter().map(|m| version(&m.data)).collect();
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "out of room order: {versions:?}");
    // Sixteen clients outpace 35 calls a second one event at a time: the calls carried packs.
    let most = records.iter().map(|m| m.elements).max().unwrap_or(0);
    assert!(most > 1, "no call carried more than one event: {stats:?}");
    assert!(stats.messages < stats.accepted, "as many calls as events: {stats:?}");
    app.stop().await;
}

#[tokio::test]
async fn a_command_behind_a_call_in_flight_answers_pending_and_is_sent_next() {
    let db = TestDb::mysql().await;
    let im = fake_with_limits(None, None).await;
    im.set_latency(Duration::from_millis(600));
    let app = start(&db, &im, &[("outbox_worker.publish_timeout", "3s")]).await;
    create(&app, "r").await;
    for user in ["a", "b"] {
        let body = json!({"command_id": format!("j-{user}"), "user_id": user});
        assert_eq!(app.post("/v1/rooms/r/join", body).await.0, 200);
    }
    // The first gift's send starts at once and the command waits for it; the second arrives
    // while that call is in flight and answers without waiting for it.
    let first = gift(&app, "r", "a", 0);
    let second = async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        gift(&app, "r", "b", 0).await
    };
    let (first, second) = tokio::join!(first, second);
    assert_eq!(im_events(&first)[0].1, "delivered", "{first}");
    assert_eq!(im_events(&second)[0].1, "pending", "{second}");
    eventually("the second gift reached IM", Duration::from_secs(10), || async {
        im.messages("r").iter().any(|m| m.event_id.as_deref() == Some(im_events(&second)[0].0.as_str()))
    })
    .await;
    app.stop().await;
}

#[tokio::test]
async fn a_command_waits_at_most_sync_publish_wait_for_its_send() {
    let db = TestDb::mysql().await;
    let im = fake_with_limits(None, None).await;
    im.set_latency(Duration::from_millis(1500));
    let app =
        start(&db, &im, &[("outbox_worker.publish_timeout", "3s"), ("rooms.sync_publish_wait", "200ms")])
            .await;
    create(&app, "r").await;
    let body = json!({"command_id": "j-a", "user_id": "a"});
    let (status, answer) = app.post("/v1/rooms/r/join", body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["events"][0]["delivery"], "pending", "{answer}");
    let id = answer["events"][0]["event_id"].as_str().unwrap().to_owned();
    // The lane's call goes on and lands: the worker has nothing to redo.
    eventually("the join reached IM", Duration::from_secs(10), || async {
        im.messages("r").iter().any(|m| m.event_id.as_deref() == Some(id.as_str()))
    })
    .await;
    eventually("marked delivered", Duration::from_secs(10), || async { undelivered(&db).await == 0 }).await;
    assert_eq!(im.sends_by_event()[&id].calls, 1, "sent once");
    app.stop().await;
}

#[tokio::test]
async fn quiet_rooms_take_turns_with_a_hot_room_under_the_app_wide_quota() {
    let db = TestDb::mysql().await;
    let im = fake_with_limits(Some(25), Some(25)).await;
    let app =
        start(&db, &im, &[("im_rate_limit.global_per_sec", "20"), ("im_rate_limit.per_group_per_sec", "20")])
            .await;
    create(&app, "hot").await;
    let quiet: Vec<String> = (0..10).map(|i| format!("q{i}")).collect();
    for room in &quiet {
        create(&app, room).await;
    }
    let senders: Vec<String> = (0..8).map(|i| format!("u{i}")).collect();
    for user in &senders {
        let body = json!({"command_id": format!("j-{user}"), "user_id": user});
        assert_eq!(app.post("/v1/rooms/hot/join", body).await.0, 200);
    }
    // The hot room alone would take every permit of the app for the whole run.
    let load_ends = tokio::time::Instant::now() + Duration::from_secs(4);
    let hot = senders.iter().map(|sender| {
        let app = &app;
        async move {
            let mut n = 0;
            while tokio::time::Instant::now() < load_ends {
                gift(app, "hot", sender, n).await;
                n += 1;
            }
        }
    });
    let quiet_joins = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut ids = Vec::new();
        for room in &quiet {
            let body = json!({"command_id": format!("j-{room}"), "user_id": "viewer"});
            let (status, answer) = app.post(&format!("/v1/rooms/{room}/join"), body).await;
            assert_eq!(status, 200, "{answer}");
            ids.push(answer["events"][0]["event_id"].as_str().unwrap().to_owned());
        }
        ids
    };
    let (_, ids) = tokio::join!(join_all(hot), quiet_joins);
    // Each quiet room's one event went out while the hot room still had the quota busy.
    let at_im: HashSet<String> = im.all_messages().into_iter().filter_map(|m| m.event_id).collect();
    let starved: Vec<&String> = ids.iter().filter(|id| !at_im.contains(*id)).collect();
    assert!(starved.is_empty(), "quiet rooms waited out the hot room's load: {starved:?}");
    eventually("every event delivered", Duration::from_secs(60), || async { undelivered(&db).await == 0 })
        .await;
    let stats = im.stats();
    assert_eq!((stats.rate_limited, stats.dropped), (0, 0), "{stats:?}");
    app.stop().await;
}

#[tokio::test]
async fn what_a_room_commits_while_its_pack_waits_for_a_permit_goes_in_that_pack() {
    // One message a second into the group: the first join goes at once; the second's pack
    // waits for the next permit, and the joins committed during that wait go in the same call
    // instead of waiting for a turn of their own.
    let db = TestDb::mysql().await;
    let im = fake_with_limits(None, None).await;
    let app =
        start(&db, &im, &[("im_rate_limit.per_group_per_sec", "1"), ("outbox_worker.publish_timeout", "3s")])
            .await;
    create(&app, "r").await;
    let started = tokio::time::Instant::now();
    let join = |user: &'static str, after: u64| {
        let app = &app;
        async move {
            tokio::time::sleep_until(started + Duration::from_millis(after)).await;
            let body = json!({"command_id": format!("j-{user}"), "user_id": user});
            let (status, answer) = app.post("/v1/rooms/r/join", body).await;
            assert_eq!(status, 200, "{answer}");
            answer["events"][0]["event_id"].as_str().unwrap().to_owned()
        }
    };
    let ids = join_all([join("a", 100), join("b", 200), join("c", 400), join("d", 600)]).await;
    eventually("every join reached IM", Duration::from_secs(10), || async {
        ids.iter().all(|id| im.messages("r").iter().any(|m| m.event_id.as_deref() == Some(id.as_str())))
    })
    .await;
    // The create and the first join went alone, or packed together; the last three joins in ONE call.
    let records = im.messages("r");
    let call_of = |id: &str| records.iter().find(|m| m.event_id.as_deref() == Some(id)).map(|m| m.msg_seq);
    let calls: Vec<Option<u64>> = ids[1..].iter().map(|id| call_of(id)).collect();
    assert!(calls.iter().all(|c| c.is_some() && *c == calls[0]), "b, c and d in one call: {records:?}");
    app.stop().await;
}

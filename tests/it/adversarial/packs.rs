//! A pack shares no fate over content (SPEC §13.1): one member's gift carries a word IM's
//! moderation refuses (in its `gift_id`: 80001 for the whole message, as Tencent answers) while
//! 29 other gifts of the same room are packed with it. The review saw all 20 events of 20 users parked for one
//! refusal. Promised: exactly the offending event is parked; every other gift reaches IM, in
//! room order; on MariaDB and SQLite.

use std::time::Duration;

use futures::future::join_all;
use serde_json::json;

use crate::delivery::eventually;
use crate::support::app::{TestApp, fake_im, settings};
use crate::support::backends;

const GIFTS: usize = 30;
const WORD: &str = "forbidden-word";

#[tokio::test]
async fn content_im_refuses_inside_a_pack_parks_only_the_offending_event() {
    for db in backends().await {
        let im = fake_im().await;
        // Slow enough that the room's gifts queue behind its lane's call and are packed.
        im.set_latency(Duration::from_millis(150));
        im.set_sensitive_words(vec![WORD.to_owned()]);
        let overrides = [
            ("outbox_worker.enabled", "true"),
            ("outbox_worker.poll_interval", "50ms"),
            ("outbox_worker.publish_timeout", "1s"),
        ];
        let app = TestApp::start(settings(db.url(), Some(&im), &overrides)).await;
        let create = json!({"command_id": "c", "room_id": "r1", "owner_id": "alice", "title": "t"});
        assert_eq!(app.post("/v1/rooms", create).await.0, 200, "{db}");
        for i in 0..GIFTS {
            let join = json!({"command_id": format!("join-{i}"), "user_id": format!("u{i}")});
            assert_eq!(app.post("/v1/rooms/r1/join", join).await.0, 200, "{db}");
        }
        let gifts = (0..GIFTS).map(|i| {
            let gift_id = if i == GIFTS / 2 { format!("rose-{WORD}") } else { "rose".to_owned() };
            let body = json!({"command_id": format!("gift-{i}"), "sender_id": format!("u{i}"), "receiver_id": "alice",
                              "gift_id": gift_id, "count": 1, "unit_value": 1});
            app.post("/v1/rooms/r1/gifts", body)
        });
        for (status, body) in join_all(gifts).await {
            assert_eq!(status, 200, "{db}: {body}");
        }
        let settled = || async {
            db.scalar(
                "SELECT COUNT(*) FROM room_outbox WHERE status IN ('pending', 'retryable', 'delivering')",
            )
            .await
                == Some(0)
        };
        eventually("every gift delivered or parked", Duration::from_secs(60), settled).await;

        let parked: Vec<String> =
            db.outbox().await.into_iter().filter(|r| r.status == "failed").map(|r| r.envelope).collect();
        let received: Vec<u64> = im
            .messages("r1")
            .iter()
            .filter(|m| m.desc == "RoomGiftSent")
            .map(|m| {
                serde_json::from_str::<serde_json::Value>(&m.data).unwrap()["room_version"].as_u64().unwrap()
            })
            .collect();
        eprintln!(
            "{db}: one refused gift among {GIFTS}: {} parked, {} gifts in IM ({} calls, {} refused)",
            parked.len(),
            received.len(),
            im.stats().calls,
            im.stats().rejected
        );
        assert_eq!(parked.len(), 1, "{db}: only the offending event is parked: {parked:?}");
        assert!(parked[0].contains(WORD), "{db}: the parked event is the offending one");
        assert_eq!(received.len(), GIFTS - 1, "{db}: every other gift reached IM");
        let mut in_order = received.clone();
        in_order.sort_unstable();
        in_order.dedup();
        assert_eq!(in_order.len(), GIFTS - 1, "{db}: each once");
        app.stop().await;
    }
}

//! The close's summary (SPEC §14.2): a room closed by its owner tells, in its `RoomClosed`
//! event as the events API serves it, reason `owner` and exactly what happened in it.

use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::support::app::{TestApp, settings};
use crate::support::backends;

async fn gift(app: &TestApp, sender: &str, count: u32, unit_value: u32) {
    let body = json!({"command_id": cid("g"), "sender_id": sender, "receiver_id": "alice",
        "gift_id": "rose", "count": count, "unit_value": unit_value});
    let (status, answer) = app.post("/v1/rooms/r1/gifts", body).await;
    assert_eq!(status, 200, "gift of {sender}: {answer}");
}

async fn leave(app: &TestApp, user: &str) {
    let body = json!({"command_id": cid("l"), "user_id": user});
    let (status, answer) = app.post("/v1/rooms/r1/leave", body).await;
    assert_eq!(status, 200, "leave {user}: {answer}");
}

#[tokio::test]
async fn a_room_closed_by_its_owner_tells_reason_owner_and_exact_figures() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "r1", "alice").await;
        // Four at once at the peak; three again later.
        join_all(&app, "r1", &["bob", "carol", "dave", "erin"]).await;
        leave(&app, "dave").await;
        leave(&app, "erin").await;
        join_all(&app, "r1", &["fred"]).await;
        // Five gift commands of three senders: 2×5 + 1×100 + 3×7 + 1×1 + 4×250.
        gift(&app, "bob", 2, 5).await;
        gift(&app, "bob", 1, 100).await;
        gift(&app, "carol", 3, 7).await;
        gift(&app, "fred", 1, 1).await;
        gift(&app, "carol", 4, 250).await;
        // A kicked member, a refused gift and a refused join count for nothing.
        ok(&app, "r1", "kicks", "alice", json!({"user_id": "fred"})).await;
        let (status, _) = join(&app, "r1", "fred").await;
        assert_eq!(status, 409, "{db}");
        let refused = json!({"command_id": cid("g"), "sender_id": "zed", "receiver_id": "alice",
            "gift_id": "rose", "count": 1, "unit_value": 1000});
        assert_eq!(app.post("/v1/rooms/r1/gifts", refused).await.0, 409, "{db}: zed is no member");
        tokio::time::sleep(Duration::from_millis(20)).await;
        ok(&app, "r1", "close", "alice", json!({})).await;

        let closed = events_of(&app, "r1", "RoomClosed").await;
        assert_eq!(closed.len(), 1, "{db}");
        let closed = &closed[0];
        let created: Value = serde_json::from_str(
            &db.outbox().await.into_iter().find(|r| r.event_type == "RoomCreated").expect("created").envelope,
        )
        .unwrap();
        let duration_ms =
            closed["occurred_at_ms"].as_i64().unwrap() - created["occurred_at_ms"].as_i64().unwrap();
        assert!(duration_ms >= 20, "{db}: {duration_ms}");
        assert_eq!(
            closed["payload"],
            json!({
                "members_removed": 2,
                "reason": "owner",
                "by": "alice",
                "summary": {
                    "duration_ms": duration_ms,
                    "peak_members": 4,
                    "gifts": 5,
                    "gift_value": 10 + 100 + 21 + 1 + 1000,
                    "unique_senders": 3,
                },
            }),
            "{db}"
        );
        app.stop().await;
    }
}

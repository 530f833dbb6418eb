//! A seated user whose id IM refuses (docs/DESIGN.md, the content quarantine): every seat
//! event carries each holder's id and no actor, so while mallory holds a seat IM refuses every
//! seat change. The quarantine holds a seated id like an actor's: each such change goes alone
//! and costs one refused call, and the room's gifts packed around it never share its fate.

use std::collections::HashSet;
use std::time::Duration;

use futures::future::join_all;
use serde_json::json;

use super::{create, seat, seated};
use crate::delivery::eventually;
use crate::moderation::{cid, join_all as join_members};
use crate::support::app::{TestApp, fake_im, settings};
use crate::support::backends;

/// The id IM's moderation refuses, as a user id.
const MALLORY: &str = "mallory-refused";
/// Honest members flapping the other seats, and the rounds each makes.
const FLAPPERS: [&str; 3] = ["ann", "bob", "cat"];
const ROUNDS: usize = 6;
/// Gifts sent by honest members meanwhile.
const GIFTS: usize = 40;

/// The event ids of `room`'s outbox rows of `event_type`.
async fn event_ids(db: &crate::support::TestDb, room: &str, event_type: &str) -> HashSet<String> {
    let rows = db.outbox().await.into_iter();
    rows.filter(|r| r.room_id == room && r.event_type == event_type).map(|r| r.event_id).collect()
}

#[tokio::test]
async fn a_seated_id_im_refuses_costs_each_seat_change_one_refused_call_and_the_gifts_none() {
    for db in backends().await {
        let im = fake_im().await;
        im.set_latency(Duration::from_millis(20));
        im.set_sensitive_words(vec![MALLORY.to_owned()]);
        let overrides = [("outbox_worker.enabled", "true"), ("outbox_worker.poll_interval", "50ms")];
        let app = TestApp::start(settings(db.url(), Some(&im), &overrides)).await;
        create(&app, "q1", "host", 4, "free").await;
        join_members(&app, "q1", &["ann", "bob", "cat", "dan", "eve", MALLORY]).await;
        // Mallory's join is refused alone (her id is its actor): she is held from here on.
        seated(&app, "q1", "take", MALLORY, json!({"index": 0})).await;

        // Seat changes and gifts at once, so the lane packs them together.
        let on = &app;
        let flaps = FLAPPERS.iter().map(|user| async move {
            for _ in 0..ROUNDS {
                for action in ["take", "leave"] {
                    let (status, answer) = seat(on, "q1", action, user, json!({})).await;
                    assert_eq!(status, 200, "{user} {action}: {answer}");
                }
            }
        });
        let gifts = (0..GIFTS).map(|i| {
            let sender = if i % 2 == 0 { "dan" } else { "eve" };
            let body = json!({"command_id": cid("g"), "sender_id": sender, "receiver_id": "host",
                "gift_id": "rose", "count": 1, "unit_value": 1});
            async move {
                let (status, answer) = on.post("/v1/rooms/q1/gifts", body).await;
                assert_eq!(status, 200, "{answer}");
            }
        });
        futures::join!(join_all(flaps), join_all(gifts));

        let changes = event_ids(&db, "q1", "RoomSeatsChanged").await;
        let gift_ids = event_ids(&db, "q1", "RoomGiftSent").await;
        assert_eq!((changes.len(), gift_ids.len()), (1 + FLAPPERS.len() * ROUNDS * 2, GIFTS), "{db}");
        eventually("every gift in IM", Duration::from_secs(10), || async {
            let at_im: HashSet<String> = im.messages("q1").into_iter().filter_map(|m| m.event_id).collect();
            gift_ids.is_subset(&at_im)
        })
        .await;
        eventually("every seat change refused", Duration::from_secs(10), || async {
            let sends = im.sends_by_event();
            changes.iter().all(|id| sends.get(id).is_some_and(|s| s.calls >= 1))
        })
        .await;
        let sends = im.sends_by_event();
        for id in &changes {
            let s = &sends[id];
            assert_eq!(
                (s.calls, s.received),
                (1, 0),
                "{db}: a seat change with mallory seated: one refused call"
            );
        }
        let shared = gift_ids.iter().filter(|id| sends[*id].calls > sends[*id].received).count();
        assert_eq!(shared, 0, "{db}: {shared} gifts were in a refused call");
        app.stop().await;
    }
}

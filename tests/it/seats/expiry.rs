//! A pending request or invitation runs out after `rooms.seat_request_ttl` (SPEC §14.3): one
//! `RoomSeatRequestExpired` each, once, by the service's own timer; its user may then ask
//! again; one answered in time never expires; and pending requests, like the seats, survive a
//! restart.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::{create, holders, outbox_count, refused, seated};
use crate::moderation::{events_of, join_all, room};
use crate::support::app::{TestApp, settings};
use crate::support::{TestDb, backends};

/// Waits (at most 5 s) until `room` has `count` `RoomSeatRequestExpired` outbox rows.
async fn expired(db: &TestDb, room: &str, count: i64) {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let expired = outbox_count(db, room, "RoomSeatRequestExpired").await;
        if expired >= count {
            return;
        }
        assert!(Instant::now() < until, "{db}: {expired} of {count} expired");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_request_and_an_invitation_expire_exactly_once() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[("rooms.seat_request_ttl", "1s")])).await;
        create(&app, "r1", "host", 4, "apply").await;
        join_all(&app, "r1", &["bob", "carol", "dan"]).await;
        let requested = seated(&app, "r1", "request", "bob", json!({"index": 2})).await;
        assert_eq!(requested["events"][0]["event_type"], "RoomSeatRequested", "{db}: {requested}");
        let invited = seated(&app, "r1", "invite", "host", json!({"user_id": "dan"})).await;
        assert_eq!(invited["events"][0]["event_type"], "RoomSeatInvited", "{db}: {invited}");
        // carol's request is answered in time: it never expires.
        seated(&app, "r1", "request", "carol", json!({})).await;
        seated(&app, "r1", "answer_request", "host", json!({"user_id": "carol", "accept": true})).await;
        let payload = &events_of(&app, "r1", "RoomSeatRequested").await[0]["payload"];
        let (ttl_from, expires) =
            (db.now_ms().await, payload["expires_at_ms"].as_i64().expect("expires_at_ms"));
        assert!((ttl_from - 500..=ttl_from + 1_000).contains(&expires), "{db}: about 1 s: {payload}");

        expired(&db, "r1", 2).await;
        // Long enough for a second firing of either timer to show.
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        assert_eq!(outbox_count(&db, "r1", "RoomSeatRequestExpired").await, 2, "{db}: once each");
        let mut expired = events_of(&app, "r1", "RoomSeatRequestExpired").await;
        assert_eq!(expired.len(), 2, "{db}: {expired:?}");
        expired.sort_by_key(|e| e["payload"]["user_id"].as_str().map(str::to_owned));
        let payloads: Vec<&Value> = expired.iter().map(|e| &e["payload"]).collect();
        assert_eq!(
            payloads,
            [
                &json!({"user_id": "bob", "kind": "request", "index": 2}),
                &json!({"user_id": "dan", "kind": "invite"})
            ],
            "{db}"
        );
        assert_eq!(
            holders(&room(&app, "r1").await["seats"]),
            [Some("carol".into()), None, None, None],
            "{db}"
        );

        // Gone: the invitation cannot be answered; each may be asked again.
        refused(&app, "r1", "answer_invite", "dan", json!({"accept": true}), (409, "no_such_request")).await;
        seated(&app, "r1", "request", "bob", json!({})).await;
        seated(&app, "r1", "answer_request", "host", json!({"user_id": "bob", "accept": true})).await;
        seated(&app, "r1", "invite", "host", json!({"user_id": "dan", "index": 3})).await;
        seated(&app, "r1", "answer_invite", "dan", json!({"accept": true})).await;
        let seats = holders(&room(&app, "r1").await["seats"]);
        assert_eq!(seats, [Some("carol".into()), Some("bob".into()), None, Some("dan".into())], "{db}");
        // Answered in time, neither expires later.
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        assert_eq!(outbox_count(&db, "r1", "RoomSeatRequestExpired").await, 2, "{db}");
        app.stop().await;
    }
}

/// The seats and the pending requests are stored (the seats in the room, each pending request
/// a row): after a restart the seats are as they were, a pending request still blocks a second
/// one, may still be answered, and one left unanswered expires once, by the new process.
#[tokio::test]
async fn seats_and_pending_requests_survive_a_restart_and_expire_once_after_it() {
    for db in backends().await {
        let ttl = [("rooms.seat_request_ttl", "3s")];
        let app = TestApp::start(settings(db.url(), None, &ttl)).await;
        create(&app, "r1", "host", 3, "apply").await;
        join_all(&app, "r1", &["bob", "carol", "dan"]).await;
        seated(&app, "r1", "invite", "host", json!({"user_id": "bob", "index": 2})).await;
        seated(&app, "r1", "answer_invite", "bob", json!({"accept": true})).await;
        seated(&app, "r1", "lock", "host", json!({"index": 0, "locked": true})).await;
        seated(&app, "r1", "request", "carol", json!({})).await;
        seated(&app, "r1", "request", "dan", json!({"index": 1})).await;
        let before = room(&app, "r1").await;
        app.stop().await;

        let app = TestApp::start(settings(db.url(), None, &ttl)).await;
        let after = room(&app, "r1").await;
        assert_eq!((&after["seats"], &after["seat_mode"]), (&before["seats"], &before["seat_mode"]), "{db}");
        refused(&app, "r1", "request", "carol", json!({}), (409, "request_pending")).await;
        seated(&app, "r1", "answer_request", "host", json!({"user_id": "dan", "accept": true})).await;
        expired(&db, "r1", 1).await;
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        let expired = events_of(&app, "r1", "RoomSeatRequestExpired").await;
        let payloads: Vec<&Value> = expired.iter().map(|e| &e["payload"]).collect();
        assert_eq!(payloads, [&json!({"user_id": "carol", "kind": "request"})], "{db}: once, carol's only");
        let seats = holders(&room(&app, "r1").await["seats"]);
        assert_eq!(seats, [None, Some("dan".into()), Some("bob".into())], "{db}");
        seated(&app, "r1", "request", "carol", json!({})).await;
        app.stop().await;
    }
}

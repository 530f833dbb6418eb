//! A seated member leaving the room — its own leave, a kick out of the room, a stale eviction —
//! frees its seat in that same command (SPEC §14.3): one version step, one event, and that
//! event's payload carries the seats. A pending request goes with its user.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::{create, holders, outbox_count, refused, seated};
use crate::moderation::{cid, events, join_all, ok, room};
use crate::support::app::{TestApp, settings};
use crate::support::backends;

/// The events of `room` at `version` among `all`.
fn at_version(all: &[Value], version: u64) -> Vec<&Value> {
    all.iter().filter(|e| e["room_version"] == version).collect()
}

/// Every event of `room`, once (the events API limits each reader's rate).
async fn all_events(app: &TestApp, room: &str) -> Vec<Value> {
    events(app, room).await.into_iter().map(|(e, _)| e).collect()
}

/// Who holds the seats, as `holders` answers it.
fn seats(expected: &[Option<&str>]) -> Vec<Option<String>> {
    expected.iter().map(|h| h.map(str::to_owned)).collect()
}

/// Asserts the command answered with `answer` took one version step after `before` and made one
/// event, of `event_type`, whose payload carries the seats its answer shows, held as `expected`.
fn frees_in_one_step(
    all: &[Value],
    answer: &Value,
    before: u64,
    event_type: &str,
    expected: &[Option<&str>],
) {
    assert_eq!(answer["room_version"].as_u64(), Some(before + 1), "one version step: {answer}");
    assert_eq!(holders(&answer["room"]["seats"]), seats(expected), "the answer's room: {answer}");
    let at = at_version(all, before + 1);
    assert_eq!(at.len(), 1, "one event, no RoomSeatsChanged of its own: {at:?}");
    assert_eq!(at[0]["event_type"], event_type, "{at:?}");
    assert_eq!(holders(&at[0]["payload"]["seats"]), seats(expected), "its payload carries the seats: {at:?}");
}

#[tokio::test]
async fn leaving_or_being_kicked_out_of_the_room_frees_the_seat_in_that_command() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "r1", "host", 3, "free").await;
        join_all(&app, "r1", &["bob", "carol", "dan"]).await;
        let mut took = 0;
        for (n, user) in ["bob", "carol", "dan"].iter().enumerate() {
            took =
                seated(&app, "r1", "take", user, json!({"index": n})).await["room_version"].as_u64().unwrap();
        }
        let (status, left) =
            app.post("/v1/rooms/r1/leave", json!({"command_id": cid("l"), "user_id": "bob"})).await;
        assert_eq!(status, 200, "{db}: {left}");
        let kicked = ok(&app, "r1", "kicks", "host", json!({"user_id": "carol", "ban_s": 60})).await;
        // A member leaving without a seat: its event carries no seats.
        join_all(&app, "r1", &["erin"]).await;
        let (_, erin) =
            app.post("/v1/rooms/r1/leave", json!({"command_id": cid("l"), "user_id": "erin"})).await;
        // The kicked member cannot act on a seat it no longer holds.
        refused(&app, "r1", "leave", "carol", json!({}), (409, "not_seated")).await;
        assert_eq!(holders(&room(&app, "r1").await["seats"]), seats(&[None, None, Some("dan")]), "{db}");

        let all = all_events(&app, "r1").await;
        frees_in_one_step(&all, &left, took, "RoomUserLeft", &[None, Some("carol"), Some("dan")]);
        frees_in_one_step(&all, &kicked, took + 1, "RoomUserKicked", &[None, None, Some("dan")]);
        let at = at_version(&all, erin["room_version"].as_u64().unwrap());
        assert!(at[0]["payload"].get("seats").is_none(), "{db}: {at:?}");
        assert_eq!(outbox_count(&db, "r1", "RoomSeatsChanged").await, 3, "{db}: the three takes only");
        app.stop().await;
    }
}

#[tokio::test]
async fn a_pending_request_or_invitation_goes_with_its_user_and_with_free_mode() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "r1", "host", 2, "apply").await;
        join_all(&app, "r1", &["bob", "carol", "dan"]).await;
        seated(&app, "r1", "request", "bob", json!({})).await;
        seated(&app, "r1", "invite", "host", json!({"user_id": "carol"})).await;
        app.post("/v1/rooms/r1/leave", json!({"command_id": cid("l"), "user_id": "bob"})).await;
        ok(&app, "r1", "kicks", "host", json!({"user_id": "carol", "ban_s": 0})).await;
        let accept = json!({"user_id": "bob", "accept": true});
        refused(&app, "r1", "answer_request", "host", accept, (409, "no_such_request")).await;
        join_all(&app, "r1", &["bob", "carol"]).await;
        refused(&app, "r1", "answer_invite", "carol", json!({"accept": true}), (409, "no_such_request"))
            .await;

        // Switching to free mode drops what is pending; the mode shows in the room.
        seated(&app, "r1", "request", "dan", json!({})).await;
        let switched = ok(&app, "r1", "info", "host", json!({"seat_mode": "free"})).await;
        assert_eq!(switched["room"]["seat_mode"], "free", "{db}: {switched}");
        assert_eq!(room(&app, "r1").await["seat_mode"], "free", "{db}");
        let accept = json!({"user_id": "dan", "accept": true});
        refused(&app, "r1", "answer_request", "host", accept, (409, "no_such_request")).await;
        seated(&app, "r1", "take", "dan", json!({})).await;
        assert_eq!(holders(&room(&app, "r1").await["seats"]), [Some("dan".into()), None], "{db}");
        app.stop().await;
    }
}

#[tokio::test]
async fn a_stale_seated_member_is_evicted_off_its_seat_in_one_command() {
    for db in backends().await {
        let presence = [
            ("presence.enabled", "true"),
            ("presence.stale_after", "1s"),
            ("presence.scan_interval", "200ms"),
        ];
        let app = TestApp::start(settings(db.url(), None, &presence)).await;
        create(&app, "r1", "host", 2, "free").await;
        join_all(&app, "r1", &["bob"]).await;
        let took = seated(&app, "r1", "take", "bob", json!({"index": 1})).await;
        let before = took["room_version"].as_u64().unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        while room(&app, "r1").await["member_count"] != 0 {
            assert!(Instant::now() < until, "{db}: bob was never evicted");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let view = room(&app, "r1").await;
        assert_eq!(view["version"].as_u64(), Some(before + 1), "{db}: one command: {view}");
        assert_eq!(holders(&view["seats"]), [None, None], "{db}: {view}");
        let all = all_events(&app, "r1").await;
        let at = at_version(&all, before + 1);
        assert_eq!(at.len(), 1, "{db}: {at:?}");
        let payload = &at[0]["payload"];
        assert_eq!(
            (at[0]["event_type"].as_str(), payload["reason"].as_str()),
            (Some("RoomUserLeft"), Some("stale"))
        );
        assert_eq!(holders(&payload["seats"]), [None, None], "{db}: {payload}");
        app.stop().await;
    }
}

/// The room's close leaves every seat and drops every pending request; a seat action on the
/// closed room is 409 `room_closed`.
#[tokio::test]
async fn the_close_leaves_every_seat() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "r1", "host", 2, "apply").await;
        join_all(&app, "r1", &["bob", "carol"]).await;
        seated(&app, "r1", "invite", "host", json!({"user_id": "bob"})).await;
        seated(&app, "r1", "answer_invite", "bob", json!({"accept": true})).await;
        seated(&app, "r1", "request", "carol", json!({})).await;
        let closed = ok(&app, "r1", "close", "host", json!({})).await;
        assert_eq!(holders(&closed["room"]["seats"]), [None, None], "{db}: {closed}");
        assert_eq!(holders(&room(&app, "r1").await["seats"]), [None, None], "{db}");
        let accept = json!({"user_id": "carol", "accept": true});
        refused(&app, "r1", "answer_request", "host", accept, (409, "room_closed")).await;
        refused(&app, "r1", "take", "host", json!({}), (409, "room_closed")).await;
        let pending = db.scalar("SELECT COUNT(*) FROM room_seat_request").await;
        assert_eq!(pending, Some(0), "{db}: no pending request row left");
        app.stop().await;
    }
}

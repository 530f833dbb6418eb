//! Hostile seat input (SPEC §14.3): one member's 200 requests at once leave one pending request
//! (one `RoomSeatRequested`), the other 199 answer 409 `request_pending`; and every refusal —
//! a taken seat, a member's moderation, a stranger's take, an index out of range, a body
//! missing or adding a field, a room without seats — writes nothing: no command-log row, no
//! outbox row, the room's version as it was.

use futures::StreamExt;
use serde_json::{Value, json};

use super::{create, holders, outbox_count, refused, seat, seated};
use crate::moderation::{act, cid, error, events_of, join_all, ok, room, written};
use crate::support::app::{TestApp, settings};
use crate::support::backends;

const REQUESTS: usize = 200;

/// A seat call: action, actor, body.
type Call<'a> = (&'a str, &'a str, Value);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_members_two_hundred_requests_at_once_leave_one_pending() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "r1", "host", 8, "apply").await;
        join_all(&app, "r1", &["bob"]).await;
        let before = written(&db, &app, "r1").await;
        let answers: Vec<(u16, Value)> = futures::stream::iter(0..REQUESTS)
            .map(|_| seat(&app, "r1", "request", "bob", json!({})))
            .buffer_unordered(REQUESTS)
            .collect()
            .await;
        let applied = answers.iter().filter(|(s, _)| *s == 200).count();
        assert_eq!(applied, 1, "{db}: one request applies");
        for (status, answer) in answers.iter().filter(|(s, _)| *s != 200) {
            assert_eq!((*status, error(answer).0), (409, "request_pending"), "{db}: {answer}");
        }
        let after = written(&db, &app, "r1").await;
        assert_eq!(
            (after.commands, after.outbox, after.version),
            (before.commands + 1, before.outbox + 1, before.version + 1),
            "{db}: one command written"
        );
        assert_eq!(outbox_count(&db, "r1", "RoomSeatRequested").await, 1, "{db}");
        let requested = events_of(&app, "r1", "RoomSeatRequested").await;
        assert_eq!(requested.len(), 1, "{db}: {requested:?}");
        assert_eq!(requested[0]["payload"]["user_id"], "bob", "{db}");
        assert!(requested[0]["payload"]["expires_at_ms"].as_i64() > Some(0), "{db}: {requested:?}");
        assert_eq!(holders(&room(&app, "r1").await["seats"]), vec![None; 8], "{db}: a request seats nobody");
        app.stop().await;
    }
}

/// Asserts `actor`'s `action` with `body` on `room` is refused with `expect` and writes nothing.
async fn writes_nothing(
    db: &crate::support::TestDb,
    app: &TestApp,
    room: &str,
    (action, actor, body): Call<'_>,
    expect: (u16, &str),
) {
    let before = written(db, app, room).await;
    refused(app, room, action, actor, body.clone(), expect).await;
    assert_eq!(
        written(db, app, room).await,
        before,
        "{db}: {actor} {action} {body}: a refusal writes nothing"
    );
}

#[tokio::test]
async fn every_refusal_writes_nothing() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "r1", "alice", 2, "free").await;
        join_all(&app, "r1", &["bob", "carol"]).await;
        seated(&app, "r1", "take", "bob", json!({"index": 0})).await;
        let seats_before = room(&app, "r1").await["seats"].clone();

        let cases: Vec<(Call, (u16, &str))> = vec![
            (("take", "carol", json!({"index": 0})), (409, "seat_occupied")),
            (("take", "bob", json!({"index": 1})), (409, "already_seated")),
            (("take", "zed", json!({"index": 1})), (409, "not_member")),
            (("take", "carol", json!({"index": 2})), (400, "invalid_argument")),
            (("take", "carol", json!({"index": 4_000_000_000u64})), (400, "invalid_argument")),
            (("take", "carol", json!({"index": -1})), (400, "invalid_argument")),
            (("take", "carol", json!({"index": 0, "accept": true})), (400, "invalid_argument")),
            (("kick", "carol", json!({"index": 0})), (403, "forbidden")),
            (("lock", "carol", json!({"index": 1, "locked": true})), (403, "forbidden")),
            (("mute", "carol", json!({"index": 0, "muted": true})), (403, "forbidden")),
            (("move", "carol", json!({"user_id": "bob", "to": 1, "policy": "cancel"})), (403, "forbidden")),
            (("move", "bob", json!({"user_id": "bob", "to": 1, "policy": "force"})), (403, "forbidden")),
            (("invite", "carol", json!({"user_id": "carol"})), (403, "forbidden")),
            (("answer_request", "carol", json!({"user_id": "bob", "accept": true})), (403, "forbidden")),
            (("kick", "alice", json!({"index": 1})), (409, "not_seated")),
            (("kick", "alice", json!({"index": 2})), (400, "invalid_argument")),
            (("kick", "alice", json!({})), (400, "invalid_argument")),
            (("lock", "alice", json!({"index": 1})), (400, "invalid_argument")),
            (("move", "alice", json!({"user_id": "bob", "policy": "cancel"})), (400, "invalid_argument")),
            (("answer_request", "alice", json!({"user_id": "carol"})), (400, "invalid_argument")),
            (("leave", "carol", json!({})), (409, "not_seated")),
            (("request", "carol", json!({})), (409, "wrong_seat_mode")),
            (("answer_invite", "carol", json!({"accept": true})), (409, "no_such_request")),
            (
                ("answer_request", "alice", json!({"user_id": "carol", "accept": true})),
                (409, "no_such_request"),
            ),
            (("cancel_request", "carol", json!({})), (409, "no_such_request")),
        ];
        for (call, expect) in cases {
            writes_nothing(&db, &app, "r1", call, expect).await;
        }
        assert_eq!(room(&app, "r1").await["seats"], seats_before, "{db}");

        // A member changes no seat mode; an admin moves no owner off its seat.
        let before = written(&db, &app, "r1").await;
        let (status, answer) = act(&app, "r1", "info", "carol", json!({"seat_mode": "apply"})).await;
        assert_eq!((status, error(&answer).0), (403, "forbidden"), "{db}: {answer}");
        assert_eq!(written(&db, &app, "r1").await, before, "{db}: nothing written");
        ok(&app, "r1", "admins", "alice", json!({"user_id": "carol", "admin": true})).await;
        join_all(&app, "r1", &["alice"]).await;
        seated(&app, "r1", "leave", "bob", json!({})).await;
        seated(&app, "r1", "take", "alice", json!({"index": 0})).await;
        for (action, body) in [
            ("kick", json!({"index": 0})),
            ("lock", json!({"index": 0, "locked": true})),
            ("mute", json!({"index": 0, "muted": true})),
            ("move", json!({"user_id": "alice", "to": 1, "policy": "force"})),
        ] {
            writes_nothing(&db, &app, "r1", (action, "carol", body), (403, "forbidden")).await;
        }
        seated(&app, "r1", "leave", "alice", json!({})).await;
        seated(&app, "r1", "take", "bob", json!({"index": 0})).await;

        // A locked seat: nobody takes it, nobody moves onto it.
        seated(&app, "r1", "lock", "alice", json!({"index": 1, "locked": true})).await;
        writes_nothing(&db, &app, "r1", ("take", "carol", json!({"index": 1})), (409, "seat_locked")).await;
        writes_nothing(&db, &app, "r1", ("take", "carol", json!({})), (409, "seats_full")).await;
        let onto_locked = json!({"user_id": "bob", "to": 1, "policy": "force"});
        writes_nothing(&db, &app, "r1", ("move", "alice", onto_locked), (409, "seat_locked")).await;

        // A room without seats: every action is 409 seats_disabled; its view shows none.
        create(&app, "plain", "alice", 0, "free").await;
        join_all(&app, "plain", &["carol"]).await;
        for (action, actor, body) in [
            ("take", "carol", json!({})),
            ("take", "carol", json!({"index": 0})),
            ("request", "carol", json!({})),
            ("lock", "alice", json!({"index": 0, "locked": true})),
        ] {
            writes_nothing(&db, &app, "plain", (action, actor, body), (409, "seats_disabled")).await;
        }
        let before = written(&db, &app, "plain").await;
        let (status, answer) = act(&app, "plain", "info", "alice", json!({"seat_mode": "apply"})).await;
        assert_eq!((status, error(&answer).0), (409, "seats_disabled"), "{db}: {answer}");
        assert_eq!(written(&db, &app, "plain").await, before, "{db}: nothing written");
        let plain = room(&app, "plain").await;
        assert_eq!(plain["seats"], json!([]), "{db}: {plain}");
        // An unknown action is refused before any room is touched.
        let before = written(&db, &app, "r1").await;
        let (status, answer) = seat(&app, "r1", "dance", "carol", json!({})).await;
        assert!([400, 404].contains(&status), "{db}: {answer}");
        assert_eq!(written(&db, &app, "r1").await, before, "{db}: nothing written");
        app.stop().await;
    }
}

/// The room's 101st pending request (or invitation) is 409 `too_many_requests`, writing nothing;
/// one answered makes room for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rooms_hundred_and_first_pending_request_is_refused() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "r1", "host", 2, "apply").await;
        let users: Vec<String> = (0..=100).map(|n| format!("m{n:03}")).collect();
        super::race::join_many(&app, "r1", &users).await;
        let requests: Vec<(u16, Value)> = futures::stream::iter(&users[..100])
            .map(|u| seat(&app, "r1", "request", u, json!({})))
            .buffer_unordered(16)
            .collect()
            .await;
        assert!(requests.iter().all(|(s, _)| *s == 200), "{db}: 100 pending: {requests:?}");
        let last = users[100].as_str();
        writes_nothing(&db, &app, "r1", ("request", last, json!({})), (409, "too_many_requests")).await;
        let invite = json!({"user_id": last});
        writes_nothing(&db, &app, "r1", ("invite", "host", invite.clone()), (409, "too_many_requests")).await;
        seated(&app, "r1", "answer_request", "host", json!({"user_id": "m000", "accept": false})).await;
        seated(&app, "r1", "request", last, json!({})).await;
        assert_eq!(outbox_count(&db, "r1", "RoomSeatRequested").await, 101, "{db}");
        app.stop().await;
    }
}

/// A room asking for more than 20 seats, an unknown mode or a field `seats` does not take is
/// 400 naming it, and no room is made.
#[tokio::test]
async fn a_creation_with_bad_seats_is_400_naming_the_field() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        for (seats, field) in [
            (json!({"count": 21, "mode": "free"}), "seats.count"),
            (json!({"count": 2, "mode": "open"}), "seats.mode"),
            (json!({"count": 2, "size": 3}), "size"),
            (json!({"count": -1}), "seats.count"),
        ] {
            let body = json!({"command_id": cid("c"), "room_id": "bad", "owner_id": "host", "title": "t",
                "seats": seats});
            let (status, answer) = app.post("/v1/rooms", body).await;
            let (code, message) = error(&answer);
            assert_eq!((status, code), (400, "invalid_argument"), "{db}: {seats}: {answer}");
            assert!(message.contains(field), "{db}: {seats}: {message}");
        }
        let (status, _) = app.get("/v1/rooms/bad").await;
        assert_eq!(status, 404, "{db}: no room made");
        assert_eq!(db.count("room_command_log").await, 0, "{db}: nothing written");
        // 20 is the most.
        create(&app, "big", "host", 20, "apply").await;
        assert_eq!(holders(&room(&app, "big").await["seats"]), vec![None; 20], "{db}");
        app.stop().await;
    }
}

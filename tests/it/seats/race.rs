//! Racing clients on one node (SPEC §14.3's promise): 50 members taking the same free seat at
//! once seat exactly one, every other answer 409 `seat_occupied`; two admins accepting two
//! requests for the last seat at once seat one, the other 409 — and neither loser writes a
//! thing.

use futures::StreamExt;
use serde_json::{Value, json};

use super::{create, holders, outbox_count, refused, seat, seated};
use crate::moderation::{error, events_of, join, ok, room, written};
use crate::support::app::{TestApp, settings};
use crate::support::backends;

const RACERS: usize = 50;

/// Each of `users` joins `room`, many at once; panics unless every join applies.
pub async fn join_many(app: &TestApp, room: &str, users: &[String]) {
    let joined: Vec<(u16, Value)> =
        futures::stream::iter(users).map(|u| join(app, room, u)).buffer_unordered(16).collect().await;
    assert!(joined.iter().all(|(status, _)| *status == 200), "every join applies: {joined:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_members_taking_seat_zero_at_once_seat_exactly_one() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "r1", "host", 4, "free").await;
        let users: Vec<String> = (0..RACERS).map(|n| format!("u{n:02}")).collect();
        join_many(&app, "r1", &users).await;
        let before = written(&db, &app, "r1").await;

        let answers = futures::future::join_all(users.iter().map(|u| {
            let app = &app;
            async move { (u.clone(), seat(app, "r1", "take", u, json!({"index": 0})).await) }
        }))
        .await;
        let winners: Vec<&(String, (u16, Value))> = answers.iter().filter(|(_, (s, _))| *s == 200).collect();
        assert_eq!(winners.len(), 1, "{db}: exactly one take applies: {winners:?}");
        for (user, (status, answer)) in answers.iter().filter(|(_, (s, _))| *s != 200) {
            assert_eq!((*status, error(answer).0), (409, "seat_occupied"), "{db}: {user}: {answer}");
        }
        let (winner, (_, answer)) = winners[0];
        assert_eq!(answer["applied"], true, "{db}: {answer}");
        assert_eq!(answer["events"].as_array().map(Vec::len), Some(1), "{db}: one event: {answer}");
        assert_eq!(answer["events"][0]["event_type"], "RoomSeatsChanged", "{db}: {answer}");
        assert_eq!(holders(&answer["room"]["seats"])[0].as_deref(), Some(winner.as_str()), "{db}: {answer}");

        let view = room(&app, "r1").await;
        let expected = vec![Some(winner.clone()), None, None, None];
        assert_eq!(holders(&view["seats"]), expected, "{db}: {view}");
        assert_eq!(view["seat_mode"], "free", "{db}");
        let after = written(&db, &app, "r1").await;
        assert_eq!(after.version, before.version + 1, "{db}: one version step");
        app.settle().await;
        assert_eq!(
            db.count("room_command_log").await,
            before.commands + 1,
            "{db}: the losers logged nothing"
        );
        assert_eq!(outbox_count(&db, "r1", "RoomSeatsChanged").await, 1, "{db}");
        let changed = events_of(&app, "r1", "RoomSeatsChanged").await;
        assert_eq!(changed.len(), 1, "{db}: {changed:?}");
        let cause = &changed[0]["payload"]["cause"];
        assert_eq!(
            (cause["action"].as_str(), cause["user_id"].as_str(), cause["index"].as_u64()),
            (Some("take"), Some(winner.as_str()), Some(0)),
            "{db}: {cause}"
        );
        assert_eq!(changed[0]["payload"]["seats"], view["seats"], "{db}");
        app.stop().await;
    }
}

/// Two admins accept two requests for a room's one seat at once, the requests naming no seat
/// (the loser: 409 `seats_full`) or seat 0 (409 `seat_occupied`); the loser's request stays
/// pending (its refusal wrote nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_admins_accepting_two_requests_for_the_last_seat_seat_one() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        for (room_id, index, loses) in [("r1", None, "seats_full"), ("r2", Some(0), "seat_occupied")] {
            create(&app, room_id, "host", 1, "apply").await;
            let users: Vec<String> = ["a1", "a2", "m1", "m2"].map(str::to_owned).to_vec();
            join_many(&app, room_id, &users).await;
            for admin in ["a1", "a2"] {
                ok(&app, room_id, "admins", "host", json!({"user_id": admin, "admin": true})).await;
            }
            let request = match index {
                Some(index) => json!({"index": index}),
                None => json!({}),
            };
            for user in ["m1", "m2"] {
                let answer = seated(&app, room_id, "request", user, request.clone()).await;
                assert_eq!(answer["events"][0]["event_type"], "RoomSeatRequested", "{db}: {answer}");
            }
            let before = written(&db, &app, room_id).await;

            let accept = |admin: &'static str, user: &'static str| {
                seat(&app, room_id, "answer_request", admin, json!({"user_id": user, "accept": true}))
            };
            let (first, second) = tokio::join!(accept("a1", "m1"), accept("a2", "m2"));
            let answers = [("m1", first), ("m2", second)];
            let won: Vec<&str> = answers.iter().filter(|(_, (s, _))| *s == 200).map(|(u, _)| *u).collect();
            assert_eq!(won.len(), 1, "{db} {room_id}: one accepted: {answers:?}");
            let (lost, (status, answer)) = answers.iter().find(|(_, (s, _))| *s != 200).unwrap();
            assert_eq!((*status, error(answer).0), (409, loses), "{db} {room_id}: {answer}");

            let view = room(&app, room_id).await;
            assert_eq!(holders(&view["seats"]), [Some(won[0].to_owned())], "{db} {room_id}: {view}");
            let after = written(&db, &app, room_id).await;
            assert_eq!(after.version, before.version + 1, "{db} {room_id}: one version step");
            // The refused acceptance dropped nothing: the loser's request is still pending.
            refused(&app, room_id, "request", lost, request.clone(), (409, "request_pending")).await;
            assert_eq!(outbox_count(&db, room_id, "RoomSeatsChanged").await, 1, "{db} {room_id}");
            let changed = events_of(&app, room_id, "RoomSeatsChanged").await;
            assert_eq!(changed[0]["payload"]["cause"]["action"], "answer_request", "{db}: {changed:?}");
            assert_eq!(changed[0]["payload"]["cause"]["user_id"], won[0], "{db}: {changed:?}");
        }
        app.stop().await;
    }
}

//! What viewers see of the seats (SPEC §14.3): with the fake IM on, a live's seat commands
//! (take, move, lock, mute, kick, a member leaving and one kicked out of the room) reach IM one
//! event per command, in room-version order, `RoomSeatsChanged` at High priority; and the seat
//! lists the events carry, replayed in order — from the events API or from what IM got —
//! rebuild exactly the room's seats.

use std::time::{Duration, Instant};

use room_service_fakes::fake_im::FakeIm;
use serde_json::{Value, json};

use super::{create, free_seats, holders, replay, seated};
use crate::moderation::{cid, events, ok, room};
use crate::support::app::{TestApp, fake_im, settings};
use crate::support::backends;

/// The envelopes IM got for `group`, once there are `count` of them (at most 10 s).
async fn received(im: &FakeIm, group: &str, count: usize) -> Vec<Value> {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let messages = im.messages(group);
        if messages.len() >= count {
            return messages.iter().map(|m| serde_json::from_str(&m.data).expect("an envelope")).collect();
        }
        assert!(Instant::now() < until, "IM got {} of {count} messages", messages.len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// POSTs `path` with a fresh command id; panics unless 200; the answer.
async fn post(app: &TestApp, path: &str, mut body: Value) -> Value {
    body["command_id"] = cid("p").into();
    let (status, answer) = app.post(path, body.clone()).await;
    assert_eq!(status, 200, "{path} {body}: {answer}");
    answer
}

#[tokio::test]
async fn seat_commands_reach_im_once_each_in_version_order_and_replay_to_the_rooms_seats() {
    for db in backends().await {
        let im = fake_im().await;
        let app = TestApp::start(settings(db.url(), Some(&im), &[])).await;
        create(&app, "live", "host", 4, "free").await;
        let mut answers = Vec::new();
        for user in ["ann", "bob", "cat"] {
            answers.push(post(&app, "/v1/rooms/live/join", json!({"user_id": user})).await);
        }
        // Each step and who holds the four seats after it.
        let steps: [(&str, &str, Value, [Option<&str>; 4]); 11] = [
            ("take", "ann", json!({"index": 0}), [Some("ann"), None, None, None]),
            ("take", "bob", json!({}), [Some("ann"), Some("bob"), None, None]),
            (
                "move",
                "ann",
                json!({"user_id": "ann", "to": 2, "policy": "cancel"}),
                [None, Some("bob"), Some("ann"), None],
            ),
            ("lock", "host", json!({"index": 1, "locked": true}), [None, None, Some("ann"), None]),
            ("mute", "host", json!({"index": 2, "muted": true}), [None, None, Some("ann"), None]),
            ("take", "cat", json!({"index": 3}), [None, None, Some("ann"), Some("cat")]),
            ("kick", "host", json!({"index": 3}), [None, None, Some("ann"), None]),
            // The lowest free seat: 1 is locked.
            ("take", "bob", json!({}), [Some("bob"), None, Some("ann"), None]),
            (
                "move",
                "host",
                json!({"user_id": "bob", "to": 2, "policy": "swap"}),
                [Some("ann"), None, Some("bob"), None],
            ),
            ("lock", "host", json!({"index": 1, "locked": false}), [Some("ann"), None, Some("bob"), None]),
            ("take", "cat", json!({}), [Some("ann"), Some("cat"), Some("bob"), None]),
        ];
        let mut expected_types = Vec::new();
        for (action, actor, body, after) in &steps {
            let answer = seated(&app, "live", action, actor, body.clone()).await;
            let after: Vec<Option<String>> = after.iter().map(|h| h.map(str::to_owned)).collect();
            assert_eq!(holders(&answer["room"]["seats"]), after, "{db}: {actor} {action} {body}: {answer}");
            answers.push(answer);
            expected_types.push("RoomSeatsChanged");
        }
        // ann leaves the room, cat is kicked out of it: each frees its seat in that command.
        answers.push(post(&app, "/v1/rooms/live/leave", json!({"user_id": "ann"})).await);
        expected_types.push("RoomUserLeft");
        answers.push(ok(&app, "live", "kicks", "host", json!({"user_id": "cat", "ban_s": 60})).await);
        expected_types.push("RoomUserKicked");

        let view = room(&app, "live").await;
        let final_seats = json!([
            {"index": 0, "user_id": null, "locked": false, "muted": false},
            {"index": 1, "user_id": null, "locked": false, "muted": false},
            {"index": 2, "user_id": "bob", "locked": false, "muted": true},
            {"index": 3, "user_id": null, "locked": false, "muted": false},
        ]);
        assert_eq!(view["seats"], final_seats, "{db}: {view}");

        // One event per command in every answer; the versions one step apart.
        let versions: Vec<u64> =
            answers.iter().map(|a| a["room_version"].as_u64().expect("room_version")).collect();
        assert_eq!(versions, (2..2 + answers.len() as u64).collect::<Vec<_>>(), "{db}: one step a command");
        for answer in &answers {
            assert_eq!(answer["events"].as_array().map(Vec::len), Some(1), "{db}: {answer}");
        }

        // IM got exactly one message per command (the joins' and the seats'), in version order.
        let sent = received(&im, "live", answers.len()).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(im.messages("live").len(), answers.len(), "{db}: nothing more reaches IM");
        let sent_versions: Vec<u64> = sent.iter().map(|e| e["room_version"].as_u64().unwrap()).collect();
        assert_eq!(sent_versions, versions, "{db}: IM got them in room-version order");
        let sent_types: Vec<&str> = sent.iter().skip(3).map(|e| e["event_type"].as_str().unwrap()).collect();
        assert_eq!(sent_types, expected_types, "{db}");
        for message in im.messages("live").iter().filter(|m| m.desc == "RoomSeatsChanged") {
            assert_eq!(message.priority.as_deref(), Some("High"), "{db}: {}", message.desc);
        }
        let left = &sent[sent.len() - 2]["payload"];
        assert_eq!(
            holders(&left["seats"]),
            [None, Some("cat".into()), Some("bob".into()), None],
            "{db}: {left}"
        );
        let kicked = &sent[sent.len() - 1]["payload"];
        assert_eq!(kicked["seats"], final_seats, "{db}: the kick carries the seats: {kicked}");

        // The seat lists replayed in order rebuild the room's seats, from either source.
        assert_eq!(replay(free_seats(4), &sent), final_seats, "{db}: replayed from IM");
        let all: Vec<Value> = events(&app, "live").await.into_iter().map(|(e, _)| e).collect();
        assert_eq!(replay(free_seats(4), &all), final_seats, "{db}: replayed from the events API");
        // And step by step: each RoomSeatsChanged shows the seats the command left.
        let changed: Vec<&Value> = all.iter().filter(|e| e["event_type"] == "RoomSeatsChanged").collect();
        let expected: Vec<Vec<Option<String>>> =
            steps.iter().map(|s| s.3.iter().map(|h| h.map(str::to_owned)).collect()).collect();
        let seen: Vec<Vec<Option<String>>> =
            changed.iter().map(|e| holders(&e["payload"]["seats"])).collect();
        assert_eq!(seen, expected, "{db}");
        app.stop().await;
    }
}

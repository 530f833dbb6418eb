//! No seat is ever held by a non-member (SPEC §14.3), over HTTP as racing clients would: twelve
//! members take, leave and move between four seats, leave the room and come back, while the
//! owner kicks, locks, unlocks, force-moves and swaps and kicks members out of the room, all at
//! once. Every answer is 200 or 409; and replaying the events in order, after every single one
//! each seat holder is a member holding no other seat, no locked seat is held, and the last
//! list is the room's.

use std::collections::BTreeSet;

use futures::StreamExt;
use serde_json::{Value, json};

use super::{create, free_seats, seat};
use crate::moderation::{act, cid, events, join, members, room};
use crate::support::app::{TestApp, settings};
use crate::support::backends;

const USERS: usize = 12;
const SEATS: u64 = 4;
const STEPS: usize = 30;

/// A small deterministic generator (xorshift64*): the same run every time.
struct Dice(u64);

impl Dice {
    fn roll(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) % below
    }
}

fn user(n: u64) -> String {
    format!("u{n:02}")
}

/// One member's steps: every answer's status.
async fn member(app: &TestApp, n: usize) -> Vec<(u16, Value)> {
    let mut dice = Dice(0x9E37_79B9_7F4A_7C15 ^ (n as u64 + 1));
    let me = user(n as u64);
    let mut answers = Vec::new();
    for _ in 0..STEPS {
        let answer = match dice.roll(6) {
            0 => seat(app, "c", "take", &me, json!({"index": dice.roll(SEATS)})).await,
            1 => seat(app, "c", "take", &me, json!({})).await,
            2 => seat(app, "c", "leave", &me, json!({})).await,
            3 => seat(app, "c", "move", &me, json!({"user_id": me, "to": dice.roll(SEATS)})).await,
            4 => app.post("/v1/rooms/c/leave", json!({"command_id": cid("l"), "user_id": me})).await,
            _ => join(app, "c", &me).await,
        };
        answers.push(answer);
    }
    answers
}

/// The owner's steps: every answer's status.
async fn owner(app: &TestApp) -> Vec<(u16, Value)> {
    let mut dice = Dice(0xD1B5_4A32_D192_ED03);
    let mut answers = Vec::new();
    for _ in 0..STEPS * 2 {
        let index = dice.roll(SEATS);
        let someone = user(dice.roll(USERS as u64));
        let answer = match dice.roll(5) {
            0 => seat(app, "c", "kick", "host", json!({"index": index})).await,
            1 => seat(app, "c", "lock", "host", json!({"index": index, "locked": dice.roll(2) == 0})).await,
            2 => {
                let policy = if dice.roll(2) == 0 { "force" } else { "swap" };
                let body = json!({"user_id": someone, "to": index, "policy": policy});
                seat(app, "c", "move", "host", body).await
            }
            3 => act(app, "c", "kicks", "host", json!({"user_id": someone, "ban_s": 0})).await,
            _ => seat(app, "c", "mute", "host", json!({"index": index, "muted": dice.roll(2) == 0})).await,
        };
        answers.push(answer);
    }
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_seat_is_ever_held_by_a_non_member_under_racing_commands() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "c", "host", SEATS as u32, "free").await;
        for n in 0..USERS as u64 {
            assert_eq!(join(&app, "c", &user(n)).await.0, 200, "{db}");
        }
        let shared = &app;
        let racers = futures::stream::iter(0..=USERS)
            .map(|n| async move { if n == USERS { owner(shared).await } else { member(shared, n).await } })
            .buffer_unordered(USERS + 1)
            .collect::<Vec<_>>()
            .await;
        let answers: Vec<(u16, Value)> = racers.into_iter().flatten().collect();
        for (status, answer) in &answers {
            assert!([200, 409].contains(status), "{db}: 200 or 409 only: {answer}");
        }
        let applied = answers.iter().filter(|(s, a)| *s == 200 && a["applied"] == true).count();
        assert!(applied > STEPS, "{db}: the run did something: {applied} applied");

        // After every event: each holder a member, on one seat only, no locked seat held.
        let all: Vec<Value> = events(&app, "c").await.into_iter().map(|(e, _)| e).collect();
        let mut present: BTreeSet<String> = BTreeSet::new();
        let mut seats = free_seats(SEATS as u32);
        for event in &all {
            let payload = &event["payload"];
            let user_id = payload["user_id"].as_str().map(str::to_owned);
            match event["event_type"].as_str() {
                Some("RoomUserJoined") => present.extend(user_id),
                Some("RoomUserLeft" | "RoomUserKicked") => {
                    present.remove(user_id.as_deref().unwrap_or_default());
                }
                _ => {}
            }
            seats = super::replay(seats, std::slice::from_ref(event));
            let held: Vec<&str> =
                seats.as_array().unwrap().iter().filter_map(|s| s["user_id"].as_str()).collect();
            let at = &event["room_version"];
            for holder in &held {
                assert!(
                    present.contains(*holder),
                    "{db}: at {at} {holder} holds a seat, not a member: {event}"
                );
            }
            assert_eq!(held.iter().collect::<BTreeSet<_>>().len(), held.len(), "{db}: at {at}: {seats}");
            for s in seats.as_array().unwrap() {
                assert!(!(s["locked"] == true && s["user_id"].is_string()), "{db}: at {at}: {seats}");
            }
        }
        let freed = all
            .iter()
            .filter(|e| e["event_type"] != "RoomSeatsChanged" && e["payload"].get("seats").is_some())
            .count();
        assert!(freed > 0, "{db}: some member left or was kicked out while seated: {applied} applied");
        let view = room(&app, "c").await;
        assert_eq!(view["seats"], seats, "{db}: the events replay to the room's seats");
        let now: BTreeSet<String> = members(&app, "c").await.into_iter().collect();
        assert_eq!(now, present, "{db}: the events replay to the room's members");
        app.stop().await;
    }
}

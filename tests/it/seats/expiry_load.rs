//! Seat request expiry under load (docs/DESIGN.md, "Seat request expiry"): a room's due
//! requests expire together and rooms in parallel, so with hundreds due at once across four
//! rooms, and a lone one in a fifth, every `RoomSeatRequestExpired` reaches IM within twice
//! the scan interval and an IM round trip of its request's expiry — none waits for the
//! others' IM sends, and none is held by the seat action rate (the service's own commands).

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::join_all;
use room_service::room::presence::seats::scan_interval;
use room_service_fakes::fake_im::FakeIm;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::{create, seated};
use crate::moderation::join;
use crate::support::app::{TestApp, fake_im, settings};
use crate::support::backends;

/// Rooms with many due requests, and the requests of each.
const BUSY_ROOMS: usize = 4;
const PER_ROOM: usize = 75;
/// What each IM call takes at the fake.
const IM_LATENCY: Duration = Duration::from_millis(20);

/// When IM accepted each `RoomSeatRequestExpired`, by (room, user), once all `count` came
/// (at most `within`).
async fn expired_at_im(im: &FakeIm, count: usize, within: Duration) -> HashMap<(String, String), Instant> {
    let until = Instant::now() + within;
    loop {
        let at: HashMap<(String, String), Instant> = im
            .all_messages()
            .into_iter()
            .filter(|m| m.desc == "RoomSeatRequestExpired")
            .filter_map(|m| {
                let envelope: Value = serde_json::from_str(&m.data).ok()?;
                let room = envelope["room_id"].as_str()?.to_owned();
                let user = envelope["payload"]["user_id"].as_str()?.to_owned();
                Some(((room, user), m.accepted_at))
            })
            .collect();
        if at.len() >= count {
            return at;
        }
        if Instant::now() >= until {
            let mut rooms: std::collections::BTreeMap<&str, usize> = Default::default();
            for (room, _) in at.keys() {
                *rooms.entry(room.as_str()).or_default() += 1;
            }
            panic!("IM got {} of {count} expiries, by room: {rooms:?}", at.len());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Now on the wall clock (ms since the epoch) and on the process clock, taken together.
fn clocks() -> (i64, Instant) {
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).expect("after the epoch").as_millis();
    (i64::try_from(ms).expect("ms fit"), Instant::now())
}

/// Opens `user`'s request in `room` (after joining it).
async fn request(app: &TestApp, room: &str, user: &str) {
    let (status, answer) = join(app, room, user).await;
    assert_eq!(status, 200, "join {user}: {answer}");
    seated(app, room, "request", user, json!({})).await;
}

/// When `user`'s pending request in `room` expires, from the room's seat queue.
async fn expires_at(app: &TestApp, room: &str, user: &str) -> i64 {
    let (status, view) = app.get(&format!("/v1/rooms/{room}/seats")).await;
    assert_eq!(status, 200, "{view}");
    let pending = view["pending"].as_array().unwrap_or_else(|| panic!("pending in {view}"));
    let entry = pending.iter().find(|p| p["user_id"] == user).unwrap_or_else(|| panic!("{user} in {view}"));
    entry["expires_at_ms"].as_i64().unwrap_or_else(|| panic!("expires_at_ms in {entry}"))
}

#[tokio::test]
async fn hundreds_due_across_four_rooms_and_a_lone_one_all_reach_im_within_two_scans_and_a_round_trip() {
    for db in backends().await {
        let im = fake_im().await;
        im.set_latency(IM_LATENCY);
        let ttl = Duration::from_secs(5);
        let overrides = [
            ("rooms.seat_request_ttl", "5s"),
            ("rooms.seat_actions_per_user_per_sec", "2"),
            // A lane whose oldest event waited this long gives its room to the outbox worker
            // (off here): room enough for a loaded machine, so only the expiry's own timing shows.
            ("outbox_worker.publish_timeout", "10s"),
        ];
        let app = TestApp::start(settings(db.url(), Some(&im), &overrides)).await;
        let rooms: Vec<String> = (0..BUSY_ROOMS).map(|i| format!("busy-{i}")).collect();
        for room in rooms.iter().map(String::as_str).chain(["lone"]) {
            create(&app, room, "host", 20, "apply").await;
        }
        // Every request opened at once, so they all fall due together.
        let mut asks: Vec<(String, String)> = rooms
            .iter()
            .flat_map(|room| (0..PER_ROOM).map(move |i| (room.clone(), format!("u{i}"))))
            .collect();
        asks.push(("lone".into(), "solo".into()));
        join_all(asks.iter().map(|(room, user)| request(&app, room, user))).await;
        let (wall_ms, process) = clocks();
        let mut expiries = Vec::new();
        for (room, user) in &asks {
            expiries.push(expires_at(&app, room, user).await);
        }

        let bound = 2 * scan_interval(ttl) + IM_LATENCY;
        // Generous beside the bound (a loaded debug build on shared cores), yet far below what
        // one expiry at a time cost: each awaiting its IM send, the last ~PER_ROOM × 4 calls late.
        let slack = scan_interval(ttl);
        let latest = expiries.iter().max().copied().unwrap_or(wall_ms);
        let wait = Duration::from_millis(u64::try_from(latest - wall_ms).unwrap_or(0)) + bound + slack * 4;
        let at_im = expired_at_im(&im, asks.len(), wait).await;

        let mut worst = Duration::ZERO;
        for ((room, user), expires_at_ms) in asks.iter().zip(&expiries) {
            let due = process + Duration::from_millis(u64::try_from(expires_at_ms - wall_ms).unwrap_or(0));
            let reached = at_im
                .get(&(room.clone(), user.clone()))
                .unwrap_or_else(|| panic!("{db}: {user}'s request in {room} never reached IM expired"));
            let late = reached.saturating_duration_since(due);
            assert!(
                late <= bound + slack,
                "{db}: {user} in {room} reached IM {late:?} after its expiry (bound {bound:?} + {slack:?})"
            );
            worst = worst.max(late);
        }
        let lone = at_im[&("lone".to_owned(), "solo".to_owned())];
        let lone_due =
            process + Duration::from_millis(u64::try_from(expiries[asks.len() - 1] - wall_ms).unwrap_or(0));
        assert!(
            lone.saturating_duration_since(lone_due) <= bound + slack,
            "{db}: the lone request waited for the busy rooms"
        );
        eprintln!("{db}: {} expiries, the latest {worst:?} after its expiry (bound {bound:?})", asks.len());
        app.stop().await;
    }
}

//! SIGKILL in the middle of a drain: the rows a killed worker had sent but not yet marked are
//! sent again after its lease — no more than IM accepted in its last mark interval.

use std::process::Child;
use std::time::Duration;

use room_service::domain::EventType;
use room_service::fake_im::{FakeIm, FakeImOptions};

use super::{Node, eventually, undelivered};
use crate::outbox::harness::{ADMIN, APP, Db, KEY};
use crate::support::TestDb;

/// The marks of a batch are written at least this often (the worker's promise), plus the time
/// a mark statement takes.
const MARK_WINDOW: Duration = Duration::from_millis(250 + 250);

fn spawn(db_url: &str, im: &FakeIm) -> Child {
    Node::new(db_url, im).spawn()
}

#[tokio::test]
async fn sigkill_mid_drain_resends_at_most_what_im_accepted_in_the_last_mark_interval() {
    let test_db = TestDb::mysql().await;
    let db_url = test_db.url().to_owned();
    let outbox = Db::over(test_db);
    let mut options = FakeImOptions::new(APP, KEY, ADMIN);
    (options.per_group_limit_per_sec, options.global_limit_per_sec) = (None, None);
    options.latency = Duration::from_millis(5);
    let im = FakeIm::start(options).await;
    const ROOMS: usize = 30;
    const PER_ROOM: usize = 60;
    for room in 0..ROOMS {
        outbox.insert_events(&format!("room-{room}"), &[EventType::RoomUserJoined; PER_ROOM]).await;
    }

    let mut first = spawn(&db_url, &im);
    eventually("the drain is under way", Duration::from_secs(30), || async { im.stats().accepted >= 400 })
        .await;
    let killed_at = tokio::time::Instant::now();
    first.kill().unwrap(); // SIGKILL
    first.wait().unwrap();
    // Sent but maybe not marked: accepted within the last mark interval (or still in flight).
    let recent = im.all_messages().iter().filter(|m| m.accepted_at + MARK_WINDOW >= killed_at).count() as u64;

    let mut second = spawn(&db_url, &im);
    let db = outbox.test_db();
    eventually("the restarted worker delivers the rest", Duration::from_secs(90), || async {
        undelivered(db).await == 0
    })
    .await;
    second.kill().unwrap();
    second.wait().unwrap();
    let stats = im.stats();
    // The figures, for `cargo test --test it delivery::crash -- --nocapture`.
    eprintln!(
        "sent twice: {}; accepted in the last {MARK_WINDOW:?} before the kill: {recent}",
        stats.duplicates
    );
    assert_eq!(stats.accepted, (ROOMS * PER_ROOM) as u64, "every event reached IM once: {stats:?}");
    assert!(
        stats.duplicates <= recent,
        "{} events sent twice, more than the {recent} IM accepted in the last {MARK_WINDOW:?} before the kill",
        stats.duplicates
    );
}

//! Per-room order in the worker: a row never goes out ahead of an earlier undelivered row of
//! its room, and a backlogged room never holds other rooms back.

use std::time::Duration;

use room_service::delivery::permits::RateLimitOptions;
use room_service::domain::EventType;
use room_service::outbox::OutboxWorker;
use tokio_util::sync::CancellationToken;

use super::harness::*;

const TIMEOUT: Duration = Duration::from_secs(2);

fn row(room: &str) -> (String, (String, &'static str, String)) {
    let id = new_event_id();
    let row = (id.clone(), "RoomUserJoined", envelope(&id, EventType::RoomUserJoined, room));
    (id, row)
}

async fn a_room_is_claimed_up_to_its_first_row_not_due_and_nothing_after_it(db: &Db) {
    let fake = fake().await;
    let (first, first_row) = row("room-1");
    let (second, second_row) = row("room-1");
    let (third, third_row) = row("room-1");
    db.insert_rows("room-1", vec![first_row], Duration::ZERO).await;
    // Not claimable for a minute (a retry, a sync publish still in flight, another node's).
    db.insert_rows("room-1", vec![second_row], Duration::from_secs(60)).await;
    db.insert_rows("room-1", vec![third_row], Duration::ZERO).await;

    let report = worker(db, &fake, "node-a", options(10, Duration::from_millis(50), TIMEOUT))
        .process_pending_outbox()
        .await
        .unwrap();
    assert_eq!((report.claimed, report.delivered, report.deferred), (1, 1, 0), "{report:?}");
    let sent: Vec<String> = fake.all_messages().into_iter().filter_map(|m| m.event_id).collect();
    assert_eq!(sent, [first], "the third waits behind the second");
    let (waiting, behind) = (db.row(&second).await, db.row(&third).await);
    assert_eq!((waiting.status.as_str(), waiting.worker_id.as_deref()), ("pending", None));
    assert_eq!((behind.status.as_str(), behind.worker_id.as_deref()), ("pending", None), "never claimed");
}

async fn a_backlogged_room_never_holds_other_rooms_back(db: &Db) {
    let fake = fake().await;
    db.insert_events("hot", &[EventType::RoomUserJoined; 150]).await;
    let (other, other_row) = row("quiet");
    db.insert_rows("quiet", vec![other_row], Duration::ZERO).await;
    // The hot room drains at 10 calls per second; the worker holds two seconds of that.
    let limits = RateLimitOptions {
        global_per_sec: 1000,
        per_group_per_sec: 10,
        worker_share: 1.0,
        pause: Duration::from_secs(1),
    };
    let options = options(100, Duration::from_millis(50), TIMEOUT);
    let publisher = stack(&fake, TIMEOUT);
    let worker = OutboxWorker::new(db.repo.clone(), publisher, "node-a", options)
        .with_per_room_rate(10)
        .with_permits(permits(limits));
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { worker.run_outbox_worker(cancel).await }
    });
    eventually("the quiet room's event is delivered", || async { fake.messages(&group("quiet")).len() == 1 })
        .await;
    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(5), run).await.expect("worker exits").expect("no panic");
    // Calls in the order IM took them (a call of several events is recorded once per event).
    let calls: Vec<_> = fake.all_messages().into_iter().filter(|m| m.index == 0).collect();
    let position = calls.iter().position(|m| m.event_id.as_deref() == Some(other.as_str())).expect("sent");
    assert!(position <= 3, "the quiet room waited behind {position} calls of the hot room");
    // Meanwhile the hot room's rows were held back in order, none lost.
    assert!(db.rows().await.iter().all(|r| r.status != "delivering"), "every row marked or released");
}

async fn a_released_live_row_is_claimed_ahead_of_an_old_backlog(db: &Db) {
    db.insert_events("old", &[EventType::RoomUserJoined; 30]).await;
    let (live, live_row) = row("live");
    // A fresh row the sync path is still publishing, then gives up on.
    db.insert_rows("live", vec![live_row], Duration::from_secs(60)).await;
    assert_eq!(db.repo.release_pending(std::slice::from_ref(&live)).await.unwrap(), 1);
    let claim = room_service::store::Claim::new("w-1", 5, Duration::from_secs(30));
    let claimed = db.repo.claim_outbox(&claim).await.unwrap().rows;
    assert_eq!(claimed[0].event_id, live, "the live row comes first, in claim order: {claimed:?}");
    let backlog: Vec<i64> = claimed[1..].iter().map(|r| r.id).collect();
    assert!(backlog.windows(2).all(|w| w[0] < w[1]), "then the backlog in order: {backlog:?}");
}

async fn a_row_whose_guard_ends_is_claimed_then_not_at_the_next_tick(db: &Db) {
    let fake = fake().await;
    let (id, young) = row("room-1");
    db.insert_rows("room-1", vec![young], Duration::from_millis(300)).await;
    // A 30 s poll interval: only the next-row timer can deliver it within seconds.
    let worker = worker(db, &fake, "node-a", options(10, Duration::from_secs(30), TIMEOUT));
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { worker.run_outbox_worker(cancel).await }
    });
    let delivered = tokio::time::timeout(Duration::from_secs(10), async {
        while db.row(&id).await.status != "delivered" {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(5), run).await.expect("worker exits").expect("no panic");
    assert!(delivered.is_ok(), "still {} long before the next poll tick", db.row(&id).await.status);
}

both_backends!(
    a_room_is_claimed_up_to_its_first_row_not_due_and_nothing_after_it,
    a_backlogged_room_never_holds_other_rooms_back,
    a_released_live_row_is_claimed_ahead_of_an_old_backlog,
    a_row_whose_guard_ends_is_claimed_then_not_at_the_next_tick,
);

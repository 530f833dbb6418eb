//! Cancellation: no new batch, the publish in flight finishes within publish_timeout and is
//! marked, the rest of the batch is handed back at once, the worker exits. The workers here send
//! one event a message, so that the publish in flight is one row and the rest stays queued.

use std::time::{Duration, Instant};

use room_service::config::OutboxWorkerSettings;
use room_service::delivery::pack::PackLimits;
use room_service::domain::EventType;
use room_service::outbox::OutboxWorker;
use room_service_fakes::fake_im::{FakeIm, Fault};
use tokio_util::sync::CancellationToken;

use super::harness::*;

const POLL: Duration = Duration::from_millis(100);

/// [`worker`], one event a message.
fn single(db: &Db, fake: &FakeIm, options: OutboxWorkerSettings) -> OutboxWorker {
    worker(db, fake, "node-a", options).with_pack_limits(PackLimits::SINGLE)
}

async fn cancel_lets_the_publish_in_flight_finish_and_releases_the_rest(db: &Db) {
    let fake = fake().await;
    let ids = db.insert_events("room-1", &[EventType::RoomUserJoined; 3]).await;
    fake.inject(Fault::Delay(Duration::from_millis(500)), 1);
    let publish_timeout = Duration::from_secs(2);
    let worker = single(db, &fake, options(10, POLL, publish_timeout));
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { worker.run_outbox_worker(cancel).await }
    });
    eventually("the first publish is in flight", || async { fake.stats().calls >= 1 }).await;
    cancel.cancel();
    let cancelled_at = Instant::now();
    tokio::time::timeout(publish_timeout + Duration::from_secs(1), run)
        .await
        .expect("the worker exits within publish_timeout")
        .expect("no panic");
    assert!(cancelled_at.elapsed() < publish_timeout, "{:?}", cancelled_at.elapsed());

    // The row in flight completed and was marked.
    assert_eq!(db.row(&ids[0]).await.status, "delivered");
    assert_eq!(fake.messages(&group("room-1")).len(), 1);
    assert_eq!(fake.stats().calls, 1, "nothing was published after the cancel");
    // The others were never published and are claimable at once, attempts untouched.
    let now = db.now_ms().await;
    for id in &ids[1..] {
        let row = db.row(id).await;
        assert_eq!((row.status.as_str(), row.retry_count), ("pending", 0), "{id}");
        assert!(row.lock_until_ms.is_some_and(|t| t <= now), "{row:?}");
    }
    let next = super::harness::worker(db, &fake, "node-b", options(10, POLL, publish_timeout));
    assert_eq!(next.process_pending_outbox().await.unwrap().delivered, 2);
}

async fn a_released_row_that_failed_before_stays_retryable(db: &Db) {
    let fake = fake().await;
    let ids = db.insert_events("room-1", &[EventType::RoomUserJoined; 2]).await;
    // First round: the first fails once; the second waits behind it (room order).
    fake.inject(Fault::ErrorCode(10002), 1);
    let worker = single(db, &fake, options(10, Duration::from_millis(1), Duration::from_secs(2)));
    let report = worker.process_pending_outbox().await.unwrap();
    assert_eq!((report.retried, report.deferred), (1, 1));
    // The second row had failed once too, in an earlier life.
    db.exec(&format!(
        "UPDATE room_outbox SET status = 'retryable', retry_count = 1 WHERE event_id = '{}'",
        ids[1]
    ))
    .await;
    tokio::time::sleep(Duration::from_millis(20)).await;

    // Second round is cancelled while the first row is in flight.
    fake.inject(Fault::Delay(Duration::from_millis(300)), 1);
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { worker.run_outbox_worker(cancel).await }
    });
    eventually("the retry is in flight", || async { fake.stats().calls >= 2 }).await;
    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(3), run).await.expect("worker exits").expect("no panic");

    let first = db.row(&ids[0]).await;
    assert_eq!((first.status.as_str(), first.retry_count), ("delivered", 1));
    let second = db.row(&ids[1]).await;
    assert_eq!(
        (second.status.as_str(), second.retry_count),
        ("retryable", 1),
        "released, attempts unchanged"
    );
}

async fn cancel_bounds_a_hung_publish_by_publish_timeout(db: &Db) {
    let fake = fake().await;
    let ids = db.insert_events("room-1", &[EventType::RoomGiftSent, EventType::RoomGiftSent]).await;
    fake.inject(Fault::Delay(Duration::from_secs(30)), 1);
    let publish_timeout = Duration::from_millis(500);
    let worker = single(db, &fake, options(10, POLL, publish_timeout));
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { worker.run_outbox_worker(cancel).await }
    });
    eventually("the first publish is in flight", || async { fake.stats().calls >= 1 }).await;
    let cancelled_at = Instant::now();
    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(3), run).await.expect("worker exits").expect("no panic");
    let waited = cancelled_at.elapsed();
    // Bounded by publish_timeout (plus the mark), far below the 30 s the fake would take.
    assert!(waited < publish_timeout + Duration::from_secs(1), "waited {waited:?}");

    let hung = db.row(&ids[0]).await;
    assert_eq!((hung.status.as_str(), hung.retry_count), ("retryable", 1));
    assert!(hung.last_error.as_deref().is_some_and(|e| e.starts_with("timeout")), "{:?}", hung.last_error);
    assert_eq!(db.row(&ids[1]).await.status, "pending");
    assert_eq!(fake.stats().calls, 1);
}

async fn a_cancelled_worker_claims_nothing(db: &Db) {
    let fake = fake().await;
    let ids = db.insert_events("room-1", &[EventType::RoomUserJoined]).await;
    let worker = worker(db, &fake, "node-a", options(10, POLL, Duration::from_secs(1)));
    let cancel = CancellationToken::new();
    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(1), worker.run_outbox_worker(cancel))
        .await
        .expect("returns at once");
    let row = db.row(&ids[0]).await;
    assert_eq!((row.status.as_str(), row.worker_id), ("pending", None));
    assert_eq!(fake.stats().calls, 0);
}

both_backends!(
    cancel_lets_the_publish_in_flight_finish_and_releases_the_rest,
    a_released_row_that_failed_before_stays_retryable,
    cancel_bounds_a_hung_publish_by_publish_timeout,
    a_cancelled_worker_claims_nothing,
);

//! What the worker delivers, what it marks, and what it never sends.

use std::time::Duration;

use room_service::domain::EventType;
use room_service::outbox::BatchReport;
use room_service_fakes::fake_im::Fault;
use tokio_util::sync::CancellationToken;

use super::harness::*;

const FAST: Duration = Duration::from_millis(100);
const TIMEOUT: Duration = Duration::from_secs(2);

async fn worker_delivers_a_pending_row(db: &Db) {
    let fake = fake().await;
    let ids = db.insert_events("room-1", &[EventType::RoomUserJoined]).await;
    let report =
        worker(db, &fake, "node-a", options(10, FAST, TIMEOUT)).process_pending_outbox().await.unwrap();
    assert_eq!(report, BatchReport { claimed: 1, delivered: 1, ..BatchReport::default() });

    let sent = fake.messages(&group("room-1"));
    assert_eq!(sent.len(), 1, "{sent:?}");
    let row = db.row(&ids[0]).await;
    assert_eq!(sent[0].event_id.as_deref(), Some(ids[0].as_str()));
    assert_eq!(sent[0].data, row.envelope, "the stored envelope is sent unchanged");
    assert_eq!(sent[0].desc, "RoomUserJoined");
    assert_eq!((row.status.as_str(), row.retry_count, row.last_error.as_deref()), ("delivered", 0, None));
    assert!(row.delivered_at_ms.is_some());
}

async fn worker_failure_marks_the_row_retryable_with_a_clean_error(db: &Db) {
    let fake = fake().await;
    let ids = db.insert_events("room-1", &[EventType::RoomGiftSent]).await;
    fake.inject(Fault::ErrorCode(10002), 1);
    let worker = worker(db, &fake, "node-a", options(10, Duration::from_secs(30), TIMEOUT));
    let report = worker.process_pending_outbox().await.unwrap();
    assert_eq!(report, BatchReport { claimed: 1, retried: 1, ..BatchReport::default() });

    let row = db.row(&ids[0]).await;
    assert_eq!((row.status.as_str(), row.retry_count), ("retryable", 1));
    let error = row.last_error.expect("last_error is set");
    assert!(error.contains("10002") && error.starts_with("transient"), "{error}");
    assert!(error.len() <= 512);
    for secret in [KEY, "usersig", "sdkappid", &row.envelope, "http://"] {
        assert!(!error.contains(secret), "last_error leaks {secret:?}: {error}");
    }
    // Fixed interval: not claimable again before poll_interval.
    assert_eq!(worker.process_pending_outbox().await.unwrap().claimed, 0);
    assert!(fake.all_messages().is_empty());
}

async fn a_failed_row_is_delivered_on_the_next_round(db: &Db) {
    let fake = fake().await;
    let ids = db.insert_events("room-1", &[EventType::RoomUserLeft]).await;
    fake.inject(Fault::Http502, 1);
    let worker = worker(db, &fake, "node-a", options(10, FAST, TIMEOUT));
    assert_eq!(worker.process_pending_outbox().await.unwrap().retried, 1);
    assert_eq!(db.row(&ids[0]).await.status, "retryable");

    tokio::time::sleep(FAST + Duration::from_millis(50)).await;
    let report = worker.process_pending_outbox().await.unwrap();
    assert_eq!(report, BatchReport { claimed: 1, delivered: 1, ..BatchReport::default() });
    let row = db.row(&ids[0]).await;
    assert_eq!((row.status.as_str(), row.retry_count, row.last_error.as_deref()), ("delivered", 1, None));
    assert_eq!(fake.messages(&group("room-1")).len(), 1);
}

async fn a_delivered_row_is_never_sent_again(db: &Db) {
    let fake = fake().await;
    let ids = db.insert_events("room-1", &[EventType::RoomUserJoined, EventType::RoomUserJoined]).await;
    // The synchronous path published the first one and marked it.
    assert_eq!(db.repo.mark_delivered(&ids[..1]).await.unwrap(), 1);
    let worker = worker(db, &fake, "node-a", options(10, FAST, TIMEOUT));
    assert_eq!(worker.process_pending_outbox().await.unwrap().claimed, 1);
    tokio::time::sleep(FAST + Duration::from_millis(50)).await;
    assert_eq!(worker.process_pending_outbox().await.unwrap(), BatchReport::default());

    let sent = fake.messages(&group("room-1"));
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].event_id.as_deref(), Some(ids[1].as_str()));
    assert_eq!(fake.stats().calls, 1, "nothing is ever sent twice");
}

async fn events_not_meant_for_im_are_marked_delivered_without_a_call(db: &Db) {
    let fake = fake().await;
    let types = [
        EventType::RoomCreated,
        EventType::RoomHeatChanged,
        EventType::RoomRankChanged,
        EventType::RoomGiftSent,
    ];
    let ids = db.insert_events("room-1", &types).await;
    let report =
        worker(db, &fake, "node-a", options(10, FAST, TIMEOUT)).process_pending_outbox().await.unwrap();
    assert_eq!(report, BatchReport { claimed: 4, delivered: 4, ..BatchReport::default() });
    for id in &ids {
        assert_eq!(db.row(id).await.status, "delivered");
    }
    let sent = fake.all_messages();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].desc, "RoomGiftSent");
    assert_eq!(fake.stats().calls, 1);
}

async fn an_undecodable_envelope_is_parked_for_inspection_and_the_batch_goes_on(db: &Db) {
    let fake = fake().await;
    let (good_a, broken, unknown, good_b) = (new_event_id(), new_event_id(), new_event_id(), new_event_id());
    let unknown_type =
        envelope(&unknown, EventType::RoomClosed, "room-1").replace("RoomClosed", "RoomExploded");
    let rows = vec![
        (good_a.clone(), "RoomUserJoined", envelope(&good_a, EventType::RoomUserJoined, "room-1")),
        (broken.clone(), "RoomUserJoined", "{\"event_id\": truncated".to_owned()),
        (unknown.clone(), "RoomClosed", unknown_type),
        (good_b.clone(), "RoomClosed", envelope(&good_b, EventType::RoomClosed, "room-1")),
    ];
    db.insert_rows("room-1", rows, Duration::ZERO).await;

    let report =
        worker(db, &fake, "node-a", options(10, FAST, TIMEOUT)).process_pending_outbox().await.unwrap();
    assert_eq!(
        report,
        BatchReport { claimed: 4, delivered: 2, parked: 2, undecodable: 2, ..BatchReport::default() }
    );
    for id in [&good_a, &good_b] {
        assert_eq!(db.row(id).await.status, "delivered");
    }
    for id in [&broken, &unknown] {
        let row = db.row(id).await;
        assert_eq!((row.status.as_str(), row.retry_count), ("failed", 1), "{id}");
        assert_eq!(row.park_reason.as_deref(), Some("undecodable"), "{id}");
        assert_eq!(row.lock_until_ms, None, "{id}: out of the claim index");
        let error = row.last_error.expect("last_error explains it");
        assert!(error.starts_with("undecodable envelope: "), "{error}");
    }
    let sent: Vec<_> = fake.all_messages().into_iter().filter_map(|m| m.event_id).collect();
    assert_eq!(sent, vec![good_a, good_b]);
}

async fn run_drains_a_backlog_in_full_batches_without_waiting_for_ticks(db: &Db) {
    let fake = fake().await;
    let types = [EventType::RoomUserJoined; 7];
    db.insert_events("room-1", &types).await;
    // A 60 s tick: only back-to-back full batches can deliver all 7 rows with batch_size 2.
    let worker = worker(db, &fake, "node-a", options(2, Duration::from_secs(60), TIMEOUT));
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { worker.run_outbox_worker(cancel).await }
    });
    eventually(
        "all 7 rows delivered",
        || async move { db.rows().await.iter().all(|r| r.status == "delivered") },
    )
    .await;
    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(5), run).await.expect("worker exits").expect("no panic");
    assert_eq!(fake.messages(&group("room-1")).len(), 7);
}

both_backends!(
    worker_delivers_a_pending_row,
    worker_failure_marks_the_row_retryable_with_a_clean_error,
    a_failed_row_is_delivered_on_the_next_round,
    a_delivered_row_is_never_sent_again,
    events_not_meant_for_im_are_marked_delivered_without_a_call,
    an_undecodable_envelope_is_parked_for_inspection_and_the_batch_goes_on,
    run_drains_a_backlog_in_full_batches_without_waiting_for_ticks,
);

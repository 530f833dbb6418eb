//! What the worker does by error class: park a permanent failure, pause on a configuration
//! error without spending attempts, back off exponentially up to `retry_max`; and room ids IM
//! cannot carry.

use std::time::Duration;

use room_service::store::RequeueTarget;
use room_service_fakes::fake_im::Fault;
use serde_json::json;

use super::{create, eventually, fake_with_limits, join, start, undelivered};
use crate::support::TestDb;

#[tokio::test]
async fn a_permanent_code_parks_the_row_after_one_attempt_until_requeued() {
    let db = TestDb::mysql().await;
    let im = fake_with_limits(None, None).await;
    let app = start(&db, &im, &[]).await;
    create(&app, "gone").await;
    // The sync attempt and the worker's first attempt both hear "group dissolved".
    im.inject(Fault::ErrorCode(10010), 2);
    let event_id = join(&app, "gone", "u1").await;
    eventually("the row is parked", Duration::from_secs(10), || async {
        db.outbox_row(&event_id).await.status == "failed"
    })
    .await;
    let row = db.outbox_row(&event_id).await;
    assert_eq!((row.retry_count, row.park_reason.as_deref()), (1, Some("permanent")), "{row:?}");
    assert!(
        row.last_error.as_deref().is_some_and(|e| e.starts_with("permanent") && e.contains("10010")),
        "{row:?}"
    );
    assert_eq!(row.lock_until_ms, None, "out of the claim index");
    // Never sent again.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(im.stats().calls, 2);
    let stats = db.repo.outbox_stats().await.unwrap();
    assert_eq!(stats.parked_by_reason.get("permanent"), Some(&1), "{stats:?}");

    // A person requeues it (the group exists again): a fresh budget, delivered once.
    let requeued =
        db.repo.requeue_outbox(RequeueTarget::EventIds(std::slice::from_ref(&event_id))).await.unwrap();
    assert_eq!(requeued.len(), 1);
    eventually("delivered after the requeue", Duration::from_secs(10), || async {
        db.outbox_row(&event_id).await.status == "delivered"
    })
    .await;
    assert_eq!(im.messages("gone").len(), 1);
    app.stop().await;
}

#[tokio::test]
async fn a_configuration_code_pauses_publishing_without_spending_attempts_and_resumes_alone() {
    let db = TestDb::mysql().await;
    let im = fake_with_limits(None, None).await;
    let app = start(&db, &im, &[("outbox_worker.config_error_pause", "300ms")]).await;
    create(&app, "r1").await;
    // A wrong SDKAppID, as Tencent would say it, for the sync attempt and three worker tries.
    im.inject(Fault::ErrorCode(60002), 4);
    let event_id = join(&app, "r1", "u1").await;
    eventually("the pause gauge is up", Duration::from_secs(10), || async {
        let (_, metrics) = app.admin_get("/metrics").await;
        metrics
            .as_str()
            .unwrap_or_default()
            .contains(r#"room_outbox_publish_paused{reason="configuration"} 1"#)
    })
    .await;
    eventually("delivered once the fake accepts again", Duration::from_secs(15), || async {
        db.outbox_row(&event_id).await.status == "delivered"
    })
    .await;
    let row = db.outbox_row(&event_id).await;
    assert_eq!(row.retry_count, 0, "a configuration error spends no attempt: {row:?}");
    assert_eq!(im.stats().calls, 5);
    eventually("the pause gauge is down", Duration::from_secs(5), || async {
        let (_, metrics) = app.admin_get("/metrics").await;
        metrics
            .as_str()
            .unwrap_or_default()
            .contains(r#"room_outbox_publish_paused{reason="configuration"} 0"#)
    })
    .await;
    app.stop().await;
}

#[tokio::test]
async fn exponential_backoff_attempts_follow_the_curve_and_stop_growing_at_retry_max() {
    let db = TestDb::mysql().await;
    let im = fake_with_limits(None, None).await;
    let app = start(
        &db,
        &im,
        &[
            ("outbox_worker.retry_strategy", "exponential"),
            ("outbox_worker.retry_base", "200ms"),
            ("outbox_worker.retry_max", "800ms"),
            ("outbox_worker.poll_interval", "20ms"),
        ],
    )
    .await;
    create(&app, "r1").await;
    // The sync attempt, then five worker attempts fail (transient); the sixth goes through.
    im.inject(Fault::ErrorCode(10002), 6);
    let event_id = join(&app, "r1", "u1").await;
    eventually("delivered", Duration::from_secs(20), || async {
        db.outbox_row(&event_id).await.status == "delivered"
    })
    .await;
    assert_eq!(db.outbox_row(&event_id).await.retry_count, 5);
    let calls = im.call_times();
    assert_eq!(calls.len(), 7, "sync + 6 worker attempts");
    // Worker attempt n waits retry_base × 2^(n-1), capped at retry_max, times a jitter in
    // [0.5, 1.0]; a claim comes at most a poll interval (plus scheduling) after that.
    let slack = Duration::from_millis(250);
    let curve = [200, 400, 800, 800, 800].map(Duration::from_millis);
    for (n, (pair, full)) in calls[1..].windows(2).zip(curve).enumerate() {
        let gap = pair[1].duration_since(pair[0]);
        assert!(gap >= full / 2, "attempt {}: {gap:?} before {:?}", n + 2, full / 2);
        assert!(gap <= full + slack, "attempt {}: {gap:?} after {:?}", n + 2, full + slack);
    }
    assert_eq!(undelivered(&db).await, 0);
    app.stop().await;
}

#[tokio::test]
async fn a_room_id_im_cannot_carry_is_refused_and_stored_rows_for_one_are_parked() {
    let db = TestDb::mysql().await;
    let im = fake_with_limits(None, None).await;
    let app = start(&db, &im, &[("tencent_im.group_id_prefix", "live_room_")]).await;
    // "live_room_" (10 bytes) + 39 bytes = 49 > 48.
    let long = "x".repeat(39);
    let body = json!({"command_id": "c-long", "room_id": long, "owner_id": "o", "title": "t"});
    let (status, answer) = app.post("/v1/rooms", body).await;
    assert_eq!(status, 400, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().starts_with("room_id"), "{answer}");
    assert_eq!(db.count("room_snapshot").await, 0, "nothing written");
    create(&app, &"y".repeat(38)).await;

    // A row written before the limit existed (or under another prefix) is parked, not retried.
    db.execute(format!(
        "INSERT INTO room_snapshot (room_id, version, status, state, updated_at_ms) VALUES ('{long}', 1, 'open', \
         '{{\"room_id\":\"{long}\",\"owner_id\":\"o\",\"title\":\"t\",\"status\":\"open\",\"version\":1,\"heat\":0,\"member_count\":0,\"gift_rank\":[]}}', 0)"
    ))
    .await;
    let event_id = join(&app, &long, "u1").await;
    eventually("parked", Duration::from_secs(10), || async {
        db.outbox_row(&event_id).await.status == "failed"
    })
    .await;
    let row = db.outbox_row(&event_id).await;
    assert_eq!(row.park_reason.as_deref(), Some("group_id_too_long"), "{row:?}");
    assert!(im.all_messages().iter().all(|m| m.event_id.as_deref() != Some(event_id.as_str())));
    app.stop().await;
}

//! `POST /admin/outbox/requeue`: the CLI's requeue over HTTP.

use serde_json::json;

use super::{HOUR_MS, Seed, seed, statuses};
use crate::support::TestDb;
use crate::support::app::{TestApp, settings};

#[tokio::test]
async fn requeue_over_http_by_ids_and_by_status_and_bad_input_changes_nothing() {
    let db = TestDb::sqlite().await;
    seed(
        &db,
        &[
            Seed::new("e-failed", "failed", HOUR_MS).retries(4),
            Seed::new("e-retry", "retryable", HOUR_MS).retries(2),
            Seed::new("e-done", "delivered", HOUR_MS),
            Seed::new("e-failed-2", "failed", HOUR_MS).retries(9),
        ],
    )
    .await;
    let app = TestApp::start(settings(db.url(), None, &[])).await;
    let before = statuses(&db).await;
    for (body, field) in [
        (json!({}), "body"),
        (json!({"event_ids": []}), "event_ids"),
        (json!({"event_ids": ["e-failed"], "status": "failed"}), "body"),
        (json!({"status": "delivered"}), "status"),
        (json!({"status": "nope"}), "status"),
    ] {
        let (status, answer) = app.admin_post("/admin/outbox/requeue", body.clone()).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert!(answer["error"]["message"].as_str().unwrap().starts_with(field), "{body}: {answer}");
    }
    let (status, answer) =
        app.admin_post("/admin/outbox/requeue", json!({"event_ids": ["e-failed", "ghost"]})).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (404, Some("event_not_found")), "{answer}");
    assert_eq!(statuses(&db).await, before, "nothing changed");

    let (status, answer) =
        app.admin_post("/admin/outbox/requeue", json!({"event_ids": ["e-failed", "e-done"]})).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["requeued"][0]["event_id"], "e-failed", "{answer}");
    assert_eq!(answer["skipped"][0]["event_id"], "e-done", "{answer}");
    let row = db.outbox_row("e-failed").await;
    assert_eq!((row.status.as_str(), row.retry_count), ("pending", 0), "a fresh attempt budget");

    let (status, answer) = app.admin_post("/admin/outbox/requeue", json!({"status": "failed"})).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["requeued"].as_array().unwrap().len(), 1, "{answer}");
    assert_eq!(db.outbox_row("e-failed-2").await.status, "pending");
    assert_eq!(db.outbox_row("e-retry").await.status, "retryable", "only the status asked for");
    app.stop().await;
}

#[tokio::test]
async fn without_a_cluster_the_owner_of_every_room_is_this_node_at_epoch_0() {
    let db = TestDb::sqlite().await;
    let app = TestApp::start(settings(db.url(), None, &[("node_id", "solo")])).await;
    let (status, body) = app.admin_get("/admin/rooms/any-room/owner").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!((body["node_id"].as_str(), body["epoch"].as_u64()), (Some("solo"), Some(0)), "{body}");
    assert_eq!(body["url"].as_str(), Some(app.base.as_str()), "{body}");
    assert_eq!(body["shard"].as_u64(), Some(u64::from(room_service::cluster::shard_of("any-room"))));
    let (status, body) = app.admin_get("/admin/rooms/not%20valid/owner").await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("invalid_argument")), "{body}");
    app.stop().await;
}

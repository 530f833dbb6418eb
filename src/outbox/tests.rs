//! Unit tests of the pure parts: decoding a row and the per-claim worker id.

use std::sync::Arc;

use serde_json::json;
use tower::service_fn;

use super::*;
use crate::config::OutboxWorkerSettings;
use crate::delivery::codec::decode;
use crate::publish::{BoxError, Message, Outcome, Priority};
use crate::store::{OutboxRow, SqliteRepository};

fn row(event_id: &str, envelope: &str) -> OutboxRow {
    OutboxRow {
        id: 1,
        event_id: event_id.into(),
        room_id: "room-1".into(),
        event_type: "RoomGiftSent".into(),
        envelope: envelope.into(),
        status: "delivering".into(),
        retry_count: 0,
        last_error: None,
        worker_id: Some("node-a-1".into()),
        lock_until_ms: Some(0),
        created_at_ms: 0,
        updated_at_ms: 0,
        delivered_at_ms: None,
        park_reason: None,
        trace_context: None,
    }
}

fn envelope(event_id: &str, event_type: &str) -> String {
    json!({
        "event_id": event_id, "event_type": event_type, "room_id": "room-1", "room_version": 3,
        "command_id": "cmd-1", "request_id": "req-1", "occurred_at_ms": 1, "payload": {"count": 2}
    })
    .to_string()
}

#[test]
fn decodable_row_becomes_a_worker_message_with_the_stored_body() {
    let body = envelope("ev-1", "RoomGiftSent");
    let message = decode(&row("ev-1", &body)).expect("decodable");
    assert_eq!(message.event_id, "ev-1");
    assert_eq!(message.event_type, "RoomGiftSent");
    assert_eq!(message.priority, Priority::High);
    assert_eq!(&*message.body, body.as_str());

    let joined = decode(&row("ev-2", &envelope("ev-2", "RoomUserJoined"))).expect("decodable");
    assert_eq!(joined.priority, Priority::Normal);
}

#[test]
fn bad_json_unknown_types_and_foreign_ids_are_undecodable() {
    for (event_id, body) in [
        ("ev-1", "not json".to_owned()),
        ("ev-1", envelope("ev-1", "RoomExploded")),
        ("ev-1", envelope("ev-other", "RoomGiftSent")),
        ("ev-1", json!({"event_id": "ev-1"}).to_string()),
    ] {
        let error = decode(&row(event_id, &body)).expect_err("undecodable");
        assert!(error.starts_with("undecodable envelope: "), "{error}");
    }
}

async fn worker(node_id: &str) -> OutboxWorker {
    let repo = SqliteRepository::connect("sqlite::memory:", 1).await.expect("in-memory sqlite");
    let leaf = service_fn(|_: Message| async { Ok::<_, BoxError>(Outcome::Delivered) });
    let publisher = crate::publish::stack::into_publisher(leaf);
    OutboxWorker::new(Arc::new(repo), publisher, node_id, OutboxWorkerSettings::default())
}

#[tokio::test]
async fn every_claim_gets_a_fresh_worker_id_that_fits_the_column() {
    let worker = worker("node-a").await;
    let (a, b) = (worker.fresh_worker_id(), worker.fresh_worker_id());
    assert!(a.starts_with("node-a-") && b.starts_with("node-a-"), "{a} {b}");
    assert_ne!(a, b);

    let long = worker_with_long_node_id().await;
    let id = long.fresh_worker_id();
    assert!(id.chars().count() <= 128, "{}", id.len());
    assert!(id.starts_with(&"é".repeat(MAX_NODE_ID_IN_WORKER_ID)));
}

async fn worker_with_long_node_id() -> OutboxWorker {
    worker(&"é".repeat(500)).await
}

#[tokio::test]
async fn new_takes_the_validated_settings_as_they_are() {
    // Normalising (a zero batch size taking the default, …) is config's, tested there
    // (`non_positive_outbox_values_become_defaults`, `the_empty_outbox_section_is_the_default`).
    let worker = worker("node-a").await;
    let settings = OutboxWorkerSettings { batch_size: 7, ..OutboxWorkerSettings::default() };
    let worker =
        OutboxWorker::new(worker.repo.clone(), worker.outlet.publisher.clone(), "n", settings.clone());
    assert_eq!(worker.options(), &settings);
    assert_eq!(worker.node_id(), "n");
}

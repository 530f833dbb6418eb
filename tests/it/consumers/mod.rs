//! Event consumers besides IM (SPEC §11.6), end to end: the service (in process, or the real
//! binary) over real SQLite and MariaDB, a webhook receiver on loopback that verifies every
//! signature, and the audit log table.

mod audit;
mod cli;
mod crash;
mod late_commit;
mod receiver;
mod webhook;

use std::time::Duration;

use serde_json::json;

use crate::delivery::eventually;
use crate::support::TestDb;
use crate::support::app::{TestApp, settings};
use receiver::{Receiver, SECRET};

/// The service with IM disabled (log sink) and the webhook consumer posting to `receiver`.
async fn start_webhook(db: &TestDb, receiver: &Receiver, overrides: &[(&str, &str)]) -> TestApp {
    let mut all = vec![
        ("consumers.webhook.enabled", "true"),
        ("consumers.webhook.url", receiver.url.as_str()),
        ("consumers.webhook.secret", SECRET),
        ("consumers.webhook.timeout", "1s"),
        ("consumers.poll_interval", "50ms"),
        ("outbox_worker.retry_strategy", "fixed_interval"),
        ("outbox_worker.poll_interval", "100ms"),
    ];
    for (key, value) in overrides {
        all.retain(|(k, _)| k != key);
        all.push((key, value));
    }
    TestApp::start(settings(db.url(), None, &all)).await
}

/// Creates `room`, then `joins` joins and one gift: `joins + 2` commands, events of several
/// types (the create also heats and ranks nothing; gifts add heat and rank events).
async fn traffic(app: &TestApp, room: &str, joins: usize) {
    let create = json!({"command_id": format!("c-{room}"), "room_id": room, "owner_id": "o", "title": "t"});
    let (status, body) = app.post("/v1/rooms", create).await;
    assert_eq!(status, 200, "{body}");
    for i in 0..joins {
        let join = json!({"command_id": format!("j-{room}-{i}"), "user_id": format!("u{i}")});
        let (status, body) = app.post(&format!("/v1/rooms/{room}/join"), join).await;
        assert_eq!(status, 200, "{body}");
    }
    let gift = json!({"command_id": format!("g-{room}"), "sender_id": "u0", "receiver_id": "o", "gift_id": "rose", "count": 2, "unit_value": 5});
    let (status, body) = app.post(&format!("/v1/rooms/{room}/gifts"), gift).await;
    assert_eq!(status, 200, "{body}");
}

/// Every outbox event id, by id (commit order for a single writer).
async fn outbox_event_ids(db: &TestDb) -> Vec<String> {
    db.outbox().await.into_iter().map(|r| r.event_id).collect()
}

/// Waits until the receiver acknowledged `n` events.
async fn wait_received(receiver: &Receiver, n: usize, limit: Duration) {
    eventually(&format!("{n} events at the receiver"), limit, || async { receiver.event_ids().len() >= n })
        .await;
}

/// `room_event_consumer.position` of `name`.
async fn position(db: &TestDb, name: &str) -> i64 {
    db.scalar(format!("SELECT position FROM room_event_consumer WHERE name = '{name}'")).await.unwrap_or(-1)
}

//! Delivery policy v2 end to end (SPEC §11.2): the service over real MariaDB with its outbox
//! worker running, and the fake Tencent IM over loopback HTTP.
//!
//! The limits are scaled down from Tencent's (200 calls/s per app, 40 messages/s per group) to
//! keep the runs short on two cores; the margins between our limiter and the fake's stay
//! Tencent's (190 vs 200, 35 vs 40).

mod crash;
mod im_faults;
mod limits;
mod policy;

use std::future::Future;
use std::time::Duration;

use room_service::fake_im::{FakeIm, FakeImOptions};
use serde_json::{Value, json};

use crate::support::TestDb;
use crate::support::app::{SDK_APP_ID, SECRET_KEY, TestApp, settings};

/// A fake IM with these limits (`None`: unlimited).
async fn fake_with_limits(global: Option<u32>, per_group: Option<u32>) -> FakeIm {
    let mut options = FakeImOptions::new(SDK_APP_ID, SECRET_KEY, "administrator");
    options.global_limit_per_sec = global;
    options.per_group_limit_per_sec = per_group;
    FakeIm::start(options).await
}

/// The service with IM on `im`, its worker running (fast polls), and `overrides`.
async fn start(db: &TestDb, im: &FakeIm, overrides: &[(&str, &str)]) -> TestApp {
    let mut all = vec![
        ("outbox_worker.enabled", "true"),
        ("outbox_worker.poll_interval", "50ms"),
        ("outbox_worker.publish_timeout", "1s"),
    ];
    all.extend_from_slice(overrides);
    TestApp::start(settings(db.url(), Some(im), &all)).await
}

async fn create(app: &TestApp, room: &str) {
    let body =
        json!({"command_id": format!("create-{room}"), "room_id": room, "owner_id": "o", "title": "t"});
    let (status, body) = app.post("/v1/rooms", body).await;
    assert_eq!(status, 200, "{body}");
}

/// A join; returns the IM event's id.
async fn join(app: &TestApp, room: &str, user: &str) -> String {
    let body = json!({"command_id": format!("j-{room}-{user}"), "user_id": user});
    let (status, body) = app.post(&format!("/v1/rooms/{room}/join"), body).await;
    assert_eq!(status, 200, "{body}");
    body["events"][0]["event_id"].as_str().unwrap().to_owned()
}

/// Polls `check` every 50 ms until it holds; panics naming `what` after `limit`.
async fn eventually<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let give_up = tokio::time::Instant::now() + limit;
    while !check().await {
        assert!(tokio::time::Instant::now() < give_up, "gave up waiting: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Rows not yet delivered, any status but `delivered`.
async fn undelivered(db: &TestDb) -> i64 {
    db.scalar("SELECT COUNT(*) FROM room_outbox WHERE status <> 'delivered'").await.unwrap_or(-1)
}

/// `room_version` of an envelope the fake recorded.
fn version(data: &str) -> u64 {
    serde_json::from_str::<Value>(data).unwrap()["room_version"].as_u64().unwrap()
}

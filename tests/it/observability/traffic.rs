//! A running service with a fast outbox worker over the fake IM, the traffic the observability
//! tests drive through it, and `/metrics` scrapes.
//!
//! The metrics recorder is process-global and shared by every test of this binary: read
//! counters as "rose since before", never as exact counts, and refresh the backlog gauges (which
//! any running app's sampler may overwrite with its own database's backlog) right before a read.

use std::future::Future;
use std::time::{Duration, Instant};

use room_service::outbox::sampler::sample_backlog;
use room_service::store::OutboxStats;
use room_service::telemetry::names::PUBLISH_FAILURE_TOTAL;
use room_service_fakes::fake_im::{FakeIm, Fault};
use serde_json::{Value, json};

use super::exposition::Exposition;
use crate::support::TestDb;
use crate::support::app::{TestApp, settings};

/// The outbox worker on, polling every 100 ms, each publish bounded by 300 ms.
pub const FAST_WORKER: [(&str, &str); 5] = [
    ("outbox_worker.enabled", "true"),
    ("outbox_worker.poll_interval", "100ms"),
    ("outbox_worker.publish_timeout", "300ms"),
    // A consumer, so its gauges (and the `path="audit"` publishes) are exported too.
    ("consumers.audit.enabled", "true"),
    ("consumers.poll_interval", "100ms"),
];

/// Starts the service on `db`, publishing to `im`, with [`FAST_WORKER`] (and the audit consumer).
pub async fn start(db: &TestDb, im: &FakeIm) -> TestApp {
    TestApp::start(settings(db.url(), Some(im), &FAST_WORKER)).await
}

/// Scrapes `/metrics`.
pub async fn scrape(app: &TestApp) -> Exposition {
    let response = app.http.get(format!("{}/metrics", app.admin_base)).send().await.expect("GET /metrics");
    assert_eq!(response.status().as_u16(), 200);
    Exposition::parse(&response.text().await.expect("metrics body"))
}

/// Refreshes the backlog gauges from this app's database, as the 5 s sampler would.
pub async fn sample(app: &TestApp) -> OutboxStats {
    sample_backlog(app.app.repo.as_ref()).await.expect("sample the backlog")
}

/// Rows not yet delivered.
pub fn waiting(stats: &OutboxStats) -> u64 {
    stats.pending + stats.delivering + stats.retryable
}

/// Runs `check` every 50 ms until it answers `Some`, for at most `limit`.
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out after {limit:?} waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// POSTs a command and expects 200; returns the body.
pub async fn command(app: &TestApp, path: &str, body: Value) -> Value {
    let (status, answer) = app.post(path, body).await;
    assert_eq!(status, 200, "{path}: {answer}");
    answer
}

/// Commands that IM accepts (create, joins, a gift), and a 400, a 404 and a 409.
pub async fn healthy_traffic(app: &TestApp, room: &str) {
    let create =
        json!({"command_id": format!("{room}-c"), "room_id": room, "owner_id": "alice", "title": "Live"});
    command(app, "/v1/rooms", create).await;
    command(
        app,
        &format!("/v1/rooms/{room}/join"),
        json!({"command_id": format!("{room}-j1"), "user_id": "bob"}),
    )
    .await;
    let gift = json!({"command_id": format!("{room}-g1"), "sender_id": "bob", "receiver_id": "alice",
        "gift_id": "rocket", "count": 2, "unit_value": 500});
    command(app, &format!("/v1/rooms/{room}/gifts"), gift).await;

    let (status, _) = app.get("/v1/rooms/no-such-room").await;
    assert_eq!(status, 404);
    // bob's join id reused by bob for a leave (ids are per caller: carol's would be hers).
    let reused = json!({"command_id": format!("{room}-j1"), "user_id": "bob"});
    let (status, _) = app.post(&format!("/v1/rooms/{room}/leave"), reused).await;
    assert_eq!(status, 409);
    let (status, _) = app.post(&format!("/v1/rooms/{room}/join"), json!({"command_id": ""})).await;
    assert_eq!(status, 400);
}

/// Makes IM answer 502 to every call, then joins `users` to `room` (each sync push fails and
/// leaves its row pending) and waits until the worker has failed on them too.
pub async fn im_outage(app: &TestApp, im: &FakeIm, room: &str, users: &[&str]) {
    let worker_failures = || async { scrape(app).await.sum(PUBLISH_FAILURE_TOTAL, &[("path", "worker")]) };
    let before = worker_failures().await;
    im.inject(Fault::Http502, 1_000_000);
    for user in users {
        let body = json!({"command_id": format!("{room}-join-{user}"), "user_id": user});
        let answer = command(app, &format!("/v1/rooms/{room}/join"), body).await;
        assert_eq!(answer["events"][0]["delivery"], "pending", "{answer}");
    }
    eventually("the worker fails on the backlog", Duration::from_secs(10), || async {
        (worker_failures().await > before).then_some(())
    })
    .await;
}

/// Clears the faults and waits until the worker has delivered the whole backlog.
pub async fn im_recovery(app: &TestApp, im: &FakeIm) {
    im.clear();
    eventually("the worker drains the backlog", Duration::from_secs(10), || async {
        (waiting(&sample(app).await) == 0).then_some(())
    })
    .await;
}

/// A join IM refuses for good (group dissolved) on the sync and the worker path: the worker
/// parks its row. Waits until it is parked.
pub async fn a_parked_row(app: &TestApp, im: &FakeIm, room: &str) {
    let create =
        json!({"command_id": format!("{room}-c"), "room_id": room, "owner_id": "alice", "title": "Gone"});
    command(app, "/v1/rooms", create).await;
    im.inject(Fault::ErrorCode(10010), 2);
    command(
        app,
        &format!("/v1/rooms/{room}/join"),
        json!({"command_id": format!("{room}-j"), "user_id": "erin"}),
    )
    .await;
    eventually("the worker parks the row", Duration::from_secs(10), || async {
        (sample(app).await.failed > 0).then_some(())
    })
    .await;
}

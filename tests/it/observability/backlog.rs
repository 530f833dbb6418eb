//! What an IM outage and its recovery look like on `/metrics`: failures counted by path and
//! class, the backlog gauges and the oldest pending age rising while IM fails, and falling
//! back to zero once the worker has delivered everything.

use std::time::Duration;

use room_service::telemetry::names::{
    OUTBOX_CLAIMED_TOTAL, OUTBOX_OLDEST_PENDING_AGE_SECONDS, OUTBOX_ROWS, PUBLISH_FAILURE_TOTAL,
    PUBLISH_SUCCESS_TOTAL,
};

use super::exposition::Exposition;
use super::traffic::{eventually, healthy_traffic, im_outage, im_recovery, sample, scrape, start, waiting};
use crate::support::TestDb;
use crate::support::app::{TestApp, fake_im};

/// Rows not yet delivered and the oldest pending age, as exported.
fn exported_backlog(metrics: &Exposition) -> (f64, f64) {
    let rows = ["pending", "delivering", "retryable"]
        .iter()
        .map(|s| metrics.sum(OUTBOX_ROWS, &[("status", s)]))
        .sum();
    (rows, metrics.sum(OUTBOX_OLDEST_PENDING_AGE_SECONDS, &[]))
}

/// Samples this app's backlog and scrapes right after, until `accept` takes what `/metrics`
/// shows. (Other apps of this test binary sample their own databases into the same global
/// gauges; a fresh sample followed at once by a scrape reads ours.)
async fn exported_backlog_until(app: &TestApp, what: &str, accept: impl Fn(f64, f64) -> bool) -> (f64, f64) {
    eventually(what, Duration::from_secs(5), || async {
        sample(app).await;
        let (rows, age) = exported_backlog(&scrape(app).await);
        accept(rows, age).then_some((rows, age))
    })
    .await
}

#[tokio::test]
async fn after_traffic_with_im_failing_and_recovering_metrics_show_the_failures_and_the_backlog_rising_and_falling_back_to_zero()
 {
    let db = TestDb::mysql().await;
    let im = fake_im().await;
    let app = start(&db, &im).await;
    healthy_traffic(&app, "backlog").await;
    let before = scrape(&app).await;

    // IM fails: three joins stay pending, the sync push and the worker both fail.
    im_outage(&app, &im, "backlog", &["carol", "dave", "erin"]).await;
    let stats = sample(&app).await;
    assert!(waiting(&stats) >= 3, "{stats:?}");
    let (rows, first_age) =
        exported_backlog_until(&app, "/metrics shows the backlog", |rows, age| rows >= 3.0 && age > 0.0)
            .await;
    assert!(rows >= 3.0);
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    exported_backlog_until(&app, "the oldest pending age rises while IM fails", |rows, age| {
        rows >= 3.0 && age > first_age
    })
    .await;

    let during = scrape(&app).await;
    for path in ["sync", "worker"] {
        let filter = [("path", path), ("class", "transient")];
        assert!(
            during.sum(PUBLISH_FAILURE_TOTAL, &filter) > before.sum(PUBLISH_FAILURE_TOTAL, &filter),
            "no transient {path} failure counted for the 502s"
        );
    }

    // IM recovers: the worker delivers the backlog and the gauges fall back to zero.
    im_recovery(&app, &im).await;
    assert_eq!(waiting(&sample(&app).await), 0);
    exported_backlog_until(&app, "/metrics shows the backlog back at zero", |rows, age| {
        rows == 0.0 && age == 0.0
    })
    .await;
    let after = scrape(&app).await;
    let delivered_by_worker = [("path", "worker"), ("result", "delivered")];
    assert!(
        after.sum(PUBLISH_SUCCESS_TOTAL, &delivered_by_worker)
            >= before.sum(PUBLISH_SUCCESS_TOTAL, &delivered_by_worker) + 3.0,
        "the worker's deliveries are not counted"
    );
    assert!(after.sum(OUTBOX_CLAIMED_TOTAL, &[]) > before.sum(OUTBOX_CLAIMED_TOTAL, &[]), "no claim counted");
    assert!(
        after.sum(PUBLISH_FAILURE_TOTAL, &[]) >= during.sum(PUBLISH_FAILURE_TOTAL, &[]),
        "a counter went down"
    );
    app.stop().await;
}

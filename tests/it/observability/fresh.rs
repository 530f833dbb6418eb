//! A fresh service, before any traffic: every series the dashboard and the alert rules query
//! is already exported (at 0), so no panel says "No data" and an `increase()` alert can tell
//! "none yet" from "not scraped". The queries are read from `dashboards/` by the test, so a new
//! panel or alert on a series that only appears after its first event fails it.
//!
//! The real binary in its own process: the recorder of this test binary is shared by every
//! test and has seen their traffic, a fresh process has seen none.

use std::time::Duration;

use room_service::telemetry::names;

use super::drift::unmet_queries;
use super::exposition::Exposition;
use crate::delivery::Node;
use crate::support::TestDb;
use crate::support::app::fake_im;

/// Every feature the dashboard charts on: IM (the node's default), the outbox worker, both
/// consumers (the webhook's receiver does not answer: nothing is sent before the first event).
const FEATURES: [(&str, &str); 6] = [
    ("ROOM_SERVICE__OUTBOX_WORKER__ENABLED", "true"),
    ("ROOM_SERVICE__CONSUMERS__AUDIT__ENABLED", "true"),
    ("ROOM_SERVICE__CONSUMERS__WEBHOOK__ENABLED", "true"),
    ("ROOM_SERVICE__CONSUMERS__WEBHOOK__URL", "http://127.0.0.1:9/hooks/rooms"),
    ("ROOM_SERVICE__CONSUMERS__WEBHOOK__SECRET", "fresh-secret"),
    ("ROOM_SERVICE__CONSUMERS__POLL_INTERVAL", "100ms"),
];

#[tokio::test]
async fn a_fresh_service_exports_every_series_the_dashboard_and_alerts_query_before_any_event() {
    let db = TestDb::mysql().await;
    let im = fake_im().await;
    let mut node = Node::new(db.url(), &im);
    node.node_id = "fresh".into();
    node.env = FEATURES.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    let mut child = node.spawn();
    // The consumers export their position once they have read their row: wait for both.
    let mut text = String::new();
    for _ in 0..200 {
        text = node.metrics().await;
        let exposition = Exposition::parse(&text);
        let consumers = ["webhook", "audit"]
            .iter()
            .all(|c| exposition.has_label_value(names::CONSUMER_LAG_SECONDS, names::LABEL_CONSUMER, c));
        if consumers {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Node::stop(&mut child);
    let exported = Exposition::parse(&text);
    assert!(exported.has(names::BUILD_INFO), "the node never served /metrics:\n{text}");
    let problems = unmet_queries(&exported);
    assert!(problems.is_empty(), "missing on a fresh service: {problems:#?}");
    // Nothing happened: every counter the queries read is at 0.
    for name in [names::OUTBOX_PARKED_TOTAL, names::PUBLISH_FAILURE_TOTAL, names::OUTBOX_LEASE_LOST_TOTAL] {
        assert_eq!(exported.sum(name, &[]), 0.0, "{name}");
    }
    assert_eq!(exported.sum(names::IM_CALLS_TOTAL, &[]), 0.0);
}

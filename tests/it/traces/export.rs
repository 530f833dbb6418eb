//! Where the spans go when the collector does not take them (issue #45): a collector that
//! accepts connections and never answers, and a closed port. The real binary with a queue of a
//! few spans runs sampled commands; its `/metrics` must count the spans the full queue dropped
//! and the exports that failed, and its log must say so (at most once per 10 s), naming the
//! endpoint. Against the honest receiver, the spans it counts as exported are the spans the
//! receiver got.

use std::path::Path;
use std::time::{Duration, Instant};

use room_service::telemetry::names;
use room_service_fakes::fake_im::{FakeIm, FakeImOptions};
use serde_json::{Value, json};

use super::{Receiver, post};
use crate::delivery::{Node, eventually};
use crate::observability::exposition::Exposition;
use crate::outbox::harness::{ADMIN, APP, KEY};

/// The warning of lost spans.
const WARNING: &str = "Spans were not exported";

/// The warnings of lost spans in the node's log at `path`.
fn warnings(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["message"].as_str().is_some_and(|m| m.starts_with(WARNING)))
        .collect()
}

/// A node exporting every trace to `endpoint`, its queue `max_queue_spans` long, its log at
/// `log`.
fn node(dir: &Path, im: &FakeIm, endpoint: &str, max_queue_spans: u32) -> Node {
    let mut node = Node::new(&format!("sqlite://{}/rooms.db?mode=rwc", dir.display()), im);
    node.env = vec![
        ("ROOM_SERVICE__TELEMETRY__OTLP__ENDPOINT".into(), endpoint.to_owned()),
        ("ROOM_SERVICE__TELEMETRY__OTLP__SAMPLE_RATIO".into(), "1.0".into()),
        ("ROOM_SERVICE__TELEMETRY__OTLP__TIMEOUT".into(), "1s".into()),
        ("ROOM_SERVICE__TELEMETRY__OTLP__MAX_QUEUE_SPANS".into(), max_queue_spans.to_string()),
        ("ROOM_SERVICE__LOG__FORMAT".into(), "json".into()),
    ];
    node.log = Some(dir.join("node.log"));
    node
}

async fn scrape(node: &Node) -> Exposition {
    Exposition::parse(&node.metrics().await)
}

/// Runs sampled commands against a node exporting to `endpoint`, which never takes a span.
async fn spans_are_lost_counted_and_warned_of(endpoint: &str) {
    let dir = tempfile::tempdir().unwrap();
    let im = FakeIm::start(FakeImOptions::new(APP, KEY, ADMIN)).await;
    let node = node(dir.path(), &im, endpoint, 8);
    let _child = node.spawn();
    crate::support::wait_ready(&reqwest::Client::new(), &format!("http://127.0.0.1:{}", node.port)).await;
    let fresh = scrape(&node).await;
    for (name, labels) in [
        (names::TRACE_SPANS_DROPPED_TOTAL, &[("reason", "queue_full")][..]),
        (names::TRACE_SPANS_DROPPED_TOTAL, &[("reason", "export_failed")][..]),
        (names::TRACE_EXPORTS_FAILED_TOTAL, &[][..]),
        (names::TRACE_SPANS_EXPORTED_TOTAL, &[][..]),
    ] {
        assert!(fresh.has(name), "{name} is exported from startup");
        assert_eq!(fresh.sum(name, labels), 0.0, "{name} {labels:?}");
    }
    let started = Instant::now();

    // Each command makes several spans (http, auth, command, commit, lane, publish, im): ten of
    // them overflow a queue of 8 at once, long before the first export (each second) fails.
    for i in 0..10 {
        let create =
            json!({"command_id": format!("c{i}"), "room_id": format!("r{i}"), "owner_id": "o", "title": "t"});
        assert_eq!(post(node.port, "/v1/rooms", create, None).await.status(), 200);
    }
    let log = dir.path().join("node.log");
    eventually("spans dropped at the bound, a failed export, a warning", Duration::from_secs(20), || async {
        let metrics = scrape(&node).await;
        metrics.sum(names::TRACE_SPANS_DROPPED_TOTAL, &[("reason", "queue_full")]) > 0.0
            && metrics.sum(names::TRACE_EXPORTS_FAILED_TOTAL, &[]) > 0.0
            && !warnings(&log).is_empty()
    })
    .await;
    let metrics = scrape(&node).await;
    let failed = metrics.sum(names::TRACE_EXPORTS_FAILED_TOTAL, &[]);
    let in_failed = metrics.sum(names::TRACE_SPANS_DROPPED_TOTAL, &[("reason", "export_failed")]);
    assert!(in_failed >= failed, "each failed export lost its spans: {in_failed} < {failed}");
    assert!(in_failed <= 8.0 * failed, "a failed export holds at most the queue's 8 spans: {in_failed}");
    assert_eq!(metrics.sum(names::TRACE_SPANS_EXPORTED_TOTAL, &[]), 0.0);

    let told = warnings(&log);
    let first = &told[0];
    assert_eq!(first["level"], "WARN", "{first}");
    assert_eq!(first["endpoint"], endpoint, "the warning names the endpoint: {first}");
    let lost = ["dropped_spans", "failed_exports"].map(|k| first[k].as_u64().unwrap_or_default());
    assert!(lost.iter().any(|n| *n > 0), "the warning says what was lost: {first}");
    let allowed = 1 + started.elapsed().as_secs() / 10;
    assert!(told.len() as u64 <= allowed, "at most one warning per 10 s: {told:#?}");
}

#[tokio::test]
async fn a_collector_that_never_answers_loses_spans_at_the_bound_counted_and_warned_of() {
    // Takes every connection and holds it, never reading, never answering.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let blackhole = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((connection, _)) = listener.accept().await {
            held.push(connection);
        }
    });
    spans_are_lost_counted_and_warned_of(&format!("http://127.0.0.1:{port}")).await;
    blackhole.abort();
}

#[tokio::test]
async fn a_closed_port_loses_spans_counted_and_warned_of() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    spans_are_lost_counted_and_warned_of(&format!("http://127.0.0.1:{port}")).await;
}

#[tokio::test]
async fn the_spans_counted_as_exported_are_the_spans_the_collector_received() {
    let receiver = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    let im = FakeIm::start(FakeImOptions::new(APP, KEY, ADMIN)).await;
    let node = node(dir.path(), &im, &receiver.endpoint(), 32_768);
    let _child = node.spawn();
    crate::support::wait_ready(&reqwest::Client::new(), &format!("http://127.0.0.1:{}", node.port)).await;
    let mut last = String::new();
    for i in 0..5 {
        let create =
            json!({"command_id": format!("c{i}"), "room_id": format!("e{i}"), "owner_id": "o", "title": "t"});
        let answer = post(node.port, "/v1/rooms", create, None).await;
        assert_eq!(answer.status(), 200);
        last = super::answered_trace(answer.headers());
    }
    receiver.wait_for_all(&last, &["http", "command"]).await;
    eventually("the exported count to match the spans received", Duration::from_secs(20), || async {
        scrape(&node).await.sum(names::TRACE_SPANS_EXPORTED_TOTAL, &[]) == receiver.spans().len() as f64
    })
    .await;
    let metrics = scrape(&node).await;
    assert!(receiver.spans().len() >= 5 * 3, "every command's spans: {}", receiver.spans().len());
    assert_eq!(metrics.sum(names::TRACE_SPANS_DROPPED_TOTAL, &[]), 0.0);
    assert_eq!(metrics.sum(names::TRACE_EXPORTS_FAILED_TOTAL, &[]), 0.0);
    assert!(warnings(&dir.path().join("node.log")).is_empty(), "nothing lost, nothing told");
}

use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use tower::{Layer, ServiceExt};
use tower_test::mock;

use super::*;
use crate::publish::Path;
use crate::publish::test_support::{labels, message, named, recorded};
use crate::telemetry::names::{PUBLISH_FAILURE_TOTAL, PUBLISH_LATENCY_SECONDS, PUBLISH_SUCCESS_TOTAL};

/// Publishes one message through `MetricsLayer` around a mock whose handle answers with
/// `answer` after `delay`; returns what the recorder saw.
async fn publish_once(
    message: Message,
    delay: Duration,
    answer: Result<Outcome, BoxError>,
) -> Vec<crate::publish::test_support::Recorded> {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);

    let (svc, mut handle) = mock::pair::<Message, Outcome>();
    let svc = MetricsLayer::new().layer(svc);
    let expect_ok = answer.is_ok();
    let (result, ()) = tokio::join!(svc.oneshot(message), async move {
        let (_, respond) = handle.next_request().await.expect("forwarded");
        tokio::time::sleep(delay).await;
        match answer {
            Ok(outcome) => respond.send_response(outcome),
            Err(error) => respond.send_error(error),
        }
    });
    assert_eq!(result.is_ok(), expect_ok);
    recorded(&snapshotter)
}

fn single_latency(recorded: &[crate::publish::test_support::Recorded], path: &str) -> f64 {
    let latency = named(recorded, PUBLISH_LATENCY_SECONDS);
    assert_eq!(latency.len(), 1);
    let (latency_labels, value) = latency[0];
    assert_eq!(latency_labels, labels(&[("path", path), ("event_type", "RoomUserJoined")]));
    match value {
        DebugValue::Histogram(samples) => {
            assert_eq!(samples.len(), 1, "one latency sample per publish");
            samples[0].into_inner()
        }
        other => panic!("latency is not a histogram: {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn delivered_is_counted_once_with_its_latency() {
    let seen = publish_once(
        message("RoomUserJoined", Path::Sync),
        Duration::from_millis(250),
        Ok(Outcome::Delivered),
    )
    .await;

    let success = named(&seen, PUBLISH_SUCCESS_TOTAL);
    let expected = labels(&[("path", "sync"), ("event_type", "RoomUserJoined"), ("result", "delivered")]);
    assert_eq!(success, vec![(expected.as_slice(), &DebugValue::Counter(1))]);
    assert!(named(&seen, PUBLISH_FAILURE_TOTAL).is_empty());
    let latency = single_latency(&seen, "sync");
    assert!((latency - 0.25).abs() < 0.002, "latency {latency}");
}

#[tokio::test(start_paused = true)]
async fn skipped_is_counted_as_result_skipped() {
    let seen =
        publish_once(message("RoomUserJoined", Path::Worker), Duration::ZERO, Ok(Outcome::Skipped)).await;

    let expected = labels(&[("path", "worker"), ("event_type", "RoomUserJoined"), ("result", "skipped")]);
    assert_eq!(named(&seen, PUBLISH_SUCCESS_TOTAL), vec![(expected.as_slice(), &DebugValue::Counter(1))]);
    assert!(named(&seen, PUBLISH_FAILURE_TOTAL).is_empty());
}

#[tokio::test(start_paused = true)]
async fn failure_is_counted_once_with_its_class() {
    let seen = publish_once(
        message("RoomUserJoined", Path::Worker),
        Duration::from_secs(1),
        Err(Box::new(std::io::Error::other("connection reset"))),
    )
    .await;

    let expected = labels(&[("path", "worker"), ("event_type", "RoomUserJoined"), ("class", "transient")]);
    assert_eq!(named(&seen, PUBLISH_FAILURE_TOTAL), vec![(expected.as_slice(), &DebugValue::Counter(1))]);
    assert!(named(&seen, PUBLISH_SUCCESS_TOTAL).is_empty());
    let latency = single_latency(&seen, "worker");
    assert!((latency - 1.0).abs() < 0.002, "latency {latency}");
}

#[tokio::test(start_paused = true)]
async fn timeout_from_below_is_classified_timeout() {
    let seen = publish_once(
        message("RoomUserJoined", Path::Sync),
        Duration::ZERO,
        Err(Box::new(tower::timeout::error::Elapsed::new())),
    )
    .await;

    let expected = labels(&[("path", "sync"), ("event_type", "RoomUserJoined"), ("class", "timeout")]);
    assert_eq!(named(&seen, PUBLISH_FAILURE_TOTAL), vec![(expected.as_slice(), &DebugValue::Counter(1))]);
}

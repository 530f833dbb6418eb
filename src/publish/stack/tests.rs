//! The full stack in production order around test leaves, with paused time.

use std::time::Duration;

use futures::FutureExt;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use tower::{ServiceExt, service_fn};
use tower_test::mock;

use super::*;
use crate::app::im_stack;
use crate::domain::EventType;
use crate::publish::log_sink::LogSink;
use crate::publish::test_support::{Capture, labels, message, named, recorded};
use crate::publish::{ErrorClass, Path, classify};
use crate::telemetry::names::{PUBLISH_FAILURE_TOTAL, PUBLISH_LATENCY_SECONDS, PUBLISH_SUCCESS_TOTAL};

const PUBLISH_TIMEOUT: Duration = Duration::from_secs(3);

/// The IM stack around `leaf` as `app::publisher` composes it with the log sink (no rate
/// limiter).
fn stack<L>(leaf: L) -> Publisher
where
    L: Service<Message, Response = Outcome> + Clone + Send + Sync + 'static,
    L::Error: Into<BoxError> + 'static,
    L::Future: Send + 'static,
{
    im_stack(leaf, PUBLISH_TIMEOUT)
}

#[tokio::test(start_paused = true)]
async fn slow_leaf_times_out_and_is_counted_once_as_timeout() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _metrics = metrics::set_default_local_recorder(&recorder);
    let capture = Capture::default();
    let _tracing = capture.install();

    let slow_leaf = service_fn(|_: Message| async {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok::<_, BoxError>(Outcome::Delivered)
    });
    let error = stack(slow_leaf)
        .oneshot(message("RoomGiftSent", Path::Sync))
        .await
        .expect_err("the leaf is slower than the timeout");
    assert_eq!(classify(error.as_ref()), ErrorClass::Timeout);

    let seen = recorded(&snapshotter);
    let failure = labels(&[("path", "sync"), ("event_type", "RoomGiftSent"), ("class", "timeout")]);
    assert_eq!(named(&seen, PUBLISH_FAILURE_TOTAL), vec![(failure.as_slice(), &DebugValue::Counter(1))]);
    assert!(named(&seen, PUBLISH_SUCCESS_TOTAL).is_empty());
    let latency = named(&seen, PUBLISH_LATENCY_SECONDS);
    match latency.as_slice() {
        [(_, DebugValue::Histogram(samples))] => {
            assert_eq!(samples.len(), 1);
            let secs = samples[0].into_inner();
            assert!((secs - PUBLISH_TIMEOUT.as_secs_f64()).abs() < 0.01, "{secs}");
        }
        other => panic!("expected one latency histogram, got {other:?}"),
    }

    let spans = capture.spans();
    assert_eq!(spans.len(), 1);
    assert_eq!(spans[0].fields.get("error_class").map(String::as_str), Some("timeout"));
}

#[tokio::test(start_paused = true)]
async fn filtered_type_is_skipped_counted_and_never_reaches_the_leaf() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _metrics = metrics::set_default_local_recorder(&recorder);

    let (leaf, mut handle) = mock::pair::<Message, Outcome>();
    let publisher = stack(leaf);
    for event_type in EventType::im_skipped() {
        let outcome = publisher.clone().oneshot(message(event_type, Path::Worker)).now_or_never();
        assert!(matches!(outcome, Some(Ok(Outcome::Skipped))), "{event_type}");
    }
    drop(publisher);
    assert!(handle.next_request().await.is_none(), "reached the leaf");

    let seen = recorded(&snapshotter);
    let success = named(&seen, PUBLISH_SUCCESS_TOTAL);
    assert_eq!(success.len(), EventType::im_skipped().len());
    for event_type in EventType::im_skipped() {
        let expected = labels(&[("path", "worker"), ("event_type", event_type), ("result", "skipped")]);
        assert!(
            success.contains(&(expected.as_slice(), &DebugValue::Counter(1))),
            "{event_type}: {success:?}"
        );
    }
    assert!(named(&seen, PUBLISH_FAILURE_TOTAL).is_empty());
}

#[tokio::test(start_paused = true)]
async fn visible_type_reaches_the_log_sink_and_is_counted_delivered() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _metrics = metrics::set_default_local_recorder(&recorder);

    let outcome = stack(LogSink::new())
        .oneshot(message("RoomUserJoined", Path::Sync))
        .await
        .expect("the log sink delivers");
    assert_eq!(outcome, Outcome::Delivered);

    let seen = recorded(&snapshotter);
    let expected = labels(&[("path", "sync"), ("event_type", "RoomUserJoined"), ("result", "delivered")]);
    assert_eq!(named(&seen, PUBLISH_SUCCESS_TOTAL), vec![(expected.as_slice(), &DebugValue::Counter(1))]);
}

#[tokio::test(start_paused = true)]
async fn a_wait_for_a_permit_is_outside_the_timeout() {
    use crate::delivery::Outlet;
    use crate::delivery::permits::{RateLimitOptions, RateLimits};

    let limits = RateLimitOptions {
        global_per_sec: 100,
        per_group_per_sec: 1,
        worker_share: 1.0,
        pause: Duration::from_secs(1),
    };
    let leaf = service_fn(|_: Message| async { Ok::<_, BoxError>(Outcome::Delivered) });
    let outlet = Outlet::new(im_stack(leaf, Duration::from_millis(100)), RateLimits::shared(&limits, None));
    let started = tokio::time::Instant::now();
    for _ in 0..3 {
        // The permit is taken before the message is built, outside the stack and its timeout.
        let events = message("RoomGiftSent", Path::Worker).events;
        let outcome = outlet.send_waiting("room-1", events).await;
        assert_eq!(
            outcome.expect("a message that waited for its permit is not timed out"),
            Outcome::Delivered
        );
    }
    assert!(
        started.elapsed() >= Duration::from_millis(1_900),
        "one message a second into the group: each waited ~10 timeouts for its permit ({:?})",
        started.elapsed()
    );
}

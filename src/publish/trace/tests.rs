use std::sync::{Arc, Mutex};

use tower::{Layer, ServiceExt, service_fn};
use tower_test::mock;
use tracing::Level;

use super::*;
use crate::publish::Path;
use crate::publish::test_support::{Capture, SECRET_BODY, message};

fn field<'a>(fields: &'a crate::publish::test_support::Fields, name: &str) -> Option<&'a str> {
    fields.get(name).map(String::as_str)
}

#[tokio::test]
async fn delivered_publish_records_identity_and_outcome_on_its_span() {
    let capture = Capture::default();
    let _guard = capture.install();

    let (svc, mut handle) = mock::pair::<Message, Outcome>();
    let svc = TraceLayer::new().layer(svc);
    let (result, ()) = tokio::join!(svc.oneshot(message("RoomUserJoined", Path::Sync)), async {
        let (_, respond) = handle.next_request().await.expect("forwarded");
        respond.send_response(Outcome::Delivered);
    });
    assert_eq!(result.expect("delivered"), Outcome::Delivered);

    let spans = capture.spans();
    assert_eq!(spans.len(), 1);
    let span = &spans[0];
    assert_eq!(span.name, "publish");
    let fields = &span.fields;
    assert_eq!(field(fields, "event_id"), Some("0190f5c2-7b1e-7cc0-8000-000000000001"));
    assert_eq!(field(fields, "event_type"), Some("RoomUserJoined"));
    assert_eq!(field(fields, "room_id"), Some("room-1"));
    assert_eq!(field(fields, "path"), Some("sync"));
    assert_eq!(field(fields, "outcome"), Some("delivered"));
    assert_eq!(field(fields, "error_class"), None);
    assert!(capture.events().iter().all(|e| e.level != Level::WARN));
}

#[tokio::test]
async fn skipped_outcome_is_recorded() {
    let capture = Capture::default();
    let _guard = capture.install();

    let svc = TraceLayer::new().layer(service_fn(|_: Message| async { Ok::<_, BoxError>(Outcome::Skipped) }));
    let outcome = svc.oneshot(message("RoomCreated", Path::Worker)).await.expect("skipped");
    assert_eq!(outcome, Outcome::Skipped);

    let spans = capture.spans();
    assert_eq!(spans.len(), 1);
    assert_eq!(field(&spans[0].fields, "outcome"), Some("skipped"));
    assert_eq!(field(&spans[0].fields, "path"), Some("worker"));
}

#[tokio::test]
async fn failure_records_class_and_warns_with_error_text_only() {
    let capture = Capture::default();
    let _guard = capture.install();

    let svc = TraceLayer::new().layer(service_fn(|_: Message| async {
        Err::<Outcome, BoxError>(tower::timeout::error::Elapsed::new().into())
    }));
    let error = svc.oneshot(message("RoomGiftSent", Path::Sync)).await.expect_err("fails");
    assert_eq!(error.to_string(), "request timed out");

    let spans = capture.spans();
    assert_eq!(spans.len(), 1);
    assert_eq!(field(&spans[0].fields, "outcome"), Some("failed"));
    assert_eq!(field(&spans[0].fields, "error_class"), Some("timeout"));

    let warnings: Vec<_> = capture.events().into_iter().filter(|e| e.level == Level::WARN).collect();
    assert_eq!(warnings.len(), 1);
    let warning = &warnings[0];
    assert_eq!(warning.span, Some("publish"));
    assert_eq!(field(&warning.fields, "error"), Some("request timed out"));
    assert_eq!(field(&warning.fields, "error_class"), Some("timeout"));
    assert_eq!(field(&warning.fields, "message"), Some("Publish failed"));

    let everything = capture
        .events()
        .iter()
        .flat_map(|e| e.fields.values().cloned())
        .chain(spans.iter().flat_map(|s| s.fields.values().cloned()))
        .collect::<Vec<_>>();
    assert!(
        everything.iter().all(|v| !v.contains("body-must-not-be-logged")),
        "the message body leaked into logs: {everything:?} (body {SECRET_BODY})"
    );
}

#[tokio::test]
async fn inner_call_and_future_run_inside_the_span() {
    let capture = Capture::default();
    let _guard = capture.install();

    let seen: Arc<Mutex<Vec<Option<&'static str>>>> = Arc::default();
    let record = Arc::clone(&seen);
    let svc = TraceLayer::new().layer(service_fn(move |_: Message| {
        let current = || tracing::Span::current().metadata().map(|m| m.name());
        let record = Arc::clone(&record);
        record.lock().expect("lock").push(current());
        async move {
            tokio::task::yield_now().await;
            record.lock().expect("lock").push(current());
            Ok::<_, BoxError>(Outcome::Delivered)
        }
    }));
    svc.oneshot(message("RoomUserJoined", Path::Sync)).await.expect("delivered");

    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen, vec![Some("publish"), Some("publish")]);
}

use std::task::Poll;

use futures::FutureExt;
use tower::{Layer, ServiceExt};
use tower_test::mock;

use super::*;
use crate::domain::EventType;
use crate::publish::Path;
use crate::publish::test_support::message;

/// The IM stack's filter over a mock inner service, and the mock's handle.
fn im_filter() -> (EventFilter<mock::Mock<Message, Outcome>>, mock::Handle<Message, Outcome>) {
    let (svc, handle) = mock::pair::<Message, Outcome>();
    (EventFilterLayer::skip(EventType::im_skipped()).layer(svc), handle)
}

#[tokio::test]
async fn skipped_types_are_answered_without_reaching_the_inner_service() {
    let (svc, mut handle) = im_filter();

    for event_type in EventType::im_skipped() {
        // Answered on the first poll: a forwarded message would wait for the handle.
        let outcome = svc.clone().oneshot(message(event_type, Path::Sync)).now_or_never();
        assert!(matches!(outcome, Some(Ok(Outcome::Skipped))), "{event_type}");
    }

    drop(svc);
    assert!(handle.next_request().await.is_none(), "a skipped event reached the inner service");
}

#[tokio::test]
async fn other_types_are_forwarded_unchanged() {
    let (svc, mut handle) = im_filter();

    let call = tokio::spawn(svc.oneshot(message("RoomUserJoined", Path::Worker)));
    let (request, respond) = handle.next_request().await.expect("forwarded");
    assert_eq!(request.event_type(), "RoomUserJoined");
    assert_eq!(request.path, Path::Worker);
    respond.send_response(Outcome::Delivered);

    let outcome = call.await.expect("join").expect("inner success");
    assert_eq!(outcome, Outcome::Delivered);
}

#[tokio::test]
async fn inner_errors_pass_through() {
    let (svc, mut handle) = im_filter();

    let call = tokio::spawn(svc.oneshot(message("RoomGiftSent", Path::Sync)));
    let (_, respond) = handle.next_request().await.expect("forwarded");
    respond.send_error(std::io::Error::other("im down"));

    let error = call.await.expect("join").expect_err("inner failure");
    assert_eq!(error.to_string(), "im down");
}

#[tokio::test]
async fn a_skipped_message_does_not_consume_inner_readiness() {
    let (mut svc, mut handle) =
        mock::spawn_layer::<Message, Outcome, _>(EventFilterLayer::skip(EventType::im_skipped()));
    handle.allow(1);

    assert!(matches!(svc.poll_ready(), Poll::Ready(Ok(()))));
    let skipped = svc.call(message("RoomCreated", Path::Sync)).await;
    assert_eq!(skipped.expect("skipped"), Outcome::Skipped);

    // The reservation made by the first poll_ready is still there for a forwarded message.
    assert!(matches!(svc.poll_ready(), Poll::Ready(Ok(()))));
    let call = svc.call(message("RoomClosed", Path::Sync));
    let (request, respond) = handle.next_request().await.expect("forwarded");
    assert_eq!(request.event_type(), "RoomClosed");
    respond.send_response(Outcome::Delivered);
    assert_eq!(call.await.expect("delivered"), Outcome::Delivered);

    // The single permit is spent now: the inner service is not ready, nor is the filter.
    assert!(svc.poll_ready().is_pending());
}

#[test]
fn layer_skip_set_is_configurable() {
    let layer = EventFilterLayer::skip(["AuditOnly"]);
    assert_eq!(layer.skipped_types(), ["AuditOnly"]);
    let filter = layer.layer(());
    assert!(filter.skips("AuditOnly"));
    assert!(!filter.skips("RoomCreated"));
}

#[tokio::test]
async fn a_skipped_type_carrying_an_admin_call_is_forwarded_with_it() {
    use std::sync::Arc;

    use crate::publish::{AdminApi, AdminCall};

    let (svc, mut handle) = im_filter();
    let create = AdminCall {
        api: AdminApi::CreateGroup,
        fields: Default::default(),
        until_ms: None,
        after_message: false,
        share: None,
    };
    let mut created = message("RoomCreated", Path::Sync);
    assert!(svc.skips("RoomCreated"), "RoomCreated is in the IM skip set");
    created.events[0].admin = Some(Arc::new(create));
    // A pack of a plain skipped event beside it: only the one with the call goes on.
    let mut plain = message("RoomCreated", Path::Sync).events.remove(0);
    plain.event_id = "plain".into();
    created.events.push(plain);

    let call = tokio::spawn(svc.oneshot(created));
    let (request, respond) = handle.next_request().await.expect("forwarded, not skipped");
    assert_eq!(request.events.len(), 1);
    assert_eq!(request.events[0].admin.as_ref().map(|c| c.api), Some(AdminApi::CreateGroup));
    respond.send_response(Outcome::Delivered);
    assert_eq!(call.await.expect("join").expect("delivered"), Outcome::Delivered);
}

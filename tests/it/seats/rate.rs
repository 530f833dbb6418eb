//! `rooms.seat_actions_per_user_per_sec` (docs/CONFIG.md): a member flapping a seat is held to
//! its rate in that room — beyond it 429 `seat_rate_limited` with `Retry-After` over HTTP,
//! `RESOURCE_EXHAUSTED` with `error-code` and `retry-after` over gRPC — and the refusal writes
//! nothing; another member, and the same member in another room, keep their own budget; once
//! the wait is over it acts again.

use std::time::Duration;

use room_service::grpc::pb;
use room_service::grpc::pb::room_service_client::RoomServiceClient;
use serde_json::{Value, json};
use tonic::Code;
use tonic::transport::Channel;

use super::{create, seated};
use crate::moderation::{cid, error, join_all, written};
use crate::support::app::{TestApp, settings};
use crate::support::backends;

/// The limit these tests run with.
const LIMIT: &str = "2";

/// `actor`'s `action` on a seat of `room` over HTTP: status, `Retry-After` and body.
async fn raw_seat(app: &TestApp, room: &str, action: &str, actor: &str) -> (u16, Option<u64>, Value) {
    let body = json!({"command_id": cid(action), "actor_id": actor});
    let response = app
        .http
        .post(format!("{}/v1/rooms/{room}/seats/{action}", app.base))
        .json(&body)
        .send()
        .await
        .expect("post");
    let status = response.status().as_u16();
    let retry_after = response.headers().get("retry-after").and_then(|v| v.to_str().ok()?.parse().ok());
    (status, retry_after, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_seat_flapper_over_its_rate_is_429_naming_the_limit_and_writes_nothing() {
    for db in backends().await {
        let overrides = [("rooms.seat_actions_per_user_per_sec", LIMIT)];
        let app = TestApp::start(settings(db.url(), None, &overrides)).await;
        for room in ["r1", "r2"] {
            create(&app, room, "host", 4, "free").await;
            join_all(&app, room, &["mallory", "bob"]).await;
        }
        // The burst: a take and a leave.
        seated(&app, "r1", "take", "mallory", json!({})).await;
        seated(&app, "r1", "leave", "mallory", json!({})).await;
        let before = written(&db, &app, "r1").await;
        let (status, retry_after, answer) = raw_seat(&app, "r1", "take", "mallory").await;
        assert_eq!((status, error(&answer).0), (429, "seat_rate_limited"), "{db}: {answer}");
        assert!(
            error(&answer).1.contains("rooms.seat_actions_per_user_per_sec"),
            "{db}: names the limit: {answer}"
        );
        let retry_after = retry_after.unwrap_or_else(|| panic!("{db}: Retry-After on {answer}"));
        assert!((1..=2).contains(&retry_after), "{db}: Retry-After {retry_after}");
        assert_eq!(written(&db, &app, "r1").await, before, "{db}: the refusal wrote nothing");

        // Others keep their budget: another member here, the same member in another room.
        seated(&app, "r1", "take", "bob", json!({})).await;
        seated(&app, "r2", "take", "mallory", json!({})).await;
        // The wait over, it acts again.
        tokio::time::sleep(Duration::from_secs(retry_after)).await;
        seated(&app, "r1", "take", "mallory", json!({})).await;
        app.stop().await;
    }
}

#[tokio::test]
async fn over_grpc_a_seat_flapper_over_its_rate_is_resource_exhausted_and_writes_nothing() {
    for db in backends().await {
        let overrides = [("rooms.seat_actions_per_user_per_sec", LIMIT)];
        let app = TestApp::start(settings(db.url(), None, &overrides)).await;
        create(&app, "g1", "host", 4, "free").await;
        join_all(&app, "g1", &["mallory", "bob"]).await;
        let channel = Channel::from_shared(format!("http://{}", app.app.grpc_addr)).unwrap().connect_lazy();
        let mut rooms = RoomServiceClient::new(channel);
        let call = |actor: &str, action: &str| pb::SeatRequest {
            command_id: cid("s"),
            room_id: "g1".into(),
            actor_id: actor.into(),
            action: action.into(),
            ..Default::default()
        };
        rooms.seat(call("mallory", "take")).await.expect("take within the burst");
        rooms.seat(call("mallory", "leave")).await.expect("leave within the burst");
        let before = written(&db, &app, "g1").await;
        let status = rooms.seat(call("mallory", "take")).await.expect_err("over the rate");
        assert_eq!(status.code(), Code::ResourceExhausted, "{db}: {status:?}");
        let meta = |key: &str| status.metadata().get(key).map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(meta("error-code").as_deref(), Some("seat_rate_limited"), "{db}: {status:?}");
        assert!(meta("retry-after").is_some(), "{db}: {status:?}");
        assert!(status.message().contains("rooms.seat_actions_per_user_per_sec"), "{db}: {status:?}");
        assert_eq!(written(&db, &app, "g1").await, before, "{db}: the refusal wrote nothing");
        rooms.seat(call("bob", "take")).await.expect("another member keeps its budget");
        app.stop().await;
    }
}

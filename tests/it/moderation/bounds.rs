//! What one caller's input may cost the room's other callers (docs/API.md): attribute values
//! counted by the bytes JSON writes them out in, so the limits hold on the wire; command
//! answers carrying the room without its attributes (the room read keeps them), over HTTP and
//! gRPC; a `cover_url` that is an absolute https URL with a host; and the cap on a room's bans.

use room_service::grpc::pb;
use room_service::grpc::pb::room_service_client::RoomServiceClient;
use serde_json::{Value, json};
use tonic::transport::Channel;

use super::*;
use crate::support::app::{TestApp, settings};
use crate::support::backends;

/// Asserts `body` on `route` of `r1` is refused with `status`/`code`, its message starting with
/// `field`, and writes nothing.
async fn refused(db: &TestDb, app: &TestApp, route: &str, body: Value, status: u16, code: &str, field: &str) {
    let before = written(db, app, "r1").await;
    let (got, answer) = act(app, "r1", route, "alice", body.clone()).await;
    let (got_code, message) = error(&answer);
    assert_eq!((got, got_code), (status, code), "{db}: {route} {body}: {answer}");
    assert!(message.starts_with(&format!("{field}:")), "{db}: {route}: names {field}: {message}");
    assert_eq!(written(db, app, "r1").await, before, "{db}: {route}: a refusal writes nothing");
}

/// A gRPC client of `app`.
fn grpc(app: &TestApp) -> RoomServiceClient<Channel> {
    let channel = Channel::from_shared(format!("http://{}", app.app.grpc_addr)).unwrap().connect_lazy();
    RoomServiceClient::new(channel)
}

#[tokio::test]
async fn a_value_of_control_characters_is_counted_by_its_escaped_size_and_answers_stay_small() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "r1", "alice").await;
        // 342 control characters are 2,052 bytes escaped (6 each): over; 341 (2,046) fit.
        let over = json!({"set": {"c": "\u{1}".repeat(342)}});
        refused(&db, &app, "attributes", over, 400, "invalid_argument", "set").await;
        let quotes = json!({"set": {"q": "\"".repeat(1025)}});
        refused(&db, &app, "attributes", quotes, 400, "invalid_argument", "set").await;
        // The room's total too: 8 values of 341 control characters (16,368 bytes escaped) fill
        // it but 16 bytes: 3 control characters more (18 escaped) are over, 16 letters fit.
        for i in 0..8 {
            ok(&app, "r1", "attributes", "alice", json!({"set": {format!("k{i}"): "\u{1}".repeat(341)}}))
                .await;
        }
        let total = json!({"set": {"k8": "\u{1}".repeat(3)}});
        refused(&db, &app, "attributes", total, 400, "invalid_argument", "set").await;
        ok(&app, "r1", "attributes", "alice", json!({"set": {"k8": "abcdefghijklmnop"}})).await;

        // On the wire: the room read carries them within the limit, a command's answer not at all.
        let response = app.http.get(format!("{}/v1/rooms/r1", app.base)).send().await.expect("get");
        assert_eq!(response.status().as_u16(), 200, "{db}");
        let body = response.text().await.expect("body");
        assert!(body.len() < 16_384 + 2_048, "{db}: the room read is {} bytes", body.len());
        let (status, answer) = join(&app, "r1", "bob").await;
        assert_eq!(status, 200, "{db}: {answer}");
        let bytes = answer.to_string().len();
        assert!(bytes < 1_024, "{db}: a join's answer is {bytes} bytes: {answer}");
        app.stop().await;
    }
}

#[tokio::test]
async fn a_command_answer_carries_the_room_without_attributes_and_the_room_read_keeps_them() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "r1", "alice").await;
        let body = json!({"command_id": "attr-once", "actor_id": "alice", "set": {"topic": "music"}});
        let (status, written) = app.post("/v1/rooms/r1/attributes", body.clone()).await;
        assert_eq!(status, 200, "{db}: {written}");
        let (status, replayed) = app.post("/v1/rooms/r1/attributes", body).await;
        assert_eq!((status, &replayed["replayed"]), (200, &json!(true)), "{db}: {replayed}");
        let (status, joined) = join(&app, "r1", "bob").await;
        assert_eq!(status, 200, "{db}: {joined}");
        for answer in [&written, &replayed, &joined] {
            let view = answer["room"].as_object().expect("room");
            assert!(!view.contains_key("attributes"), "{db}: {answer}");
            assert_eq!(view["room_id"], "r1", "{db}: the rest of the small view is there");
        }
        let version = written["room_version"].clone();
        let read = room(&app, "r1").await;
        assert_eq!(read["attributes"], json!({"topic": {"value": "music", "version": version}}), "{db}");

        // gRPC: the outcome's room has an empty map, GetRoom the attribute.
        let mut rooms = grpc(&app);
        let write = pb::SetAttributesRequest {
            command_id: cid("ga"),
            room_id: "r1".into(),
            actor_id: "alice".into(),
            set: [("poll".to_owned(), "open".to_owned())].into(),
            delete: vec![],
            expect: Default::default(),
        };
        let outcome = rooms.set_attributes(write).await.expect("set").into_inner();
        let view = outcome.room.expect("room");
        assert!(view.attributes.is_empty(), "{db}: {:?}", view.attributes);
        assert_eq!(view.version, outcome.room_version, "{db}");
        let got =
            rooms.get_room(pb::GetRoomRequest { room_id: "r1".into() }).await.expect("get").into_inner();
        let keys: Vec<_> = got.attributes.keys().map(String::as_str).collect();
        assert_eq!(keys.len(), 2, "{db}: {keys:?}");
        assert_eq!(got.attributes["poll"].version, outcome.room_version, "{db}");
        app.stop().await;
    }
}

#[tokio::test]
async fn a_cover_url_that_is_not_an_absolute_https_url_with_a_host_is_400_naming_cover_url() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "r1", "alice").await;
        for bad in [
            "https:///etc/passwd",
            "https://a/<script>",
            "https://cdn.test/it's.png",
            "https://user:pw@cdn.test/c.png",
            "https://CDN.test/c.png",
            "javascript:alert(1)",
        ] {
            refused(&db, &app, "info", json!({"cover_url": bad}), 400, "invalid_argument", "cover_url").await;
        }
        let good = "https://cdn.test/a%20b.png?w=100";
        ok(&app, "r1", "info", "alice", json!({"cover_url": good})).await;
        assert_eq!(room(&app, "r1").await["cover_url"], good, "{db}");

        // gRPC: the same rule, INVALID_ARGUMENT naming the field, nothing written.
        let mut rooms = grpc(&app);
        let before = written(&db, &app, "r1").await;
        let info = pb::UpdateRoomInfoRequest {
            seat_mode: None,
            command_id: cid("gi"),
            room_id: "r1".into(),
            actor_id: "alice".into(),
            title: None,
            announcement: None,
            cover_url: Some("https:///etc/passwd".into()),
        };
        let status = rooms.update_room_info(info).await.expect_err("refused");
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{db}: {status:?}");
        assert!(status.message().starts_with("cover_url:"), "{db}: {}", status.message());
        assert_eq!(written(&db, &app, "r1").await, before, "{db}: nothing written");
        assert_eq!(room(&app, "r1").await["cover_url"], good, "{db}");
        app.stop().await;
    }
}

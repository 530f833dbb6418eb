//! What one caller may cost the others (docs/CONFIG.md), over HTTP and gRPC, on SQLite and
//! MariaDB: members reads metered per reader (`rooms.members.reads_per_sec_per_client`, 429
//! naming the limit with `Retry-After`, a page counted by its size), and the open rooms one user
//! may own (`rooms.max_open_per_owner`, 409 naming the limit, nothing written, service tokens
//! exempt).

use room_service::grpc::pb;
use room_service::grpc::pb::room_service_client::RoomServiceClient;
use serde_json::{Value, json};
use tonic::Code;

use crate::api::{create_room, join};
use crate::auth::{SERVICE_TOKEN, call, jwt_overrides, make, pairs, rs256, serve_jwks, written};
use crate::support::app::{TestApp, settings};
use crate::support::{TestDb, backends};

/// The `room` members page of `limit` (anonymous, from 127.0.0.1): status, `Retry-After`, body.
async fn members(app: &TestApp, room: &str, limit: usize) -> (u16, Option<String>, Value) {
    let url = format!("{}/v1/rooms/{room}/members?limit={limit}", app.base);
    let response = app.http.get(url).send().await.expect("members");
    let retry_after = response.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
    let status = response.status().as_u16();
    (status, retry_after, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_members_reader_over_its_share_is_429_naming_the_limit_over_http_and_grpc() {
    for db in backends().await {
        let app =
            TestApp::start(settings(db.url(), None, &[("rooms.members.reads_per_sec_per_client", "3")]))
                .await;
        create_room(&app, "r1").await;
        assert_eq!(join(&app, "r1", "bob", "j1").await.0, 200, "{db}");
        // Three small pages are the second's share; the fourth is refused, whole.
        for n in 0..3 {
            let (status, _, body) = members(&app, "r1", 10).await;
            assert_eq!(status, 200, "{db}: read {n}: {body}");
        }
        let (status, retry_after, body) = members(&app, "r1", 10).await;
        assert_eq!((status, body["error"]["code"].as_str()), (429, Some("rate_limited")), "{db}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("rooms.members.reads_per_sec_per_client"), "{db}: {message}");
        assert_eq!(retry_after.as_deref(), Some("1"), "{db}");
        // The reader's share comes back with time; a page of 300 costs three reads at once.
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
        assert_eq!(members(&app, "r1", 300).await.0, 200, "{db}");
        assert_eq!(members(&app, "r1", 1).await.0, 429, "{db}: the page of 300 took the whole share");
        // The events API's share is its own.
        assert_eq!(app.get("/v1/rooms/r1/events").await.0, 200, "{db}");

        // gRPC ListMembers: the same reader's share (127.0.0.1), RESOURCE_EXHAUSTED with retry-after.
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
        let channel = tonic::transport::Channel::from_shared(format!("http://{}", app.app.grpc_addr))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut rooms = RoomServiceClient::new(channel);
        let page = || pb::ListMembersRequest { room_id: "r1".into(), limit: 100, after: String::new() };
        for n in 0..3 {
            rooms.list_members(page()).await.unwrap_or_else(|e| panic!("{db}: read {n}: {e:?}"));
        }
        let refused = rooms.list_members(page()).await.expect_err("over the share");
        assert_eq!(refused.code(), Code::ResourceExhausted, "{db}: {refused:?}");
        assert!(refused.message().contains("rooms.members.reads_per_sec_per_client"), "{db}: {refused:?}");
        assert_eq!(refused.metadata().get("retry-after").map(|v| v.to_str().unwrap()), Some("1"), "{db}");
        app.stop().await;
    }
}

fn create(command_id: &str, room: &str, owner: &str) -> Value {
    json!({"command_id": command_id, "room_id": room, "owner_id": owner, "title": "t"})
}

#[tokio::test]
async fn an_owner_at_the_open_room_cap_is_409_and_nothing_is_written() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[("rooms.max_open_per_owner", "2")])).await;
        for n in 0..2 {
            let (status, body) =
                app.post("/v1/rooms", create(&format!("c{n}"), &format!("a{n}"), "alice")).await;
            assert_eq!(status, 200, "{db}: {body}");
        }
        let before = written(&db).await;
        let (status, body) = app.post("/v1/rooms", create("c2", "a2", "alice")).await;
        assert_eq!((status, body["error"]["code"].as_str()), (409, Some("too_many_rooms")), "{db}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("rooms.max_open_per_owner") && message.contains("owner_id"),
            "{db}: {message}"
        );
        assert_eq!(written(&db).await, before, "{db}: nothing written");
        assert_eq!(app.get("/v1/rooms/a2").await.0, 404, "{db}");
        // A retried creation of a room alice has is its replay, not a refusal.
        let (status, body) = app.post("/v1/rooms", create("c1", "a1", "alice")).await;
        assert_eq!((status, body["replayed"].as_bool()), (200, Some(true)), "{db}: {body}");
        // Another owner is not held by alice's rooms.
        assert_eq!(app.post("/v1/rooms", create("b0", "b0", "bob")).await.0, 200, "{db}");
        // gRPC CreateRoom: FAILED_PRECONDITION, error-code too_many_rooms.
        let channel = tonic::transport::Channel::from_shared(format!("http://{}", app.app.grpc_addr))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let request = pb::CreateRoomRequest {
            command_id: "g2".into(),
            room_id: "a2".into(),
            owner_id: "alice".into(),
            title: "t".into(),
            seats: None,
        };
        let refused =
            RoomServiceClient::new(channel.clone()).create_room(request.clone()).await.expect_err("cap");
        assert_eq!(refused.code(), Code::FailedPrecondition, "{db}: {refused:?}");
        assert_eq!(refused.metadata().get("error-code").map(|v| v.to_str().unwrap()), Some("too_many_rooms"));
        assert!(refused.message().contains("rooms.max_open_per_owner"), "{db}: {refused:?}");
        // A closed room no longer counts.
        let (status, body) = app.post("/v1/rooms/a0/close", json!({"command_id": "close-a0"})).await;
        assert_eq!(status, 200, "{db}: {body}");
        RoomServiceClient::new(channel).create_room(request).await.unwrap_or_else(|e| panic!("{db}: {e:?}"));
        app.stop().await;
    }
}

#[tokio::test]
async fn a_service_token_creates_past_the_cap_and_a_user_does_not() {
    let db = TestDb::sqlite().await;
    let made = make(json!({"jwts": {"alice": rs256("alice")}}));
    let jwks = serve_jwks(made.jwks.clone()).await;
    let overrides = jwt_overrides(&jwks);
    let app =
        TestApp::start(settings(db.url(), None, &pairs(&overrides, &[("rooms.max_open_per_owner", "1")])))
            .await;
    let alice = Some(made.token("alice"));
    assert_eq!(call(&app, "POST", "/v1/rooms", Some(create("c0", "a0", "alice")), alice).await.status, 200);
    let refused = call(&app, "POST", "/v1/rooms", Some(create("c1", "a1", "alice")), alice).await;
    assert_eq!((refused.status, refused.code()), (409, "too_many_rooms"), "{:?}", refused.body);
    for n in 1..4 {
        let body = create(&format!("s{n}"), &format!("a{n}"), "alice");
        let answer = call(&app, "POST", "/v1/rooms", Some(body), Some(SERVICE_TOKEN)).await;
        assert_eq!(answer.status, 200, "a service is exempt: {:?}", answer.body);
    }
    app.stop().await;
}

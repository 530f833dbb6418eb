//! The gRPC API under `auth.mode: jwt`: the `authorization` metadata entry, and the same
//! refusals as HTTP with their status codes and `error-code` metadata.

use room_service::grpc::pb::room_service_client::RoomServiceClient;
use room_service::grpc::pb::{self, CommandOutcome};
use serde_json::json;
use tonic::Code;
use tonic::transport::Channel;

use super::*;
use crate::support::TestDb;
use crate::support::app::{TestApp, settings};

fn rooms(app: &TestApp) -> RoomServiceClient<Channel> {
    let channel = Channel::from_shared(format!("http://{}", app.app.grpc_addr)).unwrap().connect_lazy();
    RoomServiceClient::new(channel)
}

/// `message` with `token` as its bearer token.
fn authed<T>(message: T, token: Option<&str>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(token) = token {
        request.metadata_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    request
}

fn create(command_id: &str, owner: &str) -> pb::CreateRoomRequest {
    pb::CreateRoomRequest {
        seats: None,
        command_id: command_id.into(),
        room_id: "r1".into(),
        owner_id: owner.into(),
        title: "t".into(),
    }
}

fn member(command_id: &str, user: &str) -> pb::MemberRequest {
    pb::MemberRequest { command_id: command_id.into(), room_id: "r1".into(), user_id: user.into() }
}

fn gift(command_id: &str, sender: &str) -> pb::SendGiftRequest {
    pb::SendGiftRequest {
        command_id: command_id.into(),
        room_id: "r1".into(),
        sender_id: sender.into(),
        receiver_id: "alice".into(),
        gift_id: "rose".into(),
        count: 1,
        unit_value: 1,
    }
}

fn error_code(status: &tonic::Status) -> &str {
    status.metadata().get("error-code").map_or("", |v| v.to_str().unwrap())
}

async fn outcome(
    call: impl std::future::Future<Output = Result<tonic::Response<CommandOutcome>, tonic::Status>>,
) -> Result<CommandOutcome, tonic::Status> {
    call.await.map(tonic::Response::into_inner)
}

#[tokio::test]
async fn grpc_calls_are_authenticated_and_authorized_like_http() {
    let made = make(json!({"jwts": {
        "alice": rs256("alice"),
        "bob": rs256("bob"),
        "expired": {"alg": "RS256", "key": "a", "kid": "ka", "claims": with(claims("alice"), json!({"exp": -120}))},
        "another_key": {"alg": "RS256", "key": "b", "kid": "ka", "claims": claims("alice")},
        "alg_none": {"alg": "none", "key": "none", "claims": claims("alice")},
    }}));
    let jwks_url = serve_jwks(made.jwks.clone()).await;
    let overrides = jwt_overrides(&jwks_url);
    let db = TestDb::mysql().await;
    let app = TestApp::start(settings(
        db.url(),
        None,
        &pairs(&overrides, &[("auth.per_user_commands_per_sec", "3")]),
    ))
    .await;
    let mut client = rooms(&app);
    let (alice, bob) = (Some(made.token("alice")), Some(made.token("bob")));

    let missing = outcome(client.create_room(authed(create("c1", "alice"), None))).await.unwrap_err();
    assert_eq!((missing.code(), error_code(&missing)), (Code::Unauthenticated, "unauthenticated"));
    for bad in ["expired", "another_key", "alg_none"] {
        let refused = outcome(client.create_room(authed(create("c1", "alice"), Some(made.token(bad))))).await;
        assert_eq!(refused.unwrap_err().code(), Code::Unauthenticated, "{bad}");
    }
    assert_eq!(db.count("room_command_log").await, 0, "nothing committed for a refused call");

    outcome(client.create_room(authed(create("c1", "alice"), alice))).await.expect("alice creates her room");
    let as_alice = outcome(client.join_room(authed(member("j1", "alice"), bob))).await.unwrap_err();
    assert_eq!((as_alice.code(), error_code(&as_alice)), (Code::PermissionDenied, "forbidden"));
    assert!(as_alice.message().starts_with("user_id:"), "{}", as_alice.message());
    let gift_as_alice = outcome(client.send_gift(authed(gift("g1", "alice"), bob))).await.unwrap_err();
    assert!(gift_as_alice.message().starts_with("sender_id:"), "{}", gift_as_alice.message());
    let close =
        pb::CloseRoomRequest { command_id: "x1".into(), room_id: "r1".into(), actor_id: String::new() };
    let not_owner = outcome(client.close_room(authed(close.clone(), bob))).await.unwrap_err();
    assert_eq!(not_owner.code(), Code::PermissionDenied);
    let batch = pb::HeartbeatsRequest { room_id: "r1".into(), user_ids: vec!["bob".into()] };
    assert_eq!(
        client.heartbeats(authed(batch.clone(), bob)).await.unwrap_err().code(),
        Code::PermissionDenied
    );
    assert_eq!(db.count("room_command_log").await, 1, "only alice's create");

    outcome(client.join_room(authed(member("j2", "bob"), bob))).await.expect("bob joins as himself");
    client.heartbeats(authed(batch, Some(SERVICE_TOKEN))).await.expect("the gateway's batch heartbeat");
    outcome(client.join_room(authed(member("j3", "carol"), Some(SERVICE_TOKEN)))).await.expect("for carol");
    // Reads are public.
    let get = pb::GetRoomRequest { room_id: "r1".into() };
    assert_eq!(client.get_room(authed(get, None)).await.expect("public read").into_inner().member_count, 2);

    // alice has had her create; two more within the second, then RESOURCE_EXHAUSTED.
    let hb = || pb::HeartbeatRequest { room_id: "r1".into(), user_id: "alice".into() };
    for _ in 0..2 {
        let status = client.heartbeat(authed(hb(), alice)).await.unwrap_err();
        assert_eq!(error_code(&status), "not_member");
    }
    let limited = client.heartbeat(authed(hb(), alice)).await.unwrap_err();
    assert_eq!((limited.code(), error_code(&limited)), (Code::ResourceExhausted, "rate_limited"));
    assert_eq!(limited.metadata().get("retry-after").unwrap(), "1");
    outcome(client.close_room(authed(close, alice))).await.expect_err("alice is limited too");
    app.stop().await;
}

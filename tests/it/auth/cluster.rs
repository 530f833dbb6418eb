//! Authentication in a cluster (SPEC §12.3): a request for a room another node owns is verified
//! where it arrives (a bad one never travels), forwarded with the caller's very credential,
//! and verified and authorized again by the owner, over HTTP and gRPC.

use std::time::Duration;

use room_service::grpc::pb;
use room_service::grpc::pb::room_service_client::RoomServiceClient;
use serde_json::{Value, json};
use tonic::Code;

use super::*;
use crate::cluster::Nodes;

async fn send(url: String, body: Value, token: Option<&str>, forwarded_by: bool) -> (u16, Value) {
    let mut request = reqwest::Client::new().post(url).json(&body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if forwarded_by {
        request = request.header("x-room-forwarded-by", "n0");
    }
    let response = request.send().await.expect("answer");
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_forwarded_request_carries_the_credential_and_the_owner_verifies_it() {
    let made = make(json!({"jwts": {
        "alice": {"alg": "HS256", "key": "hs", "claims": claims("alice")},
        "bob": {"alg": "HS256", "key": "hs", "claims": claims("bob")},
        "carol": {"alg": "HS256", "key": "hs", "claims": claims("carol")},
    }}));
    let env = [
        ("ROOM_SERVICE__AUTH__MODE", "jwt"),
        ("ROOM_SERVICE__AUTH__JWT__ALGORITHMS", "HS256"),
        ("ROOM_SERVICE__AUTH__JWT__SECRET", HS_SECRET),
    ];
    let nodes = Nodes::start(2, &env).await;
    let url = |i: usize, path: &str| format!("http://127.0.0.1:{}{path}", nodes.nodes[i].port);
    let create = json!({"command_id": "c1", "room_id": "a-r1", "owner_id": "alice", "title": "t"});
    let mut created = send(url(0, "/v1/rooms"), create.clone(), Some(made.token("alice")), false).await;
    for _ in 0..50 {
        if created.0 != 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        created = send(url(0, "/v1/rooms"), create.clone(), Some(made.token("alice")), false).await;
    }
    assert_eq!(created.0, 200, "{}", created.1);
    let owner = nodes.owner(0, "a-r1").await;
    let other = 1 - owner;
    let join = |id: &str, user: &str| json!({"command_id": id, "user_id": user});

    let before = nodes.forwarded().await;
    let joined =
        send(url(other, "/v1/rooms/a-r1/join"), join("j1", "bob"), Some(made.token("bob")), false).await;
    assert_eq!(joined.0, 200, "bob joins through the other node: {}", joined.1);
    assert!(nodes.forwarded().await > before, "the join was forwarded to the owner");
    let as_alice =
        send(url(other, "/v1/rooms/a-r1/join"), join("j2", "alice"), Some(made.token("bob")), false).await;
    assert_eq!(
        (as_alice.0, as_alice.1["error"]["code"].as_str()),
        (403, Some("forbidden")),
        "{}",
        as_alice.1
    );
    let close = json!({"command_id": "x1"});
    assert_eq!(
        send(url(other, "/v1/rooms/a-r1/close"), close.clone(), Some(made.token("bob")), false).await.0,
        403
    );

    let forwarded = nodes.forwarded().await;
    let anonymous = send(url(other, "/v1/rooms/a-r1/join"), join("j3", "dave"), None, false).await;
    assert_eq!(anonymous.0, 401, "{}", anonymous.1);
    assert_eq!(nodes.forwarded().await, forwarded, "a request without a token never travels");
    // The owner trusts no hop header: it verifies the credential itself.
    let spoofed = send(url(owner, "/v1/rooms/a-r1/join"), join("j4", "dave"), None, true).await;
    assert_eq!(spoofed.0, 401, "{}", spoofed.1);

    // gRPC through the other node, forwarded to the owner's HTTP route with the credential.
    let addr = format!("http://127.0.0.1:{}", nodes.nodes[other].grpc_port);
    let mut grpc =
        RoomServiceClient::new(tonic::transport::Channel::from_shared(addr).unwrap().connect_lazy());
    let member = |id: &str, user: &str, token: Option<&str>| {
        let mut request = tonic::Request::new(pb::MemberRequest {
            command_id: id.into(),
            room_id: "a-r1".into(),
            user_id: user.into(),
        });
        if let Some(token) = token {
            request.metadata_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
        }
        request
    };
    grpc.join_room(member("g1", "carol", Some(made.token("carol")))).await.expect("carol joins over gRPC");
    let missing = grpc.join_room(member("g2", "carol", None)).await.unwrap_err();
    assert_eq!(missing.code(), Code::Unauthenticated);
    let denied = grpc.join_room(member("g3", "alice", Some(made.token("carol")))).await.unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    assert!(denied.message().starts_with("user_id:"), "{}", denied.message());
    assert_eq!(
        nodes.db.scalar("SELECT COUNT(*) FROM room_command_log").await,
        Some(3),
        "the create and the two own joins only"
    );
    let closed = send(url(other, "/v1/rooms/a-r1/close"), close, Some(made.token("alice")), false).await;
    assert_eq!(closed.0, 200, "the owner closes through the other node: {}", closed.1);
}

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

/// A gRPC client of node `port` that sends `authorization` as these very bytes (tonic's
/// metadata API takes visible ASCII only; HTTP/2 carries any header byte but CR, LF and NUL).
fn raw_credential_client(
    port: u16,
    authorization: &'static [u8],
) -> RoomServiceClient<
    tower::util::MapRequest<
        tonic::transport::Channel,
        impl FnMut(axum::http::Request<tonic::body::Body>) -> axum::http::Request<tonic::body::Body> + Clone,
    >,
> {
    let channel =
        tonic::transport::Channel::from_shared(format!("http://127.0.0.1:{port}")).unwrap().connect_lazy();
    let with_credential = move |mut request: axum::http::Request<tonic::body::Body>| {
        let value = axum::http::HeaderValue::from_bytes(authorization).expect("a header value");
        request.headers_mut().insert(axum::http::header::AUTHORIZATION, value);
        request
    };
    RoomServiceClient::new(tower::ServiceBuilder::new().map_request(with_credential).service(channel))
}

#[tokio::test]
async fn a_credential_that_is_not_ascii_travels_the_grpc_hop_as_the_caller_sent_it() {
    // An operator's service token is any UTF-8 of 32 bytes or more.
    const TOKEN: &str = "clé-de-passerelle-ünïcode-0123456789";
    const BEARER: &[u8] = "Bearer clé-de-passerelle-ünïcode-0123456789".as_bytes();
    let tokens = format!("gateway={TOKEN}");
    let env = [
        ("ROOM_SERVICE__AUTH__MODE", "jwt"),
        ("ROOM_SERVICE__AUTH__JWT__ALGORITHMS", "HS256"),
        ("ROOM_SERVICE__AUTH__JWT__SECRET", HS_SECRET),
        ("ROOM_SERVICE__AUTH__SERVICE_TOKENS", tokens.as_str()),
    ];
    let nodes = Nodes::start(2, &env).await;
    let mut via_first = raw_credential_client(nodes.nodes[0].grpc_port, BEARER);
    let create = || pb::CreateRoomRequest {
        command_id: "c1".into(),
        room_id: "u-r1".into(),
        owner_id: "alice".into(),
        title: "t".into(),
        seats: None,
    };
    let mut created = via_first.create_room(create()).await;
    for _ in 0..50 {
        if !matches!(&created, Err(s) if s.code() == Code::Unavailable) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        created = via_first.create_room(create()).await;
    }
    created.expect("the gateway creates the room");

    let owner = nodes.owner(0, "u-r1").await;
    let mut via_other = raw_credential_client(nodes.nodes[1 - owner].grpc_port, BEARER);
    let before = nodes.forwarded().await;
    let member = pb::MemberRequest { command_id: "j1".into(), room_id: "u-r1".into(), user_id: "bob".into() };
    via_other.join_room(member).await.expect("the owner verifies the very credential the caller sent");
    assert!(nodes.forwarded().await > before, "the join was forwarded to the owner");
    assert_eq!(
        nodes.db.scalar("SELECT COUNT(*) FROM room_command_log WHERE caller = 'service:gateway'").await,
        Some(2),
        "the create and the join, both the gateway's"
    );
}

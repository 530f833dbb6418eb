//! gRPC in a cluster: calls are not forwarded, so a call for a room another node owns answers
//! `UNAVAILABLE` (`not_owner`, retryable) at once, and the owner serves it.

use room_service::grpc::pb;
use room_service::grpc::pb::room_service_client::RoomServiceClient;
use serde_json::json;
use tonic::Code;

use super::connect;
use crate::cluster::Nodes;

#[tokio::test]
async fn a_room_owned_elsewhere_answers_unavailable_not_owner_and_its_owner_serves_it() {
    let nodes = Nodes::start(2, &[]).await;
    let body = json!({"command_id": "c1", "room_id": "g-r1", "owner_id": "o", "title": "t"});
    // Shards may still be settling right after start (503 not_owner): retry as documented.
    let mut answer = nodes.post(0, "/v1/rooms", body.clone()).await;
    for _ in 0..50 {
        if answer.0 != 503 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        answer = nodes.post(0, "/v1/rooms", body.clone()).await;
    }
    assert_eq!(answer.0, 200, "{}", answer.1);
    let owner = nodes.owner(0, "g-r1").await;
    let other = 1 - owner;
    let addr = |i: usize| format!("127.0.0.1:{}", nodes.nodes[i].grpc_port).parse().expect("addr");
    let mut at_owner = RoomServiceClient::new(connect(addr(owner)).await);
    let refused = RoomServiceClient::new(connect(addr(other)).await)
        .get_room(pb::GetRoomRequest { room_id: "g-r1".into() })
        .await
        .expect_err("not the owner");
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert_eq!(refused.metadata().get("error-code").unwrap(), "not_owner");
    let room = at_owner.get_room(pb::GetRoomRequest { room_id: "g-r1".into() }).await.expect("owner");
    assert_eq!(room.into_inner().version, 1);
    let joined = at_owner
        .join_room(pb::MemberRequest { command_id: "c2".into(), room_id: "g-r1".into(), user_id: "u".into() })
        .await
        .expect("join at the owner");
    assert_eq!(joined.into_inner().room_version, 2);
}

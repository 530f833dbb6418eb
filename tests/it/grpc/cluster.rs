//! gRPC in a cluster: a call for a room another node owns is forwarded to the owner (as HTTP
//! requests are: the call itself, over the cluster hop), and its answer — success or error —
//! comes back as if the owner had answered over gRPC.

use room_service::grpc::pb;
use room_service::grpc::pb::room_service_client::RoomServiceClient;
use serde_json::json;
use tonic::Code;

use super::connect;
use crate::cluster::Nodes;

#[tokio::test]
async fn a_call_for_a_room_owned_elsewhere_is_answered_by_its_owner() {
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
    let mut elsewhere = RoomServiceClient::new(connect(addr(other)).await);
    let forwarded_before = nodes.forwarded().await;

    let room =
        elsewhere.get_room(pb::GetRoomRequest { room_id: "g-r1".into() }).await.expect("forwarded read");
    assert_eq!((room.get_ref().version, room.get_ref().owner_id.as_str()), (1, "o"));
    let join = pb::MemberRequest { command_id: "c2".into(), room_id: "g-r1".into(), user_id: "u".into() };
    let joined = elsewhere.join_room(join.clone()).await.expect("forwarded join").into_inner();
    assert!(joined.applied && !joined.replayed, "{joined:?}");
    assert_eq!((joined.room_version, joined.events.len()), (2, 1), "{joined:?}");
    let again = elsewhere.join_room(join).await.expect("replayed at the owner").into_inner();
    assert!(again.replayed && again.room_version == 2, "{again:?}");
    elsewhere
        .heartbeat(pb::HeartbeatRequest { room_id: "g-r1".into(), user_id: "u".into() })
        .await
        .expect("forwarded heartbeat");
    let beats = pb::HeartbeatsRequest { room_id: "g-r1".into(), user_ids: vec!["u".into(), "nobody".into()] };
    let answer = elsewhere.heartbeats(beats).await.expect("forwarded heartbeats").into_inner();
    assert_eq!((answer.alive, answer.unknown), (1, vec!["nobody".to_owned()]));
    let members = elsewhere
        .list_members(pb::ListMembersRequest { room_id: "g-r1".into(), limit: 10, after: String::new() })
        .await
        .expect("forwarded members")
        .into_inner();
    assert_eq!(members.members.iter().map(|m| m.user_id.as_str()).collect::<Vec<_>>(), ["u"]);

    // The owner's refusal comes back with the status and error code it maps to.
    let gift = pb::SendGiftRequest {
        command_id: "c3".into(),
        room_id: "g-r1".into(),
        sender_id: "stranger".into(),
        receiver_id: "o".into(),
        gift_id: "rose".into(),
        count: 1,
        unit_value: 1,
    };
    let refused = elsewhere.send_gift(gift).await.expect_err("the sender is not a member");
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    assert_eq!(refused.metadata().get("error-code").unwrap(), "not_member");

    // The owner counts the forwarded command under the API it came in by.
    assert_eq!(applied_grpc_joins(&nodes, owner).await, Some(1.0));
    // Both nodes read the same room: the join went to the owner, once.
    let mut at_owner = RoomServiceClient::new(connect(addr(owner)).await);
    let room = at_owner.get_room(pb::GetRoomRequest { room_id: "g-r1".into() }).await.expect("owner");
    assert_eq!((room.get_ref().version, room.get_ref().member_count), (2, 1));
    assert!(
        nodes.forwarded().await >= forwarded_before + 6.0,
        "every call through the other node was forwarded: {} then {}",
        forwarded_before,
        nodes.forwarded().await
    );
}

/// `room_commands_total` of the joins applied over gRPC, at node `i`.
async fn applied_grpc_joins(nodes: &Nodes, i: usize) -> Option<f64> {
    let name = r#"room_commands_total{command="join_room",result="applied",transport="grpc"}"#;
    crate::delivery::metric(&nodes.nodes[i].metrics().await, name)
}

#[tokio::test]
async fn a_room_named_like_a_dot_segment_is_served_through_either_node() {
    // The hop carries the room in its body: no URL path resolves `..` away.
    let nodes = Nodes::start(2, &[]).await;
    let addr = |i: usize| format!("127.0.0.1:{}", nodes.nodes[i].grpc_port).parse().expect("addr");
    let mut first = RoomServiceClient::new(connect(addr(0)).await);
    let create = || pb::CreateRoomRequest {
        seats: None,
        command_id: "c1".into(),
        room_id: "..".into(),
        owner_id: "o".into(),
        title: "t".into(),
    };
    let mut created = first.create_room(create()).await;
    for _ in 0..50 {
        if !matches!(&created, Err(s) if s.code() == Code::Unavailable) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        created = first.create_room(create()).await;
    }
    created.expect("created through node 0");
    for i in 0..2 {
        let mut client = RoomServiceClient::new(connect(addr(i)).await);
        let join =
            pb::MemberRequest { command_id: format!("j{i}"), room_id: "..".into(), user_id: format!("u{i}") };
        client.join_room(join).await.unwrap_or_else(|e| panic!("joined through node {i}: {e:?}"));
        let room = client.get_room(pb::GetRoomRequest { room_id: "..".into() }).await.expect("read");
        assert_eq!(room.get_ref().member_count, i as u64 + 1, "through node {i}");
    }
}

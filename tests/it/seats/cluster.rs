//! The race of [`super::race`] through a forwarding node (SPEC §14.3, §11.4): two processes of
//! one cluster, every command sent to the node that does not own the room. One take applies at
//! the owner, the other 49 answers come back 409 `seat_occupied`, and IM gets one
//! `RoomSeatsChanged`; a request made through it expires once.

use std::time::Duration;

use serde_json::{Value, json};

use super::holders;
use crate::cluster::Nodes;
use crate::moderation::{cid, error};

const RACERS: usize = 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_takes_through_a_forwarding_node_seat_exactly_one() {
    let nodes = Nodes::start(2, &[("ROOM_SERVICE__ROOMS__SEAT_REQUEST_TTL", "1s")]).await;
    let create = json!({"command_id": cid("c"), "room_id": "fw", "owner_id": "host", "title": "t",
        "seats": {"count": 2, "mode": "free"}});
    // Shards may still be settling right after start (503 not_owner): retry as documented.
    let mut answer = nodes.post(0, "/v1/rooms", create.clone()).await;
    for _ in 0..50 {
        if answer.0 != 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        answer = nodes.post(0, "/v1/rooms", create.clone()).await;
    }
    assert_eq!(answer.0, 200, "{}", answer.1);
    let owner = nodes.owner(0, "fw").await;
    let via = 1 - owner;
    let users: Vec<String> = (0..RACERS).map(|n| format!("u{n:02}")).collect();
    for user in &users {
        let (status, body) =
            nodes.post(via, "/v1/rooms/fw/join", json!({"command_id": cid("j"), "user_id": user})).await;
        assert_eq!(status, 200, "join {user} via node {via}: {body}");
    }
    let forwarded = nodes.forwarded().await;

    let answers: Vec<(u16, Value)> = futures::future::join_all(users.iter().map(|user| {
        let body = json!({"command_id": cid("take"), "actor_id": user, "index": 0});
        nodes.post(via, "/v1/rooms/fw/seats/take", body)
    }))
    .await;
    let winners: Vec<usize> = (0..RACERS).filter(|&n| answers[n].0 == 200).collect();
    assert_eq!(winners.len(), 1, "exactly one take applies: {answers:?}");
    for (status, body) in answers.iter().filter(|(s, _)| *s != 200) {
        assert_eq!((*status, error(body).0), (409, "seat_occupied"), "{body}");
    }
    let winner = users[winners[0]].clone();
    assert_eq!(holders(&answers[winners[0]].1["room"]["seats"])[0].as_deref(), Some(winner.as_str()));
    assert!(
        nodes.forwarded().await >= forwarded + RACERS as f64,
        "every take went through the other node: {forwarded} then {}",
        nodes.forwarded().await
    );

    for i in 0..2 {
        let (status, view) = nodes.get(i, "/v1/rooms/fw").await;
        assert_eq!(status, 200, "{view}");
        assert_eq!(holders(&view["seats"]), [Some(winner.clone()), None], "read via node {i}: {view}");
        assert_eq!(view["version"].as_u64(), Some(2 + RACERS as u64), "create, the joins, one take");
        // The seat queue is read at the owner too (the operation crosses the hop).
        let (status, queue) = nodes.get(i, "/v1/rooms/fw/seats").await;
        assert_eq!(status, 200, "{queue}");
        assert_eq!(holders(&queue["seats"]), [Some(winner.clone()), None], "queue via node {i}: {queue}");
        assert_eq!(queue["pending"], json!([]), "{queue}");
    }
    let sql = "SELECT COUNT(*) FROM room_outbox WHERE room_id = 'fw' AND event_type = 'RoomSeatsChanged'";
    assert_eq!(nodes.db.scalar(sql).await, Some(1), "one RoomSeatsChanged written");
    nodes.all_delivered(Duration::from_secs(20)).await;
    let sent = nodes.im.all_messages().into_iter().filter(|m| m.desc == "RoomSeatsChanged").count();
    assert_eq!(sent, 1, "IM got one RoomSeatsChanged");

    // A request made through the other node expires once, at the owner, in the cluster.
    let to_apply = json!({"command_id": cid("i"), "actor_id": "host", "seat_mode": "apply"});
    let (status, body) = nodes.post(via, "/v1/rooms/fw/info", to_apply).await;
    assert_eq!(status, 200, "{body}");
    let asker = &users[(winners[0] + 1) % RACERS];
    let request = json!({"command_id": cid("r"), "actor_id": asker, "index": 1});
    let (status, body) = nodes.post(via, "/v1/rooms/fw/seats/request", request).await;
    assert_eq!(status, 200, "{body}");
    let sql =
        "SELECT COUNT(*) FROM room_outbox WHERE room_id = 'fw' AND event_type = 'RoomSeatRequestExpired'";
    crate::delivery::eventually("the request expired", Duration::from_secs(10), || async {
        nodes.db.scalar(sql).await == Some(1)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(nodes.db.scalar(sql).await, Some(1), "expired once");
    let again = json!({"command_id": cid("r"), "actor_id": asker});
    let (status, body) = nodes.post(via, "/v1/rooms/fw/seats/request", again).await;
    assert_eq!(status, 200, "asks again once expired: {body}");
}

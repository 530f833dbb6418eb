//! Idle close across three processes (SPEC §14.2, `rooms.idle_close_after`): every node scans
//! for idle rooms, only the owner closes one, and a room closes exactly once — with reason
//! `idle` — however many nodes saw it idle; a room with a member, or commands, stays open.

use std::time::{Duration, Instant};

use serde_json::json;

use super::Nodes;

async fn create(nodes: &Nodes, via: usize, room: &str) {
    let body =
        json!({"command_id": format!("create-{room}"), "room_id": room, "owner_id": "o", "title": "t"});
    let (status, body) = nodes.post(via, "/v1/rooms", body).await;
    assert_eq!(status, 200, "create {room} via node {via}: {body}");
}

/// How many `RoomClosed` rows the room's outbox holds, and their reasons.
async fn closes(nodes: &Nodes, room: &str) -> Vec<String> {
    let pool = sqlx::MySqlPool::connect(nodes.db.url()).await.expect("pool");
    let rows: Vec<(String,)> =
        sqlx::query_as("SELECT envelope FROM room_outbox WHERE room_id = ? AND event_type = 'RoomClosed'")
            .bind(room)
            .fetch_all(&pool)
            .await
            .expect("outbox");
    pool.close().await;
    rows.iter()
        .map(|(envelope,)| {
            let envelope: serde_json::Value = serde_json::from_str(envelope).expect("an envelope");
            envelope["payload"]["reason"].as_str().unwrap_or_default().to_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_room_closes_once_across_three_nodes_and_a_busy_one_stays_open() {
    let env = [("ROOM_SERVICE__ROOMS__IDLE_CLOSE_AFTER", "2s")];
    let nodes = Nodes::start(3, &env).await;
    for (i, room) in ["idle-a", "idle-b", "idle-c", "kept"].iter().enumerate() {
        create(&nodes, i % 3, room).await;
    }
    let (status, body) =
        nodes.post(1, "/v1/rooms/kept/join", json!({"command_id": "j-kept", "user_id": "viewer"})).await;
    assert_eq!(status, 200, "{body}");
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let mut all_closed = true;
        for room in ["idle-a", "idle-b", "idle-c"] {
            let (_, body) = nodes.get(0, &format!("/v1/rooms/{room}")).await;
            all_closed &= body["status"] == "closed";
        }
        if all_closed {
            break;
        }
        assert!(Instant::now() < until, "the idle rooms did not close in time");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Every node scanned several times more: still one close each.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for room in ["idle-a", "idle-b", "idle-c"] {
        assert_eq!(closes(&nodes, room).await, vec!["idle".to_owned()], "{room} closed exactly once");
    }
    let (_, kept) = nodes.get(2, "/v1/rooms/kept").await;
    assert_eq!(kept["status"], "open", "a room with a member is not idle: {kept}");
    assert!(closes(&nodes, "kept").await.is_empty());
    nodes.all_delivered(Duration::from_secs(20)).await;
}

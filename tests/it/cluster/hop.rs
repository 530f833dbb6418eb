//! The cluster hop is the nodes' alone (docs/DEPLOY.md "The cluster hop"), on three processes:
//! a call of `POST /internal/v1/operations` without the cluster's seal, with another secret's
//! or with a stale one is 401 and reads nothing; and a sealed hop is still checked by the owner
//! as an edge's request is (page bounds, who may ask for a command, unknown fields): each
//! hostile shape refused with a JSON error, nothing written, every node alive and forwarding.

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;
use room_service::api::forward::Seal;
use room_service::config::HopSecrets;
use room_service::secret::Secret;
use serde_json::{Value, json};

use super::{Nodes, SECRET};

fn seal(secret: &str) -> Seal {
    Seal::new(&HopSecrets { signing: Secret::new(secret), previous: None })
}

/// `POST`s `body` to node `i`'s hop route, sealed by `seal` at `at` (unsealed: `None`).
async fn hop(nodes: &Nodes, i: usize, body: &Value, sealed: Option<(&Seal, SystemTime)>) -> (u16, Value) {
    let body = serde_json::to_vec(body).expect("json");
    let mut headers = HeaderMap::new();
    if let Some((seal, at)) = sealed {
        seal.sign(&body, at, &mut headers);
    }
    let url = format!("http://127.0.0.1:{}/internal/v1/operations", nodes.nodes[i].port);
    let sent = nodes.http.post(url).headers(headers).header("content-type", "application/json").body(body);
    let response = sent.send().await.expect("the node answers");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn operation(room: &str, operation: Value) -> Value {
    json!({"room_id": room, "operation": operation, "transport": "http"})
}

fn command(id: &str, command: Value) -> Value {
    json!({"op": "command", "command_id": id, "command": command})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_sealed_hop_is_served_and_the_owner_still_checks_every_operation() {
    let nodes = Nodes::start(3, &[]).await;
    let body = json!({"command_id": "create-h", "room_id": "h", "owner_id": "alice", "title": "t"});
    assert_eq!(nodes.post(0, "/v1/rooms", body).await.0, 200);
    let owner = nodes.owner(0, "h").await;
    let logged = nodes.db.count("room_command_log").await;

    // Not a node's: no seal, another secret's, a minute old, a body changed after sealing.
    let snapshot = operation("h", json!({"op": "snapshot"}));
    let now = SystemTime::now();
    let stale = now - Duration::from_secs(61);
    let other = seal("another-secret-of-at-least-thirty-two-bytes");
    for (why, sealed) in
        [("unsealed", None), ("another secret", Some((&other, now))), ("stale", Some((&seal(SECRET), stale)))]
    {
        let (status, answer) = hop(&nodes, owner, &snapshot, sealed).await;
        assert_eq!(
            (status, answer["error"]["code"].as_str()),
            (401, Some("unauthenticated")),
            "{why}: {answer}"
        );
    }
    let changed = {
        let mut headers = HeaderMap::new();
        seal(SECRET).sign(br#"{"room_id":"h"}"#, now, &mut headers);
        let url = format!("http://127.0.0.1:{}/internal/v1/operations", nodes.nodes[owner].port);
        let sent = nodes.http.post(url).headers(headers).body(serde_json::to_vec(&snapshot).unwrap());
        sent.send().await.expect("answers").status().as_u16()
    };
    assert_eq!(changed, 401, "a body changed after sealing");

    // A node's seal, and each shape an edge refuses: refused by the owner the same way.
    let ours = seal(SECRET);
    let hostile = [
        (
            "a page sized 10^13",
            operation(
                "h",
                json!({"op": "moderation", "kind": null, "after": null, "limit": 10_000_000_000_000u64}),
            ),
            400,
        ),
        (
            "a members page of 2^64-1",
            operation("h", json!({"op": "members", "after": null, "limit": u64::MAX})),
            400,
        ),
        ("a members page of 0", operation("h", json!({"op": "members", "after": null, "limit": 0})), 400),
        (
            "a stranger's idle close",
            operation("h", command("x1", json!({"command": "close_room", "by": "mallory", "idle": true}))),
            403,
        ),
        (
            "an anonymous idle close",
            operation("h", command("x2", json!({"command": "close_room", "idle": true}))),
            403,
        ),
        (
            "a leave the caller calls closed",
            operation(
                "h",
                command("x3", json!({"command": "leave_room", "user_id": "alice", "reason": "closed"})),
            ),
            403,
        ),
        (
            "a stale eviction",
            operation(
                "h",
                command("x4", json!({"command": "leave_room", "user_id": "alice", "reason": "stale"})),
            ),
            403,
        ),
        (
            "a seat request's expiry",
            operation(
                "h",
                command(
                    "x5",
                    json!({"command": "expire_seat_request", "user_id": "alice", "kind": "request", "expires_at_ms": 1}),
                ),
            ),
            403,
        ),
        (
            "an unknown field of a command",
            operation("h", command("x6", json!({"command": "join_room", "user_id": "bob", "admin": true}))),
            400,
        ),
        (
            "an unknown top-level field",
            json!({"room_id": "h", "operation": {"op": "snapshot"}, "transport": "http", "as": "root"}),
            400,
        ),
    ];
    for (why, body, expected) in &hostile {
        for i in 0..3 {
            let (status, answer) = hop(&nodes, i, body, Some((&ours, SystemTime::now()))).await;
            // A node that does not own the room says so (a hop is never forwarded again).
            let refused = if i == owner { *expected } else { status };
            assert_eq!(status, refused, "{why} at node {i}: {answer}");
            assert!(answer["error"]["code"].is_string(), "{why}: a JSON error: {answer}");
            if i == owner {
                assert_ne!(status, 200, "{why}");
            }
        }
    }
    assert_eq!(nodes.db.count("room_command_log").await, logged, "nothing was written");

    // Every node alive, the room open, and the cluster still forwarding (a sealed hop).
    let before = nodes.forwarded().await;
    for i in 0..3 {
        let (status, answer) = nodes
            .post(i, "/v1/rooms/h/join", json!({"command_id": format!("j{i}"), "user_id": format!("u{i}")}))
            .await;
        assert_eq!(status, 200, "join via node {i}: {answer}");
    }
    assert!(nodes.forwarded().await >= before + 2.0, "two of three joins were forwarded");
    let (status, room) = nodes.get(owner, "/v1/rooms/h").await;
    assert_eq!(
        (status, room["status"].as_str(), room["member_count"].as_u64()),
        (200, Some("open"), Some(3)),
        "{room}"
    );
}

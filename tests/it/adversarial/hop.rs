//! The cluster hop's route (`POST /internal/v1/operations`) is mounted only with a cluster
//! (`tests/it/cluster/hop.rs` tries it sealed and unsealed there): on a node without one a
//! hostile client finds no such route, whatever it sends — 404 with a JSON error, nothing
//! written, and a real client of the same node served as before; on both backends.

use serde_json::json;

use crate::support::TestDb;
use crate::support::app::{TestApp, settings};

#[tokio::test]
async fn without_a_cluster_the_hop_is_no_route_and_writes_nothing() {
    for db in crate::support::backends().await {
        a_client_calling_the_hop_finds_no_route(db).await;
    }
}

async fn a_client_calling_the_hop_finds_no_route(db: TestDb) {
    let app = TestApp::start(settings(db.url(), None, &[])).await;
    let logged = db.count("room_command_log").await;
    let hostile = [
        json!({"nope": 1}),
        json!({"room_id": "ghost", "operation": {"op": "explode"}, "transport": "http"}),
        json!({"room_id": "ghost", "operation": {"op": "command", "command_id": "c1",
            "command": {"command": "join_room", "user_id": "bob"}}, "transport": "http"}),
        json!({"room_id": "x".repeat(100_000), "operation": {"op": "snapshot"}, "transport": "grpc"}),
        json!({"room_id": "r1", "operation": {"op": "moderation", "kind": null, "after": null,
            "limit": 10_000_000_000_000u64}, "transport": "http"}),
        json!({"room_id": "r1", "operation": {"op": "command", "command_id": "c9",
            "command": {"command": "close_room", "by": "mallory", "idle": true}}, "transport": "http"}),
    ];
    for body in hostile {
        let (status, answer) = app.post("/internal/v1/operations", body).await;
        assert_eq!(status, 404, "{answer}");
        assert!(answer["code"].is_string() || answer["error"]["code"].is_string(), "a JSON error: {answer}");
    }
    assert_eq!(db.count("room_command_log").await, logged, "nothing was written");
    // A client of the same node is served as before.
    let (status, answer) = app
        .post("/v1/rooms", json!({"command_id": "c1", "room_id": "r1", "owner_id": "alice", "title": "Live"}))
        .await;
    assert_eq!(status, 200, "{answer}");
    app.stop().await;
}

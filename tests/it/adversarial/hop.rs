//! The cluster hop's route (`POST /internal/v1/operations`) sits on the public listener: a
//! hostile client can reach it directly. Whatever it sends there is refused with a JSON error,
//! writes nothing, and costs a real client of the same node nothing lasting.

use serde_json::json;

use crate::support::TestDb;
use crate::support::app::{TestApp, settings};

#[tokio::test]
async fn a_client_calling_the_hop_directly_is_refused_and_writes_nothing() {
    let db = TestDb::mysql().await;
    let app = TestApp::start(settings(db.url(), None, &[])).await;
    let logged = db.count("room_command_log").await;
    let hostile = [
        json!({"nope": 1}),
        json!({"room_id": "ghost", "operation": {"op": "explode"}, "transport": "http"}),
        json!({"room_id": "ghost", "operation": {"op": "command", "command_id": "c1",
            "command": {"command": "join_room", "user_id": "bob"}}, "transport": "http"}),
        json!({"room_id": "x".repeat(100_000), "operation": {"op": "snapshot"}, "transport": "grpc"}),
    ];
    for body in hostile {
        let (status, answer) = app.post("/internal/v1/operations", body).await;
        assert!((400..500).contains(&status), "{status} {answer}");
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

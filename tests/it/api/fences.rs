//! Two services on one MariaDB database: the version fence keeps their commits consistent.

use serde_json::json;

use super::{create_room, join};
use crate::support::TestDb;
use crate::support::app::{TestApp, settings};

#[tokio::test]
async fn two_nodes_on_one_database_never_both_commit_a_version() {
    let db = TestDb::mysql().await;
    let a = TestApp::start(settings(db.url(), None, &[])).await;
    let b = TestApp::start(settings(db.url(), None, &[])).await;
    create_room(&a, "r1").await;
    // Both nodes load the room at version 1.
    assert_eq!(b.get("/v1/rooms/r1").await.1["version"], 1);
    assert_eq!(join(&a, "r1", "u1", "j1").await.0, 200);
    // B's cell is stale (version 1): its write is fenced, it reloads and retries once.
    let (status, body) = join(&b, "r1", "u2", "j2").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["room"]["version"], 3);
    assert_eq!(body["room"]["member_count"], 2, "B's commit includes A's");
    let listed = b.get("/v1/rooms/r1/members").await.1;
    let members: Vec<&str> =
        listed["members"].as_array().unwrap().iter().map(|m| m["user_id"].as_str().unwrap()).collect();
    assert_eq!(members, ["u1", "u2"], "B's commit includes A's");
    let versions =
        db.scalar("SELECT COUNT(DISTINCT room_version) FROM room_command_log WHERE room_id = 'r1'").await;
    assert_eq!(versions, Some(3));
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn a_no_op_decided_on_a_stale_cell_is_refenced_and_reapplied() {
    let db = TestDb::mysql().await;
    let a = TestApp::start(settings(db.url(), None, &[])).await;
    let b = TestApp::start(settings(db.url(), None, &[])).await;
    create_room(&a, "r1").await;
    assert_eq!(join(&a, "r1", "u1", "j1").await.0, 200);
    assert_eq!(b.get("/v1/rooms/r1").await.1["version"], 2, "B loads u1 as a member");
    let leave = json!({"command_id": "l1", "user_id": "u1"});
    assert_eq!(a.post("/v1/rooms/r1/leave", leave).await.0, 200);
    // To B's stale cell u1 is still a member, so the join looks like a no-op; the commit's
    // version check catches it, B reloads, and the join is applied.
    let (status, body) = join(&b, "r1", "u1", "j2").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["applied"], true, "{body}");
    assert_eq!(body["room"]["version"], 4);
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn a_refusal_decided_on_a_stale_cell_is_checked_against_the_database() {
    let db = TestDb::mysql().await;
    let a = TestApp::start(settings(db.url(), None, &[])).await;
    let b = TestApp::start(settings(db.url(), None, &[])).await;
    create_room(&a, "r1").await;
    assert_eq!(b.get("/v1/rooms/r1").await.1["member_count"], 0, "B loads the empty room");
    assert_eq!(join(&a, "r1", "u1", "j1").await.0, 200);
    // To B's stale cell u1 is no member, so a gift would be refused: B re-checks, reloads,
    // and the gift goes through.
    let gift = json!({"command_id": "g1", "sender_id": "u1", "receiver_id": "alice", "gift_id": "rose", "count": 1, "unit_value": 5});
    let (status, body) = b.post("/v1/rooms/r1/gifts", gift).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["room"]["heat"], 5);
    a.stop().await;
    b.stop().await;
}

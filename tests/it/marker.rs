//! Delivery marks batched across concurrent commands (`room::marker::DeliveryMarker`), end to
//! end over HTTP on MariaDB: fewer `mark_delivered` statements than commands, every row
//! delivered, nothing left behind at shutdown.

use futures::future::join_all;
use serde_json::json;

use crate::support::TestDb;
use crate::support::app::{TestApp, settings};

const ROOMS: usize = 32;

#[tokio::test]
async fn concurrent_commands_share_mark_statements_and_every_row_ends_delivered() {
    let db = TestDb::mysql().await;
    let app = TestApp::start(settings(db.url(), None, &[("database.max_connections", "16")])).await;
    let app = &app;
    join_all((0..ROOMS).map(|r| async move {
        let body = json!({"command_id": format!("create-{r}"), "room_id": format!("r{r}"), "owner_id": "o", "title": "t"});
        assert_eq!(app.post("/v1/rooms", body).await.0, 200);
    }))
    .await;
    // Four waves of one join per room, all rooms at once.
    for wave in 0..4 {
        join_all((0..ROOMS).map(|r| async move {
            let body = json!({"command_id": format!("j{wave}-{r}"), "user_id": format!("u{wave}")});
            let (status, answer) = app.post(&format!("/v1/rooms/r{r}/join"), body).await;
            assert_eq!(status, 200, "{answer}");
            assert_eq!(answer["events"][0]["delivery"], "delivered", "{answer}");
        }))
        .await;
    }
    app.settle().await;

    let commands = (ROOMS * 5) as u64;
    let stats = app.app.rooms.delivery_marker_stats();
    assert_eq!(stats.submitted, commands, "one event per command: {stats:?}");
    assert_eq!((stats.dropped, stats.failed_statements), (0, 0), "{stats:?}");
    assert!(stats.statements < commands, "{} mark statements for {commands} commands", stats.statements);
    let rows = db.outbox().await;
    assert_eq!(rows.len() as u64, commands);
    assert!(
        rows.iter().all(|r| r.status == "delivered"),
        "{:?}",
        rows.iter().find(|r| r.status != "delivered")
    );
}

#[tokio::test]
async fn stopping_the_service_writes_the_marks_still_queued() {
    let db = TestDb::mysql().await;
    let app = TestApp::start(settings(db.url(), None, &[])).await;
    let body = json!({"command_id": "c", "room_id": "r1", "owner_id": "o", "title": "t"});
    assert_eq!(app.post("/v1/rooms", body).await.0, 200);
    let (status, _) = app.post("/v1/rooms/r1/join", json!({"command_id": "j", "user_id": "u"})).await;
    assert_eq!(status, 200);
    app.stop().await; // no settle(): the stop sequence flushes the marker before closing the pool
    assert!(db.outbox().await.iter().all(|r| r.status == "delivered"));
}

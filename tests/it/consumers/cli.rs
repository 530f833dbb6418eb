//! `room-service consumers list|reset` against a real database.

use std::process::Command;

use room_service::store::ResetTo;
use serde_json::Value;

use crate::support::backends;

fn run(db_url: &str, args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_room-service"))
        .args(["--config", "config/config.yaml", "consumers"])
        .args(args)
        .env("ROOM_SERVICE__DATABASE__URL", db_url)
        .env("ROOM_SERVICE__CONSUMERS__AUDIT__ENABLED", "true")
        .output()
        .expect("run room-service");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn consumers_list_shows_enabled_and_stored_consumers_reset_moves_one_and_retire_forgets_one_audited() {
    for db in backends().await {
        let outbox = crate::outbox::harness::Db::over(db);
        outbox.insert_events("cli-room", &[room_service::domain::EventType::RoomUserJoined; 8]).await;
        let db = outbox.test_db();
        db.repo.reset_consumer("webhook", ResetTo::Id(7)).await.expect("a webhook row");
        let (ok, out, err) = run(db.url(), &["--json", "list"]);
        assert!(ok, "{db}: {err}");
        let list: Value = serde_json::from_str(&out).expect("JSON");
        let names: Vec<&str> = list.as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["webhook", "audit"], "{db}: the stored one and the enabled one");
        assert_eq!(list[0]["position"], 7);
        assert_eq!(list[0]["enabled"], false);
        assert_eq!(list[1]["enabled"], true);
        assert_eq!(list[1]["position"], 0, "{db}: an enabled consumer that never ran starts at 0");

        let (ok, out, err) = run(db.url(), &["reset", "webhook", "--to", "3"]);
        assert!(ok, "{db}: {err}");
        assert!(out.contains("webhook: position 7 -> 3"), "{db}: {out}");
        assert!(err.contains("consumer_reset"), "{db}: the reset is audited on stderr: {err}");
        let rows = db.repo.list_consumers().await.unwrap();
        assert_eq!(rows.iter().find(|r| r.name == "webhook").map(|r| r.position), Some(3));

        let (ok, _, err) = run(db.url(), &["reset", "webhook", "--to-time", "2999-01-01T00:00:00Z"]);
        assert!(!ok, "{db}: a time in the future is refused");
        assert!(err.contains("future"), "{db}: {err}");
        let (ok, _, err) = run(db.url(), &["reset", "im", "--to", "1"]);
        assert!(!ok && err.contains("unknown consumer"), "{db}: {err}");
        let (ok, _, err) = run(db.url(), &["reset", "webhook", "--to", "9"]);
        assert!(!ok && err.contains("past the newest"), "{db}: the newest id is 8: {err}");
        assert_eq!(
            db.repo.list_consumers().await.unwrap().iter().find(|r| r.name == "webhook").map(|r| r.position),
            Some(3),
            "{db}: refused resets change nothing"
        );

        let (ok, _, err) = run(db.url(), &["retire", "audit"]);
        assert!(!ok && err.contains("enabled"), "{db}: an enabled consumer is not retired: {err}");
        let (ok, out, err) = run(db.url(), &["retire", "webhook"]);
        assert!(ok && out.contains("retired"), "{db}: {out} {err}");
        assert!(err.contains("consumer_retire"), "{db}: audited: {err}");
        assert!(db.repo.list_consumers().await.unwrap().iter().all(|r| r.name != "webhook"), "{db}");
    }
}

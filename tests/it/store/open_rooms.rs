//! The open rooms' indexes of `room_snapshot` (migration 0013): the idle scan reads only open
//! rooms, on `idx_room_snapshot_open`, with the answers it always gave; an owner's open rooms
//! are one count on `idx_room_snapshot_owner`; rows written before the migration get their
//! owner from their state.

use std::time::Duration;

use sqlx::{AssertSqlSafe, Row};

use super::commit;
use crate::support::{TestDb, backends};

/// Commits `room_id` at version 1, owned by `owner`, `open` or `closed`.
async fn room(db: &TestDb, room_id: &str, owner: &str, status: &'static str) {
    let mut c = commit(room_id, &format!("create-{room_id}"), 0, 0);
    let snapshot = c.snapshot.as_mut().expect("a snapshot");
    (snapshot.owner_id, snapshot.status) = (owner.to_owned(), status);
    db.repo.commit_room(&c).await.unwrap_or_else(|e| panic!("{db}: {e}"));
}

/// Every page of the idle scan of rooms silent for `idle_after`, in pages of `page`.
async fn idle(db: &TestDb, idle_after: Duration, page: u32) -> Vec<String> {
    let (mut after, mut all) = (String::new(), Vec::new());
    loop {
        let ids = db.repo.idle_rooms(idle_after, &after, page).await.unwrap_or_else(|e| panic!("{db}: {e}"));
        let full = ids.len() == page as usize;
        all.extend(ids.iter().cloned());
        match ids.last() {
            Some(last) if full => after.clone_from(last),
            _ => return all,
        }
    }
}

/// The idle scan's query as it was before the index (a walk of the primary key), for `idle_after_ms`.
fn unindexed_idle_query(db: &TestDb, idle_after_ms: i64) -> String {
    let now = match db.name() {
        "sqlite" => "CAST(unixepoch('subsec') * 1000 AS INTEGER)",
        _ => "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)",
    };
    format!(
        "SELECT s.room_id FROM room_snapshot s WHERE s.room_id > '' AND s.status = 'open' AND s.updated_at_ms <= \
         {now} - {idle_after_ms} AND NOT EXISTS (SELECT 1 FROM room_member m WHERE m.room_id = s.room_id) \
         ORDER BY s.room_id"
    )
}

async fn ids(db: &TestDb, sql: &str) -> Vec<String> {
    let rows: Vec<String> = match db.name() {
        "sqlite" => sqlx::query_scalar(AssertSqlSafe(sql.to_owned())).fetch_all(db.sqlite_pool()).await,
        _ => sqlx::query_scalar(AssertSqlSafe(sql.to_owned())).fetch_all(db.mysql_pool()).await,
    }
    .unwrap_or_else(|e| panic!("{db}: {sql}: {e}"));
    rows
}

#[tokio::test]
async fn the_idle_scan_on_the_open_index_answers_as_the_whole_table_walk_did() {
    for db in backends().await {
        // Open and empty (idle), open with a member, open and written just now, closed.
        for n in 0..7 {
            room(&db, &format!("idle-{n}"), "alice", "open").await;
        }
        room(&db, "busy", "alice", "open").await;
        db.execute("INSERT INTO room_member (room_id, user_id, joined_at_ms) VALUES ('busy', 'bob', 1)")
            .await;
        for n in 0..20 {
            room(&db, &format!("closed-{n:02}"), "alice", "closed").await;
        }
        db.execute("UPDATE room_snapshot SET updated_at_ms = 1").await;
        room(&db, "fresh", "alice", "open").await;

        let expected: Vec<String> = (0..7).map(|n| format!("idle-{n}")).collect();
        for page in [1, 2, 3, 1000] {
            assert_eq!(idle(&db, Duration::from_secs(60), page).await, expected, "{db}: pages of {page}");
        }
        assert_eq!(ids(&db, &unindexed_idle_query(&db, 60_000)).await, expected, "{db}: as the table walk");
        // Nothing is silent for longer than the database clock has run.
        assert_eq!(
            idle(&db, Duration::from_secs(100 * 365 * 86_400), 10).await,
            Vec::<String>::new(),
            "{db}"
        );
    }
}

#[tokio::test]
async fn an_owners_open_rooms_are_counted_without_the_room_being_created() {
    for db in backends().await {
        for n in 0..3 {
            room(&db, &format!("a-open-{n}"), "alice", "open").await;
        }
        room(&db, "a-closed", "alice", "closed").await;
        room(&db, "b-open", "bob", "open").await;
        let count = |owner: &'static str, except: &'static str| {
            let repo = db.repo.clone();
            async move { repo.open_rooms_owned(owner, except).await.unwrap() }
        };
        assert_eq!(count("alice", "new").await, 3, "{db}: closed rooms and bob's do not count");
        assert_eq!(count("alice", "a-open-1").await, 2, "{db}: a retried creation does not count itself");
        assert_eq!(count("bob", "new").await, 1, "{db}");
        assert_eq!(count("carol", "new").await, 0, "{db}");
        // A close moves the room out of the count.
        let mut close = commit("a-open-0", "close-a-open-0", 1, 0);
        let snapshot = close.snapshot.as_mut().unwrap();
        (snapshot.owner_id, snapshot.status) = ("alice".into(), "closed");
        db.repo.commit_room(&close).await.unwrap_or_else(|e| panic!("{db}: {e}"));
        assert_eq!(count("alice", "new").await, 2, "{db}");
    }
}

/// The backfill statement of migration 0013 for `db`'s backend.
fn backfill(db: &TestDb) -> String {
    let sql = match db.name() {
        "sqlite" => include_str!("../../../migrations/sqlite/0013_room_snapshot_open_index.sql"),
        _ => include_str!("../../../migrations/mysql/0013_room_snapshot_open_index.sql"),
    };
    let statement =
        sql.split(';').map(str::trim).find(|s| s.contains("UPDATE room_snapshot")).expect("the backfill");
    statement.lines().filter(|l| !l.trim_start().starts_with("--")).collect::<Vec<_>>().join("\n")
}

#[tokio::test]
async fn rooms_written_before_the_migration_get_their_owner_from_their_state() {
    for db in backends().await {
        let state = r#"{"room_id":"old","owner_id":"alice","title":"t","status":"open","version":3}"#;
        db.execute(format!(
            "INSERT INTO room_snapshot (room_id, version, status, state, updated_at_ms) VALUES ('old', 3, 'open', '{state}', 1)"
        ))
        .await;
        db.execute(
            "INSERT INTO room_snapshot (room_id, version, status, state, updated_at_ms) VALUES ('odd', 1, 'open', '{}', 1)",
        )
        .await;
        assert_eq!(db.repo.open_rooms_owned("alice", "new").await.unwrap(), 0, "{db}: not filled yet");
        db.execute(backfill(&db)).await;
        assert_eq!(db.repo.open_rooms_owned("alice", "new").await.unwrap(), 1, "{db}: filled from the state");
        assert_eq!(
            db.repo.open_rooms_owned("", "new").await.unwrap(),
            1,
            "{db}: a state without an owner keeps ''"
        );
    }
}

#[tokio::test]
async fn sqlite_plans_the_scan_and_the_count_on_their_indexes() {
    let db = TestDb::sqlite().await;
    let plan = |sql: String| {
        let pool = db.sqlite_pool().clone();
        async move {
            let rows = sqlx::query(AssertSqlSafe(format!("EXPLAIN QUERY PLAN {sql}")))
                .fetch_all(&pool)
                .await
                .unwrap();
            rows.iter().map(|r| r.get::<String, _>("detail")).collect::<Vec<_>>().join(" | ")
        }
    };
    // `store::command::read_sql::idle_rooms` and `open_rooms_owned`, with literals.
    let scan = plan(
        "SELECT s.room_id FROM room_snapshot s INDEXED BY idx_room_snapshot_open WHERE s.status = 'open' AND \
         s.room_id > 'r' AND s.updated_at_ms <= 5 AND NOT EXISTS (SELECT 1 FROM room_member m WHERE m.room_id = \
         s.room_id) ORDER BY s.room_id LIMIT 1000"
            .into(),
    )
    .await;
    assert!(scan.contains("USING INDEX idx_room_snapshot_open (status=? AND room_id>?)"), "{scan}");
    assert!(!scan.contains("TEMP B-TREE"), "{scan}");
    let count = plan(
        "SELECT COUNT(*) FROM room_snapshot WHERE owner_id = 'alice' AND status = 'open' AND room_id <> 'x'"
            .into(),
    )
    .await;
    assert!(count.contains("idx_room_snapshot_owner (owner_id=? AND status=?)"), "{count}");
}

/// The rows MariaDB read of table `s` in an `ANALYZE FORMAT=JSON`.
fn rows_read_of_s(analyzed: &serde_json::Value) -> Option<f64> {
    match analyzed {
        serde_json::Value::Object(map) if map.get("table_name").and_then(|t| t.as_str()) == Some("s") => {
            map.get("r_rows").and_then(serde_json::Value::as_f64)
        }
        serde_json::Value::Object(map) => map.values().find_map(rows_read_of_s),
        serde_json::Value::Array(items) => items.iter().find_map(rows_read_of_s),
        _ => None,
    }
}

#[tokio::test]
async fn mariadbs_scan_reads_only_the_open_rooms() {
    let db = TestDb::mysql().await;
    for n in 0..5 {
        room(&db, &format!("open-{n}"), "alice", "open").await;
    }
    for n in 0..200 {
        room(&db, &format!("closed-{n:03}"), "alice", "closed").await;
    }
    db.execute("ANALYZE TABLE room_snapshot").await;
    let sql = "SELECT s.room_id FROM room_snapshot s FORCE INDEX (idx_room_snapshot_open) WHERE s.status = 'open' \
               AND s.room_id > '' AND s.updated_at_ms <= 9999999999999 AND NOT EXISTS (SELECT 1 FROM room_member m \
               WHERE m.room_id = s.room_id) ORDER BY s.room_id LIMIT 1000";
    let analyzed: String = sqlx::query_scalar(AssertSqlSafe(format!("ANALYZE FORMAT=JSON {sql}")))
        .fetch_one(db.mysql_pool())
        .await
        .unwrap();
    let json: serde_json::Value = serde_json::from_str(&analyzed).unwrap();
    assert_eq!(rows_read_of_s(&json), Some(5.0), "{analyzed}");
}

//! MariaDB-only checks of the claim: disjoint concurrent claims (`FOR UPDATE SKIP LOCKED`),
//! query plans that touch a few index entries per room (never delivered rows, never a sort),
//! and no gap locks blocking the command path (READ COMMITTED).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use room_service::store::{Claim, Mark, PublishResult};
use sqlx::mysql::MySqlRow;
use sqlx::{AssertSqlSafe, MySqlConnection, Row};
use tokio::sync::Barrier;
use tokio::time::timeout;

use super::commit;
use crate::support::TestDb;

/// The claim's locking read (`store::queue::claim::sql::lock_claimable`) of `ids`, with a
/// literal for the database clock and no claims of this worker.
fn lock_select(now_ms: i64, ids: &[i64]) -> String {
    let ids: Vec<String> = ids.iter().map(i64::to_string).collect();
    format!(
        "SELECT o.id FROM room_outbox o WHERE o.id IN ({}) AND (o.lock_until_ms <= {now_ms} \
         AND o.status IN ('pending', 'retryable', 'delivering') AND NOT (1 = 0)) FOR UPDATE SKIP LOCKED",
        ids.join(", ")
    )
}

/// The claim's room listing for one status (`store::queue::claim::sql::claim_rooms`, one of
/// its three branches): the rooms after `after` with their oldest row in that status.
fn listing(status: &str, after: &str, limit: usize) -> String {
    format!(
        "SELECT status, room_id, MIN(id) AS head FROM room_outbox FORCE INDEX (idx_room_outbox_status_room) \
         WHERE status = '{status}' COLLATE utf8mb4_bin AND room_id > '{after}' COLLATE utf8mb4_bin \
         GROUP BY status, room_id ORDER BY status, room_id LIMIT {limit}"
    )
}

/// The claim's read of one room's rows from its head (`store::queue::claim::sql::room_rows`,
/// one branch).
fn room_read(room: &str, head: i64, limit: usize) -> String {
    format!(
        "SELECT o.id, o.lock_until_ms FROM room_outbox o FORCE INDEX (idx_room_outbox_room) \
         WHERE o.room_id = '{room}' AND o.id >= {head} ORDER BY o.id LIMIT {limit}"
    )
}

async fn select_ids(conn: &mut MySqlConnection, sql: &str) -> Vec<i64> {
    sqlx::query_scalar(AssertSqlSafe(sql.to_owned())).fetch_all(conn).await.expect("claim select")
}

#[tokio::test]
async fn concurrent_claimers_get_disjoint_rows() {
    let db = TestDb::mysql().await;
    db.repo.commit_room(&commit("r1", "c1", 0, 20)).await.unwrap();
    let ids: Vec<i64> = db.outbox().await.iter().map(|r| r.id).collect();
    let now = db.now_ms().await + 1;

    // Two open transactions at once: the second skips what the first holds, without waiting.
    let mut a = db.mysql_pool().begin().await.unwrap();
    let first = select_ids(&mut a, &lock_select(now, &ids[..12])).await;
    let mut b = db.mysql_pool().begin().await.unwrap();
    let second = timeout(Duration::from_secs(3), select_ids(&mut b, &lock_select(now, &ids[8..])))
        .await
        .expect("SKIP LOCKED waited");
    assert_eq!((first, second), (ids[..12].to_vec(), ids[12..].to_vec()));
    a.rollback().await.unwrap();
    b.rollback().await.unwrap();

    // The repository's own claim, from two tasks racing until the outbox is drained: each marks
    // what it claimed, so the rooms' next rows become their heads.
    db.repo.commit_room(&commit("r2", "c2", 0, 40)).await.unwrap();
    let start = Arc::new(Barrier::new(2));
    let claimers = ["w1", "w2"].map(|worker| {
        let (repo, start) = (db.repo.clone(), start.clone());
        tokio::spawn(async move {
            start.wait().await;
            let mut mine = Vec::new();
            for round in 0..200 {
                let claim = Claim::new(format!("{worker}-{round}"), 3, Duration::from_secs(60));
                let rows = repo.claim_outbox(&claim).await.expect("claim").rows;
                assert!(rows.iter().all(|r| r.worker_id.as_deref() == Some(claim.worker_id.as_str())));
                if rows.is_empty() {
                    let left = repo.outbox_stats().await.expect("stats");
                    if left.pending + left.delivering == 0 {
                        return mine;
                    }
                    // The other claimer holds the rooms' heads: wait for its marks.
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                let done: Vec<PublishResult> =
                    rows.iter().map(|r| PublishResult { id: r.id, mark: Mark::Delivered }).collect();
                repo.finish_claimed(&claim.worker_id, &done).await.expect("mark");
                mine.extend(rows.iter().map(|r| r.id));
            }
            panic!("{worker} never saw the outbox drained");
        })
    });
    let [w1, w2] = claimers;
    let (w1, w2) = (w1.await.unwrap(), w2.await.unwrap());
    let all: HashSet<i64> = w1.iter().chain(&w2).copied().collect();
    assert_eq!(all.len(), w1.len() + w2.len(), "a row claimed twice: {w1:?} / {w2:?}");
    assert_eq!(all.len(), 60, "every row claimed once");
}

#[tokio::test]
async fn claim_reads_touch_a_few_index_entries_per_room_without_filesort() {
    let db = TestDb::mysql().await;
    // 2,000 delivered rows in 400 rooms (never visited), a room with 5,000 due pending rows, 49
    // rooms with 2 each, a room with 20 not yet due. (With a few rows in every room MariaDB
    // reads the listed rooms' entries in index order instead of seeking room by room: cheaper
    // then, and still no delivered row and no sort.)
    let delivered: Vec<String> = (0..2000)
        .map(|n| format!("('d-{n}', 'old-{}', 'E', '{{}}', 'delivered', 0, NULL, 0, 0, 0)", n % 400))
        .collect();
    db.execute(format!(
        "INSERT INTO room_outbox (event_id, room_id, event_type, envelope, status, retry_count, \
         lock_until_ms, created_at_ms, updated_at_ms, delivered_at_ms) VALUES {}",
        delivered.join(", ")
    ))
    .await;
    for n in 0..10 {
        db.repo.commit_room(&commit("hot", &format!("c-hot-{n}"), n, 500)).await.unwrap();
    }
    for n in 0..49 {
        db.repo.commit_room(&commit(&format!("r{n:02}"), &format!("c-r{n}"), 0, 2)).await.unwrap();
    }
    let mut later = commit("young", "c2", 0, 20);
    later.claim_after = Duration::from_secs(60);
    db.repo.commit_room(&later).await.unwrap();
    db.execute("ANALYZE TABLE room_outbox").await;

    // The listing: a loose index scan, one group read per room, 51 rooms.
    let (plan, analyzed) = explained(&db, &listing("pending", "", 100)).await;
    let shown = format!("{plan:?} / {analyzed}");
    assert_eq!(plan.len(), 1, "one table access: {shown}");
    assert_eq!(plan[0].0.as_deref(), Some("idx_room_outbox_status_room"), "{shown}");
    assert!(plan[0].2.contains("Using index for group-by"), "not a loose index scan: {shown}");
    assert_eq!(r_rows(&analyzed), 51.0, "one entry per room, however many rows it holds: {shown}");

    // A room's rows from its head: a range of the room index, in id order, as many as asked.
    let head = db.scalar("SELECT MIN(id) FROM room_outbox WHERE room_id = 'hot'").await.unwrap();
    let (plan, analyzed) = explained(&db, &room_read("hot", head, 3)).await;
    let shown = format!("{plan:?} / {analyzed}");
    assert_eq!(plan[0].0.as_deref(), Some("idx_room_outbox_room"), "{shown}");
    assert!(!plan[0].2.contains("filesort"), "{shown}");
    assert_eq!(r_rows(&analyzed), 3.0, "{shown}");
}

/// `EXPLAIN` of `sql` as `(key, rows, Extra)` per table access, and its `ANALYZE FORMAT=JSON`.
async fn explained(db: &TestDb, sql: &str) -> (Vec<(Option<String>, u64, String)>, String) {
    let plan: Vec<MySqlRow> =
        sqlx::query(AssertSqlSafe(format!("EXPLAIN {sql}"))).fetch_all(db.mysql_pool()).await.unwrap();
    let plan = plan
        .iter()
        .map(|row| {
            let key: Option<String> = row.try_get("key").unwrap();
            let extra: Option<String> = row.try_get("Extra").unwrap();
            (key, explain_rows(row), extra.unwrap_or_default())
        })
        .collect();
    let analyzed: String = sqlx::query_scalar(AssertSqlSafe(format!("ANALYZE FORMAT=JSON {sql}")))
        .fetch_one(db.mysql_pool())
        .await
        .unwrap();
    (plan, analyzed)
}

/// The `r_rows` (rows actually read) of a one-table `ANALYZE FORMAT=JSON`.
fn r_rows(analyzed: &str) -> f64 {
    let json: serde_json::Value = serde_json::from_str(analyzed).expect("ANALYZE JSON");
    fn find(v: &serde_json::Value) -> Option<f64> {
        match v {
            serde_json::Value::Object(map) => {
                map.get("r_rows").and_then(serde_json::Value::as_f64).or_else(|| map.values().find_map(find))
            }
            serde_json::Value::Array(items) => items.iter().find_map(find),
            _ => None,
        }
    }
    find(&json).expect("r_rows in the plan")
}

fn explain_rows(row: &MySqlRow) -> u64 {
    row.try_get::<Option<u64>, _>("rows")
        .map(Option::unwrap_or_default)
        .or_else(|_| row.try_get::<Option<i64>, _>("rows").map(|n| n.unwrap_or_default() as u64))
        .or_else(|_| row.try_get::<Option<String>, _>("rows").map(|s| s.unwrap_or_default().parse().unwrap()))
        .expect("EXPLAIN rows column")
}

#[tokio::test]
async fn commit_is_not_blocked_by_a_held_claim() {
    let db = TestDb::mysql().await;
    db.repo.commit_room(&commit("r1", "c1", 0, 30)).await.unwrap();
    let ids: Vec<i64> = db.outbox().await.iter().map(|r| r.id).collect();

    // A claimer holds its locks on every row of the room ...
    let mut claimer = db.mysql_pool().begin().await.unwrap();
    for (status, after) in [("pending", ""), ("retryable", ""), ("delivering", "")] {
        select_ids(&mut claimer, &format!("SELECT head FROM ({}) AS g", listing(status, after, 100))).await;
    }
    let head = ids[0];
    select_ids(&mut claimer, &format!("SELECT id FROM ({}) AS r", room_read("r1", head, 100))).await;
    let held = select_ids(&mut claimer, &lock_select(db.now_ms().await + 1, &ids)).await;
    assert_eq!(held.len(), 30);

    // ... while the command path inserts rows before, inside and after that range, and of the
    // same room.
    for (n, room, publish_timeout) in [(2, "r2", 5_000), (3, "r3", 0), (4, "r4", 60_000), (5, "r1", 0)] {
        let expected = if room == "r1" { 1 } else { 0 };
        let mut c = commit(room, &format!("c{n}"), expected, 3);
        c.claim_after = Duration::from_millis(publish_timeout);
        let committed = timeout(Duration::from_secs(3), db.repo.commit_room(&c)).await;
        let committed = committed.unwrap_or_else(|_| panic!("commit blocked by the claim (gap lock?)"));
        committed.unwrap();
    }
    claimer.rollback().await.unwrap();
    assert_eq!(db.count("room_outbox").await, 42);
}

#[tokio::test]
async fn nodes_started_together_on_a_fresh_database_migrate_it_once_and_all_start() {
    let db = TestDb::mysql_with(false).await;
    let mut nodes = Vec::new();
    for _ in 0..4 {
        nodes.push(room_service::store::MySqlRepository::connect(db.url(), 2).await.expect("pool"));
    }
    let barrier = Arc::new(Barrier::new(nodes.len()));
    let runs = nodes.into_iter().map(|repo| {
        let barrier = Arc::clone(&barrier);
        tokio::spawn(async move {
            barrier.wait().await;
            repo.migrate().await
        })
    });
    for (node, run) in futures::future::join_all(runs).await.into_iter().enumerate() {
        run.expect("task").unwrap_or_else(|e| panic!("node {node} failed to migrate: {e}"));
    }
    let applied = db.scalar("SELECT COUNT(*) FROM _sqlx_migrations WHERE success = 1").await.unwrap();
    let files = std::fs::read_dir("migrations/mysql").unwrap().count() as i64;
    assert_eq!(applied, files, "each migration applied once");
}

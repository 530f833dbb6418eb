//! MariaDB-only checks of the claim: disjoint concurrent claims (`FOR UPDATE SKIP LOCKED`),
//! a query plan that touches claimable rows only, and no gap locks blocking the command path
//! (READ COMMITTED).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use room_service::store::Claim;
use sqlx::mysql::MySqlRow;
use sqlx::{AssertSqlSafe, MySqlConnection, Row};
use tokio::sync::Barrier;
use tokio::time::timeout;

use super::commit;
use crate::support::TestDb;

/// The claim SELECT of `src/store/mysql.rs`, with a literal for the database clock.
fn claim_select(now_ms: i64, limit: usize) -> String {
    format!(
        "SELECT id FROM room_outbox FORCE INDEX (idx_room_outbox_claim) WHERE lock_until_ms <= {now_ms} \
         AND status IN ('pending', 'retryable', 'delivering') ORDER BY lock_until_ms, id LIMIT {limit} \
         FOR UPDATE SKIP LOCKED"
    )
}

async fn select_ids(conn: &mut MySqlConnection, sql: &str) -> Vec<i64> {
    sqlx::query_scalar(AssertSqlSafe(sql.to_owned())).fetch_all(conn).await.expect("claim select")
}

#[tokio::test]
async fn concurrent_claimers_get_disjoint_rows() {
    let db = TestDb::mysql().await;
    db.repo.commit_room(&commit("r1", "c1", 0, 20)).await.unwrap();
    let sql = claim_select(db.now_ms().await + 1, 8);

    // Two open transactions at once: the second skips what the first holds, without waiting.
    let mut a = db.mysql_pool().begin().await.unwrap();
    let first = select_ids(&mut a, &sql).await;
    let mut b = db.mysql_pool().begin().await.unwrap();
    let second = timeout(Duration::from_secs(3), select_ids(&mut b, &sql)).await.expect("SKIP LOCKED waited");
    assert_eq!((first.len(), second.len()), (8, 8));
    assert!(first.iter().all(|id| !second.contains(id)), "overlap: {first:?} vs {second:?}");
    a.rollback().await.unwrap();
    b.rollback().await.unwrap();

    // The repository's own claim, from two tasks racing until the outbox is drained.
    db.repo.commit_room(&commit("r2", "c2", 0, 40)).await.unwrap();
    let start = Arc::new(Barrier::new(2));
    let claimers = ["w1", "w2"].map(|worker| {
        let (repo, start) = (db.repo.clone(), start.clone());
        tokio::spawn(async move {
            start.wait().await;
            let mut mine = Vec::new();
            let claim =
                Claim { worker_id: worker.into(), limit: 3, lease: Duration::from_secs(60), scope: None };
            loop {
                let rows = repo.claim_outbox(&claim).await.expect("claim");
                if rows.is_empty() {
                    return mine;
                }
                assert!(rows.iter().all(|r| r.worker_id.as_deref() == Some(worker)));
                mine.extend(rows.iter().map(|r| r.id));
            }
        })
    });
    let [w1, w2] = claimers;
    let (w1, w2) = (w1.await.unwrap(), w2.await.unwrap());
    let all: HashSet<i64> = w1.iter().chain(&w2).copied().collect();
    assert_eq!(all.len(), w1.len() + w2.len(), "a row claimed twice: {w1:?} / {w2:?}");
    assert_eq!(all.len(), 60, "every row claimed once");
}

#[tokio::test]
async fn claim_query_uses_the_claim_index_without_filesort() {
    let db = TestDb::mysql().await;
    // 2,000 delivered rows (lock_until_ms NULL), 50 due pending rows, 20 not yet due.
    let delivered: Vec<String> =
        (0..2000).map(|n| format!("('d-{n}', 'r0', 'E', '{{}}', 'delivered', 0, NULL, 0, 0, 0)")).collect();
    db.execute(format!(
        "INSERT INTO room_outbox (event_id, room_id, event_type, envelope, status, retry_count, \
         lock_until_ms, created_at_ms, updated_at_ms, delivered_at_ms) VALUES {}",
        delivered.join(", ")
    ))
    .await;
    db.repo.commit_room(&commit("r1", "c1", 0, 50)).await.unwrap();
    let mut later = commit("r2", "c2", 0, 20);
    later.publish_timeout = Duration::from_secs(60);
    db.repo.commit_room(&later).await.unwrap();
    db.execute("ANALYZE TABLE room_outbox").await;

    let limit = 50;
    let sql = format!("EXPLAIN {}", claim_select(db.now_ms().await + 1, limit));
    let plan: Vec<MySqlRow> = sqlx::query(AssertSqlSafe(sql)).fetch_all(db.mysql_pool()).await.unwrap();
    assert_eq!(plan.len(), 1, "one table access");
    let row = &plan[0];
    let key: Option<String> = row.try_get("key").unwrap();
    let extra: Option<String> = row.try_get("Extra").unwrap();
    let rows = explain_rows(row);
    let shown = format!("key={key:?} rows={rows} Extra={extra:?}");
    assert_eq!(key.as_deref(), Some("idx_room_outbox_claim"), "{shown}");
    assert!(!extra.unwrap_or_default().contains("filesort"), "{shown}");
    assert!(rows <= 2 * limit as u64 + 5, "examines delivered or undue rows: {shown}");
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

    // A claimer holds its locks (it scanned to the end of the claimable range) ...
    let mut claimer = db.mysql_pool().begin().await.unwrap();
    let held = select_ids(&mut claimer, &claim_select(db.now_ms().await + 1, 100)).await;
    assert_eq!(held.len(), 30);

    // ... while the command path inserts rows before, inside and after that range.
    for (n, publish_timeout) in [(2, 5_000), (3, 0), (4, 60_000)] {
        let mut c = commit(&format!("r{n}"), &format!("c{n}"), 0, 3);
        c.publish_timeout = Duration::from_millis(publish_timeout);
        let committed = timeout(Duration::from_secs(3), db.repo.commit_room(&c)).await;
        let committed = committed.unwrap_or_else(|_| panic!("commit blocked by the claim (gap lock?)"));
        committed.unwrap();
    }
    claimer.rollback().await.unwrap();
    assert_eq!(db.count("room_outbox").await, 39);
}

//! SQLite-only: the claim's inner SELECT walks `idx_room_outbox_claim` in order (no temp
//! B-tree for the ORDER BY), so delivered rows never cost the worker anything.

use sqlx::Row;

use crate::support::TestDb;

#[tokio::test]
async fn claim_query_walks_the_claim_index_in_order() {
    let db = TestDb::sqlite().await;
    // The inner SELECT of the claim in `src/store/sqlite.rs`, with a literal for the clock.
    let sql = "EXPLAIN QUERY PLAN SELECT id FROM room_outbox INDEXED BY idx_room_outbox_claim \
               WHERE lock_until_ms <= 1700000000000 AND status IN ('pending', 'retryable', 'delivering') \
               ORDER BY lock_until_ms, id LIMIT 50";
    let plan: Vec<String> = sqlx::query(sql)
        .fetch_all(db.sqlite_pool())
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<String, _>("detail"))
        .collect();
    let shown = plan.join(" | ");
    assert!(shown.contains("USING INDEX idx_room_outbox_claim (lock_until_ms<?)"), "{shown}");
    assert!(!shown.contains("TEMP B-TREE"), "sorts instead of walking the index: {shown}");
}

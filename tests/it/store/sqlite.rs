//! SQLite-only: the claim's reads walk their indexes (no temp B-tree for an ORDER BY or a
//! GROUP BY), so delivered rows never cost the worker anything.

use sqlx::Row;

use crate::support::TestDb;

async fn plan(db: &TestDb, sql: &str) -> String {
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {sql}")))
        .fetch_all(db.sqlite_pool())
        .await
        .unwrap();
    rows.iter().map(|r| r.get::<String, _>("detail")).collect::<Vec<_>>().join(" | ")
}

#[tokio::test]
async fn claim_reads_walk_their_indexes_in_order() {
    let db = TestDb::sqlite().await;
    // The room listing of `store::queue::claim::sql::claim_rooms` (one status), the room's rows
    // from its head (`room_rows`) and the next claim-after time (`store::queue::sql::
    // next_claimable`), with literals.
    let listing = plan(
        &db,
        "SELECT status, room_id, MIN(id) AS head FROM room_outbox INDEXED BY idx_room_outbox_status_room \
         WHERE status = 'pending' AND room_id > 'r' GROUP BY status, room_id ORDER BY status, room_id LIMIT 64",
    )
    .await;
    assert!(
        listing.contains("USING COVERING INDEX idx_room_outbox_status_room (status=? AND room_id>?)"),
        "{listing}"
    );
    let rows = plan(
        &db,
        "SELECT o.id, o.lock_until_ms FROM room_outbox o INDEXED BY idx_room_outbox_room \
         WHERE o.room_id = 'r' AND o.id >= 7 ORDER BY o.id LIMIT 51",
    )
    .await;
    assert!(rows.contains("USING INDEX idx_room_outbox_room (room_id=? AND id>?)"), "{rows}");
    let next = plan(
        &db,
        "SELECT lock_until_ms - 1700000000000 FROM room_outbox INDEXED BY idx_room_outbox_claim \
         WHERE lock_until_ms > 1700000000000 AND status IN ('pending', 'retryable') ORDER BY lock_until_ms LIMIT 1",
    )
    .await;
    assert!(next.contains("USING INDEX idx_room_outbox_claim (lock_until_ms>?)"), "{next}");
    for shown in [listing, rows, next] {
        assert!(!shown.contains("TEMP B-TREE"), "sorts instead of walking the index: {shown}");
    }
}
